//! A task's pull request on the forge: its address, number, state and checks.

use super::sql::{Optional, Row, SqlResult, params};
use super::{Db, Result, now_ms};
use serde::Serialize;

/// The pull request a task has on the forge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskPr {
    /// The task.
    #[serde(skip)]
    pub task_id: i64,
    /// The pull request's web page.
    pub url: String,
    /// Its number.
    pub number: i64,
    /// `open`, `draft`, `merged` or `closed`.
    pub state: String,
    /// The checks' result: `none`, `pending`, `passed` or `failed`.
    pub checks: String,
    /// The checks in a few words (`2/3 passed, 1 failed`).
    pub checks_summary: String,
}

impl TaskPr {
    /// The card's badge: `PR#12 open ✓`, `PR#12 merged`.
    pub fn badge(&self) -> String {
        let mark = match self.checks.as_str() {
            "passed" => " ✓",
            "failed" => " ✗",
            "pending" => " …",
            _ => "",
        };
        format!("PR#{} {}{mark}", self.number, self.state)
    }
}

const COLS: &str = "task_id, url, number, state, checks, checks_summary";

fn row(r: &Row) -> SqlResult<TaskPr> {
    Ok(TaskPr {
        task_id: r.get(0)?,
        url: r.get(1)?,
        number: r.get(2)?,
        state: r.get(3)?,
        checks: r.get(4)?,
        checks_summary: r.get(5)?,
    })
}

impl Db<'_> {
    /// Records (or replaces) a task's pull request.
    pub fn set_task_pr(&self, pr: &TaskPr) -> Result<()> {
        self.exec(
            "INSERT INTO task_prs (task_id, url, number, state, checks, checks_summary, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT(task_id) DO UPDATE SET url = ?2, number = ?3, state = ?4,
                 checks = ?5, checks_summary = ?6, updated_at = ?7",
            params![
                pr.task_id,
                pr.url,
                pr.number,
                pr.state,
                pr.checks,
                pr.checks_summary,
                now_ms()
            ],
        )?;
        // The board redraws a card when its task changes.
        self.exec(
            "UPDATE tasks SET updated_at = updated_at WHERE id = ?1",
            [pr.task_id],
        )?;
        Ok(())
    }

    /// A task's pull request, if it has one.
    pub fn task_pr(&self, task_id: i64) -> Result<Option<TaskPr>> {
        Ok(self
            .one(
                &format!("SELECT {COLS} FROM task_prs WHERE task_id = ?1"),
                [task_id],
                row,
            )
            .optional()?)
    }

    /// The task whose pull request has this number.
    pub fn task_pr_by_number(&self, number: i64) -> Result<Option<TaskPr>> {
        Ok(self
            .one(
                &format!(
                    "SELECT {COLS} FROM task_prs WHERE number = ?1 ORDER BY updated_at DESC LIMIT 1"
                ),
                [number],
                row,
            )
            .optional()?)
    }

    /// The newest task on `branch`.
    pub fn task_by_branch(&self, branch: &str) -> Result<Option<i64>> {
        Ok(self
            .one(
                "SELECT id FROM tasks WHERE branch = ?1 ORDER BY id DESC LIMIT 1",
                [branch],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// The pull requests still open or draft (what polling looks at).
    pub fn open_task_prs(&self) -> Result<Vec<TaskPr>> {
        Ok(self.all(
            &format!(
                "SELECT {COLS} FROM task_prs WHERE state IN ('open', 'draft') ORDER BY task_id"
            ),
            [],
            row,
        )?)
    }
}
