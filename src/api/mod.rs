//! Front ends for other tools: an MCP server (stdio and Streamable HTTP) and an HTTP API
//! with an event stream and webhooks. Like the TUI and the CLI, they reach the engine
//! through its handle or the commands table and read through the store: no SQL here.

mod catalog_ops;
pub mod conns;
pub mod extract;
pub mod forge_in;
mod forge_in_say;
pub mod http;
pub mod mcp;
pub mod mcp_http_errors;
pub mod mcp_stdio;
pub mod mcp_tools;
pub mod openapi;
pub mod ops;
pub mod routes;
pub mod schema;
pub mod shapes;
pub mod sse;
pub mod talk_routes;
pub mod token;
pub mod tokens;
pub mod webhooks;
pub mod who;

use std::sync::Arc;

/// Serves MCP on stdin/stdout until the client closes it. Bad input is answered with an
/// error (a line over `max_line` bytes too); only the end of the input ends the server.
pub async fn serve_stdio(ops: Arc<ops::Ops>, max_line: usize) -> Result<(), String> {
    use rmcp::ServiceExt;
    let (to_forward, from_rmcp) = tokio::io::duplex(64 * 1024);
    let (to_rmcp, rmcp_input) = tokio::io::duplex(64 * 1024);
    let (answers, answered) = tokio::sync::mpsc::channel(16);
    tokio::spawn(mcp_stdio::filter_input(
        tokio::io::stdin(),
        to_rmcp,
        max_line,
        answers,
    ));
    let forwarder = tokio::spawn(mcp_stdio::forward(from_rmcp, tokio::io::stdout(), answered));
    let server = mcp::BatonMcp::new(ops)
        .serve((rmcp_input, to_forward))
        .await
        .map_err(|e| format!("the MCP session could not start: {e}"))?;
    let ended = server
        .waiting()
        .await
        .map_err(|e| format!("the MCP session ended with an error: {e}"));
    // The server's end of the pipe is closed now: the forwarder writes what is left and stops.
    let _ = forwarder.await;
    ended?;
    Ok(())
}
