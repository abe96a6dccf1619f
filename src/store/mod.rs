//! The SQLite store: schema, migrations and every query. No other module writes SQL.
//!
//! Writes go through [`Store::write`], which runs a closure inside one `BEGIN IMMEDIATE`
//! transaction; reads use [`Store::read`]. Both hand the closure a [`Db`], the one type that
//! carries the typed queries, so a read helper is usable inside a write transaction too.

mod cards;
mod commands;
mod events;
mod followups;
mod handle;
mod logs;
mod schema;
mod snapshots;
mod steps;
mod tasks;
mod types;

pub use cards::TaskCard;
pub use followups::FollowupRow;
pub use handle::StoreHandle;
pub use steps::StepResult;
pub use tasks::TaskFilter;
pub use types::*;

use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What can go wrong talking to the database.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database {path}: {source} — check the file is not corrupt and the folder is writable")]
    Open {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error(
        "database {path} was written by a newer baton (schema {found}, this one knows {known}) — upgrade baton"
    )]
    TooNew {
        path: PathBuf,
        found: i64,
        known: i64,
    },
    #[error("database error: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("stored JSON is malformed: {0}")]
    Json(#[from] serde_json::Error),
    #[error("task {0} does not exist — `baton list` shows the tasks")]
    NoTask(i64),
    #[error("{0}")]
    Conflict(String),
    #[error("the pipeline snapshot of task {task} is unreadable ({source}) — the database may be from another baton version")]
    Snapshot {
        task: i64,
        #[source]
        source: serde_json::Error,
    },
    #[error("the store has stopped")]
    Closed,
}

/// Result alias for store operations.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// One connection to a workspace database.
pub struct Store {
    conn: Connection,
    path: PathBuf,
    pipelines: snapshots::SnapshotCache,
}

/// Typed queries over a connection or an open transaction.
pub struct Db<'c> {
    conn: &'c Connection,
    pipelines: &'c snapshots::SnapshotCache,
}

impl Store {
    /// Opens (creating if needed) the database at `path` and brings its schema up to date.
    pub fn open(path: &Path) -> Result<Self> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let open_err = |source| StoreError::Open {
            path: path.to_path_buf(),
            source,
        };
        let conn = Connection::open_with_flags(path, flags).map_err(open_err)?;
        conn.busy_timeout(Duration::from_secs(10))
            .map_err(open_err)?;
        conn.set_prepared_statement_cache_capacity(128);
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             PRAGMA synchronous = NORMAL;
             PRAGMA foreign_keys = ON;",
        )
        .map_err(open_err)?;
        let mut store = Store {
            conn,
            path: path.to_path_buf(),
            pipelines: Default::default(),
        };
        schema::migrate(&mut store.conn, path)?;
        Ok(store)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` inside one `BEGIN IMMEDIATE` transaction; commits when it returns `Ok`.
    pub fn write<T, E>(&mut self, f: impl FnOnce(&Db) -> Result<T, E>) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(StoreError::from)?;
        let out = f(&Db {
            conn: &tx,
            pipelines: &self.pipelines,
        })?;
        tx.commit().map_err(StoreError::from)?;
        Ok(out)
    }

    /// Read-only access outside a transaction.
    pub fn read(&self) -> Db<'_> {
        Db {
            conn: &self.conn,
            pipelines: &self.pipelines,
        }
    }

    /// `PRAGMA integrity_check`; `Ok(())` when the database is sound.
    pub fn integrity_check(&self) -> Result<()> {
        let verdict: String = self
            .conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
        if verdict == "ok" {
            Ok(())
        } else {
            Err(StoreError::Conflict(format!("integrity_check: {verdict}")))
        }
    }

    /// A number that changes whenever another connection commits (`PRAGMA data_version`);
    /// lets a client refresh only when something changed.
    pub fn data_version(&self) -> Result<i64> {
        self.read().data_version()
    }
}

impl Db<'_> {
    /// Runs a statement through the connection's prepared-statement cache: SQL is parsed
    /// once per connection, not once per call.
    fn exec<P: rusqlite::Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize> {
        self.conn.prepare_cached(sql)?.execute(params)
    }

    /// One row of a cached statement.
    fn one<T, P, F>(&self, sql: &str, params: P, f: F) -> rusqlite::Result<T>
    where
        P: rusqlite::Params,
        F: FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    {
        self.conn.prepare_cached(sql)?.query_row(params, f)
    }

    /// See [`Store::data_version`].
    pub fn data_version(&self) -> Result<i64> {
        Ok(self
            .conn
            .query_row("PRAGMA data_version", [], |r| r.get(0))?)
    }
}

/// Milliseconds since the Unix epoch: the store's clock.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Formats a store timestamp as RFC 3339 with milliseconds (UTC).
pub fn rfc3339(ms: i64) -> String {
    let t = UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_millis(t).to_string()
}
