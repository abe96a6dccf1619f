//! The one front-end API over the engine: embedded (this process runs it) or attached
//! (another process does; requests go through the commands table and the view refreshes
//! from the store). The app code does not know which.

use super::app::Mode;
use super::event::{AppEvent, NewTask};
use crate::engine::{self, Engine, EngineError, EngineEvent, EngineHandle, Request, RunOptions};
use crate::store::Store;
use crate::workspace::{EngineLock, Workspace, WorkspaceError};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinHandle;

/// How often an attached TUI looks for changes when the engine has no socket to subscribe
/// to (one of an older version); with the socket, nothing polls.
const ATTACHED_POLL: Duration = Duration::from_millis(250);
/// Tries at subscribing, 50 ms apart, while an engine that holds the lock starts listening.
const ATTACH_TRIES: usize = 60;

/// The engine as the TUI sees it.
pub enum Backend {
    Embedded {
        handle: EngineHandle,
        engine: JoinHandle<engine::Result<()>>,
    },
    Attached {
        ws: Workspace,
        watcher: Watcher,
    },
}

/// Stops the thread that follows the engine when dropped.
pub struct Watcher {
    stop: Arc<AtomicBool>,
    /// The subscription's socket, shut down to end a blocked read.
    socket: Option<std::os::unix::net::UnixStream>,
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(s) = &self.socket {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

impl Backend {
    /// Embeds the engine when none runs in the workspace, else attaches. Any other reason
    /// the engine cannot start (a bad config, an unreadable database) is an error sentence:
    /// attaching to no engine would look alive and do nothing. Call inside the tokio runtime.
    pub async fn connect(ws: &Workspace, tx: UnboundedSender<AppEvent>) -> Result<Self, String> {
        if !EngineLock::is_held(ws) {
            match Engine::start(ws).await {
                Ok(engine) => return Ok(Self::embed(ws, engine, tx)),
                // Another engine took the lock meanwhile: attach to it.
                Err(EngineError::Workspace(WorkspaceError::EngineRunning(_))) => {}
                Err(e) => {
                    tracing::error!("the engine could not start: {e}");
                    return Err(e.to_string());
                }
            }
        }
        Ok(Self::Attached {
            ws: ws.clone(),
            watcher: follow(ws, tx),
        })
    }

    fn embed(ws: &Workspace, engine: Engine, tx: UnboundedSender<AppEvent>) -> Self {
        let recovered = &engine.recovered;
        if !recovered.interrupted.is_empty() {
            let ids: Vec<String> = recovered
                .interrupted
                .iter()
                .map(|i| format!("#{i}"))
                .collect();
            let _ = tx.send(AppEvent::Notice(format!(
                "{} interrupted when the last engine stopped — select one and press R to resume",
                ids.join(", ")
            )));
        }
        if !recovered.unknown_tasks.is_empty() {
            let ids: Vec<String> = recovered
                .unknown_tasks
                .iter()
                .map(|i| format!("#{i}"))
                .collect();
            let _ = tx.send(AppEvent::Notice(format!(
                "{} stay running: their step's executor did not answer, so it may still run there; the engine looks again",
                ids.join(", ")
            )));
        }
        let handle = engine.handle();
        let mut events = handle.subscribe();
        let forward = tx.clone();
        tokio::spawn(async move {
            loop {
                let ev = match events.recv().await {
                    Ok(EngineEvent::TaskChanged { task_id }) => AppEvent::TaskChanged(task_id),
                    Ok(EngineEvent::LogLines { step_run_id, .. }) => {
                        AppEvent::LogAppended { step_run_id }
                    }
                    Ok(EngineEvent::Notice { text, .. }) => AppEvent::Notice(text),
                    // Another process wrote (`baton new` in another terminal).
                    Ok(EngineEvent::Changed) => AppEvent::StoreChanged,
                    // The board reads pipelines itself (attached boards too); the engine's
                    // settings are the engine's, so their errors come from it.
                    Ok(EngineEvent::Reloaded { problems }) => {
                        match problems.into_iter().find(|p| p.contains("config.toml")) {
                            Some(p) => AppEvent::Notice(p),
                            None => continue,
                        }
                    }
                    Ok(EngineEvent::Notify { title, body, .. }) => {
                        AppEvent::Notified { title, body }
                    }
                    // Missed events: reload everything instead.
                    Err(RecvError::Lagged(_)) => AppEvent::StoreChanged,
                    Err(RecvError::Closed) => break,
                };
                if forward.send(ev).is_err() {
                    break;
                }
            }
        });
        let engine = tokio::spawn(engine.run(RunOptions::default()));
        let _ = ws;
        Self::Embedded { handle, engine }
    }

    /// Which kind this is.
    pub fn mode(&self) -> Mode {
        match self {
            Self::Embedded { .. } => Mode::Embedded,
            Self::Attached { .. } => Mode::Attached,
        }
    }

    /// Sends a request; its result arrives as [`AppEvent::Replied`].
    pub fn send(&self, req: Request, tx: UnboundedSender<AppEvent>) {
        match self {
            Self::Embedded { handle, .. } => {
                let handle = handle.clone();
                tokio::spawn(async move {
                    let _ = tx.send(AppEvent::Replied(handle.send(req).await));
                });
            }
            Self::Attached { ws, .. } => {
                let ws = ws.clone();
                tokio::task::spawn_blocking(move || {
                    let _ = tx.send(AppEvent::Replied(submit(&ws, &req)));
                });
            }
        }
    }

    /// Creates a task (and starts it if asked); the id arrives as [`AppEvent::Created`].
    pub fn create(&self, ws: &Workspace, new: NewTask, tx: UnboundedSender<AppEvent>) {
        let ws = ws.clone();
        tokio::spawn(async move {
            // Created and started in one transaction; other boards and the engine are woken.
            let created = tokio::task::spawn_blocking(move || {
                let mut store = Store::open(&ws.db_path()).map_err(|e| e.to_string())?;
                let spec = engine::NewTask {
                    pipeline: &new.pipeline,
                    title: &new.title,
                    prompt: &new.prompt,
                    actor: "tui",
                    start: new.start,
                    base_branch: None,
                    idempotency_key: None,
                };
                let made =
                    engine::client::create(&ws, &mut store, &spec).map_err(|e| e.to_string())?;
                let summary = made.started.map(|a| a.summary);
                Ok((made.id, summary))
            })
            .await
            .unwrap_or_else(|e| Err(format!("creating the task panicked: {e}")));
            match created {
                Ok((id, summary)) => {
                    let _ = tx.send(AppEvent::Created(Ok(id)));
                    if let Some(summary) = summary {
                        let _ = tx.send(AppEvent::Replied(Ok(summary)));
                    }
                }
                Err(e) => {
                    let _ = tx.send(AppEvent::Created(Err(e)));
                }
            }
        });
    }

    /// Stops an embedded engine (interrupting running steps so they can be resumed) and
    /// waits for it, at most `patience`. Attached: nothing to stop.
    pub async fn shutdown(self, patience: Duration) {
        if let Self::Embedded { handle, engine, .. } = self {
            handle.shutdown();
            match tokio::time::timeout(patience, engine).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => tracing::error!("the engine stopped with an error: {e}"),
                Ok(Err(e)) => tracing::error!("the engine task failed: {e}"),
                Err(_) => tracing::error!("the engine did not stop within {patience:?}"),
            }
        }
    }
}

/// A request through the commands table (or applied here when the engine went away).
fn submit(ws: &Workspace, req: &Request) -> Result<String, String> {
    let mut store = Store::open(&ws.db_path()).map_err(|e| e.to_string())?;
    engine::client::submit(ws, &mut store, req)
        .map(|s| s.summary().to_string())
        .map_err(|e| e.to_string())
}

/// Follows a running engine from another process: its socket reports each change, and its
/// end (the engine stopped or died) reports [`AppEvent::EngineGone`], so the board can take
/// over instead of queueing work for nobody. Nothing polls; an engine without the socket
/// is watched through `PRAGMA data_version` instead.
fn follow(ws: &Workspace, tx: UnboundedSender<AppEvent>) -> Watcher {
    let stop = Arc::new(AtomicBool::new(false));
    // An engine that is still starting holds the lock before it listens: give it a moment.
    let mut sub = None;
    for _ in 0..ATTACH_TRIES {
        sub = crate::engine::wake::Subscription::connect(&ws.dir());
        if sub.is_some() || !EngineLock::is_held(ws) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let Some(mut sub) = sub else {
        return watch(ws, tx, ATTACHED_POLL, stop);
    };
    let socket = sub.socket();
    let flag = stop.clone();
    let _ = std::thread::Builder::new()
        .name("baton-follow".into())
        .spawn(move || {
            use crate::engine::wake::Change;
            while let Some(change) = sub.next_change() {
                let ev = match change {
                    Change::Task(id) => AppEvent::TaskChanged(id),
                    Change::Log(id) => AppEvent::LogAppended { step_run_id: id },
                    Change::All => AppEvent::StoreChanged,
                    Change::Notify { title, body, .. } => AppEvent::Notified { title, body },
                };
                if tx.send(ev).is_err() {
                    return;
                }
            }
            if !flag.load(Ordering::Relaxed) {
                let _ = tx.send(AppEvent::EngineGone);
            }
        });
    Watcher { stop, socket }
}

/// Watches `PRAGMA data_version` and reports [`AppEvent::StoreChanged`] when another
/// connection commits, and [`AppEvent::EngineGone`] once the engine's lock is free.
fn watch(
    ws: &Workspace,
    tx: UnboundedSender<AppEvent>,
    every: Duration,
    stop: Arc<AtomicBool>,
) -> Watcher {
    let flag = stop.clone();
    let db = ws.db_path();
    let ws = ws.clone();
    let _ = std::thread::Builder::new()
        .name("baton-watch".into())
        .spawn(move || {
            let Ok(store) = Store::open(&db) else { return };
            let mut last = store.data_version().ok();
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(every);
                if !EngineLock::is_held(&ws) {
                    let _ = tx.send(AppEvent::EngineGone);
                    return;
                }
                let now = store.data_version().ok();
                if now != last {
                    last = now;
                    if tx.send(AppEvent::StoreChanged).is_err() {
                        return;
                    }
                }
            }
        });
    Watcher { stop, socket: None }
}
