//! HTTP plumbing shared by the `openai` and `opencode` backends: clients with timeouts,
//! failures as plain sentences, and the reachability check behind `baton agents check`.

use super::AgentFinish;
use crate::agents::{Backend, Profile};
use reqwest::{Client, StatusCode};
use std::time::Duration;

/// Limit for connecting to a backend.
pub(super) const CONNECT: Duration = Duration::from_secs(10);
/// Limit for short calls (create/abort/delete session, error bodies).
pub(super) const SHORT: Duration = Duration::from_secs(30);
/// Longest silence tolerated on a streaming response.
pub(super) const IDLE: Duration = Duration::from_secs(300);

/// A client for `base`: connect and read timeouts, and no proxy for loopback addresses
/// (a system proxy would otherwise swallow requests to a local server).
pub(super) fn client(base: &str) -> Client {
    build(base, Some(IDLE))
}

/// Like [`client`] but without the read timeout, for a call that is silent until an agent's
/// whole turn ends (OpenCode's `/message`); the step's timeout bounds it instead.
pub(super) fn patient_client(base: &str) -> Client {
    build(base, None)
}

fn build(base: &str, idle: Option<Duration>) -> Client {
    let mut b = Client::builder()
        .connect_timeout(CONNECT)
        .user_agent(concat!("baton/", env!("CARGO_PKG_VERSION")));
    if let Some(idle) = idle {
        b = b.read_timeout(idle);
    }
    if is_loopback(base) {
        b = b.no_proxy();
    }
    b.build().unwrap_or_else(|_| Client::new())
}

fn is_loopback(url: &str) -> bool {
    reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .is_some_and(|h| h == "localhost" || h == "::1" || h == "[::1]" || h.starts_with("127."))
}

/// The innermost cause of `e` ("Connection refused (os error 111)"): reqwest's own message
/// only repeats the URL the sentence already names.
pub(super) fn chain(e: &dyn std::error::Error) -> String {
    let mut last = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        last = s.to_string();
        src = s.source();
    }
    last
}

/// Who is talking to what, for the start of an error sentence.
pub(super) fn who(p: &Profile, url: &str) -> String {
    format!("agent `{}` ({} backend, {url})", p.id, p.backend.as_str())
}

/// A request that got no HTTP answer.
pub(super) fn send_error(p: &Profile, url: &str, e: &reqwest::Error) -> AgentFinish {
    let who = who(p, url);
    let why = chain(e);
    if e.is_connect() {
        AgentFinish::error(
            format!(
                "{who}: cannot connect ({why}) — is the server running, and is `url` right? (set it {})",
                p.fix_in()
            ),
            true,
        )
    } else if e.is_timeout() {
        AgentFinish::error(
            format!("{who}: no answer in time ({why}) — is the server overloaded or stuck?"),
            true,
        )
    } else {
        AgentFinish::error(format!("{who}: the request failed ({why})"), true)
    }
}

/// An HTTP error status, with a hint of what to check. 5xx and 429 are retryable.
pub(super) fn status_error(p: &Profile, url: &str, status: StatusCode, body: &str) -> AgentFinish {
    let who = who(p, url);
    let detail = body_message(body);
    let detail = if detail.is_empty() {
        String::new()
    } else {
        format!(": {detail}")
    };
    let key_hint = match &p.api_key_env {
        Some(var) => format!("check that ${var} holds a valid key"),
        None => "the profile sends no key; set `api_key_env` to the variable holding one".into(),
    };
    let (hint, retryable) = match status.as_u16() {
        401 | 403 => (
            format!("the server refused the credentials — {key_hint}"),
            false,
        ),
        404 => (
            match p.backend {
                Backend::Openai => {
                    "not found — check `url` (it usually ends in /v1) and `model`".into()
                }
                _ => "not found — check `url`, and that the server is the version baton expects"
                    .into(),
            },
            false,
        ),
        429 => ("rate limited — retrying later may help".into(), true),
        s if s >= 500 => (
            "the server failed — a transient error, retried if the step allows".into(),
            true,
        ),
        _ => (
            "the server rejected the request — check the profile's `model` and options".into(),
            false,
        ),
    };
    AgentFinish::error(format!("{who}: HTTP {status}{detail} ({hint})"), retryable)
}

/// The readable part of an error body: `error.message`, `message`, `data.message`, or the
/// text itself, on one line and short.
pub(super) fn body_message(body: &str) -> String {
    let text = match serde_json::from_str::<serde_json::Value>(body) {
        Ok(v) => [
            v.pointer("/error/message"),
            v.pointer("/message"),
            v.pointer("/data/message"),
            v.get("error"),
        ]
        .into_iter()
        .flatten()
        .find_map(|m| m.as_str().map(String::from))
        .unwrap_or_else(|| body.to_string()),
        Err(_) => body.to_string(),
    };
    super::log::one_line(&text, 300)
}

/// Whether a profile's backend answers, for `baton agents check`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    /// True when the backend can be used as configured.
    pub ok: bool,
    /// One line: what answered, or what is wrong and what to check.
    pub detail: String,
}

/// Asks a profile's backend whether it is there: `GET /global/health` for OpenCode,
/// `GET {url}/models` for OpenAI-compatible servers (3 s limit); for CLIs and an OpenCode
/// server baton starts itself, the program, its version and its credentials.
pub async fn check(p: &Profile) -> Health {
    let short = Duration::from_secs(3);
    match p.backend {
        Backend::Command if p.executor.as_ref().is_some_and(|e| e.kind() != "local") => {
            let spec = p.executor.as_ref().expect("checked above");
            match crate::exec::executor::check(spec).await {
                Ok(detail) => Health { ok: true, detail },
                Err(e) => Health {
                    ok: false,
                    detail: e.0,
                },
            }
        }
        Backend::Replay => {
            let missing: Vec<String> = p
                .recordings
                .iter()
                .filter_map(|r| super::replay::recording_text(p, r).err())
                .collect();
            Health {
                ok: missing.is_empty(),
                detail: if missing.is_empty() {
                    format!("{} recording(s) readable", p.recordings.len())
                } else {
                    format!("{} — fix `recording` in {}", missing.join("; "), p.file)
                },
            }
        }
        Backend::Command => super::cli_check::check_cli(p, &p.argv[0]).await,
        Backend::Opencode if p.serve => {
            let h = super::cli_check::check_cli(p, super::opencode_serve::PROGRAM).await;
            Health {
                detail: if h.ok {
                    format!(
                        "{} — baton starts `opencode serve` when a step needs it",
                        h.detail
                    )
                } else {
                    h.detail
                },
                ..h
            }
        }
        Backend::Opencode => {
            let url = format!("{}/global/health", p.base_url());
            let res = client(&url).get(&url).timeout(short).send().await;
            match res {
                Ok(r) if r.status().is_success() => {
                    let v: serde_json::Value = r.json().await.unwrap_or_default();
                    Health {
                        ok: true,
                        detail: format!(
                            "OpenCode {} answers at {}",
                            v["version"].as_str().unwrap_or("(unknown version)"),
                            p.base_url()
                        ),
                    }
                }
                Ok(r) => Health {
                    ok: false,
                    detail: format!(
                        "{url} answered HTTP {} — is that an OpenCode server?",
                        r.status()
                    ),
                },
                Err(e) => Health {
                    ok: false,
                    detail: format!("{url}: {} — start it with `opencode serve`", chain(&e)),
                },
            }
        }
        Backend::Openai => {
            let url = format!("{}/models", p.base_url());
            let mut req = client(&url).get(&url).timeout(short);
            if let Some(var) = &p.api_key_env {
                match std::env::var(var) {
                    Ok(k) if !k.is_empty() => req = req.bearer_auth(k),
                    _ => {
                        return Health {
                            ok: false,
                            detail: format!("${var} is not set — export it where the engine runs"),
                        };
                    }
                }
            }
            match req.send().await {
                Ok(r) if r.status().is_success() => Health {
                    ok: true,
                    detail: format!("{} answers", p.base_url()),
                },
                Ok(r) if matches!(r.status().as_u16(), 401 | 403) => Health {
                    ok: false,
                    detail: format!(
                        "{} answers but refused the key (HTTP {}) — check {}",
                        p.base_url(),
                        r.status(),
                        p.api_key_env
                            .as_deref()
                            .map_or("`api_key_env`".into(), |v| format!("${v}"))
                    ),
                },
                // Some servers have no /models; an HTTP answer still means they are up.
                Ok(r) => Health {
                    ok: true,
                    detail: format!("{} answers (HTTP {} on /models)", p.base_url(), r.status()),
                },
                Err(e) => Health {
                    ok: false,
                    detail: format!(
                        "{url}: {} — is the server running? (Ollama: `ollama serve`; or fix `url` {})",
                        chain(&e),
                        p.fix_in()
                    ),
                },
            }
        }
    }
}
