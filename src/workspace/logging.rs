//! Tracing goes to a file under `.baton/logs/`, never to the screen (`BATON_LOG` filters it).

use super::Workspace;
use tracing_appender::non_blocking::WorkerGuard;

/// How many lines may wait for the log file before more are dropped.
const QUEUED_LINES: usize = 4096;

/// Starts file logging into `.baton/logs/<file>`; keep the guard alive until exit so the last
/// lines are written. `None` when the folder cannot be made or logging already started.
pub fn init(ws: &Workspace, file: &str) -> Option<WorkerGuard> {
    std::fs::create_dir_all(ws.logs_dir()).ok()?;
    let appender = tracing_appender::rolling::never(ws.logs_dir(), file);
    // The default queue of 128,000 lines is allocated and touched at start (some 3 ms of
    // every command that runs an engine); a log this quiet needs a small one. Lines past
    // it are dropped rather than waited for: a headless engine runs on one thread.
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .buffered_lines_limit(QUEUED_LINES)
        .finish(appender);
    let filter = tracing_subscriber::EnvFilter::try_from_env("BATON_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_writer(writer)
        .with_ansi(false)
        .with_env_filter(filter)
        .try_init()
        .ok()?;
    Some(guard)
}
