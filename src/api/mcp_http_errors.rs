//! rmcp's Streamable HTTP server answers transport problems in plain text ("Not Found:
//! Session not found", "fail to deserialize request body …" with 415). This layer turns each
//! into the API's `{"error": "<sentence>"}` with the status that fits, so `/mcp` fails like
//! every other endpoint. JSON-RPC answers (JSON or event streams) pass untouched.

use super::http::error;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

/// The most of a plain-text error body read to rewrite it.
const MAX_TEXT: usize = 16 * 1024;

/// Rewrites rmcp's plain-text failures on `/mcp`.
pub async fn rewrite(req: Request, next: Next) -> Response {
    let res = next.run(req).await;
    let plain = res
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_none_or(|v| v.starts_with("text/plain"));
    if !res.status().is_client_error() && !res.status().is_server_error() || !plain {
        return res;
    }
    let status = res.status();
    let text = match axum::body::to_bytes(res.into_body(), MAX_TEXT).await {
        Ok(b) => String::from_utf8_lossy(&b).trim().to_string(),
        Err(_) => String::new(),
    };
    let (status, message) = sentence(status, &text);
    error(status, message)
}

/// The status and sentence for one of rmcp's plain-text answers.
pub fn sentence(status: StatusCode, text: &str) -> (StatusCode, String) {
    if let Some(detail) = text.strip_prefix("fail to deserialize request body") {
        return (
            StatusCode::BAD_REQUEST,
            format!(
                "the /mcp request body is not a JSON-RPC message ({}) — send one JSON-RPC object, starting with initialize",
                detail.trim()
            ),
        );
    }
    let message = match (status, text) {
        (StatusCode::NOT_FOUND, t) if t.contains("Session not found") => {
            "no such MCP session (it ended, or baton serve restarted) — send initialize again and use the Mcp-Session-Id it answers with".to_string()
        }
        (StatusCode::BAD_REQUEST, t) if t.contains("Session ID is required") => {
            "this MCP request needs the Mcp-Session-Id header — send initialize first and pass the id it answers with".to_string()
        }
        (StatusCode::METHOD_NOT_ALLOWED, _) => {
            "/mcp takes POST (requests), GET (the event stream) and DELETE (end a session) — use one of those".to_string()
        }
        (StatusCode::NOT_ACCEPTABLE, _) => {
            "an MCP client must accept both application/json and text/event-stream — send `Accept: application/json, text/event-stream`".to_string()
        }
        (StatusCode::UNSUPPORTED_MEDIA_TYPE, _) => {
            "the /mcp request body must be sent as JSON — set `Content-Type: application/json`".to_string()
        }
        (_, "") => format!("the MCP endpoint refused this request ({status}) — check it against the MCP specification"),
        (_, t) => format!("the MCP endpoint refused this request: {t} — check it against the MCP specification"),
    };
    (status, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_that_is_not_json_rpc_is_a_400_sentence() {
        let (status, m) = sentence(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "fail to deserialize request body key must be a string at line 1 column 2",
        );
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(
            m.contains("not a JSON-RPC message (key must be a string"),
            "{m}"
        );
    }

    #[test]
    fn session_failures_say_to_initialize() {
        let (s, m) = sentence(StatusCode::NOT_FOUND, "Not Found: Session not found");
        assert_eq!(s, StatusCode::NOT_FOUND);
        assert!(m.contains("send initialize again"), "{m}");
        let (s, m) = sentence(
            StatusCode::BAD_REQUEST,
            "Bad Request: Session ID is required",
        );
        assert_eq!(s, StatusCode::BAD_REQUEST);
        assert!(m.contains("Mcp-Session-Id"), "{m}");
    }
}
