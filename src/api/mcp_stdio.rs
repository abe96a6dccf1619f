//! `baton mcp`'s stdio: rmcp's line transport, with its bare "Invalid request" answer (to a
//! line that is JSON but not a JSON-RPC message) replaced by a sentence saying what to send.
//! Lines that are not JSON at all stay unanswered, as in the other MCP SDKs: an answer
//! carries no id to match, and a peer echoing it back would start an error storm.

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

/// What rmcp says to a well-formed line of the wrong shape.
const RMCP_INVALID: &str = "Invalid request";

/// The sentence said instead.
pub const NOT_A_MESSAGE: &str = "this line is JSON but not a JSON-RPC message — send one object per line with \"jsonrpc\": \"2.0\", a \"method\" and, for a request, an \"id\"";

/// One outgoing line, its error message made a sentence where rmcp's is bare.
pub fn rewrite(line: &str) -> String {
    let Ok(mut v) = serde_json::from_str::<serde_json::Value>(line) else {
        return line.to_string();
    };
    let message = v.pointer_mut("/error/message");
    match message {
        Some(m) if m == RMCP_INVALID => *m = NOT_A_MESSAGE.into(),
        _ => return line.to_string(),
    }
    v.to_string()
}

/// Copies rmcp's output to `out` line by line, rewriting as `rewrite` does, until rmcp
/// closes its end.
pub async fn forward(from: impl AsyncRead + Unpin, mut out: impl AsyncWrite + Unpin) {
    let mut lines = BufReader::new(from).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let line = rewrite(&line);
        let written = async {
            out.write_all(line.as_bytes()).await?;
            out.write_all(b"\n").await?;
            out.flush().await
        };
        if written.await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_bare_invalid_request_is_rewritten() {
        let bare =
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid request"}}"#;
        let v: serde_json::Value = serde_json::from_str(&rewrite(bare)).unwrap();
        assert_eq!(v["error"]["message"], NOT_A_MESSAGE);
        assert_eq!(v["error"]["code"], -32600);
        let fine = r#"{"jsonrpc":"2.0","id":1,"result":{"message":"Invalid request"}}"#;
        assert_eq!(rewrite(fine), fine);
    }
}
