//! `codex exec --json`: JSONL events turned into log lines. The answer is the last
//! `agent_message`; the session is the `thread_id`. Only a failed turn fails the run: codex
//! reports a dropped stream as a top-level `error` ("Reconnecting... 1/5 (…)"), reconnects and
//! may still complete the turn. Pure.

use super::claude::tool_args;
use super::log::one_line;
use crate::store::Stream;
use serde_json::{Value, json};

/// The state of one Codex run, fed one stdout line at a time.
#[derive(Debug, Default)]
pub struct CodexStream {
    /// `thread.started`'s `thread_id`.
    pub session: Option<String>,
    /// The last agent message.
    pub answer: Option<String>,
    /// Why the run failed: `turn.failed`, or a top-level `error` that no completed turn
    /// followed.
    pub error: Option<String>,
    /// The error came from `turn.failed`, so a later `turn.completed` does not clear it.
    turn_failed: bool,
    /// Summed over turns, in baton's shape.
    pub usage: Option<Value>,
}

impl CodexStream {
    /// Takes one line of stdout; returns what to show. Tolerates the early `item_type` /
    /// `assistant_message` names.
    pub fn feed(&mut self, line: &str) -> Vec<(Stream, String)> {
        let v = match super::log::json_line(line) {
            Ok(v) => v,
            Err(shown) => return shown,
        };
        let mut out = Vec::new();
        let kind = v.get("type").and_then(Value::as_str).unwrap_or_default();
        match kind {
            "thread.started" => {
                self.session = v["thread_id"].as_str().map(String::from);
                out.push((
                    Stream::System,
                    format!("codex thread {}", v["thread_id"].as_str().unwrap_or("?")),
                ));
            }
            "turn.completed" => {
                // An error before a completed turn was recovered from.
                if !self.turn_failed {
                    self.error = None;
                }
                if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
                    self.add_usage(u);
                    out.push((Stream::System, format!("usage: {u}")));
                }
            }
            "turn.failed" => {
                let msg = v
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("the turn failed");
                // Codex prints the same message as an `error` just before; say it once.
                if self.error.as_deref() != Some(msg) {
                    out.push((Stream::Stderr, format!("codex: turn failed: {msg}")));
                }
                self.error = Some(msg.to_string());
                self.turn_failed = true;
            }
            "error" => {
                let msg = v["message"].as_str().unwrap_or("unknown error");
                if msg.starts_with("Reconnecting") {
                    out.push((Stream::System, format!("codex: {msg}")));
                } else {
                    if !self.turn_failed {
                        self.error = Some(msg.to_string());
                    }
                    out.push((Stream::Stderr, format!("codex: {msg}")));
                }
            }
            "item.started" | "item.updated" | "item.completed" => {
                out.extend(self.item(kind, &v["item"]));
            }
            _ => {}
        }
        out
    }

    fn item(&mut self, kind: &str, item: &Value) -> Vec<(Stream, String)> {
        let started = kind == "item.started";
        let completed = kind == "item.completed";
        let ty = item
            .get("type")
            .or_else(|| item.get("item_type"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        let mut out = Vec::new();
        match ty {
            "agent_message" | "assistant_message" if completed => {
                let text = item["text"].as_str().unwrap_or_default();
                self.answer = Some(text.to_string());
                out.push((Stream::Stdout, text.to_string()));
            }
            "command_execution" if started => {
                out.push((
                    Stream::Stdout,
                    format!(
                        "[tool] shell {}",
                        one_line(item["command"].as_str().unwrap_or("?"), 160)
                    ),
                ));
            }
            "command_execution" if completed => {
                if let Some(code) = item["exit_code"].as_i64().filter(|c| *c != 0) {
                    out.push((Stream::Stdout, format!("[tool] shell exited {code}")));
                }
            }
            "file_change" if completed => {
                let paths: Vec<String> = item["changes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| {
                        format!(
                            "{} {}",
                            c["kind"].as_str().unwrap_or("edit"),
                            c["path"].as_str().unwrap_or("?")
                        )
                    })
                    .collect();
                out.push((Stream::Stdout, format!("[tool] edit {}", paths.join(", "))));
            }
            "mcp_tool_call" if started => out.push((
                Stream::Stdout,
                format!(
                    "[tool] {}.{} {}",
                    item["server"].as_str().unwrap_or("mcp"),
                    item["tool"].as_str().unwrap_or("?"),
                    tool_args(&item["arguments"])
                ),
            )),
            "web_search" if started => out.push((
                Stream::Stdout,
                format!("[tool] web_search {}", item["query"].as_str().unwrap_or("")),
            )),
            "error" if completed => out.push((
                Stream::Stderr,
                format!("codex: {}", item["message"].as_str().unwrap_or("error")),
            )),
            _ => {}
        }
        out
    }

    fn add_usage(&mut self, u: &Value) {
        let mut acc = self.usage.take().unwrap_or_else(|| json!({}));
        for (from, to) in [
            ("input_tokens", "input_tokens"),
            ("output_tokens", "output_tokens"),
            ("cached_input_tokens", "cache_read_tokens"),
            ("reasoning_output_tokens", "reasoning_tokens"),
        ] {
            if let Some(n) = u.get(from).and_then(Value::as_u64) {
                let prev = acc[to].as_u64().unwrap_or(0);
                acc[to] = json!(prev + n);
            }
        }
        self.usage = Some(acc);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The documented `codex exec --json` example, plus a file change and a second turn.
    const RUN: &[&str] = &[
        r#"{"type":"thread.started","thread_id":"0199a213-81c0-7800-8aa1-bbab2a035a53"}"#,
        r#"{"type":"turn.started"}"#,
        r#"{"type":"item.completed","item":{"id":"item_0","type":"reasoning","text":"**Searching for README files**"}}"#,
        r#"{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"bash -lc ls","aggregated_output":"","status":"in_progress"}}"#,
        r#"{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"bash -lc ls","aggregated_output":"README.md\n","exit_code":0,"status":"completed"}}"#,
        r#"{"type":"item.completed","item":{"id":"item_2","type":"file_change","changes":[{"path":"src/x.rs","kind":"update"}],"status":"completed"}}"#,
        r#"{"type":"item.completed","item":{"id":"item_3","type":"agent_message","text":"Yep — there’s a README.md"}}"#,
        r#"{"type":"turn.completed","usage":{"input_tokens":24763,"cached_input_tokens":24448,"output_tokens":122}}"#,
    ];

    #[test]
    fn shows_commands_edits_and_the_answer() {
        let mut c = CodexStream::default();
        let shown: Vec<String> = RUN.iter().flat_map(|l| c.feed(l)).map(|(_, t)| t).collect();
        assert_eq!(
            shown,
            [
                "codex thread 0199a213-81c0-7800-8aa1-bbab2a035a53",
                "[tool] shell bash -lc ls",
                "[tool] edit update src/x.rs",
                "Yep — there’s a README.md",
                r#"usage: {"cached_input_tokens":24448,"input_tokens":24763,"output_tokens":122}"#,
            ]
        );
        assert_eq!(c.answer.as_deref(), Some("Yep — there’s a README.md"));
        assert_eq!(
            c.session.as_deref(),
            Some("0199a213-81c0-7800-8aa1-bbab2a035a53")
        );
        assert_eq!(
            c.usage,
            Some(json!({"input_tokens":24763,"output_tokens":122,"cache_read_tokens":24448}))
        );
        assert!(c.error.is_none());
    }

    #[test]
    fn failures_and_old_field_names() {
        let mut c = CodexStream::default();
        c.feed(r#"{"type":"item.completed","item":{"id":"i","item_type":"assistant_message","text":"old"}}"#);
        assert_eq!(c.answer.as_deref(), Some("old"));
        let shown = c.feed(r#"{"type":"turn.failed","error":{"message":"stream disconnected"}}"#);
        assert_eq!(c.error.as_deref(), Some("stream disconnected"));
        assert_eq!(shown[0].0, Stream::Stderr);
    }

    /// Recorded from codex 0.169 against a server that cut the first stream short.
    const RECOVERED: &[&str] = &[
        r#"{"type":"thread.started","thread_id":"01a21745-969d-7063-a0ca-ba9b94430f8d"}"#,
        r#"{"type":"turn.started"}"#,
        r#"{"type":"error","message":"Reconnecting... 1/2 (stream disconnected before completion: stream closed before response.completed)"}"#,
        r#"{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"/bin/bash -lc \"printf 'hello\\\\n' > hello.txt\"","aggregated_output":"","exit_code":null,"status":"in_progress"}}"#,
        r#"{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"/bin/bash -lc \"printf 'hello\\\\n' > hello.txt\"","aggregated_output":"","exit_code":0,"status":"completed"}}"#,
        r###"{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"## What Was Done\nWrote hello.txt.\n\nOUTCOME: success"}}"###,
        r#"{"type":"turn.completed","usage":{"input_tokens":200,"cached_input_tokens":40,"cache_write_input_tokens":0,"output_tokens":60,"reasoning_output_tokens":10}}"#,
    ];

    #[test]
    fn a_reconnect_that_recovers_is_a_log_line_not_a_failure() {
        let mut c = CodexStream::default();
        let shown: Vec<(Stream, String)> = RECOVERED.iter().flat_map(|l| c.feed(l)).collect();
        assert!(c.error.is_none(), "{:?}", c.error);
        assert_eq!(
            shown[1],
            (
                Stream::System,
                "codex: Reconnecting... 1/2 (stream disconnected before completion: stream closed before response.completed)".to_string()
            )
        );
        assert!(c.answer.as_deref().unwrap().ends_with("OUTCOME: success"));
        assert_eq!(
            c.usage,
            Some(
                json!({"input_tokens":200,"output_tokens":60,"cache_read_tokens":40,"reasoning_tokens":10})
            )
        );
    }

    #[test]
    fn an_error_with_no_completed_turn_after_it_fails() {
        let mut c = CodexStream::default();
        c.feed(RECOVERED[0]);
        c.feed(RECOVERED[1]);
        c.feed(r#"{"type":"error","message":"stream disconnected before completion"}"#);
        assert_eq!(
            c.error.as_deref(),
            Some("stream disconnected before completion")
        );
        // Another error after a failed turn does not replace the turn's reason.
        let mut c = CodexStream::default();
        c.feed(r#"{"type":"turn.failed","error":{"message":"quota"}}"#);
        c.feed(r#"{"type":"error","message":"later"}"#);
        c.feed(r#"{"type":"turn.completed","usage":{}}"#);
        assert_eq!(c.error.as_deref(), Some("quota"));
    }

    /// Recorded from codex 0.169 against a server answering 401: reconnects, then the error,
    /// then the failed turn with the same message, shown once.
    #[test]
    fn a_refused_key_fails_with_one_line() {
        let lines = [
            r#"{"type":"turn.started"}"#,
            r#"{"type":"error","message":"Reconnecting... 1/2 (unexpected status 401 Unauthorized: Incorrect API key provided, url: http://127.0.0.1:18765/v1/responses)"}"#,
            r#"{"type":"error","message":"unexpected status 401 Unauthorized: Incorrect API key provided, url: http://127.0.0.1:18765/v1/responses"}"#,
            r#"{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized: Incorrect API key provided, url: http://127.0.0.1:18765/v1/responses"}}"#,
        ];
        let mut c = CodexStream::default();
        let errors: Vec<String> = lines
            .iter()
            .flat_map(|l| c.feed(l))
            .filter(|(s, _)| *s == Stream::Stderr)
            .map(|(_, t)| t)
            .collect();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(c.error.as_deref().unwrap().contains("401 Unauthorized"));
    }
}
