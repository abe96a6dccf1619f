//! The one way into the engine for every front end (the TUI, the CLI, the HTTP API, MCP):
//! embedded (this process runs the engine) or attached (another process does), with the
//! same calls either way. Orders go to the embedded engine's channel, or through the
//! commands table to the running one; with no engine running, this process applies them
//! through the engine's own code in apply-only mode. Changes arrive as [`Change`]s.

use super::request::{Answer, Made, NewTask, Order};
use super::{Engine, EngineError, EngineEvent, EngineHandle, Recovered, Request, RunOptions};
use crate::store::{CommandState, StoreHandle};
use crate::workspace::{EngineLock, Workspace, WorkspaceError};
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, oneshot};
use tokio::task::JoinHandle;

pub use super::client_follow::Follower;
use super::client_follow::{Follow, follow};
pub use super::wake::Change;

/// How long a client waits for a running engine to take its order.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);
/// How often a client looks at its command when the engine cannot answer on its socket.
const FALLBACK_POLL: Duration = Duration::from_millis(25);
/// How many changes a slow listener may fall behind before it is told to reload all.
const CHANGES: usize = 1024;

/// The pipelines in force in an engine this process runs, as it reloads them.
pub type Catalog = tokio::sync::watch::Receiver<std::sync::Arc<crate::pipeline::Catalog>>;

/// How long a client whose engine handed over waits for the new one to listen before it
/// runs an engine itself.
const HANDOVER_WAIT: Duration = Duration::from_secs(10);

/// Resolves when the engine a client uses has stopped by itself (not through
/// [`Client::shutdown`]): the process running it ended, or it handed over.
pub type Gone = Option<oneshot::Receiver<Ended>>;

/// Why the engine a client used has stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Its process stopped or died.
    Stopped,
    /// It handed over to `baton engine`, this process id.
    HandedOver { pid: u32 },
}

/// An order's answer, and where it was applied.
#[derive(Debug, Clone)]
pub struct Submitted {
    /// What the engine made of it.
    pub answer: Answer,
    /// Applied by this process in apply-only mode: no engine was running, so a step it
    /// queued waits for one.
    pub here: bool,
}

/// A front end's connection to the engine of one workspace.
pub struct Client {
    pub(super) ws: Workspace,
    link: Link,
    /// The process's store handle for the read views: the one its engine writes through
    /// when it runs one, else opened at the first view.
    reads: tokio::sync::OnceCell<StoreHandle>,
}

enum Link {
    Embedded {
        handle: EngineHandle,
        /// Taken by the first shutdown.
        engine: std::sync::Mutex<Option<JoinHandle<super::Result<()>>>>,
        recovered: Recovered,
        catalog: Catalog,
    },
    Attached {
        /// Ends the thread following the engine when dropped (None: nothing follows it).
        _follow: Option<Follow>,
        /// On a PostgreSQL board whose engine runs elsewhere: its LISTEN connection.
        _listen: Option<super::pg_wake::Listener>,
        /// Who runs the engine followed, as it said when this client attached.
        owner: Option<super::wake::Owner>,
    },
}

/// A new channel for changes, of `BATON_EVENT_BUFFER` changes when set (tests make it tiny
/// to show that a listener falling behind loses nothing).
pub fn changes() -> broadcast::Sender<Change> {
    let size = std::env::var("BATON_EVENT_BUFFER")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(CHANGES);
    broadcast::channel(size).0
}

impl Client {
    /// Runs the engine here when none runs in the workspace, else attaches to the one
    /// that does; changes go to `tx`. An attached client also returns what says when its
    /// engine has gone. Any reason the engine cannot start (a bad config, an unreadable
    /// database) is an error sentence: attaching to no engine would look alive and do
    /// nothing. Call inside the tokio runtime.
    pub async fn connect(
        ws: &Workspace,
        tx: &broadcast::Sender<Change>,
    ) -> Result<(Self, Gone), String> {
        Self::connect_on(ws, tx, None).await
    }

    /// [`Client::connect`]; an engine run here writes through `store`, this process's
    /// handle on the workspace's database, so the process has one writer.
    pub async fn connect_on(
        ws: &Workspace,
        tx: &broadcast::Sender<Change>,
        store: Option<StoreHandle>,
    ) -> Result<(Self, Gone), String> {
        if !EngineLock::is_held(ws) {
            match Engine::start_on(ws, store.clone()).await {
                Ok(engine) => {
                    let reads = engine.store();
                    let handle = engine.handle();
                    forward(handle.subscribe(), tx.clone());
                    let recovered = engine.recovered.clone();
                    let catalog = engine.catalog();
                    let (ended_tx, ended) = oneshot::channel();
                    let watched = handle.clone();
                    let engine = tokio::spawn(async move {
                        let out = engine.run(RunOptions::default()).await;
                        // The engine is dropped by now: its lock is free.
                        if !watched.shutting_down() {
                            let why = match watched.handed_to() {
                                Some(pid) => Ended::HandedOver { pid },
                                None => Ended::Stopped,
                            };
                            let _ = ended_tx.send(why);
                        }
                        out
                    });
                    // Boards and streams reload: work may have been queued for this engine.
                    let _ = tx.send(Change::All);
                    let link = Link::Embedded {
                        handle,
                        engine: std::sync::Mutex::new(Some(engine)),
                        recovered,
                        catalog,
                    };
                    return Ok((Self::with(ws, link, Some(reads)), Some(ended)));
                }
                // Another engine took the lock meanwhile: attach to it.
                Err(EngineError::Workspace(WorkspaceError::EngineRunning(_))) => {}
                // The board's engine runs on another machine: follow the board itself.
                Err(EngineError::Store(crate::store::StoreError::Conflict(why))) => {
                    let board = super::board::postgres_board(ws).ok().flatten();
                    if let Some(t) = board {
                        tracing::info!("{why}; this board follows it");
                        let link = Link::Attached {
                            _follow: None,
                            _listen: super::pg_wake::for_client(t, tx.clone()),
                            owner: None,
                        };
                        return Ok((Self::with(ws, link, store), None));
                    }
                    return Err(why);
                }
                Err(e) => {
                    tracing::error!("the engine could not start: {e}");
                    return Err(e.to_string());
                }
            }
        }
        let (gone_tx, gone) = oneshot::channel();
        let follow = follow(ws, tx.clone(), gone_tx).await;
        let dir = ws.dir();
        let owner =
            tokio::task::spawn_blocking(move || super::wake::who(&dir, Duration::from_millis(500)))
                .await
                .ok()
                .flatten();
        let link = Link::Attached {
            _follow: Some(follow),
            _listen: None,
            owner,
        };
        Ok((Self::with(ws, link, store), Some(gone)))
    }

    /// [`Client::connect_on`] once the engine used before has ended: after a handover it
    /// first waits (a while) for the new engine to listen, so this process does not take
    /// the lock that engine waits for.
    pub async fn reconnect(
        ws: &Workspace,
        tx: &broadcast::Sender<Change>,
        store: Option<StoreHandle>,
        ended: Ended,
    ) -> Result<(Self, Gone), String> {
        if let Ended::HandedOver { .. } = ended {
            let at = ws.clone();
            let _ = tokio::task::spawn_blocking(move || {
                let until = Instant::now() + HANDOVER_WAIT;
                while Instant::now() < until {
                    if EngineLock::is_held(&at) && super::wake::listening(&at.dir()) {
                        return;
                    }
                    // Another process's lock and socket: nothing to wait on but the clock.
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
            .await;
        }
        Self::connect_on(ws, tx, store).await
    }

    /// [`Client::reconnect`] for this client's process, which keeps its store handle (an
    /// engine started now writes through it): one store handle per process.
    pub async fn after_end(
        &self,
        tx: &broadcast::Sender<Change>,
        ended: Ended,
    ) -> Result<(Self, Gone), String> {
        Self::reconnect(&self.ws, tx, self.reads.get().cloned(), ended).await
    }

    /// A client for one command: it follows nothing, hands orders to the running engine,
    /// or applies them here when none runs.
    pub fn for_command(ws: &Workspace) -> Self {
        let link = Link::Attached {
            _follow: None,
            _listen: None,
            owner: None,
        };
        Self::with(ws, link, None)
    }

    fn with(ws: &Workspace, link: Link, reads: Option<StoreHandle>) -> Self {
        Self {
            ws: ws.clone(),
            link,
            reads: tokio::sync::OnceCell::new_with(reads),
        }
    }

    /// The store handle the read views use.
    pub(super) async fn reads(&self) -> Result<&StoreHandle, crate::engine::views::OpError> {
        self.reads
            .get_or_try_init(|| async {
                let shown = self.ws.db_path().display().to_string();
                let ws = self.ws.clone();
                tokio::task::spawn_blocking(move || crate::engine::board::open_handle(&ws))
                    .await
                    .map_err(|e| format!("opening the board's database {shown} stopped unexpectedly ({e}) — ask again"))?
                    .map_err(|e| format!("cannot open the board's database {shown}: {e} — check that .baton/ is readable, then ask again"))
            })
            .await
            .map_err(|m| {
                crate::engine::views::OpError::new(crate::engine::views::Kind::Internal, m)
            })
    }

    /// The pipelines of the engine this process runs, as it reloads them (None when
    /// attached: the engine's catalog is in another process).
    pub fn catalog(&self) -> Option<Catalog> {
        match &self.link {
            Link::Embedded { catalog, .. } => Some(catalog.clone()),
            Link::Attached { .. } => None,
        }
    }

    /// True when this process runs the engine.
    pub fn embedded(&self) -> bool {
        matches!(self.link, Link::Embedded { .. })
    }

    /// Who runs the engine this client follows (None: this process does, or it did not
    /// say).
    pub fn owner(&self) -> Option<super::wake::Owner> {
        match &self.link {
            Link::Attached { owner, .. } => *owner,
            Link::Embedded { .. } => None,
        }
    }

    /// What the engine this process started found at start-up, one sentence each (tasks
    /// interrupted when the last engine stopped, steps whose executor did not answer).
    pub fn start_notices(&self) -> Vec<String> {
        let Link::Embedded { recovered, .. } = &self.link else {
            return Vec::new();
        };
        let ids = |v: &[i64]| {
            v.iter()
                .map(|i| format!("#{i}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut out = Vec::new();
        if !recovered.interrupted.is_empty() {
            out.push(format!(
                "{} interrupted when the last engine stopped — select one and press R to resume",
                ids(&recovered.interrupted)
            ));
        }
        if !recovered.unknown_tasks.is_empty() {
            out.push(format!(
                "{} stay running: their step's executor did not answer, so it may still run there; the engine looks again",
                ids(&recovered.unknown_tasks)
            ));
        }
        out
    }

    /// Sends a request; its one-line summary, or the sentence saying why not.
    pub async fn send(&self, req: Request) -> Result<String, String> {
        self.order(Order::Act(req)).await.map(|a| a.summary())
    }

    /// Creates a task, and starts it when asked, in one transaction; the engine checks
    /// the title, the pipeline and the branch.
    pub async fn create(&self, new: NewTask) -> Result<Made, String> {
        match self.order(Order::Create { create: new }).await? {
            Answer::Made(m) => Ok(m),
            other => Err(format!(
                "the engine answered a creation with `{}` — is it another baton version?",
                other.summary()
            )),
        }
    }

    /// Hands the engine an order and waits for its answer.
    pub async fn order(&self, order: Order) -> Result<Answer, String> {
        self.submit(order).await.map(|s| s.answer)
    }

    /// [`Client::order`], and where it was applied.
    pub async fn submit(&self, order: Order) -> Result<Submitted, String> {
        if let Link::Embedded { handle, .. } = &self.link {
            let answer = handle.order(order).await?;
            return Ok(Submitted {
                answer,
                here: false,
            });
        }
        // Applying here takes the engine lock for the while, so no engine starts meanwhile
        // and runs the same hooks or kills the step this order ends.
        let ws = self.ws.clone();
        let lock = tokio::task::spawn_blocking(move || lock_unless_engine(&ws))
            .await
            .map_err(|e| format!("the request failed: {e}"))?;
        match lock {
            Some(lock) => {
                let engine = Engine::apply_only(&self.ws, lock)
                    .await
                    .map_err(|e| e.to_string())?;
                let answer = engine.apply_here(order).await?;
                super::wake::poke(&self.ws.dir());
                Ok(Submitted { answer, here: true })
            }
            None => {
                let ws = self.ws.clone();
                let queued = tokio::task::spawn_blocking(move || queue(&ws, order))
                    .await
                    .map_err(|e| format!("the request failed: {e}"))??;
                match queued {
                    Queued::Answered(answer) => Ok(Submitted {
                        answer,
                        here: false,
                    }),
                    // The engine stopped before it took the order: applied here after all.
                    Queued::Withdrawn(order) => Box::pin(self.submit(*order)).await,
                }
            }
        }
    }

    /// [`Client::submit`] for a caller outside any async runtime (the CLI).
    pub fn submit_blocking(&self, order: Order) -> Result<Submitted, String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the async runtime: {e}"))?;
        rt.block_on(self.submit(order))
    }

    /// Stops an embedded engine (interrupting running steps so they can be resumed) and
    /// waits for it, at most `patience`. Attached: nothing to stop.
    pub async fn shutdown(&self, patience: Duration) {
        if let Link::Embedded { handle, engine, .. } = &self.link {
            handle.shutdown();
            let taken = engine.lock().unwrap_or_else(|p| p.into_inner()).take();
            let Some(engine) = taken else { return };
            match tokio::time::timeout(patience, engine).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => tracing::error!("the engine stopped with an error: {e}"),
                Ok(Err(e)) => tracing::error!("the engine task failed: {e}"),
                Err(_) => tracing::error!("the engine did not stop within {patience:?}"),
            }
        }
    }
}

/// The engine lock, unless an engine is running and listening (None then; also when
/// another command held the lock past the patience). An engine takes the lock a moment
/// before it listens: look again until one of the two.
fn lock_unless_engine(ws: &Workspace) -> Option<EngineLock> {
    let until = Instant::now() + ANSWER_WITHIN;
    loop {
        if EngineLock::is_held(ws) && super::wake::listening(&ws.dir()) {
            return None;
        }
        match EngineLock::acquire(ws, Duration::from_millis(50)) {
            Ok(lock) => return Some(lock),
            Err(_) if Instant::now() < until => continue,
            Err(_) => return None,
        }
    }
}

/// What became of an order queued for the running engine.
enum Queued {
    /// The engine applied it (or refused it: then `queue` says why).
    Answered(Answer),
    /// The engine stopped before it took the order (a `run --wait` engine ending as its
    /// task settled); the order was taken back, to be applied by whoever runs it now.
    Withdrawn(Box<Order>),
}

/// Queues an order in the commands table for the running engine and waits for its answer.
fn queue(ws: &Workspace, order: Order) -> Result<Queued, String> {
    queue_ref(ws, &order).map(|answer| match answer {
        Some(answer) => Queued::Answered(answer),
        None => Queued::Withdrawn(Box::new(order)),
    })
}

/// [`queue`]: the answer, or None when the order was taken back unapplied.
fn queue_ref(ws: &Workspace, order: &Order) -> Result<Option<Answer>, String> {
    let mut store = crate::engine::board::open_store(ws).map_err(|e| e.to_string())?;
    let body = serde_json::to_value(order).map_err(|e| e.to_string())?;
    let id = match store.write(|db| db.insert_command(order.task_id(), &body)) {
        Ok(id) => id,
        // The command cannot be queued (a full disk): an abort goes to the engine on its
        // socket instead, which stops the step at once and records the abort later.
        Err(e) => {
            return match order {
                Order::Act(req) if matches!(req.action, super::Action::Abort { .. }) => {
                    match super::wake::abort(&ws.dir(), req, ANSWER_WITHIN) {
                        Some(Ok(summary)) => Ok(Some(applied(summary))),
                        Some(Err(reason)) => Err(reason),
                        None => Err(e.to_string()),
                    }
                }
                _ => Err(e.to_string()),
            };
        }
    };
    let deadline = Instant::now() + ANSWER_WITHIN;
    // The engine answers on its socket once it has applied the queued commands; without
    // a socket (or an answer), the row is looked at again every so often.
    let mut waiter = super::wake::Waiter::connect(&ws.dir());
    loop {
        if let Some(cmd) = store.read().command(id).map_err(|e| e.to_string())? {
            let result = cmd.result.unwrap_or_default();
            match cmd.state {
                CommandState::Done => return Answer::from_command(order, result).map(Some),
                CommandState::Failed => return Err(result),
                CommandState::Pending | CommandState::Answering => {}
            }
        }
        // The engine is gone without having taken it: taken back, unless it took it just now.
        if !EngineLock::is_held(ws)
            && store
                .write(|db| db.withdraw_command(id))
                .map_err(|e| e.to_string())?
        {
            return Ok(None);
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(format!(
                "the running engine did not take command {id} within {} s; it stays queued and will be applied when the engine catches up",
                ANSWER_WITHIN.as_secs()
            ));
        }
        match waiter.take() {
            Some(w) => {
                w.wait(deadline - now);
            }
            // No socket to wait on: look again shortly (an engine of another version).
            None => std::thread::sleep(FALLBACK_POLL.min(deadline - now)),
        }
    }
}

/// A running engine's summary (whether it queued a step is its business).
fn applied(summary: String) -> Answer {
    Answer::Applied {
        summary,
        queued: false,
        forge: None,
    }
}

/// Hands an embedded engine's events on as changes.
fn forward(mut events: broadcast::Receiver<EngineEvent>, tx: broadcast::Sender<Change>) {
    tokio::spawn(async move {
        use broadcast::error::RecvError;
        loop {
            let change = match events.recv().await {
                Ok(EngineEvent::TaskChanged { task_id }) => Change::Task(task_id),
                Ok(EngineEvent::LogLines { step_run_id, .. }) => Change::Log(step_run_id),
                // Another process wrote (`baton new` in another terminal); or events missed.
                Ok(EngineEvent::Changed) | Err(RecvError::Lagged(_)) => Change::All,
                // Definitions were read again (a board here shows the engine's catalog):
                // the first problem, counting the rest.
                Ok(EngineEvent::Reloaded { problems }) => {
                    if let Some(first) = problems.first() {
                        let more = match problems.len() {
                            1 => String::new(),
                            n => format!(" (and {} more — `baton pipelines validate`)", n - 1),
                        };
                        let _ = tx.send(Change::Notice(format!("{first}{more}")));
                    }
                    Change::All
                }
                Ok(EngineEvent::Notify {
                    task_id,
                    title,
                    body,
                }) => Change::Notify {
                    task_id,
                    title,
                    body,
                },
                Ok(EngineEvent::Notice { text, .. }) => Change::Notice(text),
                Ok(EngineEvent::HandingOver { pid, running }) => {
                    Change::Notice(super::wake::handover_text(pid, running))
                }
                // Said by its Notice too.
                Ok(EngineEvent::Stopping { .. } | EngineEvent::Database { .. }) => continue,
                Err(RecvError::Closed) => return,
            };
            let _ = tx.send(change);
        }
    });
}
