//! The connection a [`Store`](super::Store) holds, SQLite or PostgreSQL, and its write
//! transactions: begun, kept in savepoints, committed or rolled back the same way on both.

use super::Db;
use super::pg::conn::PgConn;
use super::snapshots::SnapshotCache;
use super::sql::{Conn, SqlResult};
use std::cell::RefCell;

/// A store's own connection.
pub(super) enum Backend {
    Sqlite(rusqlite::Connection),
    Postgres(Box<RefCell<PgConn>>),
}

impl Backend {
    /// Queries over this connection.
    pub(super) fn db<'c>(&'c self, pipelines: &'c SnapshotCache) -> Db<'c> {
        let conn = match self {
            Backend::Sqlite(c) => Conn::Sqlite(c),
            Backend::Postgres(c) => Conn::Postgres(c),
        };
        Db { conn, pipelines }
    }

    /// The SQLite connection; `None` on a PostgreSQL board.
    pub(super) fn sqlite(&self) -> Option<&rusqlite::Connection> {
        match self {
            Backend::Sqlite(c) => Some(c),
            Backend::Postgres(_) => None,
        }
    }

    /// A statement with no parameters and no rows, through SQLite's statement cache.
    fn run(c: &rusqlite::Connection, sql: &str) -> SqlResult<()> {
        c.prepare_cached(sql)?.execute([])?;
        Ok(())
    }

    fn begin(&self) -> SqlResult<()> {
        match self {
            Backend::Sqlite(c) => Self::run(c, "BEGIN IMMEDIATE"),
            Backend::Postgres(p) => p.borrow_mut().begin(),
        }
    }

    fn commit(&self) -> SqlResult<()> {
        match self {
            Backend::Sqlite(c) => Self::run(c, "COMMIT"),
            Backend::Postgres(p) => p.borrow_mut().commit(),
        }
    }

    /// Rolls the open transaction back; nothing when none is open.
    fn rollback(&self) {
        match self {
            Backend::Sqlite(c) => {
                if !c.is_autocommit()
                    && let Err(e) = Self::run(c, "ROLLBACK")
                {
                    tracing::warn!("rolling a transaction back failed: {e}");
                }
            }
            Backend::Postgres(p) => p.borrow_mut().rollback(),
        }
    }

    /// Starts a savepoint inside the open transaction.
    pub(super) fn savepoint(&self) -> SqlResult<()> {
        match self {
            Backend::Sqlite(c) => Self::run(c, "SAVEPOINT baton_sp"),
            Backend::Postgres(p) => p.borrow_mut().savepoint(),
        }
    }

    /// Keeps what was done since the savepoint.
    pub(super) fn release(&self) -> SqlResult<()> {
        match self {
            Backend::Sqlite(c) => Self::run(c, "RELEASE baton_sp"),
            Backend::Postgres(p) => p.borrow_mut().release(),
        }
    }

    /// Undoes what was done since the savepoint (nothing to do once the whole transaction
    /// is gone).
    pub(super) fn rollback_to(&self) -> SqlResult<()> {
        match self {
            Backend::Sqlite(c) => {
                if c.is_autocommit() {
                    return Ok(());
                }
                Self::run(c, "ROLLBACK TO baton_sp")?;
                Self::run(c, "RELEASE baton_sp")
            }
            Backend::Postgres(p) => p.borrow_mut().rollback_to(),
        }
    }

    /// A write transaction is open and still holds what was done in it (SQLite rolls the
    /// whole transaction back by itself on some errors: a full disk, I/O).
    pub(super) fn in_transaction(&self) -> bool {
        match self {
            Backend::Sqlite(c) => !c.is_autocommit(),
            Backend::Postgres(p) => p.borrow().in_transaction(),
        }
    }
}

/// An open write transaction: rolled back when dropped uncommitted (an error, a panic).
pub(super) struct WriteTx<'s> {
    backend: &'s Backend,
    open: bool,
}

impl<'s> WriteTx<'s> {
    /// `BEGIN IMMEDIATE` on SQLite; on PostgreSQL see [`PgConn::begin`].
    pub(super) fn begin(backend: &'s Backend) -> SqlResult<Self> {
        backend.begin()?;
        Ok(Self {
            backend,
            open: true,
        })
    }

    /// Commits; a failed commit is rolled back.
    pub(super) fn commit(mut self) -> SqlResult<()> {
        let done = self.backend.commit();
        self.open = done.is_err();
        done
    }
}

impl Drop for WriteTx<'_> {
    fn drop(&mut self) {
        if self.open {
            self.backend.rollback();
        }
    }
}
