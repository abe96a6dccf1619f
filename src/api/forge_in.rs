//! Forge events in: `POST /hooks/gitlab` (`X-Gitlab-Token`), `POST /hooks/gitea` (Gitea's
//! and Forgejo's HMAC-SHA256 signature), and the pull request events of `POST
//! /hooks/github`. Each delivery is verified, acted on once by its delivery id and once by
//! what it means (a merge, a review, a failed commit — the key a poll uses too), recorded
//! as an event, and fires the task's `pr_merged`, `pr_closed`, `ci_failed` or
//! `outcome:changes_requested` transition.

use super::forge_in_say;
use super::http::{AppState, error};
use super::webhooks::signature_ok;
use crate::engine::{Action, forge_events};
use crate::forge::issues::{self, IssueSeen};
use crate::forge::webhook::{self, ForgeEvent, What};
use crate::forge::{ForgeSettings, Kind, Target};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// `[forge]` and its webhook secret, or the answer saying the endpoint is off.
async fn secret(s: &AppState, path: &str) -> Result<(ForgeSettings, String), Response> {
    let ws = s.ops.workspace().clone();
    let cfg = tokio::task::spawn_blocking(move || ws.config()).await;
    let settings = match cfg {
        Ok(Ok(c)) => c.forge,
        Ok(Err(e)) => return Err(error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())),
        Err(e) => return Err(error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())),
    };
    let Some(settings) = settings else {
        return Err(error(
            StatusCode::NOT_FOUND,
            format!("{path} is off: config.toml has no [forge] table — add one (docs/forge.md)"),
        ));
    };
    let env = settings.webhook_secret_env().to_string();
    match std::env::var(&env).ok().filter(|v| !v.is_empty()) {
        Some(secret) => Ok((settings, secret)),
        None => Err(error(
            StatusCode::NOT_FOUND,
            format!(
                "{path} is off: the secret is read from ${env}, which is not set — export it where baton serve runs"
            ),
        )),
    }
}

/// A GitLab delivery.
#[utoipa::path(post, path = "/hooks/gitlab", request_body(content = Object,
    description = "GitLab's Merge Request Hook or Pipeline Hook payload; the secret in X-Gitlab-Token"),
    responses((status = 200, body = Object),
        (status = 400, body = super::schema::ErrorBody, description = "no delivery id (Idempotency-Key or X-Gitlab-Event-UUID)"),
        (status = 401, body = super::schema::ErrorBody, description = "the token is missing or does not match"),
        (status = 404, body = super::schema::ErrorBody, description = "no [forge] or no secret, so these webhooks are off")))]
pub async fn gitlab(State(s): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let (settings, secret) = match secret(&s, "/hooks/gitlab").await {
        Ok(v) => v,
        Err(r) => return r,
    };
    use sha2::{Digest, Sha256};
    use subtle::ConstantTimeEq;
    // Digests of equal length are compared, so the time taken says nothing of the
    // secret's length either.
    let Some(given) = header(&headers, "x-gitlab-token") else {
        tracing::warn!("a GitLab webhook with no token was refused");
        return error(
            StatusCode::UNAUTHORIZED,
            "the delivery has no X-Gitlab-Token header — set the webhook's secret token on GitLab to the value of the secret's environment variable",
        );
    };
    let (given, want) = (
        Sha256::digest(given.as_bytes()),
        Sha256::digest(secret.as_bytes()),
    );
    if !bool::from(given.as_slice().ct_eq(want.as_slice())) {
        tracing::warn!("a GitLab webhook with a missing or wrong token was refused");
        return error(
            StatusCode::UNAUTHORIZED,
            "the X-Gitlab-Token does not match — the webhook's secret token must equal the value of the secret's environment variable",
        );
    }
    let event = header(&headers, "x-gitlab-event").unwrap_or("").to_string();
    let Some(delivery) = header(&headers, "idempotency-key")
        .or_else(|| header(&headers, "x-gitlab-event-uuid"))
        .map(String::from)
    else {
        return error(
            StatusCode::BAD_REQUEST,
            "the delivery has no id (Idempotency-Key or X-Gitlab-Event-UUID)",
        );
    };
    handle(&s, settings, Kind::Gitlab, &event, &delivery, &body).await
}

/// A Gitea or Forgejo delivery.
#[utoipa::path(post, path = "/hooks/gitea", request_body(content = Object,
    description = "Gitea's or Forgejo's pull_request payload; signed in X-Gitea-Signature or X-Forgejo-Signature"),
    responses((status = 200, body = Object),
        (status = 400, body = super::schema::ErrorBody, description = "X-Gitea-Delivery / X-Forgejo-Delivery is missing"),
        (status = 401, body = super::schema::ErrorBody, description = "the signature is missing or does not match"),
        (status = 404, body = super::schema::ErrorBody, description = "no [forge] or no secret, so these webhooks are off")))]
pub async fn gitea(State(s): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let (settings, secret) = match secret(&s, "/hooks/gitea").await {
        Ok(v) => v,
        Err(r) => return r,
    };
    // Forgejo sends its own headers and Gitea's; when its own are there they are the ones
    // checked (a bad Forgejo signature is not rescued by a good Gitea one).
    let forgejo = header(&headers, "x-forgejo-signature").is_some();
    let (sig, ev, id, kind) = if forgejo {
        (
            "x-forgejo-signature",
            "x-forgejo-event",
            "x-forgejo-delivery",
            Kind::Forgejo,
        )
    } else {
        (
            "x-gitea-signature",
            "x-gitea-event",
            "x-gitea-delivery",
            Kind::Gitea,
        )
    };
    let Some(given) = header(&headers, sig) else {
        tracing::warn!("a Gitea/Forgejo webhook with no signature was refused");
        return error(
            StatusCode::UNAUTHORIZED,
            format!(
                "the delivery has no {} header — set the webhook's secret to the value of the secret's environment variable, so the forge signs what it sends",
                if forgejo {
                    "X-Forgejo-Signature"
                } else {
                    "X-Gitea-Signature"
                }
            ),
        );
    };
    let signature = format!("sha256={given}");
    if !signature_ok(secret.as_bytes(), &body, &signature) {
        tracing::warn!("a Gitea/Forgejo webhook with a missing or wrong signature was refused");
        return error(
            StatusCode::UNAUTHORIZED,
            "the signature does not match — the webhook's secret must equal the value of the secret's environment variable",
        );
    }
    let event = header(&headers, ev).unwrap_or("").to_string();
    let Some(delivery) = header(&headers, id).map(String::from) else {
        return error(StatusCode::BAD_REQUEST, format!("{id} is missing"));
    };
    handle(&s, settings, kind, &event, &delivery, &body).await
}

/// GitHub's pull request, review and check run events, after `/hooks/github` verified them.
pub(super) async fn github(s: &AppState, event: &str, delivery: &str, body: &[u8]) -> Response {
    let ws = s.ops.workspace().clone();
    let settings = tokio::task::spawn_blocking(move || ws.config().ok().and_then(|c| c.forge))
        .await
        .ok()
        .flatten()
        .unwrap_or_default();
    handle(s, settings, Kind::Github, event, delivery, body).await
}

/// Whether a GitHub event is one [`github`] handles.
pub(super) fn is_pr_event(event: &str) -> bool {
    matches!(
        event,
        "pull_request" | "pull_request_review" | "check_run" | "issues" | "issue_comment"
    )
}

/// The note handed to the next step: the failing checks, or the review with its comments
/// (file:line) read from the forge's API.
async fn note_for(
    settings: &ForgeSettings,
    root: std::path::PathBuf,
    kind: Kind,
    number: u64,
    ev: &ForgeEvent,
) -> Option<String> {
    match &ev.what {
        What::Merged | What::Closed => None,
        What::ChecksFailed { .. } => forge_events::failure_note(ev),
        What::ChangesRequested { review, body, .. } => {
            let (settings, review) = (settings.clone(), *review);
            let comments = tokio::task::spawn_blocking(move || {
                let mut target = Target::of_workspace(&settings, &root)?;
                target.kind = kind;
                let forge = target.connect().map_err(|e| e.to_string())?;
                forge
                    .review_comments(number, review)
                    .map_err(|e| e.to_string())
            })
            .await
            .unwrap_or_else(|e| Err(e.to_string()));
            let mut note = format!("Changes requested on the {}:", kind.pr_noun());
            if !body.trim().is_empty() {
                note.push_str(&format!("\n{}", body.trim()));
            }
            match comments {
                Ok(list) => {
                    for c in list {
                        note.push_str(&format!("\n- {}", c.line_text()));
                    }
                }
                Err(e) => {
                    note.push_str(&format!("\n(the review's comments could not be read: {e})"))
                }
            }
            Some(note)
        }
    }
}

async fn handle(
    s: &AppState,
    settings: ForgeSettings,
    kind: Kind,
    event: &str,
    delivery: &str,
    body: &[u8],
) -> Response {
    let payload: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let parsed = webhook::parse(kind, event, &payload);
    let (event, delivery) = (event.to_string(), delivery.to_string());
    let id_key = format!("{}:{delivery}", kind_slug(kind));
    let root = s.ops.workspace().root().to_path_buf();
    let ours = {
        let (settings, root) = (settings.clone(), root.clone());
        tokio::task::spawn_blocking(move || configured_repo(&settings, &root, kind))
            .await
            .ok()
            .flatten()
    };
    if let Some(issue) = issues::parse_issue_event(kind, &event, &payload) {
        return issue_in(s, issue, ours.as_deref(), &event, &delivery).await;
    }
    if let Some(c) = issues::parse_baton_comment(kind, &event, &payload) {
        let origin = forge_in_say::Origin {
            settings: &settings,
            kind,
            ours: ours.as_deref(),
            id_key,
            event: &event,
            delivery: &delivery,
        };
        return forge_in_say::baton_comment(s, origin, c).await;
    }
    // The task the event is about: by the pull request's number, else (a payload without
    // one) its branch in this repository. The engine notes a delivery that reaches no task
    // on its own, and one that does in the transaction that applies it.
    let found = {
        let client = s.ops.client().await;
        match parsed.clone().filter(ForgeEvent::keyable) {
            None => Ok(None),
            Some(ev) => match (ev.number, ev.branch) {
                _ if !same_repo(
                    ev.head_repo.as_deref(),
                    ours.as_deref(),
                    ev.number.is_some(),
                ) =>
                {
                    Ok(None)
                }
                (Some(n), _) => client.task_of_pr(n).await.map(|t| t.map(|id| (id, n))),
                (None, Some(b)) => client.task_of_branch(b).await.map(|t| t.map(|id| (id, 0))),
                (None, None) => Ok(None),
            },
        }
    };
    let (task, number) = match found {
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.message),
        Ok(Some(t)) => t,
        Ok(None) => return stray(s, id_key, &event, &delivery, json!({"task": null})).await,
    };
    let Some(ev) = parsed else {
        return axum::Json(json!({"event": event, "delivery": delivery})).into_response();
    };
    let note = note_for(&settings, root.clone(), kind, number, &ev).await;
    let applied = apply(
        s,
        task,
        forge_events::describe(number, &ev, &format!("{kind} {event} delivery {delivery}")),
        id_key,
        note,
    )
    .await;
    match applied {
        Ok((duplicate, moved)) => axum::Json(json!({"event": event, "delivery": delivery,
            "duplicate": duplicate, "task": task, "trigger": ev.trigger(), "moved": moved}))
        .into_response(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

/// A delivery about no task of this board: the engine notes it (so a redelivery answers
/// `duplicate`); `more` is added to a first delivery's answer.
pub(super) async fn stray(
    s: &AppState,
    key: String,
    event: &str,
    delivery: &str,
    more: Value,
) -> Response {
    let noted = s
        .ops
        .client()
        .await
        .order(crate::engine::Order::Stray { stray: key })
        .await;
    match noted {
        Ok(crate::engine::Answer::Noted(n)) if n.duplicate => {
            axum::Json(json!({"event": event, "delivery": delivery, "duplicate": true}))
                .into_response()
        }
        Ok(crate::engine::Answer::Noted(_)) => {
            let mut body = json!({"event": event, "delivery": delivery, "duplicate": false});
            if let (Some(b), Some(m)) = (body.as_object_mut(), more.as_object()) {
                b.extend(m.clone());
            }
            axum::Json(body).into_response()
        }
        Ok(other) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "the engine answered a delivery with `{}` — is it another baton version?",
                other.summary()
            ),
        ),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

/// An issue event: the engine makes a task of it when an `issue` trigger watches it (once
/// per issue, so a redelivery makes nothing new). An issue of another repository than the
/// configured one is left alone.
async fn issue_in(
    s: &AppState,
    issue: IssueSeen,
    ours: Option<&str>,
    event: &str,
    delivery: &str,
) -> Response {
    if ours.is_some_and(|o| !o.eq_ignore_ascii_case(&issue.repo)) {
        return axum::Json(json!({"event": event, "delivery": delivery, "task": null,
            "issue": issue.number, "summary": "the issue is not of the configured repository"}))
        .into_response();
    }
    let number = issue.number;
    match s.ops.issue(issue).await {
        Ok(summary) => axum::Json(json!({"event": event, "delivery": delivery,
            "issue": number, "summary": summary}))
        .into_response(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

/// The configured repository (`owner/name`), or `None` when the settings do not name one.
fn configured_repo(settings: &ForgeSettings, root: &std::path::Path, kind: Kind) -> Option<String> {
    let mut settings = settings.clone();
    // GitHub deliveries come without `[forge]`; the kind is known from the endpoint.
    settings
        .kind
        .get_or_insert_with(|| kind_slug(kind).to_string());
    Target::of_workspace(&settings, root).ok().map(|t| t.repo)
}

/// Whether an event's head repository lets it reach a task: a pull request from another
/// repository (a fork) never does. With a number, an unnamed head repository is taken as
/// this one (the number is this repository's); by branch alone, both must be known and
/// equal, or anyone's fork with a branch of the same name could act on the task.
fn same_repo(head: Option<&str>, ours: Option<&str>, numbered: bool) -> bool {
    match (head, ours) {
        (Some(h), Some(o)) => h.eq_ignore_ascii_case(o),
        (None, _) => numbered,
        (Some(_), None) => false,
    }
}

fn kind_slug(kind: Kind) -> &'static str {
    match kind {
        Kind::Github => "github",
        Kind::Gitlab => "gitlab",
        Kind::Gitea => "gitea",
        Kind::Forgejo => "forgejo",
    }
}

/// Records the event on the task once (by its delivery id and its meaning) and fires its
/// trigger, in one transaction. Returns (seen before, the task moved).
async fn apply(
    s: &AppState,
    task: i64,
    record: forge_events::ForgeRecord,
    delivery: String,
    note: Option<String>,
) -> Result<(bool, bool), String> {
    let action = Action::Forge {
        trigger: record.trigger.clone(),
        note,
        seen: vec![delivery],
        record: Some(record),
    };
    let (summary, outcome) = s
        .ops
        .forge(task, action, "forge")
        .await
        .map_err(|e| e.message)?;
    let moved = outcome == forge_events::ForgeOutcome::Moved;
    if !moved {
        tracing::info!("forge event for task {task}: {summary}");
    }
    Ok((!outcome.fresh(), moved))
}
