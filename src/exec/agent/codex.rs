//! `codex exec --json`: JSONL events turned into log lines. The answer is the last
//! `agent_message`; the session is the `thread_id`. Pure.

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
    /// `turn.failed` or a top-level `error`.
    pub error: Option<String>,
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
                self.error = Some(msg.to_string());
                out.push((Stream::Stderr, format!("codex: turn failed: {msg}")));
            }
            "error" => {
                let msg = v["message"].as_str().unwrap_or("unknown error");
                self.error = Some(msg.to_string());
                out.push((Stream::Stderr, format!("codex: {msg}")));
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
}
