//! `claude -p --output-format stream-json --verbose`: NDJSON events turned into log lines
//! (assistant text, `[tool] Name args`, the final result and cost). Pure.

use super::log::one_line;
use super::outcome::AgentEvent;
use crate::store::Stream;
use serde_json::{Value, json};

/// The final `result` event.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaudeResult {
    /// `success`, `error_max_turns`, `error_during_execution`, …
    pub subtype: String,
    pub is_error: bool,
    /// The final answer (or the error message).
    pub text: String,
    /// `errors[]` of error subtypes.
    pub errors: Vec<String>,
    /// `total_cost_usd` (older CLIs: `cost_usd`).
    pub cost: Option<f64>,
    /// Usage in baton's shape.
    pub usage: Option<Value>,
    /// `api_error_status`: the model API's HTTP status when the run ended on an API error.
    pub api_status: Option<u64>,
    /// `permission_denials`: the tool calls the permission mode refused, as
    /// `(tool, telling argument)`.
    pub denials: Vec<(String, String)>,
}

impl ClaudeResult {
    /// True when the run failed: `is_error`, or an `error_*` subtype.
    pub fn failed(&self) -> bool {
        self.is_error || self.subtype.starts_with("error")
    }

    /// A one-line reason for a failed run: `HTTP 401: Invalid API key`,
    /// `error_max_turns: Reached max turns (3)`. An API error comes with the subtype
    /// `success`, which says nothing and is left out.
    pub fn reason(&self) -> String {
        let mut parts = Vec::new();
        let mut text = self.text.trim();
        match self.api_status {
            Some(status) => {
                parts.push(format!("HTTP {status}"));
                // Claude's own text repeats the status: "API Error: 500 Internal server error".
                text = text
                    .strip_prefix(&format!("API Error: {status}"))
                    .map_or(text, str::trim_start);
            }
            None if self.subtype != "success" => parts.push(self.subtype.clone()),
            None => {}
        }
        if !text.is_empty() {
            parts.push(one_line(text, 300));
        }
        parts.extend(self.errors.iter().map(|e| one_line(e, 300)));
        if parts.is_empty() {
            parts.push(self.subtype.clone());
        }
        parts.join(": ")
    }

    /// The warning event for the tool calls Claude's permission mode refused, if any.
    pub fn denial_event(&self) -> Option<AgentEvent> {
        if self.denials.is_empty() {
            return None;
        }
        let calls: Vec<String> = self
            .denials
            .iter()
            .map(|(tool, arg)| format!("{tool} {arg}").trim_end().to_string())
            .collect();
        Some(AgentEvent {
            category: "agent",
            kind: "permission_denied",
            summary: one_line(
                &format!(
                    "claude was not allowed {} tool call{}: {} — widen `--permission-mode` in the profile's argv if it needs them",
                    calls.len(),
                    if calls.len() == 1 { "" } else { "s" },
                    calls.join("; ")
                ),
                600,
            ),
            data: json!({ "denials": self.denials.iter().map(|(tool, arg)| json!({"tool": tool, "target": arg})).collect::<Vec<_>>() }),
            level: "warn",
        })
    }
}

/// The state of one Claude run, fed one stdout line at a time.
#[derive(Debug, Default)]
pub struct ClaudeStream {
    /// From the `system`/`init` event.
    pub session: Option<String>,
    /// The `result` event, once seen.
    pub result: Option<ClaudeResult>,
    /// Assistant text seen so far (the answer if no result arrives).
    pub assistant_text: Vec<String>,
}

impl ClaudeStream {
    /// Takes one line of stdout; returns what to show. A line that is not JSON is shown
    /// as it is; unknown event types are skipped.
    pub fn feed(&mut self, line: &str) -> Vec<(Stream, String)> {
        let v = match super::log::json_line(line) {
            Ok(v) => v,
            Err(shown) => return shown,
        };
        let mut out = Vec::new();
        if self.session.is_none() {
            self.session = v
                .get("session_id")
                .and_then(Value::as_str)
                .map(String::from);
        }
        match v.get("type").and_then(Value::as_str) {
            Some("system") => out.extend(system_line(&v)),
            Some("assistant") => {
                for block in v
                    .pointer("/message/content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    match block.get("type").and_then(Value::as_str) {
                        Some("text") => {
                            let text = block["text"].as_str().unwrap_or_default();
                            if !text.is_empty() {
                                self.assistant_text.push(text.to_string());
                                out.push((Stream::Stdout, text.to_string()));
                            }
                        }
                        Some("tool_use") => out.push((
                            Stream::Stdout,
                            format!(
                                "[tool] {} {}",
                                block["name"].as_str().unwrap_or("?"),
                                tool_args(&block["input"])
                            ),
                        )),
                        _ => {}
                    }
                }
            }
            Some("user") => {
                for block in v
                    .pointer("/message/content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if block["type"] == "tool_result" && block["is_error"] == true {
                        let content = match &block["content"] {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        };
                        out.push((
                            Stream::Stderr,
                            format!("[tool error] {}", one_line(&content, 200)),
                        ));
                    }
                }
            }
            Some("result") => {
                let r = ClaudeResult {
                    subtype: v["subtype"].as_str().unwrap_or("success").to_string(),
                    is_error: v["is_error"].as_bool().unwrap_or(false),
                    text: v["result"].as_str().unwrap_or_default().to_string(),
                    errors: v["errors"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|e| e.as_str().map(String::from))
                        .collect(),
                    cost: v["total_cost_usd"]
                        .as_f64()
                        .or_else(|| v["cost_usd"].as_f64()),
                    usage: v
                        .get("usage")
                        .filter(|u| u.is_object())
                        .map(normalise_usage),
                    api_status: v["api_error_status"].as_u64(),
                    denials: v["permission_denials"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|d| {
                            (
                                d["tool_name"].as_str().unwrap_or("?").to_string(),
                                tool_args(&d["tool_input"]),
                            )
                        })
                        .collect(),
                };
                let mut summary = format!("result: {}", r.subtype);
                if let Some(n) = v["num_turns"].as_u64() {
                    summary.push_str(&format!(" · {n} turns"));
                }
                if let Some(ms) = v["duration_ms"].as_u64() {
                    summary.push_str(&format!(" · {:.1} s", ms as f64 / 1000.0));
                }
                if let Some(c) = r.cost {
                    summary.push_str(&format!(" · cost ${c:.4}"));
                }
                out.push((Stream::System, summary));
                if r.failed() {
                    out.push((
                        Stream::Stderr,
                        format!("claude reported an error: {}", r.reason()),
                    ));
                }
                self.result = Some(r);
            }
            _ => {}
        }
        out
    }

    /// The answer: the result's text, else the assistant text seen.
    pub fn answer(&self) -> String {
        match &self.result {
            Some(r) if !r.text.is_empty() => r.text.clone(),
            _ => self.assistant_text.join("\n\n"),
        }
    }
}

/// The log line of a `system` event that tells the user something: the session starting,
/// a retry of the model API, the conversation being compacted, a model fallback, a refused
/// tool call. Bookkeeping events show nothing.
fn system_line(v: &Value) -> Option<(Stream, String)> {
    let text = |key: &str| v[key].as_str().map(|t| one_line(t, 300));
    let line = match v["subtype"].as_str()? {
        "init" => format!(
            "claude session {} · model {}",
            v["session_id"].as_str().unwrap_or("?"),
            v["model"].as_str().unwrap_or("?")
        ),
        "api_retry" => {
            // A cut connection reports no status and the error `unknown`.
            let cause = match (v["error_status"].as_u64(), v["error"].as_str()) {
                (Some(status), _) => format!("HTTP {status}"),
                (None, Some(e)) if e != "unknown" => one_line(&e.replace('_', " "), 120),
                (None, _) => "a failed request".into(),
            };
            let mut line = format!("retrying after {cause}");
            let attempt = v["attempt"].as_u64();
            let delay = v["retry_delay_ms"].as_f64();
            let detail: Vec<String> = [
                attempt.map(|a| match v["max_retries"].as_u64() {
                    Some(max) => format!("attempt {a} of {max}"),
                    None => format!("attempt {a}"),
                }),
                delay.map(|ms| format!("in {:.1} s", ms / 1000.0)),
            ]
            .into_iter()
            .flatten()
            .collect();
            if !detail.is_empty() {
                line.push_str(&format!(" ({})", detail.join(", ")));
            }
            return Some((Stream::Stderr, line));
        }
        "compact_boundary" => {
            let meta = &v["compact_metadata"];
            let mut line = "conversation compacted".to_string();
            if let Some(t) = meta["trigger"].as_str() {
                line.push_str(&format!(" ({t})"));
            }
            if let Some(n) = meta["pre_tokens"].as_u64() {
                line.push_str(&format!(" from {n} tokens"));
            }
            line
        }
        "status" if v["status"] == "compacting" => "compacting the conversation…".into(),
        "model_fallback" | "model_refusal_fallback" => {
            let to = v["fallback_model"].as_str().unwrap_or("another model");
            return Some((
                Stream::Stderr,
                text("content").unwrap_or_else(|| format!("falling back to {to}")),
            ));
        }
        "permission_denied" => {
            let tool = v["tool_name"].as_str().unwrap_or("a tool");
            let why = text("message").unwrap_or_else(|| "not allowed".into());
            return Some((Stream::Stderr, format!("[denied] {tool}: {why}")));
        }
        "notification" => text("text")?,
        _ => return None,
    };
    Some((Stream::System, line))
}

/// The telling argument of a tool call: a command, a path, a pattern; else compact JSON.
pub(super) fn tool_args(input: &Value) -> String {
    for key in [
        "command",
        "file_path",
        "filePath",
        "path",
        "pattern",
        "url",
        "query",
        "description",
        "prompt",
    ] {
        if let Some(s) = input.get(key).and_then(Value::as_str) {
            return one_line(s, 160);
        }
    }
    if input.is_null() {
        return String::new();
    }
    one_line(&input.to_string(), 160)
}

fn normalise_usage(u: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for (from, to) in [
        ("input_tokens", "input_tokens"),
        ("output_tokens", "output_tokens"),
        ("cache_read_input_tokens", "cache_read_tokens"),
        ("cache_creation_input_tokens", "cache_write_tokens"),
    ] {
        if let Some(n) = u.get(from).and_then(Value::as_u64) {
            out.insert(to.into(), json!(n));
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recorded lines in the shape `claude -p --output-format stream-json` prints.
    const RUN: &[&str] = &[
        r#"{"type":"system","subtype":"init","session_id":"5f0c-11","cwd":"/repo","model":"claude-sonnet-4-5","tools":["Bash","Edit"],"mcp_servers":[],"permissionMode":"default","apiKeySource":"none","uuid":"u1"}"#,
        r#"{"type":"assistant","session_id":"5f0c-11","uuid":"u2","parent_tool_use_id":null,"message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"thinking","thinking":"hmm"},{"type":"text","text":"Let me look."},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls -la"}}],"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":5}}}"#,
        r#"{"type":"user","session_id":"5f0c-11","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"total 0","is_error":false}]}}"#,
        r#"{"type":"assistant","session_id":"5f0c-11","message":{"role":"assistant","content":[{"type":"tool_use","id":"toolu_2","name":"Edit","input":{"file_path":"src/x.rs","old_string":"a","new_string":"b"}}]}}"#,
        r#"{"type":"user","session_id":"5f0c-11","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2","content":"String not found","is_error":true}]}}"#,
        r#"{"type":"stream_event","session_id":"5f0c-11","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}}"#,
        r#"{"type":"rate_limit_event","session_id":"5f0c-11"}"#,
        r###"{"type":"result","subtype":"success","is_error":false,"duration_ms":12345,"duration_api_ms":9000,"num_turns":4,"result":"## What Was Done\nEdited x.\nOUTCOME: success","session_id":"5f0c-11","total_cost_usd":0.0123,"usage":{"input_tokens":100,"output_tokens":50,"cache_creation_input_tokens":7,"cache_read_input_tokens":30},"permission_denials":[],"uuid":"u9"}"###,
    ];

    #[test]
    fn shows_text_tools_and_result() {
        let mut c = ClaudeStream::default();
        let shown: Vec<(Stream, String)> = RUN.iter().flat_map(|l| c.feed(l)).collect();
        let text: Vec<&str> = shown.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(
            text,
            [
                "claude session 5f0c-11 · model claude-sonnet-4-5",
                "Let me look.",
                "[tool] Bash ls -la",
                "[tool] Edit src/x.rs",
                "[tool error] String not found",
                "result: success · 4 turns · 12.3 s · cost $0.0123",
            ]
        );
        assert_eq!(c.session.as_deref(), Some("5f0c-11"));
        let r = c.result.clone().unwrap();
        assert!(!r.failed());
        assert_eq!(r.cost, Some(0.0123));
        assert_eq!(
            r.usage,
            Some(
                json!({"input_tokens":100,"output_tokens":50,"cache_read_tokens":30,"cache_write_tokens":7})
            )
        );
        assert_eq!(c.answer(), "## What Was Done\nEdited x.\nOUTCOME: success");
    }

    #[test]
    fn is_error_fails_even_with_subtype_success() {
        let mut c = ClaudeStream::default();
        let shown = c.feed(r#"{"type":"result","subtype":"success","is_error":true,"result":"API Error: 401 invalid x-api-key","session_id":"s"}"#);
        assert!(c.result.as_ref().unwrap().failed());
        assert!(
            shown
                .iter()
                .any(|(s, t)| *s == Stream::Stderr && t.contains("401 invalid x-api-key"))
        );
        let mut c = ClaudeStream::default();
        c.feed(r#"{"type":"result","subtype":"error_max_turns","is_error":false,"errors":["Reached max turns (3)"]}"#);
        let r = c.result.unwrap();
        assert!(r.failed());
        assert_eq!(r.reason(), "error_max_turns: Reached max turns (3)");
    }

    #[test]
    fn an_api_error_reads_as_its_http_status() {
        let mut c = ClaudeStream::default();
        let shown = c.feed(r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":401,"result":"Invalid API key","session_id":"s"}"#);
        assert_eq!(
            c.result.as_ref().unwrap().reason(),
            "HTTP 401: Invalid API key"
        );
        let mut c = ClaudeStream::default();
        c.feed(r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":500,"result":"API Error: 500 Internal server error. Try again."}"#);
        assert_eq!(
            c.result.unwrap().reason(),
            "HTTP 500: Internal server error. Try again."
        );
        assert!(
            shown.iter().any(|(s, t)| *s == Stream::Stderr
                && t == "claude reported an error: HTTP 401: Invalid API key"),
            "{shown:?}"
        );
    }

    #[test]
    fn retries_and_compaction_are_shown_and_bookkeeping_is_not() {
        let mut c = ClaudeStream::default();
        let shown: Vec<(Stream, String)> = [
            r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":612.3,"error_status":500,"error":"server_error","session_id":"s"}"#,
            r#"{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,"retry_delay_ms":1200,"error_status":null,"error":"connection_error","session_id":"s"}"#,
            r#"{"type":"system","subtype":"status","status":"compacting","session_id":"s"}"#,
            r#"{"type":"system","subtype":"compact_boundary","compact_metadata":{"trigger":"auto","pre_tokens":160123},"session_id":"s"}"#,
            r#"{"type":"system","subtype":"session_state_changed","state":"idle","session_id":"s"}"#,
            r#"{"type":"system","subtype":"status","status":null,"session_id":"s"}"#,
        ]
        .iter()
        .flat_map(|l| c.feed(l))
        .collect();
        assert_eq!(
            shown,
            [
                (
                    Stream::Stderr,
                    "retrying after HTTP 500 (attempt 1 of 10, in 0.6 s)".into()
                ),
                (
                    Stream::Stderr,
                    "retrying after connection error (attempt 2 of 10, in 1.2 s)".into()
                ),
                (Stream::System, "compacting the conversation…".into()),
                (
                    Stream::System,
                    "conversation compacted (auto) from 160123 tokens".into()
                ),
            ]
        );
    }

    #[test]
    fn refused_tool_calls_become_one_warning_event() {
        let mut c = ClaudeStream::default();
        c.feed(r#"{"type":"result","subtype":"success","is_error":false,"result":"done","permission_denials":[{"tool_name":"Bash","tool_use_id":"t1","tool_input":{"command":"git commit -m x"}},{"tool_name":"Write","tool_use_id":"t2","tool_input":{"file_path":"/w/a.txt","content":"hi"}}]}"#);
        let r = c.result.unwrap();
        let ev = r.denial_event().expect("an event");
        assert_eq!(
            (ev.category, ev.kind, ev.level),
            ("agent", "permission_denied", "warn")
        );
        assert!(
            ev.summary.starts_with(
                "claude was not allowed 2 tool calls: Bash git commit -m x; Write /w/a.txt"
            ),
            "{}",
            ev.summary
        );
        assert_eq!(
            ev.data["denials"][1],
            json!({"tool": "Write", "target": "/w/a.txt"})
        );
        let mut c = ClaudeStream::default();
        c.feed(RUN[7]);
        assert_eq!(c.result.unwrap().denial_event(), None);
    }

    #[test]
    fn plain_lines_pass_through_and_answer_falls_back() {
        let mut c = ClaudeStream::default();
        assert_eq!(
            c.feed("not json"),
            [(Stream::Stdout, "not json".to_string())]
        );
        c.feed(RUN[1]);
        assert_eq!(c.answer(), "Let me look.");
    }
}
