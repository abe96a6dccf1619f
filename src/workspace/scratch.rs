//! Scratch worktrees for the playground (`baton try`): a detached checkout of a base commit
//! that leaves no branch behind unless asked to keep one.

use super::git::{GitError, commit_all, run};
use std::path::Path;

/// Checks out `base` (a branch, tag or commit) detached at `path`; returns the commit.
pub fn add(repo: &Path, path: &Path, base: &str) -> Result<String, GitError> {
    let sha = run(
        repo,
        &["rev-parse", "--verify", &format!("{base}^{{commit}}")],
    )
    .map_err(|_| GitError::NoBase(base.to_string()))?;
    run(
        repo,
        &["worktree", "add", "--detach", &path.to_string_lossy(), &sha],
    )?;
    Ok(sha)
}

/// Why `branch` cannot be made: an invalid name or an existing branch (checked before an
/// agent runs, so its work is not lost at the end).
pub fn check_new_branch(repo: &Path, branch: &str) -> Result<(), String> {
    if run(repo, &["check-ref-format", "--branch", branch]).is_err() {
        return Err(format!(
            "`{branch}` is not a valid branch name — pick another for --keep"
        ));
    }
    let exists = run(
        repo,
        &[
            "rev-parse",
            "--verify",
            "-q",
            &format!("refs/heads/{branch}"),
        ],
    )
    .is_ok();
    if exists {
        return Err(format!(
            "branch `{branch}` already exists — pick another name for --keep, or delete it with `git branch -D {branch}`"
        ));
    }
    Ok(())
}

/// Commits what the agent left in `worktree` and saves it as the new branch `branch`.
pub fn keep(worktree: &Path, branch: &str, message: &str) -> Result<(), GitError> {
    commit_all(worktree, message)?;
    run(worktree, &["branch", branch, "HEAD"]).map(drop)
}
