//! Opening a board kept in PostgreSQL: a [`Store`] on one connection, a [`StoreHandle`] on
//! two, the engine's with the board's engine lock, and either store wherever a workspace's
//! board lives.

use super::super::{Backend, Result, Store, StoreError, StoreHandle, pg};
use super::{PgStore, PgTarget};
use std::path::PathBuf;

impl Store {
    /// Connects to a PostgreSQL board, bringing its schema up to date first if it is
    /// behind (under the migrations' advisory lock, so several openers are safe).
    pub fn open_postgres(target: &PgTarget) -> Result<Self> {
        // The blocking client drives a runtime of its own, which cannot start on a thread
        // that drives one (an async caller's): it connects on a thread of its own, and the
        // store is then used on a store thread or a plain one.
        std::thread::scope(|s| {
            s.spawn(|| Self::connect_postgres(target, false))
                .join()
                .unwrap_or_else(|_| Err(StoreError::Closed))
        })
    }

    /// [`Store::open_postgres`] for the engine's writer: its connection holds the board's
    /// engine lock while it is open, and a board another engine holds is refused (several
    /// engines on one board need claims on the steps, which are not there yet).
    pub fn open_postgres_engine(target: &PgTarget) -> Result<Self> {
        std::thread::scope(|s| {
            s.spawn(|| Self::connect_postgres(target, true))
                .join()
                .unwrap_or_else(|_| Err(StoreError::Closed))
        })
    }

    fn connect_postgres(target: &PgTarget, engine: bool) -> Result<Self> {
        let mut pg = PgStore::connect(target)?;
        if pg.schema_version()? != Some(super::super::schema::SCHEMA_VERSION) {
            pg.migrate()?;
        }
        let store = Store {
            backend: Backend::Postgres(Box::new(std::cell::RefCell::new(pg::conn::PgConn::new(
                pg.into_client(),
                Some(target.clone()),
            )))),
            path: PathBuf::from(target.shown()),
            pipelines: Default::default(),
        };
        if engine {
            let held: bool = store.read().one(
                "SELECT pg_try_advisory_lock(?1)",
                [pg::ENGINE_LOCK_KEY],
                |r| r.get(0),
            )?;
            if !held {
                return Err(StoreError::Conflict(format!(
                    "another engine runs the board at {} — one engine per PostgreSQL board for now: stop that one first, or give this workspace its own board",
                    target.shown()
                )));
            }
        }
        Ok(store)
    }

    /// True when this store is a PostgreSQL board.
    pub fn is_postgres(&self) -> bool {
        matches!(self.backend, Backend::Postgres(_))
    }
}

impl StoreHandle {
    /// Opens a PostgreSQL board (bringing its schema up to date if it is behind) on two
    /// connections of its own, the writer's and the reader's.
    pub fn open_postgres(target: &PgTarget) -> Result<Self> {
        Self::from_store(Store::open_postgres(target)?, Store::open_postgres(target)?)
    }
}
