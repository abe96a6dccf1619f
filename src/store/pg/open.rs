//! Opening a board kept in PostgreSQL: a [`Store`] on one connection, a [`StoreHandle`] on
//! one or two (see [`Reads`]), and either store wherever a workspace's board lives.

use super::super::{Backend, Reads, Result, Store, StoreError, StoreHandle, pg};
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
            s.spawn(|| Self::connect_postgres(target))
                .join()
                .unwrap_or_else(|_| Err(StoreError::Closed))
        })
    }

    fn connect_postgres(target: &PgTarget) -> Result<Self> {
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
        Ok(store)
    }

    /// True when this store is a PostgreSQL board.
    pub fn is_postgres(&self) -> bool {
        matches!(self.backend, Backend::Postgres(_))
    }
}

impl StoreHandle {
    /// Opens a PostgreSQL board (bringing its schema up to date if it is behind) on
    /// connections of its own: the writer's, and as `reads` says the reader's.
    pub fn open_postgres(target: &PgTarget, reads: Reads) -> Result<Self> {
        let writer = Store::open_postgres(target)?;
        match reads {
            Reads::Apart => Self::from_store(writer, Store::open_postgres(target)?),
            Reads::OnWriter => Self::from_writer(writer),
        }
    }
}
