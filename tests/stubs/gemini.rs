//! A loopback Gemini API (`POST /v1beta/models/{model}:streamGenerateContent?alt=sse`), the
//! wire the Gemini CLI speaks when `GOOGLE_GEMINI_BASE_URL` points at it, written from the
//! documented `GenerateContentResponse` shape: `candidates[].content.parts` (text, or a
//! `functionCall`), `finishReason` and `usageMetadata`.
//!
//! One scripted turn: the first request gets a call of the CLI's `write_file` tool; the
//! request carrying its `functionResponse` gets the final answer. Every request is recorded
//! with its path and `x-goog-api-key` header.

use super::{Server, serve, sse_body};
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// What the stub answers.
#[derive(Debug, Clone, Default)]
pub struct Script {
    /// `write_file`'s `file_path` and `content`, asked for first, if any.
    pub write: Option<(String, String)>,
    /// The final answer.
    pub answer: String,
    /// Every request gets 400 `API_KEY_INVALID`, as Google answers a wrong key.
    pub bad_key: bool,
}

/// What the stub saw.
#[derive(Default)]
pub struct GeminiState {
    pub script: Script,
    /// `(model:method, x-goog-api-key, body)` of every request.
    pub requests: Mutex<Vec<(String, Option<String>, Value)>>,
}

impl GeminiState {
    /// The function names request `i` declared.
    pub fn tools(&self, i: usize) -> Vec<String> {
        self.requests.lock().unwrap()[i].2["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|t| {
                t["functionDeclarations"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .filter_map(|f| f["name"].as_str().map(String::from))
            .collect()
    }
}

/// Tokens reported per response.
pub const PROMPT_TOKENS: u64 = 500;
pub const CACHED_TOKENS: u64 = 50;
pub const OUTPUT_TOKENS: u64 = 40;

/// Starts the stub; the CLI's `GOOGLE_GEMINI_BASE_URL` is its `url`.
pub fn gemini(script: Script) -> (Server, Arc<GeminiState>) {
    let state = Arc::new(GeminiState {
        script,
        ..GeminiState::default()
    });
    let app = Router::new()
        .route("/v1beta/models/{call}", post(respond))
        .with_state(state.clone());
    (serve(app), state)
}

fn chunk(parts: Value, finish: Option<&str>) -> String {
    let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    let mut v = json!({"candidates": [], "modelVersion": "gemini-2.5-pro"});
    // The last chunk of a response carries its finish reason and the usage.
    if let Some(f) = finish {
        candidate["finishReason"] = json!(f);
        v["usageMetadata"] = json!({"promptTokenCount": PROMPT_TOKENS,
            "candidatesTokenCount": OUTPUT_TOKENS, "cachedContentTokenCount": CACHED_TOKENS,
            "totalTokenCount": PROMPT_TOKENS + OUTPUT_TOKENS});
    }
    v["candidates"] = json!([candidate]);
    format!("data: {v}\r\n\r\n")
}

async fn respond(
    State(s): State<Arc<GeminiState>>,
    Path(call): Path<String>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let key = headers
        .get("x-goog-api-key")
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    s.requests
        .lock()
        .unwrap()
        .push((call.clone(), key, body.clone()));
    if s.script.bad_key {
        let err = json!({"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",
            "status": "INVALID_ARGUMENT", "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "API_KEY_INVALID", "domain": "googleapis.com"}]}});
        return (StatusCode::BAD_REQUEST, axum::Json(err)).into_response();
    }
    if !call.ends_with(":streamGenerateContent") {
        return (StatusCode::NOT_FOUND, format!("no {call} here")).into_response();
    }
    let answered = body["contents"]
        .as_array()
        .and_then(|c| c.last())
        .and_then(|c| c["parts"].as_array())
        .is_some_and(|parts| parts.iter().any(|p| p.get("functionResponse").is_some()));
    let mut events = Vec::new();
    match (&s.script.write, answered) {
        (Some((path, content)), false) => events.push(chunk(
            json!([{"functionCall": {"name": "write_file", "args": {"file_path": path, "content": content}}}]),
            Some("STOP"),
        )),
        _ => {
            let chars: Vec<char> = s.script.answer.chars().collect();
            let pieces: Vec<String> = chars.chunks(40).map(|p| p.iter().collect()).collect();
            for (i, piece) in pieces.iter().enumerate() {
                let last = i + 1 == pieces.len();
                events.push(chunk(json!([{"text": piece}]), last.then_some("STOP")));
            }
        }
    }
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(async move {
        for e in events {
            if tx.send(e).await.is_err() {
                return;
            }
        }
    });
    sse_body(rx)
}
