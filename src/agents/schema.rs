//! The agent profile *file format* as a type, for the JSON Schema editors use
//! (`assets/agent.schema.json`). Profiles are parsed by hand in `profile.rs` for located
//! messages; `tests/schemas.rs` keeps the two in step.

#![allow(dead_code)] // The fields exist to be described, never read.

use crate::pipeline::schema::{Duration, ExecutorFile, Id, render};
use schemars::JsonSchema;
use std::collections::BTreeMap;

/// A baton agent profile: one flat object, the backend's own fields beside the common ones.
/// Keys starting with `_` or `$` are comments and are ignored. Documented in docs/agents.md.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(
    title = "baton agent profile",
    extend(
        "patternProperties" = {"^[_$]": {}},
        "allOf" = [
            {"if": {"properties": {"backend": {"const": "openai"}}},
             "then": {"required": ["url", "model"]}},
            {"if": {"properties": {"backend": {"const": "command"}}},
             "then": {"required": ["argv"]}},
            {"if": {"properties": {"backend": {"const": "replay"}}},
             "then": {"required": ["recording"]}}
        ]
    )
)]
pub struct AgentFile {
    /// The schema this file follows (for editors; baton ignores it).
    #[serde(rename = "$schema")]
    schema: Option<String>,
    /// The id pipelines name in `{"agent": "<id>"}`.
    id: Id,
    /// A display name (defaults to the id).
    name: Option<String>,
    /// One line saying what the agent is for.
    description: Option<String>,
    /// How baton reaches the agent.
    backend: BackendName,
    /// `openai`: the base URL up to and including `/v1`; `opencode`: the server
    /// (default http://127.0.0.1:4096).
    #[schemars(pattern(r"^https?://"))]
    url: Option<String>,
    /// `opencode`: baton starts `opencode serve` itself, one per workspace, and stops it with
    /// the engine; `url` is then not used.
    serve: Option<bool>,
    /// `openai`: the model id; `opencode`: `provider/model`.
    model: Option<String>,
    /// The environment variable holding the API key (its value is never stored or logged).
    api_key_env: Option<String>,
    /// `opencode`: the OpenCode agent (`build`, `plan`, …).
    agent: Option<String>,
    /// A system message (`openai`) or an extra system prompt (`opencode`).
    system: Option<String>,
    /// `command`: the command line as an argv array; `{{message}}` is the rendered prompt
    /// (one argument, never a shell word).
    #[schemars(length(min = 1))]
    argv: Option<Vec<String>>,
    /// `command` and `replay`: how the output is read.
    format: Option<FormatName>,
    /// `command`: how the agent gets the rendered prompt (default `argv`). With `stdin` the
    /// prompt is written to the process's standard input, which is then closed, and `argv`
    /// must not contain `{{message}}`.
    prompt_via: Option<PromptViaName>,
    /// `command`: `stream-json` when the agent reads user messages as JSON lines on stdin
    /// while it runs (Claude Code's `--input-format stream-json`), so `baton say` reaches it
    /// mid-run; needs `prompt_via` `stdin`. Default `text`.
    input: Option<InputName>,
    /// `replay`: the recorded output, relative to the profile's folder; a list plays one
    /// recording per attempt of the status (the last one repeats).
    recording: Option<Recording>,
    /// `replay`: the pause between two recorded lines, like "50ms" (default: none).
    pace: Option<Duration>,
    /// The prompt, with `{{title}}`, `{{prompt}}`, `{{handoff}}`, `{{note}}`, `{{failure}}`,
    /// `{{messages}}`, `{{branch}}`, `{{status}}` and `{{context_dir}}`.
    prompt_template: Option<String>,
    /// Whether a later step of this agent on the same task continues its session (default
    /// `fresh`).
    session: Option<SessionName>,
    /// `command`: the command line that continues a session, `{{session}}` being its id
    /// (`claude -p --resume {{session}}`, `codex exec resume {{session}} -`).
    #[schemars(length(min = 1))]
    resume_argv: Option<Vec<String>>,
    /// The prompt sent to a continued session: only what is new (default
    /// `{{failure}} {{handoff}} {{note}} {{messages}}`).
    continue_template: Option<String>,
    /// `command` and `opencode`: the interactive command line that opens the task's last
    /// session for a person (`baton attach`), `{{session}}` being its id
    /// (`claude --resume {{session}}`, `codex resume {{session}}`,
    /// `opencode --session {{session}}`). Without it `baton attach` opens a shell.
    #[schemars(length(min = 1))]
    attach_argv: Option<Vec<String>>,
    /// The outcomes the agent may name (default: success, failure).
    #[schemars(length(min = 1))]
    outcomes: Option<Vec<String>>,
    /// Per-attempt limit unless the step sets one, like "15m".
    timeout: Option<Duration>,
    /// Extra environment for a `command` agent.
    env: Option<BTreeMap<String, String>>,
    /// Dollars per million input tokens, to cost steps whose backend reports usage but no
    /// cost (give both prices or neither).
    #[schemars(range(min = 0.0))]
    price_input: Option<f64>,
    /// Dollars per million output tokens.
    #[schemars(range(min = 0.0))]
    price_output: Option<f64>,
    /// `command` only: where the agent runs (see docs/executors.md).
    executor: Option<ExecutorFile>,
}

/// The backends.
#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BackendName {
    /// Any OpenAI-compatible `/v1/chat/completions`, streamed (Ollama, llama.cpp, vLLM,
    /// LM Studio, OpenRouter, OpenAI).
    Openai,
    /// An OpenCode server (`opencode serve`).
    Opencode,
    /// A CLI agent started from `argv` (Claude Code, Codex, Gemini CLI, aider, …).
    Command,
    /// Plays a recorded output back: no network, no keys (the demo, pipeline tests).
    Replay,
}

/// Continue an agent's session or start a new one.
#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionName {
    /// Continue the last session of this agent on the task (rework, resume, retry), sending
    /// only what is new.
    Continue,
    /// A new conversation with the whole prompt every time.
    Fresh,
}

/// How a `command` agent gets its prompt.
#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PromptViaName {
    /// As the argv element written `{{message}}` (at most 128 KiB on Linux).
    Argv,
    /// On standard input, then closed (any length).
    Stdin,
}

/// Whether a `command` agent takes messages while it runs.
#[derive(JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum InputName {
    /// The prompt only.
    Text,
    /// User messages as JSON lines on stdin, closed after a turn ends with nothing to send.
    StreamJson,
}

/// One recording, or one per attempt.
#[derive(JsonSchema)]
#[serde(untagged)]
pub enum Recording {
    /// Every attempt plays this file.
    One(String),
    /// Attempt N plays the Nth file (the last one repeats).
    PerAttempt(#[schemars(length(min = 1))] Vec<String>),
}

/// Output formats.
#[derive(JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum FormatName {
    /// Plain text: every line is shown; the whole output is the answer.
    Text,
    /// `claude -p --output-format stream-json --verbose`.
    ClaudeStreamJson,
    /// `codex exec --json`.
    CodexJson,
    /// `gemini -p --output-format stream-json`.
    GeminiStreamJson,
    /// `replay` only: OpenAI-compatible stream chunks, one `data:` payload per line.
    OpenaiSse,
    /// `replay` only: OpenCode `/event` payloads, one JSON object per line.
    OpencodeEvents,
}

/// The JSON Schema of agent profile files, as pretty JSON ending in a newline: what
/// `assets/agent.schema.json` must hold.
pub fn agent_schema_json() -> String {
    render::<AgentFile>()
}
