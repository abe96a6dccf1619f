//! Where a workspace's board is kept (its SQLite file, or a PostgreSQL database named by
//! `[store] store` or `BATON_DATABASE_URL`), and opening it there. Here, above both the
//! store and the workspace, so neither needs the other.

use crate::store::{Location, PgTarget, Reads, Result, Store, StoreError, StoreHandle};
use crate::workspace::Workspace;

/// Set by [`sqlite_only`]: this process keeps every board in its SQLite file.
static SQLITE_ONLY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes this process ignore `BATON_DATABASE_URL` and `[store] store` (the demo's
/// throwaway workspace, whose board must not land in a team's database).
pub fn sqlite_only() {
    SQLITE_ONLY.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// The PostgreSQL board of workspace `ws`, when its board is kept there (see
/// [`Location::resolve`]); `None` for its SQLite file.
pub fn postgres_board(ws: &Workspace) -> Result<Option<PgTarget>> {
    if SQLITE_ONLY.load(std::sync::atomic::Ordering::Relaxed) {
        return Ok(None);
    }
    let setting = crate::workspace::store_setting(
        &ws.config_path(),
        crate::workspace::layered::user_config_path().as_deref(),
    )
    .map_err(|e| StoreError::Postgres(e.to_string()))?;
    let env = std::env::var("BATON_DATABASE_URL").ok();
    let at = Location::resolve(
        &ws.db_path(),
        env.as_deref(),
        setting.as_ref().map(|(u, f)| (u.as_str(), f.as_path())),
    )
    .map_err(StoreError::Postgres)?;
    Ok(match at {
        Location::Postgres(t) => Some(*t),
        Location::Sqlite(_) => None,
    })
}

/// Opens `ws`'s board wherever it is kept: its PostgreSQL database, else its SQLite file
/// as [`Store::open`] does.
pub fn open_store(ws: &Workspace) -> Result<Store> {
    match postgres_board(ws)? {
        Some(t) => Store::open_postgres(&t),
        None => Store::open(&ws.db_path()),
    }
}

/// [`open_store`] on the store's own threads.
pub fn open_handle(ws: &Workspace) -> Result<StoreHandle> {
    match postgres_board(ws)? {
        Some(t) => StoreHandle::open_postgres(&t, Reads::Apart),
        None => StoreHandle::open(&ws.db_path()),
    }
}

/// The engine's store of `ws`'s board: [`StoreHandle::open_checked`] for its SQLite file;
/// on PostgreSQL, which several engines may share (PostgreSQL checks its own pages, so
/// there is no whole-file check). `reads`: whether reads get a connection of their own.
pub fn open_engine_handle(ws: &Workspace, reads: Reads) -> Result<StoreHandle> {
    match postgres_board(ws)? {
        Some(t) => StoreHandle::open_postgres(&t, reads),
        None => StoreHandle::open_checked(&ws.db_path(), reads),
    }
}
