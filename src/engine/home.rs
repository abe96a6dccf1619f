//! A task's home engine on a board several engines share. The first engine to run a step
//! of a task becomes its home: its machine holds the task's worktree, so the task's later
//! steps wait for it. Once the home engine has been gone longer than `takeover_after`
//! (its heartbeat, or its clean stop, that long ago by the database's clock), another
//! engine may take the task over; it makes the worktree again from the pushed task branch.
//! On SQLite one engine runs the board, and every task is its own.

use super::engines::Identity;
use crate::store::{Db, NewEvent, Result};
use serde_json::json;

/// What one look over the pending steps has read of the engines: their rows and the
/// database's clock, read once however many steps wait for them.
#[derive(Default)]
pub(super) struct Seen {
    clock: Option<i64>,
    engines: std::collections::HashMap<String, Option<crate::store::EngineRow>>,
}

impl Seen {
    fn engine(&mut self, db: &Db, name: &str) -> Result<Option<crate::store::EngineRow>> {
        if let Some(row) = self.engines.get(name) {
            return Ok(row.clone());
        }
        let row = db.engine(name)?;
        self.engines.insert(name.to_string(), row.clone());
        Ok(row)
    }

    fn clock(&mut self, db: &Db) -> Result<i64> {
        match self.clock {
            Some(now) => Ok(now),
            None => {
                let now = db.engine_clock()?;
                self.clock = Some(now);
                Ok(now)
            }
        }
    }
}

/// True when engine `me` may run the next step of task `task_id`, which requires labels
/// `required`: the task has no home yet, its home is `me`, its home lacks those labels (the
/// task must move), or its home has been gone past the grace.
pub(super) fn may_claim(
    db: &Db,
    me: &Identity,
    task_id: i64,
    required: &[String],
    seen: &mut Seen,
) -> Result<bool> {
    if !db.is_postgres() {
        return Ok(true);
    }
    let home = match db.task_home(task_id)? {
        None => return Ok(true),
        Some(home) if home == me.name => return Ok(true),
        Some(home) => home,
    };
    let Some(row) = seen.engine(db, &home)? else {
        return Ok(true);
    };
    if !row.has_labels(required) {
        return Ok(true);
    }
    let gone = gone_for(seen.clock(db)?, &row);
    Ok(gone.is_some_and(|ms| ms >= me.takeover_after.as_millis() as i64))
}

/// How long (ms) the engine of `row` has been gone at `now` (the database's clock); `None`
/// while it runs.
fn gone_for(now: i64, row: &crate::store::EngineRow) -> Option<i64> {
    let last = match row.stopped_at {
        Some(at) => at,
        None if row.live_at(now) => return None,
        // Not heard from: it counts as gone from the moment its lease ran out.
        None => row.heartbeat_at + row.lease_ms,
    };
    Some((now - last).max(0))
}

/// Records engine `me` as the home of task `task_id`, whose step it just claimed: the
/// first claim makes it the home, and a claim from another engine's task (allowed by
/// [`may_claim`]) takes the task over, with an event saying from whom.
pub(super) fn settle(db: &Db, me: &Identity, task_id: i64) -> Result<()> {
    if !db.is_postgres() {
        return Ok(());
    }
    match db.task_home(task_id)? {
        Some(home) if home == me.name => Ok(()),
        None => db.set_task_home(task_id, &me.name),
        Some(home) => {
            let gone_s = match db.engine(&home)? {
                Some(row) => gone_for(db.engine_clock()?, &row).unwrap_or(0) / 1000,
                None => 0,
            };
            db.set_task_home(task_id, &me.name)?;
            db.insert_event(&NewEvent {
                task_id: Some(task_id),
                category: "lifecycle",
                kind: "task.taken_over",
                summary: format!(
                    "engine `{}` took the task over from `{home}` (gone for {gone_s} s, or without the labels the step needs); its worktree is made again from the task branch",
                    me.name
                ),
                data: json!({ "from": home, "to": me.name, "gone_s": gone_s }),
                actor: "engine",
                level: "warn",
            })?;
            Ok(())
        }
    }
}
