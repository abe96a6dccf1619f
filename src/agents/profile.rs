//! Agent profiles: one flat JSON object per file, the backend's own fields beside the common
//! ones, parsed with located diagnostics.

use crate::pipeline::{Diagnostic, Severity, json_error_position, normalize_outcome};
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::time::Duration;

#[path = "profile_parse.rs"]
mod parse;
pub use parse::parse_profile;

/// Where an `opencode` profile without a `url` connects.
pub const DEFAULT_OPENCODE_URL: &str = "http://127.0.0.1:4096";

/// The template used when a profile gives none.
pub const DEFAULT_TEMPLATE: &str = "# {{title}}\n\n{{prompt}}\n\n{{handoff}}\n\n{{note}}";

/// How a profile reaches its agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// Any OpenAI-compatible `/chat/completions` with streaming.
    Openai,
    /// The OpenCode server HTTP API.
    Opencode,
    /// A CLI agent started from an argv array.
    Command,
    /// Recorded output played back (no network, no keys): the demo, pipeline tests.
    Replay,
}

impl Backend {
    /// The name used in profile files.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Openai => "openai",
            Self::Opencode => "opencode",
            Self::Command => "command",
            Self::Replay => "replay",
        }
    }
}

/// How a `command` agent's stdout is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// Plain text: every line is shown; the whole output is the answer.
    Text,
    /// `claude -p --output-format stream-json --verbose`.
    ClaudeStreamJson,
    /// `codex exec --json`.
    CodexJson,
    /// `gemini -p --output-format stream-json`.
    GeminiStreamJson,
    /// `replay` only: an OpenAI-compatible stream, one SSE `data` payload per line.
    OpenaiSse,
    /// `replay` only: OpenCode `/event` payloads, one JSON object per line.
    OpencodeEvents,
}

impl Format {
    /// The name used in profile files.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::ClaudeStreamJson => "claude-stream-json",
            Self::CodexJson => "codex-json",
            Self::GeminiStreamJson => "gemini-stream-json",
            Self::OpenaiSse => "openai-sse",
            Self::OpencodeEvents => "opencode-events",
        }
    }
}

/// Whether a `command` agent takes more input while it runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum InputMode {
    /// The prompt only (on argv or stdin); nothing can be said to it while it runs.
    #[default]
    Text,
    /// Claude Code's `--input-format stream-json`: the prompt and every message said while
    /// it runs are user messages, one JSON line each, on its standard input; baton closes
    /// it once a turn ends with nothing left to send.
    StreamJson,
}

/// How a `command` agent receives its rendered prompt.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptVia {
    /// As the argv element written `{{message}}`.
    #[default]
    Argv,
    /// On the process's standard input, closed after it (no length limit).
    Stdin,
}

impl PromptVia {
    /// The name used in profile files.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Argv => "argv",
            Self::Stdin => "stdin",
        }
    }
}

/// Whether a later step of the same agent on the same task continues the agent's session
/// (the CLI's own resume, the same OpenCode session) or starts a new conversation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionMode {
    /// Continue the last session, sending only what is new.
    Continue,
    /// A new conversation with the whole prompt every time.
    #[default]
    Fresh,
}

impl SessionMode {
    /// The name used in profile files.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Continue => "continue",
            Self::Fresh => "fresh",
        }
    }
}

/// The prompt sent to a continued session when a profile gives none: only what is new.
pub const DEFAULT_CONTINUE_TEMPLATE: &str =
    "{{failure}}\n\n{{handoff}}\n\n{{note}}\n\n{{messages}}";

/// One agent profile.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Profile {
    /// The id pipelines name in `{"agent": "<id>"}`.
    pub id: String,
    /// A display name (defaults to the id).
    pub name: String,
    /// The file it came from, as the user knows it.
    pub file: String,
    pub backend: Backend,
    /// Base URL (`openai`: up to and including `/v1`; `opencode`: the server).
    pub url: Option<String>,
    /// `opencode`: baton starts `opencode serve` itself (one per workspace) and `url` is
    /// not used.
    pub serve: bool,
    /// Model id (`openai`), or `provider/model` (`opencode`).
    pub model: Option<String>,
    /// The environment variable holding the API key (its value is never stored or logged).
    pub api_key_env: Option<String>,
    /// The OpenCode agent (`build`, `plan`, …).
    pub agent: Option<String>,
    /// A system message (`openai`) or extra system prompt (`opencode`).
    pub system: Option<String>,
    /// The command line of a `command` agent; `{{message}}` is the rendered prompt.
    pub argv: Vec<String>,
    /// How a `command` agent's output is read.
    pub format: Format,
    /// How a `command` agent receives the prompt.
    pub prompt_via: PromptVia,
    /// Whether it takes messages on stdin while it runs (`"input": "stream-json"`).
    pub input: InputMode,
    /// The prompt, with `{{title}}`, `{{prompt}}`, `{{handoff}}`, … placeholders.
    pub prompt_template: String,
    /// Whether a later step of this agent on the same task continues its session.
    pub session: SessionMode,
    /// The command line that continues a session (`command` only); `{{session}}` is the
    /// session id. Empty: a `command` agent cannot continue and starts fresh.
    pub resume_argv: Vec<String>,
    /// The prompt sent to a continued session (only what is new).
    pub continue_template: String,
    /// The interactive command line that opens the task's session for a person
    /// (`baton attach`, the board's `T`); `{{session}}` is the session id. Empty: the agent
    /// has no interactive resume, and a shell opens instead.
    pub attach_argv: Vec<String>,
    /// The outcomes the agent may name, normalised (`needs-info` is kept as `needs_info`).
    pub outcomes: Vec<String>,
    /// Per-attempt limit, unless the pipeline's step sets one.
    pub timeout: Option<Duration>,
    /// Extra environment for a `command` agent.
    pub env: BTreeMap<String, String>,
    /// Dollars per million input and output tokens, for backends that report no cost.
    pub price: Option<super::price::Price>,
    /// Where a `command` agent runs, unless the pipeline's step says (docs/executors.md).
    pub executor: Option<crate::pipeline::ExecutorSpec>,
    /// `replay`: the recordings, one per attempt (the last one repeats), relative to the
    /// profile's folder.
    pub recordings: Vec<String>,
    /// `replay`: the pause between two recorded lines.
    pub pace: Option<Duration>,
}

impl Profile {
    /// A step's environment with this profile's `env` under it: for a name in both, the
    /// step's `vars` (its own `env`, baton's `BATON_*` variables) come later and win. (A
    /// name baton sets for steps never reaches here: it is left out when the file is read.)
    pub fn env_under(&self, vars: Vec<(String, String)>) -> Vec<(String, String)> {
        self.env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .chain(vars)
            .collect()
    }

    /// The base URL the backend talks to, with defaults applied and no trailing `/`.
    pub fn base_url(&self) -> String {
        let url = match (&self.url, self.backend) {
            (Some(u), _) => u.as_str(),
            (None, Backend::Opencode) => DEFAULT_OPENCODE_URL,
            (None, _) => "",
        };
        url.trim_end_matches('/').to_string()
    }

    /// True when a running step of this profile reads messages said to it: a CLI that
    /// reads stream-json input, or an OpenCode session (a message joins its running turn).
    pub fn takes_input(&self) -> bool {
        match self.backend {
            Backend::Command => self.input == InputMode::StreamJson,
            Backend::Opencode => true,
            Backend::Openai | Backend::Replay => false,
        }
    }

    /// True when this profile's steps can continue an earlier session: it asks to, and its
    /// backend has a way (`resume_argv` for a command, OpenCode's sessions).
    pub fn continues(&self) -> bool {
        self.session == SessionMode::Continue
            && match self.backend {
                Backend::Command => !self.resume_argv.is_empty(),
                Backend::Opencode => true,
                Backend::Openai | Backend::Replay => false,
            }
    }

    /// True when `outcome` is one this profile declares, however it is spelled.
    pub fn declares(&self, outcome: &str) -> bool {
        self.outcomes.contains(&normalize_outcome(outcome))
    }

    /// One line saying where the agent runs: the URL or the command.
    pub fn target(&self) -> String {
        match self.backend {
            Backend::Command => self.argv.first().cloned().unwrap_or_default(),
            Backend::Replay => self.recordings.join(", "),
            Backend::Opencode if self.serve => "opencode serve (started by baton)".into(),
            _ => self.base_url(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> (Option<Profile>, Vec<Diagnostic>) {
        parse_profile(".baton/agents/x.json", text)
    }

    #[test]
    fn a_flat_openai_profile_parses() {
        let (p, d) = parse(
            r#"{"id": "planner", "backend": "openai", "url": "http://127.0.0.1:11434/v1/",
                "model": "qwen", "api_key_env": "KEY", "outcomes": ["success", "Needs Info"],
                "timeout": "15m"}"#,
        );
        assert!(d.is_empty(), "{d:?}");
        let p = p.unwrap();
        assert_eq!(p.backend, Backend::Openai);
        assert_eq!(p.base_url(), "http://127.0.0.1:11434/v1");
        assert_eq!(p.outcomes, ["success", "needs_info"]);
        for spelled in ["needs_info", "needs-info", "Needs Info", "`NEEDS-INFO`"] {
            assert!(p.declares(spelled), "{spelled}");
        }
        assert!(!p.declares("needs"));
        assert_eq!(p.timeout, Some(Duration::from_secs(900)));
        assert_eq!(p.name, "planner");
        assert_eq!(p.prompt_template, DEFAULT_TEMPLATE);
    }

    #[test]
    fn unknown_backend_is_an_error_naming_file_and_position() {
        let (p, d) = parse("{\"id\": \"x\",\n  \"backend\": \"gpt\"}");
        assert!(p.is_none());
        let text = d[0].to_string();
        assert!(
            text.starts_with(".baton/agents/x.json:2:3: error:"),
            "{text}"
        );
        assert!(text.contains("unknown backend `gpt`"), "{text}");
    }

    #[test]
    fn opencode_defaults_its_url_and_command_needs_argv() {
        let (p, _) = parse(r#"{"id": "oc", "backend": "opencode", "agent": "build"}"#);
        assert_eq!(p.unwrap().base_url(), DEFAULT_OPENCODE_URL);
        let (p, d) = parse(r#"{"id": "c", "backend": "command"}"#);
        assert!(p.is_none());
        assert!(d[0].message.contains("needs `argv`"), "{d:?}");
    }

    #[test]
    fn typos_warn_and_bad_formats_fail() {
        let (p, d) =
            parse(r#"{"id": "c", "backend": "command", "argv": ["x"], "promt_template": "hi"}"#);
        assert!(p.is_some());
        assert_eq!(d[0].severity, Severity::Warning);
        let (p, d) = parse(r#"{"id": "c", "backend": "command", "argv": ["x"], "format": "xml"}"#);
        assert!(p.is_none());
        assert!(d[0].message.contains("unknown format `xml`"));
    }

    #[test]
    fn an_env_that_sets_batons_variable_warns_and_is_left_out() {
        let (p, d) = parse(
            "{\"id\": \"c\", \"backend\": \"command\", \"argv\": [\"x\"],\n \"env\": {\"WHO\": \"me\", \"BATON_STATUS\": \"forged\"}}",
        );
        let text = d[0].to_string();
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(
            text.starts_with(
                ".baton/agents/x.json:2:23: warning: agent `c`: env `BATON_STATUS` is ignored"
            ),
            "{text}"
        );
        let env = p.unwrap().env;
        assert_eq!(env.keys().collect::<Vec<_>>(), ["WHO"]);
    }

    #[test]
    fn an_outcome_that_names_nothing_is_an_error() {
        let (p, d) = parse(
            r#"{"id": "c", "backend": "command", "argv": ["x"], "outcomes": ["success", "**"]}"#,
        );
        assert!(p.is_none());
        assert!(d[0].message.contains("outcome `**` names nothing"), "{d:?}");
        assert!(d[0].line.is_some());
    }

    #[test]
    fn the_prompt_goes_on_stdin_only_without_a_message_argument() {
        let (p, d) = parse(
            r#"{"id": "c", "backend": "command", "argv": ["claude", "-p"], "prompt_via": "stdin"}"#,
        );
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(p.unwrap().prompt_via, PromptVia::Stdin);
        let (p, _) = parse(r#"{"id": "c", "backend": "command", "argv": ["x", "{{message}}"]}"#);
        assert_eq!(p.unwrap().prompt_via, PromptVia::Argv);
        let (p, d) = parse(
            "{\"id\": \"c\", \"backend\": \"command\",\n \"argv\": [\"x\", \"--m={{message}}\"],\n \"prompt_via\": \"stdin\"}",
        );
        assert!(p.is_none());
        let text = d[0].to_string();
        assert!(
            text.starts_with(".baton/agents/x.json:2:2: error:"),
            "{text}"
        );
        assert!(
            text.contains("`{{message}}`") && text.contains("stdin"),
            "{text}"
        );
        let (p, d) =
            parse(r#"{"id": "c", "backend": "command", "argv": ["x"], "prompt_via": "pipe"}"#);
        assert!(p.is_none());
        assert!(d[0].message.contains("unknown prompt_via `pipe`"), "{d:?}");
        let (p, d) = parse(r#"{"id": "o", "backend": "opencode", "prompt_via": "stdin"}"#);
        assert!(p.is_none());
        assert!(d[0].message.contains("only a `command` agent"), "{d:?}");
    }

    #[test]
    fn a_profile_says_how_its_session_carries_on() {
        let (p, d) = parse(
            r#"{"id": "c", "backend": "command", "argv": ["claude", "-p"],
                "session": "continue", "resume_argv": ["claude", "-p", "--resume", "{{session}}"]}"#,
        );
        assert!(d.is_empty(), "{d:?}");
        let p = p.unwrap();
        assert_eq!(p.session, SessionMode::Continue);
        assert!(p.continues());
        assert_eq!(p.continue_template, DEFAULT_CONTINUE_TEMPLATE);
        // Left out: fresh, as before sessions could carry on.
        let (p, _) = parse(r#"{"id": "c", "backend": "command", "argv": ["x"]}"#);
        assert_eq!(p.unwrap().session, SessionMode::Fresh);
        // A command without resume_argv, or a backend without sessions, cannot continue: a
        // warning, and the steps start fresh.
        for text in [
            r#"{"id": "c", "backend": "command", "argv": ["x"], "session": "continue"}"#,
            r#"{"id": "c", "backend": "openai", "url": "http://127.0.0.1:1/v1", "model": "m", "session": "continue"}"#,
        ] {
            let (p, d) = parse(text);
            assert!(!p.unwrap().continues());
            assert_eq!(d[0].severity, Severity::Warning, "{d:?}");
            assert!(d[0].message.contains("has no effect"), "{d:?}");
        }
        let (p, _) = parse(r#"{"id": "o", "backend": "opencode", "session": "continue"}"#);
        assert!(p.unwrap().continues());
    }

    #[test]
    fn a_bad_session_or_resume_argv_is_an_error() {
        let (p, d) =
            parse(r#"{"id": "c", "backend": "command", "argv": ["x"], "session": "keep"}"#);
        assert!(p.is_none());
        assert!(d[0].message.contains("unknown session `keep`"), "{d:?}");
        let (p, d) = parse(
            r#"{"id": "c", "backend": "command", "argv": ["x"], "resume_argv": ["x", "--resume"]}"#,
        );
        assert!(p.is_none());
        assert!(d[0].message.contains("`{{session}}`"), "{d:?}");
        let (p, d) =
            parse(r#"{"id": "o", "backend": "opencode", "resume_argv": ["x", "{{session}}"]}"#);
        assert!(p.is_none());
        assert!(d[0].message.contains("only a `command` agent"), "{d:?}");
    }

    #[test]
    fn attach_argv_names_the_session_and_needs_a_backend_that_keeps_one() {
        let (p, d) = parse(
            r#"{"id": "c", "backend": "command", "argv": ["claude", "-p"],
                "attach_argv": ["claude", "--resume", "{{session}}"]}"#,
        );
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(
            p.unwrap().attach_argv,
            ["claude", "--resume", "{{session}}"]
        );
        let (p, d) = parse(
            r#"{"id": "o", "backend": "opencode", "attach_argv": ["opencode", "-s", "{{session}}"]}"#,
        );
        assert!(d.is_empty(), "{d:?}");
        assert!(!p.unwrap().attach_argv.is_empty());
        let (p, d) =
            parse(r#"{"id": "c", "backend": "command", "argv": ["x"], "attach_argv": ["x"]}"#);
        assert!(p.is_none());
        assert!(d[0].message.contains("`{{session}}`"), "{d:?}");
        let (p, d) = parse(
            r#"{"id": "r", "backend": "openai", "url": "http://127.0.0.1:1/v1", "model": "m",
                "attach_argv": ["x", "{{session}}"]}"#,
        );
        assert!(p.is_none());
        assert!(d[0].message.contains("keeps no session"), "{d:?}");
    }

    #[test]
    fn not_json_is_located() {
        let (p, d) = parse("{\"id\": \"x\",\n}");
        assert!(p.is_none());
        assert_eq!(d[0].line, Some(2));
    }
}
