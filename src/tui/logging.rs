//! Tracing for the TUI goes to `.baton/logs/tui.log`, never to the screen.

use crate::workspace::Workspace;
use tracing_appender::non_blocking::WorkerGuard;

/// Starts file logging; keep the guard alive until exit so the last lines are written.
pub fn init(ws: &Workspace) -> Option<WorkerGuard> {
    std::fs::create_dir_all(ws.logs_dir()).ok()?;
    let appender = tracing_appender::rolling::never(ws.logs_dir(), "tui.log");
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
