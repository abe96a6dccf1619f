//! Tasks, runs and transition history.

use super::sql::{Optional, Params, Row, SqlResult, params};
use super::{Db, HistoryEntry, Result, Run, RunState, StoreError, Task, TaskState, now_ms};

const TASK_COLS: &str = "id, title, prompt, pipeline_id, status, state, run_id, \
                         branch, worktree, breakpoint, created_at, updated_at, base_branch, \
                         created_by, moved_by";

fn task_row(r: &Row) -> SqlResult<Task> {
    Ok(Task {
        id: r.get(0)?,
        title: r.get(1)?,
        prompt: r.get(2)?,
        pipeline_id: r.get(3)?,
        status: r.get(4)?,
        state: r.get(5)?,
        run_id: r.get(6)?,
        branch: r.get(7)?,
        worktree: r.get(8)?,
        breakpoint: r.get(9)?,
        created_at: r.get(10)?,
        updated_at: r.get(11)?,
        base_branch: r.get(12)?,
        created_by: r.get(13)?,
        moved_by: r.get(14)?,
    })
}

fn run_row(r: &Row) -> SqlResult<Run> {
    Ok(Run {
        id: r.get(0)?,
        task_id: r.get(1)?,
        number: r.get(2)?,
        state: r.get(3)?,
        started_at: r.get(4)?,
        finished_at: r.get(5)?,
    })
}

/// Filters for [`Db::list_tasks`].
#[derive(Debug, Default, Clone)]
pub struct TaskFilter<'a> {
    pub status: Option<&'a str>,
    pub pipeline: Option<&'a str>,
}

impl Db<'_> {
    /// Inserts a task with its first run; returns the task id.
    pub fn insert_task(
        &self,
        title: &str,
        prompt: &str,
        pipeline_id: &str,
        pipeline_json: &str,
        status: &str,
        state: TaskState,
    ) -> Result<i64> {
        let now = now_ms();
        let snapshot = self.snapshot_id(pipeline_json)?;
        let id = self.insert(
            "INSERT INTO tasks (title, prompt, pipeline_id, snapshot_id, status, state, \
             created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)",
            params![title, prompt, pipeline_id, snapshot, status, state, now],
        )?;
        // The run's insert points the task at it.
        self.insert_run(id, RunState::Waiting)?;
        Ok(id)
    }

    /// The task with this id, or [`StoreError::NoTask`].
    pub fn task(&self, id: i64) -> Result<Task> {
        self.one(
            &format!("SELECT {TASK_COLS} FROM tasks WHERE id = ?1"),
            [id],
            task_row,
        )
        .optional()?
        .ok_or(StoreError::NoTask(id))
    }

    /// Tasks, newest first (by last update, then id).
    pub fn list_tasks(&self, filter: &TaskFilter) -> Result<Vec<Task>> {
        Ok(self.all(
            &format!(
                "SELECT {TASK_COLS} FROM tasks \
                 WHERE (CAST(?1 AS TEXT) IS NULL OR status = ?1) \
                 AND (CAST(?2 AS TEXT) IS NULL OR pipeline_id = ?2) \
                 AND archived_at IS NULL ORDER BY updated_at DESC, id DESC"
            ),
            params![filter.status, filter.pipeline],
            task_row,
        )?)
    }

    /// The newest task change number (0 on an empty board). Every change of a task takes
    /// the next one inside its own transaction, so once a reader sees change N, every
    /// change before N is visible too.
    pub fn last_change(&self) -> Result<i64> {
        Ok(
            self.one("SELECT seq FROM change_counter WHERE id = 1", [], |r| {
                r.get(0)
            })?,
        )
    }

    /// Up to `limit` tasks (archived ones too) whose latest change comes after change
    /// `after`, oldest change first, each with its change number.
    pub fn tasks_changed_after(&self, after: i64, limit: i64) -> Result<Vec<(i64, Task)>> {
        // `change_seq` is the column after the task's own.
        let seq = TASK_COLS.split(',').count();
        Ok(self.all(
            &format!(
                "SELECT {TASK_COLS}, change_seq FROM tasks WHERE change_seq > ?1 \
                 ORDER BY change_seq LIMIT ?2"
            ),
            [after, limit],
            move |r| Ok((r.get(seq)?, task_row(r)?)),
        )?)
    }

    /// The task a client's idempotency key made, if any.
    pub fn task_by_idempotency_key(&self, key: &str) -> Result<Option<i64>> {
        Ok(self
            .one(
                "SELECT id FROM tasks WHERE idempotency_key = ?1",
                [key],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// Records the idempotency key a client gave with the task's creation (unique).
    pub fn set_idempotency_key(&self, id: i64, key: &str) -> Result<()> {
        self.exec(
            "UPDATE tasks SET idempotency_key = ?1 WHERE id = ?2",
            params![key, id],
        )?;
        Ok(())
    }

    /// Sets a task's status and state.
    pub fn set_task_status(&self, id: i64, status: &str, state: TaskState) -> Result<()> {
        self.exec(
            "UPDATE tasks SET status = ?1, state = ?2, updated_at = ?3 WHERE id = ?4",
            params![status, state, now_ms(), id],
        )?;
        Ok(())
    }

    /// Sets only a task's state.
    pub fn set_task_state(&self, id: i64, state: TaskState) -> Result<()> {
        self.exec(
            "UPDATE tasks SET state = ?1, updated_at = ?2 WHERE id = ?3",
            params![state, now_ms(), id],
        )?;
        Ok(())
    }

    /// Sets or clears the status a task pauses before.
    pub fn set_breakpoint(&self, id: i64, status: Option<&str>) -> Result<()> {
        self.exec(
            "UPDATE tasks SET breakpoint = ?1, updated_at = ?2 WHERE id = ?3",
            params![status, now_ms(), id],
        )?;
        Ok(())
    }

    /// Records the task's branch, worktree and the base branch it came from.
    pub fn set_worktree(
        &self,
        id: i64,
        branch: Option<&str>,
        worktree: Option<&str>,
        base: Option<&str>,
    ) -> Result<()> {
        self.exec(
            "UPDATE tasks SET branch = ?1, worktree = ?2, base_branch = ?3, updated_at = ?4 \
             WHERE id = ?5",
            params![branch, worktree, base, now_ms(), id],
        )?;
        Ok(())
    }

    /// Clears the worktree path (after removal); the branch is kept.
    pub fn clear_worktree(&self, id: i64) -> Result<()> {
        self.exec(
            "UPDATE tasks SET worktree = NULL, updated_at = ?1 WHERE id = ?2",
            params![now_ms(), id],
        )?;
        Ok(())
    }

    /// A workspace fact (e.g. `base_branch`).
    pub fn meta(&self, key: &str) -> Result<Option<String>> {
        Ok(self
            .one("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()?)
    }

    /// Records a workspace fact.
    pub fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        self.exec(
            "INSERT INTO meta (key, value) VALUES (?1, ?2) \
             ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            params![key, value],
        )?;
        Ok(())
    }

    /// Starts a new run for the task and makes it current; returns its id.
    pub fn insert_run(&self, task_id: i64, state: RunState) -> Result<i64> {
        let number: i64 = self.one(
            "SELECT COALESCE(MAX(number), 0) + 1 FROM runs WHERE task_id = ?1",
            [task_id],
            |r| r.get(0),
        )?;
        let id = self.insert(
            "INSERT INTO runs (task_id, number, state, started_at) VALUES (?1, ?2, ?3, ?4)",
            params![task_id, number, state, now_ms()],
        )?;
        // A task with a new run is at work again: it belongs on the board, even if it was
        // archived when its last run ended.
        self.exec(
            "UPDATE tasks SET run_id = ?1, updated_at = ?2, archived_at = NULL WHERE id = ?3",
            params![id, now_ms(), task_id],
        )?;
        Ok(id)
    }

    /// The run with this id.
    pub fn run(&self, id: i64) -> Result<Run> {
        Ok(self.one(
            "SELECT id, task_id, number, state, started_at, finished_at FROM runs WHERE id = ?1",
            [id],
            run_row,
        )?)
    }

    /// Sets a run's state; final states also set `finished_at`.
    pub fn set_run_state(&self, id: i64, state: RunState) -> Result<()> {
        let finished = match state {
            RunState::Completed | RunState::Failed | RunState::Cancelled => Some(now_ms()),
            _ => None,
        };
        self.exec(
            "UPDATE runs SET state = ?1, finished_at = ?2 WHERE id = ?3",
            params![state, finished, id],
        )?;
        Ok(())
    }

    /// Appends a transition-history row.
    #[allow(clippy::too_many_arguments)]
    pub fn insert_history(
        &self,
        task_id: i64,
        run_id: Option<i64>,
        from: Option<&str>,
        to: &str,
        trigger: &str,
        actor: &str,
        reason: Option<&str>,
        guards: &serde_json::Value,
        hooks: &serde_json::Value,
    ) -> Result<i64> {
        Ok(self.insert(
            "INSERT INTO history (task_id, run_id, from_status, to_status, trigger, actor, reason, \
             guards_json, hooks_json, at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![
                task_id,
                run_id,
                from,
                to,
                trigger,
                actor,
                reason,
                guards.to_string(),
                hooks.to_string(),
                now_ms()
            ],
        )?)
    }

    /// Replaces the hooks recorded on a history row (hooks run after the commit).
    pub fn set_history_hooks(&self, id: i64, hooks: &serde_json::Value) -> Result<()> {
        self.exec(
            "UPDATE history SET hooks_json = ?1 WHERE id = ?2",
            params![hooks.to_string(), id],
        )?;
        Ok(())
    }

    /// The hooks recorded on one history row.
    pub fn history_hooks(&self, id: i64) -> Result<serde_json::Value> {
        let text: String = self.one("SELECT hooks_json FROM history WHERE id = ?1", [id], |r| {
            r.get(0)
        })?;
        Ok(serde_json::from_str(&text)?)
    }

    /// A task's transition history, oldest first.
    pub fn history(&self, task_id: i64) -> Result<Vec<HistoryEntry>> {
        self.history_where("task_id = ?1 ORDER BY id", [task_id])
    }

    /// Every task's moves after history row `after`, oldest first, at most `limit` (what a
    /// headless engine prints as it happens).
    pub fn history_after(&self, after: i64, limit: i64) -> Result<Vec<HistoryEntry>> {
        self.history_where("id > ?1 ORDER BY id LIMIT ?2", [after, limit])
    }

    /// The id of the newest history row (0 when there is none).
    pub fn last_history_id(&self) -> Result<i64> {
        Ok(self.one("SELECT COALESCE(MAX(id), 0) FROM history", [], |r| r.get(0))?)
    }

    fn history_where<P: Params>(&self, clause: &str, params: P) -> Result<Vec<HistoryEntry>> {
        let rows = self.all(
            &format!(
                "SELECT id, task_id, run_id, from_status, to_status, trigger, actor, reason, \
                 guards_json, hooks_json, at FROM history WHERE {clause}"
            ),
            params,
            |r| {
                Ok((
                    HistoryEntry {
                        id: r.get(0)?,
                        task_id: r.get(1)?,
                        run_id: r.get(2)?,
                        from: r.get(3)?,
                        to: r.get(4)?,
                        trigger: r.get(5)?,
                        actor: r.get(6)?,
                        reason: r.get(7)?,
                        guards: serde_json::Value::Null,
                        hooks: serde_json::Value::Null,
                        at: r.get(10)?,
                    },
                    r.get::<String>(8)?,
                    r.get::<String>(9)?,
                ))
            },
        )?;
        let mut out = Vec::new();
        for (mut h, guards, hooks) in rows {
            h.guards = serde_json::from_str(&guards)?;
            h.hooks = serde_json::from_str(&hooks)?;
            out.push(h);
        }
        Ok(out)
    }

    /// How many times the task entered each status during a run (for `max_visits`).
    pub fn visits(&self, run_id: i64) -> Result<std::collections::HashMap<String, u32>> {
        let rows = self.all(
            "SELECT to_status, COUNT(*) FROM history WHERE run_id = ?1 \
             AND (from_status IS NULL OR from_status != to_status) GROUP BY to_status",
            [run_id],
            |r| Ok((r.get::<String>(0)?, r.get::<u32>(1)?)),
        )?;
        Ok(rows.into_iter().collect())
    }

    /// How many times a task entered `status` in a run (re-entering from itself does not
    /// count). Reads only that status's history rows.
    pub fn visits_of(&self, run_id: i64, status: &str) -> Result<u32> {
        Ok(self.one(
            "SELECT COUNT(*) FROM history WHERE run_id = ?1 AND to_status = ?2 \
             AND (from_status IS NULL OR from_status != to_status)",
            params![run_id, status],
            |r| r.get(0),
        )?)
    }

    /// How deep a task is in a chain of tasks made by other tasks (`start_task` hooks,
    /// `task_done` triggers, `push` triggers on a task's branch; 0: made by a person or
    /// another trigger).
    pub fn task_depth(&self, id: i64) -> Result<i64> {
        Ok(self.one("SELECT depth FROM tasks WHERE id = ?1", [id], |r| r.get(0))?)
    }

    /// Records the task whose hook or end created this one.
    pub fn set_task_parent(&self, id: i64, parent: i64, depth: i64) -> Result<()> {
        self.exec(
            "UPDATE tasks SET parent_id = ?1, depth = ?2 WHERE id = ?3",
            params![parent, depth, id],
        )?;
        Ok(())
    }
}
