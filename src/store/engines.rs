//! The engines registered on a board: one row per name, saying where it runs, its labels,
//! and when it was last seen. A running engine renews its heartbeat; a row whose heartbeat
//! is older than its lease belongs to an engine that is gone (killed, cut off), and its
//! name may be taken again.

use super::sql::{Optional, Row, SqlResult, params};
use super::{Db, Result, now_ms};

/// One engine as registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineRow {
    pub name: String,
    pub host: String,
    pub pid: i64,
    /// Lowercase words; a step that requires labels runs only on an engine with all of them.
    pub labels: Vec<String>,
    /// The baton version it runs.
    pub version: String,
    pub started_at: i64,
    pub heartbeat_at: i64,
    /// How long after its last heartbeat the engine counts as gone.
    pub lease_ms: i64,
    /// Set by a clean stop.
    pub stopped_at: Option<i64>,
}

impl EngineRow {
    /// True while the engine runs, as far as the board can tell at `now`: it has not
    /// stopped, and its last heartbeat is within its lease.
    pub fn live_at(&self, now: i64) -> bool {
        self.stopped_at.is_none() && now - self.heartbeat_at < self.lease_ms
    }

    /// True when the engine has every label in `required`.
    pub fn has_labels(&self, required: &[String]) -> bool {
        required.iter().all(|l| self.labels.contains(l))
    }
}

/// An engine as the board sees it now: its row, whether it runs, and how many steps it
/// runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineView {
    pub row: EngineRow,
    pub live: bool,
    /// Step runs it started that are still running.
    pub running: i64,
    /// Milliseconds since its last heartbeat.
    pub seen_ago_ms: i64,
}

/// An engine asking for its name.
#[derive(Debug, Clone)]
pub struct NewEngine<'a> {
    pub name: &'a str,
    pub host: &'a str,
    pub pid: i64,
    pub labels: &'a [String],
    pub version: &'a str,
    pub lease_ms: i64,
}

/// Which holder of a name that still looks live a registration may take the name from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TakeOver {
    /// None: a live holder keeps its name.
    None,
    /// Any: the caller knows that no other engine can be running on this board (an SQLite
    /// board, whose engine holds the workspace's lock), so a row that still looks live is
    /// one whose engine died before its lease ran out.
    Any,
    /// The holder on the registering engine's host with this pid, which the caller found
    /// gone from that host (killed before its lease ran out).
    Gone(i64),
}

/// What registering found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registered {
    /// The name is this engine's now; `previous` is the row it replaced, if any.
    Taken { previous: Option<EngineRow> },
    /// A live engine holds the name; nothing was written.
    Held { holder: EngineRow, seen_ago_ms: i64 },
}

const COLS: &str =
    "name, host, pid, labels, version, started_at, heartbeat_at, lease_ms, stopped_at";

fn engine_row(r: &Row) -> SqlResult<EngineRow> {
    let labels: String = r.get(3)?;
    Ok(EngineRow {
        name: r.get(0)?,
        host: r.get(1)?,
        pid: r.get(2)?,
        labels: labels
            .split(',')
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect(),
        version: r.get(4)?,
        started_at: r.get(5)?,
        heartbeat_at: r.get(6)?,
        lease_ms: r.get(7)?,
        stopped_at: r.get(8)?,
    })
}

impl Db<'_> {
    /// The clock engine times are read from, in milliseconds since the epoch: heartbeats,
    /// leases and "last seen" all use this one, so engines on machines whose clocks differ
    /// still agree: PostgreSQL's own clock on a board kept there; on SQLite's board, which
    /// has one machine, that machine's.
    pub fn engine_clock(&self) -> Result<i64> {
        if !self.is_postgres() {
            return Ok(now_ms());
        }
        Ok(self.one(
            "SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
            [],
            |r| r.get(0),
        )?)
    }

    /// Registers an engine under its name, unless a live engine holds that name; `over`
    /// says which holder that still looks live is known to be dead, and loses it.
    pub fn register_engine(&self, e: &NewEngine, over: TakeOver) -> Result<Registered> {
        let now = self.engine_clock()?;
        let previous = self.engine(e.name)?;
        let dead = |p: &EngineRow| match over {
            TakeOver::None => false,
            TakeOver::Any => true,
            TakeOver::Gone(pid) => p.host == e.host && p.pid == pid,
        };
        if let Some(p) = &previous
            && p.live_at(now)
            && !(p.host == e.host && p.pid == e.pid)
            && !dead(p)
        {
            return Ok(Registered::Held {
                holder: p.clone(),
                seen_ago_ms: now - p.heartbeat_at,
            });
        }
        self.exec(
            "INSERT INTO engines (name, host, pid, labels, version, started_at, heartbeat_at, \
             lease_ms, stopped_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7, NULL) \
             ON CONFLICT(name) DO UPDATE SET host = excluded.host, pid = excluded.pid, \
             labels = excluded.labels, version = excluded.version, \
             started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at, \
             lease_ms = excluded.lease_ms, stopped_at = NULL",
            params![
                e.name,
                e.host,
                e.pid,
                e.labels.join(","),
                e.version,
                now,
                e.lease_ms
            ],
        )?;
        Ok(Registered::Taken { previous })
    }

    /// Renews an engine's heartbeat. False when the row is no longer this engine's (another
    /// took the name over after its lease ran out).
    pub fn engine_heartbeat(&self, name: &str, host: &str, pid: i64) -> Result<bool> {
        let now = self.engine_clock()?;
        let n = self.exec(
            "UPDATE engines SET heartbeat_at = ?1 \
             WHERE name = ?2 AND host = ?3 AND pid = ?4 AND stopped_at IS NULL",
            params![now, name, host, pid],
        )?;
        Ok(n == 1)
    }

    /// Marks an engine's clean stop (its row stays, for `baton engines`).
    pub fn engine_stopped(&self, name: &str, host: &str, pid: i64) -> Result<()> {
        let now = self.engine_clock()?;
        self.exec(
            "UPDATE engines SET stopped_at = ?1, heartbeat_at = ?1 \
             WHERE name = ?2 AND host = ?3 AND pid = ?4 AND stopped_at IS NULL",
            params![now, name, host, pid],
        )?;
        Ok(())
    }

    /// The engine registered under `name`.
    pub fn engine(&self, name: &str) -> Result<Option<EngineRow>> {
        Ok(self
            .one(
                &format!("SELECT {COLS} FROM engines WHERE name = ?1"),
                [name],
                engine_row,
            )
            .optional()?)
    }

    /// Every engine ever registered, by name, with whether it runs now and how many steps
    /// it runs.
    pub fn engine_views(&self) -> Result<Vec<EngineView>> {
        let now = self.engine_clock()?;
        let rows = self.all(
            &format!("SELECT {COLS} FROM engines ORDER BY name"),
            [],
            engine_row,
        )?;
        // Only open step runs are read, through their partial index.
        let counts: Vec<(String, i64)> = self.all(
            "SELECT engine, COUNT(*) FROM step_runs INDEXED BY step_runs_open \
             WHERE state IN ('pending', 'running') AND state = 'running' \
             AND engine IS NOT NULL GROUP BY engine",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        Ok(rows
            .into_iter()
            .map(|row| EngineView {
                live: row.live_at(now),
                running: counts
                    .iter()
                    .find(|(n, _)| *n == row.name)
                    .map_or(0, |(_, c)| *c),
                seen_ago_ms: (now - row.heartbeat_at).max(0),
                row,
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    fn new<'a>(name: &'a str, host: &'a str, pid: i64, labels: &'a [String]) -> NewEngine<'a> {
        NewEngine {
            name,
            host,
            pid,
            labels,
            version: "0.1.0",
            lease_ms: 15_000,
        }
    }

    #[test]
    fn a_live_name_is_held_a_stale_or_stopped_one_is_taken() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("t.db")).unwrap();
        let gpu = vec!["gpu".to_string()];
        let first = store
            .write(|db| db.register_engine(&new("x", "a", 1, &gpu), TakeOver::None))
            .unwrap();
        assert_eq!(first, Registered::Taken { previous: None });
        // Another host asks while the first is live: refused, nothing written.
        let second = store
            .write(|db| db.register_engine(&new("x", "b", 2, &[]), TakeOver::None))
            .unwrap();
        assert!(
            matches!(&second, Registered::Held { holder, .. } if holder.host == "a" && holder.pid == 1),
            "{second:?}"
        );
        let row = store.read().engine("x").unwrap().unwrap();
        assert_eq!((row.host.as_str(), row.labels.clone()), ("a", gpu.clone()));
        // Its heartbeat older than its lease: the name is taken over.
        store
            .write(|db| {
                db.exec(
                    "UPDATE engines SET heartbeat_at = heartbeat_at - 16000 WHERE name = 'x'",
                    [],
                )?;
                Ok::<_, crate::store::StoreError>(())
            })
            .unwrap();
        assert!(!store.read().engine_views().unwrap()[0].live);
        let third = store
            .write(|db| db.register_engine(&new("x", "b", 2, &[]), TakeOver::None))
            .unwrap();
        assert!(matches!(third, Registered::Taken { previous: Some(p) } if p.pid == 1));
        // The old engine's heartbeat no longer lands; the new one's does.
        assert!(!store.write(|db| db.engine_heartbeat("x", "a", 1)).unwrap());
        assert!(store.write(|db| db.engine_heartbeat("x", "b", 2)).unwrap());
        // A clean stop frees the name at once.
        store.write(|db| db.engine_stopped("x", "b", 2)).unwrap();
        let views = store.read().engine_views().unwrap();
        assert!(!views[0].live && views[0].row.stopped_at.is_some());
        let fourth = store
            .write(|db| db.register_engine(&new("x", "c", 3, &[]), TakeOver::None))
            .unwrap();
        assert!(matches!(fourth, Registered::Taken { .. }));
        // The only engine a board can have (`sole`) takes a live-looking name.
        let fifth = store
            .write(|db| db.register_engine(&new("x", "d", 4, &[]), TakeOver::Any))
            .unwrap();
        assert!(matches!(fifth, Registered::Taken { previous: Some(p) } if p.host == "c"));
    }

    #[test]
    fn a_live_looking_holder_found_gone_from_this_host_loses_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("t.db")).unwrap();
        let mut register = |host: &str, pid: i64, over: TakeOver| {
            store
                .write(|db| db.register_engine(&new("x", host, pid, &[]), over))
                .unwrap()
        };
        assert_eq!(
            register("a", 1, TakeOver::None),
            Registered::Taken { previous: None }
        );
        // Another pid found gone, or the same pid on another host: the holder keeps it.
        for (host, gone) in [("a", 3), ("b", 1)] {
            let out = register(host, 2, TakeOver::Gone(gone));
            assert!(
                matches!(&out, Registered::Held { holder, .. } if holder.pid == 1),
                "{host} {gone}: {out:?}"
            );
        }
        // The holder itself found gone from its host: taken over, as an expired lease is,
        // and the row it replaces says it did not stop cleanly.
        let out = register("a", 2, TakeOver::Gone(1));
        assert!(
            matches!(&out, Registered::Taken { previous: Some(p) }
                if p.pid == 1 && p.stopped_at.is_none()),
            "{out:?}"
        );
    }
}
