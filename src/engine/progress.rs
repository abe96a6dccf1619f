//! What a headless engine (`baton engine`) prints as it works, read through its own store
//! handle: the moves made and the problems recorded since the last look.

use super::Engine;
use crate::store::{Event, HistoryEntry, StoreHandle};

/// How many rows one look reads.
pub const BATCH: usize = 200;

/// Reads an engine's progress after what was read before.
pub struct Progress {
    store: StoreHandle,
}

impl Engine {
    /// A reader of this engine's progress, for the process that runs it.
    pub fn progress(&self) -> Progress {
        Progress {
            store: self.store.clone(),
        }
    }
}

impl Progress {
    /// The id of the last move recorded (0: none).
    pub async fn last_move(&self) -> i64 {
        self.store
            .read(|db| db.last_history_id())
            .await
            .unwrap_or(0)
    }

    /// At most [`BATCH`] moves after move `after`, each with its task's title.
    pub async fn moves_after(&self, after: i64) -> Option<Vec<(HistoryEntry, String)>> {
        self.store
            .read(move |db| {
                let moves = db.history_after(after, BATCH as i64)?;
                let mut out = Vec::with_capacity(moves.len());
                for mut h in moves {
                    let title = db.task(h.task_id).map(|t| t.title).unwrap_or_default();
                    // A step's failure moves the task with no reason of its own: the
                    // step's error is the reason a log of moves needs.
                    if matches!(h.trigger.as_str(), "failure" | "error") && h.reason.is_none() {
                        h.reason = failed_step(db, &h)?;
                    }
                    out.push((h, title));
                }
                Ok::<_, crate::store::StoreError>(out)
            })
            .await
            .ok()
    }

    /// The id of the last event recorded (0: none).
    pub async fn last_event(&self) -> i64 {
        self.store.read(|db| db.last_event_id()).await.unwrap_or(0)
    }

    /// The warnings and errors recorded after event `after`.
    pub async fn problems_after(&self, after: i64) -> Option<Vec<Event>> {
        self.store
            .read(move |db| db.problems_after(after))
            .await
            .ok()
    }
}

/// Why the step whose end made move `h` failed: the last step of its run at the status it
/// left, ended by then.
fn failed_step(db: &crate::store::Db, h: &HistoryEntry) -> crate::store::Result<Option<String>> {
    let step = db.step_runs(h.task_id)?.into_iter().rev().find(|s| {
        Some(s.run_id) == h.run_id
            && h.from.as_deref() == Some(s.status.as_str())
            && s.finished_at.is_some_and(|at| at <= h.at)
    });
    Ok(step.as_ref().and_then(super::waited::step_failure))
}
