//! Webhooks in. `POST /hooks/github`: a push signed with the shared secret
//! (`X-Hub-Signature-256`) fires the matching pipelines' `push` triggers, once per delivery
//! and once per commit (the key the engine's own branch watcher uses); pull request, review
//! and check run events go to the task's pull request (`forge_in.rs`). `POST
//! /hooks/trigger/{pipeline}` (bearer token): creates and starts a task; the body reaches its
//! steps as the file named by `BATON_TRIGGER_PAYLOAD_FILE`. Each delivery is recorded as an
//! event, without its signature or secret.

use super::extract::ApiPath;
use super::http::{AppState, error};
use super::ops::NewTask;
use super::routes::{op_error, reply};
use crate::engine::push_in::Delivery;
use crate::engine::{Action, Answer, Order};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// The file, in a task's context folder, holding the body that created it.
pub const PAYLOAD_FILE: &str = "trigger-payload.json";

/// True when `signature` (`sha256=<hex>`) is the HMAC-SHA256 of `body` under `secret`;
/// compared in constant time.
pub fn signature_ok(secret: &[u8], body: &[u8], signature: &str) -> bool {
    use hmac::{Hmac, Mac};
    let Some(hex) = signature.trim().strip_prefix("sha256=") else {
        return false;
    };
    let Some(given) = unhex(hex) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<sha2::Sha256>::new_from_slice(secret) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&given).is_ok()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// A GitHub delivery.
#[utoipa::path(post, path = "/hooks/github", request_body(content = Object,
    description = "GitHub's push payload; signed in X-Hub-Signature-256"),
    responses((status = 200, body = Object),
        (status = 400, body = super::schema::ErrorBody, description = "X-GitHub-Delivery is missing"),
        (status = 401, body = super::schema::ErrorBody, description = "the signature is missing or does not match"),
        (status = 404, body = super::schema::ErrorBody, description = "no secret is set, so GitHub webhooks are off")))]
pub async fn github(State(s): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let env = s.github_secret_env.as_str();
    let Some(secret) = std::env::var(env).ok().filter(|v| !v.is_empty()) else {
        // Off rather than failing: the endpoint is not there until a secret is set.
        return error(
            StatusCode::NOT_FOUND,
            format!(
                "GitHub webhooks are off: the secret is read from ${env}, which is not set — export it where baton serve runs (the name is `github_secret_env` under [serve] in config.toml)"
            ),
        );
    };
    let Some(signature) = header(&headers, "x-hub-signature-256") else {
        tracing::warn!("a GitHub webhook with no signature was refused");
        return error(
            StatusCode::UNAUTHORIZED,
            "the delivery has no X-Hub-Signature-256 header — set the webhook's secret on GitHub to the value of the secret's environment variable, so GitHub signs what it sends",
        );
    };
    if !signature_ok(secret.as_bytes(), &body, signature) {
        tracing::warn!("a GitHub webhook with a missing or wrong signature was refused");
        return error(
            StatusCode::UNAUTHORIZED,
            "the X-Hub-Signature-256 signature does not match — the webhook's secret must equal the value of the secret's environment variable",
        );
    }
    let event = header(&headers, "x-github-event").unwrap_or("").to_string();
    let Some(delivery) = header(&headers, "x-github-delivery").map(String::from) else {
        return error(StatusCode::BAD_REQUEST, "X-GitHub-Delivery is missing");
    };
    if super::forge_in::is_pr_event(&event) {
        return super::forge_in::github(&s, &event, &delivery, &body).await;
    }
    let payload: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let branch = payload["ref"]
        .as_str()
        .and_then(|r| r.strip_prefix("refs/heads/"))
        .map(String::from);
    let sha = payload["after"].as_str().unwrap_or("").to_string();
    let gone = payload["deleted"].as_bool() == Some(true) || sha.chars().all(|c| c == '0');
    let push = match (event.as_str(), branch) {
        ("push", Some(b)) if !gone => Some(b),
        _ => None,
    };
    // The engine records it and fires the push triggers it matches, in one transaction.
    let delivery = Delivery {
        event,
        id: delivery,
        branch: push,
        sha,
    };
    let (event, id) = (delivery.event.clone(), delivery.id.clone());
    let order = Order::Push { push: delivery };
    match s.ops.client().await.order(order).await {
        Ok(Answer::Noted(noted)) => {
            let body = json!({"event": event, "delivery": id,
                "duplicate": noted.duplicate, "tasks": noted.tasks});
            axum::Json(body).into_response()
        }
        Ok(other) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "the engine answered a push with `{}` — is it another baton version?",
                other.summary()
            ),
        ),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

/// Creates and starts a task on the pipeline; the JSON body's `title` and `prompt` name it.
#[utoipa::path(post, path = "/hooks/trigger/{pipeline}",
    params(("pipeline" = String, Path, description = "pipeline id")),
    request_body = super::schema::TriggerBody,
    responses((status = 201, body = super::schema::ShowTask),
        (status = 404, body = super::schema::ErrorBody, description = "no such pipeline"),
        (status = 409, body = super::schema::ErrorBody, description = "the pipeline does not let the task start"),
        (status = 422, body = super::schema::ErrorBody, description = "`title` or `prompt` is not a string, or the body is not a JSON object")),
    security(("bearer" = [])))]
pub async fn trigger(
    State(s): State<AppState>,
    ApiPath(pipeline): ApiPath<String>,
    body: Bytes,
) -> Response {
    let payload: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        match super::routes::parse_json(&body, r#"{"title": "…", "prompt": "…"}"#) {
            Ok(v) => v,
            Err(r) => return *r,
        }
    };
    // The body is the payload, whatever else it holds; but `title` and `prompt`, when
    // given, must be text, as the document says.
    if !payload.is_object() {
        return error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "the body must be a JSON object like {\"title\": \"…\", \"prompt\": \"…\"}",
        );
    }
    for k in ["title", "prompt"] {
        if payload
            .get(k)
            .is_some_and(|v| !v.is_string() && !v.is_null())
        {
            return error(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("`{k}` must be a string — the task's {k} as text"),
            );
        }
    }
    let text = |k: &str| payload.get(k).and_then(Value::as_str).map(String::from);
    let new = NewTask {
        // A pipeline id is plain ASCII; one that is not names no pipeline, and is told so,
        // rather than making a title the API refuses.
        title: text("title").unwrap_or_else(|| {
            let shown: String = pipeline.chars().filter(|c| !c.is_control()).collect();
            format!("{shown} (webhook)")
        }),
        prompt: text("prompt"),
        pipeline: Some(pipeline.clone()),
        start: false,
        idempotency_key: None,
        ..Default::default()
    };
    // The delivery is recorded on the task in the transaction that creates it.
    let created = match s.ops.create_triggered(new, body.len()).await {
        Ok(c) => c.task,
        Err(e) => return op_error(e),
    };
    let Some(id) = created["id"].as_i64() else {
        return error(StatusCode::INTERNAL_SERVER_ERROR, "the new task has no id");
    };
    // The payload is on disk before the task starts, so its first step finds it.
    let dir = s.ops.workspace().context_dir(id);
    let bytes = body.to_vec();
    let written = tokio::task::spawn_blocking(move || {
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(PAYLOAD_FILE), bytes)
    })
    .await;
    if !matches!(written, Ok(Ok(()))) {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "task {id} was created but its payload could not be written to .baton/context/{id}/ — check the folder is writable, then `baton start {id}`"
            ),
        );
    }
    match s.ops.act(id, Action::Start).await {
        Ok(v) => (StatusCode::CREATED, axum::Json(v)).into_response(),
        Err(e) => reply(Err(e)),
    }
}
