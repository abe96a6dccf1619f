//! Tracing for the TUI goes to `.baton/logs/tui.log`, never to the screen.

use crate::workspace::Workspace;
use tracing_appender::non_blocking::WorkerGuard;

/// Starts file logging; keep the guard alive until exit so the last lines are written.
pub fn init(ws: &Workspace) -> Option<WorkerGuard> {
    crate::workspace::logging::init(ws, "tui.log")
}
