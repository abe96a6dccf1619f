//! `gemini -p … --output-format stream-json`: JSONL events (`init`, `message`, `tool_use`,
//! `tool_result`, `error`, `result`) turned into log lines. The answer is the assistant's
//! text; the session is `init`'s `session_id`; the final `result` says whether the run
//! succeeded and carries the token counts. Pure.

use super::claude::tool_args;
use super::log::{LineBuf, one_line};
use super::{AgentFinish, AgentRun};
use crate::store::Stream;
use serde_json::{Value, json};

/// The final `result` event.
#[derive(Debug, Clone, PartialEq)]
pub struct GeminiResult {
    /// `success` or `error`.
    pub status: String,
    /// `error.type: error.message` of a failed run.
    pub error: Option<String>,
    /// Usage in baton's shape.
    pub usage: Option<Value>,
}

/// The state of one Gemini CLI run, fed one stdout line at a time.
#[derive(Debug, Default)]
pub struct GeminiStream {
    /// From the `init` event.
    pub session: Option<String>,
    /// The assistant's text so far (streamed as deltas).
    pub answer: String,
    /// The `result` event, once seen.
    pub result: Option<GeminiResult>,
    /// An `error` event of severity `error` (the result then says `error`).
    pub error: Option<String>,
    lines: LineBuf,
}

impl GeminiStream {
    /// Takes one line of stdout; returns what to show. A line that is not JSON is shown as
    /// it is; unknown event types are skipped.
    pub fn feed(&mut self, line: &str) -> Vec<(Stream, String)> {
        let v = match super::log::json_line(line) {
            Ok(v) => v,
            Err(shown) => return shown,
        };
        let mut out = Vec::new();
        let kind = v.get("type").and_then(Value::as_str).unwrap_or_default();
        if kind != "message" {
            // Text streamed so far is shown before what happens next.
            out.extend(self.flush());
        }
        match kind {
            "init" => {
                self.session = v["session_id"].as_str().map(String::from);
                out.push((
                    Stream::System,
                    format!(
                        "gemini session {} · model {}",
                        v["session_id"].as_str().unwrap_or("?"),
                        v["model"].as_str().unwrap_or("?")
                    ),
                ));
            }
            "message" if v["role"] == "assistant" => {
                let text = v["content"].as_str().unwrap_or_default();
                self.answer.push_str(text);
                out.extend(
                    self.lines
                        .push(text)
                        .into_iter()
                        .map(|l| (Stream::Stdout, l)),
                );
                if v["delta"] != true {
                    // A whole message ends its paragraph.
                    self.answer.push('\n');
                    out.extend(self.flush());
                }
            }
            "tool_use" => out.push((
                Stream::Stdout,
                format!(
                    "[tool] {} {}",
                    v["tool_name"].as_str().unwrap_or("?"),
                    tool_args(&v["parameters"])
                )
                .trim_end()
                .to_string(),
            )),
            "tool_result" if v["status"] == "error" => out.push((
                Stream::Stderr,
                format!(
                    "[tool error] {}",
                    one_line(
                        v.pointer("/error/message")
                            .and_then(Value::as_str)
                            .or_else(|| v["output"].as_str())
                            .unwrap_or("the tool failed"),
                        200
                    )
                ),
            )),
            "error" => {
                let msg = v["message"].as_str().unwrap_or("unknown error");
                if v["severity"] == "warning" {
                    out.push((Stream::Stderr, format!("gemini: warning: {msg}")));
                } else {
                    self.error = Some(msg.to_string());
                    out.push((Stream::Stderr, format!("gemini: {msg}")));
                }
            }
            "result" => out.extend(self.result(&v)),
            _ => {}
        }
        out
    }

    fn result(&mut self, v: &Value) -> Vec<(Stream, String)> {
        let stats = &v["stats"];
        let error = v.get("error").filter(|e| e.is_object()).map(|e| {
            let msg = one_line(e["message"].as_str().unwrap_or("unknown error"), 300);
            match e["type"].as_str() {
                Some(t) => format!("{t}: {msg}"),
                None => msg,
            }
        });
        let r = GeminiResult {
            status: v["status"].as_str().unwrap_or("success").to_string(),
            error,
            usage: stats.is_object().then(|| usage(stats)),
        };
        let mut summary = format!("result: {}", r.status);
        if let Some(n) = stats["tool_calls"].as_u64() {
            summary.push_str(&format!(" · {n} tool calls"));
        }
        if let Some(ms) = stats["duration_ms"].as_u64() {
            summary.push_str(&format!(" · {:.1} s", ms as f64 / 1000.0));
        }
        let mut out = vec![(Stream::System, summary)];
        if let Some(u) = &r.usage {
            out.push((Stream::System, format!("usage: {u}")));
        }
        if r.failed() {
            out.push((
                Stream::Stderr,
                format!("gemini reported an error: {}", self.reason(&r)),
            ));
        }
        self.result = Some(r);
        out
    }

    /// Text still waiting for its newline.
    pub fn flush(&mut self) -> Vec<(Stream, String)> {
        self.lines
            .finish()
            .map(|l| (Stream::Stdout, l))
            .into_iter()
            .collect()
    }

    fn reason(&self, r: &GeminiResult) -> String {
        r.error
            .clone()
            .or_else(|| self.error.clone())
            .unwrap_or_else(|| r.status.clone())
    }

    /// How the run ended, from what was read and the exit code; `exited` words a failure
    /// that only the exit code shows.
    pub(super) fn finish(
        self,
        who: &str,
        exit: i32,
        exited: impl Fn(&str) -> String,
    ) -> AgentFinish {
        let run = AgentRun {
            text: self.answer.trim().to_string(),
            usage: self.result.as_ref().and_then(|r| r.usage.clone()),
            cost: None,
            session: self.session.clone(),
            events: Vec::new(),
        };
        let said = self.result.as_ref().map(|r| {
            r.failed()
                .then(|| format!("{who}: gemini reported an error: {}", self.reason(r)))
        });
        super::command::result_finish(run, said, exit, exited, "--output-format stream-json")
    }
}

impl GeminiResult {
    /// True unless the status says success.
    pub fn failed(&self) -> bool {
        self.status != "success" || self.error.is_some()
    }
}

/// `stats` in baton's shape: `input_tokens` counts the whole prompt, cached tokens included
/// (as OpenAI's and codex's do).
fn usage(stats: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for (from, to) in [
        ("input_tokens", "input_tokens"),
        ("output_tokens", "output_tokens"),
        ("cached", "cache_read_tokens"),
    ] {
        if let Some(n) = stats.get(from).and_then(Value::as_u64) {
            out.insert(to.into(), json!(n));
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recorded from gemini 0.61 against a loopback model: a file written, then the answer
    /// streamed in two deltas.
    const RUN: &[&str] = &[
        r#"{"type":"init","timestamp":"2026-11-26T09:54:30.684Z","session_id":"76c808a9-1615","model":"gemini-2.5-pro"}"#,
        r#"{"type":"message","timestamp":"2026-11-26T09:54:30.685Z","role":"user","content":"write hello.txt"}"#,
        r#"{"type":"tool_use","timestamp":"2026-11-26T09:54:31.090Z","tool_name":"write_file","tool_id":"write_file_1","parameters":{"file_path":"hello.txt","content":"hello\n"}}"#,
        r#"{"type":"tool_result","timestamp":"2026-11-26T09:54:31.131Z","tool_id":"write_file_1","status":"success"}"#,
        r#"{"type":"tool_use","timestamp":"2026-11-26T09:54:31.140Z","tool_name":"run_shell_command","tool_id":"sh_1","parameters":{"command":"false"}}"#,
        r#"{"type":"tool_result","timestamp":"2026-11-26T09:54:31.141Z","tool_id":"sh_1","status":"error","error":{"type":"TOOL_EXECUTION_ERROR","message":"Command exited 1"}}"#,
        r###"{"type":"message","timestamp":"2026-11-26T09:54:31.156Z","role":"assistant","content":"## What Was Done\nWrote hel","delta":true}"###,
        r#"{"type":"message","timestamp":"2026-11-26T09:54:31.157Z","role":"assistant","content":"lo.txt.\n\nOUTCOME: success","delta":true}"#,
        r#"{"type":"result","timestamp":"2026-11-26T09:54:31.162Z","status":"success","stats":{"total_tokens":240,"input_tokens":200,"output_tokens":40,"cached":20,"input":180,"duration_ms":479,"tool_calls":2,"models":{}}}"#,
    ];

    #[test]
    fn shows_tools_text_and_result() {
        let mut g = GeminiStream::default();
        let shown: Vec<(Stream, String)> = RUN.iter().flat_map(|l| g.feed(l)).collect();
        let text: Vec<&str> = shown.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(
            text,
            [
                "gemini session 76c808a9-1615 · model gemini-2.5-pro",
                "[tool] write_file hello.txt",
                "[tool] run_shell_command false",
                "[tool error] Command exited 1",
                "## What Was Done",
                "Wrote hello.txt.",
                "",
                "OUTCOME: success",
                "result: success · 2 tool calls · 0.5 s",
                r#"usage: {"cache_read_tokens":20,"input_tokens":200,"output_tokens":40}"#,
            ]
        );
        assert_eq!(shown[3].0, Stream::Stderr);
        assert_eq!(g.session.as_deref(), Some("76c808a9-1615"));
        match g.finish("a", 0, |s| s.to_string()) {
            AgentFinish::Done(run) => {
                assert_eq!(
                    run.text,
                    "## What Was Done\nWrote hello.txt.\n\nOUTCOME: success"
                );
                assert_eq!(
                    run.usage,
                    Some(json!({"input_tokens":200,"output_tokens":40,"cache_read_tokens":20}))
                );
                assert_eq!(run.session.as_deref(), Some("76c808a9-1615"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_api_error_result_fails_with_its_message() {
        let mut g = GeminiStream::default();
        g.feed(RUN[0]);
        let shown = g.feed(
            r#"{"type":"result","timestamp":"t","status":"error","error":{"type":"Error","message":"[API Error: API key not valid. Please pass a valid API key.]"},"stats":{"total_tokens":0,"input_tokens":0,"output_tokens":0,"cached":0,"input":0,"duration_ms":0,"tool_calls":0,"models":{}}}"#,
        );
        assert!(shown.iter().any(|(s, t)| *s == Stream::Stderr
            && t == "gemini reported an error: Error: [API Error: API key not valid. Please pass a valid API key.]"));
        match g.finish("agent `g`", 1, |s| s.to_string()) {
            AgentFinish::Failed { error, .. } => {
                assert!(
                    error.starts_with(
                        "agent `g`: gemini reported an error: Error: [API Error: API key not valid"
                    ),
                    "{error}"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn error_events_warnings_and_a_missing_result() {
        let mut g = GeminiStream::default();
        let shown = g.feed(
            r#"{"type":"error","timestamp":"t","severity":"warning","message":"Loop detected, stopping execution"}"#,
        );
        assert_eq!(
            shown,
            [(
                Stream::Stderr,
                "gemini: warning: Loop detected, stopping execution".to_string()
            )]
        );
        assert!(g.error.is_none());
        g.feed(r#"{"type":"error","timestamp":"t","severity":"error","message":"Invalid stream"}"#);
        g.feed(r#"{"type":"result","timestamp":"t","status":"error","stats":{}}"#);
        assert!(matches!(
            g.finish("a", 0, |s| s.to_string()),
            AgentFinish::Failed { ref error, .. } if error == "a: gemini reported an error: Invalid stream"
        ));
        let g = GeminiStream::default();
        assert!(matches!(
            g.finish("a", 0, |s| s.to_string()),
            AgentFinish::Error { ref error, retryable: false } if error.contains("--output-format stream-json")
        ));
    }

    #[test]
    fn a_whole_message_is_its_own_paragraph() {
        let mut g = GeminiStream::default();
        let shown = g.feed(r#"{"type":"message","role":"assistant","content":"All done"}"#);
        assert_eq!(shown, [(Stream::Stdout, "All done".to_string())]);
        assert_eq!(g.answer, "All done\n");
        assert_eq!(
            g.feed("not json"),
            [(Stream::Stdout, "not json".to_string())]
        );
    }
}
