//! Applies an allow-always [`SettingsEdit`] to a settings file: comments, order and formatting
//! are kept (jsonc-parser's concrete syntax tree), the write is atomic (a temporary file in the
//! same directory, renamed over the original), and a file that does not parse is left alone
//! with an explanation. Claude Code's form (a `sandbox` block) is edited inside that block.

use crate::policy::approvals::SettingsEdit;
use jsonc_parser::cst::{CstInputValue, CstNode, CstObject, CstRootNode};
use jsonc_parser::ParseOptions;
use std::io::Write;
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum EditError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} does not parse, so it was not changed (fix it, then allow again): {why}")]
    Unparsable { path: String, why: String },
    #[error("{path}: `{key}` is not an array")]
    NotAList { path: String, key: String },
}

/// Applies `edit` to the file at `path` (created if missing).
pub fn apply(path: &Path, edit: &SettingsEdit) -> Result<(), EditError> {
    let shown = path.display().to_string();
    let io = |source| EditError::Io {
        path: shown.clone(),
        source,
    };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => "{}\n".to_string(),
        Err(e) => return Err(io(e)),
    };
    let updated = apply_to_text(&text, edit).map_err(|e| match e {
        TextError::Unparsable(why) => EditError::Unparsable {
            path: shown.clone(),
            why,
        },
        TextError::NotAList(key) => EditError::NotAList {
            path: shown.clone(),
            key,
        },
    })?;
    if updated == text {
        return Ok(());
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
    tmp.write_all(updated.as_bytes()).map_err(io)?;
    tmp.as_file().sync_all().map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TextError {
    Unparsable(String),
    NotAList(String),
}

/// The edit applied to settings text.
pub(crate) fn apply_to_text(text: &str, edit: &SettingsEdit) -> Result<String, TextError> {
    let root = CstRootNode::parse(text, &ParseOptions::default())
        .map_err(|e| TextError::Unparsable(e.to_string()))?;
    let Some(top) = root.object_value_or_create() else {
        return Err(TextError::Unparsable(
            "the top level is not an object".to_string(),
        ));
    };
    // Claude Code's settings keep the sandbox settings in a `sandbox` block.
    let base = match top.object_value("sandbox") {
        Some(block) => block,
        None => top,
    };
    let (key, value, append) = match edit {
        SettingsEdit::Append { key, value, .. } => (key, value, true),
        SettingsEdit::Remove { key, value, .. } => (key, value, false),
    };
    let mut parts: Vec<&str> = key.split('.').collect();
    let Some(last) = parts.pop() else {
        return Err(TextError::NotAList(key.clone()));
    };
    let mut obj: CstObject = base;
    for part in parts {
        obj = match obj.object_value_or_create(part) {
            Some(o) => o,
            None => return Err(TextError::NotAList(key.clone())),
        };
    }
    let present = |arr: &jsonc_parser::cst::CstArray| -> Option<CstNode> {
        arr.elements().into_iter().find(|el| {
            el.as_string_lit()
                .and_then(|s| s.decoded_value().ok())
                .is_some_and(|s| s == *value)
        })
    };
    if append {
        let arr = obj
            .array_value_or_create(last)
            .ok_or_else(|| TextError::NotAList(key.clone()))?;
        if present(&arr).is_none() {
            arr.append(CstInputValue::String(value.clone()));
        }
    } else if let Some(arr) = obj.array_value(last) {
        if let Some(el) = present(&arr) {
            el.remove();
        }
    }
    Ok(root.to_string())
}
