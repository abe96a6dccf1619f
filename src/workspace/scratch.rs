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

/// Commits what the agent left in `worktree` and saves it as the new branch `branch`.
pub fn keep(worktree: &Path, branch: &str, message: &str) -> Result<(), GitError> {
    commit_all(worktree, message)?;
    run(worktree, &["branch", branch, "HEAD"]).map(drop)
}
