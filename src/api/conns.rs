//! Accepting connections for `baton serve`. A connection that does not send its request
//! headers in time is closed, and only so many are held at once: the rest of the process's
//! file descriptors stay free for the engine (its database, its socket, its steps), so idle
//! sockets opened by anyone on the machine cannot stop the board.

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

/// How long a connection may take to send a request's headers (also while idle between
/// requests).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How long open requests may take to finish once the server is stopping.
const GRACE: Duration = Duration::from_secs(10);

/// The most connections held at once, whatever the descriptor limit.
const MAX_CONNECTIONS: u64 = 1024;

/// File descriptors kept for the engine, at most.
const RESERVE: u64 = 256;

/// What the server allows.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections held at once; one more is closed as soon as it is accepted.
    pub max_connections: usize,
    /// See [`HEADER_READ_TIMEOUT`].
    pub header_timeout: Duration,
}

impl Limits {
    /// The limits for this process's descriptor limit.
    pub fn for_this_process() -> Self {
        use nix::sys::resource::{Resource, getrlimit};
        let soft = getrlimit(Resource::RLIMIT_NOFILE).map_or(1024, |(soft, _)| soft);
        Self {
            max_connections: cap(soft),
            header_timeout: HEADER_READ_TIMEOUT,
        }
    }
}

/// Connections allowed under a descriptor limit: the engine keeps half of a small limit,
/// or [`RESERVE`] of a large one.
pub fn cap(nofile: u64) -> usize {
    let reserve = (nofile / 2).min(RESERVE);
    nofile.saturating_sub(reserve).clamp(8, MAX_CONNECTIONS) as usize
}

/// Raises this process's soft limit of open files to its hard limit (the default soft
/// limit, often 1,024, is low for a server); returns the limit now in force.
pub fn raise_nofile_limit() -> u64 {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return 1024;
    };
    if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        return hard;
    }
    soft
}

/// Serves `app` on `listener` until `stop` resolves, then lets open requests finish (for
/// a while).
pub async fn accept(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    stop: impl std::future::Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let (closing_tx, closing) = watch::channel(false);
    let mut warned: Option<tokio::time::Instant> = None;
    tokio::pin!(stop);
    loop {
        let accepted = tokio::select! {
            _ = &mut stop => break,
            a = listener.accept() => a,
        };
        let io = match accepted {
            Ok((io, _)) => io,
            Err(e) => {
                // Out of descriptors (or a connection reset before it was taken): try again
                // shortly rather than spin; say so at most once a minute.
                if warned.is_none_or(|at| at.elapsed() > Duration::from_secs(60)) {
                    tracing::warn!("accepting a connection failed: {e}");
                    warned = Some(tokio::time::Instant::now());
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            // Full: closed at once, so the descriptors left stay the engine's.
            drop(io);
            continue;
        };
        let service = TowerToHyperService::new(app.clone());
        let mut closing = closing.clone();
        let timeout = limits.header_timeout;
        tokio::spawn(async move {
            let _slot = slot;
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(timeout)
                .serve_connection(TokioIo::new(io), service);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => return,
                _ = closing.wait_for(|c| *c) => conn.as_mut().graceful_shutdown(),
            }
            let _ = tokio::time::timeout(GRACE, conn).await;
        });
    }
    let _ = closing_tx.send(true);
    drop(listener);
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(GRACE, slots.acquire_many(all)).await;
}

#[cfg(test)]
mod tests {
    use super::cap;

    #[test]
    fn the_engine_keeps_descriptors_under_any_limit() {
        assert_eq!(cap(1024), 768);
        assert_eq!(cap(256), 128);
        assert_eq!(cap(20_000), 1024);
        assert_eq!(cap(10), 8);
    }
}
