//! Named API tokens, one per person: `.baton/tokens` (mode 0600, kept out of git) holds each
//! name with the SHA-256 of its token and when it was made, never the token itself. A
//! request bearing one acts as its name. Read again on each request, so a revoked token
//! stops working at once.

use serde::{Deserialize, Serialize};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// One named token as the file keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Named {
    /// Who requests bearing it act as.
    pub name: String,
    /// The token's SHA-256, as hex.
    pub sha256: String,
    /// When it was made (ms since the epoch).
    pub created_at: i64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    tokens: Vec<Named>,
}

/// The named-token file of a workspace's `.baton/`.
pub fn path(baton_dir: &Path) -> PathBuf {
    baton_dir.join("tokens")
}

fn digest(token: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Reads the file's text (empty when there is no file).
pub fn parse(text: &str, file: &Path) -> Result<Vec<Named>, String> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    serde_json::from_str::<File>(text)
        .map(|f| f.tokens)
        .map_err(|e| {
            format!(
                "{} is not a token list ({e}) — fix it, or remove it and make the tokens again with `baton token add`",
                file.display()
            )
        })
}

/// The workspace's named tokens (none without a file).
pub fn load(baton_dir: &Path) -> Result<Vec<Named>, String> {
    let file = path(baton_dir);
    match std::fs::read_to_string(&file) {
        Ok(text) => parse(&text, &file),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(format!("cannot read {}: {e}", file.display())),
    }
}

/// The name whose token `given` is; every entry is compared, in constant time.
pub fn owner(tokens: &[Named], given: &str) -> Option<String> {
    if given.is_empty() {
        return None;
    }
    let hash = digest(given);
    let mut found = None;
    for t in tokens {
        if super::token::matches(&t.sha256, &hash) && found.is_none() {
            found = Some(t.name.clone());
        }
    }
    found
}

/// Makes a token for `name`; returns it (shown once: only its hash is kept).
pub fn add(baton_dir: &Path, name: &str, now_ms: i64) -> Result<String, String> {
    if let Some(why) = crate::workspace::person::problem(name) {
        return Err(format!(
            "the token's name {why} — give the name of the person it is for"
        ));
    }
    let mut tokens = load(baton_dir)?;
    if tokens.iter().any(|t| t.name == name) {
        return Err(format!(
            "there is already a token named `{name}` — `baton token revoke {name}` first to replace it"
        ));
    }
    let token =
        super::token::fresh().map_err(|e| format!("cannot read random bytes for a token: {e}"))?;
    tokens.push(Named {
        name: name.to_string(),
        sha256: digest(&token),
        created_at: now_ms,
    });
    save(baton_dir, tokens)?;
    Ok(token)
}

/// Removes `name`'s token: requests bearing it are refused from now on.
pub fn revoke(baton_dir: &Path, name: &str) -> Result<(), String> {
    let mut tokens = load(baton_dir)?;
    let before = tokens.len();
    tokens.retain(|t| t.name != name);
    if tokens.len() == before {
        return Err(format!(
            "there is no token named `{name}` — `baton token list` shows them"
        ));
    }
    save(baton_dir, tokens)
}

/// Writes the list (readable by its owner only), replacing the old file atomically.
fn save(baton_dir: &Path, tokens: Vec<Named>) -> Result<(), String> {
    super::token::keep_out_of_git(baton_dir, "tokens")?;
    let target = path(baton_dir);
    let tmp = baton_dir.join(format!("tokens.{}.tmp", std::process::id()));
    let text = serde_json::to_string_pretty(&File { tokens }).unwrap_or_default();
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        std::fs::rename(&tmp, &target)
    })();
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!(
            "cannot write {}: {e} — check that .baton/ is writable",
            target.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_token_is_shown_once_kept_as_its_hash_and_revoked() {
        let dir = tempfile::tempdir().unwrap();
        let alice = add(dir.path(), "alice", 1).unwrap();
        let bob = add(dir.path(), "Bob B", 2).unwrap();
        let text = std::fs::read_to_string(path(dir.path())).unwrap();
        assert!(!text.contains(&alice) && !text.contains(&bob), "{text}");
        let mode = std::fs::metadata(path(dir.path()))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let ignore = std::fs::read_to_string(dir.path().join(".gitignore")).unwrap();
        assert!(ignore.lines().any(|l| l == "tokens"), "{ignore}");

        let tokens = load(dir.path()).unwrap();
        assert_eq!(owner(&tokens, &alice).as_deref(), Some("alice"));
        assert_eq!(owner(&tokens, &bob).as_deref(), Some("Bob B"));
        assert_eq!(owner(&tokens, "nope"), None);
        assert_eq!(owner(&tokens, ""), None);

        let again = add(dir.path(), "alice", 3).unwrap_err();
        assert!(again.contains("revoke alice"), "{again}");
        revoke(dir.path(), "alice").unwrap();
        assert_eq!(owner(&load(dir.path()).unwrap(), &alice), None);
        assert!(
            revoke(dir.path(), "alice")
                .unwrap_err()
                .contains("no token named")
        );
        let bad = add(dir.path(), "engine", 4).unwrap_err();
        assert!(bad.contains("its own moves"), "{bad}");
    }

    #[test]
    fn a_damaged_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(path(dir.path()), "{ nope").unwrap();
        let e = load(dir.path()).unwrap_err();
        assert!(e.contains("is not a token list"), "{e}");
    }
}
