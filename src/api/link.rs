//! The API's connection to the engine, like the TUI's: it runs the engine itself when none
//! runs in the workspace (embedded), or attaches to the one that does, and takes over when
//! that one stops. Either way it hands on a stream of changes (`task N`, `log N`, `all`)
//! for notifications and event streams.

use crate::engine::wake::{Change, Subscription};
use crate::engine::{self, Engine, EngineError, EngineEvent, EngineHandle, Request, RunOptions};
use crate::store::Store;
use crate::workspace::{EngineLock, Workspace, WorkspaceError};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

/// How many changes a slow listener may fall behind before it is told to reload all.
const CHANGES: usize = 1024;

/// Where requests go.
pub enum Link {
    /// This process runs the engine.
    Embedded {
        handle: EngineHandle,
        engine: JoinHandle<engine::Result<()>>,
    },
    /// Another process runs it (or none does: requests are then applied here).
    Attached {
        /// Ends the subscription's blocked read when the link is dropped.
        socket: Option<std::os::unix::net::UnixStream>,
    },
}

impl Drop for Link {
    fn drop(&mut self) {
        if let Self::Attached { socket: Some(s) } = self {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
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

/// Resolves when the engine an attached link follows has stopped.
pub type Gone = Option<tokio::sync::oneshot::Receiver<()>>;

impl Link {
    /// Embeds the engine when none runs, else attaches; changes go to `tx`. An attached
    /// link also returns what says when its engine has gone.
    pub async fn connect(
        ws: &Workspace,
        tx: &broadcast::Sender<Change>,
    ) -> Result<(Self, Gone), String> {
        if !EngineLock::is_held(ws) {
            match Engine::start(ws).await {
                Ok(engine) => {
                    let handle = engine.handle();
                    forward(handle.subscribe(), tx.clone());
                    let engine = tokio::spawn(engine.run(RunOptions::default()));
                    // Boards and streams reload: work may have been queued for this engine.
                    let _ = tx.send(Change::All);
                    return Ok((Self::Embedded { handle, engine }, None));
                }
                Err(EngineError::Workspace(WorkspaceError::EngineRunning(_))) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
        let (gone_tx, gone) = tokio::sync::oneshot::channel();
        let socket = follow(ws, tx.clone(), gone_tx).await;
        Ok((Self::Attached { socket }, Some(gone)))
    }

    /// True when this process runs the engine.
    pub fn embedded(&self) -> bool {
        matches!(self, Self::Embedded { .. })
    }

    /// Sends a request; its one-line summary, or the error sentence the CLI would print.
    pub async fn send(&self, ws: &Workspace, req: Request) -> Result<String, String> {
        match self {
            Self::Embedded { handle, .. } => handle.send(req).await,
            Self::Attached { .. } => {
                let ws = ws.clone();
                tokio::task::spawn_blocking(move || {
                    let mut store = Store::open(&ws.db_path()).map_err(|e| e.to_string())?;
                    engine::client::submit(&ws, &mut store, &req)
                        .map(|s| s.summary().to_string())
                        .map_err(|e| e.to_string())
                })
                .await
                .unwrap_or_else(|e| Err(format!("the request failed: {e}")))
            }
        }
    }

    /// Stops an embedded engine (running steps are interrupted and can be resumed).
    pub async fn shutdown(mut self) {
        if let Self::Embedded { handle, engine } = &mut self {
            handle.shutdown();
            let patience = std::time::Duration::from_secs(30);
            match tokio::time::timeout(patience, engine).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => tracing::error!("the engine stopped with an error: {e}"),
                Ok(Err(e)) => tracing::error!("the engine task failed: {e}"),
                Err(_) => tracing::error!("the engine did not stop within {patience:?}"),
            }
        }
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
                Ok(EngineEvent::Changed) | Err(RecvError::Lagged(_)) => Change::All,
                Ok(EngineEvent::Reloaded { .. }) => Change::All,
                Ok(EngineEvent::Notify {
                    task_id,
                    title,
                    body,
                }) => Change::Notify {
                    task_id,
                    title,
                    body,
                },
                Ok(EngineEvent::Notice { .. }) => continue,
                Err(RecvError::Closed) => return,
            };
            let _ = tx.send(change);
        }
    });
}

/// Follows another process's engine through its socket, on a thread of its own (the
/// subscription's reads block). Returns the socket, to end the thread.
async fn follow(
    ws: &Workspace,
    tx: broadcast::Sender<Change>,
    gone: tokio::sync::oneshot::Sender<()>,
) -> Option<std::os::unix::net::UnixStream> {
    let dir = ws.dir();
    let ws = ws.clone();
    // An engine that is still starting holds the lock before it listens: look again a few
    // times, as the TUI does.
    let sub = tokio::task::spawn_blocking(move || {
        for _ in 0..60 {
            if let Some(sub) = Subscription::connect(&dir) {
                return Some(sub);
            }
            if !EngineLock::is_held(&ws) {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        None
    })
    .await
    .ok()
    .flatten();
    let Some(sub) = sub else {
        // No engine listens (one of another version, or it stopped meanwhile).
        let _ = gone.send(());
        return None;
    };
    let socket = sub.socket();
    let mut sub = sub;
    let _ = std::thread::Builder::new()
        .name("baton-api-follow".into())
        .spawn(move || {
            while let Some(change) = sub.next_change() {
                let _ = tx.send(change);
            }
            let _ = gone.send(());
        });
    socket
}
