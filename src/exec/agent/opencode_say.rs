//! What is said to a running OpenCode step. Each message goes to the step's own session
//! with `POST /session/{id}/prompt_async` while its turn runs: OpenCode adds it to the
//! session, the running turn reads it at its next model request, and the answer the step
//! waits for (`/message`) is then the answer to it. A message OpenCode does not take (the
//! server gone, an error status) is refused, and the engine keeps it for the next step.

use super::http::{SHORT, chain};
use super::log::{Log, one_line};
use super::opencode::{Events, Server, show};
use super::opencode_progress::OpencodeProgress;
use super::{AgentJob, Hooks, Inbox, LiveMessage};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

/// A message for the session, as `/message` and `/prompt_async` take it: the text, and the
/// profile's agent, model and system prompt, so that a said message runs as the step does.
pub(super) fn prompt_body(p: &crate::agents::Profile, text: &str) -> Value {
    let mut body = json!({"parts": [{"type": "text", "text": text}]});
    if let Some(agent) = &p.agent {
        body["agent"] = json!(agent);
    }
    if let Some((provider, model)) = p.model.as_deref().and_then(|m| m.split_once('/')) {
        body["model"] = json!({"providerID": provider, "modelID": model});
    }
    if let Some(system) = &p.system {
        body["system"] = json!(system);
    }
    body
}

/// The step's inbox while its turn runs.
pub(super) struct Listening {
    inbox: Option<UnboundedReceiver<LiveMessage>>,
    /// How many messages the session took.
    pub sent: usize,
}

impl Listening {
    /// Takes the step's inbox: from now on the engine hands what is said to this step.
    pub fn new(inbox: Option<&Inbox>) -> Self {
        Self {
            inbox: inbox.and_then(|i| i.lock().ok()?.take()),
            sent: 0,
        }
    }

    /// The next message said; pending forever when none can come.
    pub async fn next(&mut self) -> LiveMessage {
        match self.inbox.as_mut() {
            Some(rx) => match rx.recv().await {
                Some(m) => m,
                None => std::future::pending().await,
            },
            None => std::future::pending().await,
        }
    }

    /// Posts `said` to session `id`: marked delivered once OpenCode took it, refused (and
    /// so kept for the next step) when it did not.
    pub async fn say(
        &mut self,
        server: &Server,
        id: &str,
        job: &AgentJob<'_>,
        mut said: LiveMessage,
        (log, hooks): (&Log, &Hooks<'_>),
    ) {
        let short = one_line(&said.text, 80);
        let url = server.url(&format!("/session/{id}/prompt_async"));
        let body = prompt_body(job.profile, &said.text);
        let posted = server
            .auth(server.http.post(&url))
            .timeout(SHORT)
            .json(&body)
            .send()
            .await;
        let why = match posted {
            Ok(r) if r.status().is_success() => {
                self.sent += 1;
                (hooks.delivered)(said.id);
                said.answer(Ok(()));
                log.system(format!("said to the agent: {short}")).await;
                return;
            }
            Ok(r) => {
                let status = r.status();
                let body = r.text().await.unwrap_or_default();
                let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                let detail = v
                    .pointer("/data/message")
                    .or(v.get("message"))
                    .and_then(Value::as_str)
                    .map(|m| format!(": {}", one_line(m, 200)))
                    .unwrap_or_default();
                format!("the OpenCode server answered HTTP {status}{detail}")
            }
            Err(e) => format!("the OpenCode server did not take it ({})", chain(&e)),
        };
        let why = log.clean(&why);
        log.err(format!("{why}; kept for the next step: {short}"))
            .await;
        said.answer(Err(why));
    }

    /// Stops listening once the turn has ended: what waits unread is refused, and so is
    /// what is said from now on (the engine keeps both for the next step).
    pub async fn close(&mut self, log: &Log) {
        let Some(mut rx) = self.inbox.take() else {
            return;
        };
        rx.close();
        while let Ok(mut m) = rx.try_recv() {
            log.system(format!(
                "its turn has ended; kept for the next step: {}",
                one_line(&m.text, 80)
            ))
            .await;
            m.answer(Err(
                "its turn had ended before the message could be given".into()
            ));
        }
    }
}

/// After the answer, when messages were said: one said just as the turn ended can start
/// another turn of the session. The step then waits for that turn to end too (following
/// its progress), and its last answer, `{info, parts}` as `/message` gives it, is the step's.
pub(super) async fn went_on(
    server: &Server,
    id: &str,
    (events, progress): (&mut Option<Events>, &mut OpencodeProgress),
    log: &Log,
    stop: &CancellationToken,
) -> Option<String> {
    let url = server.url("/session/status");
    let got = server.auth(server.http.get(&url)).timeout(SHORT).send();
    let status: Value = got.await.ok()?.json().await.ok()?;
    if status[id]["type"].as_str().is_none_or(|t| t == "idle") {
        return None;
    }
    log.system("OpenCode took up a message said as the turn ended; waiting for that answer too")
        .await;
    progress.idle = false;
    while !progress.idle {
        // Without its progress the end of that turn cannot be seen: the answer stands.
        let ev = events.as_mut()?;
        tokio::select! {
            ev = ev.next() => match ev {
                Some(Ok(ev)) => show(log, progress, &ev.data).await,
                _ => return None,
            },
            _ = stop.cancelled() => return None,
        }
    }
    let url = server.url(&format!("/session/{id}/message"));
    let got = server.auth(server.http.get(&url)).timeout(SHORT).send();
    let list: Value = got.await.ok()?.json().await.ok()?;
    let last = list
        .as_array()?
        .iter()
        .rev()
        .find(|m| m["info"]["role"] == "assistant")?;
    Some(last.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_said_message_carries_the_profiles_agent_and_model() {
        let p = crate::agents::parse_profile(
            ".baton/agents/oc.json",
            r#"{"id": "oc", "backend": "opencode", "agent": "build", "model": "stub/stub-model"}"#,
        )
        .0
        .unwrap();
        let b = prompt_body(&p, "use tabs");
        assert_eq!(b["parts"][0], json!({"type": "text", "text": "use tabs"}));
        assert_eq!(b["agent"], "build");
        assert_eq!(
            b["model"],
            json!({"providerID": "stub", "modelID": "stub-model"})
        );
        assert!(b.get("system").is_none());
    }

    #[test]
    fn messages_are_posted_only_while_the_session_s_turn_runs() {
        let ev = |ty: &str, props: Value| json!({"type": ty, "properties": props});
        let mut p = OpencodeProgress::new("ses_1", "Plan it");
        assert!(!p.working(), "before the prompt arrived");
        p.feed(&ev(
            "message.updated",
            json!({"sessionID": "ses_1", "info": {"id": "msg_u", "sessionID": "ses_1", "role": "user"}}),
        ));
        assert!(p.working(), "the prompt is in the session");
        p.feed(&ev(
            "session.status",
            json!({"sessionID": "ses_1", "status": {"type": "idle"}}),
        ));
        assert!(!p.working(), "the turn has ended");
        p.feed(&ev(
            "session.status",
            json!({"sessionID": "ses_2", "status": {"type": "busy"}}),
        ));
        assert!(!p.working(), "another session's turn");
        p.feed(&ev(
            "session.status",
            json!({"sessionID": "ses_1", "status": {"type": "busy"}}),
        ));
        assert!(p.working(), "a new turn of the session");
    }

    #[tokio::test]
    async fn what_waits_unread_when_the_turn_ends_is_refused() {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let inbox: Inbox = std::sync::Arc::new(std::sync::Mutex::new(Some(rx)));
        let mut l = Listening::new(Some(&inbox));
        assert!(inbox.lock().unwrap().is_none(), "the step took its inbox");
        let (heard, answer) = tokio::sync::oneshot::channel();
        let m = LiveMessage {
            id: 1,
            text: "hi".into(),
            heard: Some(heard),
        };
        tx.send(m).unwrap();
        let (log_tx, _log_rx) = tokio::sync::mpsc::channel(8);
        let log = Log::new(log_tx, Default::default());
        l.close(&log).await;
        assert!(answer.await.unwrap().is_err());
        let late = LiveMessage {
            id: 2,
            text: "late".into(),
            heard: None,
        };
        assert!(tx.send(late).is_err(), "a closed inbox refuses at once");
    }
}
