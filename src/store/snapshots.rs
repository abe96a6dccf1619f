//! Tasks' pipeline snapshots: stored once per distinct definition, apart from the task rows,
//! and parsed once per connection. A snapshot never changes once written, so the engine
//! pays for reading and parsing a long pipeline once, not once per step.

use super::sql::{Error, Value};
use super::{Db, Result, StoreError};
use crate::pipeline::Pipeline;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

/// Parsed snapshots kept at most; past that the cache starts over (running tasks refill it).
const CAPACITY: usize = 256;

/// Parsed pipeline snapshots by snapshot id, and tasks' snapshot ids (which never change),
/// private to one connection's thread.
#[derive(Default)]
pub struct SnapshotCache(
    RefCell<HashMap<i64, Arc<Pipeline>>>,
    RefCell<HashMap<i64, i64>>,
);

/// FNV-1a over the JSON text: finds an identical stored snapshot to share (the text is
/// compared too, so a collision only costs a new row).
fn fingerprint(json: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in json.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}:{}", json.len())
}

impl SnapshotCache {
    /// Forgets everything: after a rollback, a task id (and snapshot id) may be handed out
    /// again for another task.
    pub fn clear(&self) {
        self.0.borrow_mut().clear();
        self.1.borrow_mut().clear();
    }
}

impl Db<'_> {
    /// The id of a stored snapshot with exactly this text, stored now if there is none.
    pub(super) fn snapshot_id(&self, json: &str) -> Result<i64> {
        let fp = fingerprint(json);
        // Ids of the stored snapshots with this fingerprint whose text is this one (the
        // text is compared where it lies, not copied out).
        let same = self.all(
            "SELECT id, json FROM snapshots WHERE fingerprint = ?1",
            [&fp],
            |r| {
                Ok(match r.value(1)? == Value::Text(json) {
                    true => Some(r.get::<i64>(0)?),
                    false => None,
                })
            },
        )?;
        if let Some(id) = same.into_iter().flatten().next() {
            return Ok(id);
        }
        Ok(self.insert(
            "INSERT INTO snapshots (fingerprint, json) VALUES (?1, ?2)",
            [fp.as_str(), json],
        )?)
    }

    fn snapshot_of(&self, task_id: i64) -> Result<i64> {
        if let Some(id) = self.pipelines.1.borrow().get(&task_id) {
            return Ok(*id);
        }
        let id = self
            .one(
                "SELECT snapshot_id FROM tasks WHERE id = ?1",
                [task_id],
                |r| r.get(0),
            )
            .map_err(|e| match e {
                Error::NoRows => StoreError::NoTask(task_id),
                e => e.into(),
            })?;
        let mut tasks = self.pipelines.1.borrow_mut();
        if tasks.len() >= CAPACITY * 16 {
            tasks.clear();
        }
        tasks.insert(task_id, id);
        Ok(id)
    }

    /// The pipeline a task was created with (its snapshot), parsed.
    pub fn pipeline(&self, task_id: i64) -> Result<Arc<Pipeline>> {
        let snapshot = self.snapshot_of(task_id)?;
        if let Some(p) = self.pipelines.0.borrow().get(&snapshot) {
            return Ok(p.clone());
        }
        let json = self.pipeline_json(task_id)?;
        let parsed: Pipeline =
            serde_json::from_str(&json).map_err(|source| StoreError::Snapshot {
                task: task_id,
                source,
            })?;
        let parsed = Arc::new(parsed);
        let mut cache = self.pipelines.0.borrow_mut();
        if cache.len() >= CAPACITY {
            cache.clear();
        }
        cache.insert(snapshot, parsed.clone());
        Ok(parsed)
    }

    /// The snapshot's JSON text, as stored.
    pub fn pipeline_json(&self, task_id: i64) -> Result<String> {
        self.one(
            "SELECT s.json FROM tasks t JOIN snapshots s ON s.id = t.snapshot_id WHERE t.id = ?1",
            [task_id],
            |r| r.get(0),
        )
        .map_err(|e| match e {
            Error::NoRows => StoreError::NoTask(task_id),
            e => e.into(),
        })
    }
}
