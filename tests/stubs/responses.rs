//! A loopback OpenAI Responses API (`POST /v1/responses` with `stream: true`), the wire codex
//! speaks, written from OpenAI's documented streaming events: `response.created`,
//! `response.output_item.added` / `.done` (a `function_call`, or a `message` with its
//! `output_text` deltas) and `response.completed` with usage.
//!
//! One scripted turn: the first request of a turn gets a call of codex's `exec_command` tool
//! (the shell command the test names); the request carrying its `function_call_output` gets the
//! final answer. Every request is recorded with its Authorization header.

use super::{Server, serve, sse_body};
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{Semaphore, mpsc};

/// How the stub fails, if it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fault {
    /// Answers as scripted.
    #[default]
    None,
    /// Every request gets 401 with OpenAI's error body.
    Unauthorized,
    /// Every request gets 500.
    ServerError,
    /// The first stream stops after `response.created` (no `response.completed`), the next
    /// requests are answered as scripted.
    CutOnce,
}

/// What the stub answers.
#[derive(Debug, Clone, Default)]
pub struct Script {
    /// The shell command codex is asked to run first (`exec_command`'s `cmd`), if any.
    pub command: Option<String>,
    /// The final assistant message.
    pub answer: String,
    pub fault: Fault,
    /// Hold the final answer until [`ResponsesState::release`] (the model "thinks").
    pub gated: bool,
}

/// What the stub saw, and the gate on its final answer.
pub struct ResponsesState {
    pub script: Script,
    /// Every request body, in order, with its Authorization header.
    pub requests: Mutex<Vec<(Option<String>, Value)>>,
    /// The final answer is being held at the gate.
    pub waiting: AtomicBool,
    /// A client went away while its answer was held.
    pub dropped: AtomicBool,
    /// Streams answered (cut ones included).
    pub streams: AtomicUsize,
    gate: Semaphore,
}

impl ResponsesState {
    /// Lets one held final answer go.
    pub fn release(&self) {
        self.gate.add_permits(1);
    }
    /// Requests so far.
    pub fn count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
    /// The `name`s of the tools request `i` offered.
    pub fn tools(&self, i: usize) -> Vec<String> {
        self.requests.lock().unwrap()[i].1["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str().map(String::from))
            .collect()
    }
    /// The text of the user messages of request `i`.
    pub fn user_text(&self, i: usize) -> String {
        let reqs = self.requests.lock().unwrap();
        reqs[i].1["input"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["role"] == "user")
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .filter_map(|c| c["text"].as_str().map(String::from))
            .collect::<Vec<_>>()
            .join("\n")
    }
    /// The output codex sent back for the tool call, if any request carried one.
    pub fn tool_output(&self) -> Option<String> {
        let reqs = self.requests.lock().unwrap();
        reqs.iter()
            .flat_map(|(_, b)| b["input"].as_array().cloned().unwrap_or_default())
            .find(|i| i["type"] == "function_call_output")
            .and_then(|i| i["output"].as_str().map(String::from))
    }
}

/// Tokens reported per response; codex sums them over the turn's requests.
pub const INPUT_TOKENS: u64 = 1000;
pub const CACHED_TOKENS: u64 = 200;
pub const OUTPUT_TOKENS: u64 = 100;

/// Starts the stub; codex's `base_url` is `{url}/v1`.
pub fn responses(script: Script) -> (Server, Arc<ResponsesState>) {
    let state = Arc::new(ResponsesState {
        script,
        requests: Mutex::default(),
        waiting: AtomicBool::new(false),
        dropped: AtomicBool::new(false),
        streams: AtomicUsize::new(0),
        gate: Semaphore::new(0),
    });
    let app = Router::new()
        .route("/v1/responses", post(respond))
        .with_state(state.clone());
    (serve(app), state)
}

fn event(v: Value) -> String {
    format!("event: {}\ndata: {v}\n\n", v["type"].as_str().unwrap_or(""))
}

fn created(id: &str) -> String {
    event(
        json!({"type": "response.created", "sequence_number": 0, "response": {
        "id": id, "object": "response", "created_at": 1, "status": "in_progress",
        "model": "stub-model", "output": []}}),
    )
}

fn completed(id: &str) -> String {
    event(json!({"type": "response.completed", "response": {
        "id": id, "object": "response", "created_at": 1, "status": "completed",
        "model": "stub-model", "output": [],
        "usage": {"input_tokens": INPUT_TOKENS, "input_tokens_details": {"cached_tokens": CACHED_TOKENS},
                  "output_tokens": OUTPUT_TOKENS, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS}}}))
}

fn function_call(command: &str) -> Vec<String> {
    let args = json!({"cmd": command}).to_string();
    let item = |arguments: &str, status: &str| {
        json!({"type": "function_call", "id": "fc_1", "call_id": "call_1",
               "name": "exec_command", "arguments": arguments, "status": status})
    };
    vec![
        event(
            json!({"type": "response.output_item.added", "output_index": 0, "item": item("", "in_progress")}),
        ),
        event(
            json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1",
                     "output_index": 0, "delta": args}),
        ),
        event(
            json!({"type": "response.function_call_arguments.done", "item_id": "fc_1",
                     "output_index": 0, "arguments": args}),
        ),
        event(
            json!({"type": "response.output_item.done", "output_index": 0, "item": item(&args, "completed")}),
        ),
    ]
}

fn message(text: &str) -> Vec<String> {
    let at = json!({"item_id": "msg_1", "output_index": 0, "content_index": 0});
    let with = |mut v: Value, extra: Value| {
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        event(v)
    };
    let mut out = vec![
        event(
            json!({"type": "response.output_item.added", "output_index": 0, "item": {
            "type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress", "content": []}}),
        ),
        with(
            at.clone(),
            json!({"type": "response.content_part.added", "part": {"type": "output_text", "text": "", "annotations": []}}),
        ),
    ];
    let chars: Vec<char> = text.chars().collect();
    for piece in chars.chunks(40) {
        let delta: String = piece.iter().collect();
        out.push(with(
            at.clone(),
            json!({"type": "response.output_text.delta", "delta": delta}),
        ));
    }
    out.push(with(
        at.clone(),
        json!({"type": "response.output_text.done", "text": text}),
    ));
    out.push(with(
        at,
        json!({"type": "response.content_part.done", "part": {"type": "output_text", "text": text, "annotations": []}}),
    ));
    out.push(event(
        json!({"type": "response.output_item.done", "output_index": 0, "item": {
        "type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}]}}),
    ));
    out
}

async fn respond(
    State(s): State<Arc<ResponsesState>>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let auth = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    s.requests.lock().unwrap().push((auth, body.clone()));
    match s.script.fault {
        Fault::Unauthorized => {
            let err = json!({"error": {"message": "Incorrect API key provided: sk-te****", "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}});
            return (StatusCode::UNAUTHORIZED, axum::Json(err)).into_response();
        }
        Fault::ServerError => {
            let err = json!({"error": {"message": "The server had an error while processing your request.", "type": "server_error", "param": null, "code": null}});
            return (StatusCode::INTERNAL_SERVER_ERROR, axum::Json(err)).into_response();
        }
        _ => {}
    }
    let n = s.streams.fetch_add(1, Ordering::SeqCst) + 1;
    let id = format!("resp_{n}");
    let answered_tool = body["input"]
        .as_array()
        .and_then(|items| items.last())
        .is_some_and(|i| i["type"] == "function_call_output");
    let (tx, rx) = mpsc::channel(64);
    let state = s.clone();
    tokio::spawn(async move {
        let send = |text: String| {
            let tx = tx.clone();
            async move { tx.send(text).await.is_ok() }
        };
        if !send(created(&id)).await {
            return;
        }
        if state.script.fault == Fault::CutOnce && n == 1 {
            // Dropping the sender ends the body without `response.completed`.
            return;
        }
        let events = match (&state.script.command, answered_tool) {
            (Some(cmd), false) => function_call(cmd),
            _ => {
                if state.script.gated {
                    state.waiting.store(true, Ordering::SeqCst);
                    tokio::select! {
                        permit = state.gate.acquire() => permit.unwrap().forget(),
                        _ = tx.closed() => {
                            state.dropped.store(true, Ordering::SeqCst);
                            return;
                        }
                    }
                    state.waiting.store(false, Ordering::SeqCst);
                }
                message(&state.script.answer)
            }
        };
        for e in events {
            if !send(e).await {
                return;
            }
        }
        send(completed(&id)).await;
    });
    sse_body(rx)
}
