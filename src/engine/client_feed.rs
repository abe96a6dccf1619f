//! The typed reads the API's streams and webhooks need, through the process's one store
//! handle: where the board's change counter stands, the tasks changed since, a task's new
//! log lines, and which task a pull request or a branch belongs to.

use super::client::Client;
use super::views::OpError;
use crate::store::{LogLine, StepRun, Task};
use std::collections::HashMap;
use std::sync::Arc;

/// A task changed: the change number it took, the task, and its step runs from where the
/// reader's last look at it left off.
#[derive(Debug, Clone)]
pub struct ChangedTask {
    pub change: i64,
    pub task: Task,
    pub steps: Vec<StepRun>,
    /// Where the next look at its step runs starts: at the first of `steps` not yet ended,
    /// else past the last (the ones before it end no more).
    pub next_from: i64,
}

impl Client {
    /// The board's last change number (every change of a task takes the next one).
    pub async fn last_change(&self) -> Result<i64, OpError> {
        Ok(self.reads().await?.read(|db| db.last_change()).await?)
    }

    /// At most `limit` tasks changed after change number `after`, in change order, each
    /// with its step runs from the one `seen` names for it (where the reader's last look
    /// left off); for a task not in `seen`, from its first step run still open or that
    /// started or ended at `since` (ms) or later. What is read does not grow with a task's
    /// history.
    pub async fn changed_after(
        &self,
        after: i64,
        limit: i64,
        since: i64,
        seen: Arc<HashMap<i64, i64>>,
    ) -> Result<Vec<ChangedTask>, OpError> {
        Ok(self
            .reads()
            .await?
            .read(move |db| {
                let tasks = db.tasks_changed_after(after, limit)?;
                let mut out = Vec::with_capacity(tasks.len());
                for (change, task) in tasks {
                    let from = match seen.get(&task.id) {
                        Some(from) => *from,
                        None => db.steps_from_since(task.id, since)?,
                    };
                    let steps = db.step_runs_from(task.id, from)?;
                    let next_from = match steps.iter().find(|s| !s.state.is_final()) {
                        Some(open) => open.id,
                        None => steps.last().map_or(from, |last| last.id + 1),
                    };
                    out.push(ChangedTask {
                        change,
                        task,
                        steps,
                        next_from,
                    });
                }
                Ok(out)
            })
            .await?)
    }

    /// At most `limit` log lines of task `task` after line id `after`, in order: of its
    /// step run `step`, or of all its step runs.
    pub async fn task_lines(
        &self,
        task: i64,
        step: Option<i64>,
        after: i64,
        limit: i64,
    ) -> Result<Vec<LogLine>, OpError> {
        Ok(self
            .reads()
            .await?
            .read(move |db| {
                // Ids only: a task's whole step runs are not read for each look.
                let runs = match step {
                    Some(s) => match db.step_run(s)? {
                        r if r.task_id == task => vec![r.id],
                        _ => Vec::new(),
                    },
                    None => db.step_run_ids(task)?,
                };
                let mut out = Vec::new();
                for id in runs {
                    out.extend(db.log_lines(id, after, limit)?);
                }
                out.sort_by_key(|l| l.id);
                out.truncate(limit.max(0) as usize);
                Ok(out)
            })
            .await?)
    }

    /// The task step run `step` belongs to.
    pub async fn task_of_step(&self, step: i64) -> Result<i64, OpError> {
        Ok(self
            .reads()
            .await?
            .read(move |db| db.step_run(step).map(|s| s.task_id))
            .await?)
    }

    /// The status task `id` is at now.
    pub async fn status_of(&self, id: i64) -> Result<String, OpError> {
        Ok(self
            .reads()
            .await?
            .read(move |db| db.task(id).map(|t| t.status))
            .await?)
    }

    /// The task whose pull request has this number, if any.
    pub async fn task_of_pr(&self, number: u64) -> Result<Option<i64>, OpError> {
        Ok(self
            .reads()
            .await?
            .read(move |db| Ok(db.task_pr_by_number(number as i64)?.map(|p| p.task_id)))
            .await?)
    }

    /// The task working on this branch, if any.
    pub async fn task_of_branch(&self, branch: String) -> Result<Option<i64>, OpError> {
        Ok(self
            .reads()
            .await?
            .read(move |db| db.task_by_branch(&branch))
            .await?)
    }
}
