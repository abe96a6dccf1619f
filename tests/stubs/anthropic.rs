//! A loopback Anthropic Messages API for tests of the real `claude` CLI, written from the
//! documented streaming format: `message_start`, `content_block_start` / `_delta` / `_stop`
//! (`text_delta`, `input_json_delta` for `tool_use`), `message_delta` with the stop reason
//! and usage, `message_stop`; errors are `{"type": "error", "error": {…}}` with a status.
//!
//! Each test scripts the conversation as a queue of [`Reply`]s, one per request that carries
//! tools (a turn of Claude's agent loop). Any other request (a side query without tools)
//! gets a short text; `count_tokens` and unknown paths get small sensible answers. Every
//! request is recorded.

pub use super::Gate;
use super::serve;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// One content block of a scripted assistant turn.
#[derive(Debug, Clone)]
pub enum Block {
    Text(String),
    /// A `tool_use` block; its input is streamed as `input_json_delta` pieces.
    Tool {
        name: String,
        input: Value,
    },
}

/// The answer to one conversation request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A streamed assistant message. With `gate`, the stream stops after `message_start`
    /// until the gate is opened (the model is "thinking").
    Turn {
        blocks: Vec<Block>,
        usage: (u64, u64),
        gate: Option<Arc<Gate>>,
    },
    /// An HTTP error with Anthropic's error body.
    Error {
        status: u16,
        kind: &'static str,
        message: String,
    },
    /// `message_start` and half a text block, then the connection is cut (no terminating
    /// chunk).
    Cut,
}

impl Reply {
    /// A turn asking for Claude's `Write` tool.
    pub fn write(path: &str, content: &str) -> Self {
        Self::tool("Write", json!({"file_path": path, "content": content}))
    }

    /// A turn asking for Claude's `Bash` tool.
    pub fn bash(command: &str) -> Self {
        Self::tool("Bash", json!({"command": command, "description": "run it"}))
    }

    /// A turn with one tool call.
    pub fn tool(name: &str, input: Value) -> Self {
        Self::Turn {
            blocks: vec![
                Block::Text("On it.".into()),
                Block::Tool {
                    name: name.into(),
                    input,
                },
            ],
            usage: (120, 30),
            gate: None,
        }
    }

    /// A final text turn.
    pub fn text(text: &str) -> Self {
        Self::Turn {
            blocks: vec![Block::Text(text.into())],
            usage: (300, 80),
            gate: None,
        }
    }

    /// The final answer with the four handoff headings and an `OUTCOME:` line.
    pub fn handoff(outcome: &str) -> Self {
        Self::text(&handoff_text(outcome))
    }

    /// `status` with an error body of `kind`.
    pub fn error(status: u16, kind: &'static str, message: &str) -> Self {
        Self::Error {
            status,
            kind,
            message: message.into(),
        }
    }

    /// This turn, held after `message_start` until `gate` opens.
    pub fn gated(self, gate: &Arc<Gate>) -> Self {
        match self {
            Self::Turn { blocks, usage, .. } => Self::Turn {
                blocks,
                usage,
                gate: Some(gate.clone()),
            },
            other => other,
        }
    }
}

/// The text of [`Reply::handoff`].
pub fn handoff_text(outcome: &str) -> String {
    format!(
        "## What Was Done\nWrote hello.txt.\n\n## Decisions Made\n- Kept it to one file.\n\n\
         ## Open Questions\n- Should it say more?\n\n## Next Agent Context\nhello.txt holds the greeting.\n\n\
         OUTCOME: {outcome}"
    )
}

/// What the stub saw and what it answers next.
#[derive(Default)]
pub struct AnthropicState {
    /// Replies to the conversation's requests, in order.
    pub script: Mutex<VecDeque<Reply>>,
    /// Every request: path and body.
    pub requests: Mutex<Vec<(String, Value)>>,
    /// Conversation requests answered so far.
    pub turns: AtomicUsize,
}

impl AnthropicState {
    /// The conversation requests' bodies (those with tools), in order.
    pub fn turn_bodies(&self) -> Vec<Value> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, b)| is_turn(b))
            .map(|(_, b)| b.clone())
            .collect()
    }

    /// The text of the first user message of the first conversation request: the prompt.
    pub fn prompt(&self) -> String {
        let bodies = self.turn_bodies();
        let Some(first) = bodies.first() else {
            return String::new();
        };
        text_of(&first["messages"][0]["content"])
    }
}

/// The text of a message's content (a string, or its text blocks).
pub fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Starts the stub; `script` answers the conversation's requests in order.
pub fn anthropic(script: Vec<Reply>) -> (super::Server, Arc<AnthropicState>) {
    let state = Arc::new(AnthropicState::default());
    state.script.lock().unwrap().extend(script);
    let app = Router::new()
        .route("/v1/messages", post(messages))
        .route(
            "/v1/messages/count_tokens",
            post(|| async { axum::Json(json!({"input_tokens": 42})) }),
        )
        .fallback(other)
        .with_state(state.clone());
    (serve(app), state)
}

/// A request of the agent loop, as opposed to a side query: it offers tools.
fn is_turn(body: &Value) -> bool {
    body["tools"].as_array().is_some_and(|t| !t.is_empty())
}

async fn other(State(s): State<Arc<AnthropicState>>, uri: Uri, body: Bytes) -> Response {
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    s.requests.lock().unwrap().push((uri.to_string(), body));
    axum::Json(json!({})).into_response()
}

async fn messages(State(s): State<Arc<AnthropicState>>, uri: Uri, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    s.requests
        .lock()
        .unwrap()
        .push((uri.to_string(), body.clone()));
    let model = body["model"].as_str().unwrap_or("claude-stub").to_string();
    let reply = if is_turn(&body) {
        s.turns.fetch_add(1, Ordering::SeqCst);
        s.script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| Reply::text("(the stub has no more replies scripted)"))
    } else {
        Reply::text("Stub side answer.")
    };
    if body["stream"] != true {
        return match reply {
            Reply::Error {
                status,
                kind,
                message,
            } => error(status, kind, &message),
            _ => axum::Json(
                json!({"id": "msg_stub", "type": "message", "role": "assistant",
                "model": model, "content": [{"type": "text", "text": "Stub side answer."}],
                "stop_reason": "end_turn", "stop_sequence": null,
                "usage": {"input_tokens": 10, "output_tokens": 3}}),
            )
            .into_response(),
        };
    }
    match reply {
        Reply::Error {
            status,
            kind,
            message,
        } => error(status, kind, &message),
        Reply::Cut => {
            let (tx, rx) = mpsc::channel(8);
            tokio::spawn(async move {
                let _ = tx.send(Ok(start(&model, 10))).await;
                let _ = tx
                    .send(Ok(event(
                        "content_block_start",
                        json!({"index": 0, "content_block": {"type": "text", "text": ""}}),
                    )))
                    .await;
                let _ = tx
                    .send(Ok(event(
                        "content_block_delta",
                        json!({"index": 0, "delta": {"type": "text_delta", "text": "Half an ans"}}),
                    )))
                    .await;
                let _ = tx
                    .send(Err(std::io::Error::other("the stub cuts the stream")))
                    .await;
            });
            sse(rx)
        }
        Reply::Turn {
            blocks,
            usage,
            gate,
        } => {
            let (tx, rx) = mpsc::channel(64);
            tokio::spawn(async move {
                let _ = tx.send(Ok(start(&model, usage.0))).await;
                if let Some(gate) = gate {
                    gate.hold(tx.closed()).await;
                }
                let mut stop = "end_turn";
                for (i, block) in blocks.iter().enumerate() {
                    for e in block_events(i, block) {
                        if tx.send(Ok(e)).await.is_err() {
                            return;
                        }
                    }
                    if matches!(block, Block::Tool { .. }) {
                        stop = "tool_use";
                    }
                }
                let _ = tx
                    .send(Ok(event(
                        "message_delta",
                        json!({"delta": {"stop_reason": stop, "stop_sequence": null},
                               "usage": {"output_tokens": usage.1}}),
                    )))
                    .await;
                let _ = tx.send(Ok(event("message_stop", json!({})))).await;
            });
            sse(rx)
        }
    }
}

fn error(status: u16, kind: &str, message: &str) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        axum::Json(json!({"type": "error", "error": {"type": kind, "message": message}})),
    )
        .into_response()
}

/// One SSE event; `data` gets its `type` added.
fn event(name: &str, mut data: Value) -> String {
    data["type"] = json!(name);
    format!("event: {name}\ndata: {data}\n\n")
}

fn start(model: &str, input_tokens: u64) -> String {
    event(
        "message_start",
        json!({"message": {"id": "msg_stub", "type": "message", "role": "assistant",
            "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1}}}),
    )
}

/// The events of one content block, its text or tool input cut into a few deltas.
fn block_events(index: usize, block: &Block) -> Vec<String> {
    let (first, deltas): (Value, Vec<Value>) = match block {
        Block::Text(text) => (
            json!({"type": "text", "text": ""}),
            pieces(text)
                .into_iter()
                .map(|t| json!({"type": "text_delta", "text": t}))
                .collect(),
        ),
        Block::Tool { name, input } => (
            json!({"type": "tool_use", "id": format!("toolu_stub_{index}"), "name": name, "input": {}}),
            pieces(&input.to_string())
                .into_iter()
                .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                .collect(),
        ),
    };
    let mut out = vec![event(
        "content_block_start",
        json!({"index": index, "content_block": first}),
    )];
    out.extend(
        deltas
            .into_iter()
            .map(|d| event("content_block_delta", json!({"index": index, "delta": d}))),
    );
    out.push(event("content_block_stop", json!({"index": index})));
    out
}

/// `text` in three pieces, cut on character boundaries.
fn pieces(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let size = chars.len().div_ceil(3).max(1);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

fn sse(rx: mpsc::Receiver<Result<String, std::io::Error>>) -> Response {
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        let item = rx.recv().await?;
        Some((item.map(Bytes::from), rx))
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(stream))
        .unwrap()
}
