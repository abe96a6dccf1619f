//! A task branch shared through a git remote, for a board that several machines run: each
//! machine has its own clone of the repository, and a task's worktree is made again on
//! another machine from the branch the last one pushed. Every function here writes refs,
//! so callers run them through the repository's git queue.

use super::git::{GitError, run};
use std::path::Path;

/// The remote-tracking ref a task branch is fetched into (`refs/remotes/origin/baton/3-x`).
pub fn tracking_ref(remote: &str, branch: &str) -> String {
    format!("refs/remotes/{remote}/{branch}")
}

/// True when the worktree at `wt` is one of `repo`'s own (its `.git` file points into the
/// repository's git folder). A path recorded by another machine's engine may exist here as
/// some other clone's worktree, or not at all; either way it is not this clone's.
pub fn belongs_to(repo: &Path, wt: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(wt.join(".git")) else {
        // A plain folder, or a full clone: not a worktree of this repository.
        return false;
    };
    let Some(linked) = text.strip_prefix("gitdir:").map(str::trim) else {
        return false;
    };
    let linked = wt.join(linked);
    let common = repo.join(".git");
    if !common.is_dir() {
        // The repository is itself a linked checkout: git knows, these files do not say.
        return run(wt, &["rev-parse", "--git-common-dir"])
            .ok()
            .and_then(|d| wt.join(d).canonicalize().ok())
            == run(repo, &["rev-parse", "--git-common-dir"])
                .ok()
                .and_then(|d| repo.join(d).canonicalize().ok());
    }
    match (linked.canonicalize(), common.canonicalize()) {
        (Ok(linked), Ok(common)) => linked.starts_with(common),
        _ => false,
    }
}

/// Fetches `branch` from `remote` into its remote-tracking ref. `Ok(false)` when the remote
/// has no such branch (nothing was pushed); an error when the remote cannot be reached.
pub fn fetch_branch(repo: &Path, remote: &str, branch: &str) -> Result<bool, GitError> {
    let spec = format!("+refs/heads/{branch}:{}", tracking_ref(remote, branch));
    match run(
        repo,
        &["fetch", "--no-tags", "--quiet", "--", remote, &spec],
    ) {
        Ok(_) => Ok(true),
        Err(GitError::Failed { message, .. }) if message.contains("couldn't find remote ref") => {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

fn commit_of(repo: &Path, rev: &str) -> Option<String> {
    run(
        repo,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{rev}^{{commit}}"),
        ],
    )
    .ok()
}

fn is_ancestor(repo: &Path, older: &str, newer: &str) -> bool {
    run(repo, &["merge-base", "--is-ancestor", older, newer]).is_ok()
}

/// How the local task branch stands against the fetched one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Adopted {
    /// The local branch now points at the remote's commit (made, or moved forward).
    FromRemote,
    /// The local branch already holds the remote's commit (it is as new, or newer).
    Local,
}

/// Makes the local `branch` hold what was fetched into its remote-tracking ref: created
/// from it when missing, moved forward when behind. A local branch with commits the remote
/// lacks is kept (it is pushed at the next step's end); one that went another way than the
/// remote is refused, as moving it would throw one side's work away.
pub fn adopt_fetched(repo: &Path, remote: &str, branch: &str) -> Result<Adopted, GitError> {
    let tracking = tracking_ref(remote, branch);
    let local = format!("refs/heads/{branch}");
    let Some(theirs) = commit_of(repo, &tracking) else {
        return Err(GitError::Failed {
            args: format!("rev-parse {tracking}"),
            message: "the fetched branch is not there".into(),
        });
    };
    match commit_of(repo, &local) {
        None => {}
        Some(ours) if ours == theirs => return Ok(Adopted::Local),
        Some(ours) if is_ancestor(repo, &theirs, &ours) => return Ok(Adopted::Local),
        Some(ours) if is_ancestor(repo, &ours, &theirs) => {}
        Some(_) => return Err(diverged(branch, remote)),
    }
    run(repo, &["update-ref", &local, &theirs]).map(drop)?;
    Ok(Adopted::FromRemote)
}

/// Brings a worktree of `branch` here up to the fetched commit when the remote is ahead
/// (another machine ran the task's steps since this one did). True when it moved.
pub fn catch_up(wt: &Path, remote: &str, branch: &str) -> Result<bool, GitError> {
    let tracking = tracking_ref(remote, branch);
    let (Some(ours), Some(theirs)) = (commit_of(wt, "HEAD"), commit_of(wt, &tracking)) else {
        return Ok(false);
    };
    if ours == theirs || is_ancestor(wt, &theirs, &ours) {
        return Ok(false);
    }
    if !is_ancestor(wt, &ours, &theirs) {
        return Err(diverged(branch, remote));
    }
    run(wt, &["merge", "--ff-only", "--quiet", &tracking]).map(|_| true)
}

fn diverged(branch: &str, remote: &str) -> GitError {
    GitError::Failed {
        args: format!("fetch {remote} {branch}"),
        message: format!(
            "{branch} here and on {remote} have both moved on since they last agreed — merge \
             {remote}/{branch} into {branch} by hand (or reset it), then resume the task"
        ),
    }
}

/// True when this clone has the local branch.
pub fn has_branch(repo: &Path, branch: &str) -> bool {
    commit_of(repo, &format!("refs/heads/{branch}")).is_some()
}

/// True when the remote's branch, as last fetched or pushed, has commits the local branch
/// lacks: a push of it (even `--force-with-lease`, whose lease that fetch renewed) would
/// throw them away.
pub fn push_would_drop(repo: &Path, remote: &str, branch: &str) -> bool {
    let tracking = tracking_ref(remote, branch);
    commit_of(repo, &tracking)
        .is_some_and(|theirs| !is_ancestor(repo, &theirs, &format!("refs/heads/{branch}")))
}
