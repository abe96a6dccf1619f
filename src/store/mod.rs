//! The store: schema, migrations and every query, in SQLite (the default) or PostgreSQL.
//! No other module writes SQL.
//!
//! Writes go through [`Store::write`], which runs a closure inside one write transaction
//! (`BEGIN IMMEDIATE` on SQLite; see `pg::conn` for PostgreSQL's); reads use
//! [`Store::read`]. Both hand the closure a [`Db`], the one type that carries the typed
//! queries, so a read helper is usable inside a write transaction too. Queries are written
//! once for both stores through the `sql` module.

mod backend;
mod cards;
mod claims;
mod commands;
mod deps;
mod dump;
mod engines;
mod events;
mod followups;
mod handle;
mod logs;
mod messages;
mod people;
pub mod pg;
mod prs;
mod schema;
mod snapshots;
pub(crate) mod sql;
mod step_executor;
mod steps;
mod task_edits;
mod tasks;
mod types;
mod verify;

pub use cards::TaskCard;
pub use claims::{ClaimBy, Expired, StepClaim};
pub use deps::Blocker;
pub use dump::Carried;
pub use engines::{EngineRow, EngineView, NewEngine, Registered, TakeOver};
pub use followups::FollowupRow;
pub use handle::{Reads, StoreHandle};
pub use messages::Message;
pub use pg::{Location, PgStore, PgTarget};
pub use prs::TaskPr;
pub use schema::SCHEMA_VERSION;
pub use steps::StepResult;
pub use tasks::TaskFilter;
pub use types::*;
pub use verify::schema_of;

use backend::{Backend, WriteTx};
use rusqlite::{Connection, OpenFlags};
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
    #[error(
        "database {path} is damaged ({detail}); baton has not written to it — restore it from a backup, or move it aside together with its -wal and -shm files to start a new board"
    )]
    Damaged { path: PathBuf, detail: String },
    #[error(
        "database {path} is from an older baton and needs an upgrade, which needs write access — run baton once where the folder is writable"
    )]
    ReadOnlyUpgrade { path: PathBuf },
    #[error("database {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("database error: {0}")]
    Sql(rusqlite::Error),
    #[error(
        "the board's database is locked: another program has held a write on .baton/baton.db for over 10 s (a `sqlite3` shell inside a transaction, say) — end that, then try again"
    )]
    Busy,
    #[error("stored JSON is malformed: {0}")]
    Json(#[from] serde_json::Error),
    #[error("task {0} does not exist — `baton list` shows the tasks")]
    NoTask(i64),
    #[error("{0}")]
    Conflict(String),
    #[error(
        "the pipeline snapshot of task {task} is unreadable ({source}) — the database may be from another baton version"
    )]
    Snapshot {
        task: i64,
        #[source]
        source: serde_json::Error,
    },
    #[error("the store has stopped")]
    Closed,
    /// A PostgreSQL board's failure, as a sentence naming the (redacted) URL.
    #[error("{0}")]
    Postgres(String),
    /// A row that does not read as the store expects, or a transaction PostgreSQL rolled
    /// back.
    #[error("database error: {0}")]
    Query(String),
}

impl From<sql::Error> for StoreError {
    fn from(e: sql::Error) -> Self {
        match e {
            sql::Error::Sqlite(e) => e.into(),
            sql::Error::NoRows => StoreError::Sql(rusqlite::Error::QueryReturnedNoRows),
            sql::Error::Postgres(_) => StoreError::Postgres(format!("PostgreSQL: {e}")),
            sql::Error::Down(why) => StoreError::Postgres(why),
            e @ (sql::Error::Column { .. } | sql::Error::RolledBack) => {
                StoreError::Query(e.to_string())
            }
        }
    }
}

impl From<rusqlite::Error> for StoreError {
    /// Damaged pages found by any query get the same plain sentence as at opening.
    fn from(e: rusqlite::Error) -> Self {
        use rusqlite::ErrorCode::{DatabaseBusy, DatabaseCorrupt, NotADatabase};
        match e.sqlite_error_code() {
            Some(DatabaseCorrupt | NotADatabase) => StoreError::Damaged {
                path: damage_seen(PathBuf::from(".baton/baton.db")),
                detail: e.to_string(),
            },
            // Only after the connection's busy timeout (10 s) has run out.
            Some(DatabaseBusy) => StoreError::Busy,
            _ => StoreError::Sql(e),
        }
    }
}

/// Result alias for store operations.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// One connection to a workspace database.
pub struct Store {
    backend: Backend,
    path: PathBuf,
    pipelines: snapshots::SnapshotCache,
}

/// Typed queries over a connection or an open transaction.
pub struct Db<'c> {
    conn: sql::Conn<'c>,
    pipelines: &'c snapshots::SnapshotCache,
}

impl Store {
    /// Opens (creating if needed) the database at `path` and brings its schema up to date.
    ///
    /// A new database is built under a temporary name and linked into place complete, so an
    /// empty `baton.db` is never baton's own: it is refused as damaged rather than taken for
    /// a new board.
    pub fn open(path: &Path) -> Result<Self> {
        if !refuse_empty(path)? {
            create_new(path)?;
        }
        Self::open_existing(path)
    }

    /// [`Store::open`] after `PRAGMA quick_check`: a damaged database is refused before
    /// anything writes to it. For the engine's start, where a damaged board must not go on.
    ///
    /// The check reads the whole file, so it runs only when the last engine's store did
    /// not close cleanly (a crash, a kill, a power cut: when damage is likely) or never
    /// ran; an engine's start then costs the same on a big board as on an empty one. The
    /// mark is taken away here and put back by the engine's [`StoreHandle`] as its last
    /// write (see [`StoreHandle::arm_clean_close`]).
    pub fn open_checked(path: &Path) -> Result<Self> {
        let store = if refuse_empty(path)? {
            // One connection, checked before anything writes through it: until the check
            // passes, closing it copies nothing of the write-ahead log into the file.
            let conn = connect(path, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
            let no_checkpoint = rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE;
            conn.set_db_config(no_checkpoint, true)
                .map_err(|e| damaged_or(path, e))?;
            if !closed_cleanly(&conn) {
                quick_check(&conn, path)?;
            }
            conn.set_db_config(no_checkpoint, false)
                .map_err(|e| damaged_or(path, e))?;
            Self::set_up(conn, path)?
        } else {
            Self::open(path)?
        };
        store.forget_clean_close()?;
        Ok(store)
    }

    /// [`Store::open_checked`]'s check on a connection already open: the whole file is
    /// checked unless the last engine's store closed cleanly, and the mark is taken away.
    fn check_after_unclean_end(&self) -> Result<()> {
        let Some(conn) = self.backend.sqlite() else {
            // PostgreSQL checks its own pages as it reads them.
            return Ok(());
        };
        if !closed_cleanly(conn) {
            quick_check(conn, &self.path)?;
        }
        self.forget_clean_close()
    }

    /// Takes the closed-cleanly mark away: an engine now writes through this store, and
    /// only its clean close puts the mark back.
    fn forget_clean_close(&self) -> Result<()> {
        if let Some(conn) = self.backend.sqlite() {
            conn.execute("DELETE FROM meta WHERE key = ?1", [CLOSED_CLEANLY])?;
        }
        Ok(())
    }

    /// The SQLite connection, or a sentence saying this is a PostgreSQL board.
    fn lite(&self) -> Result<&Connection> {
        self.backend.sqlite().ok_or_else(|| sqlite_only(&self.path))
    }

    /// [`Store::lite`], for a change of the connection itself.
    fn lite_mut(&mut self) -> Result<&mut Connection> {
        match &mut self.backend {
            Backend::Sqlite(c) => Ok(c),
            Backend::Postgres(_) => Err(sqlite_only(&self.path)),
        }
    }

    /// Opens an existing database for reading only: no file in its folder is created or
    /// written (not even SQLite's `-shm`), so a read-only workspace can still be listed.
    pub fn open_read_only(path: &Path) -> Result<Self> {
        refuse_empty(path)?;
        let damaged = |e: rusqlite::Error| damaged_or(path, e);
        // The newest commits are in the `-wal` file, read through SQLite's shared memory
        // (`-shm`). With no log, or an empty one, the file is complete and `immutable`
        // avoids making the shared memory; a log with commits in it is read even if the
        // `-shm` is gone (SQLite makes it again, or says it cannot), never passed over.
        let wal = path_with(path, "-wal");
        let logged = std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0);
        let conn = if logged || (wal.exists() && path_with(path, "-shm").exists()) {
            connect(path, OpenFlags::SQLITE_OPEN_READ_ONLY)?
        } else {
            let uri = format!("file:{}?immutable=1", uri_path(path));
            connect(
                Path::new(&uri),
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI,
            )?
        };
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(damaged)?;
        if version > schema::SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                path: path.to_path_buf(),
                found: version,
                known: schema::SCHEMA_VERSION,
            });
        }
        if version < schema::SCHEMA_VERSION {
            return Err(StoreError::ReadOnlyUpgrade {
                path: path.to_path_buf(),
            });
        }
        conn.set_prepared_statement_cache_capacity(128);
        Ok(Store {
            backend: Backend::Sqlite(conn),
            path: path.to_path_buf(),
            pipelines: Default::default(),
        })
    }

    /// True when this process may write the database: its folder, and the file and its
    /// `-wal`/`-shm` where they exist (`access(2)`, so a read-only mount counts too).
    pub fn writable(path: &Path) -> bool {
        use nix::unistd::{AccessFlags, access};
        let ok = |p: &Path| access(p, AccessFlags::W_OK).is_ok();
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        dir.is_none_or(ok)
            && [
                path.to_path_buf(),
                path_with(path, "-wal"),
                path_with(path, "-shm"),
            ]
            .iter()
            .all(|p| !p.exists() || ok(p))
    }

    /// A writable connection to a database that exists (none is made).
    pub(super) fn open_existing(path: &Path) -> Result<Self> {
        Self::set_up(connect(path, OpenFlags::SQLITE_OPEN_READ_WRITE)?, path)
    }

    /// A writable connection to `path` made ready: its settings, and the schema brought up
    /// to date.
    fn set_up(conn: Connection, path: &Path) -> Result<Self> {
        let open_err = |source| damaged_or(path, source);
        // Room for every statement an engine runs, its reads included when they share the
        // writer's connection (a command's engine): about 150 in all.
        conn.set_prepared_statement_cache_capacity(256);
        conn.execute_batch(
            // Statement journals and sorts in memory: on disk, each step's transaction
            // made, truncated and closed a temporary file.
            "PRAGMA journal_mode = WAL;
             PRAGMA synchronous = NORMAL;
             PRAGMA foreign_keys = ON;
             PRAGMA temp_store = MEMORY;",
        )
        .map_err(open_err)?;
        let mut conn = conn;
        schema::migrate(&mut conn, path)?;
        Ok(Store {
            backend: Backend::Sqlite(conn),
            path: path.to_path_buf(),
            pipelines: Default::default(),
        })
    }

    /// The database file (a PostgreSQL board's URL, password hidden).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` inside one write transaction; commits when it returns `Ok`.
    pub fn write<T, E>(&mut self, f: impl FnOnce(&Db) -> Result<T, E>) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        let tx = WriteTx::begin(&self.backend).map_err(StoreError::from)?;
        match f(&self.backend.db(&self.pipelines)) {
            Ok(v) => {
                tx.commit().map_err(StoreError::from)?;
                Ok(v)
            }
            Err(e) => {
                drop(tx);
                // Rolled back: ids handed out inside may be handed out again.
                self.pipelines.clear();
                Err(e)
            }
        }
    }

    /// Read-only access outside a transaction.
    pub fn read(&self) -> Db<'_> {
        self.backend.db(&self.pipelines)
    }

    /// `PRAGMA integrity_check`; `Ok(())` when the database is sound (PostgreSQL checks its
    /// own pages as it reads them).
    pub fn integrity_check(&self) -> Result<()> {
        let Some(conn) = self.backend.sqlite() else {
            return Ok(());
        };
        let verdict: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
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

/// Opens a connection with the store's usual settings (`flags` plus no mutex, a busy
/// timeout).
fn connect(path: &Path, flags: OpenFlags) -> Result<Connection> {
    let open_err = |source| StoreError::Open {
        path: path.to_path_buf(),
        source,
    };
    let conn = Connection::open_with_flags(path, flags | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .map_err(open_err)?;
    conn.busy_timeout(Duration::from_secs(10))
        .map_err(open_err)?;
    // One plan per statement, whatever its parameters: otherwise a statement whose
    // parameter SQLite compared with a partial index's condition (`state = 'pending'`)
    // was compiled again whenever that parameter changed, several times per step.
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .map_err(open_err)?;
    Ok(conn)
}

/// `path` with `suffix` appended to its file name (`baton.db-wal`).
fn path_with(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// `path` for an SQLite `file:` URI: `%`, `?` and `#` escaped.
fn uri_path(path: &Path) -> String {
    path.to_string_lossy()
        .replace('%', "%25")
        .replace('?', "%3f")
        .replace('#', "%23")
}

/// Whether the database exists; an existing empty file is refused as damaged.
fn refuse_empty(path: &Path) -> Result<bool> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() && m.len() == 0 => Err(StoreError::Damaged {
            path: path.to_path_buf(),
            detail: "the file is empty".into(),
        }),
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(StoreError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// The `meta` key an engine's store leaves when it closes cleanly.
const CLOSED_CLEANLY: &str = "store.closed_cleanly";

/// True when the last engine's store closed cleanly and nothing has opened one since.
fn closed_cleanly(conn: &Connection) -> bool {
    conn.query_row(
        "SELECT value FROM meta WHERE key = ?1",
        [CLOSED_CLEANLY],
        |r| r.get::<_, String>(0),
    )
    .is_ok_and(|v| v == "1")
}

/// Set once this process has met a damaged page: its stores are then never marked closed
/// cleanly, so the next engine checks the whole file.
static DAMAGE_SEEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn damage_seen(path: PathBuf) -> PathBuf {
    DAMAGE_SEEN.store(true, std::sync::atomic::Ordering::Relaxed);
    path
}

/// The sentence for what only a SQLite board has.
fn sqlite_only(path: &Path) -> StoreError {
    StoreError::Conflict(format!(
        "the board at {} is kept in PostgreSQL, and this works on a SQLite file only",
        path.display()
    ))
}

/// Marks the store as closed cleanly (its owner's last write), unless damage was met.
/// PostgreSQL needs no mark: it checks its own pages and recovers by itself.
fn mark_closed_cleanly(store: &Store) -> rusqlite::Result<()> {
    let Some(conn) = store.backend.sqlite() else {
        return Ok(());
    };
    if DAMAGE_SEEN.load(std::sync::atomic::Ordering::Relaxed) {
        return Ok(());
    }
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (?1, '1') \
         ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        [CLOSED_CLEANLY],
    )
    .map(|_| ())
}

/// The files whole-file checks have run on, one entry a check, for tests that prove one
/// was skipped (or run on a store's own thread).
#[cfg(test)]
static QUICK_CHECKS: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// `PRAGMA quick_check` on an open connection; a file that is not a database at all is
/// damaged too.
fn quick_check(conn: &Connection, path: &Path) -> Result<()> {
    #[cfg(test)]
    QUICK_CHECKS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(path.to_path_buf());
    let mut stmt = conn
        .prepare("PRAGMA quick_check(3)")
        .map_err(|e| damaged_or(path, e))?;
    let verdict: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .and_then(|rows| rows.collect())
        .map_err(|e| damaged_or(path, e))?;
    if verdict == ["ok"] {
        return Ok(());
    }
    Err(StoreError::Damaged {
        path: path.to_path_buf(),
        detail: format!("quick_check: {}", verdict.join("; ").replace('\n', "; ")),
    })
}

/// Damage for SQLite's "not a database" and "malformed" answers, else an open error.
fn damaged_or(path: &Path, e: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode::{DatabaseCorrupt, NotADatabase};
    match e.sqlite_error_code() {
        Some(DatabaseCorrupt | NotADatabase) => StoreError::Damaged {
            path: damage_seen(path.to_path_buf()),
            detail: e.to_string(),
        },
        _ => StoreError::Open {
            path: path.to_path_buf(),
            source: e,
        },
    }
}

/// Builds a new database beside `path` and links it into place unless one appeared
/// meanwhile (another process or thread got there first, which is fine).
fn create_new(path: &Path) -> Result<()> {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path_with(path, &format!(".new-{}-{seq}", std::process::id()));
    let io = |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    let built = (|| {
        let mut conn = connect(
            &tmp,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
        )?;
        conn.execute_batch("PRAGMA journal_mode = WAL;")?;
        schema::migrate(&mut conn, path)?;
        // Closing the only connection checkpoints the WAL into the file and removes it.
        conn.close().map_err(|(_, e)| StoreError::from(e))
    })();
    let linked = built.and_then(|()| match std::fs::hard_link(&tmp, path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        // A file system without hard links: a plain rename, unless one appeared meanwhile.
        Err(_) if !path.exists() => std::fs::rename(&tmp, path).map_err(io),
        Err(e) => Err(io(e)),
    });
    for leftover in [
        tmp.clone(),
        path_with(&tmp, "-wal"),
        path_with(&tmp, "-shm"),
    ] {
        let _ = std::fs::remove_file(leftover);
    }
    linked
}

impl Db<'_> {
    /// See [`Store::data_version`]. On PostgreSQL, the task change counter: every change of
    /// a task (a move, a step's start or end, a message) takes its next number.
    pub fn data_version(&self) -> Result<i64> {
        let sql = self.dialect(
            "PRAGMA data_version",
            "SELECT seq FROM change_counter WHERE id = 1",
        );
        Ok(self.one(sql, [], |r| r.get(0))?)
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

#[cfg(test)]
mod testdb;

#[cfg(test)]
mod sqlite_probes;

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "both_tests.rs"]
mod both_tests;
