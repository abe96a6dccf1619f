//! The async handle to a workspace database. The database is touched only by the handle's
//! own threads: one writer (every write transaction, in submission order; writes queued
//! together commit together), one reader (or reads on the writer's thread, see [`Reads`]),
//! and on SQLite a checkpointer. Async code awaits a reply instead of blocking a tokio
//! worker. Sync code (the CLI) keeps its own `Store`.

use super::backend::{Backend, WriteTx};
use super::{Db, Result, Store, StoreError};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc as std_mpsc;
use tokio::sync::oneshot;

/// A reader's connection, or why it could not be opened.
type Opened<'a> = std::result::Result<&'a mut Store, StoreError>;

/// A job for a store thread.
enum Job {
    /// Anything with the connection itself (recovery, checkpoints).
    Raw(Box<dyn FnOnce(&mut Store) + Send>),
    /// A read: with the connection, or with why it could not be opened.
    Read(Box<dyn FnOnce(Opened<'_>) + Send>),
    /// A write transaction's body.
    Write(WriteBody),
    /// A write that asks for no idle checkpoint after it (an engine's heartbeat): an idle
    /// engine then wakes no thread but its own and the writer's.
    Quiet(WriteBody),
}

/// Runs a write's body; says whether it succeeded (so its changes are kept) and how to
/// deliver its reply once the commit's outcome is known.
/// `Err` carries why no transaction could be opened: the body then only replies.
type WriteBody = Box<dyn FnOnce(std::result::Result<&Db, &StoreError>) -> (bool, Deliver) + Send>;

/// Sends a write's reply, given whether its transaction committed.
type Deliver = Box<dyn FnOnce(Result<()>) + Send>;

/// Writes queued together commit together, at most this many (group commit).
const GROUP: usize = 64;

/// The writer asks for a checkpoint after this many commits.
const CHECKPOINT_EVERY: u32 = 64;

/// After this long without a write, the write-ahead log is copied into the database and
/// cut to nothing. The writer waits with this timeout only while there is something to
/// checkpoint: an idle store does not wake up.
const IDLE: std::time::Duration = std::time::Duration::from_secs(1);

/// The write-ahead log is cut back to this size whenever a checkpoint has emptied it, so
/// a burst of writes (or a reader that held checkpoints back) does not leave a log of
/// hundreds of megabytes behind for good.
const WAL_LIMIT: i64 = 16 * 1024 * 1024;

/// The size of the write-ahead log, in frames (a page each), past which a background
/// checkpoint makes the log start over (see [`checkpoint`]): about 16 MB with SQLite's
/// default 4 KB pages, which baton's databases use.
const RESTART_FRAMES: i64 = 4096;

/// The largest write-ahead log a store leaves behind when it closes (see [`settle`]):
/// about 250 pages, five `baton run`s of one step, which the next command's first
/// connection reads through once (about 0.3 ms).
const KEEP_LOG: u64 = 1024 * 1024;

/// How many times, a millisecond apart, [`restart`] tries before leaving it to the next
/// checkpoint.
const RESTART_TRIES: usize = 20;

/// How long the idle checkpoint waits for readers to move off the log before it gives up
/// (and tries again after the next write): it must not hold up a write for long.
const TRUNCATE_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// Where a handle's reads run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reads {
    /// On a reader thread with a connection of its own, so that no read waits behind a
    /// write: the engine of a board or of `baton engine`, an API server.
    Apart,
    /// On the writer's thread and connection, queued with the writes: a command's engine,
    /// mostly short-lived, for which a second connection would cost more than its reads
    /// (its schema read and its statements compiled again, and on PostgreSQL a server
    /// process of its own). A read then waits for the writes queued before it.
    OnWriter,
}

/// A cloneable handle to the store's threads. The threads end when the last handle drops.
#[derive(Clone)]
pub struct StoreHandle {
    inner: Arc<Inner>,
}

struct Inner {
    writer: std_mpsc::Sender<Job>,
    reader: std_mpsc::Sender<Job>,
    path: PathBuf,
    /// Set by [`StoreHandle::arm_clean_close`]: this is the store of an engine holding the
    /// workspace's lock, and its writer's last write marks it closed cleanly. Any other
    /// handle (an API server following another process's engine) writes no mark: an
    /// engine still running elsewhere could die after it, and the mark would hide that.
    armed: Arc<std::sync::atomic::AtomicBool>,
    /// The writer thread (an armed drop there cannot wait for it).
    writer_id: std::thread::ThreadId,
    /// The store's threads: a drop on one of them cannot wait for them.
    threads: Vec<std::thread::ThreadId>,
    /// The writer's word that it has marked the store closed cleanly.
    /// (A receiver is not `Sync`; the mutex makes the handle shareable.)
    closed: Option<std::sync::Mutex<std_mpsc::Receiver<()>>>,
    /// Hung up when the last of the store's threads has closed its connection.
    done: Option<std::sync::Mutex<std_mpsc::Receiver<()>>>,
}

/// How long dropping an engine's last handle waits for the writer to finish its queue and
/// mark the store closed cleanly. Past it the mark is missing: the next start checks the
/// whole file, which is slow but safe.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

impl Drop for Inner {
    fn drop(&mut self) {
        // Hanging up the queues is what tells the threads to finish.
        let (hang_up, _) = std_mpsc::channel();
        drop(std::mem::replace(&mut self.writer, hang_up.clone()));
        drop(std::mem::replace(&mut self.reader, hang_up));
        // The process may exit as soon as this returns: wait for the mark (not when the
        // last handle is dropped by one of the writer's own jobs).
        if self.armed.load(std::sync::atomic::Ordering::Acquire)
            && std::thread::current().id() != self.writer_id
            && let Some(closed) = self.closed.take()
            && let Ok(closed) = closed.into_inner()
        {
            let _ = closed.recv_timeout(CLOSE_WAIT);
        }
        // And for the connections to close, so that a process exiting now leaves no
        // write half done and its log settled (see [`settle`]).
        if !self.threads.contains(&std::thread::current().id())
            && let Some(done) = self.done.take()
            && let Ok(done) = done.into_inner()
        {
            let _ = done.recv_timeout(CLOSE_WAIT);
        }
    }
}

impl StoreHandle {
    /// Opens the database at `path` (creating and migrating it if needed) on two threads of
    /// its own: the writer and a reader.
    pub fn open(path: &Path) -> Result<Self> {
        Self::with_reader(Store::open(path)?, Some(reader_of(path)))
    }

    /// [`StoreHandle::open`] after `PRAGMA quick_check`: a damaged database is refused
    /// before anything writes to it (the engine's start, under the workspace's lock). The
    /// check runs only after an engine's store did not close cleanly (see
    /// [`Store::open_checked`]). The engine then calls [`StoreHandle::arm_clean_close`].
    /// `reads` says whether reads get a connection of their own.
    pub fn open_checked(path: &Path, reads: Reads) -> Result<Self> {
        let reader = (reads == Reads::Apart).then(|| reader_of(path));
        Self::with_reader(Store::open_checked(path)?, reader)
    }

    /// Wraps two open connections to one database: the first writes, the second reads.
    /// On SQLite a third, opened for the first checkpoint it is asked for, copies the
    /// write-ahead log into the database in the background, so a checkpoint's writes and
    /// syncs do not hold up commits (but for the moment a log past 16 MB starts over: see
    /// [`checkpoint`]).
    pub fn from_store(writer: Store, reader: Store) -> Result<Self> {
        Self::with_reader(writer, Some(Conn::Open(Box::new(reader))))
    }

    /// A handle whose reads run on its writer's thread, through its one connection (see
    /// [`Reads::OnWriter`]).
    pub fn from_writer(writer: Store) -> Result<Self> {
        Self::with_reader(writer, None)
    }

    /// [`StoreHandle::from_store`] with the reader's connection as `reader` says; with
    /// none, reads go to the writer's thread.
    fn with_reader(writer: Store, reader: Option<Conn>) -> Result<Self> {
        let path = writer.path().to_path_buf();
        let (done_tx, done_rx) = std_mpsc::channel();
        let mut threads = Vec::with_capacity(3);
        let checkpoints = match writer.backend.sqlite() {
            Some(conn) => {
                conn.pragma_update(None, "wal_autocheckpoint", 0)
                    .map_err(StoreError::from)?;
                conn.pragma_update(None, "journal_size_limit", WAL_LIMIT)
                    .map_err(StoreError::from)?;
                // Its connection is opened for its first checkpoint: a short-lived process
                // (`baton run` of a few steps) never asks for one.
                let checkpointer = Conn::Later(path.clone(), open_checkpointer);
                let (checkpoints, checkpointer_id) =
                    spawn_thread("baton-store-c", checkpointer, None, None, done_tx.clone())?;
                threads.push(checkpointer_id);
                Some(checkpoints)
            }
            None => None,
        };
        let armed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (closed_tx, closed_rx) = std_mpsc::channel();
        let closing = Some((armed.clone(), closed_tx));
        let (writer, writer_id) = spawn_thread(
            "baton-store-w",
            Conn::Open(Box::new(writer)),
            checkpoints,
            closing,
            done_tx.clone(),
        )?;
        threads.push(writer_id);
        let reader = match reader {
            Some(conn) => {
                let (reader, reader_id) = spawn_thread("baton-store-r", conn, None, None, done_tx)?;
                threads.push(reader_id);
                reader
            }
            None => writer.clone(),
        };
        Ok(Self {
            inner: Arc::new(Inner {
                writer,
                reader,
                path,
                armed,
                writer_id,
                threads,
                closed: Some(std::sync::Mutex::new(closed_rx)),
                done: Some(std::sync::Mutex::new(done_rx)),
            }),
        })
    }

    /// For an engine adopting a handle opened before it took the workspace's lock (an API
    /// server's, whose engine has stopped): what [`StoreHandle::open_checked`] does, through
    /// this handle's writer. The whole file is checked unless the last engine's store
    /// closed cleanly, and the mark is taken away while this engine runs.
    pub async fn check_after_unclean_end(&self) -> Result<()> {
        self.with_writer(|s| s.check_after_unclean_end()).await?
    }

    /// Makes this store's last write, once its last clone is dropped, mark it closed
    /// cleanly, and the drop wait for that. Only an engine holding the workspace's lock
    /// calls this, after [`StoreHandle::open_checked`] or
    /// [`StoreHandle::check_after_unclean_end`].
    pub fn arm_clean_close(&self) {
        self.inner
            .armed
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Runs `f` as one transaction on the writer thread; its changes are kept when it
    /// returns `Ok`. Writes are applied in the order they were submitted; the reply comes
    /// once they are committed.
    pub async fn write<T, E, F>(&self, f: F) -> Result<T, E>
    where
        F: FnOnce(&Db) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        self.write_as(Job::Write, f).await
    }

    /// [`StoreHandle::write`] for a small write that repeats while nothing else happens:
    /// the log it grows is copied into the database by the next checkpoint that some other
    /// write brings on, not by one of its own a second later.
    pub async fn write_quiet<T, E, F>(&self, f: F) -> Result<T, E>
    where
        F: FnOnce(&Db) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        self.write_as(Job::Quiet, f).await
    }

    /// Queues `f` as the job `kind` makes of it and waits for its reply.
    async fn write_as<T, E, F>(&self, kind: fn(WriteBody) -> Job, f: F) -> Result<T, E>
    where
        F: FnOnce(&Db) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        self.submit(kind(write_body(f, tx)))?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// [`StoreHandle::write`], queued at once: writes submitted after this call returns are
    /// committed after it (or with it), whenever the returned future is awaited.
    pub fn write_queued<T, E, F>(&self, f: F) -> impl Future<Output = Result<T, E>> + Send + 'static
    where
        F: FnOnce(&Db) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let sent = self.submit(Job::Write(write_body(f, tx)));
        async move {
            sent?;
            rx.await.map_err(|_| StoreError::Closed)?
        }
    }

    /// Queues a write whose result nobody waits for (a pid, a session id). Failures are
    /// logged. Later writes see it: the writer runs jobs in order.
    pub fn write_detached<F>(&self, what: &'static str, f: F)
    where
        F: FnOnce(&Db) -> Result<()> + Send + 'static,
    {
        let body: WriteBody = Box::new(move |db: std::result::Result<&Db, &StoreError>| {
            let out = match db {
                Ok(db) => f(db),
                Err(e) => Err(StoreError::Conflict(e.to_string())),
            };
            let ok = out.is_ok();
            let deliver: Deliver = Box::new(move |committed: Result<()>| {
                if let Err(e) = out.and(committed) {
                    tracing::error!("recording {what} failed: {e}");
                }
            });
            (ok, deliver)
        });
        if self.submit(Job::Write(body)).is_err() {
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
        self.submit(Job::Raw(Box::new(move |store: &mut Store| {
            let _ = tx.send(f(store));
        })))?;
        rx.await.map_err(|_| StoreError::Closed)
    }

    /// Runs a read on the reader thread (or the writer's, see [`Reads`]). It sees every
    /// write whose future has completed.
    pub async fn read<T, F>(&self, f: F) -> Result<T>
    where
        F: FnOnce(&Db) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        self.submit_read(f, tx)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    fn submit_read<T, F>(&self, f: F, tx: oneshot::Sender<Result<T>>) -> Result<()>
    where
        F: FnOnce(&Db) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        self.inner
            .reader
            .send(Job::Read(Box::new(move |store| {
                let _ = tx.send(match store {
                    Ok(store) => f(&store.read()),
                    Err(e) => Err(e),
                });
            })))
            .map_err(|_| StoreError::Closed)
    }

    fn submit(&self, job: Job) -> Result<()> {
        self.inner.writer.send(job).map_err(|_| StoreError::Closed)
    }
}

/// Wraps a write's body: its reply is sent once the commit's outcome is known.
fn write_body<T, E, F>(f: F, tx: oneshot::Sender<Result<T, E>>) -> WriteBody
where
    F: FnOnce(&Db) -> Result<T, E> + Send + 'static,
    T: Send + 'static,
    E: From<StoreError> + Send + 'static,
{
    Box::new(move |db: std::result::Result<&Db, &StoreError>| {
        let out = match db {
            Ok(db) => f(db),
            // Kept apart, so that a caller can wait and try again.
            Err(StoreError::Busy) => Err(E::from(StoreError::Busy)),
            Err(e) => Err(E::from(StoreError::Conflict(e.to_string()))),
        };
        let ok = out.is_ok();
        let deliver: Deliver = Box::new(move |committed: Result<()>| {
            let reply = match (out, committed) {
                (Ok(v), Ok(())) => Ok(v),
                (Ok(_), Err(e)) => Err(E::from(e)),
                (Err(e), _) => Err(e),
            };
            let _ = tx.send(reply);
        });
        (ok, deliver)
    })
}

/// Runs writes queued together in one transaction, each inside a savepoint of its own: a
/// body that fails rolls back only its own changes, as if it had been a transaction of its
/// own, and every reply waits for the one commit. The same as running them one after
/// another, durable at the same moment, for the price of one commit instead of many.
fn run_group(store: &mut Store, bodies: Vec<WriteBody>) {
    let Store {
        backend, pipelines, ..
    } = store;
    let backend = &*backend;
    let mut delivers: Vec<Deliver> = Vec::with_capacity(bodies.len());
    let tx = match WriteTx::begin(backend) {
        Ok(tx) => tx,
        Err(e) => {
            let e = StoreError::from(e);
            tracing::error!("a write transaction could not start: {e}");
            for body in bodies {
                let (_, deliver) = body(Err(&e));
                deliver(Err(StoreError::Conflict(e.to_string())));
            }
            return;
        }
    };
    // A write alone needs no savepoint: the transaction is its own (two statements less
    // on every step's end).
    let alone = bodies.len() == 1;
    let mut bodies = bodies.into_iter();
    let mut any_failed = false;
    for body in bodies.by_ref() {
        run_one(
            backend,
            pipelines,
            body,
            alone,
            &mut delivers,
            &mut any_failed,
        );
        // Some errors (a full disk, I/O) make SQLite roll the whole transaction back, and a
        // lost connection ends PostgreSQL's: what the earlier bodies did is gone, and a
        // later savepoint would start a transaction of its own. Stop here; every reply says
        // nothing was saved.
        if !backend.in_transaction() {
            break;
        }
    }
    if !backend.in_transaction() {
        drop(tx);
        let e = StoreError::Conflict("the transaction was rolled back".into());
        for body in bodies {
            let (_, deliver) = body(Err(&e));
            deliver(Err(StoreError::Conflict(e.to_string())));
        }
        pipelines.clear();
        for deliver in delivers {
            deliver(Err(StoreError::Conflict(
                "the write was not saved: the transaction was rolled back".into(),
            )));
        }
        return;
    }
    let committed = if alone && any_failed {
        // Its changes go with the transaction; its reply is its own error.
        drop(tx);
        Ok(())
    } else {
        tx.commit().map_err(StoreError::from)
    };
    if any_failed || committed.is_err() {
        pipelines.clear();
    }
    for deliver in delivers {
        deliver(match &committed {
            Ok(()) => Ok(()),
            Err(e) => Err(StoreError::Conflict(format!(
                "the write was not saved: {e}"
            ))),
        });
    }
}

/// Runs one body inside a savepoint of the open transaction (or, `alone`, in the
/// transaction itself): kept if it succeeds, rolled back if not.
fn run_one(
    backend: &Backend,
    pipelines: &super::snapshots::SnapshotCache,
    body: WriteBody,
    alone: bool,
    delivers: &mut Vec<Deliver>,
    any_failed: &mut bool,
) {
    if alone {
        let db = backend.db(pipelines);
        let run = std::panic::AssertUnwindSafe(|| body(Ok(&db)));
        match std::panic::catch_unwind(run) {
            Ok((ok, deliver)) => {
                *any_failed |= !ok;
                delivers.push(deliver);
            }
            Err(_) => {
                *any_failed = true;
                tracing::error!("a database job panicked; the store goes on");
            }
        }
        return;
    }
    if let Err(e) = backend.savepoint() {
        let e = StoreError::from(e);
        let (_, deliver) = body(Err(&e));
        deliver(Err(e));
        *any_failed = true;
        return;
    }
    let undo = || {
        if let Err(e) = backend.rollback_to() {
            tracing::warn!("rolling a write back to its savepoint failed: {e}");
        }
    };
    let db = backend.db(pipelines);
    let run = std::panic::AssertUnwindSafe(|| body(Ok(&db)));
    match std::panic::catch_unwind(run) {
        Ok((true, deliver)) => match backend.release() {
            Ok(()) => delivers.push(deliver),
            // Its changes are rolled back with the savepoint: so is its reply.
            Err(e) => {
                *any_failed = true;
                undo();
                deliver(Err(StoreError::from(e)));
            }
        },
        Ok((false, deliver)) => {
            *any_failed = true;
            undo();
            delivers.push(deliver);
        }
        Err(_) => {
            *any_failed = true;
            undo();
            tracing::error!("a database job panicked; the store goes on");
        }
    }
}

/// A background checkpoint. PASSIVE copies what no reader still needs and never waits.
/// A writer that commits more often than a checkpoint can finish (steps ending every
/// millisecond) never lets the log start over, so it grows for as long as the work goes
/// on (280 MB over 3,000 steps). Past [`RESTART_FRAMES`], once a PASSIVE checkpoint has
/// copied every frame (no reader holds an old snapshot), a RESTART checkpoint (see
/// [`restart`]) lets the next commit start the log over.
fn checkpoint(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    let (frames, copied): (i64, i64) =
        conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
            Ok((r.get(1)?, r.get(2)?))
        })?;
    if frames >= RESTART_FRAMES && copied == frames {
        restart(conn)?;
    }
    Ok(())
}

/// A RESTART checkpoint that never waits inside SQLite: it holds the writer's lock while
/// it waits, so a reader (a board's query, `baton list`) would hold every commit up with
/// it. With no busy timeout, the writer in a transaction or a reader on the log makes it
/// give up at once, and it is tried again a millisecond later, outside SQLite's locks, a
/// few times. When it gets through, the writer waits only for the frames committed since
/// the PASSIVE checkpoint to be copied and for two `fsync`s.
fn restart(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(std::time::Duration::ZERO)?;
    let mut busy = 1;
    for _ in 0..RESTART_TRIES {
        busy = conn.query_row("PRAGMA wal_checkpoint(RESTART)", [], |r| r.get::<_, i64>(0))?;
        if busy == 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    // The idle TRUNCATE on this connection waits a little for readers.
    conn.busy_timeout(TRUNCATE_WAIT)?;
    if busy != 0 {
        tracing::debug!(
            "the write-ahead log could not start over yet: the writer or a reader was on it"
        );
    }
    Ok(())
}

/// Marks a background checkpoint as no longer pending when dropped: once it has run, or
/// when it is dropped unrun (its thread could not open its connection).
struct Pending(Arc<std::sync::atomic::AtomicBool>);

impl Drop for Pending {
    fn drop(&mut self) {
        self.0.store(false, std::sync::atomic::Ordering::Release);
    }
}

/// Opens a store thread's connection to the database at a path.
type Opener = fn(&Path) -> Result<Store>;

/// A store thread's connection.
enum Conn {
    /// Open already.
    Open(Box<Store>),
    /// Opened by the thread as it starts, beside what its caller goes on with.
    Soon(PathBuf, Opener),
    /// Opened for the thread's first job: with none ever asked for, never opened.
    Later(PathBuf, Opener),
}

/// The reader's connection to the SQLite file at `path`, which the writer has opened
/// (and made or brought up to date): opened on the reader's thread while the writer's
/// first work goes on, rather than before it.
fn reader_of(path: &Path) -> Conn {
    Conn::Soon(path.to_path_buf(), Store::open_existing)
}

/// Runs a job, logging a panic rather than letting it end the store's thread.
fn unwound(job: impl FnOnce() + std::panic::UnwindSafe) {
    if std::panic::catch_unwind(job).is_err() {
        tracing::error!("a database job panicked; the store goes on");
    }
}

/// The checkpointer's connection to `path`: it waits a little for readers to move off the
/// log, and cuts the log back to [`WAL_LIMIT`] after emptying it.
fn open_checkpointer(path: &Path) -> Result<Store> {
    // The file the writer has open: a board removed meanwhile is not made anew here.
    let store = Store::open_existing(path)?;
    let conn = store.lite()?;
    conn.pragma_update(None, "journal_size_limit", WAL_LIMIT)
        .map_err(StoreError::from)?;
    conn.busy_timeout(TRUNCATE_WAIT).map_err(StoreError::from)?;
    Ok(store)
}

/// A thread owning one connection, running jobs until every sender is gone. Writes that
/// queued up while one ran are committed together. With `closing` armed by then, the
/// thread's last write marks the store closed cleanly, and it says so on its sender.
fn spawn_thread(
    name: &'static str,
    conn: Conn,
    checkpoints: Option<std_mpsc::Sender<Job>>,
    closing: Option<(Arc<std::sync::atomic::AtomicBool>, std_mpsc::Sender<()>)>,
    done: std_mpsc::Sender<()>,
) -> Result<(std_mpsc::Sender<Job>, std::thread::ThreadId)> {
    let (tx, rx) = std_mpsc::channel::<Job>();
    // The thread's last act, told whether the thread wrote: the writer's mark and log.
    let writes = checkpoints.is_some();
    let close = move |store: &mut Store, wrote: bool| {
        let mut wrote = wrote;
        if let Some((armed, closed)) = &closing
            && armed.load(std::sync::atomic::Ordering::Acquire)
        {
            match super::mark_closed_cleanly(store) {
                Ok(()) => wrote = true,
                Err(e) => tracing::warn!("marking the database closed cleanly failed: {e}"),
            }
            let _ = closed.send(());
        }
        if writes {
            settle(store, wrote);
        }
    };
    let thread = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            // Runs the queue; its connection closes when the closure returns, and only
            // then is `done` dropped.
            let serve = |mut store: Store, mut next: Option<Job>| {
                keep_log(&store);
                let mut commits = 0u32;
                // Commits since the log was last cut to nothing.
                let mut dirty = false;
                // Whether anything that may write ran here.
                let mut wrote = false;
                let pending = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
                loop {
                    let job = match next.take() {
                        Some(j) => j,
                        None => match (&checkpoints, dirty) {
                            (Some(c), true) => match rx.recv_timeout(IDLE) {
                                Ok(j) => j,
                                Err(std_mpsc::RecvTimeoutError::Timeout) => {
                                    dirty = false;
                                    let _ = c.send(Job::Raw(Box::new(|s: &mut Store| {
                                        cut(s);
                                    })));
                                    continue;
                                }
                                Err(std_mpsc::RecvTimeoutError::Disconnected) => {
                                    return close(&mut store, wrote);
                                }
                            },
                            _ => match rx.recv() {
                                Ok(j) => j,
                                Err(_) => return close(&mut store, wrote),
                            },
                        },
                    };
                    // A commit: every so many, a checkpoint in the background.
                    let committing = matches!(job, Job::Write(_) | Job::Quiet(_));
                    wrote |= !matches!(job, Job::Read(_));
                    match job {
                        // A panicking job must not take the store down with it: its caller
                        // sees the reply channel dropped ("the store has stopped").
                        Job::Raw(f) => unwound(std::panic::AssertUnwindSafe(|| f(&mut store))),
                        Job::Read(f) => unwound(std::panic::AssertUnwindSafe(|| f(Ok(&mut store)))),
                        Job::Quiet(body) => run_group(&mut store, vec![body]),
                        Job::Write(first) => {
                            let mut bodies = vec![first];
                            while bodies.len() < GROUP {
                                match rx.try_recv() {
                                    Ok(Job::Write(b)) => bodies.push(b),
                                    Ok(other) => {
                                        next = Some(other);
                                        break;
                                    }
                                    Err(_) => break,
                                }
                            }
                            run_group(&mut store, bodies);
                            dirty = true;
                        }
                    }
                    if committing {
                        commits += 1;
                        if let Some(c) = &checkpoints
                            && commits.is_multiple_of(CHECKPOINT_EVERY)
                            && !pending.swap(true, std::sync::atomic::Ordering::AcqRel)
                        {
                            // Cleared when the job has run, or is dropped unrun.
                            let pending = Pending(pending.clone());
                            let _ = c.send(Job::Raw(Box::new(move |s: &mut Store| {
                                if let Some(Err(e)) = s.backend.sqlite().map(checkpoint) {
                                    tracing::warn!("a background checkpoint failed: {e}");
                                }
                                drop(pending);
                            })));
                        }
                    }
                }
            };
            // The connection opened for the next job: one that finds it cannot be opened
            // hears why if it is a read, and is dropped otherwise; the next one tries again.
            let on_demand = |path: PathBuf, open: Opener| {
                while let Ok(job) = rx.recv() {
                    match open(&path) {
                        Ok(store) => return serve(store, Some(job)),
                        Err(e) => {
                            tracing::warn!("{name} cannot open its connection: {e}");
                            if let Job::Read(f) = job {
                                f(Err(e));
                            }
                        }
                    }
                }
            };
            match conn {
                Conn::Open(store) => serve(*store, None),
                Conn::Soon(path, open) => match open(&path) {
                    Ok(store) => serve(store, None),
                    Err(e) => {
                        tracing::warn!("{name} cannot open its connection: {e}");
                        on_demand(path, open)
                    }
                },
                Conn::Later(path, open) => on_demand(path, open),
            }
            drop(done);
        })
        .map_err(|e| StoreError::Conflict(format!("cannot start the store's thread: {e}")))?;
    Ok((tx, thread.thread().id()))
}

/// Leaves the write-ahead log in place when `store`'s connection closes: SQLite would
/// otherwise copy it into the database at the last close (two `fsync`s) and delete it, and
/// the next command would make it anew (two more). The engine's own checkpoints copy it
/// in while it runs, and [`settle`] when it has grown.
fn keep_log(store: &Store) {
    let keep = rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE;
    if let Some(Err(e)) = store.backend.sqlite().map(|c| c.set_db_config(keep, true)) {
        tracing::debug!("the write-ahead log will be copied in at close: {e}");
    }
}

/// The writer's last act. A log past [`KEEP_LOG`] is copied into the database and cut to
/// nothing, so the next command's first connection reads at most that much of it again;
/// otherwise, if this store wrote, the log is `fsync`ed once: what a command wrote is on
/// the disk when it exits, as when every close copied the log in (commits in between are
/// not, as `synchronous = NORMAL` has it).
fn settle(store: &mut Store, wrote: bool) {
    let Some(conn) = store.backend.sqlite() else {
        return;
    };
    let log = super::path_with(&store.path, "-wal");
    let size = std::fs::metadata(&log).map_or(0, |m| m.len());
    // A reader on the log (a board, another command) holds the cut back: the process
    // waits for it a little, as the idle checkpoint does, not the writer's ten seconds.
    if size > KEEP_LOG && conn.busy_timeout(TRUNCATE_WAIT).is_ok() && cut(store) {
        return;
    }
    if wrote
        && size > 0
        && let Err(e) = std::fs::File::open(&log).and_then(|f| f.sync_data())
    {
        tracing::warn!("syncing the write-ahead log {} failed: {e}", log.display());
    }
}

/// Copies the whole write-ahead log into the database and cuts the log file to nothing;
/// says whether it all went. A reader still on the log makes it give up after a short
/// wait; the next idle time, or the next writer's close, tries again.
fn cut(store: &mut Store) -> bool {
    let Some(conn) = store.backend.sqlite() else {
        return false;
    };
    match conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
        r.get::<_, i64>(0)
    }) {
        Ok(busy) => busy == 0,
        Err(e) => {
            tracing::debug!("copying the write-ahead log in did not finish: {e}");
            false
        }
    }
}

#[cfg(test)]
#[path = "handle_tests.rs"]
mod tests;
