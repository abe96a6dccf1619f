//! Tracing goes to a file under `.baton/logs/`, never to the screen (`BATON_LOG` filters it).

use super::Workspace;
use tracing_appender::non_blocking::WorkerGuard;

/// Starts file logging into `.baton/logs/<file>`; keep the guard alive until exit so the last
/// lines are written. `None` when the folder cannot be made or logging already started.
pub fn init(ws: &Workspace, file: &str) -> Option<WorkerGuard> {
    std::fs::create_dir_all(ws.logs_dir()).ok()?;
    let appender = tracing_appender::rolling::never(ws.logs_dir(), file);
    let (writer, guard) = tracing_appender::non_blocking(appender);
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
