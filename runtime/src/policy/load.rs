//! Reading settings files: JSON with comments and trailing commas, in srt's form (the sandbox
//! block at the top level) or Claude Code's (under `sandbox`). Errors name the file, the key
//! path and line:column, and suggest the nearest valid key. An invalid file is an error, never
//! a weaker policy.
//!
//! Comments and trailing commas are found by jsonc-parser's tokenizer and blanked out with
//! spaces, so the strict serde_json pass that follows reports positions in the original text.

use super::settings::{SandboxSettings, WardenSettings};
use jsonc_parser::{
    parse_to_ast, tokens::Token, CollectOptions, CommentCollectionStrategy, ParseOptions,
};
use serde::Deserialize;
use std::fmt;
use std::path::{Path, PathBuf};

/// Which shape the file had.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Form {
    /// srt: the sandbox block is the whole file.
    Srt,
    /// Claude Code: the sandbox block is under `sandbox`; other top-level keys belong to Claude.
    ClaudeCode,
}

/// One parsed settings file.
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedSettings {
    pub settings: SandboxSettings,
    pub form: Form,
}

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("{path}: cannot read settings: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(Box<InvalidSettings>),
}

/// A settings file that does not parse or does not match the schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidSettings {
    pub origin: String,
    pub line: usize,
    pub column: usize,
    /// Dotted key path, e.g. `filesystem.allowWrite[2]`; empty for the top level.
    pub key_path: String,
    pub message: String,
    pub suggestion: Option<String>,
}

impl fmt::Display for InvalidSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.origin, self.line, self.column)?;
        if !self.key_path.is_empty() {
            write!(f, "`{}`: ", self.key_path)?;
        }
        f.write_str(&self.message)?;
        if let Some(s) = &self.suggestion {
            write!(f, "; did you mean `{s}`?")?;
        }
        Ok(())
    }
}

fn invalid(
    origin: &str,
    line: usize,
    column: usize,
    key_path: String,
    message: String,
    suggestion: Option<String>,
) -> SettingsError {
    SettingsError::Invalid(Box::new(InvalidSettings {
        origin: origin.to_string(),
        line,
        column,
        key_path,
        message,
        suggestion,
    }))
}

/// Reads and parses one settings file.
pub fn load_file(path: &Path) -> Result<ParsedSettings, SettingsError> {
    let io = |source| SettingsError::Io {
        path: path.display().to_string(),
        source,
    };
    // A regular file of bounded size, read without blocking: a project's settings can be a
    // symlink its repository ships (to /dev/zero, to a FIFO).
    let bytes = super::fsview::read_regular_file(path, MAX_SETTINGS_BYTES).map_err(io)?;
    let text = String::from_utf8(bytes)
        .map_err(|_| io(std::io::Error::other("stream did not contain valid UTF-8")))?;
    parse_settings(&text, &path.display().to_string())
}

/// The largest settings file read (4 MiB: a managed file with tens of thousands of entries).
pub const MAX_SETTINGS_BYTES: u64 = 4 << 20;

/// Reads a settings file if it exists (`Ok(None)` when it does not).
pub fn load_optional(path: &Path) -> Result<Option<ParsedSettings>, SettingsError> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        _ => load_file(path).map(Some),
    }
}

/// Parses settings text. `origin` names the source in error messages.
pub fn parse_settings(text: &str, origin: &str) -> Result<ParsedSettings, SettingsError> {
    let clean = strip_jsonc(text, origin)?;
    if clean.trim().is_empty() {
        return Ok(ParsedSettings {
            settings: SandboxSettings::default(),
            form: Form::Srt,
        });
    }
    // Which form? Only the top-level keys matter; positions come from the typed pass below.
    let top: serde_json::Value = serde_json::from_str(&clean).map_err(|e| {
        invalid(
            origin,
            e.line(),
            e.column(),
            String::new(),
            strip_pos(&e),
            None,
        )
    })?;
    let Some(obj) = top.as_object() else {
        return Err(invalid(
            origin,
            1,
            1,
            String::new(),
            "settings must be a JSON object".to_string(),
            None,
        ));
    };
    if obj.contains_key("sandbox") {
        // Claude Code's settings.json: srt keys beside `sandbox` would be silently ignored,
        // and an ignored deny list is a weaker policy, so refuse them.
        if let Some(key) = obj
            .keys()
            .find(|k| *k != "sandbox" && *k != "warden" && sandbox_keys().contains(&k.as_str()))
        {
            let (line, column) = key_position(&clean, key);
            return Err(invalid(
                origin,
                line,
                column,
                key.clone(),
                format!(
                    "`{key}` beside a `sandbox` block would be ignored; move it into `sandbox`"
                ),
                Some(format!("sandbox.{key}")),
            ));
        }
        let file: ClaudeFile = typed(&clean, origin)?;
        let mut settings = file.sandbox;
        if let Some(w) = file.warden {
            if settings.warden.is_some() {
                let (line, column) = key_position(&clean, "warden");
                return Err(invalid(
                    origin,
                    line,
                    column,
                    "warden".to_string(),
                    "`warden` appears both at the top level and under `sandbox`; keep one"
                        .to_string(),
                    None,
                ));
            }
            settings.warden = Some(w);
        }
        Ok(ParsedSettings {
            settings,
            form: Form::ClaudeCode,
        })
    } else {
        Ok(ParsedSettings {
            settings: typed(&clean, origin)?,
            form: Form::Srt,
        })
    }
}

#[derive(Deserialize)]
struct ClaudeFile {
    sandbox: SandboxSettings,
    #[serde(default)]
    warden: Option<WardenSettings>,
}

fn typed<T: serde::de::DeserializeOwned>(clean: &str, origin: &str) -> Result<T, SettingsError> {
    let mut de = serde_json::Deserializer::from_str(clean);
    let result: Result<T, _> = serde_path_to_error::deserialize(&mut de);
    match result {
        Ok(v) => Ok(v),
        Err(err) => {
            let inner = err.inner();
            let (line, column) = (inner.line(), inner.column());
            let path = display_path(err.path());
            let message = strip_pos(inner);
            if let Some((unknown, expected)) = parse_unknown_field(&message) {
                let suggestion = suggest(&unknown, &expected);
                // serde reports the end of the key; point at its opening quote instead.
                let column = column.saturating_sub(unknown.chars().count() + 1).max(1);
                return Err(invalid(
                    origin,
                    line,
                    column,
                    path,
                    "unknown key".to_string(),
                    suggestion,
                ));
            }
            Err(invalid(origin, line, column, path, message, None))
        }
    }
}

/// serde_path_to_error's path with the `?`/`.` placeholders cleaned up.
fn display_path(path: &serde_path_to_error::Path) -> String {
    let s = path.to_string();
    if s == "." {
        String::new()
    } else {
        s
    }
}

fn join_path(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

/// serde_json's message without its trailing " at line L column C".
fn strip_pos(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.rfind(" at line ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// Splits serde's "unknown field `x`, expected one of `a`, `b`" (or "expected `a`", or
/// "there are no fields") into the unknown name and the valid ones.
fn parse_unknown_field(message: &str) -> Option<(String, Vec<String>)> {
    let rest = message.strip_prefix("unknown field `")?;
    let end = rest.find('`')?;
    let unknown = rest[..end].to_string();
    let expected = rest[end + 1..]
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    Some((unknown, expected))
}

/// The nearest valid key: a sibling differing only in case, the same key elsewhere in the
/// schema (`allowWrite` at the top level → `filesystem.allowWrite`), or a sibling spelled alike.
fn suggest(unknown: &str, siblings: &[String]) -> Option<String> {
    let lower = unknown.to_ascii_lowercase();
    if let Some(s) = siblings.iter().find(|s| s.to_ascii_lowercase() == lower) {
        return Some(s.clone());
    }
    let elsewhere = schema_key_paths().iter().find(|p| {
        p.rsplit('.')
            .next()
            .is_some_and(|last| last.eq_ignore_ascii_case(unknown))
    });
    if let Some(p) = elsewhere {
        return Some(p.clone());
    }
    siblings
        .iter()
        .map(|s| (strsim::jaro_winkler(&lower, &s.to_ascii_lowercase()), s))
        .filter(|(score, _)| *score >= 0.85)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, s)| s.clone())
}

/// Every dotted key path of the schema, from the generated JSON Schema.
fn schema_key_paths() -> &'static [String] {
    static PATHS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    PATHS.get_or_init(|| {
        let schema = serde_json::to_value(schemars::schema_for!(SandboxSettings))
            .unwrap_or(serde_json::Value::Null);
        let mut out = Vec::new();
        collect_paths(&schema, &schema, "", &mut out, 0);
        out
    })
}

fn sandbox_keys() -> &'static [&'static str] {
    &[
        "enabled",
        "failIfUnavailable",
        "allowUnsandboxedCommands",
        "autoAllowBashIfSandboxed",
        "excludedCommands",
        "mode",
        "network",
        "filesystem",
        "ignoreViolations",
        "enableWeakerNestedSandbox",
        "enableWeakerNetworkIsolation",
        "mandatoryDenySearchDepth",
        "allowPty",
        "bwrapPath",
        "socatPath",
    ]
}

fn collect_paths(
    root: &serde_json::Value,
    node: &serde_json::Value,
    prefix: &str,
    out: &mut Vec<String>,
    depth: usize,
) {
    if depth > 8 {
        return;
    }
    let node = deref(root, node);
    // Option<T> appears as anyOf/oneOf [T, null] or as `type: [.., "null"]` with $ref.
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(arr) = node.get(key).and_then(|v| v.as_array()) {
            for sub in arr {
                collect_paths(root, sub, prefix, out, depth + 1);
            }
        }
    }
    if let Some(props) = node.get("properties").and_then(|p| p.as_object()) {
        for (k, v) in props {
            let path = join_path(prefix, k);
            out.push(path.clone());
            collect_paths(root, v, &path, out, depth + 1);
        }
    }
}

fn deref<'a>(root: &'a serde_json::Value, node: &'a serde_json::Value) -> &'a serde_json::Value {
    match node.get("$ref").and_then(|r| r.as_str()) {
        Some(r) => r
            .strip_prefix("#/")
            .map(|p| {
                p.split('/').fold(root, |v, seg| {
                    v.get(seg).unwrap_or(&serde_json::Value::Null)
                })
            })
            .unwrap_or(node),
        None => node,
    }
}

/// 1-based line and column of the first occurrence of `"key"` as an object key.
fn key_position(text: &str, key: &str) -> (usize, usize) {
    let needle = format!("\"{key}\"");
    let offset = text.find(&needle).unwrap_or(0);
    line_col(text, offset)
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rfind('\n')
        .map_or(before.len(), |i| before.len() - i - 1)
        + 1;
    (line, column)
}

/// Replaces comments and trailing commas with spaces (newlines kept), so strict JSON remains
/// and every byte keeps its line and column. Any other JSON5 looseness is a syntax error.
fn strip_jsonc(text: &str, origin: &str) -> Result<String, SettingsError> {
    let options = ParseOptions {
        allow_comments: true,
        allow_trailing_commas: true,
        allow_loose_object_property_names: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    };
    let collect = CollectOptions {
        comments: CommentCollectionStrategy::AsTokens,
        tokens: true,
    };
    let parsed = parse_to_ast(text, &collect, &options).map_err(|e| {
        invalid(
            origin,
            e.line_display(),
            e.column_display(),
            String::new(),
            format!("invalid JSON: {}", e.kind()),
            None,
        )
    })?;
    let tokens = parsed.tokens.unwrap_or_default();
    let mut bytes = text.as_bytes().to_vec();
    let mut blank = |start: usize, end: usize| {
        for b in &mut bytes[start..end] {
            if *b != b'\n' && *b != b'\r' {
                *b = b' ';
            }
        }
    };
    let significant: Vec<_> = tokens
        .iter()
        .filter(|t| !matches!(t.token, Token::CommentLine(_) | Token::CommentBlock(_)))
        .collect();
    for t in &tokens {
        if matches!(t.token, Token::CommentLine(_) | Token::CommentBlock(_)) {
            blank(t.range.start, t.range.end);
        }
    }
    for pair in significant.windows(2) {
        if matches!(pair[0].token, Token::Comma)
            && matches!(pair[1].token, Token::CloseBrace | Token::CloseBracket)
        {
            blank(pair[0].range.start, pair[0].range.end);
        }
    }
    // Blanking replaces whole UTF-8 sequences inside comments byte by byte with ASCII spaces,
    // so the result is valid UTF-8.
    String::from_utf8(bytes).map_err(|_| {
        invalid(
            origin,
            1,
            1,
            String::new(),
            "invalid UTF-8".to_string(),
            None,
        )
    })
}

/// The default paths of the settings layers.
#[derive(Clone, Debug)]
pub struct LayerPaths {
    pub user: PathBuf,
    pub project: PathBuf,
    pub managed: PathBuf,
}

/// Env var that overrides the managed settings path (for tests and packaged installs).
pub const MANAGED_ENV: &str = "WARDEN_MANAGED_SETTINGS";
pub const DEFAULT_MANAGED: &str = "/etc/warden/managed-settings.json";

impl LayerPaths {
    /// `$XDG_CONFIG_HOME/warden/settings.json` (or `~/.config/...`), `.warden/settings.json` in
    /// the working directory, and the managed file.
    pub fn discover(home: &Path, cwd: &Path, env: &dyn Fn(&str) -> Option<String>) -> Self {
        let config = env("XDG_CONFIG_HOME")
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| home.join(".config"));
        LayerPaths {
            user: config.join("warden").join("settings.json"),
            project: cwd.join(".warden").join("settings.json"),
            managed: env(MANAGED_ENV)
                .filter(|s| !s.is_empty())
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(DEFAULT_MANAGED)),
        }
    }
}

#[cfg(test)]
#[path = "load_tests.rs"]
mod tests;
