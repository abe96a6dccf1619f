//! The read views every front end shows, in the JSON shapes of [`super::views`]: the board,
//! a task, a step's log lines and a task's diff. Read through the process's one store
//! handle.

use super::client::Client;
use super::views::{Kind, MAX_LOG_LINES, OpError, OpResult, list_item, log_line, show};
use crate::store::TaskFilter;
use serde_json::{Value, json};

impl Client {
    /// `list --json`, filtered by status and pipeline.
    pub async fn board(&self, status: Option<String>, pipeline: Option<String>) -> OpResult {
        Ok(self
            .reads()
            .await?
            .read(move |db| {
                let tasks = db.list_tasks(&TaskFilter {
                    status: status.as_deref(),
                    pipeline: pipeline.as_deref(),
                })?;
                Ok(Value::Array(tasks.iter().map(list_item).collect()))
            })
            .await?)
    }

    /// `show --json`.
    pub async fn task(&self, id: i64) -> OpResult {
        Ok(self.reads().await?.read(move |db| show(db, id)).await?)
    }

    /// A step's log lines: `step` counts from 1 as in `baton show` (default: the latest);
    /// `after` is the last line id already seen; `tail` keeps only the last lines.
    pub async fn logs(
        &self,
        id: i64,
        step: Option<usize>,
        after: Option<i64>,
        tail: Option<usize>,
    ) -> OpResult {
        if tail == Some(0) {
            return Err(OpError::new(
                Kind::Invalid,
                "`tail` counts lines from 1: leave it out for the whole log",
            ));
        }
        let limit = tail.unwrap_or(MAX_LOG_LINES).clamp(1, MAX_LOG_LINES);
        self.reads()
            .await?
            .read(move |db| {
                db.task(id)?;
                let steps = db.step_runs(id)?;
                let (n, chosen) = match step {
                    Some(0) => {
                        return Ok(Err(OpError::new(
                            Kind::Invalid,
                            "steps are numbered from 1, as in `baton show`",
                        )));
                    }
                    Some(n) => match steps.get(n - 1) {
                        Some(s) => (n, s.clone()),
                        None => {
                            return Ok(Err(OpError::new(
                                Kind::NotFound,
                                format!(
                                    "task {id} has {} step(s); `baton show {id}` lists them",
                                    steps.len()
                                ),
                            )));
                        }
                    },
                    None => match steps.last() {
                        Some(s) => (steps.len(), s.clone()),
                        None => {
                            return Ok(Err(OpError::new(
                                Kind::NotFound,
                                format!(
                                    "task {id} has not run a step yet, so it has no logs — start it (`baton start {id}`) and ask again"
                                ),
                            )));
                        }
                    },
                };
                // With `after`, the lines that follow it; else the last `limit` lines.
                let lines = match after {
                    Some(a) => db.log_lines(chosen.id, a, limit as i64)?,
                    None => db.log_tail(chosen.id, limit as i64)?,
                };
                let next = lines.last().map_or(after.unwrap_or(0), |l| l.id);
                let lines: Vec<Value> = lines.iter().map(log_line).collect();
                Ok(Ok(json!({
                    "task": id,
                    "step": n,
                    "status": chosen.status,
                    "state": chosen.state,
                    "lines": lines,
                    "next_after": next,
                })))
            })
            .await?
    }

    /// The task's changes: its branch against the base, plus uncommitted work.
    pub async fn diff(&self, id: i64) -> OpResult {
        let task = self.reads().await?.read(move |db| db.task(id)).await?;
        // Finding the repository runs git: on a blocking thread with a connection of its own.
        let ws = self.ws.clone();
        let git = tokio::task::spawn_blocking(move || {
            let cfg = ws.config().map_err(|e| {
                format!("cannot show task {id}'s diff because config.toml is wrong: {e} — fix .baton/config.toml and ask again")
            })?;
            let store = match crate::engine::board::postgres_board(&ws) {
                Ok(Some(t)) => crate::store::Store::open_postgres(&t),
                Ok(None) => crate::store::Store::open_read_only(&ws.db_path()),
                Err(e) => Err(e),
            }
            .map_err(|e| {
                format!("cannot show task {id}'s diff because the board's database did not open: {e} — ask again")
            })?;
            crate::engine::GitCtx::detect(&ws, &cfg, &store.read()).map_err(|e| {
                format!("cannot show task {id}'s diff because git failed on the repository: {e} — check `git status` in the workspace and ask again")
            })
        })
        .await
        .map_err(|e| {
            OpError::new(
                Kind::Internal,
                format!("finding task {id}'s repository stopped unexpectedly ({e}) — ask again"),
            )
        })?
        .map_err(|e| OpError::new(Kind::Internal, e))?;
        let Some(git) = git else {
            return Err(OpError::new(
                Kind::Refused,
                format!(
                    "{} is not a git repository, so tasks have no diffs",
                    self.ws.root().display()
                ),
            ));
        };
        let base = task.base_branch.clone().unwrap_or(git.base);
        let (b, t) = (base.clone(), task.clone());
        let text = tokio::task::spawn_blocking(move || {
            crate::workspace::git::task_work(&git.repo, &t, &b, false)
        })
        .await
        .map_err(|e| OpError::new(Kind::Internal, e.to_string()))?
        .map_err(|e| OpError::new(Kind::Internal, e.to_string()))?;
        let Some(text) = text else {
            let why = crate::workspace::git::no_work(&task, &base);
            return Err(OpError::new(Kind::Refused, why));
        };
        Ok(json!({
            "task": id,
            "base": base,
            "branch": task.branch,
            "diff": crate::ansi::strip(&text),
        }))
    }
}
