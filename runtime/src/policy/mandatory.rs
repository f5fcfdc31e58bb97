//! Mandatory write protections: files whose modification lets a sandboxed command run code
//! outside the sandbox later (shell rc files, git hooks and config, agent and editor config,
//! warden's own project settings). They hold by name anywhere, also for paths that do not exist
//! yet, and cannot be approved away; only `.git/config` can be released with `allowGitConfig`.
//!
//! A worktree's `.git` is a file (`gitdir: …`); its real git dir and the common dir it shares
//! are found through the injected [`FsView`] and protected as absolute paths.

use super::fsview::{is_under, FileKind, FsView};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// File names protected wherever they appear.
pub const PROTECTED_FILES: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".zshrc",
    ".zprofile",
    ".zshenv",
    ".zlogin",
    ".profile",
    ".gitconfig",
    ".gitmodules",
    ".ripgreprc",
    ".mcp.json",
    // opencode's project config (`mcp` servers, commands); red-team round 20.
    "opencode.json",
    // Red-team round 21: the same in other spellings and tools — opencode's and its fork
    // Kilo Code's (`mcp` commands), a dev container at the root (`initializeCommand` runs on
    // the host), aider's (`lint-cmd` runs after every edit), Crush's (`mcp`, `lsp`
    // commands), and the configs git hook managers run on the host's `git commit`
    // (pre-commit's `repo: local` hooks, lefthook's commands, husky 4's).
    "opencode.jsonc",
    "kilo.json",
    "kilo.jsonc",
    ".devcontainer.json",
    ".aider.conf.yml",
    "crush.json",
    ".crush.json",
    ".pre-commit-config.yaml",
    "lefthook.yml",
    ".lefthook.yml",
    "lefthook.yaml",
    ".lefthook.yaml",
    "lefthook-local.yml",
    ".lefthook-local.yml",
    ".huskyrc",
    ".huskyrc.json",
    ".huskyrc.js",
    // Red-team round 22: lefthook reads its main config and the `-local` one merged over it
    // as YAML, TOML or JSON(C), dotted or not; husky 4 its rc in every cosmiconfig spelling.
    "lefthook.toml",
    "lefthook.json",
    "lefthook.jsonc",
    ".lefthook.toml",
    ".lefthook.json",
    ".lefthook.jsonc",
    "lefthook-local.yaml",
    "lefthook-local.toml",
    "lefthook-local.json",
    "lefthook-local.jsonc",
    ".lefthook-local.yaml",
    ".lefthook-local.toml",
    ".lefthook-local.json",
    ".lefthook-local.jsonc",
    ".huskyrc.yaml",
    ".huskyrc.yml",
    ".huskyrc.cjs",
    "husky.config.js",
    "husky.config.cjs",
];

/// Directory names protected with everything below them.
pub const PROTECTED_DIRS: &[&str] = &[
    ".ssh",
    ".claude",
    ".codex",
    ".cursor",
    ".vscode",
    ".idea",
    ".warden",
    "LaunchAgents",
    // Other agents' and editors' project config that runs commands when the tool opens the
    // project: MCP servers (Gemini CLI, Kiro, Roo, Amazon Q, Continue, Windsurf), language
    // servers (Zed, Helix), a dev container's `initializeCommand` (run on the host); red-team
    // round 20.
    ".gemini",
    ".zed",
    ".helix",
    ".kiro",
    ".roo",
    ".amazonq",
    ".continue",
    ".windsurf",
    ".devcontainer",
    // Red-team round 21: opencode's plugins (JavaScript loaded at start-up) and config, Kilo
    // Code's, Qwen Code's (`mcpServers`).
    ".opencode",
    ".kilo",
    ".kilocode",
    ".qwen",
    // Red-team round 22: Factory's Droid (`settings.json` hooks, `mcp.json`) and Cline's
    // workspace hooks (`.clinerules/hooks/PreToolUse`, run by the extension).
    ".factory",
    ".clinerules",
];

/// Whether `dir` is a git dir as git itself decides: `HEAD`, `objects/` and `refs/` (a
/// `.git` directory, a bare repository, a submodule's or worktree's git dir).
pub fn is_git_dir(fs: &dyn FsView, dir: &Path) -> bool {
    fs.kind(&dir.join("HEAD")) == Some(FileKind::File)
        && fs.kind(&dir.join("objects")) == Some(FileKind::Dir)
        && fs.kind(&dir.join("refs")) == Some(FileKind::Dir)
}

/// The git dirs not named `.git` (bare repositories, `.git/modules/NAME`) that `root` is or
/// lies in; `.git` directories are recognised by name anyway.
pub fn enclosing_git_dirs(fs: &dyn FsView, root: &Path) -> Vec<PathBuf> {
    root.ancestors()
        .filter(|d| d.file_name().is_some_and(|n| n != ".git") && is_git_dir(fs, d))
        .map(Path::to_path_buf)
        .collect()
}

/// Where warden keeps empty placeholders between runs, relative to the home directory
/// (`linux::placeholder`'s pool): protected like warden's settings, since a sandbox that could
/// fill an entry or keep a writable descriptor to one would plant a protected directory's
/// contents in the next project that takes it.
pub const PLACEHOLDER_POOL: &str = ".cache/warden/placeholders";
/// How the pool is named among the protected configuration paths (the Linux plan finds it
/// there).
pub const PLACEHOLDER_POOL_WHAT: &str = "warden placeholder pool";

/// Files in the home directory, beyond the names protected everywhere, that programs the user
/// runs on the host read as code: shell aliases and readline bindings, editor and terminal
/// start-up files, session environments, Claude Code's user config (`mcpServers` commands),
/// npm's (`script-shell`, `node-options`) and cargo's (`runner`, `linker`).
pub const HOME_STARTUP_FILES: &[&str] = &[
    ".bash_aliases",
    ".inputrc",
    ".zlogout",
    ".claude.json",
    ".vimrc",
    ".gvimrc",
    ".exrc",
    ".emacs",
    ".tmux.conf",
    ".pam_environment",
    ".xprofile",
    ".xsessionrc",
    ".xinitrc",
    ".npmrc",
    ".cargo/config",
    ".cargo/config.toml",
    ".gdbinit",
    ".lldbinit",
    ".Rprofile",
    ".irbrc",
    ".pryrc",
    ".terraformrc",
    // yarn's `yarnPath` runs a file it names; Mercurial hooks; psql's `\!`; terminal and
    // prompt configs that run commands (red-team round 12).
    ".yarnrc",
    ".yarnrc.yml",
    ".hgrc",
    ".psqlrc",
    ".wezterm.lua",
    ".config/starship.toml",
    // Run at X login; bun's `preload`; sqlite's `.shell`; mongosh's JavaScript; GHCi and
    // Octave start-up code (red-team round 20).
    ".xsession",
    ".bunfig.toml",
    ".sqliterc",
    ".mongoshrc.js",
    ".ghci",
    ".octaverc",
    // less reads `~/.lesskey` (text) or `~/.less` (binary): its `#env` section sets
    // `LESSOPEN`, a program less runs on every file it pages, git's pager included;
    // bash-completion sources `~/.bash_completion`; screen's and the MySQL client's
    // start-up files run commands (red-team round 22).
    ".lesskey",
    ".less",
    ".config/lesskey",
    ".bash_completion",
    ".screenrc",
    ".my.cnf",
];

/// Directories in the home directory whose contents run on the host: on `PATH` (`.local/bin`,
/// `.cargo/bin`), sourced by shells (`.bashrc.d`, `.oh-my-zsh`, fish's config), started by
/// the session (`autostart`, systemd user units, `environment.d`), editor plugins, Python's
/// user site-packages, and tools' configs that name programs to run.
pub const HOME_STARTUP_DIRS: &[&str] = &[
    ".local/bin",
    ".cargo/bin",
    ".bashrc.d",
    ".oh-my-zsh",
    ".config/fish",
    ".config/autostart",
    ".config/systemd",
    ".config/environment.d",
    ".vim",
    ".config/nvim",
    ".emacs.d",
    // Python's `.pth` files in user site-packages run on every interpreter start.
    ".local/lib",
    ".config/tmux",
    ".config/gdb",
    ".config/direnv",
    ".config/Code",
    ".ipython",
    // Tools' configs that name programs to run: `credential_process`, kubeconfig `exec`
    // plugins, docker credential helpers, gpg-agent's `pinentry-program`.
    ".aws",
    ".kube",
    ".docker",
    ".gnupg",
    // Version managers whose shims and installs are on PATH or sourced by the shell
    // (`~/.pyenv/shims/python3`, `~/.nvm/nvm.sh`, rustup's toolchains behind its proxies),
    // and other directories of programs the host runs.
    ".pyenv",
    ".nvm",
    ".rbenv",
    ".sdkman",
    ".volta",
    ".rustup",
    "go/bin",
    ".bun/bin",
    ".deno/bin",
    ".gradle/init.d",
    ".config/gh",
    ".config/Cursor",
    ".config/VSCodium",
    // sbt's global plugins and settings, Julia's `startup.jl`, Jupyter's `*_config.py`, Gemini
    // CLI's user settings (MCP servers), and the XDG configs of opencode, Zed and Helix
    // (red-team round 20).
    ".sbt",
    ".julia/config",
    ".jupyter",
    ".gemini",
    ".config/opencode",
    // Red-team round 22: bash-completion's per-command files, husky 9's `init.sh` (sourced
    // before every hook), the XDG places of vim (9.1+), emacs and neovim's plugins, terminal
    // configs that run programs, other agents' and version managers' user configs, zsh's.
    ".local/share/bash-completion",
    ".config/husky",
    ".config/vim",
    ".config/emacs",
    ".local/share/nvim",
    ".config/wezterm",
    ".config/kitty",
    ".config/alacritty",
    ".config/ghostty",
    ".config/crush",
    ".config/amp",
    ".config/goose",
    ".config/mise",
    ".zsh",
    ".factory",
    ".config/zed",
    ".config/helix",
];

/// What a protection hit is, for reasons and rule references.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hit {
    /// The protection as written in docs, e.g. `.git/hooks/**`.
    pub entry: String,
}

/// A configuration file or directory protected by its absolute path: warden's own settings
/// files and the user's git configuration directory, which would let a command widen every
/// later sandbox or run code outside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigPath {
    pub path: PathBuf,
    /// A directory (protected with everything below it), or a file.
    pub dir: bool,
    /// What it is, for reasons: "warden user settings", ...
    pub what: &'static str,
}

#[derive(Clone, Debug, Default)]
pub struct Mandatory {
    pub allow_git_config: bool,
    /// Absolute git dirs found through `.git` files (worktrees, `--separate-git-dir`).
    pub extra_git_dirs: Vec<PathBuf>,
    /// Configuration protected by absolute path (from the [`super::merge::Context`]).
    pub config: Vec<ConfigPath>,
}

impl Mandatory {
    /// Builds the protections for a working directory, following a `.git` file in it or in
    /// any ancestor to the real git dir and its common dir.
    pub fn discover(
        fs: &dyn FsView,
        cwd: &Path,
        home: Option<&Path>,
        allow_git_config: bool,
        config: Vec<ConfigPath>,
    ) -> Self {
        let mut extra = Vec::new();
        let mut config = config;
        for dir in cwd.ancestors() {
            let dotgit = dir.join(".git");
            match fs.kind(&dotgit) {
                Some(FileKind::File) => {
                    if let Some(gitdir) = read_gitdir(fs, &dotgit, dir) {
                        if let Some(common) = read_commondir(fs, &gitdir) {
                            config.extend(config_named_paths(fs, &common, dir, home));
                            extra.push(common);
                        }
                        config.extend(config_named_paths(fs, &gitdir, dir, home));
                        extra.push(gitdir);
                    }
                    break;
                }
                Some(_) => {
                    config.extend(config_named_paths(fs, &dotgit, dir, home));
                    break;
                }
                None => {}
            }
        }
        extra.dedup();
        Mandatory {
            allow_git_config,
            extra_git_dirs: extra,
            config,
        }
    }

    /// The protection `path` (absolute, normalised) falls under, if any.
    pub fn check(&self, path: &Path) -> Option<Hit> {
        let bytes = path.as_os_str().as_bytes();
        for c in &self.config {
            let p = c.path.as_os_str().as_bytes();
            if bytes == p || (c.dir && is_under(bytes, p)) {
                return Some(Hit {
                    entry: format!(
                        "{}{} ({})",
                        c.path.display(),
                        if c.dir { "/**" } else { "" },
                        c.what
                    ),
                });
            }
        }
        let comps: Vec<&[u8]> = bytes
            .split(|b| *b == b'/')
            .filter(|c| !c.is_empty())
            .collect();
        for (i, comp) in comps.iter().enumerate() {
            let comp = *comp;
            if let Some(name) = PROTECTED_FILES.iter().find(|n| n.as_bytes() == comp) {
                return Some(Hit {
                    entry: (*name).to_string(),
                });
            }
            if let Some(name) = PROTECTED_DIRS.iter().find(|n| n.as_bytes() == comp) {
                return Some(Hit {
                    entry: format!("{name}/**"),
                });
            }
            if comp == b".git" {
                if let Some(hit) = self.inside_git_dir(&comps[i + 1..]) {
                    return Some(hit);
                }
            }
        }
        for gitdir in &self.extra_git_dirs {
            let g = gitdir.as_os_str().as_bytes();
            if is_under(bytes, g) && bytes.len() > g.len() {
                let rest = &bytes[g.len() + 1..];
                let first = rest.split(|b| *b == b'/').next().unwrap_or_default();
                let prefix = format!("{}/", gitdir.display());
                if let Some(hit) = self.git_dir_entry(first, &prefix) {
                    return Some(hit);
                }
            }
        }
        None
    }

    /// [`Mandatory::check`], plus git dirs found by looking: a component named like a git
    /// dir's protected entries (`hooks`, `config`, …) whose parent is a git dir as git decides
    /// ([`is_git_dir`]) — a bare repository or a git dir not named `.git` anywhere, such as
    /// `remote.git` inside the project. A few lstats, and only for such names.
    pub fn check_with(&self, fs: &dyn FsView, path: &Path) -> Option<Hit> {
        if let Some(hit) = self.check(path) {
            return Some(hit);
        }
        let bytes = path.as_os_str().as_bytes();
        let mut end = 0;
        for comp in bytes.split(|b| *b == b'/') {
            let start = end;
            end += comp.len() + 1;
            if start <= 1
                || !matches!(
                    comp,
                    b"hooks" | b"config" | b"config.worktree" | b"commondir" | b"gitdir"
                )
            {
                continue;
            }
            let dir = Path::new(std::ffi::OsStr::from_bytes(&bytes[..start - 1]));
            if is_git_dir(fs, dir) {
                if let Some(hit) = self.git_dir_entry(comp, &format!("{}/", dir.display())) {
                    return Some(hit);
                }
            }
        }
        None
    }

    /// The protection for `rest`, the components below a `.git` directory: its hooks and
    /// config; the same in the git dirs of submodules (`modules/<name>/…`, where a name may
    /// have several components and modules nest, so any `hooks` directory and any final
    /// `config` below `modules/`); and the pointers of linked worktrees
    /// (`worktrees/<name>/commondir`, `gitdir`, `config.worktree`), which say where a
    /// worktree's git dir and so its hooks and config are.
    fn inside_git_dir(&self, rest: &[&[u8]]) -> Option<Hit> {
        let first = rest.first()?;
        if let Some(hit) = self.git_dir_entry(first, ".git/") {
            return Some(hit);
        }
        match *first {
            b"modules" => {
                let below = &rest[1..];
                if let Some(i) = below.iter().position(|c| *c == b"hooks") {
                    if i > 0 {
                        return Some(Hit {
                            entry: ".git/modules/**/hooks/**".to_string(),
                        });
                    }
                }
                match below.last() {
                    Some(last)
                        if below.len() > 1
                            && (*last == b"config" || *last == b"config.worktree")
                            && !self.allow_git_config =>
                    {
                        Some(Hit {
                            entry: ".git/modules/**/config (allowGitConfig is off)".to_string(),
                        })
                    }
                    Some(last)
                        if below.len() > 1 && (*last == b"commondir" || *last == b"gitdir") =>
                    {
                        Some(Hit {
                            entry: format!(".git/modules/**/{}", String::from_utf8_lossy(last)),
                        })
                    }
                    _ => None,
                }
            }
            b"worktrees" => match rest {
                [_, _, name] => self.git_dir_entry(name, ".git/worktrees/*/"),
                _ => None,
            },
            _ => None,
        }
    }

    /// The protection for the entry `comp` directly inside a git dir.
    fn git_dir_entry(&self, comp: &[u8], prefix: &str) -> Option<Hit> {
        match comp {
            b"hooks" => Some(Hit {
                entry: format!("{prefix}hooks/**"),
            }),
            // A linked worktree's pointers to its git dir and the common dir.
            b"commondir" | b"gitdir" => Some(Hit {
                entry: format!("{prefix}{}", String::from_utf8_lossy(comp)),
            }),
            b"config" | b"config.worktree" if !self.allow_git_config => Some(Hit {
                entry: format!(
                    "{prefix}{} (allowGitConfig is off)",
                    String::from_utf8_lossy(comp)
                ),
            }),
            _ => None,
        }
    }

    /// Every protection, for `warden explain` and `settings show`.
    pub fn describe(&self) -> Vec<String> {
        let mut out: Vec<String> = PROTECTED_FILES.iter().map(|s| s.to_string()).collect();
        out.extend(PROTECTED_DIRS.iter().map(|s| format!("{s}/**")));
        out.push(".git/hooks/**".to_string());
        if !self.allow_git_config {
            out.push(".git/config".to_string());
        }
        out.push(".git/modules/**/hooks/**".to_string());
        if !self.allow_git_config {
            out.push(".git/modules/**/config".to_string());
        }
        out.push(".git/worktrees/*/{commondir,gitdir,config.worktree}".to_string());
        for g in &self.extra_git_dirs {
            out.push(format!("{}/hooks/**", g.display()));
            if !self.allow_git_config {
                out.push(format!("{}/config", g.display()));
            }
        }
        for c in &self.config {
            out.push(format!(
                "{}{} ({})",
                c.path.display(),
                if c.dir { "/**" } else { "" },
                c.what
            ));
        }
        out
    }
}

/// What the git config of `gitdir` (a repository whose worktree is `worktree`) names outside
/// the git dir that decides what runs: `core.hooksPath` (a hooks directory, relative to the
/// worktree) and `include.path` / `includeIf.*.path` (more config, relative to the file that
/// includes it, followed in turn). A sandbox that could write them would get its hooks or
/// config run by the host's git. The config itself is protected, so what it names cannot
/// change during a run.
///
/// `~` in them is the user's `home` (red-team round 22: a repository's `core.hooksPath =
/// ~/project/hooks` or `include.path = ~/project/extra.cfg` was left writable), `~NAME` that
/// user's home from `/etc/passwd`.
pub fn config_named_paths(
    fs: &dyn FsView,
    gitdir: &Path,
    worktree: &Path,
    home: Option<&Path>,
) -> Vec<ConfigPath> {
    let mut out = Vec::new();
    config_file_paths(
        fs,
        &gitdir.join("config"),
        Some(worktree),
        home,
        0,
        &mut out,
    );
    out
}

/// A config path starting with `~` as git expands it (`expand_user_path`): `~` and `~/…` in
/// `home`, `~NAME` and `~NAME/…` in that user's home directory (`/etc/passwd`). `None`: not
/// such a path, or one that cannot be expanded.
fn expand_tilde(fs: &dyn FsView, value: &str, home: Option<&Path>) -> Option<PathBuf> {
    let rest = value.strip_prefix('~')?;
    let (user, tail) = rest.split_once('/').unwrap_or((rest, ""));
    // `~//x` is `$HOME//x` to git: the tail stays below the home (round 22b found `/x`
    // protected instead).
    let tail = tail.trim_start_matches('/');
    let base = if user.is_empty() {
        home?.to_path_buf()
    } else {
        let passwd = fs.read_to_string(Path::new("/etc/passwd"))?;
        let dir = passwd.lines().find_map(|l| {
            let fields: Vec<&str> = l.split(':').collect();
            (fields.len() >= 7 && fields[0] == user).then(|| fields[5].to_string())
        })?;
        PathBuf::from(dir)
    };
    Some(if tail.is_empty() {
        base
    } else {
        super::fsview::lexical(&base, Path::new(tail))
    })
}

/// Levels of `include.path` followed.
const INCLUDE_DEPTH: usize = 5;

/// [`config_named_paths`] for one config file: relative `core.hooksPath` against
/// `worktree` (skipped without one: the user's global config applies to every repository),
/// `~/` against `home` (skipped without one).
pub fn config_file_paths(
    fs: &dyn FsView,
    file: &Path,
    worktree: Option<&Path>,
    home: Option<&Path>,
    depth: usize,
    out: &mut Vec<ConfigPath>,
) {
    if depth > INCLUDE_DEPTH {
        return;
    }
    let Some(text) = fs.read_to_string(file) else {
        return;
    };
    let base = file.parent().unwrap_or(Path::new("/"));
    let mut section = String::new();
    for raw in text.lines() {
        let mut line = raw.trim();
        if let Some(rest) = line.strip_prefix('[') {
            let Some(end) = rest.find(']') else {
                continue;
            };
            section = rest[..end]
                .split([' ', '"', '.', '\t'])
                .next()
                .unwrap_or_default()
                .to_ascii_lowercase();
            // `[include] path = x` on one line.
            line = rest[end + 1..].trim();
        }
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim().to_ascii_lowercase();
        let value = config_value(value);
        if value.is_empty() {
            continue;
        }
        let (relative_to, dir, what) = match (section.as_str(), key.as_str()) {
            ("core", "hookspath") => (worktree, true, "git core.hooksPath"),
            ("include" | "includeif", "path") => (Some(base), false, "git include.path"),
            _ => continue,
        };
        let path = if value.starts_with('~') {
            match expand_tilde(fs, &value, home) {
                Some(p) => p,
                None => continue,
            }
        } else if Path::new(&value).is_absolute() {
            PathBuf::from(&value)
        } else {
            match relative_to {
                Some(b) => super::fsview::lexical(b, Path::new(&value)),
                None => continue,
            }
        };
        if !dir {
            config_file_paths(fs, &path, worktree, home, depth + 1, out);
        }
        // husky 9 points core.hooksPath at `.husky/_`, whose stubs run `.husky/<hook>` one
        // level up: those are the hooks (red-team round 21).
        if dir && path.file_name() == Some(std::ffi::OsStr::new("_")) {
            if let Some(parent) = path.parent() {
                out.push(ConfigPath {
                    path: parent.to_path_buf(),
                    dir: true,
                    what: "git core.hooksPath (husky: its hooks run the scripts one level up)",
                });
            }
        }
        out.push(ConfigPath { path, dir, what });
    }
}

/// A git config value: quoted (up to the closing quote), or up to an inline comment.
fn config_value(raw: &str) -> String {
    let raw = raw.trim();
    if let Some(rest) = raw.strip_prefix('"') {
        return rest.split('"').next().unwrap_or_default().to_string();
    }
    raw.split(['#', ';'])
        .next()
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn read_gitdir(fs: &dyn FsView, dotgit: &Path, dir: &Path) -> Option<PathBuf> {
    let text = fs.read_to_string(dotgit)?;
    let line = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
    if line.is_empty() {
        return None;
    }
    Some(super::fsview::lexical(dir, Path::new(line)))
}

fn read_commondir(fs: &dyn FsView, gitdir: &Path) -> Option<PathBuf> {
    let text = fs.read_to_string(&gitdir.join("commondir"))?;
    let line = text.lines().next()?.trim();
    if line.is_empty() {
        return None;
    }
    Some(super::fsview::lexical(gitdir, Path::new(line)))
}

#[cfg(test)]
#[path = "mandatory_tests.rs"]
mod tests;
