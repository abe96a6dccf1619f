//! The `openai` backend: an OpenAI-compatible `POST {url}/chat/completions` with
//! `stream: true`, read as server-sent events (`data:` lines, a usage chunk with empty
//! `choices`, then `[DONE]`).

use super::http::{SHORT, client, send_error, status_error, who};
use super::log::{LineBuf, Log, one_line};
use super::{AgentFinish, AgentJob, AgentRun};
use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use tokio_util::sync::CancellationToken;

/// The state of one streamed chat completion, fed one SSE `data` payload at a time.
#[derive(Debug, Default)]
pub struct ChatStream {
    /// The answer so far.
    pub text: String,
    /// The usage chunk, normalised (`input_tokens`, `output_tokens`, …).
    pub usage: Option<Value>,
    /// Cost, when the server reports one in its usage (OpenRouter does).
    pub cost: Option<f64>,
    /// The last `finish_reason` seen.
    pub finish_reason: Option<String>,
    /// `[DONE]` arrived.
    pub done: bool,
    /// The completion's id.
    pub id: Option<String>,
    lines: LineBuf,
    /// Tool-call fragments by index: name and concatenated arguments.
    tools: BTreeMap<u64, (String, String)>,
}

impl ChatStream {
    /// Takes one `data` payload; returns the log lines it completed. An `error` object in
    /// the stream or a payload that is not JSON is an `Err` sentence.
    pub fn feed(&mut self, data: &str) -> Result<Vec<String>, String> {
        let data = data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(self.flush());
        }
        if data.is_empty() {
            return Ok(Vec::new());
        }
        let v: Value = serde_json::from_str(data).map_err(|e| {
            format!(
                "the stream is malformed: a chunk is not JSON ({e}): {}",
                one_line(data, 120)
            )
        })?;
        if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
            let msg = err
                .get("message")
                .and_then(Value::as_str)
                .map(String::from)
                .unwrap_or_else(|| err.to_string());
            return Err(format!("the server reported an error mid-stream: {msg}"));
        }
        if self.id.is_none() {
            self.id = v.get("id").and_then(Value::as_str).map(String::from);
        }
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            self.cost = u.get("cost").and_then(Value::as_f64).or(self.cost);
            self.usage = Some(normalise_usage(u));
        }
        let mut out = Vec::new();
        // Never index choices[0] blindly: the usage chunk has none.
        for choice in v
            .get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let delta = &choice["delta"];
            if let Some(t) = delta.get("content").and_then(Value::as_str) {
                self.text.push_str(t);
                out.extend(self.lines.push(t));
            }
            for call in delta
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let idx = call.get("index").and_then(Value::as_u64).unwrap_or(0);
                let entry = self.tools.entry(idx).or_default();
                if let Some(n) = call.pointer("/function/name").and_then(Value::as_str) {
                    entry.0.push_str(n);
                }
                if let Some(a) = call.pointer("/function/arguments").and_then(Value::as_str) {
                    entry.1.push_str(a);
                }
            }
            if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish_reason = Some(r.to_string());
                out.extend(self.flush());
            }
        }
        Ok(out)
    }

    /// Completes the pending line and reports tool calls the model asked for.
    fn flush(&mut self) -> Vec<String> {
        let mut out: Vec<String> = self.lines.finish().into_iter().collect();
        for (_, (name, args)) in std::mem::take(&mut self.tools) {
            out.push(format!("[tool] {name} {}", one_line(&args, 160)));
        }
        out
    }

    /// True when the stream ended properly (`[DONE]` or a finish reason).
    pub fn complete(&self) -> bool {
        self.done || self.finish_reason.is_some()
    }
}

/// OpenAI usage (`prompt_tokens`, `completion_tokens`, details) in baton's shape.
fn normalise_usage(u: &Value) -> Value {
    let mut out = serde_json::Map::new();
    let mut put = |k: &str, v: Option<&Value>| {
        if let Some(n) = v.and_then(Value::as_u64) {
            out.insert(k.into(), json!(n));
        }
    };
    put("input_tokens", u.get("prompt_tokens"));
    put("output_tokens", u.get("completion_tokens"));
    put("total_tokens", u.get("total_tokens"));
    put(
        "cache_read_tokens",
        u.pointer("/prompt_tokens_details/cached_tokens"),
    );
    put(
        "reasoning_tokens",
        u.pointer("/completion_tokens_details/reasoning_tokens"),
    );
    Value::Object(out)
}

pub(super) async fn run(job: &AgentJob<'_>, log: &Log, stop: &CancellationToken) -> AgentFinish {
    let p = job.profile;
    let url = format!("{}/chat/completions", p.base_url());
    let key = match &p.api_key_env {
        Some(var) => match std::env::var(var) {
            Ok(k) if !k.trim().is_empty() => Some(k),
            _ => {
                return AgentFinish::error(
                    format!(
                        "{}: ${var} is not set — export the API key in the environment the engine runs in",
                        who(p, &url)
                    ),
                    false,
                );
            }
        },
        None => None,
    };
    let mut messages = Vec::new();
    if let Some(system) = &p.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    messages.push(json!({"role": "user", "content": job.prompt}));
    let body = json!({
        "model": p.model,
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    let mut req = client(&url)
        .post(&url)
        .header("accept", "text/event-stream")
        .json(&body);
    if let Some(k) = &key {
        req = req.bearer_auth(k);
    }
    log.system(format!(
        "POST {url} · model {}",
        p.model.as_deref().unwrap_or("?")
    ))
    .await;
    let resp = tokio::select! {
        r = req.send() => r,
        _ = stop.cancelled() => return AgentFinish::Cancelled,
    };
    let resp = match resp {
        Ok(r) => r,
        Err(e) => return clean(log, send_error(p, &url, &e)),
    };
    let status = resp.status();
    if !status.is_success() {
        let body = tokio::time::timeout(SHORT, resp.text())
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        return clean(log, status_error(p, &url, status, &body));
    }
    let mut events = resp.bytes_stream().eventsource();
    let mut chat = ChatStream::default();
    loop {
        let next = tokio::select! {
            n = events.next() => n,
            _ = stop.cancelled() => return AgentFinish::Cancelled,
        };
        match next {
            None => break,
            Some(Err(e)) => {
                return clean(
                    log,
                    AgentFinish::error(
                        format!(
                            "{}: the stream broke off ({e}) — retried if the step allows",
                            who(p, &url)
                        ),
                        true,
                    ),
                );
            }
            Some(Ok(ev)) => match chat.feed(&ev.data) {
                Ok(lines) => {
                    for l in lines {
                        log.out(l).await;
                    }
                    if chat.done {
                        break;
                    }
                }
                Err(why) => {
                    return clean(
                        log,
                        AgentFinish::error(format!("{}: {why}", who(p, &url)), false),
                    );
                }
            },
        }
    }
    for l in chat.flush() {
        log.out(l).await;
    }
    if !chat.complete() {
        return AgentFinish::error(
            format!(
                "{}: the stream ended early (no finish_reason and no [DONE]) — retried if the step allows",
                who(p, &url)
            ),
            true,
        );
    }
    if let Some(u) = &chat.usage {
        log.system(format!("usage: {u}")).await;
    }
    AgentFinish::Done(AgentRun {
        text: chat.text,
        usage: chat.usage,
        cost: chat.cost,
        session: chat.id,
        events: Vec::new(),
    })
}

/// Redacts an error sentence before it leaves the backend.
fn clean(log: &Log, f: AgentFinish) -> AgentFinish {
    match f {
        AgentFinish::Error { error, retryable } => AgentFinish::Error {
            error: log.clean(&error),
            retryable,
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A streamed chat completion as the API sends it, chunk by chunk.
    const CHUNKS: &[&str] = &[
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{"content":"lo\n## What Was Done\nplanned"},"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"bash","arguments":"{\"cmd\":"}}]},"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"ls\"}"}}]},"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21}}"#,
        "[DONE]",
    ];

    #[test]
    fn feeds_chunks_into_text_lines_and_usage() {
        let mut c = ChatStream::default();
        let mut shown = Vec::new();
        for chunk in CHUNKS {
            shown.extend(c.feed(chunk).unwrap());
        }
        assert_eq!(c.text, "Hello\n## What Was Done\nplanned");
        assert_eq!(
            shown,
            [
                "Hello",
                "## What Was Done",
                "planned",
                "[tool] bash {\"cmd\":\"ls\"}"
            ]
        );
        assert_eq!(
            c.usage,
            Some(json!({"input_tokens": 9, "output_tokens": 12, "total_tokens": 21}))
        );
        assert!(c.done && c.complete());
        assert_eq!(c.id.as_deref(), Some("chatcmpl-1"));
    }

    #[tokio::test]
    async fn parses_sse_framing_over_a_byte_stream() {
        // Split mid-line and mid-event, with a comment, CRLF and a multi-line data field.
        let wire = ": keep-alive\r\n\r\ndata: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choi\
            ces\":[{\"delta\":{\"content\":\"b\"},\"finish_reason\":\"stop\"}]}\r\n\r\ndata: [DONE]\n\n";
        let bytes = wire.as_bytes();
        let pieces: Vec<Result<Vec<u8>, std::io::Error>> =
            bytes.chunks(7).map(|c| Ok(c.to_vec())).collect();
        let mut events = futures_util::stream::iter(pieces).eventsource();
        let mut c = ChatStream::default();
        while let Some(ev) = events.next().await {
            c.feed(&ev.unwrap().data).unwrap();
            if c.done {
                break;
            }
        }
        assert_eq!(c.text, "ab");
        assert!(c.done);
    }

    #[test]
    fn errors_and_garbage_are_sentences() {
        let mut c = ChatStream::default();
        let e = c
            .feed(r#"{"error":{"message":"model not loaded"}}"#)
            .unwrap_err();
        assert!(e.contains("model not loaded"), "{e}");
        let e = c.feed("<html>").unwrap_err();
        assert!(e.contains("malformed"), "{e}");
        assert!(!c.complete());
    }
}
