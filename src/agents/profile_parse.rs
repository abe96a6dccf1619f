//! Reading a profile file: the known keys, each checked with a located diagnostic.

use super::*;
use crate::agents::template::unknown_placeholders;

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
    "prompt_via",
    "input",
    "prompt_template",
    "outcomes",
    "timeout",
    "env",
    "price_input",
    "price_output",
    "executor",
    "recording",
    "pace",
    "serve",
    "session",
    "resume_argv",
    "continue_template",
    "attach_argv",
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

/// Line and column (1-based) where the JSON value begins: its first non-blank character.
fn value_start(text: &str) -> (usize, usize) {
    let before = &text[..text.len() - text.trim_start().len()];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
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
        let (line, column) = value_start(text);
        d.out.push(Diagnostic {
            file: file.to_string(),
            line: Some(line),
            column: Some(column),
            severity: Severity::Error,
            message: "an agent profile is one JSON object ({\"id\": …, \"backend\": …})".into(),
        });
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
        Some("gemini-stream-json") => Format::GeminiStreamJson,
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
                format!("agent `{id}`: unknown format `{other}` (expected text, claude-stream-json, codex-json, gemini-stream-json{replay})"),
            );
            Format::Text
        }
    };
    let prompt_via = prompt_via(d, obj, &id, backend, &argv);
    let input = input(d, obj, &id, backend, prompt_via);
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
                    Some(_) if crate::pipeline::reserved_var(k) => d.push(
                        Severity::Warning,
                        Some(k),
                        format!("agent `{id}`: env `{k}` is ignored: baton sets it for the step itself — rename it or remove it"),
                    ),
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
            format!("agent `{id}`: unknown placeholder `{{{{{name}}}}}` stays as written (known: title, prompt, handoff, note, branch, status, context_dir, failure, messages)"),
        );
    }
    let (session, resume_argv, continue_template) = session(d, obj, &id, backend);
    let attach_argv = attach_argv(d, obj, &id, backend);
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
    let price = crate::agents::price::parse(obj).unwrap_or_else(|e| {
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
    let serve = match obj.get("serve") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => false,
        Some(Value::Bool(true)) if backend == Some(Backend::Opencode) => true,
        Some(Value::Bool(true)) => {
            d.error(Some("serve"), format!("agent `{id}`: `serve` starts an OpenCode server and is for the opencode backend only — remove it"));
            false
        }
        Some(_) => {
            d.error(
                Some("serve"),
                format!("agent `{id}`: `serve` must be true or false"),
            );
            false
        }
    };
    if serve && url.is_some() {
        d.push(Severity::Warning, Some("url"), format!("agent `{id}`: `url` is not used with `\"serve\": true` (baton starts the server on a free port) — remove it"));
    }
    let profile = Profile {
        name: string(d, obj, "name").unwrap_or_else(|| id.clone()),
        id,
        file: d.file.to_string(),
        backend: backend?,
        url,
        serve,
        model,
        api_key_env: string(d, obj, "api_key_env"),
        agent: string(d, obj, "agent"),
        system: string(d, obj, "system"),
        argv,
        format,
        prompt_via,
        input,
        prompt_template,
        session,
        resume_argv,
        continue_template,
        attach_argv,
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

/// `session`, `resume_argv` and `continue_template`: how a later step continues the
/// agent's session, checked against what the backend can do.
fn session(
    d: &mut Diags,
    obj: &Map<String, Value>,
    id: &str,
    backend: Option<Backend>,
) -> (SessionMode, Vec<String>, String) {
    let mode = match string(d, obj, "session").as_deref() {
        None | Some("fresh") => SessionMode::Fresh,
        Some("continue") => SessionMode::Continue,
        Some(other) => {
            d.error(
                Some("session"),
                format!("agent `{id}`: unknown session `{other}` (expected continue or fresh)"),
            );
            SessionMode::Fresh
        }
    };
    let resume_argv = string_list(d, obj, "resume_argv").unwrap_or_default();
    if !resume_argv.is_empty() {
        if backend.is_some_and(|b| b != Backend::Command) {
            d.error(
                Some("resume_argv"),
                format!("agent `{id}`: only a `command` agent takes `resume_argv`; remove it"),
            );
        } else if !resume_argv
            .iter()
            .any(|a| crate::agents::template::uses_placeholder(a, "session"))
        {
            d.error(
                Some("resume_argv"),
                format!("agent `{id}`: `resume_argv` must name the session to continue with `{{{{session}}}}`, e.g. [\"claude\", \"-p\", \"--resume\", \"{{{{session}}}}\"]"),
            );
        }
    }
    for name in resume_argv
        .iter()
        .flat_map(|a| unknown_placeholders(a, &["message"]))
    {
        d.push(
            Severity::Warning,
            Some("resume_argv"),
            format!(
                "agent `{id}`: unknown placeholder `{{{{{name}}}}}` in resume_argv stays as written"
            ),
        );
    }
    if mode == SessionMode::Continue {
        let why = match backend {
            Some(Backend::Command) if resume_argv.is_empty() => {
                Some("a `command` agent needs `resume_argv` to continue a session")
            }
            Some(Backend::Openai) => Some("the openai backend keeps no session"),
            Some(Backend::Replay) => Some("a replay agent keeps no session"),
            _ => None,
        };
        if let Some(why) = why {
            d.push(
                Severity::Warning,
                Some("session"),
                format!("agent `{id}`: `\"session\": \"continue\"` has no effect: {why}; every step starts fresh"),
            );
        }
    }
    let template =
        string(d, obj, "continue_template").unwrap_or_else(|| DEFAULT_CONTINUE_TEMPLATE.into());
    for name in unknown_placeholders(&template, &[]) {
        d.push(
            Severity::Warning,
            Some("continue_template"),
            format!("agent `{id}`: unknown placeholder `{{{{{name}}}}}` in continue_template stays as written"),
        );
    }
    (mode, resume_argv, template)
}

/// `attach_argv`: the interactive command line that opens a task's session (`baton attach`);
/// only backends that keep a session have one, and it names the session.
fn attach_argv(
    d: &mut Diags,
    obj: &Map<String, Value>,
    id: &str,
    backend: Option<Backend>,
) -> Vec<String> {
    let argv = string_list(d, obj, "attach_argv").unwrap_or_default();
    if argv.is_empty() {
        return argv;
    }
    if matches!(backend, Some(Backend::Openai | Backend::Replay)) {
        d.error(
            Some("attach_argv"),
            format!("agent `{id}`: this backend keeps no session to open, so `attach_argv` cannot be used — remove it (`baton attach` opens a shell instead)"),
        );
    } else if !argv
        .iter()
        .any(|a| crate::agents::template::uses_placeholder(a, "session"))
    {
        d.error(
            Some("attach_argv"),
            format!("agent `{id}`: `attach_argv` must name the session to open with `{{{{session}}}}`, e.g. [\"claude\", \"--resume\", \"{{{{session}}}}\"]"),
        );
    }
    for name in argv.iter().flat_map(|a| unknown_placeholders(a, &[])) {
        d.push(
            Severity::Warning,
            Some("attach_argv"),
            format!(
                "agent `{id}`: unknown placeholder `{{{{{name}}}}}` in attach_argv stays as written"
            ),
        );
    }
    argv
}

/// `prompt_via`: only for `command` agents, and with `stdin` the argv must not also carry
/// the prompt.
fn prompt_via(
    d: &mut Diags,
    obj: &Map<String, Value>,
    id: &str,
    backend: Option<Backend>,
    argv: &[String],
) -> PromptVia {
    let via = match string(d, obj, "prompt_via").as_deref() {
        None => return PromptVia::Argv,
        Some("argv") => PromptVia::Argv,
        Some("stdin") => PromptVia::Stdin,
        Some(other) => {
            d.error(
                Some("prompt_via"),
                format!("agent `{id}`: unknown prompt_via `{other}` (expected argv or stdin)"),
            );
            return PromptVia::Argv;
        }
    };
    if backend.is_some_and(|b| b != Backend::Command) {
        d.error(
            Some("prompt_via"),
            format!("agent `{id}`: only a `command` agent takes `prompt_via`; the others send the prompt over HTTP — remove it"),
        );
    } else if via == PromptVia::Stdin
        && argv
            .iter()
            .any(|a| unknown_placeholders(a, &[]).iter().any(|n| n == "message"))
    {
        d.error(
            Some("argv"),
            format!("agent `{id}`: `{{{{message}}}}` in argv sends the prompt a second time when `prompt_via` is \"stdin\" — remove it from argv, or set `prompt_via` to \"argv\""),
        );
    }
    via
}

/// `input`: `stream-json` only for a `command` agent that reads its prompt on stdin.
fn input(
    d: &mut Diags,
    obj: &Map<String, Value>,
    id: &str,
    backend: Option<Backend>,
    via: PromptVia,
) -> InputMode {
    let mode = match string(d, obj, "input").as_deref() {
        None | Some("text") => return InputMode::Text,
        Some("stream-json") => InputMode::StreamJson,
        Some(other) => {
            d.error(
                Some("input"),
                format!("agent `{id}`: unknown input `{other}` (expected text or stream-json)"),
            );
            return InputMode::Text;
        }
    };
    if backend.is_some_and(|b| b != Backend::Command) {
        d.error(
            Some("input"),
            format!("agent `{id}`: only a `command` agent takes `input`; an OpenCode session takes messages over HTTP — remove it"),
        );
        return InputMode::Text;
    }
    if via != PromptVia::Stdin {
        d.error(
            Some("input"),
            format!("agent `{id}`: `\"input\": \"stream-json\"` sends the prompt as a JSON line on stdin — set `\"prompt_via\": \"stdin\"` and add `--input-format stream-json` to argv"),
        );
    }
    mode
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
