//! `claude -p --output-format stream-json --verbose`: NDJSON events turned into log lines
//! (assistant text, `[tool] Name args`, the final result and cost). Pure.

use super::log::one_line;
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
}

impl ClaudeResult {
    /// True when the run failed: `is_error`, or an `error_*` subtype.
    pub fn failed(&self) -> bool {
        self.is_error || self.subtype.starts_with("error")
    }

    /// A one-line reason for a failed run.
    pub fn reason(&self) -> String {
        let mut parts = vec![self.subtype.clone()];
        if !self.text.trim().is_empty() {
            parts.push(one_line(&self.text, 300));
        }
        parts.extend(self.errors.iter().map(|e| one_line(e, 300)));
        parts.join(": ")
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
            Some("system") if v["subtype"] == "init" => {
                out.push((
                    Stream::System,
                    format!(
                        "claude session {} · model {}",
                        v["session_id"].as_str().unwrap_or("?"),
                        v["model"].as_str().unwrap_or("?")
                    ),
                ));
            }
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
