//! Step runs: creation, claiming, results, process identity.

use super::sql::{Optional, Row, SqlResult, params};
use super::{Db, Result, StepRun, StepState, now_ms};

pub(super) const STEP_COLS: &str = "id, task_id, run_id, status, attempt, execution_key, state, exit_code, \
    outcome, error, note, not_before, created_at, started_at, finished_at, pid, pgid, proc_start, \
    session_id, usage_json, cost, tests_json, handoff_content, handoff_metadata, seq, \
    continued_from";

fn json_col(r: &Row, i: usize) -> SqlResult<Option<serde_json::Value>> {
    let text: Option<String> = r.get(i)?;
    Ok(text.and_then(|t| serde_json::from_str(&t).ok()))
}

pub(super) fn step_row(r: &Row) -> SqlResult<StepRun> {
    Ok(StepRun {
        id: r.get(0)?,
        task_id: r.get(1)?,
        run_id: r.get(2)?,
        status: r.get(3)?,
        attempt: r.get(4)?,
        execution_key: r.get(5)?,
        state: r.get(6)?,
        exit_code: r.get(7)?,
        outcome: r.get(8)?,
        error: r.get(9)?,
        note: r.get(10)?,
        not_before: r.get(11)?,
        created_at: r.get(12)?,
        started_at: r.get(13)?,
        finished_at: r.get(14)?,
        pid: r.get(15)?,
        pgid: r.get(16)?,
        proc_start: r.get(17)?,
        session_id: r.get(18)?,
        usage: json_col(r, 19)?,
        cost: r.get(20)?,
        tests: json_col(r, 21)?,
        handoff_content: r.get(22)?,
        handoff_metadata: json_col(r, 23)?,
        seq: r.get(24)?,
        continued_from: r.get(25)?,
    })
}

/// What a finished step reports.
#[derive(Debug, Clone, Default)]
pub struct StepResult {
    pub exit_code: Option<i64>,
    pub outcome: Option<String>,
    pub error: Option<String>,
    pub usage: Option<serde_json::Value>,
    pub cost: Option<f64>,
    pub tests: Option<serde_json::Value>,
    pub handoff_content: Option<String>,
    pub handoff_metadata: Option<serde_json::Value>,
}

impl Db<'_> {
    /// Creates a pending step run as the next attempt of `status` in `run_id`; the execution
    /// key is `run:status:attempt`. `not_before` delays it (retry backoff).
    pub fn insert_step_run(
        &self,
        task_id: i64,
        run_id: i64,
        status: &str,
        note: Option<&str>,
        not_before: i64,
    ) -> Result<StepRun> {
        let now = now_ms();
        // One statement: the attempt follows the status's latest in the run, and the
        // position the task's latest step run by id.
        // The parameters PostgreSQL cannot type from where they stand are cast.
        let (id, attempt, key, seq): (i64, i64, String, i64) = self.one(
            "INSERT INTO step_runs (task_id, run_id, status, attempt, execution_key, state, note, \
             not_before, created_at, seq) \
             SELECT CAST(?1 AS BIGINT), CAST(?2 AS BIGINT), CAST(?3 AS TEXT), a.n, \
             CAST(?2 AS TEXT) || ':' || ?3 || ':' || a.n, 'pending', CAST(?4 AS TEXT), \
             CAST(?5 AS BIGINT), CAST(?6 AS BIGINT), \
             COALESCE((SELECT seq FROM step_runs WHERE task_id = ?1 ORDER BY id DESC LIMIT 1), 0) + 1 \
             FROM (SELECT COALESCE(MAX(attempt), 0) + 1 AS n FROM step_runs \
                   WHERE run_id = ?2 AND status = ?3) a \
             RETURNING id, attempt, execution_key, seq",
            params![task_id, run_id, status, note, not_before, now],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )?;
        Ok(StepRun {
            id,
            task_id,
            run_id,
            status: status.to_string(),
            attempt,
            execution_key: key,
            state: StepState::Pending,
            exit_code: None,
            outcome: None,
            error: None,
            note: note.map(str::to_string),
            not_before,
            created_at: now,
            started_at: None,
            finished_at: None,
            pid: None,
            pgid: None,
            proc_start: None,
            session_id: None,
            usage: None,
            cost: None,
            tests: None,
            handoff_content: None,
            handoff_metadata: None,
            seq,
            continued_from: None,
        })
    }

    /// The step run with this id.
    pub fn step_run(&self, id: i64) -> Result<StepRun> {
        Ok(self.one(
            &format!("SELECT {STEP_COLS} FROM step_runs WHERE id = ?1"),
            [id],
            step_row,
        )?)
    }

    /// A task's step runs in the order they were created.
    pub fn step_runs(&self, task_id: i64) -> Result<Vec<StepRun>> {
        Ok(self.all(
            &format!("SELECT {STEP_COLS} FROM step_runs WHERE task_id = ?1 ORDER BY id"),
            [task_id],
            step_row,
        )?)
    }

    /// The step runs of a task from step run `from` on, oldest first.
    pub fn step_runs_from(&self, task_id: i64, from: i64) -> Result<Vec<StepRun>> {
        Ok(self.all(
            &format!(
                "SELECT {STEP_COLS} FROM step_runs WHERE task_id = ?1 AND id >= ?2 ORDER BY id"
            ),
            params![task_id, from],
            step_row,
        )?)
    }

    /// The ids of a task's step runs, oldest first.
    pub fn step_run_ids(&self, task_id: i64) -> Result<Vec<i64>> {
        Ok(self.all(
            "SELECT id FROM step_runs WHERE task_id = ?1 ORDER BY id",
            [task_id],
            |r| r.get(0),
        )?)
    }

    /// The step run a first look at a task's step runs starts at: the first one still
    /// pending or running, or started or ended at `since` (ms) or later; past the last
    /// when none is. One statement, so a step run made meanwhile is not skipped.
    pub fn steps_from_since(&self, task_id: i64, since: i64) -> Result<i64> {
        Ok(self.one(
            "SELECT COALESCE(MIN(CASE WHEN state IN ('pending', 'running') \
             OR started_at >= ?2 OR finished_at >= ?2 THEN id END), MAX(id) + 1, 1) \
             FROM step_runs WHERE task_id = ?1",
            params![task_id, since],
            |r| r.get(0),
        )?)
    }

    /// Step runs left `running`, oldest first (what recovery looks at).
    pub fn running_step_runs(&self) -> Result<Vec<StepRun>> {
        Ok(self.all(
            &format!(
                "SELECT {STEP_COLS} FROM step_runs INDEXED BY step_runs_open \
             WHERE state IN ('pending', 'running') AND state = 'running' ORDER BY id"
            ),
            [],
            step_row,
        )?)
    }

    /// The latest step run of a task (any state).
    pub fn last_step_run(&self, task_id: i64) -> Result<Option<StepRun>> {
        Ok(self
            .one(
                &format!(
                    "SELECT {STEP_COLS} FROM step_runs WHERE task_id = ?1 ORDER BY id DESC LIMIT 1"
                ),
                [task_id],
                step_row,
            )
            .optional()?)
    }

    /// True when an execution key already succeeded.
    pub fn key_succeeded(&self, key: &str) -> Result<bool> {
        Ok(self
            .one(
                "SELECT 1 FROM step_runs WHERE execution_key = ?1 AND state = 'succeeded'",
                [key],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }

    /// Records the process a running step started, for orphan cleanup after a crash.
    pub fn set_step_process(&self, id: i64, pid: i64, proc_start: Option<i64>) -> Result<()> {
        self.exec(
            "UPDATE step_runs SET pid = ?1, pgid = ?1, proc_start = ?2 WHERE id = ?3",
            params![pid, proc_start, id],
        )?;
        Ok(())
    }

    /// Records the session a step run continues (`None`: it fell back to a fresh one).
    pub fn set_step_continued(&self, id: i64, session: Option<&str>) -> Result<()> {
        self.exec(
            "UPDATE step_runs SET continued_from = ?1 WHERE id = ?2",
            params![session, id],
        )?;
        Ok(())
    }

    /// Records an agent backend's session id.
    pub fn set_step_session(&self, id: i64, session: &str) -> Result<()> {
        self.exec(
            "UPDATE step_runs SET session_id = ?1 WHERE id = ?2",
            params![session, id],
        )?;
        Ok(())
    }

    /// Finishes a step run if it is still running or pending; returns false when it had
    /// already reached a final state (e.g. an abort won the race).
    pub fn finish_step_run(&self, id: i64, state: StepState, res: &StepResult) -> Result<bool> {
        let n = self.exec(
            "UPDATE step_runs SET state = ?1, exit_code = ?2, outcome = ?3, error = ?4, \
             usage_json = ?5, cost = ?6, tests_json = ?7, handoff_content = ?8, \
             handoff_metadata = ?9, finished_at = ?10 \
             WHERE id = ?11 AND state IN ('pending', 'running')",
            params![
                state,
                res.exit_code,
                res.outcome,
                res.error,
                res.usage.as_ref().map(|v| v.to_string()),
                res.cost,
                res.tests.as_ref().map(|v| v.to_string()),
                res.handoff_content,
                res.handoff_metadata.as_ref().map(|v| v.to_string()),
                now_ms(),
                id
            ],
        )?;
        Ok(n == 1)
    }

    /// Ends every unfinished step run of a task with `state`; returns those that were running.
    pub fn end_open_step_runs(
        &self,
        task_id: i64,
        state: StepState,
        error: &str,
    ) -> Result<Vec<StepRun>> {
        let open = self.open_step_runs(task_id)?;
        for s in &open {
            self.finish_step_run(
                s.id,
                state,
                &StepResult {
                    error: Some(error.to_string()),
                    ..Default::default()
                },
            )?;
        }
        Ok(open
            .into_iter()
            .filter(|s| s.state == StepState::Running)
            .collect())
    }

    /// A task's pending or running step runs, oldest first.
    pub fn open_step_runs(&self, task_id: i64) -> Result<Vec<StepRun>> {
        Ok(self.all(
            &format!(
                "SELECT {STEP_COLS} FROM step_runs INDEXED BY step_runs_open \
             WHERE task_id = ?1 AND state IN ('pending', 'running') ORDER BY id"
            ),
            [task_id],
            step_row,
        )?)
    }

    /// Total cost of a run's steps so far.
    pub fn run_cost(&self, run_id: i64) -> Result<f64> {
        Ok(self.one(
            "SELECT COALESCE(SUM(cost), 0.0) FROM step_runs WHERE run_id = ?1",
            [run_id],
            |r| r.get(0),
        )?)
    }

    /// The most recent handoff of a run (content and metadata), if any step left one.
    pub fn last_handoff(&self, run_id: i64) -> Result<Option<StepRun>> {
        Ok(self
            .one(
                &format!(
                    "SELECT {STEP_COLS} FROM step_runs WHERE run_id = ?1 \
                     AND handoff_content IS NOT NULL AND state = 'succeeded' \
                     ORDER BY id DESC LIMIT 1"
                ),
                [run_id],
                step_row,
            )
            .optional()?)
    }
}

impl Db<'_> {
    /// Attempts of `status` in a run since the task last entered it (the entry's own
    /// attempt included) — what the retry limit counts.
    pub fn attempts_since_entry(&self, task_id: i64, run_id: i64, status: &str) -> Result<i64> {
        Ok(self.one(
            "SELECT COUNT(*) FROM step_runs WHERE run_id = ?1 AND status = ?2 AND created_at >= \
             COALESCE((SELECT MAX(at) FROM history WHERE task_id = ?3 AND run_id = ?1 \
                       AND to_status = ?2 AND trigger != 'resume'), 0)",
            params![run_id, status, task_id],
            |r| r.get(0),
        )?)
    }

    /// Pending step runs whose time has come, oldest first.
    pub fn due_step_runs(&self, now: i64, limit: i64) -> Result<Vec<StepRun>> {
        Ok(self.all(
            &format!(
                "SELECT {STEP_COLS} FROM step_runs WHERE state = 'pending' AND not_before <= ?1 \
             ORDER BY id LIMIT ?2"
            ),
            params![now, limit],
            step_row,
        )?)
    }

    /// Puts a step run claimed in this transaction back to pending (its engine may not run
    /// it).
    pub fn unclaim_step_run(&self, id: i64) -> Result<()> {
        self.exec(
            "UPDATE step_runs SET state = 'pending', started_at = NULL, engine = NULL, \
             fence = NULL, lease_until = NULL WHERE id = ?1 AND state = 'running'",
            [id],
        )?;
        Ok(())
    }

    /// The earliest `not_before` of a pending step run still in the future.
    pub fn next_due_after(&self, now: i64) -> Result<Option<i64>> {
        Ok(self.one(
            "SELECT MIN(not_before) FROM step_runs WHERE state = 'pending' AND not_before > ?1",
            [now],
            |r| r.get(0),
        )?)
    }

    /// True while any step run is pending or running.
    pub fn any_open_step_runs(&self) -> Result<bool> {
        Ok(self
            .one(
                "SELECT 1 FROM step_runs WHERE state IN ('pending', 'running') LIMIT 1",
                [],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }
}
