//! `baton mcp`, `baton serve` and `baton token rotate`: the API front ends, each running
//! the engine itself or attached to the running one, like the TUI.

use super::{Failure, Outcome, exit};
use crate::api::ops::Ops;
use crate::workspace::Workspace;
use std::sync::Arc;

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::new(format!("cannot start the async runtime: {e}")))
}

/// Resolves on SIGINT or SIGTERM.
async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// `baton mcp`: an MCP server on stdin/stdout. Logs go to `.baton/logs/mcp.log`.
pub fn mcp(ws: &Workspace) -> Outcome {
    let _guard = crate::workspace::logging::init(ws, "mcp.log");
    let rt = runtime()?;
    rt.block_on(async {
        let ops = Arc::new(Ops::open(ws).await.map_err(Failure::new)?);
        let served = tokio::select! {
            r = crate::api::serve_stdio(ops.clone()) => r,
            _ = stop_signal() => Ok(()),
        };
        if let Ok(ops) = Arc::try_unwrap(ops) {
            ops.shutdown().await;
        }
        served.map_err(Failure::new)?;
        Ok(exit::OK)
    })
}
