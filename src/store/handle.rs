//! The async handle to a workspace database. SQLite is touched only by the handle's own
//! threads: one writer (every write transaction, in submission order) and one reader. Async
//! code awaits a reply instead of blocking a tokio worker; sync code (the CLI) may use the
//! `blocking_*` calls from a plain thread.

use super::{Db, Result, Store, StoreError};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc as std_mpsc;
use tokio::sync::oneshot;

type Job = Box<dyn FnOnce(&mut Store) + Send>;

/// A cloneable handle to the store's threads. The threads end when the last handle drops.
#[derive(Clone)]
pub struct StoreHandle {
    inner: Arc<Inner>,
}

struct Inner {
    writer: std_mpsc::Sender<Job>,
    reader: std_mpsc::Sender<Job>,
    path: PathBuf,
}

impl StoreHandle {
    /// Opens the database at `path` (creating and migrating it if needed) on two threads of
    /// its own: the writer and a reader.
    pub fn open(path: &Path) -> Result<Self> {
        Self::from_store(Store::open(path)?, Store::open(path)?)
    }

    /// Wraps two open connections to one database: the first writes, the second reads.
    pub fn from_store(writer: Store, reader: Store) -> Result<Self> {
        let path = writer.path().to_path_buf();
        let writer = spawn_thread("baton-store-w", writer)?;
        let reader = spawn_thread("baton-store-r", reader)?;
        Ok(Self {
            inner: Arc::new(Inner {
                writer,
                reader,
                path,
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction on the writer thread; commits when it
    /// returns `Ok`. Writes are applied in the order they were submitted.
    pub async fn write<T, E, F>(&self, f: F) -> Result<T, E>
    where
        F: FnOnce(&Db) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        self.submit_write(move |store| {
            let _ = tx.send(store.write(f));
        })?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Queues a write whose result nobody waits for (a log line's bookkeeping, a pid).
    /// Failures are logged. Later writes still see it: the writer runs jobs in order.
    pub fn write_detached<F>(&self, what: &'static str, f: F)
    where
        F: FnOnce(&Db) -> Result<()> + Send + 'static,
    {
        let sent = self.submit_write(move |store| {
            if let Err(e) = store.write(f) {
                tracing::error!("recording {what} failed: {e}");
            }
        });
        if sent.is_err() {
            tracing::error!("recording {what} failed: the store has stopped");
        }
    }

    /// Runs `f` with the writer's connection itself, outside any transaction (start-up
    /// recovery, which writes several transactions of its own).
    pub async fn with_writer<T, F>(&self, f: F) -> Result<T>
    where
        F: FnOnce(&mut Store) -> T + Send + 'static,
        T: Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        self.submit_write(move |store| {
            let _ = tx.send(f(store));
        })?;
        rx.await.map_err(|_| StoreError::Closed)
    }

    /// Runs a read on the reader thread. It sees every write whose future has completed.
    pub async fn read<T, F>(&self, f: F) -> Result<T>
    where
        F: FnOnce(&Db) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        self.inner
            .reader
            .send(Box::new(move |store: &mut Store| {
                let _ = tx.send(f(&store.read()));
            }))
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// [`StoreHandle::write`] for sync code. Must not be called on a tokio worker thread.
    pub fn blocking_write<T, E, F>(&self, f: F) -> Result<T, E>
    where
        F: FnOnce(&Db) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        self.submit_write(move |store| {
            let _ = tx.send(store.write(f));
        })?;
        rx.blocking_recv().map_err(|_| StoreError::Closed)?
    }

    /// [`StoreHandle::read`] for sync code. Must not be called on a tokio worker thread.
    pub fn blocking_read<T, F>(&self, f: F) -> Result<T>
    where
        F: FnOnce(&Db) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        self.inner
            .reader
            .send(Box::new(move |store: &mut Store| {
                let _ = tx.send(f(&store.read()));
            }))
            .map_err(|_| StoreError::Closed)?;
        rx.blocking_recv().map_err(|_| StoreError::Closed)?
    }

    fn submit_write(&self, job: impl FnOnce(&mut Store) + Send + 'static) -> Result<()> {
        self.inner
            .writer
            .send(Box::new(job))
            .map_err(|_| StoreError::Closed)
    }
}

/// A thread owning one connection, running jobs until every sender is gone.
fn spawn_thread(name: &str, mut store: Store) -> Result<std_mpsc::Sender<Job>> {
    let (tx, rx) = std_mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            while let Ok(job) = rx.recv() {
                // A panicking job must not take the store down with it: the caller sees its
                // reply channel dropped ("the store has stopped") and later jobs still run.
                let run = std::panic::AssertUnwindSafe(|| job(&mut store));
                if std::panic::catch_unwind(run).is_err() {
                    tracing::error!("a database job panicked; the store goes on");
                }
            }
        })
        .map_err(|e| StoreError::Conflict(format!("cannot start the store's thread: {e}")))?;
    Ok(tx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn writes_are_seen_by_later_reads_and_run_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let h = StoreHandle::open(&dir.path().join("t.db")).unwrap();
        for i in 0..20 {
            h.write_detached("meta", move |db| db.set_meta("k", &i.to_string()));
        }
        let last = h
            .write(|db| db.meta("k").map(|v| v.unwrap_or_default()))
            .await
            .unwrap();
        assert_eq!(last, "19", "detached writes run before a later write");
        let read = h.read(|db| db.meta("k")).await.unwrap();
        assert_eq!(read.as_deref(), Some("19"));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_failed_write_rolls_back_and_a_panicking_job_does_not_stop_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let h = StoreHandle::open(&dir.path().join("t.db")).unwrap();
        let failed: Result<()> = h
            .write(|db| {
                db.set_meta("k", "v")?;
                Err(StoreError::Conflict("no".into()))
            })
            .await;
        assert!(failed.is_err());
        let panicked: Result<()> = h.write(|_| panic!("boom")).await;
        assert!(matches!(panicked, Err(StoreError::Closed)));
        assert_eq!(h.read(|db| db.meta("k")).await.unwrap(), None);
        h.write(|db| db.set_meta("k", "w")).await.unwrap();
        assert_eq!(h.read(|db| db.meta("k")).await.unwrap().as_deref(), Some("w"));
    }
}
