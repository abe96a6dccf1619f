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
    // Who its changes are recorded under, decided before async work starts.
    super::people::me(ws)?;
    let max_line = ws.config()?.serve.max_body_bytes;
    let _guard = crate::workspace::logging::init(ws, "mcp.log");
    let rt = runtime()?;
    rt.block_on(async {
        let ops = Arc::new(Ops::open(ws).await.map_err(Failure::new)?);
        let served = tokio::select! {
            r = crate::api::serve_stdio(ops.clone(), max_line) => r,
            _ = stop_signal() => Ok(()),
        };
        if let Ok(ops) = Arc::try_unwrap(ops) {
            ops.shutdown().await;
        }
        served.map_err(Failure::new)?;
        Ok(exit::OK)
    })
}

/// `baton serve [--listen ADDR:PORT]`: the HTTP API, its event stream, webhooks and MCP
/// over HTTP at `/mcp`.
pub fn serve(ws: &Workspace, listen: &str) -> Outcome {
    let addr: std::net::SocketAddr = listen.parse().map_err(|_| {
        Failure::new(format!(
            "--listen {listen} is not an address — write it as 127.0.0.1:7077"
        ))
    })?;
    super::people::me(ws)?;
    if !addr.ip().is_loopback() {
        eprintln!(
            "warning: listening on {addr}, which other machines can reach — anyone holding the token can drive the board; prefer 127.0.0.1 behind an SSH tunnel"
        );
    }
    let cfg = ws.config()?;
    // The webhook secret, under whatever name the workspace gave it, stays with the engine.
    crate::exec::process::keep_from_children(&cfg.serve.github_secret_env);
    let token = crate::api::token::load_or_create(&ws.dir()).map_err(Failure::new)?;
    // Before any thread starts, so every one inherits the higher limit.
    crate::api::conns::raise_nofile_limit();
    let _guard = crate::workspace::logging::init(ws, "serve.log");
    let rt = runtime()?;
    rt.block_on(async {
        let ops = Arc::new(Ops::open(ws).await.map_err(Failure::new)?);
        let opts = crate::api::http::Options {
            listen: addr,
            token,
            token_file: Some(crate::api::token::path(&ws.dir())),
            max_body: cfg.serve.max_body_bytes,
            github_secret_env: cfg.serve.github_secret_env.clone(),
        };
        let engine = if ops.embedded() {
            "runs the engine"
        } else {
            "attached to the running engine"
        };
        let token_path = crate::api::token::path(&ws.dir());
        let ready = |addr: std::net::SocketAddr| {
            eprintln!(
                "baton serve on http://{addr} ({engine}); token in {} — SIGINT/SIGTERM stop it",
                token_path.display()
            );
        };
        let served = crate::api::http::serve(ops.clone(), opts, ready, stop_signal()).await;
        if let Ok(ops) = Arc::try_unwrap(ops) {
            ops.shutdown().await;
        }
        served.map_err(Failure::new)?;
        Ok(exit::OK)
    })
}

/// `baton token rotate`: a new token; the old one stops working at once.
pub fn rotate(ws: &Workspace) -> Outcome {
    crate::api::token::rotate(&ws.dir()).map_err(Failure::new)?;
    outln!(
        "new token written to {} — give it to your clients; the old one no longer works",
        crate::api::token::path(&ws.dir()).display()
    );
    Ok(exit::OK)
}
