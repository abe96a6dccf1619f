//! The light task rows a board needs: no prompt, no pipeline snapshot, no logs.

use super::sql::{Optional, Row, SqlResult};
use super::{Db, Result, TaskState};

/// One card on a board: the task's identity and place plus a few per-run aggregates.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskCard {
    pub id: i64,
    pub title: String,
    pub pipeline_id: String,
    pub status: String,
    pub state: TaskState,
    pub updated_at: i64,
    /// Step statuses done in the current run: the distinct statuses whose latest step run
    /// in the run succeeded. A status being redone (pending, running, failed, interrupted)
    /// no longer counts, so a rejected task rebuilding shows `2/3`, not the `3/3` of its
    /// previous pass.
    pub steps_done: i64,
    /// When the running step started, while one runs.
    pub running_since: Option<i64>,
    /// `tests` JSON of the current run's latest step run that reported test counts; none
    /// while the task is queued or running, since the counts then describe code that is
    /// being changed (a rejected task rebuilding drops its old `✓12`).
    pub tests: Option<serde_json::Value>,
    /// Total cost of the current run's steps, when any step reported one.
    pub cost: Option<f64>,
    /// The latest error since the task last moved (a refused merge, a failed hook).
    pub alert: Option<String>,
    /// The pull request's badge (`PR#12 open ✓`), once the task has one.
    pub pr: Option<String>,
    /// While its start waits for other tasks: the ones not yet done (`3, 4 failed`).
    pub after: Option<String>,
    /// The last person who created or moved it (not the engine).
    pub moved_by: Option<String>,
}

impl Db<'_> {
    /// Every task as a board card, newest first. One query, whatever the number of tasks;
    /// each card's figures come from its own run's rows through an index, so the query
    /// grows with the board, never with the board times its history.
    pub fn task_cards(&self) -> Result<Vec<TaskCard>> {
        Ok(self.all(
            &format!("{CARD} WHERE t.archived_at IS NULL ORDER BY t.id DESC"),
            [],
            card,
        )?)
    }

    /// One task's card; None when the task is gone or archived (off the board).
    pub fn task_card(&self, id: i64) -> Result<Option<TaskCard>> {
        Ok(self
            .one(
                &format!("{CARD} WHERE t.archived_at IS NULL AND t.id = ?1"),
                [id],
                card,
            )
            .optional()?)
    }
}

/// A card's columns, from `tasks t`.
const CARD: &str = concat!(
    "SELECT t.id, t.title, t.pipeline_id, t.status, t.state, t.updated_at, ",
    "(SELECT COUNT(DISTINCT s.status) FROM step_runs s INDEXED BY step_runs_run ",
    "WHERE s.run_id = t.run_id AND s.state = 'succeeded' ",
    "AND s.id = (SELECT MAX(l.id) FROM step_runs l INDEXED BY step_runs_run ",
    "WHERE l.run_id = t.run_id AND l.status = s.status)), ",
    "(SELECT MAX(CASE WHEN s.state = 'running' THEN s.started_at END) ",
    "FROM step_runs s INDEXED BY step_runs_open ",
    "WHERE s.task_id = t.id AND s.state IN ('pending', 'running')), ",
    "CASE WHEN t.state IN ('queued', 'running') THEN NULL ELSE ",
    "(SELECT s.tests_json FROM step_runs s WHERE s.task_id = t.id ",
    "AND s.run_id = t.run_id AND s.tests_json IS NOT NULL ORDER BY s.id DESC LIMIT 1) ",
    "END, ",
    "(SELECT SUM(s.cost) FROM step_runs s WHERE s.task_id = t.id AND s.run_id = t.run_id), ",
    "(SELECT e.summary FROM events e INDEXED BY events_errors ",
    "WHERE e.task_id = t.id AND e.level = 'error' ",
    "AND e.at >= COALESCE((SELECT h.at FROM history h WHERE h.task_id = t.id ",
    "ORDER BY h.id DESC LIMIT 1), 0) ",
    "ORDER BY e.id DESC LIMIT 1), ",
    "(SELECT 'PR#' || p.number || ' ' || p.state || CASE p.checks ",
    "WHEN 'passed' THEN ' ✓' WHEN 'failed' THEN ' ✗' WHEN 'pending' THEN ' …' ",
    "ELSE '' END FROM task_prs p WHERE p.task_id = t.id), ",
    "CASE WHEN t.start_waits = 1 OR t.state = 'idle' THEN ",
    "(SELECT string_agg(b.id || CASE b.state WHEN 'failed' THEN ' failed' ",
    "WHEN 'cancelled' THEN ' cancelled' ELSE '' END, ', ') ",
    "FROM task_deps d JOIN tasks b ON b.id = d.after_id ",
    "WHERE d.task_id = t.id AND b.state != 'done') END, ",
    "t.moved_by ",
    "FROM tasks t",
);

/// A card from a row of [`CARD`].
fn card(r: &Row<'_>) -> SqlResult<TaskCard> {
    let tests: Option<String> = r.get(8)?;
    Ok(TaskCard {
        id: r.get(0)?,
        title: r.get(1)?,
        pipeline_id: r.get(2)?,
        status: r.get(3)?,
        state: r.get(4)?,
        updated_at: r.get(5)?,
        steps_done: r.get(6)?,
        running_since: r.get(7)?,
        tests: tests.and_then(|t| serde_json::from_str(&t).ok()),
        cost: r.get(9)?,
        alert: r.get(10)?,
        pr: r.get(11)?,
        after: r.get(12)?,
        moved_by: r.get(13)?,
    })
}
