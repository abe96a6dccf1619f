//! How a client in another process follows the running engine: its socket reports each
//! change, and its end says the engine has gone.

use super::client::Ended;
use super::wake::Change;
use crate::store::Store;
use crate::workspace::{EngineLock, Workspace};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::{broadcast, oneshot};

/// How often an attached client looks for changes when the engine has no socket to
/// subscribe to (one of an older version); with the socket, nothing polls.
const ATTACHED_POLL: Duration = Duration::from_millis(250);
/// Tries at subscribing, 50 ms apart, while an engine that holds the lock starts listening.
const ATTACH_TRIES: usize = 60;

/// Stops the thread that follows another process's engine when dropped.
pub(super) struct Follow {
    stop: Arc<AtomicBool>,
    /// The subscription's socket, shut down to end a blocked read.
    socket: Option<std::os::unix::net::UnixStream>,
}

impl Drop for Follow {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(s) = &self.socket {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// Follows a running engine from another process: its socket reports each change, and its
/// end (the engine stopped or died) resolves `gone`. An engine without the socket is
/// watched through `PRAGMA data_version` instead.
pub(super) async fn follow(
    ws: &Workspace,
    tx: broadcast::Sender<Change>,
    gone: oneshot::Sender<Ended>,
) -> Follow {
    let stop = Arc::new(AtomicBool::new(false));
    // An engine that is still starting holds the lock before it listens: give it a moment.
    let at = ws.clone();
    let sub = tokio::task::spawn_blocking(move || {
        for _ in 0..ATTACH_TRIES {
            if let Some(sub) = super::wake::Subscription::connect(&at.dir()) {
                return Some(sub);
            }
            if !EngineLock::is_held(&at) {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    })
    .await
    .ok()
    .flatten();
    let Some(mut sub) = sub else {
        return watch(ws, tx, gone, stop);
    };
    let socket = sub.socket();
    let flag = stop.clone();
    let _ = std::thread::Builder::new()
        .name("baton-follow".into())
        .spawn(move || {
            while let Some(change) = sub.next_change() {
                let _ = tx.send(change);
            }
            if !flag.load(Ordering::Relaxed) {
                let why = match sub.handed_to() {
                    Some(pid) => Ended::HandedOver { pid },
                    None => Ended::Stopped,
                };
                let _ = gone.send(why);
            }
        });
    Follow { stop, socket }
}

/// Watches `PRAGMA data_version` and reports [`Change::All`] when another connection
/// commits; resolves `gone` once the engine's lock is free.
fn watch(
    ws: &Workspace,
    tx: broadcast::Sender<Change>,
    gone: oneshot::Sender<Ended>,
    stop: Arc<AtomicBool>,
) -> Follow {
    let flag = stop.clone();
    let ws = ws.clone();
    let _ = std::thread::Builder::new()
        .name("baton-watch".into())
        .spawn(move || {
            let store = match crate::engine::board::postgres_board(&ws) {
                Ok(Some(t)) => Store::open_postgres(&t),
                Ok(None) => Store::open_read_only(&ws.db_path()),
                Err(e) => Err(e),
            };
            let Ok(store) = store else {
                let _ = gone.send(Ended::Stopped);
                return;
            };
            let mut last = store.data_version().ok();
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(ATTACHED_POLL);
                if !EngineLock::is_held(&ws) {
                    let _ = gone.send(Ended::Stopped);
                    return;
                }
                let now = store.data_version().ok();
                if now != last {
                    last = now;
                    let _ = tx.send(Change::All);
                }
            }
        });
    Follow { stop, socket: None }
}

/// Waits, in a process that does not run the engine (`run --wait`, `logs --follow`), for
/// the running engine to report a change, rather than looking at the database on a timer.
/// With no engine listening, it waits `fallback` and tries to subscribe again.
pub struct Follower(Option<super::wake::Subscription>);

impl Follower {
    /// Subscribes to the workspace's running engine, if one listens. Make it before the
    /// first look at the database, so no change between the look and the wait is missed.
    pub fn new(ws: &Workspace) -> Self {
        Self(super::wake::Subscription::connect(&ws.dir()))
    }

    /// Blocks until the engine reports a change that `wanted` accepts, or it goes away;
    /// without an engine, sleeps `fallback`. The caller looks at the database again after.
    pub fn wait(&mut self, ws: &Workspace, fallback: Duration, wanted: impl Fn(&Change) -> bool) {
        let Some(sub) = &mut self.0 else {
            std::thread::sleep(fallback);
            // An engine that started meanwhile: look again now, then wait on it.
            self.0 = super::wake::Subscription::connect(&ws.dir());
            return;
        };
        loop {
            match sub.next_change() {
                Some(c) if wanted(&c) => return,
                Some(_) => {}
                None => {
                    self.0 = None;
                    return;
                }
            }
        }
    }
}
