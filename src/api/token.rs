//! The API's bearer token: `.baton/token`, made on first use with mode 0600, replaced by
//! `baton token rotate`. Kept out of git by a `token` line in `.baton/.gitignore`, added
//! whenever the token is written (workspaces made before the token existed lack it).
//! Compared in constant time; never logged.

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The token file of a workspace's `.baton/`.
pub fn path(baton_dir: &Path) -> PathBuf {
    baton_dir.join("token")
}

/// 32 random bytes from the OS, as hex.
pub(super) fn fresh() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Makes sure `.baton/.gitignore` names the token, so `git add -A` never commits it.
fn ignore_in_git(baton_dir: &Path) -> Result<(), String> {
    keep_out_of_git(baton_dir, "token")
}

/// Makes sure `.baton/.gitignore` names `entry` (a file of `.baton/`).
pub(super) fn keep_out_of_git(baton_dir: &Path, entry: &str) -> Result<(), String> {
    let ignore = baton_dir.join(".gitignore");
    let old = match std::fs::read_to_string(&ignore) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(format!(
                "cannot read {}: {e} — add a line `{entry}` to it by hand so git never commits it",
                ignore.display()
            ));
        }
    };
    let named = old
        .lines()
        .any(|l| l.trim() == entry || l.trim().strip_prefix('/') == Some(entry));
    if named {
        return Ok(());
    }
    let sep = if old.is_empty() || old.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    std::fs::write(&ignore, format!("{old}{sep}{entry}\n")).map_err(|e| {
        format!(
            "cannot write {}: {e} — add a line `{entry}` to it by hand so git never commits it",
            ignore.display()
        )
    })
}

/// Writes a new token (readable by its owner only), replacing any old one atomically, and
/// makes sure git ignores it.
pub fn rotate(baton_dir: &Path) -> Result<String, String> {
    ignore_in_git(baton_dir)?;
    let token = fresh().map_err(|e| format!("cannot read random bytes for a token: {e}"))?;
    let target = path(baton_dir);
    let tmp = baton_dir.join(format!("token.{}.tmp", std::process::id()));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(token.as_bytes())?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        std::fs::rename(&tmp, &target)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!(
            "cannot write {}: {e} — check that .baton/ is writable",
            target.display()
        ));
    }
    Ok(token)
}

/// The workspace's token, made on first use.
pub fn load_or_create(baton_dir: &Path) -> Result<String, String> {
    let p = path(baton_dir);
    match std::fs::read_to_string(&p) {
        Ok(t) if !t.trim().is_empty() => {
            ignore_in_git(baton_dir)?;
            Ok(t.trim().to_string())
        }
        Ok(_) => rotate(baton_dir),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => rotate(baton_dir),
        Err(e) => Err(format!("cannot read {}: {e}", p.display())),
    }
}

/// The token as its file says now, followed through the operating system's file events
/// (`baton token rotate` replaces the file); event streams end when it changes. A change of
/// the named tokens (`baton token revoke`) wakes them too, to check theirs is still there.
pub struct Follow {
    /// The current token ("" while the file cannot be read).
    pub now: tokio::sync::watch::Sender<String>,
    /// Kept for as long as the token is followed.
    _watcher: Option<notify::RecommendedWatcher>,
}

impl Follow {
    /// Follows `file`, starting from `token`. Without file events (none available), the
    /// token is still read again on each request.
    pub fn start(file: &Path, token: String) -> Self {
        use notify::{RecursiveMode, Watcher};
        let (now, _) = tokio::sync::watch::channel(token);
        let tx = now.clone();
        let path = file.to_path_buf();
        let named = super::tokens::path(Path::new(""));
        let watcher = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
            let Ok(ev) = ev else { return };
            // Only a change counts: reading a file (this one reads the token below, and
            // every request reads the named tokens) is an access event, and answering
            // those would wake this callback with its own reads forever.
            if matches!(ev.kind, notify::EventKind::Access(_)) {
                return;
            }
            let names = |n: Option<&std::ffi::OsStr>| ev.paths.iter().any(|p| p.file_name() == n);
            if names(named.file_name()) {
                tx.send_modify(|_| {});
            }
            if names(path.file_name()) {
                let read = std::fs::read_to_string(&path).unwrap_or_default();
                tx.send_if_modified(|t| {
                    let changed = *t != read.trim();
                    if changed {
                        *t = read.trim().to_string();
                    }
                    changed
                });
            }
        });
        let dir = file.parent().unwrap_or(Path::new("."));
        let watcher = watcher
            .and_then(|mut w| w.watch(dir, RecursiveMode::NonRecursive).map(|()| w))
            .map_err(|e| tracing::warn!("cannot watch {} for token rotation: {e}", dir.display()))
            .ok();
        Self {
            now,
            _watcher: watcher,
        }
    }

    /// A token that never changes (no file).
    pub fn fixed(token: String) -> Self {
        Self {
            now: tokio::sync::watch::channel(token).0,
            _watcher: None,
        }
    }
}

/// True when `given` is the token, compared in constant time.
pub fn matches(token: &str, given: &str) -> bool {
    use subtle::ConstantTimeEq;
    token.len() == given.len() && bool::from(token.as_bytes().ct_eq(given.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn made_once_private_and_rotated() {
        let dir = tempfile::tempdir().unwrap();
        let a = load_or_create(dir.path()).unwrap();
        assert_eq!(a.len(), 64);
        assert_eq!(load_or_create(dir.path()).unwrap(), a);
        let mode = std::fs::metadata(path(dir.path()))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let b = rotate(dir.path()).unwrap();
        assert_ne!(a, b);
        assert_eq!(load_or_create(dir.path()).unwrap(), b);
        assert!(matches(&b, &b) && !matches(&b, &a) && !matches(&b, ""));
    }

    #[test]
    fn an_old_gitignore_gains_a_token_line_once() {
        let dir = tempfile::tempdir().unwrap();
        let ignore = dir.path().join(".gitignore");
        // A workspace made before the API: no `token` line, no final newline.
        std::fs::write(&ignore, "baton.db*\nlogs/").unwrap();
        load_or_create(dir.path()).unwrap();
        assert_eq!(
            std::fs::read_to_string(&ignore).unwrap(),
            "baton.db*\nlogs/\ntoken\n"
        );
        rotate(dir.path()).unwrap();
        load_or_create(dir.path()).unwrap();
        let text = std::fs::read_to_string(&ignore).unwrap();
        assert_eq!(text.matches("token").count(), 1, "{text}");
    }

    #[test]
    fn a_missing_gitignore_is_made_with_the_token_line() {
        let dir = tempfile::tempdir().unwrap();
        rotate(dir.path()).unwrap();
        let text = std::fs::read_to_string(dir.path().join(".gitignore")).unwrap();
        assert_eq!(text, "token\n");
    }

    #[test]
    fn an_existing_token_in_an_old_workspace_is_ignored_on_next_load() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(path(dir.path()), "abc\n").unwrap();
        std::fs::write(dir.path().join(".gitignore"), "logs/\n").unwrap();
        assert_eq!(load_or_create(dir.path()).unwrap(), "abc");
        let text = std::fs::read_to_string(dir.path().join(".gitignore")).unwrap();
        assert!(text.lines().any(|l| l == "token"), "{text}");
    }
}
