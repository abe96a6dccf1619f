//! Git around a transition: a task's worktree, the `merge` hook that must succeed *before*
//! a transition commits, and the clean-up once a task is finished. These run git only; the
//! engine records their results in short transactions of its own.

use crate::store::{Db, NewEvent, Task};
use crate::workspace::git::{self, GitError};
use crate::workspace::{Config, Workspace};
use serde_json::json;
use std::path::{Path, PathBuf};

/// A worktree made for a task, to record.
#[derive(Debug, Clone)]
pub struct NewWorktree {
    pub branch: String,
    pub path: String,
    pub base: String,
    /// What became of it when the task's last steps ran on another machine (`made the
    /// worktree again from origin/baton/3-x`): a line for the step's log.
    pub note: Option<String>,
}

impl NewWorktree {
    /// Records it on the task, with an event.
    pub fn record(&self, db: &Db, task_id: i64) -> crate::store::Result<()> {
        db.set_worktree(
            task_id,
            Some(&self.branch),
            Some(&self.path),
            Some(&self.base),
        )?;
        let summary = match &self.note {
            Some(note) => super::shared_branch::remade(db, task_id, &self.path, note)?,
            None => format!(
                "worktree {} on branch {} from {}",
                self.path, self.branch, self.base
            ),
        };
        db.insert_event(&NewEvent {
            task_id: Some(task_id),
            category: "git",
            kind: "worktree.created",
            summary,
            data: json!({ "branch": self.branch, "path": self.path, "base": self.base, "note": self.note }),
            actor: "engine",
            level: "info",
        })?;
        Ok(())
    }
}

/// The git facts of a workspace that is a repository.
#[derive(Debug, Clone)]
pub struct GitCtx {
    /// The repository's top folder.
    pub repo: PathBuf,
    /// The workspace root relative to the repository (steps run at the same place in a worktree).
    pub rel: PathBuf,
    /// Where task worktrees are created.
    pub worktree_root: PathBuf,
    /// The branch task branches start from and merge into.
    pub base: String,
    /// The repository's git queue: worktree changes, merges and branch deletes run one at
    /// a time, so parallel tasks never race on its locks.
    pub queue: crate::workspace::GitQueue,
    /// The git remote task branches are shared through, when the board is shared (kept in
    /// PostgreSQL): `[forge] remote`, else `origin`. None on a board of one machine.
    pub shared_remote: Option<String>,
}

impl GitCtx {
    /// `Ok(None)` when the workspace is not in a git repository (steps run in its root).
    pub fn detect(ws: &Workspace, cfg: &Config, db: &Db) -> Result<Option<Self>, GitError> {
        let Some(repo) = git::repo_root(ws.root()) else {
            let has_git_dir = ws.root().ancestors().any(|d| d.join(".git").exists());
            if has_git_dir
                && std::process::Command::new("git")
                    .arg("--version")
                    .output()
                    .is_err()
            {
                return Err(GitError::Missing);
            }
            return Ok(None);
        };
        let repo = repo.canonicalize().unwrap_or(repo);
        let rel = ws
            .root()
            .strip_prefix(&repo)
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let base = cfg
            .base_branch
            .clone()
            .or_else(|| db.meta("base_branch").ok().flatten())
            .or_else(|| git::current_branch(&repo))
            .unwrap_or_else(|| "main".into());
        let worktree_root = match &cfg.worktree_root {
            Some(p) if p.is_absolute() => p.clone(),
            Some(p) => ws.root().join(p),
            None => git::default_worktree_root(&repo),
        };
        Ok(Some(Self {
            queue: crate::workspace::GitQueue::for_repo(&repo),
            repo,
            rel,
            worktree_root,
            base,
            shared_remote: db
                .is_postgres()
                .then(|| super::shared_branch::remote_of(cfg)),
        }))
    }

    /// Creates the task's worktree if it has none yet (or if its folder is no longer a
    /// checkout of the task's branch). Returns the folder its steps run in, and the new
    /// worktree (branch, path, base) to record when one was made. Runs git only; the
    /// caller records the result.
    pub fn prepare(&self, task: &Task) -> Result<(PathBuf, Option<NewWorktree>), GitError> {
        if let Some(remote) = &self.shared_remote {
            return self.prepare_shared(task, remote);
        }
        self.prepare_here(task)
    }

    /// [`GitCtx::prepare`] from what this clone holds.
    pub(super) fn prepare_here(
        &self,
        task: &Task,
    ) -> Result<(PathBuf, Option<NewWorktree>), GitError> {
        if let (Some(wt), Some(branch)) = (&task.worktree, &task.branch)
            && git::worktree_branch(Path::new(wt)).as_deref() == Some(branch.as_str())
        {
            return Ok((Path::new(wt).join(&self.rel), None));
        }
        let base = task
            .base_branch
            .clone()
            .unwrap_or_else(|| self.base.clone());
        let stale = task.worktree.clone();
        let known = task.branch.clone();
        let (root, id, title, from) = (
            self.worktree_root.clone(),
            task.id,
            task.title.clone(),
            base.clone(),
        );
        let (branch, path) = self.queue.run(move |repo| {
            if let Some(stale) = stale {
                // A folder left half-removed (or removed by hand): let git forget it.
                let _ = git::remove_worktree(repo, Path::new(&stale));
            }
            match &known {
                Some(branch) => git::ensure_worktree_on(repo, &root, &from, branch),
                None => git::ensure_worktree(repo, &root, &from, id, &title),
            }
        })?;
        let dir = path.join(&self.rel);
        Ok((
            dir,
            Some(NewWorktree {
                branch,
                path: path.to_string_lossy().into_owned(),
                base,
                note: None,
            }),
        ))
    }

    /// The `merge` hook: commit what the worktree holds, then merge the task branch into its
    /// base, through the repository's git queue. Runs before the transition's transaction,
    /// which then commits only if this succeeded.
    pub fn merge(&self, task: &Task) -> Result<(), GitError> {
        let (Some(branch), Some(wt)) = (&task.branch, &task.worktree) else {
            return Ok(());
        };
        let base = task
            .base_branch
            .clone()
            .unwrap_or_else(|| self.base.clone());
        self.queue.merge_task(
            Path::new(wt),
            branch,
            &base,
            &format!(
                "baton: uncommitted work of task {} ({})",
                task.id, task.title
            ),
            &format!("Merge task {}: {}", task.id, task.title),
        )
    }
}

/// Runs a task's `merge` hook; on refusal, the sentence that says how to get out of it.
pub fn merge_for(g: &GitCtx, task: &Task) -> Result<(), String> {
    g.merge(task).map_err(|e| match (&e, &task.worktree) {
        // Say how to get out of it: the conflict is resolved where the task's work is.
        (GitError::Conflict { base, .. }, Some(wt)) => {
            format!(
                "{e}; to resolve, run `git merge {base}` in {wt}, fix and commit, then approve again"
            )
        }
        _ => e.to_string(),
    })
}

/// Whether a worktree has no uncommitted changes; None when git cannot tell (the guard
/// then passes) or the folder is gone.
pub fn worktree_clean(path: &Path) -> Option<bool> {
    path.exists().then(|| git::is_clean(path).ok()).flatten()
}

/// At done or cancelled the worktree goes. Uncommitted work is committed to the task branch
/// first, so nothing is lost; a merged branch is deleted, any other kept. Returns the
/// sentence for the task's events; `Err` when the worktree had to be kept.
pub fn cleanup_worktree(g: &GitCtx, task: &Task, to: &str, merged: bool) -> Result<String, String> {
    let Some(wt) = task.worktree.clone() else {
        return Ok("no worktree to remove".into());
    };
    let base = task.base_branch.clone().unwrap_or_else(|| g.base.clone());
    let (branch, id) = (task.branch.clone(), task.id);
    let to = to.to_string();
    // One queued job: commit, remove and delete run back to back.
    g.queue.run(move |repo| {
        let wt_path = Path::new(&wt);
        let saved = if wt_path.exists() {
            git::commit_all(
                wt_path,
                &format!("baton: work left when task {id} ended at {to}"),
            )
            .map_err(|e| {
                format!("kept worktree {wt}: its uncommitted work could not be committed ({e})")
            })?
        } else {
            false
        };
        let saved_note = if saved {
            "; uncommitted work committed to the branch"
        } else {
            ""
        };
        git::remove_worktree(repo, wt_path)
            .map_err(|e| format!("could not remove worktree {wt}: {e}"))?;
        let branch_note = match (&branch, merged) {
            (Some(b), true) => match git::delete_merged_branch(repo, b, &base) {
                Ok(()) => format!("; merged branch {b} deleted"),
                Err(e) => format!("; branch {b} kept ({e})"),
            },
            (Some(b), false) => format!("; branch {b} kept"),
            (None, _) => String::new(),
        };
        Ok(format!("worktree {wt} removed{saved_note}{branch_note}"))
    })
}

/// The event that records a refused merge, so the board and `show` explain it.
pub fn refusal_event(err: &super::EngineError) -> Option<NewEvent<'static>> {
    let super::EngineError::Merge { task, message, .. } = err else {
        return None;
    };
    Some(NewEvent {
        task_id: Some(*task),
        category: "git",
        kind: "merge.failed",
        summary: message.clone(),
        data: json!({}),
        actor: "engine",
        level: "error",
    })
}

/// A URL fit to show: its scheme and host only. Credentials (`user:pass@`), the path (Slack
/// and Discord put their secret there) and the query are replaced by `***`.
pub fn safe_url(raw: &str) -> String {
    match reqwest::Url::parse(raw) {
        Ok(u) => {
            let host = u.host_str().unwrap_or("");
            let port = u.port().map(|p| format!(":{p}")).unwrap_or_default();
            let auth = if !u.username().is_empty() || u.password().is_some() {
                "***@"
            } else {
                ""
            };
            let rest = if u.path() != "/" || u.query().is_some() {
                "/***"
            } else {
                ""
            };
            format!("{}://{auth}{host}{port}{rest}", u.scheme())
        }
        // Unparseable: show only what cannot hold a secret.
        Err(_) => raw
            .split_once("://")
            .map(|(scheme, _)| format!("{scheme}://…"))
            .unwrap_or_else(|| "(an invalid URL)".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::safe_url;

    #[test]
    fn urls_shown_without_credentials_or_query() {
        for (raw, shown) in [
            ("https://hooks.example", "https://hooks.example"),
            ("https://hooks.example/x", "https://hooks.example/***"),
            (
                "https://user:pa55@hooks.example/x",
                "https://***@hooks.example/***",
            ),
            (
                "https://tok3n@hooks.example:8443/",
                "https://***@hooks.example:8443",
            ),
            (
                "https://hooks.example/?token=pa55",
                "https://hooks.example/***",
            ),
            (
                "https://hooks.slack.com/services/T0/B0/pa55",
                "https://hooks.slack.com/***",
            ),
            ("not a url with pa55", "(an invalid URL)"),
            ("https://user:pa55@", "https://…"),
        ] {
            assert_eq!(safe_url(raw), shown, "{raw}");
            assert!(!safe_url(raw).contains("pa55"));
            assert!(!safe_url(raw).contains("tok3n"));
        }
    }
}
