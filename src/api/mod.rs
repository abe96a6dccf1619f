//! Front ends for other tools: an MCP server (stdio and Streamable HTTP) and an HTTP API
//! with an event stream and webhooks. Like the TUI and the CLI, they reach the engine
//! through its handle or the commands table and read through the store: no SQL here.

mod catalog_ops;
pub mod extract;
pub mod github_push;
pub mod http;
pub mod link;
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
pub mod token;
pub mod webhooks;

use std::sync::Arc;

/// Serves MCP on stdin/stdout until the client closes it. Bad input is answered with an
/// error; only the end of the input ends the server.
pub async fn serve_stdio(ops: Arc<ops::Ops>) -> Result<(), String> {
    use rmcp::ServiceExt;
    let (to_forward, from_rmcp) = tokio::io::duplex(64 * 1024);
    let forwarder = tokio::spawn(mcp_stdio::forward(from_rmcp, tokio::io::stdout()));
    let server = mcp::BatonMcp::new(ops)
        .serve((tokio::io::stdin(), to_forward))
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
