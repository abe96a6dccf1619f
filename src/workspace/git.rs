//! Git working trees per task. Shells out to `git`, never libgit2: the git CLI refuses to
//! clobber a user's files where libraries have not. Commands that write to the repository retry
//! when they lose a race for its lock files; [`super::git_queue::GitQueue`] keeps one process's
//! own writes from racing at all.

use super::git_retry::{failure_reason, retrying};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub use super::git_retry::{RETRIES, is_transient, with_retry_observer};
pub use merge::{commit_all, merge};

#[path = "git_merge.rs"]
mod merge;

/// A git failure, phrased for people.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GitError {
    #[error(
        "git is not installed or not on PATH — install git, or use a workspace that is not a git repository"
    )]
    Missing,
    #[error(
        "base branch `{0}` does not exist — create it (a new repository needs a first commit), or set base_branch in .baton/config.toml"
    )]
    NoBase(String),
    #[error(
        "worktree path {0} is taken by something else — remove it, or set worktree_root in .baton/config.toml"
    )]
    PathTaken(PathBuf),
    #[error("merge of {branch} into {base} has conflicts in: {}", files.join(", "))]
    Conflict {
        branch: String,
        base: String,
        files: Vec<String>,
    },
    #[error("cannot merge into {base}: the checkout at {path} has modified tracked files ({}) — commit or stash them first", files.join(", "))]
    DirtyTarget {
        base: String,
        path: PathBuf,
        files: Vec<String>,
    },
    #[error("`git {args}` failed: {message}")]
    Failed { args: String, message: String },
    #[error(
        "branch {branch} is not on the shared remote {remote}, and this clone does not have it: the engine that ran the task's last step did not push it — push it from that machine (git push {remote} {branch}), then resume the task"
    )]
    NotPushed { branch: String, remote: String },
    #[error(
        "could not fetch {branch} from the shared remote {remote} ({message}) — check that this clone's remote {remote} is the one the board's engines share and that it can be reached, then resume the task"
    )]
    Unfetched {
        branch: String,
        remote: String,
        message: String,
    },
}

impl GitError {
    /// True when git lost a race with another git process (a held lock file, a sibling
    /// worktree half-written): trying again shortly can succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, GitError::Failed { message, .. } if is_transient(message))
    }
}

fn git(dir: &Path, args: &[&str]) -> Result<Output, GitError> {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new("git");
    cmd.arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(std::process::Stdio::null());
    // SAFETY: between fork and exec only `setsid`, which is async-signal-safe, runs.
    unsafe {
        // A session of its own, without the terminal: a ctrl+c there is the engine's to
        // answer (a worktree half made would fail the step, where a stop interrupts it),
        // and what git starts (a hook, ssh for LFS) fails at once where it would ask the
        // terminal something, rather than wait for an answer stopped in the background.
        cmd.pre_exec(|| {
            nix::unistd::setsid()
                .map(drop)
                .map_err(std::io::Error::from)
        });
    }
    cmd.output().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => GitError::Missing,
        _ => GitError::Failed {
            args: args.join(" "),
            message: e.to_string(),
        },
    })
}

/// Runs git once and returns trimmed stdout, or git's reason for failing.
fn run_once(dir: &Path, args: &[&str]) -> Result<String, GitError> {
    let out = git(dir, args)?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_string())
    } else {
        Err(GitError::Failed {
            args: args.join(" "),
            message: failure_reason(&out),
        })
    }
}

/// [`run_once`], tried again while git loses races for the repository's locks. Only for
/// commands that change nothing when they fail that way.
pub(super) fn run(dir: &Path, args: &[&str]) -> Result<String, GitError> {
    retrying(|| run_once(dir, args))
}

/// [`git`], tried again while git loses races for the repository's locks; any other outcome,
/// success or not, is returned for the caller to read.
fn git_retrying(dir: &Path, args: &[&str]) -> Result<Output, GitError> {
    retrying(|| {
        let out = git(dir, args)?;
        if !out.status.success() && is_transient(&String::from_utf8_lossy(&out.stderr)) {
            return Err(GitError::Failed {
                args: args.join(" "),
                message: failure_reason(&out),
            });
        }
        Ok(out)
    })
}

/// The repository's top folder when `dir` is inside a git work tree. git is not asked where
/// it would find nothing: no `.git` in `dir` or above it, and no `GIT_DIR` (a workspace
/// that is not a repository starts no git at all).
pub fn repo_root(dir: &Path) -> Option<PathBuf> {
    // git climbs the real path: a folder reached through a link is in the repository
    // its target is in.
    let dir = dir
        .canonicalize()
        .or_else(|_| std::path::absolute(dir))
        .unwrap_or_else(|_| dir.to_path_buf());
    if std::env::var_os("GIT_DIR").is_none() && !dir.ancestors().any(|d| d.join(".git").exists()) {
        return None;
    }
    run(&dir, &["rev-parse", "--show-toplevel"])
        .ok()
        .map(PathBuf::from)
}

/// The branch checked out in a worktree, read from its files rather than by running git
/// (a step checks its worktree before every run): `.git` names the worktree's git folder,
/// whose `HEAD` names the branch. Falls back to asking git when the files say otherwise.
pub fn worktree_branch(dir: &Path) -> Option<String> {
    let dot_git = dir.join(".git");
    let git_dir = if dot_git.is_dir() {
        dot_git
    } else {
        let text = std::fs::read_to_string(&dot_git).ok()?;
        let linked = text.strip_prefix("gitdir:")?.trim();
        let linked = Path::new(linked);
        if linked.is_absolute() {
            linked.to_path_buf()
        } else {
            dir.join(linked)
        }
    };
    match std::fs::read_to_string(git_dir.join("HEAD")) {
        Ok(head) => match head.trim().strip_prefix("ref: refs/heads/") {
            Some(b) => Some(b.to_string()),
            None => current_branch(dir),
        },
        Err(_) => current_branch(dir),
    }
}

/// The branch checked out in `dir` (None when detached or not a repository).
pub fn current_branch(dir: &Path) -> Option<String> {
    run(dir, &["symbolic-ref", "--quiet", "--short", "HEAD"]).ok()
}

/// True when the repository at `dir` has a commit checked out (a new one has none yet, so
/// no task worktree can start from its branch).
pub fn has_commit(dir: &Path) -> bool {
    run(dir, &["rev-parse", "--quiet", "--verify", "HEAD^{commit}"]).is_ok()
}

/// A branch-safe slug of a title: lowercase ASCII words joined by `-`, at most 40 chars.
pub fn slug(title: &str) -> String {
    let mut out = String::new();
    for c in title.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
        if out.len() >= 40 {
            break;
        }
    }
    let s = out.trim_matches('-').to_string();
    if s.is_empty() { "task".into() } else { s }
}

/// The branch of a task.
pub fn task_branch(id: i64, title: &str) -> String {
    format!("baton/{id}-{}", slug(title))
}

/// Where task worktrees go when `worktree_root` is not set: beside the checkout, never in it.
pub fn default_worktree_root(repo: &Path) -> PathBuf {
    let name = repo
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "repo".into());
    repo.parent()
        .unwrap_or(repo)
        .join(format!(".{name}.baton-worktrees"))
}

fn branch_exists(repo: &Path, branch: &str) -> Result<bool, GitError> {
    let out = git(
        repo,
        &[
            "show-ref",
            "--verify",
            "--quiet",
            &format!("refs/heads/{branch}"),
        ],
    )?;
    Ok(out.status.success())
}

/// Creates (or reuses) a task's worktree on `branch`, from `base`. Returns its path.
///
/// Leftovers of an earlier attempt are picked up rather than refused: a branch without its
/// worktree is checked out again, a worktree git still lists but whose folder is gone is
/// forgotten first, and an empty folder at the path is used.
pub fn ensure_worktree(
    repo: &Path,
    root: &Path,
    base: &str,
    id: i64,
    title: &str,
) -> Result<(String, PathBuf), GitError> {
    let branch = task_branch(id, title);
    let path = root.join(format!("{id}-{}", slug(title)));
    // Each attempt starts from whatever the last one left, so the whole of it is retried.
    retrying(|| try_ensure_worktree(repo, root, base, &branch, &path))?;
    Ok((branch, path))
}

/// Where [`ensure_worktree_on`] puts the worktree of `branch`.
pub fn worktree_path_on(root: &Path, branch: &str) -> PathBuf {
    root.join(
        branch
            .strip_prefix("baton/")
            .unwrap_or(branch)
            .replace('/', "-"),
    )
}

/// Like [`ensure_worktree`], on the branch the task already has (its title may have been
/// edited since the branch was named): a re-run goes on where the task left off.
pub fn ensure_worktree_on(
    repo: &Path,
    root: &Path,
    base: &str,
    branch: &str,
) -> Result<(String, PathBuf), GitError> {
    let path = worktree_path_on(root, branch);
    retrying(|| try_ensure_worktree(repo, root, base, branch, &path))?;
    Ok((branch.to_string(), path))
}

fn try_ensure_worktree(
    repo: &Path,
    root: &Path,
    base: &str,
    branch: &str,
    path: &Path,
) -> Result<(), GitError> {
    if path.exists() {
        // Ours already (a resumed task)? Then reuse it.
        if worktree_branch(path).as_deref() == Some(branch) {
            return Ok(());
        }
        if !is_empty_dir(path) {
            return Err(GitError::PathTaken(path.to_path_buf()));
        }
    }
    std::fs::create_dir_all(root).map_err(|e| GitError::Failed {
        args: format!("mkdir {}", root.display()),
        message: e.to_string(),
    })?;
    // Created on its own rather than with `worktree add -b`, which leaves the branch behind
    // when the checkout fails, so that a retry finds a consistent state. One git process:
    // an existing branch (a retried task) is fine, a missing base is named.
    match run_once(repo, &["branch", "--no-track", branch, base]) {
        Ok(_) => {}
        Err(GitError::Failed { message, .. }) if message.contains("already exists") => {}
        Err(GitError::Failed { message, .. })
            if message.contains("not a valid object name")
                || message.contains("not a valid branch name")
                || message.contains("no such branch") =>
        {
            return Err(GitError::NoBase(base.to_string()));
        }
        Err(e) => return Err(e),
    }
    let add = ["worktree", "add", &path.to_string_lossy(), branch];
    match run_once(repo, &add) {
        Err(GitError::Failed { message, .. }) if blocked_by_missing_worktree(&message) => {
            // A worktree whose folder was deleted stays registered, and blocks its path and
            // its branch, until pruned. Pruned only then: a prune can delete the admin files
            // of a worktree another git process is adding at that moment.
            run_once(repo, &["worktree", "prune"])?;
            run_once(repo, &add).map(drop)
        }
        other => other.map(drop),
    }
}

/// True when `git worktree add` refused because of a registered worktree that may be gone.
fn blocked_by_missing_worktree(message: &str) -> bool {
    message.contains("missing but already registered worktree")
        || message.contains("is already used by worktree at")
        || message.contains("is already checked out at")
}

fn is_empty_dir(path: &Path) -> bool {
    std::fs::read_dir(path).is_ok_and(|mut d| d.next().is_none())
}

/// Every local branch and the commit it points at.
pub fn branch_heads(repo: &Path) -> Result<Vec<(String, String)>, GitError> {
    Ok(run(
        repo,
        &[
            "for-each-ref",
            "--format=%(refname:short) %(objectname)",
            "refs/heads",
        ],
    )?
    .lines()
    .filter_map(|l| l.split_once(' '))
    .map(|(b, s)| (b.to_string(), s.to_string()))
    .collect())
}

/// Removes a task's worktree (its branch is kept). Missing worktrees are fine: git is told to
/// forget them.
pub fn remove_worktree(repo: &Path, path: &Path) -> Result<(), GitError> {
    retrying(|| {
        if path.exists() {
            run_once(
                repo,
                &["worktree", "remove", "--force", &path.to_string_lossy()],
            )
            .map(drop)
        } else {
            // Only then: a prune can delete the admin files of a worktree another git
            // process is adding at that moment. Best effort, as a stale entry is harmless.
            let _ = run_once(repo, &["worktree", "prune"]);
            Ok(())
        }
    })
}

/// Deletes `branch` if it is fully merged into `base` (whatever is checked out); otherwise
/// leaves it and says so.
pub fn delete_merged_branch(repo: &Path, branch: &str, base: &str) -> Result<(), GitError> {
    let merged = git(repo, &["merge-base", "--is-ancestor", branch, base])?;
    if !merged.status.success() {
        return Err(GitError::Failed {
            args: format!("branch -d {branch}"),
            message: format!("{branch} is not merged into {base}"),
        });
    }
    run(repo, &["branch", "-D", branch]).map(|_| ())
}

/// Deletes `branch` whether or not it was merged (`baton delete --purge`).
pub fn delete_branch(repo: &Path, branch: &str) -> Result<(), GitError> {
    run(repo, &["branch", "-D", branch]).map(|_| ())
}

/// Options for git run in a task's worktree, which a step may have written to: no hook
/// and no filesystem monitor from the repository's config runs on this machine.
const UNHOOKED: [&str; 4] = [
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
];

/// `args` after [`UNHOOKED`].
fn unhooked<'a>(args: &[&'a str]) -> Vec<&'a str> {
    UNHOOKED.iter().chain(args).copied().collect()
}

/// Tracked files with changes in a checkout (`git status --porcelain`, untracked excluded).
pub fn modified_tracked(dir: &Path) -> Result<Vec<String>, GitError> {
    Ok(run(
        dir,
        &unhooked(&["status", "--porcelain", "--untracked-files=no"]),
    )?
    .lines()
    .map(|l| l.get(3..).unwrap_or(l).to_string())
    .collect())
}

/// True when the worktree has no uncommitted changes (untracked files count).
pub fn is_clean(dir: &Path) -> Result<bool, GitError> {
    Ok(run(dir, &unhooked(&["status", "--porcelain"]))?.is_empty())
}

/// The diff a reviewer sees: the task branch against the merge base with `base`, including
/// uncommitted and untracked changes in the worktree. `color` adds ANSI colours.
pub fn diff(worktree: &Path, base: &str, color: bool) -> Result<String, GitError> {
    let color_flag = color_flag(color);
    let merge_base = run(worktree, &["merge-base", base, "HEAD"])?;
    let mut out = stat_and_patch(worktree, &[&merge_base], color)?;
    let untracked = run(
        worktree,
        &unhooked(&["ls-files", "--others", "--exclude-standard"]),
    )?;
    for file in untracked.lines().filter(|l| !l.is_empty()) {
        // `--no-index` exits 1 when the files differ, which they always do here.
        let o = git(
            worktree,
            &unhooked(&[
                "diff",
                "--no-ext-diff",
                "--no-textconv",
                color_flag,
                "--no-index",
                "--",
                "/dev/null",
                file,
            ]),
        )?;
        out.push('\n');
        out.push_str(String::from_utf8_lossy(&o.stdout).trim_end());
    }
    Ok(out)
}

/// What a task's branch holds against its merge base with `base`, read in the repository
/// at `repo`: the work of a task whose worktree is gone. None when the branch is gone too
/// (merged, then deleted).
pub fn branch_diff(
    repo: &Path,
    base: &str,
    branch: &str,
    color: bool,
) -> Result<Option<String>, GitError> {
    let head = format!("refs/heads/{branch}");
    if run(repo, &["rev-parse", "--verify", "--quiet", &head]).is_err() {
        return Ok(None);
    }
    let merge_base = run(repo, &["merge-base", base, &head])?;
    stat_and_patch(repo, &[&merge_base, &head], color).map(Some)
}

/// `git diff --stat` then the patch, of `range` (one commit: against the working tree).
fn stat_and_patch(dir: &Path, range: &[&str], color: bool) -> Result<String, GitError> {
    let diff = |extra: &str| {
        let mut args = vec!["diff", "--no-ext-diff", "--no-textconv", extra];
        args.extend_from_slice(range);
        run(dir, &unhooked(&args))
    };
    let mut out = diff("--stat")?;
    if !out.is_empty() {
        out.push_str("\n\n");
    }
    out.push_str(&diff(color_flag(color))?);
    Ok(out)
}

fn color_flag(color: bool) -> &'static str {
    match color {
        true => "--color=always",
        false => "--color=never",
    }
}

/// A task's work as a reviewer sees it, against `base`: its worktree's diff, else (the
/// worktree gone when the task ended) what its branch holds, read in `repo`. None when it
/// has neither: [`no_work`] says why.
pub fn task_work(
    repo: &Path,
    task: &crate::store::Task,
    base: &str,
    color: bool,
) -> Result<Option<String>, GitError> {
    match (&task.worktree, &task.branch) {
        (Some(wt), _) => diff(Path::new(wt), base, color).map(Some),
        (None, Some(branch)) => branch_diff(repo, base, branch, color),
        (None, None) => Ok(None),
    }
}

/// Why task `task` has no work to show (see [`task_work`]), in one sentence.
pub fn no_work(task: &crate::store::Task, base: &str) -> String {
    match &task.branch {
        Some(b) => format!(
            "task {}'s worktree and its branch {b} are gone (merged into {base}, or deleted) — `git log {base}` shows what was merged",
            task.id
        ),
        None if matches!(
            task.state,
            crate::store::TaskState::Done
                | crate::store::TaskState::Cancelled
                | crate::store::TaskState::Failed
        ) =>
        {
            format!(
                "task {} ended ({}) before a step ran, so it has no work to show",
                task.id, task.state
            )
        }
        None => format!(
            "task {} has no worktree yet — one is made when its first step runs",
            task.id
        ),
    }
}

/// The diff for a task, for the board (coloured): [`task_work`] against the task's base.
pub fn task_diff(root: &Path, task: &crate::store::Task) -> Result<Option<String>, String> {
    // No repository, or no worktree nor branch yet: the board says why there is no diff.
    let Some(repo) = repo_root(root) else {
        return Ok(None);
    };
    if task.worktree.is_none() && task.branch.is_none() {
        return Ok(None);
    }
    let base = task
        .base_branch
        .clone()
        .or_else(|| current_branch(&repo))
        .ok_or("the task's base branch is unknown")?;
    task_work(&repo, task, &base, true).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_runs_in_a_session_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        // An alias run by git's shell prints that shell's process group and session: git's.
        let ids = run(
            dir.path(),
            &["-c", "alias.ids=!cut -d' ' -f5,6 /proc/$$/stat", "ids"],
        )
        .unwrap();
        let ids: Vec<i32> = ids.split(' ').map(|n| n.trim().parse().unwrap()).collect();
        let (group, session) = (
            nix::unistd::getpgrp().as_raw(),
            nix::unistd::getsid(None).unwrap().as_raw(),
        );
        assert_ne!(ids[0], group, "a terminal's ctrl+c would reach git");
        assert_ne!(
            ids[1], session,
            "git could ask the terminal and stop, waiting"
        );
    }

    #[test]
    fn slugs_are_branch_safe() {
        assert_eq!(slug("Fix the login bug!"), "fix-the-login-bug");
        assert_eq!(slug("x\"; touch pwned"), "x-touch-pwned");
        assert_eq!(slug("日本語"), "task");
        assert!(slug(&"long ".repeat(30)).len() <= 40);
    }
}
