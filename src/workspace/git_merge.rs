//! Committing a task's work and merging its branch into the base: in the base's own
//! checkout when it has one, else in a temporary worktree.

use super::*;

/// Which checkout has `branch` checked out, if any (`git worktree list --porcelain`).
fn checkout_of(repo: &Path, branch: &str) -> Result<Option<PathBuf>, GitError> {
    let list = run(repo, &["worktree", "list", "--porcelain"])?;
    let mut path: Option<PathBuf> = None;
    for line in list.lines() {
        if let Some(p) = line.strip_prefix("worktree ") {
            path = Some(PathBuf::from(p));
        } else if line == format!("branch refs/heads/{branch}") {
            return Ok(path);
        }
    }
    Ok(None)
}

/// Commits whatever is uncommitted in a task worktree, so the merge carries what was reviewed.
pub fn commit_all(worktree: &Path, message: &str) -> Result<bool, GitError> {
    if is_clean(worktree)? {
        return Ok(false);
    }
    run(worktree, &unhooked(&["add", "-A"]))?;
    run(
        worktree,
        &unhooked(&[
            "-c",
            "user.name=baton",
            "-c",
            "user.email=baton@localhost",
            "commit",
            "--no-verify",
            "-q",
            "-m",
            message,
        ]),
    )?;
    Ok(true)
}

/// Merges `branch` into `base` without touching anything a user changed: into the checkout
/// that has `base` checked out (refusing if its tracked files are modified), or through a
/// temporary worktree when none has. Conflicts abort the merge and name the files.
pub fn merge(repo: &Path, branch: &str, base: &str, message: &str) -> Result<(), GitError> {
    if !branch_exists(repo, base)? {
        return Err(GitError::NoBase(base.to_string()));
    }
    let (target, temporary) = match checkout_of(repo, base)? {
        Some(path) => {
            let files = modified_tracked(&path)?;
            if !files.is_empty() {
                return Err(GitError::DirtyTarget {
                    base: base.to_string(),
                    path,
                    files,
                });
            }
            (path, false)
        }
        None => {
            let tmp = std::env::temp_dir().join(format!(
                "baton-merge-{}-{}",
                std::process::id(),
                crate::store::now_ms()
            ));
            run(repo, &["worktree", "add", &tmp.to_string_lossy(), base])?;
            (tmp, true)
        }
    };
    let out = git_retrying(
        &target,
        &[
            "-c",
            "user.name=baton",
            "-c",
            "user.email=baton@localhost",
            "merge",
            "--no-ff",
            "--no-edit",
            "-m",
            message,
            branch,
        ],
    )?;
    let result = if out.status.success() {
        Ok(())
    } else {
        let conflicts: Vec<String> = run(&target, &["diff", "--name-only", "--diff-filter=U"])
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect();
        let _ = git(&target, &["merge", "--abort"]);
        if conflicts.is_empty() {
            Err(merge_refusal(&out, &target, branch))
        } else {
            Err(GitError::Conflict {
                branch: branch.to_string(),
                base: base.to_string(),
                files: conflicts,
            })
        }
    };
    if temporary {
        let _ = remove_worktree(repo, &target);
    }
    result
}

/// git's multi-line refusal of a merge, as one sentence.
fn merge_refusal(out: &Output, target: &Path, branch: &str) -> GitError {
    let said = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let files: Vec<&str> = said
        .lines()
        .filter(|l| l.starts_with('\t'))
        .map(str::trim)
        .collect();
    let message = if said.contains("untracked working tree files would be overwritten") {
        format!(
            "untracked files in {} would be overwritten by the merge ({}) — move or remove them",
            target.display(),
            files.join(", ")
        )
    } else if said.contains("would be overwritten") {
        format!(
            "local changes in {} would be overwritten by the merge ({}) — commit or stash them",
            target.display(),
            files.join(", ")
        )
    } else {
        failure_reason(out)
    };
    GitError::Failed {
        args: format!("merge {branch}"),
        message,
    }
}
