//! Hearing that another process changed a PostgreSQL board: every write transaction that
//! changed something sends `NOTIFY baton` just before its commit (PostgreSQL delivers it
//! only when the commit happens, and folds repeats inside one transaction), and each
//! engine, board, server or MCP process keeps one connection that LISTENs for it.
//!
//! The listener is a plain thread with the blocking client rather than tokio-postgres on
//! the runtime: the store is blocking already (one crate, one way to connect), the thread
//! waits on its socket and costs nothing while idle, and a reconnect with backoff is a
//! plain loop. Notifications sent while it is away are lost, so it says [`Heard::Changed`]
//! once it is back, and [`Heard::Poll`] at a slow fixed pace in case one went missing.

use super::PgTarget;
use postgres::fallible_iterator::FallibleIterator;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The channel baton's notifications travel on. A notification's payload is the
/// sender's mark, followed by [`QUIET`] when all it changed were log lines and heartbeats.
pub const CHANNEL: &str = "baton";

/// The word of a quiet change's notification.
pub const QUIET: &str = "quiet";

/// How often a listener says [`Heard::Poll`] with nothing heard, unless
/// `BATON_PG_POLL_MS` says otherwise.
const POLL: Duration = Duration::from_secs(10);

/// Waits between tries at reaching a database that cannot be reached: doubling from the
/// first to the last.
pub const BACKOFF: (Duration, Duration) = (Duration::from_millis(200), Duration::from_secs(5));

/// What a listener reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heard {
    /// Another process committed a change (or one may have been missed: after a reconnect).
    Changed,
    /// Another process wrote only log lines or heartbeats.
    Quiet,
    /// Nothing was heard for a while: look anyway.
    Poll,
    /// The database cannot be reached (said once per outage): why.
    Lost(String),
    /// The database can be reached again after [`Heard::Lost`].
    Back,
}

/// This process's mark on the notifications it sends, so its own listener can pass over
/// them (the process knows its own changes already).
pub fn sender_mark() -> &'static str {
    static MARK: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    MARK.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        format!("{}-{nanos}", std::process::id())
    })
}

/// The fallback pace: `BATON_PG_POLL_MS` when set (tests), else ten seconds.
pub fn poll_every() -> Duration {
    std::env::var("BATON_PG_POLL_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|ms| *ms > 0)
        .map_or(POLL, Duration::from_millis)
}

/// Listens until dropped. The thread ends at its next report after the drop (or when
/// `on` returns false): at the latest one fallback period later.
pub struct Listener {
    stop: Arc<AtomicBool>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Starts a thread that LISTENs on `target` and calls `on` with what it hears; `own` keeps
/// the notifications this process sent itself. `on` returning false ends the thread.
pub fn listen(
    target: PgTarget,
    own: bool,
    mut on: impl FnMut(Heard) -> bool + Send + 'static,
) -> std::io::Result<Listener> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let every = poll_every();
    std::thread::Builder::new()
        .name("baton-listen".into())
        .spawn(move || {
            let mut lost = false;
            let mut wait = BACKOFF.0;
            while !flag.load(Ordering::Relaxed) {
                let mut client = match connect(&target) {
                    Ok(c) => c,
                    Err(e) => {
                        if !lost {
                            lost = true;
                            if !on(Heard::Lost(e)) {
                                return;
                            }
                        }
                        std::thread::sleep(wait);
                        wait = (wait * 2).min(BACKOFF.1);
                        continue;
                    }
                };
                wait = BACKOFF.0;
                // What was sent before this connection listened was not heard: after an
                // outage, and at the start too (a commit between the first look and the
                // LISTEN would otherwise wait for the fallback). One look covers it.
                if lost && !on(Heard::Back) {
                    return;
                }
                if !on(Heard::Changed) {
                    return;
                }
                let why = loop {
                    if flag.load(Ordering::Relaxed) {
                        return;
                    }
                    let next = client.notifications().timeout_iter(every).next();
                    let heard = match next {
                        Ok(Some(n)) => {
                            let mut words = n.payload().split(' ');
                            if !own && words.next() == Some(sender_mark()) {
                                continue;
                            }
                            match words.next() {
                                Some(QUIET) => Heard::Quiet,
                                _ => Heard::Changed,
                            }
                        }
                        Err(e) => {
                            break e
                                .as_db_error()
                                .map_or(e.to_string(), |d| d.message().into());
                        }
                        Ok(None) if client.is_closed() => break "the connection closed".into(),
                        Ok(None) => Heard::Poll,
                    };
                    if flag.load(Ordering::Relaxed) || !on(heard) {
                        return;
                    }
                };
                lost = true;
                if !on(Heard::Lost(format!(
                    "lost the connection to PostgreSQL at {}: {why}",
                    target.shown()
                ))) {
                    return;
                }
            }
        })?;
    Ok(Listener { stop })
}

/// A connection listening on [`CHANNEL`].
fn connect(target: &PgTarget) -> Result<postgres::Client, String> {
    let mut client = target.connect()?;
    client
        .batch_execute(&format!("LISTEN {CHANNEL}"))
        .map_err(|e| format!("PostgreSQL at {}: {e}", target.shown()))?;
    Ok(client)
}
