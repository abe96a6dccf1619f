//! Pushing a task branch to the forge's remote, and deleting it there after a merge. Git is
//! run with argv only; a branch name never reaches a shell.

use std::path::Path;
use std::process::Command;

fn git(root: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        // Never wait on a password prompt: an engine has no terminal to answer it.
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .map_err(|e| format!("git could not run: {e}"))?;
    let text = |b: &[u8]| String::from_utf8_lossy(b).trim().to_string();
    if out.status.success() {
        Ok(text(&out.stderr))
    } else {
        let err = text(&out.stderr);
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        Err(last.to_string())
    }
}

/// Pushes `branch` to `remote` with `--force-with-lease`: a rework's rewritten history
/// replaces the old one, but a branch someone else pushed to since baton last saw it is
/// not overwritten.
pub fn push_branch(root: &Path, remote: &str, branch: &str) -> Result<(), String> {
    let spec = format!("refs/heads/{branch}:refs/heads/{branch}");
    git(root, &["push", "--force-with-lease", "--porcelain", "--", remote, &spec])
        .map(|_| ())
        .map_err(|e| {
            format!(
                "pushing {branch} to {remote} failed: {e} — if someone else pushed to the branch, fetch and look before pushing again"
            )
        })
}

/// Deletes `branch` on `remote` (after its pull request was merged); a branch already
/// gone is fine.
pub fn delete_branch(root: &Path, remote: &str, branch: &str) -> Result<(), String> {
    let spec = format!(":refs/heads/{branch}");
    match git(root, &["push", "--porcelain", "--", remote, &spec]) {
        Ok(_) => Ok(()),
        Err(e) if e.contains("remote ref does not exist") => Ok(()),
        Err(e) => Err(format!("deleting {branch} on {remote} failed: {e}")),
    }
}
