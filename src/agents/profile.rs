//! Agent profiles: one flat JSON object per file, the backend's own fields beside the common
//! ones, parsed with located diagnostics.

use super::template::unknown_placeholders;
use crate::pipeline::{Diagnostic, Severity, json_error_position, normalize_outcome};
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::time::Duration;

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
            Self::OpenaiSse => "openai-sse",
            Self::OpencodeEvents => "opencode-events",
        }
    }
}

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
    /// The prompt, with `{{title}}`, `{{prompt}}`, `{{handoff}}`, … placeholders.
    pub prompt_template: String,
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
    /// The base URL the backend talks to, with defaults applied and no trailing `/`.
    pub fn base_url(&self) -> String {
        let url = match (&self.url, self.backend) {
            (Some(u), _) => u.as_str(),
            (None, Backend::Opencode) => DEFAULT_OPENCODE_URL,
            (None, _) => "",
        };
        url.trim_end_matches('/').to_string()
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
            _ => self.base_url(),
        }
    }
}

const KNOWN: &[&str] = &[
    "id",
    "name",
    "description",
    "backend",
    "url",
    "model",
    "api_key_env",
    "agent",
    "system",
    "argv",
    "format",
    "prompt_template",
    "outcomes",
    "timeout",
    "env",
    "price_input",
    "price_output",
    "executor",
    "recording",
    "pace",
];

/// Collects diagnostics for one file.
struct Diags<'a> {
    file: &'a str,
    text: &'a str,
    out: Vec<Diagnostic>,
}

impl Diags<'_> {
    fn push(&mut self, severity: Severity, key: Option<&str>, message: String) {
        let pos = key.and_then(|k| locate_key(self.text, k));
        self.out.push(Diagnostic {
            file: self.file.to_string(),
            line: pos.map(|p| p.0),
            column: pos.map(|p| p.1),
            severity,
            message,
        });
    }
    fn error(&mut self, key: Option<&str>, message: String) {
        self.push(Severity::Error, key, message);
    }
    fn has_errors(&self) -> bool {
        self.out.iter().any(Diagnostic::is_error)
    }
}

/// Line and column (1-based) of the first `"key":` in a flat JSON object.
fn locate_key(text: &str, key: &str) -> Option<(usize, usize)> {
    let needle = format!("\"{key}\"");
    let mut from = 0;
    while let Some(i) = text[from..].find(&needle) {
        let at = from + i;
        let rest = text[at + needle.len()..].trim_start();
        if rest.starts_with(':') {
            let before = &text[..at];
            let line = before.matches('\n').count() + 1;
            let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            return Some((line, col));
        }
        from = at + needle.len();
    }
    None
}

/// Parses one profile file. Returns the profile only when there are no errors; the
/// diagnostics hold every error and warning found.
pub fn parse_profile(file: &str, text: &str) -> (Option<Profile>, Vec<Diagnostic>) {
    let text = crate::pipeline::strip_bom(text);
    let mut d = Diags {
        file,
        text,
        out: Vec::new(),
    };
    let root: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            let pos = json_error_position(text, &e);
            d.out.push(Diagnostic {
                file: file.to_string(),
                line: pos.map(|p| p.0),
                column: pos.map(|p| p.1),
                severity: Severity::Error,
                message: format!("{e} — fix the JSON of this agent profile"),
            });
            return (None, d.out);
        }
    };
    for (key, pos) in crate::pipeline::duplicate_keys(text) {
        d.out
            .push(crate::pipeline::load::duplicate_key(file, &key, pos));
    }
    let Some(obj) = root.as_object() else {
        d.error(
            None,
            "an agent profile is one JSON object ({\"id\": …, \"backend\": …})".into(),
        );
        return (None, d.out);
    };
    let profile = build(&mut d, obj);
    let ok = !d.has_errors();
    (profile.filter(|_| ok), d.out)
}

fn build(d: &mut Diags, obj: &Map<String, Value>) -> Option<Profile> {
    for key in obj.keys() {
        if !KNOWN.contains(&key.as_str()) && !key.starts_with(['_', '$']) {
            d.push(
                Severity::Warning,
                Some(key),
                format!(
                    "unknown field `{key}` is ignored (known: {})",
                    KNOWN.join(", ")
                ),
            );
        }
    }
    let id = string(d, obj, "id");
    let id = match id.as_deref().map(str::trim) {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => {
            d.error(
                Some("id"),
                "the profile needs a non-empty string `id` (the name pipelines use in {\"agent\": …})"
                    .into(),
            );
            String::new()
        }
    };
    if let Some(why) = crate::pipeline::id_problem(&id) {
        d.error(Some("id"), format!("agent {why}"));
    }
    let backend = match string(d, obj, "backend").as_deref() {
        Some("openai") => Some(Backend::Openai),
        Some("opencode") => Some(Backend::Opencode),
        Some("command") => Some(Backend::Command),
        Some("replay") => Some(Backend::Replay),
        Some(other) => {
            d.error(
                Some("backend"),
                format!(
                    "agent `{id}`: unknown backend `{other}` (expected openai, opencode, command or replay)"
                ),
            );
            None
        }
        None => {
            d.error(
                Some("backend"),
                format!("agent `{id}`: `backend` is missing (openai, opencode, command or replay)"),
            );
            None
        }
    };
    let url = string(d, obj, "url");
    if let Some(u) = &url
        && !(u.starts_with("http://") || u.starts_with("https://"))
    {
        d.error(
            Some("url"),
            format!("agent `{id}`: url `{u}` must start with http:// or https://"),
        );
    }
    let model = string(d, obj, "model");
    let argv = string_list(d, obj, "argv").unwrap_or_default();
    let format = match string(d, obj, "format").as_deref() {
        None | Some("text") => Format::Text,
        Some("claude-stream-json") => Format::ClaudeStreamJson,
        Some("codex-json") => Format::CodexJson,
        Some("openai-sse") if backend == Some(Backend::Replay) => Format::OpenaiSse,
        Some("opencode-events") if backend == Some(Backend::Replay) => Format::OpencodeEvents,
        Some(other) => {
            let replay = if backend == Some(Backend::Replay) {
                ", openai-sse or opencode-events"
            } else {
                " (openai-sse and opencode-events are for replay profiles)"
            };
            d.error(
                Some("format"),
                format!("agent `{id}`: unknown format `{other}` (expected text, claude-stream-json, codex-json{replay})"),
            );
            Format::Text
        }
    };
    let recordings = match obj.get("recording") {
        Some(Value::String(one)) => vec![one.clone()],
        _ => string_list(d, obj, "recording").unwrap_or_default(),
    };
    if backend == Some(Backend::Replay) && recordings.iter().all(|r| r.trim().is_empty()) {
        d.error(
            Some("backend"),
            format!("agent `{id}`: a replay profile needs `recording`: a file (or a list, one per attempt) relative to the profile's folder"),
        );
    }
    let pace = match obj.get("pace").and_then(Value::as_str) {
        None => None,
        Some(s) => match humantime::parse_duration(s.trim()) {
            Ok(t) => Some(t),
            Err(e) => {
                d.error(
                    Some("pace"),
                    format!("agent `{id}`: bad pace `{s}` ({e}); write it like \"40ms\""),
                );
                None
            }
        },
    };
    match backend {
        Some(Backend::Openai) => {
            if url.is_none() {
                d.error(
                    Some("backend"),
                    format!("agent `{id}`: an openai profile needs `url` (e.g. \"http://127.0.0.1:11434/v1\")"),
                );
            }
            if model.is_none() {
                d.error(
                    Some("backend"),
                    format!("agent `{id}`: an openai profile needs `model`"),
                );
            }
        }
        Some(Backend::Opencode) => {
            if let Some(m) = &model
                && !m.contains('/')
            {
                d.error(
                    Some("model"),
                    format!(
                        "agent `{id}`: an opencode model is written `provider/model`, not `{m}`"
                    ),
                );
            }
        }
        Some(Backend::Command) if argv.is_empty() || argv[0].trim().is_empty() => {
            d.error(
                Some("backend"),
                format!("agent `{id}`: a command profile needs `argv`, e.g. [\"claude\", \"-p\", \"{{{{message}}}}\"]"),
            );
        }
        Some(Backend::Command | Backend::Replay) => {}
        None => {}
    }
    let outcomes = match string_list(d, obj, "outcomes") {
        Some(list) if !list.is_empty() => {
            let names: Vec<String> = list.iter().map(|o| normalize_outcome(o)).collect();
            for (written, name) in list.iter().zip(&names) {
                if name.is_empty() {
                    d.error(
                        Some("outcomes"),
                        format!("agent `{id}`: outcome `{written}` names nothing; use letters, digits, `_` or `-`"),
                    );
                }
            }
            names
        }
        Some(_) => {
            d.error(
                Some("outcomes"),
                format!(
                    "agent `{id}`: `outcomes` is empty; leave it out for [\"success\", \"failure\"]"
                ),
            );
            Vec::new()
        }
        None => vec!["success".into(), "failure".into()],
    };
    let timeout = match obj.get("timeout") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => match humantime::parse_duration(s.trim()) {
            Ok(t) if !t.is_zero() => Some(t),
            Ok(_) => {
                d.error(
                    Some("timeout"),
                    format!("agent `{id}`: timeout `{s}` is zero; leave it out for the default"),
                );
                None
            }
            Err(e) => {
                d.error(
                    Some("timeout"),
                    format!("agent `{id}`: bad timeout `{s}` ({e}); write it like \"15m\""),
                );
                None
            }
        },
        Some(_) => {
            d.error(
                Some("timeout"),
                format!("agent `{id}`: timeout must be a string like \"15m\""),
            );
            None
        }
    };
    let env = match obj.get("env") {
        None | Some(Value::Null) => BTreeMap::new(),
        Some(Value::Object(m)) => {
            let mut env = BTreeMap::new();
            for (k, v) in m {
                match v.as_str() {
                    Some(s) => {
                        env.insert(k.clone(), s.to_string());
                    }
                    None => d.error(
                        Some("env"),
                        format!("agent `{id}`: env `{k}` must be a string"),
                    ),
                }
            }
            env
        }
        Some(_) => {
            d.error(
                Some("env"),
                format!("agent `{id}`: env must be an object of strings"),
            );
            BTreeMap::new()
        }
    };
    let prompt_template =
        string(d, obj, "prompt_template").unwrap_or_else(|| DEFAULT_TEMPLATE.into());
    for name in unknown_placeholders(&prompt_template, &[]) {
        d.push(
            Severity::Warning,
            Some("prompt_template"),
            format!("agent `{id}`: unknown placeholder `{{{{{name}}}}}` stays as written (known: title, prompt, handoff, note, branch, status, context_dir)"),
        );
    }
    for name in argv
        .iter()
        .flat_map(|a| unknown_placeholders(a, &["message"]))
    {
        d.push(
            Severity::Warning,
            Some("argv"),
            format!("agent `{id}`: unknown placeholder `{{{{{name}}}}}` in argv stays as written (`{{{{message}}}}` is the prompt)"),
        );
    }
    let price = super::price::parse(obj).unwrap_or_else(|e| {
        d.error(Some("price_input"), format!("agent `{id}`: {e}"));
        None
    });
    let executor = match obj.get("executor").filter(|v| !v.is_null()) {
        None => None,
        Some(_) if backend != Some(Backend::Command) => {
            d.error(Some("executor"), format!("agent `{id}`: only a `command` agent runs in an executor; the others talk to their server over HTTP — remove `executor`"));
            None
        }
        Some(v) => crate::pipeline::parse_executor(v)
            .map_err(|p| d.error(Some("executor"), format!("agent `{id}`: {}", p.message)))
            .ok(),
    };
    let profile = Profile {
        name: string(d, obj, "name").unwrap_or_else(|| id.clone()),
        id,
        file: d.file.to_string(),
        backend: backend?,
        url,
        model,
        api_key_env: string(d, obj, "api_key_env"),
        agent: string(d, obj, "agent"),
        system: string(d, obj, "system"),
        argv,
        format,
        prompt_template,
        outcomes,
        timeout,
        env,
        price,
        executor,
        recordings,
        pace,
    };
    Some(profile)
}

/// An optional string member; a value of another type is an error.
fn string(d: &mut Diags, obj: &Map<String, Value>, key: &str) -> Option<String> {
    match obj.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            d.error(Some(key), format!("`{key}` must be a string"));
            None
        }
    }
}

/// An optional array of strings; anything else is an error.
fn string_list(d: &mut Diags, obj: &Map<String, Value>, key: &str) -> Option<Vec<String>> {
    match obj.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => {
            let strings: Option<Vec<String>> =
                items.iter().map(|v| v.as_str().map(String::from)).collect();
            if strings.is_none() {
                d.error(Some(key), format!("`{key}` must be an array of strings"));
            }
            strings
        }
        Some(_) => {
            d.error(Some(key), format!("`{key}` must be an array of strings"));
            None
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
    fn an_outcome_that_names_nothing_is_an_error() {
        let (p, d) = parse(
            r#"{"id": "c", "backend": "command", "argv": ["x"], "outcomes": ["success", "**"]}"#,
        );
        assert!(p.is_none());
        assert!(d[0].message.contains("outcome `**` names nothing"), "{d:?}");
        assert!(d[0].line.is_some());
    }

    #[test]
    fn not_json_is_located() {
        let (p, d) = parse("{\"id\": \"x\",\n}");
        assert!(p.is_none());
        assert_eq!(d[0].line, Some(2));
    }
}
