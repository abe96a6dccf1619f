//! A task's worktree on a shared board (kept in PostgreSQL, run by engines on several
//! machines, each with its own clone of the repository and one git remote in common). The
//! worktree lives on the machine that runs the task's steps; at every step's end what the
//! step left is committed and the task branch pushed to the shared remote, and an engine on
//! another machine that takes the task on makes the worktree again from that branch. On a
//! board of one machine (SQLite) none of this runs.

use super::effects::{GitCtx, NewWorktree};
use super::runner::Job;
use crate::store::{Db, NewEvent, NewLogLine, StoreHandle, Stream, Task, now_ms};
use crate::workspace::Config;
use crate::workspace::git::{self, GitError};
use crate::workspace::git_shared::{self, Adopted};
use serde_json::json;
use std::path::{Path, PathBuf};

/// The remote task branches are shared through: `[forge] remote`, else `origin`.
pub fn remote_of(cfg: &Config) -> String {
    cfg.forge
        .as_ref()
        .map_or("origin", |f| f.remote())
        .to_string()
}

/// Records, inside the transaction that records the worktree, the line in the running
/// step's log saying what became of the worktree; returns the event's summary.
pub(super) fn remade(
    db: &Db,
    task_id: i64,
    path: &str,
    note: &str,
) -> crate::store::Result<String> {
    if let Some(step) = db.last_step_run(task_id)? {
        db.insert_log_lines_or_skip(&[NewLogLine {
            step_run_id: step.id,
            stream: Stream::System,
            ts: now_ms(),
            text: note.to_string(),
        }])?;
    }
    Ok(format!("worktree {path}: {note}"))
}

impl GitCtx {
    /// [`GitCtx::prepare`] on a shared board. A task's first step makes its branch here as
    /// on any board. Later steps run in this clone's worktree of the branch, brought up to
    /// what the remote holds when another machine ran steps since; when this clone has no
    /// worktree of it (the task's last steps ran elsewhere), one is made again from the
    /// branch fetched from the remote.
    pub(super) fn prepare_shared(
        &self,
        task: &Task,
        remote: &str,
    ) -> Result<(PathBuf, Option<NewWorktree>), GitError> {
        let Some(branch) = task.branch.clone() else {
            return self.prepare_here(task);
        };
        let base = task
            .base_branch
            .clone()
            .unwrap_or_else(|| self.base.clone());
        let ours = |wt: &Path| {
            git::worktree_branch(wt).as_deref() == Some(branch.as_str())
                && git_shared::belongs_to(&self.repo, wt)
        };
        // The recorded worktree when it is this clone's; else the one this clone made for
        // the task before another machine took it on, if it is still here.
        let recorded = task.worktree.as_deref().map(Path::new).filter(|w| ours(w));
        let kept = git::worktree_path_on(&self.worktree_root, &branch);
        if let Some(wt) = recorded
            .map(Path::to_path_buf)
            .or(ours(&kept).then_some(kept))
        {
            let (there, remote, name) = (wt.clone(), remote.to_string(), branch.clone());
            let moved = self.queue.run(move |repo| {
                match git_shared::fetch_branch(repo, &remote, &name) {
                    Ok(true) => git_shared::catch_up(&there, &remote, &name)
                        .map(|m| m.then(|| format!("brought the worktree up to {remote}/{name}"))),
                    Ok(false) => Ok(None),
                    // The remote cannot be reached: the worktree here is the newest known.
                    Err(e) => {
                        tracing::warn!("fetching {name} from {remote} failed: {e}");
                        Ok(None)
                    }
                }
            })?;
            let path = wt.to_string_lossy().into_owned();
            let changed = moved.is_some() || task.worktree.as_deref() != Some(path.as_str());
            let made = changed.then_some(NewWorktree {
                branch,
                path,
                base,
                note: moved,
            });
            return Ok((wt.join(&self.rel), made));
        }
        // A path this clone does not own is another machine's (or another clone's) worktree:
        // never touched from here. One of ours that is gone or on another branch is let go.
        let stale = task
            .worktree
            .clone()
            .filter(|w| !Path::new(w).exists() || git_shared::belongs_to(&self.repo, Path::new(w)));
        let (root, from_base, remote) =
            (self.worktree_root.clone(), base.clone(), remote.to_string());
        let (branch, path, note) = self.queue.run(move |repo| {
            if let Some(stale) = stale {
                let _ = git::remove_worktree(repo, Path::new(&stale));
            }
            let note = match git_shared::fetch_branch(repo, &remote, &branch) {
                Ok(true) => match git_shared::adopt_fetched(repo, &remote, &branch)? {
                    Adopted::FromRemote => {
                        Some(format!("made the worktree again from {remote}/{branch}"))
                    }
                    Adopted::Local => None,
                },
                // This clone holds the branch itself (its worktree was removed by hand, or
                // its push failed): the worktree is made from it.
                _ if git_shared::has_branch(repo, &branch) => None,
                Ok(false) => return Err(GitError::NotPushed { branch, remote }),
                Err(e) => {
                    let message = scrub_userinfo(&match e {
                        GitError::Failed { message, .. } => message,
                        other => other.to_string(),
                    });
                    return Err(GitError::Unfetched {
                        branch,
                        remote,
                        message,
                    });
                }
            };
            let (branch, path) = git::ensure_worktree_on(repo, &root, &from_base, &branch)?;
            Ok((branch, path, note))
        })?;
        Ok((
            path.join(&self.rel),
            Some(NewWorktree {
                branch,
                path: path.to_string_lossy().into_owned(),
                base,
                note,
            }),
        ))
    }
}

/// At a step's end on a shared board: commits what the step left in the task's worktree
/// and pushes the task branch to the shared remote (`--force-with-lease`), through the
/// repository's git queue. Returns the line for the step's log. A push that fails is a
/// warning event on the task, never the step's failure. Nothing happens on SQLite.
pub(super) async fn push_after_step(job: &Job, store: &StoreHandle) -> Option<String> {
    let (Some((remote, queue)), Some(wt), Some(branch)) = (
        job.shared.clone(),
        job.task.worktree.clone(),
        job.task.branch.clone(),
    ) else {
        return None;
    };
    // A step whose row is no longer running lost its claim (reaped while this engine was
    // paused or cut off, then taken by another): its work is stale and stays here.
    let id = job.step.id;
    let held = store
        .read(move |db| Ok(db.step_run(id)?.state == crate::store::StepState::Running))
        .await
        .unwrap_or(false);
    if !held {
        return Some(format!(
            "not pushed: this engine no longer holds {}#{} (another engine took it over), so its work stays here",
            job.step.status, job.step.attempt
        ));
    }
    let task_id = job.task.id;
    let message = format!(
        "baton: task {task_id}, step {} (attempt {})",
        job.step.status, job.step.attempt
    );
    let what = branch.clone();
    let pushed = queue
        .run_async(move |repo| {
            let wt = PathBuf::from(wt);
            if wt.exists() {
                git::commit_all(&wt, &message)
                    .map_err(|e| format!("what the step left could not be committed: {e}"))?;
            }
            if git_shared::push_would_drop(repo, &remote, &branch) {
                return Err(format!(
                    "{remote}/{branch} has commits this branch lacks (another machine ran the task since) — merge them into {branch} here, or let that machine's engine run the task"
                ));
            }
            crate::forge::push::push_branch(repo, &remote, &branch)?;
            Ok(format!("pushed {branch} to {remote}"))
        })
        .await;
    match pushed {
        Ok(line) => Some(line),
        Err(e) => {
            let e = scrub_userinfo(&e);
            let summary = format!(
                "{what} was not pushed, so another machine cannot take the task on from this step: {e}"
            );
            let event = summary.clone();
            store.write_detached("a failed push's event", move |db| {
                db.insert_event(&NewEvent {
                    task_id: Some(task_id),
                    category: "git",
                    kind: "branch.push_failed",
                    summary: event,
                    data: json!({ "branch": what }),
                    actor: "engine",
                    level: "warn",
                })
                .map(|_| ())
            });
            Some(summary)
        }
    }
}

/// `text` (git's words) with the user and password of every URL in it masked
/// (`https://***@host/…`): a remote's address can carry a token, and these words are kept
/// on the shared board.
fn scrub_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let end = tail
            .find(|c: char| c == '/' || c.is_whitespace())
            .unwrap_or(tail.len());
        match tail[..end].rfind('@') {
            Some(at) => {
                out.push_str("***");
                rest = &tail[at..];
            }
            None => rest = tail,
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_urls_user_and_password_are_masked() {
        assert_eq!(
            super::scrub_userinfo(
                "fatal: unable to access 'https://bot:ghp_s3cret@github.com/a/b.git/': 403"
            ),
            "fatal: unable to access 'https://***@github.com/a/b.git/': 403"
        );
        assert_eq!(
            super::scrub_userinfo("ssh://git@host:22/x and file:///tmp/r.git"),
            "ssh://***@host:22/x and file:///tmp/r.git"
        );
    }
}
