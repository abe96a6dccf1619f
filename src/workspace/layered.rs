//! The user's config (`$XDG_CONFIG_HOME/baton/config.toml`, else `~/.config/baton/config.toml`)
//! layered under the workspace's `.baton/config.toml`: a setting in the workspace file wins,
//! tables merge key by key, and what neither file sets keeps its default.

use super::WorkspaceError;
use super::config::Config;
use std::path::{Path, PathBuf};

/// Every top-level setting with its default as written in a file, in the order
/// `baton config show` lists them (a test keeps it equal to `Config::default()`).
pub const DEFAULTS: &[(&str, &str)] = &[
    ("max_parallel", "4"),
    ("auto_resume", "false"),
    ("shutdown", "\"interrupt\""),
    ("kill_grace", "\"5s\""),
    ("default_timeout", "\"1h\""),
    ("worktree_root", "(unset: ../.<repo>.baton-worktrees)"),
    ("base_branch", "(unset: the branch checked out at init)"),
];

/// Where the user's config lives, whether or not the file exists.
pub fn user_config_path() -> Option<PathBuf> {
    let base = match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(x) => PathBuf::from(x),
        None => PathBuf::from(std::env::var_os("HOME").filter(|v| !v.is_empty())?).join(".config"),
    };
    Some(base.join("baton").join("config.toml"))
}

/// The user's file when this process may read it. Another user's config (`sudo -u` keeps
/// `HOME`) is not ours to apply, so a file it may not read counts as absent.
pub fn readable(user: Option<&Path>) -> Option<&Path> {
    user.filter(|u| {
        !matches!(std::fs::File::open(u), Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied)
    })
}

/// A file's settings as a TOML table; a missing file is an empty one. Reads the file once
/// through `Config::load` first, so a bad value is reported with its file and line.
fn table(path: &Path) -> Result<toml::Table, WorkspaceError> {
    Config::load(path)?;
    match std::fs::read_to_string(path) {
        Ok(text) => toml::from_str(&text).map_err(|e| WorkspaceError::Config {
            path: path.to_path_buf(),
            message: e.message().to_string(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(toml::Table::new()),
        Err(source) => Err(WorkspaceError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// `top` over `under`: tables merge key by key, anything else in `top` wins.
fn merge(under: &mut toml::Table, top: toml::Table) {
    for (key, value) in top {
        match (under.get_mut(&key), value) {
            (Some(toml::Value::Table(u)), toml::Value::Table(t)) => merge(u, t),
            (_, v) => {
                under.insert(key, v);
            }
        }
    }
}

/// The effective config of a workspace whose file is `workspace`, over the user's file
/// `user` (either may be missing).
pub fn load(user: Option<&Path>, workspace: &Path) -> Result<Config, WorkspaceError> {
    let mut merged = match readable(user) {
        Some(u) => table(u)?,
        None => toml::Table::new(),
    };
    merge(&mut merged, table(workspace)?);
    let text = toml::to_string(&merged).unwrap_or_default();
    // Each file passed on its own, so the merge of the two does too; the combined text is
    // checked again only to turn it into a `Config`.
    let mut cfg: Config = toml::from_str(&text).map_err(|e| WorkspaceError::Config {
        path: workspace.to_path_buf(),
        message: format!("{} (after layering {:?})", e.message(), user),
    })?;
    // The `[executor]` tables may come from either file: resolve the default from the merge.
    if let Some(t) = &cfg.executor_table {
        cfg.default_executor =
            super::config_executor::default_executor(t).map_err(|m| WorkspaceError::Config {
                path: workspace.to_path_buf(),
                message: format!("[executor] {m}"),
            })?;
    }
    Ok(cfg)
}

/// One effective setting for `baton config show`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    /// `max_parallel`, or `executor.image` inside a table.
    pub key: String,
    /// The value as TOML, or the default's description.
    pub value: String,
    /// `default`, or the file it came from.
    pub source: String,
}

/// Every setting with its effective value and where it came from: the defaults, then what
/// the files add, in order.
pub fn explain(user: Option<&Path>, workspace: &Path) -> Result<Vec<Shown>, WorkspaceError> {
    let mut out: Vec<Shown> = DEFAULTS
        .iter()
        .map(|(k, v)| Shown {
            key: k.to_string(),
            value: v.to_string(),
            source: "default".into(),
        })
        .collect();
    let files = readable(user)
        .map(|u| (u.to_path_buf(), table(u)))
        .into_iter()
        .chain(std::iter::once((workspace.to_path_buf(), table(workspace))));
    for (path, t) in files {
        let mut flat = Vec::new();
        flatten("", &t?, &mut flat);
        for (key, value) in flat {
            let shown = Shown {
                key: key.clone(),
                value,
                source: path.display().to_string(),
            };
            match out.iter_mut().find(|s| s.key == key) {
                Some(slot) => *slot = shown,
                None => out.push(shown),
            }
        }
    }
    Ok(out)
}

fn flatten(prefix: &str, t: &toml::Table, out: &mut Vec<(String, String)>) {
    for (k, v) in t {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            toml::Value::Table(inner) => flatten(&key, inner, out),
            other => out.push((key, other.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listed_defaults_are_the_config_defaults() {
        let text: String = DEFAULTS
            .iter()
            .filter(|(_, v)| !v.starts_with('('))
            .map(|(k, v)| format!("{k} = {v}\n"))
            .collect();
        let parsed: Config = toml::from_str(&text).expect("defaults parse");
        assert_eq!(format!("{parsed:?}"), format!("{:?}", Config::default()));
        // Every listed key is a Config field (an unset optional field prints as None).
        let debug = format!("{:?}", Config::default());
        for (key, _) in DEFAULTS {
            assert!(
                debug.contains(&format!("{key}:")),
                "{key} is not a Config field"
            );
        }
    }

    #[test]
    fn the_workspace_wins_and_tables_merge() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("user.toml");
        let ws = dir.path().join("ws.toml");
        std::fs::write(&user, "max_parallel = 8\nkill_grace = \"9s\"\n").unwrap();
        std::fs::write(&ws, "max_parallel = 2\n").unwrap();
        let cfg = load(Some(&user), &ws).unwrap();
        assert_eq!(cfg.max_parallel, 2);
        assert_eq!(cfg.kill_grace, std::time::Duration::from_secs(9));
        let missing = dir.path().join("nope.toml");
        assert_eq!(load(Some(&missing), &missing).unwrap().max_parallel, 4);
        // A user file this process may not read is skipped (when it is not root).
        let locked = dir.path().join("locked.toml");
        std::fs::write(&locked, "max_parallel = 0\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
        if std::fs::File::open(&locked).is_err() {
            assert_eq!(load(Some(&locked), &ws).unwrap().max_parallel, 2);
        }

        let mut a: toml::Table = toml::from_str("[t]\nx = 1\ny = 2").unwrap();
        merge(&mut a, toml::from_str("[t]\ny = 3\nz = 4").unwrap());
        assert_eq!(
            a["t"].to_string(),
            toml::Value::Table(toml::from_str("x = 1\ny = 3\nz = 4").unwrap()).to_string()
        );

        // A bad user file is reported with its own path and line.
        std::fs::write(&user, "\nmax_parallel = 0\n").unwrap();
        let err = load(Some(&user), &ws).unwrap_err().to_string();
        assert!(err.contains("user.toml") && err.contains("line 2"), "{err}");
    }
}
