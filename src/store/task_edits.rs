//! Changes people make to a task outside its pipeline: title and prompt, archiving,
//! deleting, the base branch, and the handoffs a re-run keeps.

use super::sql::params;
use super::{Db, Result, Task, now_ms};

impl Db<'_> {
    /// Replaces a task's title and/or prompt (None keeps it).
    pub fn set_task_text(&self, id: i64, title: Option<&str>, prompt: Option<&str>) -> Result<()> {
        self.exec(
            "UPDATE tasks SET title = COALESCE(?1, title), prompt = COALESCE(?2, prompt), \
             updated_at = ?3 WHERE id = ?4",
            params![title, prompt, now_ms(), id],
        )?;
        Ok(())
    }

    /// Archives a task (hidden from the board and `list`) or brings it back.
    pub fn set_archived(&self, id: i64, archived: bool) -> Result<()> {
        let at = archived.then(now_ms);
        self.exec(
            "UPDATE tasks SET archived_at = ?1 WHERE id = ?2",
            params![at, id],
        )?;
        Ok(())
    }

    /// Whether a task is archived.
    pub fn is_archived(&self, id: i64) -> Result<bool> {
        let at: Option<i64> =
            self.one("SELECT archived_at FROM tasks WHERE id = ?1", [id], |r| {
                r.get(0)
            })?;
        Ok(at.is_some())
    }

    /// Archived tasks, most recently archived first.
    pub fn archived_tasks(&self) -> Result<Vec<Task>> {
        let ids: Vec<i64> = self.all(
            "SELECT id FROM tasks WHERE archived_at IS NOT NULL \
             ORDER BY archived_at DESC, id DESC",
            [],
            |r| r.get(0),
        )?;
        ids.into_iter().map(|id| self.task(id)).collect()
    }

    /// Deletes a task with its runs, steps, logs, history, events and follow-ups.
    pub fn delete_task(&self, id: i64) -> Result<()> {
        // The pending command carrying this very delete must stay to get its answer.
        self.exec(
            "DELETE FROM commands WHERE task_id = ?1 AND state != 'pending'",
            [id],
        )?;
        self.exec("DELETE FROM tasks WHERE id = ?1", [id])?;
        Ok(())
    }

    /// Sets the branch a task's worktree will be made from (before it has one).
    pub fn set_base_branch(&self, id: i64, branch: &str) -> Result<()> {
        self.exec(
            "UPDATE tasks SET base_branch = ?1 WHERE id = ?2",
            params![branch, id],
        )?;
        Ok(())
    }

    /// Copies a succeeded step run (its outcome and handoff, not its cost or log) into
    /// another run of the same task, so a re-run from a later status starts with it.
    pub fn carry_step_run(&self, step_id: i64, to_run: i64, note: &str) -> Result<()> {
        let seq: i64 = self.one(
            "SELECT COALESCE(MAX(seq), 0) + 1 FROM step_runs \
             WHERE task_id = (SELECT task_id FROM step_runs WHERE id = ?1)",
            [step_id],
            |r| r.get(0),
        )?;
        let now = now_ms();
        self.exec(
            "INSERT INTO step_runs (task_id, run_id, status, attempt, execution_key, state, \
             outcome, note, not_before, created_at, started_at, finished_at, tests_json, \
             handoff_content, handoff_metadata, seq) \
             SELECT task_id, CAST(?2 AS BIGINT), status, attempt, \
             CAST(?2 AS TEXT) || ':' || status || ':' || attempt, \
             'succeeded', outcome, CAST(?3 AS TEXT), 0, CAST(?4 AS BIGINT), started_at, \
             finished_at, tests_json, handoff_content, handoff_metadata, CAST(?5 AS BIGINT) \
             FROM step_runs WHERE id = ?1",
            params![step_id, to_run, note, now, seq],
        )?;
        Ok(())
    }
}
