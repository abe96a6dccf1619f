//! Following one OpenCode session from its `/event` stream: what to show of its text and
//! tool calls, which events are errors, when its turn runs and when it is idle, and the
//! tokens and cost it used. Pure: fed one event at a time.

use super::claude::tool_args;
use super::log::{LineBuf, one_line};
use crate::store::Stream;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Progress of one session, fed one `/event` payload at a time. Pure.
#[derive(Debug, Default)]
pub struct OpencodeProgress {
    session: String,
    /// The prompt we sent: its echo as a user part is not shown.
    prompt: String,
    kinds: HashMap<String, String>,
    user_messages: HashSet<String>,
    /// Streamed text parts: their pending line and the bytes received so far.
    lines: HashMap<String, (LineBuf, usize)>,
    /// Deltas for parts whose type is not known yet (they can arrive first).
    early: HashMap<String, String>,
    done_parts: HashSet<String>,
    tools: HashMap<String, String>,
    /// Tokens and cost per assistant message.
    messages: BTreeMap<String, (Value, f64)>,
    /// The last `session.error`.
    pub error: Option<Value>,
    /// `session.idle` or `session.status` idle was seen.
    pub idle: bool,
    /// The session was seen at work (busy, or a message of its turn) since it was last idle.
    busy: bool,
}

impl OpencodeProgress {
    /// Progress for `session`, which was sent `prompt`.
    pub fn new(session: &str, prompt: &str) -> Self {
        Self {
            session: session.into(),
            prompt: prompt.trim().into(),
            ..Default::default()
        }
    }

    /// True while the session's turn runs: seen at work, not yet idle again.
    pub fn working(&self) -> bool {
        self.busy && !self.idle
    }

    /// Takes one event (`{"type", "properties"}`); returns what to show. Events of other
    /// sessions and unknown types are skipped.
    pub fn feed(&mut self, ev: &Value) -> Vec<(Stream, String)> {
        let props = &ev["properties"];
        let sid = [
            props.get("sessionID"),
            props.pointer("/info/sessionID"),
            props.pointer("/part/sessionID"),
        ]
        .into_iter()
        .flatten()
        .find_map(Value::as_str);
        if sid != Some(self.session.as_str()) {
            return Vec::new();
        }
        let mut out = Vec::new();
        match ev["type"].as_str().unwrap_or_default() {
            "message.updated" => {
                self.busy = true;
                self.record_message(&props["info"]);
            }
            "message.part.delta" if props["field"] == "text" => {
                let part = props["partID"].as_str().unwrap_or_default().to_string();
                let delta = props["delta"].as_str().unwrap_or_default();
                match self.kinds.get(&part).map(String::as_str) {
                    Some("text") => out.extend(self.text_delta(&part, delta)),
                    Some(_) => {}
                    None => self.early.entry(part).or_default().push_str(delta),
                }
            }
            "message.part.updated" => out.extend(self.part(&props["part"], props.get("delta"))),
            "session.error" => {
                let e = &props["error"];
                out.push((
                    Stream::Stderr,
                    format!(
                        "OpenCode: {}: {}",
                        e["name"].as_str().unwrap_or("error"),
                        e.pointer("/data/message").and_then(Value::as_str).unwrap_or("")
                    ),
                ));
                self.error = Some(e.clone());
            }
            "session.idle" => self.idle = true,
            "session.status" => match props.pointer("/status/type").and_then(Value::as_str) {
                Some("idle") => self.idle = true,
                Some("busy") => {
                    self.busy = true;
                    self.idle = false;
                }
                Some("retry") => out.push((
                    Stream::Stderr,
                    format!(
                        "OpenCode retries (attempt {}): {}",
                        props.pointer("/status/attempt").unwrap_or(&Value::Null),
                        props.pointer("/status/message").and_then(Value::as_str).unwrap_or("")
                    ),
                )),
                _ => {}
            },
            "permission.asked" | "permission.updated" => out.push((
                Stream::Stderr,
                format!(
                    "[permission] OpenCode asks to allow `{}` {} — answer it in OpenCode or allow it in OpenCode's `permission` config; the agent waits until then",
                    props["permission"].as_str().or(props["type"].as_str()).unwrap_or("?"),
                    one_line(&props["patterns"].to_string(), 120)
                ),
            )),
            _ => {}
        }
        out
    }

    fn text_delta(&mut self, part: &str, delta: &str) -> Vec<(Stream, String)> {
        let (buf, received) = self.lines.entry(part.to_string()).or_default();
        *received += delta.len();
        buf.push(delta)
            .into_iter()
            .map(|l| (Stream::Stdout, l))
            .collect()
    }

    fn part(&mut self, part: &Value, delta: Option<&Value>) -> Vec<(Stream, String)> {
        let id = part["id"].as_str().unwrap_or_default().to_string();
        let kind = part["type"].as_str().unwrap_or_default().to_string();
        self.kinds.insert(id.clone(), kind.clone());
        let early = self.early.remove(&id);
        let mut out = Vec::new();
        match kind.as_str() {
            "text" => {
                let msg = part["messageID"].as_str().unwrap_or_default();
                let text = part["text"].as_str().unwrap_or_default();
                if self.user_messages.contains(msg)
                    || part["synthetic"] == true
                    || (!self.prompt.is_empty() && text.trim() == self.prompt)
                {
                    return out;
                }
                if let Some(d) = early {
                    out.extend(self.text_delta(&id, &d));
                }
                // Builds before `message.part.delta` carried the delta here.
                if let Some(d) = delta.and_then(Value::as_str) {
                    out.extend(self.text_delta(&id, d));
                }
                let ended = part.pointer("/time/end").is_some_and(|e| !e.is_null());
                if ended && self.done_parts.insert(id.clone()) {
                    match self.lines.remove(&id) {
                        // Streamed: show the rest, from the final text if the deltas were
                        // a prefix of it (events can be lost), else from what was received.
                        Some((mut buf, received)) => {
                            let pending = buf.finish().unwrap_or_default();
                            let shown = received - pending.len();
                            let rest = match text.get(shown..) {
                                Some(r) => r.to_string(),
                                _ => pending,
                            };
                            let rest = rest.trim_end();
                            if !rest.is_empty() {
                                out.extend(
                                    rest.split('\n').map(|l| (Stream::Stdout, l.to_string())),
                                );
                            }
                        }
                        // Never streamed: show it whole.
                        None => out.extend(
                            text.trim_end()
                                .split('\n')
                                .map(|l| (Stream::Stdout, l.to_string())),
                        ),
                    }
                }
            }
            "tool" => {
                let call = part["callID"].as_str().unwrap_or(&id).to_string();
                let status = part
                    .pointer("/state/status")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let seen = self.tools.get(&call).cloned();
                if seen.is_none() && status != "pending" {
                    let state = &part["state"];
                    let args = match state.get("input") {
                        Some(i) if i.as_object().is_some_and(|o| !o.is_empty()) => tool_args(i),
                        _ => state["title"].as_str().unwrap_or_default().to_string(),
                    };
                    out.push((
                        Stream::Stdout,
                        format!("[tool] {} {args}", part["tool"].as_str().unwrap_or("?")),
                    ));
                }
                if status == "error" && seen.as_deref() != Some("error") {
                    out.push((
                        Stream::Stderr,
                        format!(
                            "[tool error] {}: {}",
                            part["tool"].as_str().unwrap_or("?"),
                            one_line(
                                part.pointer("/state/error")
                                    .and_then(Value::as_str)
                                    .unwrap_or(""),
                                200
                            )
                        ),
                    ));
                }
                if status != "pending" {
                    self.tools.insert(call, status.to_string());
                }
            }
            _ => {}
        }
        out
    }

    /// Notes an assistant message's tokens and cost (and which messages are the user's).
    pub fn record_message(&mut self, info: &Value) {
        let Some(id) = info["id"].as_str() else {
            return;
        };
        match info["role"].as_str() {
            Some("user") => {
                self.user_messages.insert(id.to_string());
            }
            Some("assistant") => {
                let tokens = info.get("tokens").cloned().unwrap_or(Value::Null);
                let cost = info["cost"].as_f64().unwrap_or(0.0);
                self.messages.insert(id.to_string(), (tokens, cost));
            }
            _ => {}
        }
    }

    /// Lines still buffered (a last line without its newline).
    pub fn flush(&mut self) -> Vec<(Stream, String)> {
        let mut ids: Vec<String> = self.lines.keys().cloned().collect();
        ids.sort();
        ids.into_iter()
            .filter_map(|id| self.lines.remove(&id)?.0.finish())
            .map(|l| (Stream::Stdout, l))
            .collect()
    }

    /// Tokens summed over the session's assistant messages, and their cost.
    pub fn usage(&self) -> (Option<Value>, Option<f64>) {
        if self.messages.is_empty() {
            return (None, None);
        }
        let mut sum: BTreeMap<&str, u64> = BTreeMap::new();
        let mut cost = 0.0;
        for (tokens, c) in self.messages.values() {
            cost += c;
            for (key, ptr) in [
                ("input_tokens", "/input"),
                ("output_tokens", "/output"),
                ("reasoning_tokens", "/reasoning"),
                ("cache_read_tokens", "/cache/read"),
                ("cache_write_tokens", "/cache/write"),
            ] {
                if let Some(n) = tokens.pointer(ptr).and_then(Value::as_f64) {
                    *sum.entry(key).or_default() += n as u64;
                }
            }
        }
        (Some(json!(sum)), Some(cost))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ty: &str, props: Value) -> Value {
        json!({"type": ty, "properties": props})
    }

    #[test]
    fn follows_one_session_and_skips_the_prompt_echo() {
        let mut p = OpencodeProgress::new("ses_1", "Plan it");
        let mut shown = Vec::new();
        let events = [
            ev("server.connected", json!({})),
            ev(
                "message.updated",
                json!({"sessionID": "ses_1", "info": {"id": "msg_u", "sessionID": "ses_1", "role": "user"}}),
            ),
            ev(
                "message.part.updated",
                json!({"sessionID": "ses_1", "part": {"id": "prt_u", "sessionID": "ses_1", "messageID": "msg_u", "type": "text", "text": "Plan it"}}),
            ),
            // A delta before its part is known (OpenCode can send one first).
            ev(
                "message.part.delta",
                json!({"sessionID": "ses_1", "messageID": "msg_a", "partID": "prt_t", "field": "text", "delta": "Hel"}),
            ),
            ev(
                "message.part.updated",
                json!({"sessionID": "ses_1", "part": {"id": "prt_t", "sessionID": "ses_1", "messageID": "msg_a", "type": "text", "text": ""}}),
            ),
            ev(
                "message.part.delta",
                json!({"sessionID": "ses_1", "messageID": "msg_a", "partID": "prt_t", "field": "text", "delta": "lo\nwor"}),
            ),
            ev(
                "message.part.updated",
                json!({"sessionID": "ses_2", "part": {"id": "prt_x", "sessionID": "ses_2", "messageID": "m", "type": "text", "text": "other session", "time": {"start": 1, "end": 2}}}),
            ),
            ev(
                "message.part.updated",
                json!({"sessionID": "ses_1", "part": {"id": "prt_b", "sessionID": "ses_1", "messageID": "msg_a", "type": "tool", "callID": "c1", "tool": "bash", "state": {"status": "running", "input": {"command": "ls"}, "time": {"start": 1}}}}),
            ),
            ev(
                "message.part.updated",
                json!({"sessionID": "ses_1", "part": {"id": "prt_b", "sessionID": "ses_1", "messageID": "msg_a", "type": "tool", "callID": "c1", "tool": "bash", "state": {"status": "completed", "input": {"command": "ls"}, "output": "x", "title": "ls", "metadata": {}, "time": {"start": 1, "end": 2}}}}),
            ),
            ev(
                "message.part.updated",
                json!({"sessionID": "ses_1", "part": {"id": "prt_t", "sessionID": "ses_1", "messageID": "msg_a", "type": "text", "text": "Hello\nworld", "time": {"start": 1, "end": 3}}}),
            ),
            ev(
                "message.part.updated",
                json!({"sessionID": "ses_1", "part": {"id": "prt_s", "sessionID": "ses_1", "messageID": "msg_a", "type": "text", "text": "Whole part\nat once", "time": {"start": 1, "end": 3}}}),
            ),
            ev(
                "message.updated",
                json!({"sessionID": "ses_1", "info": {"id": "msg_a", "sessionID": "ses_1", "role": "assistant", "cost": 0.5, "tokens": {"input": 10, "output": 4, "reasoning": 0, "cache": {"read": 2, "write": 0}}}}),
            ),
            ev(
                "session.status",
                json!({"sessionID": "ses_1", "status": {"type": "idle"}}),
            ),
        ];
        for e in &events {
            shown.extend(p.feed(e).into_iter().map(|(_, l)| l));
        }
        assert_eq!(
            shown,
            ["Hello", "[tool] bash ls", "world", "Whole part", "at once"]
        );
        assert!(p.idle);
        let (usage, cost) = p.usage();
        assert_eq!(
            usage,
            Some(
                json!({"input_tokens": 10, "output_tokens": 4, "reasoning_tokens": 0, "cache_read_tokens": 2, "cache_write_tokens": 0})
            )
        );
        assert_eq!(cost, Some(0.5));
    }

    #[test]
    fn errors_and_permissions_are_shown() {
        let mut p = OpencodeProgress::new("ses_1", "");
        let shown = p.feed(&ev("session.error", json!({"sessionID": "ses_1", "error": {"name": "ProviderAuthError", "data": {"providerID": "x", "message": "bad key"}}})));
        assert_eq!(shown[0].1, "OpenCode: ProviderAuthError: bad key");
        assert!(p.error.is_some());
        let shown = p.feed(&ev("permission.asked", json!({"id": "per_1", "sessionID": "ses_1", "permission": "bash", "patterns": ["rm *"]})));
        assert!(
            shown[0]
                .1
                .starts_with("[permission] OpenCode asks to allow `bash`"),
            "{shown:?}"
        );
    }
}
