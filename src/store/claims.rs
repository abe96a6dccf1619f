//! Claims on step runs. A claim moves a pending step run to running for one engine, with a
//! lease (until when, by the database's clock, the engine counts as running it; renewed by
//! its heartbeats) and a fence: a number unique per claim, growing across the board. Every
//! later write the engine makes for the step (a renewal, its result) names the fence and
//! lands only while the row is still running under it, so an engine that was cut off,
//! paused or overtaken commits nothing stale.

use super::sql::{Optional, params};
use super::steps::{STEP_COLS, step_row};
use super::{Db, Result, StepRun};

/// The engine claiming a step, and how long its lease lasts.
#[derive(Debug, Clone, Copy)]
pub struct ClaimBy<'a> {
    pub engine: &'a str,
    pub lease_ms: i64,
}

/// A claimed step run and its fence (`None` for a claim that names no engine).
#[derive(Debug, Clone)]
pub struct StepClaim {
    pub step: StepRun,
    pub fence: Option<i64>,
}

/// A running step whose lease ran out, and the engine that held it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expired {
    pub step_run_id: i64,
    pub engine: Option<String>,
}

impl Db<'_> {
    /// The next fence number of the board (kept in `meta`, so it only grows).
    fn next_fence(&self) -> Result<i64> {
        Ok(self.one(
            "INSERT INTO meta (key, value) VALUES ('fence', '1') ON CONFLICT(key) DO UPDATE \
             SET value = CAST(CAST(meta.value AS BIGINT) + 1 AS TEXT) \
             RETURNING CAST(value AS BIGINT)",
            [],
            |r| r.get(0),
        )?)
    }

    /// Moves a pending step run to running. Returns false if it was no longer pending
    /// (claimed, cancelled), so a step is started at most once.
    pub fn claim_step_run(&self, id: i64, now: i64) -> Result<bool> {
        Ok(self.claim_step_run_by(id, now, None)?.is_some())
    }

    /// [`Db::claim_step_run`] for engine `by`: the claim names it, and gets a lease and a
    /// fence. `None` when the row was no longer pending.
    pub fn claim_step_run_by(
        &self,
        id: i64,
        now: i64,
        by: Option<&ClaimBy>,
    ) -> Result<Option<StepClaim>> {
        let (engine, fence, lease) = match by {
            Some(b) => {
                let until = self.engine_clock()? + b.lease_ms;
                (Some(b.engine), Some(self.next_fence()?), Some(until))
            }
            None => (None, None, None),
        };
        let step = self
            .one(
                &format!(
                    "UPDATE step_runs SET state = 'running', started_at = ?1, engine = ?3, \
                     fence = ?4, lease_until = ?5 WHERE id = ?2 AND state = 'pending' \
                     RETURNING {STEP_COLS}"
                ),
                params![now, id, engine, fence, lease],
                step_row,
            )
            .optional()?;
        Ok(step.map(|step| StepClaim { step, fence }))
    }

    /// Claims up to `limit` pending step runs whose time has come, oldest first, for `by`;
    /// returns them as claimed. Only a pending row is claimed, so a step is started at most
    /// once. On PostgreSQL the rows are locked as they are read, skipping rows another
    /// transaction holds.
    pub fn claim_due_step_runs(
        &self,
        now: i64,
        limit: i64,
        by: Option<&ClaimBy>,
    ) -> Result<Vec<StepClaim>> {
        let lock = if self.is_postgres() {
            " FOR UPDATE SKIP LOCKED"
        } else {
            ""
        };
        let ids: Vec<i64> = self.all(
            &format!(
                "SELECT id FROM step_runs WHERE state = 'pending' AND not_before <= ?1 \
                 ORDER BY id LIMIT ?2{lock}"
            ),
            params![now, limit],
            |r| r.get(0),
        )?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(c) = self.claim_step_run_by(id, now, by)? {
                out.push(c);
            }
        }
        Ok(out)
    }

    /// Renews the lease of a step engine `engine` runs under `fence`; false when the row is
    /// no longer running under that claim (reaped, aborted, moved on).
    pub fn renew_lease(&self, id: i64, engine: &str, fence: i64, lease_ms: i64) -> Result<bool> {
        let until = self.engine_clock()? + lease_ms;
        let n = self.exec(
            "UPDATE step_runs SET lease_until = ?1 \
             WHERE id = ?2 AND engine = ?3 AND fence = ?4 AND state = 'running'",
            params![until, id, engine, fence],
        )?;
        Ok(n == 1)
    }

    /// The step runs running under engine `engine`'s claims: (id, fence).
    pub fn held_step_runs(&self, engine: &str) -> Result<Vec<(i64, Option<i64>)>> {
        Ok(self.all(
            "SELECT id, fence FROM step_runs WHERE state = 'running' AND engine = ?1",
            [engine],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?)
    }

    /// The engine step run `id` was claimed by, if one was named.
    pub fn step_engine(&self, id: i64) -> Result<Option<String>> {
        Ok(
            self.one("SELECT engine FROM step_runs WHERE id = ?1", [id], |r| {
                r.get(0)
            })?,
        )
    }

    /// The fence of step run `id`'s claim, if it has one.
    pub fn step_fence(&self, id: i64) -> Result<Option<i64>> {
        Ok(
            self.one("SELECT fence FROM step_runs WHERE id = ?1", [id], |r| {
                r.get(0)
            })?,
        )
    }

    /// True while step run `id` is running under engine `engine`'s claim `fence`.
    pub fn holds_step_run(&self, id: i64, engine: &str, fence: i64) -> Result<bool> {
        Ok(self
            .one(
                "SELECT 1 FROM step_runs \
                 WHERE id = ?1 AND engine = ?2 AND fence = ?3 AND state = 'running'",
                params![id, engine, fence],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }

    /// Running step runs whose lease ran out by the database's clock. A row with no lease
    /// (claimed before leases existed, or with no engine named) never expires.
    pub fn expired_leases(&self) -> Result<Vec<Expired>> {
        let now = self.engine_clock()?;
        Ok(self.all(
            "SELECT id, engine FROM step_runs WHERE state = 'running' \
             AND lease_until IS NOT NULL AND lease_until < ?1 ORDER BY id",
            [now],
            |r| {
                Ok(Expired {
                    step_run_id: r.get(0)?,
                    engine: r.get(1)?,
                })
            },
        )?)
    }

    /// The engine a task's steps run on (its home, holding its worktree), once one ran a
    /// step of it on a shared board.
    pub fn task_home(&self, task_id: i64) -> Result<Option<String>> {
        Ok(self
            .one(
                "SELECT home_engine FROM tasks WHERE id = ?1",
                [task_id],
                |r| r.get(0),
            )
            .optional()?
            .flatten())
    }

    /// Makes engine `engine` the task's home.
    pub fn set_task_home(&self, task_id: i64, engine: &str) -> Result<()> {
        self.exec(
            "UPDATE tasks SET home_engine = ?1 WHERE id = ?2",
            params![engine, task_id],
        )?;
        Ok(())
    }
}
