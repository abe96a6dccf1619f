//! The light task rows a board needs: no prompt, no pipeline snapshot, no logs.

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
    /// Distinct statuses whose step succeeded in the current run.
    pub steps_done: i64,
    /// When the running step started, while one runs.
    pub running_since: Option<i64>,
    /// `tests` JSON of the current run's latest step that reported test counts.
    pub tests: Option<serde_json::Value>,
    /// Total cost of the current run's steps, when any step reported one.
    pub cost: Option<f64>,
    /// The latest error since the task last moved (a refused merge, a failed hook).
    pub alert: Option<String>,
}

impl Db<'_> {
    /// Every task as a board card, newest first. One query, whatever the number of tasks.
    pub fn task_cards(&self) -> Result<Vec<TaskCard>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT t.id, t.title, t.pipeline_id, t.status, t.state, t.updated_at, \
             (SELECT COUNT(DISTINCT s.status) FROM step_runs s \
               WHERE s.task_id = t.id AND s.run_id = t.run_id AND s.state = 'succeeded'), \
             (SELECT MAX(s.started_at) FROM step_runs s \
               WHERE s.task_id = t.id AND s.state = 'running'), \
             (SELECT s.tests_json FROM step_runs s WHERE s.task_id = t.id \
               AND s.run_id = t.run_id AND s.tests_json IS NOT NULL ORDER BY s.id DESC LIMIT 1), \
             (SELECT SUM(s.cost) FROM step_runs s WHERE s.task_id = t.id AND s.run_id = t.run_id), \
             (SELECT e.summary FROM events e WHERE e.task_id = t.id AND e.level = 'error' \
               AND e.at >= COALESCE((SELECT MAX(h.at) FROM history h WHERE h.task_id = t.id), 0) \
               ORDER BY e.id DESC LIMIT 1) \
             FROM tasks t ORDER BY t.id DESC",
        )?;
        let rows = stmt.query_map([], |r| {
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
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}
