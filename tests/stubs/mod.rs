//! Loopback HTTP stubs for agent tests: a streaming OpenAI-compatible server and an
//! OpenCode-API server. Each runs on its own thread and runtime, bound to 127.0.0.1:0, and
//! records what it was asked so tests can assert on it. Included by the `agent_*` tests.
#![allow(dead_code)]

pub mod forge;
pub mod gemini;
pub mod responses;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, broadcast, mpsc};

/// Polls `cond` every 10 ms until it holds; panics with `what` after `limit`.
pub fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A stub server on its own runtime thread.
pub struct Server {
    pub url: String,
    _shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

fn serve(app: Router) -> Server {
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            addr_tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stop_rx.await;
                })
                .await
                .unwrap();
        });
    });
    let addr = addr_rx.recv().unwrap();
    Server {
        url: format!("http://{addr}"),
        _shutdown: Some(stop_tx),
    }
}

fn sse_body(rx: mpsc::Receiver<String>) -> Response {
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        let item = rx.recv().await?;
        Some((Ok::<_, Infallible>(Bytes::from(item)), rx))
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}

/// A gate a scripted answer waits behind; the test opens it.
#[derive(Debug, Default)]
pub struct Gate {
    open: Notify,
    /// How many requests are waiting at the gate now.
    held: AtomicUsize,
}

impl Gate {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }
    /// Lets the held answer (or the next one to arrive) go on.
    pub fn open(&self) {
        self.open.notify_one();
    }
    /// True while a request waits at the gate.
    pub fn holding(&self) -> bool {
        self.held.load(Ordering::SeqCst) > 0
    }
    /// Holds a request until the test opens the gate, or `gone` (its client went away).
    pub async fn hold(&self, gone: impl std::future::Future<Output = ()>) {
        self.held.fetch_add(1, Ordering::SeqCst);
        tokio::select! {
            _ = self.open.notified() => {}
            _ = gone => {}
        }
        self.held.fetch_sub(1, Ordering::SeqCst);
    }
}

// ---------------------------------------------------------------- OpenAI-compatible

/// What the OpenAI stub saw and how it answers.
#[derive(Default)]
pub struct OpenAiState {
    /// Answers by model name.
    pub answers: Mutex<HashMap<String, String>>,
    /// Every request body, in order, with its Authorization header.
    pub requests: Mutex<Vec<(Option<String>, Value)>>,
    /// A `slow` stream has started.
    pub slow_started: AtomicBool,
    /// The client of a `slow` stream went away.
    pub slow_dropped: AtomicBool,
    /// Holds the next agent-loop request (one that offers tools) after its first chunk,
    /// until the test opens it (the model is "thinking").
    pub gate: Mutex<Option<Arc<Gate>>>,
}

impl OpenAiState {
    /// The user message of request `i`.
    pub fn prompt(&self, i: usize) -> String {
        let reqs = self.requests.lock().unwrap();
        let msgs = reqs[i].1["messages"].as_array().unwrap();
        msgs.last().unwrap()["content"]
            .as_str()
            .unwrap()
            .to_string()
    }
    pub fn count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
}

/// Starts the OpenAI stub. Models: any name in `answers` streams that answer; `slow`
/// streams one chunk and then nothing until the client leaves; `bad-key` answers 401
/// echoing the key; `boom` answers 500.
pub fn openai(answers: &[(&str, &str)]) -> (Server, Arc<OpenAiState>) {
    let state = Arc::new(OpenAiState::default());
    for (m, a) in answers {
        state
            .answers
            .lock()
            .unwrap()
            .insert(m.to_string(), a.to_string());
    }
    let app = Router::new()
        .route("/v1/chat/completions", post(chat))
        .route(
            "/v1/models",
            get(|| async { axum::Json(json!({"data": []})) }),
        )
        .with_state(state.clone());
    (serve(app), state)
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let v = json!({"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": 1,
        "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {v}\n\n")
}

async fn chat(
    State(s): State<Arc<OpenAiState>>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let auth = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    s.requests
        .lock()
        .unwrap()
        .push((auth.clone(), body.clone()));
    let model = body["model"].as_str().unwrap_or_default().to_string();
    match model.as_str() {
        "bad-key" => {
            let key = auth.unwrap_or_default().replace("Bearer ", "");
            let msg = format!("Incorrect API key provided: {key}");
            return (
                StatusCode::UNAUTHORIZED,
                axum::Json(json!({"error": {"message": msg}})),
            )
                .into_response();
        }
        "boom" => return (StatusCode::INTERNAL_SERVER_ERROR, "overloaded").into_response(),
        _ => {}
    }
    let (tx, rx) = mpsc::channel(16);
    let answer = s.answers.lock().unwrap().get(&model).cloned();
    let state = s.clone();
    let offers_tools = body["tools"].as_array().is_some_and(|t| !t.is_empty());
    let gate = offers_tools
        .then(|| s.gate.lock().unwrap().take())
        .flatten();
    tokio::spawn(async move {
        let _ = tx
            .send(chunk(json!({"role": "assistant", "content": ""}), None))
            .await;
        if let Some(gate) = gate {
            gate.hold(tx.closed()).await;
        }
        if model == "slow" {
            let _ = tx
                .send(chunk(json!({"content": "thinking…\n"}), None))
                .await;
            state.slow_started.store(true, Ordering::SeqCst);
            tx.closed().await;
            state.slow_dropped.store(true, Ordering::SeqCst);
            return;
        }
        let answer = answer.unwrap_or_else(|| format!("no answer configured for model {model}"));
        let chars: Vec<char> = answer.chars().collect();
        for piece in chars.chunks(7) {
            let text: String = piece.iter().collect();
            if tx
                .send(chunk(json!({"content": text}), None))
                .await
                .is_err()
            {
                return;
            }
        }
        let _ = tx.send(chunk(json!({}), Some("stop"))).await;
        let usage = json!({"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": 1,
            "model": "m", "choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}});
        let _ = tx.send(format!("data: {usage}\n\n")).await;
        let _ = tx.send("data: [DONE]\n\n".to_string()).await;
    });
    sse_body(rx)
}

// ---------------------------------------------------------------- OpenCode

/// What the OpenCode stub saw and how it answers.
#[derive(Default)]
pub struct OpencodeState {
    /// Answers by agent name; the agent `slow` never answers until aborted.
    pub answers: Mutex<HashMap<String, String>>,
    /// Message bodies, in order, with their session id.
    pub messages: Mutex<Vec<(String, Value)>>,
    pub created: AtomicUsize,
    pub deleted: Mutex<Vec<String>>,
    pub aborted: Mutex<Vec<String>>,
    /// The `directory` query of the last session creation.
    pub directory: Mutex<Option<String>>,
    events: Mutex<Option<broadcast::Sender<String>>>,
    abort: Notify,
    pub slow_started: AtomicBool,
    /// Holds the next message's answer, once its session is busy, until the test opens it.
    pub gate: Mutex<Option<Arc<Gate>>>,
    /// `prompt_async` bodies, with their session id. Each is refused as a session
    /// OpenCode no longer has (404 `NotFoundError`), or taken (204) with `takes_said`.
    pub said: Mutex<Vec<(String, Value)>>,
    pub takes_said: AtomicBool,
    /// Holds the next session creation until the test opens it (a server starting).
    pub opening: Mutex<Option<Arc<Gate>>>,
}

impl OpencodeState {
    /// The text sent in message `i`.
    pub fn prompt(&self, i: usize) -> String {
        let msgs = self.messages.lock().unwrap();
        msgs[i].1["parts"][0]["text"].as_str().unwrap().to_string()
    }
    fn emit(&self, ty: &str, props: Value) {
        if let Some(tx) = self.events.lock().unwrap().as_ref() {
            let _ = tx.send(json!({"id": "evt_1", "type": ty, "properties": props}).to_string());
        }
    }
}

/// Starts the OpenCode stub: `/session`, `/session/{id}/message`, `/abort`, `DELETE`,
/// `/event` and `/global/health`, in the shapes of OpenCode 1.18.
pub fn opencode(answers: &[(&str, &str)]) -> (Server, Arc<OpencodeState>) {
    let state = Arc::new(OpencodeState::default());
    *state.events.lock().unwrap() = Some(broadcast::channel(256).0);
    for (a, t) in answers {
        state
            .answers
            .lock()
            .unwrap()
            .insert(a.to_string(), t.to_string());
    }
    let app = Router::new()
        .route(
            "/global/health",
            get(|| async { axum::Json(json!({"healthy": true, "version": "stub"})) }),
        )
        .route("/session", post(oc_create))
        .route("/session/{id}", delete(oc_delete))
        .route("/session/{id}/message", post(oc_message))
        .route("/session/{id}/abort", post(oc_abort))
        .route("/session/{id}/prompt_async", post(oc_prompt_async))
        .route("/event", get(oc_events))
        .with_state(state.clone());
    (serve(app), state)
}

async fn oc_create(
    State(s): State<Arc<OpencodeState>>,
    axum::extract::Query(q): axum::extract::Query<HashMap<String, String>>,
) -> axum::Json<Value> {
    let gate = s.opening.lock().unwrap().take();
    if let Some(gate) = gate {
        gate.hold(std::future::pending()).await;
    }
    let n = s.created.fetch_add(1, Ordering::SeqCst) + 1;
    *s.directory.lock().unwrap() = q.get("directory").cloned();
    axum::Json(
        json!({"id": format!("ses_{n}"), "title": "t", "version": "stub", "time": {"created": 1, "updated": 1}}),
    )
}

async fn oc_delete(
    State(s): State<Arc<OpencodeState>>,
    Path(id): Path<String>,
) -> axum::Json<bool> {
    s.deleted.lock().unwrap().push(id);
    axum::Json(true)
}

async fn oc_prompt_async(
    State(s): State<Arc<OpencodeState>>,
    Path(id): Path<String>,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    s.said.lock().unwrap().push((id.clone(), body));
    if s.takes_said.load(Ordering::SeqCst) {
        return StatusCode::NO_CONTENT.into_response();
    }
    let gone =
        json!({"name": "NotFoundError", "data": {"message": format!("Session not found: {id}")}});
    (StatusCode::NOT_FOUND, axum::Json(gone)).into_response()
}

async fn oc_abort(State(s): State<Arc<OpencodeState>>, Path(id): Path<String>) -> axum::Json<bool> {
    s.aborted.lock().unwrap().push(id);
    s.abort.notify_waiters();
    axum::Json(true)
}

async fn oc_events(State(s): State<Arc<OpencodeState>>) -> Response {
    let mut sub = s.events.lock().unwrap().as_ref().unwrap().subscribe();
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(async move {
        let hello = json!({"type": "server.connected", "properties": {}});
        if tx.send(format!("data: {hello}\n\n")).await.is_err() {
            return;
        }
        while let Ok(ev) = sub.recv().await {
            if tx.send(format!("data: {ev}\n\n")).await.is_err() {
                return;
            }
        }
    });
    sse_body(rx)
}

async fn oc_message(
    State(s): State<Arc<OpencodeState>>,
    Path(id): Path<String>,
    axum::Json(body): axum::Json<Value>,
) -> axum::Json<Value> {
    s.messages.lock().unwrap().push((id.clone(), body.clone()));
    let agent = body["agent"].as_str().unwrap_or("build").to_string();
    let n = s.messages.lock().unwrap().len();
    let (user, asst) = (format!("msg_u{n}"), format!("msg_a{n}"));
    s.emit(
        "message.updated",
        json!({"sessionID": id, "info": {"id": user, "sessionID": id, "role": "user"}}),
    );
    s.emit("message.part.updated", json!({"sessionID": id, "part": {"id": format!("prt_u{n}"), "sessionID": id, "messageID": user, "type": "text", "text": body["parts"][0]["text"]}}));
    s.emit(
        "session.status",
        json!({"sessionID": id, "status": {"type": "busy"}}),
    );
    let gate = s.gate.lock().unwrap().take();
    if let Some(gate) = gate {
        gate.hold(std::future::pending()).await;
    }
    let info = |error: Option<Value>| {
        let mut info = json!({"id": asst, "sessionID": id, "role": "assistant", "time": {"created": 1, "completed": 2},
            "modelID": "stub-model", "providerID": "stub", "mode": agent, "agent": agent, "path": {"cwd": "/", "root": "/"},
            "cost": 0.0125, "tokens": {"input": 120, "output": 30, "reasoning": 0, "cache": {"read": 5, "write": 0}}});
        if let Some(e) = error {
            info["error"] = e;
        }
        info
    };
    if agent == "slow" {
        let aborted = s.abort.notified();
        s.emit("message.part.updated", json!({"sessionID": id, "part": {"id": "prt_tool", "sessionID": id, "messageID": asst, "type": "tool", "callID": "call_1", "tool": "bash", "state": {"status": "running", "input": {"command": "sleep 1000"}, "time": {"start": 1}}}}));
        s.slow_started.store(true, Ordering::SeqCst);
        aborted.await;
        s.emit("session.error", json!({"sessionID": id, "error": {"name": "MessageAbortedError", "data": {"message": "Aborted"}}}));
        s.emit("session.idle", json!({"sessionID": id}));
        let err = json!({"name": "MessageAbortedError", "data": {"message": "Aborted"}});
        return axum::Json(json!({"info": info(Some(err)), "parts": []}));
    }
    let answer = s
        .answers
        .lock()
        .unwrap()
        .get(&agent)
        .cloned()
        .unwrap_or_else(|| format!("no answer configured for agent {agent}"));
    let part = format!("prt_t{n}");
    s.emit("message.part.updated", json!({"sessionID": id, "part": {"id": part, "sessionID": id, "messageID": asst, "type": "text", "text": ""}}));
    let chars: Vec<char> = answer.chars().collect();
    for piece in chars.chunks(9) {
        let delta: String = piece.iter().collect();
        s.emit("message.part.delta", json!({"sessionID": id, "messageID": asst, "partID": part, "field": "text", "delta": delta}));
    }
    s.emit("message.part.updated", json!({"sessionID": id, "part": {"id": "prt_tool2", "sessionID": id, "messageID": asst, "type": "tool", "callID": "call_2", "tool": "read", "state": {"status": "completed", "input": {"filePath": "src/lib.rs"}, "output": "", "title": "src/lib.rs", "metadata": {}, "time": {"start": 1, "end": 2}}}}));
    s.emit("message.part.updated", json!({"sessionID": id, "part": {"id": part, "sessionID": id, "messageID": asst, "type": "text", "text": answer, "time": {"start": 1, "end": 2}}}));
    s.emit(
        "message.updated",
        json!({"sessionID": id, "info": info(None)}),
    );
    s.emit(
        "session.status",
        json!({"sessionID": id, "status": {"type": "idle"}}),
    );
    axum::Json(json!({"info": info(None), "parts": [
        {"id": "prt_s", "sessionID": id, "messageID": asst, "type": "step-start"},
        {"id": part, "sessionID": id, "messageID": asst, "type": "text", "text": answer, "time": {"start": 1, "end": 2}},
        {"id": "prt_f", "sessionID": id, "messageID": asst, "type": "step-finish", "reason": "stop", "cost": 0.0125,
         "tokens": {"input": 120, "output": 30, "reasoning": 0, "cache": {"read": 5, "write": 0}}}
    ]}))
}
pub mod anthropic;
