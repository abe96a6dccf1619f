//! `baton mcp`'s stdio: rmcp's line transport, with its bare "Invalid request" answer (to a
//! line that is JSON but not a JSON-RPC message) replaced by a sentence saying what to send.
//! Lines that are not JSON at all stay unanswered, as in the other MCP SDKs: an answer
//! carries no id to match, and a peer echoing it back would start an error storm.
//! A line longer than the limit (`max_body_bytes`, as over HTTP) is not handed on: it is
//! answered with an error naming the limit, under the request's id when its start shows one
//! (rmcp itself would drop it silently, and the caller would wait for ever).

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

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

/// The JSON-RPC error code for a message too large (the implementation-defined range).
pub const TOO_LARGE: i64 = -32600;

/// The id of the request a line starts, if its first bytes name one (`"id": 7` or
/// `"id": "a"`); null otherwise.
fn request_id(start: &[u8]) -> Value {
    let start = &start[..start.len().min(4096)];
    // Only the top-level object's `"id"` names the request: a nested one (a tool argument
    // called `id`) must not, or the caller would wait for an answer that never comes.
    let (mut depth, mut i) = (0usize, 0usize);
    while i < start.len() {
        match start[i] {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b'"' => {
                let from = i + 1;
                i = from;
                while i < start.len() && start[i] != b'"' {
                    i += if start[i] == b'\\' { 2 } else { 1 };
                }
                let key = &start[from..i.min(start.len())];
                let rest = start.get(i + 1..).unwrap_or_default().trim_ascii_start();
                if depth == 1
                    && key == b"id"
                    && let Some(value) = rest.strip_prefix(b":")
                {
                    return match serde_json::Deserializer::from_slice(value.trim_ascii_start())
                        .into_iter::<Value>()
                        .next()
                    {
                        Some(Ok(v @ (Value::Number(_) | Value::String(_)))) => v,
                        _ => Value::Null,
                    };
                }
            }
            _ => {}
        }
        i += 1;
    }
    Value::Null
}

/// The answer to a line over the limit.
fn too_long(start: &[u8], max: usize) -> String {
    json!({"jsonrpc": "2.0", "id": request_id(start), "error": {"code": TOO_LARGE,
        "message": format!("this message is longer than {max} bytes, the most baton mcp takes on one line (max_body_bytes under [serve] in config.toml) — send less, such as a shorter prompt or pipeline")}})
    .to_string()
}

/// Copies `input` to rmcp line by line; a line longer than `max` bytes is dropped and
/// answered on `answers` instead. Closes rmcp's input at the end of `input`.
pub async fn filter_input(
    input: impl AsyncRead + Unpin,
    mut to_rmcp: impl AsyncWrite + Unpin,
    max: usize,
    answers: mpsc::Sender<String>,
) {
    let mut reader = BufReader::with_capacity(64 * 1024, input);
    let mut line: Vec<u8> = Vec::new();
    let mut over = false;
    while let Ok(buf) = reader.fill_buf().await {
        if buf.is_empty() {
            if !over && !line.is_empty() {
                let _ = to_rmcp.write_all(&line).await;
            }
            break;
        }
        let newline = buf.iter().position(|b| *b == b'\n');
        let take = newline.map_or(buf.len(), |i| i + 1);
        if !over {
            // The newline itself does not count.
            let content = line.len() + take - usize::from(newline.is_some());
            if content > max {
                over = true;
                let room = max.saturating_sub(line.len()).min(take);
                line.extend_from_slice(&buf[..room]);
            } else {
                line.extend_from_slice(&buf[..take]);
            }
        }
        reader.consume(take);
        if newline.is_some() {
            if over {
                tracing::warn!("an MCP message over {max} bytes was refused");
                if answers.send(too_long(&line, max)).await.is_err() {
                    break;
                }
            } else if to_rmcp.write_all(&line).await.is_err() {
                break;
            }
            line.clear();
            over = false;
        }
    }
    let _ = to_rmcp.shutdown().await;
}

/// Copies rmcp's output to `out` line by line, rewriting as `rewrite` does, and the input
/// filter's answers between them, until rmcp closes its end.
pub async fn forward(
    from: impl AsyncRead + Unpin,
    mut out: impl AsyncWrite + Unpin,
    mut answers: mpsc::Receiver<String>,
) {
    let mut lines = BufReader::new(from).lines();
    let mut answering = true;
    loop {
        let line = tokio::select! {
            l = lines.next_line() => match l {
                Ok(Some(l)) => rewrite(&l),
                _ => return,
            },
            a = answers.recv(), if answering => match a {
                Some(a) => a,
                None => {
                    answering = false;
                    continue;
                }
            },
        };
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

    /// A line over the limit is answered under its id and never reaches rmcp; the lines
    /// around it do.
    #[tokio::test]
    async fn a_line_over_the_limit_is_answered_and_the_next_goes_on() {
        let small = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        let big = format!(
            r#"{{"jsonrpc":"2.0","id":"b-2","method":"tools/call","params":{{"x":"{}"}}}}"#,
            "y".repeat(300_000)
        );
        let input = format!("{small}\n{big}\n{small}\n");
        let (tx, mut rx) = mpsc::channel(4);
        let mut passed = Vec::new();
        filter_input(input.as_bytes(), &mut passed, 100_000, tx).await;
        assert_eq!(
            String::from_utf8(passed).unwrap(),
            format!("{small}\n{small}\n")
        );
        let answer: Value = serde_json::from_str(&rx.recv().await.unwrap()).unwrap();
        assert_eq!(answer["id"], "b-2");
        assert_eq!(answer["error"]["code"], TOO_LARGE);
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("100000 bytes")
        );
        assert!(rx.recv().await.is_none());
    }

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

    #[test]
    fn the_answer_to_a_long_line_carries_the_top_level_id() {
        for (start, id) in [
            (r#"{"jsonrpc":"2.0","id":9,"method":"x"#, json!(9)),
            (
                r#"{"method":"tools/call","params":{"arguments":{"id":3}},"id":9,"x":"#,
                json!(9),
            ),
            (
                r#"{"params":{"name":"a \"id\": 4"},"id":"r-1","#,
                json!("r-1"),
            ),
            (r#"{"params":{"id":3},"x":"aaaa"#, Value::Null),
            (r#"["id", 2]"#, Value::Null),
        ] {
            assert_eq!(request_id(start.as_bytes()), id, "{start}");
        }
    }
}
