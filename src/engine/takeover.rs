//! A person took a task over in the agent's own UI (`baton attach`, the board's `T`) and
//! quit it: what the session left in the worktree is committed to the task branch through
//! the repository's git queue, the way the engine commits a task's work, and the history
//! says who took it over. The task stays where it is; its next move is the person's.

use super::actions::{Action, Applied, Request};
use super::error::{EngineError, Result};
use super::{Engine, transition::pipeline_of};
use crate::store::{Db, NewEvent, Task, TaskState};
use serde_json::json;
use std::path::Path;

/// The history trigger of a takeover (a row from the task's status to itself).
pub const TRIGGER: &str = "takeover";

/// Why a task cannot be taken over now, in one sentence; None when it can.
pub fn refusal(task: &Task) -> Option<String> {
    let there = task
        .worktree
        .as_deref()
        .is_some_and(|w| Path::new(w).is_dir());
    refusal_given(task, there)
}

/// [`refusal`], told whether the task's worktree folder exists (no disk read here).
pub fn refusal_given(task: &Task, worktree_exists: bool) -> Option<String> {
    let id = task.id;
    if task.state == TaskState::Running {
        return Some(format!("task {id}'s step is running; abort it or wait"));
    }
    match (&task.worktree, &task.branch) {
        (Some(_), _) if worktree_exists => None,
        (_, Some(b)) => Some(format!(
            "task {id} has no worktree now (removed when it ended); its branch is {b}"
        )),
        (_, None) => Some(format!(
            "task {id} has no worktree yet — one is made when a step runs"
        )),
    }
}

impl Engine {
    /// Before a takeover is recorded: commits what the session left in the task's
    /// worktree (outside any transaction, through the git queue) and writes what became of
    /// it into the request.
    pub(super) async fn commit_takeover(&self, req: &mut Request) -> Result<()> {
        let Action::TakenOver { by, committed } = &mut req.action else {
            return Ok(());
        };
        let id = req.task_id;
        let task = self.store.read(move |db| db.task(id)).await?;
        if let Some(message) = refusal(&task) {
            return Err(EngineError::Refused { task: id, message });
        }
        let (Some(git), Some(wt)) = (self.git.clone(), task.worktree.clone()) else {
            *committed = Some("the workspace is not a git repository: nothing to commit".into());
            return Ok(());
        };
        let message = format!("baton: task {id} taken over by {by}");
        let changed = tokio::task::spawn_blocking(move || {
            git.queue.commit_all(Path::new(&wt), &message)
        })
        .await
        .map_err(|e| EngineError::Other(format!("committing the takeover stopped: {e}")))?
        .map_err(|e| EngineError::Refused {
            task: id,
            message: format!(
                "what the session changed could not be committed ({e}); it stays in the worktree"
            ),
        })?;
        let branch = task.branch.unwrap_or_else(|| "the task branch".into());
        *committed = Some(if changed {
            format!("its changes were committed to {branch}")
        } else {
            "it left nothing uncommitted".into()
        });
        Ok(())
    }
}

/// Records a takeover inside the caller's transaction: a history row from the task's
/// status to itself (it counts as no visit) and an event.
pub(super) fn record(
    db: &Db,
    task: &Task,
    req: &Request,
    by: &str,
    committed: Option<&str>,
) -> Result<Applied> {
    // The step may have started again since the session ended.
    if task.state == TaskState::Running {
        return Err(EngineError::Refused {
            task: task.id,
            message: format!("task {}'s step is running; abort it or wait", task.id),
        });
    }
    // Checked so that a task whose snapshot cannot be read says so here, not later.
    pipeline_of(db, task)?;
    let committed = committed.unwrap_or("nothing was committed");
    let reason = format!("taken over by {by}; {committed}");
    db.insert_history(
        task.id,
        task.run_id,
        Some(&task.status),
        &task.status,
        TRIGGER,
        &req.actor,
        Some(&reason),
        &json!([]),
        &json!([]),
    )?;
    db.insert_event(&NewEvent {
        task_id: Some(task.id),
        category: "lifecycle",
        kind: "task.taken_over",
        summary: reason.clone(),
        data: json!({ "by": by, "status": task.status }),
        actor: &req.actor,
        level: "info",
    })?;
    Ok(Applied {
        task_id: task.id,
        summary: format!("task {}: {reason}", task.id),
        moved: None,
        retry: false,
        forge: None,
    })
}
