//! Tasks' pipeline snapshots, parsed once per connection. A snapshot is written when its
//! task is created and never changes, so a task's parsed pipeline can be kept: the engine
//! then pays for reading and parsing a long pipeline once per task, not once per step.

use super::{Db, Result, StoreError};
use crate::pipeline::Pipeline;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

/// Parsed snapshots kept at most; past that the cache starts over (running tasks refill it).
const CAPACITY: usize = 512;

/// Parsed pipeline snapshots by task id, private to one connection's thread.
#[derive(Default)]
pub struct SnapshotCache(RefCell<HashMap<i64, Arc<Pipeline>>>);

impl Db<'_> {
    /// The pipeline a task was created with (its snapshot), parsed.
    pub fn pipeline(&self, task_id: i64) -> Result<Arc<Pipeline>> {
        if let Some(p) = self.pipelines.0.borrow().get(&task_id) {
            return Ok(p.clone());
        }
        let json: String = self
            .conn
            .prepare_cached("SELECT pipeline_json FROM tasks WHERE id = ?1")?
            .query_row([task_id], |r| r.get(0))
            .map_err(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => StoreError::NoTask(task_id),
                e => e.into(),
            })?;
        let parsed: Pipeline = serde_json::from_str(&json).map_err(|source| {
            StoreError::Snapshot {
                task: task_id,
                source,
            }
        })?;
        let parsed = Arc::new(parsed);
        let mut cache = self.pipelines.0.borrow_mut();
        if cache.len() >= CAPACITY {
            cache.clear();
        }
        cache.insert(task_id, parsed.clone());
        Ok(parsed)
    }

    /// The snapshot's JSON text, as stored.
    pub fn pipeline_json(&self, task_id: i64) -> Result<String> {
        self.conn
            .prepare_cached("SELECT pipeline_json FROM tasks WHERE id = ?1")?
            .query_row([task_id], |r| r.get(0))
            .map_err(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => StoreError::NoTask(task_id),
                e => e.into(),
            })
    }
}
