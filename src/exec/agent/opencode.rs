//! The `opencode` backend: the OpenCode server HTTP API (checked against 1.18.33). Create a
//! session, subscribe to `/event`, send the message (the call returns when the agent's turn
//! ends), show progress from the events, record tokens and cost, abort the session when
//! stopped, delete it afterwards.

use super::http::{SHORT, client, patient_client, send_error, status_error, who};
use super::log::{Log, one_line};
use super::opencode_progress::OpencodeProgress;
use super::opencode_say::{Listening, prompt_body, went_on};
use super::{AgentFinish, AgentJob, AgentRun, Hooks};
use eventsource_stream::Eventsource;
use futures_util::{Stream as FutStream, StreamExt};
use serde_json::{Value, json};
use std::pin::Pin;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long an abort may take before baton gives up on it.
const ABORT: Duration = Duration::from_secs(3);
/// How long to read trailing events after the answer arrived.
const TAIL: Duration = Duration::from_millis(500);

/// The session events of one server, as they arrive.
pub(super) type Events =
    Pin<Box<dyn FutStream<Item = Result<eventsource_stream::Event, String>> + Send>>;

/// One OpenCode server, seen from one step.
pub(super) struct Server {
    pub(super) base: String,
    dir: String,
    pub(super) http: reqwest::Client,
    /// For `/message`, silent until the turn ends.
    patient: reqwest::Client,
    /// The password of a server baton started (HTTP Basic, user `opencode`).
    password: Option<String>,
}

impl Server {
    /// `req` with the server's credentials, when it has any.
    pub(super) fn auth(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.password {
            Some(pw) => req.basic_auth("opencode", Some(pw)),
            None => req,
        }
    }

    /// `path` on the server, scoped to the step's working directory.
    pub(super) fn url(&self, path: &str) -> String {
        match reqwest::Url::parse(&format!("{}{path}", self.base)) {
            Ok(mut u) => {
                u.query_pairs_mut().append_pair("directory", &self.dir);
                u.to_string()
            }
            Err(_) => format!("{}{path}", self.base),
        }
    }

    async fn events(&self) -> Result<Events, String> {
        let url = self.url("/event");
        let resp = tokio::time::timeout(
            SHORT,
            self.auth(self.http.get(&url))
                .header("accept", "text/event-stream")
                .send(),
        )
        .await
        .map_err(|_| "no answer in time".to_string())?
        .map_err(|e| super::http::chain(&e))?;
        if !resp.status().is_success() {
            return Err(format!("HTTP {}", resp.status()));
        }
        let stream = resp
            .bytes_stream()
            .eventsource()
            .map(|r| r.map_err(|e| e.to_string()));
        Ok(Box::pin(stream))
    }

    async fn abort(&self, id: &str, log: &Log) {
        let url = self.url(&format!("/session/{id}/abort"));
        match self.auth(self.http.post(&url)).timeout(ABORT).send().await {
            Ok(r) if r.status().is_success() => {
                log.system(format!("aborted OpenCode session {id}")).await
            }
            Ok(r) => {
                log.err(format!(
                    "aborting OpenCode session {id}: HTTP {}",
                    r.status()
                ))
                .await
            }
            Err(e) => {
                log.err(format!(
                    "aborting OpenCode session {id}: {}",
                    super::http::chain(&e)
                ))
                .await
            }
        }
    }

    async fn delete(&self, id: &str, log: &Log) {
        let url = self.url(&format!("/session/{id}"));
        match self
            .auth(self.http.delete(&url))
            .timeout(SHORT)
            .send()
            .await
        {
            Ok(r) if r.status().is_success() => {}
            Ok(r) => {
                log.err(format!(
                    "deleting OpenCode session {id}: HTTP {}",
                    r.status()
                ))
                .await
            }
            Err(e) => {
                log.err(format!(
                    "deleting OpenCode session {id}: {}",
                    super::http::chain(&e)
                ))
                .await
            }
        }
    }
}

pub(super) async fn run(
    job: &AgentJob<'_>,
    log: &Log,
    stop: &CancellationToken,
    hooks: &Hooks<'_>,
) -> AgentFinish {
    let p = job.profile;
    let (base, password) = if p.serve {
        let Some(served) = job.opencode else {
            return AgentFinish::error(
                format!(
                    "agent `{}`: `\"serve\": true` needs an engine to run the OpenCode server, and none is here",
                    p.id
                ),
                false,
            );
        };
        let got = tokio::select! {
            got = served.get() => got,
            _ = stop.cancelled() => return AgentFinish::Cancelled,
        };
        match got {
            Ok((s, said)) => {
                if let Some(line) = said {
                    log.system(line).await;
                }
                (s.url, Some(s.password))
            }
            Err(e) => return AgentFinish::error(format!("agent `{}`: {e}", p.id), true),
        }
    } else {
        (p.base_url(), None)
    };
    let server = Server {
        password,
        http: client(&base),
        patient: patient_client(&base),
        dir: job.env.workdir.display().to_string(),
        base,
    };
    let id = match &job.resume {
        Some(id) => match find_session(&server, p, id, stop).await {
            Ok(()) => id.clone(),
            Err(finish) => return finish,
        },
        None => match create_session(&server, job, stop).await {
            Ok(id) => id,
            Err(finish) => return finish,
        },
    };
    (hooks.session)(&id);
    log.system(format!("OpenCode session {id} at {}", server.base))
        .await;
    let finish = converse(&server, &id, job, (log, hooks), stop).await;
    if finish == AgentFinish::Cancelled {
        server.abort(&id, log).await;
    }
    // A profile that continues its sessions keeps them for the task's next step.
    if !p.continues() {
        server.delete(&id, log).await;
    }
    finish
}

/// Creates the run's session; its id.
async fn create_session(
    server: &Server,
    job: &AgentJob<'_>,
    stop: &CancellationToken,
) -> Result<String, AgentFinish> {
    let p = job.profile;
    let url = server.url("/session");
    let created = tokio::select! {
        r = server.auth(server.http.post(&url)).timeout(SHORT).json(&json!({"title": job.title})).send() => r,
        _ = stop.cancelled() => return Err(AgentFinish::Cancelled),
    };
    let created = match created {
        Ok(r) if r.status().is_success() => r.json::<Value>().await.ok(),
        Ok(r) => {
            let status = r.status();
            let body = r.text().await.unwrap_or_default();
            return Err(status_error(p, &server.base, status, &body));
        }
        Err(e) => return Err(send_error(p, &server.base, &e)),
    };
    let Some(id) = created
        .as_ref()
        .and_then(|v| v["id"].as_str())
        .map(String::from)
    else {
        return Err(AgentFinish::error(
            format!(
                "{}: creating a session returned no id — is this an OpenCode server (1.x)?",
                who(p, &server.base)
            ),
            false,
        ));
    };
    Ok(id)
}

/// Checks that the server still has session `id` to continue.
async fn find_session(
    server: &Server,
    p: &crate::agents::Profile,
    id: &str,
    stop: &CancellationToken,
) -> Result<(), AgentFinish> {
    let url = server.url(&format!("/session/{id}"));
    let got = tokio::select! {
        r = server.auth(server.http.get(&url)).timeout(SHORT).send() => r,
        _ = stop.cancelled() => return Err(AgentFinish::Cancelled),
    };
    match got {
        Ok(r) if r.status().is_success() => Ok(()),
        Ok(r) if r.status() == reqwest::StatusCode::NOT_FOUND => Err(AgentFinish::error(
            format!(
                "{}: OpenCode session not found: {id} (HTTP 404)",
                who(p, &server.base)
            ),
            false,
        )),
        Ok(r) => {
            let status = r.status();
            let body = r.text().await.unwrap_or_default();
            Err(status_error(p, &server.base, status, &body))
        }
        Err(e) => Err(send_error(p, &server.base, &e)),
    }
}

/// Sends the prompt and follows the session until the answer arrives or `stop` fires.
async fn converse(
    server: &Server,
    id: &str,
    job: &AgentJob<'_>,
    (log, hooks): (&Log, &Hooks<'_>),
    stop: &CancellationToken,
) -> AgentFinish {
    let p = job.profile;
    let who = who(p, &server.base);
    let mut progress = OpencodeProgress::new(id, &job.prompt);
    let mut events = match server.events().await {
        Ok(mut ev) => {
            // The first event (`server.connected`) says the subscription is live.
            let _ = tokio::time::timeout(Duration::from_secs(5), ev.next()).await;
            Some(ev)
        }
        Err(e) => {
            log.err(format!(
                "no progress from {}/event ({e}); waiting for the answer without it",
                server.base
            ))
            .await;
            None
        }
    };
    let body = prompt_body(p, &job.prompt);
    let url = server.url(&format!("/session/{id}/message"));
    let send = async {
        let r = server
            .auth(server.patient.post(&url))
            .json(&body)
            .send()
            .await?;
        let status = r.status();
        Ok::<_, reqwest::Error>((status, r.text().await?))
    };
    tokio::pin!(send);
    // What is said while the turn runs joins it. Only once the session is seen at work:
    // one said before the prompt arrived would start the turn on its own, and one said
    // after the turn ended would start another that nobody waits for.
    let mut listening = Listening::new(job.inbox.as_ref());
    let answer = loop {
        tokio::select! {
            r = &mut send => break r,
            said = listening.next(), if progress.working() || events.is_none() => {
                listening.say(server, id, job, said, (log, hooks)).await;
            }
            ev = next(&mut events), if events.is_some() => match ev {
                Some(Ok(ev)) => show(log, &mut progress, &ev.data).await,
                other => {
                    let why = match other { Some(Err(e)) => e, _ => "closed".into() };
                    log.err(format!("the OpenCode event stream ended ({why}); waiting for the answer without progress")).await;
                    events = None;
                }
            },
            _ = stop.cancelled() => return AgentFinish::Cancelled,
        }
    };
    listening.close(log).await;
    // Trailing events (the last text part's end, final tokens) arrive just after.
    if let Some(ev) = events.as_mut() {
        let deadline = tokio::time::Instant::now() + TAIL;
        while !progress.idle {
            match tokio::time::timeout_at(deadline, ev.next()).await {
                Ok(Some(Ok(e))) => show(log, &mut progress, &e.data).await,
                _ => break,
            }
        }
    }
    for (stream, line) in progress.flush() {
        log.send(stream, line).await;
    }
    let (status, mut text) = match answer {
        Ok(a) => a,
        Err(e) => return send_error(p, &server.base, &e),
    };
    if status.is_success()
        && listening.sent > 0
        && let Some(later) = went_on(server, id, (&mut events, &mut progress), log, stop).await
    {
        text = later;
    }
    if !status.is_success() {
        return status_error(p, &server.base, status, &text);
    }
    let v: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            return AgentFinish::error(
                format!(
                    "{who}: the answer is not JSON ({e}): {}",
                    one_line(&text, 200)
                ),
                false,
            );
        }
    };
    let Some(info) = v.get("info") else {
        // A 200 can carry an error body instead of {info, parts}.
        return AgentFinish::error(
            format!(
                "{who}: OpenCode answered {}: {}",
                v["name"].as_str().unwrap_or("without `info`"),
                one_line(
                    v.pointer("/data/message")
                        .and_then(Value::as_str)
                        .unwrap_or(&text),
                    300
                )
            ),
            false,
        );
    };
    progress.record_message(info);
    if let Some(err) = info.get("error").filter(|e| !e.is_null()) {
        return message_error(&who, err);
    }
    let answer: Vec<&str> = v["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["type"] == "text" && p["synthetic"] != true && p["ignored"] != true)
        .filter_map(|p| p["text"].as_str())
        .collect();
    let (usage, cost) = progress.usage();
    if let Some(u) = &usage {
        log.system(format!("usage: {u} · cost ${:.4}", cost.unwrap_or(0.0)))
            .await;
    }
    AgentFinish::Done(AgentRun {
        text: answer.join("\n"),
        usage,
        cost,
        session: Some(id.to_string()),
        events: Vec::new(),
    })
}

async fn next(events: &mut Option<Events>) -> Option<Result<eventsource_stream::Event, String>> {
    match events {
        Some(ev) => ev.next().await,
        None => std::future::pending().await,
    }
}

pub(super) async fn show(log: &Log, progress: &mut OpencodeProgress, data: &str) {
    let Ok(v) = serde_json::from_str::<Value>(data) else {
        return;
    };
    for (stream, line) in progress.feed(&v) {
        log.send(stream, line).await;
    }
}

/// An assistant message's `error` as a step error.
fn message_error(who: &str, err: &Value) -> AgentFinish {
    let name = err["name"].as_str().unwrap_or("error");
    let msg = err
        .pointer("/data/message")
        .and_then(Value::as_str)
        .unwrap_or("");
    match name {
        "ProviderAuthError" => AgentFinish::error(
            format!(
                "{who}: OpenCode's provider `{}` refused its credentials: {msg} — check the provider's key in OpenCode (`opencode auth login` or its config)",
                err.pointer("/data/providerID")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
            ),
            false,
        ),
        "APIError" => AgentFinish::error(
            format!(
                "{who}: the model API failed (HTTP {}): {msg}",
                err.pointer("/data/statusCode").unwrap_or(&Value::Null)
            ),
            err.pointer("/data/isRetryable")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        ),
        "MessageAbortedError" => AgentFinish::error(
            format!("{who}: the session was aborted outside baton"),
            false,
        ),
        _ => AgentFinish::error(format!("{who}: OpenCode reported {name}: {msg}"), false),
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_errors_become_sentences() {
        let f = message_error(
            "agent `oc`",
            &json!({"name": "APIError", "data": {"message": "overloaded", "statusCode": 529, "isRetryable": true}}),
        );
        assert_eq!(
            f,
            AgentFinish::Error {
                error: "agent `oc`: the model API failed (HTTP 529): overloaded".into(),
                retryable: true
            }
        );
    }
}
