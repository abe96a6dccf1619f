//! The `replay` backend: plays a recorded agent output back through the same parser the
//! real backend uses (Claude's stream-json, Codex's JSON, OpenAI's SSE chunks, OpenCode's
//! events, or text). No network, no keys: the demo's agents, and a way to test a pipeline's
//! routing without paying for a model. The `N`th attempt of a status plays the `N`th
//! recording of the profile (the last one repeats), so a review can ask for changes once and
//! then pass.

use super::command::{Reader, finish};
use super::log::Log;
use super::openai::ChatStream;
use super::opencode_progress::OpencodeProgress;
use super::{AgentFinish, AgentJob, AgentRun, Hooks};
use crate::agents::{Format, Profile};
use crate::store::Stream;
use serde_json::Value;
use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};
use tokio_util::sync::CancellationToken;

/// The most prompt lines shown at the start of a replay.
const PROMPT_LINES: usize = 40;

/// Recordings compiled into the binary, by their path in the repository.
const BUILTIN: &[(&str, &str)] = &[
    (
        "assets/replay/demo/planner.jsonl",
        include_str!("../../../assets/replay/demo/planner.jsonl"),
    ),
    (
        "assets/replay/demo/coder-1.jsonl",
        include_str!("../../../assets/replay/demo/coder-1.jsonl"),
    ),
    (
        "assets/replay/demo/coder-2.jsonl",
        include_str!("../../../assets/replay/demo/coder-2.jsonl"),
    ),
    (
        "assets/replay/demo/reviewer-1.sse",
        include_str!("../../../assets/replay/demo/reviewer-1.sse"),
    ),
    (
        "assets/replay/demo/reviewer-2.sse",
        include_str!("../../../assets/replay/demo/reviewer-2.sse"),
    ),
];

/// `a/b/../c` → `a/c`, without touching the disk.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The text of recording `name` of `profile`: relative to the profile's folder; a built-in
/// profile's recordings are compiled in.
pub(super) fn recording_text(profile: &Profile, name: &str) -> Result<String, String> {
    let base = Path::new(&profile.file)
        .parent()
        .unwrap_or_else(|| Path::new(""));
    let path = normalize(&base.join(name));
    let builtin_profile = crate::pipeline::builtin_agent_sources()
        .iter()
        .any(|(f, _)| *f == profile.file);
    if builtin_profile && let Some((_, text)) = BUILTIN.iter().find(|(p, _)| Path::new(p) == path) {
        return Ok((*text).to_string());
    }
    std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// The recording attempt `attempt` (1-based) plays.
pub(super) fn pick(profile: &Profile, attempt: usize) -> Option<&str> {
    let last = profile.recordings.len().checked_sub(1)?;
    Some(profile.recordings[attempt.saturating_sub(1).min(last)].as_str())
}

pub(super) async fn run(
    job: &AgentJob<'_>,
    log: &Log,
    stop: &CancellationToken,
    hooks: &Hooks<'_>,
) -> AgentFinish {
    let p = job.profile;
    let attempt = job
        .env
        .var("BATON_ATTEMPT")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let Some(name) = pick(p, attempt) else {
        return AgentFinish::error(format!("agent `{}`: no `recording` to replay", p.id), false);
    };
    let who = format!("agent `{}` (replay of {name})", p.id);
    let text = match recording_text(p, name) {
        Ok(t) => t,
        Err(e) => {
            return AgentFinish::error(
                format!(
                    "{who}: {e} — `recording` is relative to {}",
                    Path::new(&p.file)
                        .parent()
                        .map_or(".".into(), |d| d.display().to_string())
                ),
                false,
            );
        }
    };
    // A recording may speak of the task it is replayed for.
    let text = if text.contains("{{") {
        let title = job
            .env
            .var("BATON_TASK_TITLE")
            .map_or_else(|| job.title.clone(), str::to_string);
        let dir = job.env.workdir.clone();
        let files = tokio::task::spawn_blocking(move || super::replay_fill::changed_files(&dir))
            .await
            .unwrap_or_else(|_| "no file".into());
        let values = super::replay_fill::Fill { title, files };
        super::replay_fill::apply(&text, p.format, &values)
    } else {
        text
    };
    log.system(format!(
        "replaying {name} ({}, attempt {attempt}); the prompt it was given:",
        p.format.as_str()
    ))
    .await;
    let prompt: Vec<&str> = job.prompt.lines().collect();
    for line in prompt.iter().take(PROMPT_LINES) {
        log.system(format!("  › {line}")).await;
    }
    if prompt.len() > PROMPT_LINES {
        log.system(format!("  › … {} more lines", prompt.len() - PROMPT_LINES))
            .await;
    }
    let mut player = Player::new(p.format);
    for line in text.lines() {
        if let Some(pace) = p.pace {
            tokio::select! {
                _ = tokio::time::sleep(pace) => {}
                _ = stop.cancelled() => return AgentFinish::Cancelled,
            }
        } else if stop.is_cancelled() {
            return AgentFinish::Cancelled;
        }
        match player.feed(line) {
            Ok(shown) => {
                for (stream, l) in shown {
                    log.send(stream, l).await;
                }
            }
            Err(why) => return AgentFinish::error(format!("{who}: {why}"), false),
        }
        if let Some(s) = player.take_session() {
            (hooks.session)(&s);
        }
    }
    for (stream, l) in player.flush() {
        log.send(stream, l).await;
    }
    player.finish(&who)
}

/// A recording being played: the parser of its format plus what the answer needs.
pub(super) enum Player {
    /// `text`, `claude-stream-json`, `codex-json`: the `command` backend's reader.
    Command { reader: Reader, told: bool },
    /// `openai-sse`.
    Openai(ChatStream),
    /// `opencode-events`.
    Opencode(Box<OpencodeReplay>),
}

/// OpenCode events and the answer gathered from them.
#[derive(Default)]
pub(super) struct OpencodeReplay {
    progress: Option<OpencodeProgress>,
    session: Option<String>,
    told: bool,
    users: HashSet<String>,
    parts: Vec<(String, String)>,
}

impl Player {
    /// A player for recordings in `format`.
    pub(super) fn new(format: Format) -> Self {
        match format {
            Format::OpenaiSse => Self::Openai(ChatStream::default()),
            Format::OpencodeEvents => Self::Opencode(Box::default()),
            other => Self::Command {
                reader: Reader::new(other),
                told: false,
            },
        }
    }

    /// Plays one recorded line; returns what to show.
    pub(super) fn feed(&mut self, line: &str) -> Result<Vec<(Stream, String)>, String> {
        match self {
            Self::Command { reader, .. } => Ok(reader.feed(line.to_string())),
            Self::Openai(chat) => {
                let data = line.strip_prefix("data:").unwrap_or(line);
                if data.trim().is_empty() || line.starts_with(':') {
                    return Ok(Vec::new());
                }
                Ok(chat
                    .feed(data)?
                    .into_iter()
                    .map(|l| (Stream::Stdout, l))
                    .collect())
            }
            Self::Opencode(oc) => {
                if line.trim().is_empty() {
                    return Ok(Vec::new());
                }
                let ev: Value = serde_json::from_str(line)
                    .map_err(|e| format!("a recorded OpenCode event is not JSON ({e})"))?;
                Ok(oc.feed(&ev))
            }
        }
    }

    /// The backend session id, the first time it is known.
    fn take_session(&mut self) -> Option<String> {
        match self {
            Self::Command { reader, told } if !*told => {
                let s = reader.session()?.to_string();
                *told = true;
                Some(s)
            }
            Self::Opencode(oc) if !oc.told => {
                oc.told = true;
                oc.session.clone()
            }
            _ => None,
        }
    }

    /// Lines still buffered at the end.
    fn flush(&mut self) -> Vec<(Stream, String)> {
        match self {
            Self::Opencode(oc) => oc
                .progress
                .as_mut()
                .map(OpencodeProgress::flush)
                .unwrap_or_default(),
            _ => Vec::new(),
        }
    }

    /// How the recorded run ended, read as the real backend reads it.
    pub(super) fn finish(self, who: &str) -> AgentFinish {
        match self {
            Self::Command { reader, .. } => finish(who, reader, 0, ""),
            Self::Openai(chat) if chat.complete() => AgentFinish::Done(AgentRun {
                text: chat.text,
                usage: chat.usage,
                cost: chat.cost,
                session: chat.id,
                events: Vec::new(),
            }),
            Self::Openai(_) => AgentFinish::error(
                format!("{who}: the recorded stream ends early (no finish_reason, no [DONE])"),
                false,
            ),
            Self::Opencode(oc) => {
                let (usage, cost) = oc
                    .progress
                    .as_ref()
                    .map(OpencodeProgress::usage)
                    .unwrap_or_default();
                let run = AgentRun {
                    text: oc
                        .parts
                        .iter()
                        .map(|(_, t)| t.as_str())
                        .collect::<Vec<_>>()
                        .join("\n"),
                    usage,
                    cost,
                    session: oc.session.clone(),
                    events: Vec::new(),
                };
                match oc.progress.as_ref().and_then(|p| p.error.clone()) {
                    Some(e) => AgentFinish::Failed {
                        error: format!("{who}: OpenCode reported an error: {e}"),
                        exit_code: None,
                        run,
                    },
                    None => AgentFinish::Done(run),
                }
            }
        }
    }
}

impl OpencodeReplay {
    fn feed(&mut self, ev: &Value) -> Vec<(Stream, String)> {
        let props = &ev["properties"];
        if self.session.is_none() {
            self.session = [
                props.get("sessionID"),
                props.pointer("/info/sessionID"),
                props.pointer("/part/sessionID"),
            ]
            .into_iter()
            .flatten()
            .find_map(Value::as_str)
            .map(String::from);
        }
        let Some(session) = self.session.clone() else {
            return Vec::new();
        };
        let progress = self
            .progress
            .get_or_insert_with(|| OpencodeProgress::new(&session, ""));
        match ev["type"].as_str() {
            Some("message.updated") if props.pointer("/info/role") == Some(&"user".into()) => {
                if let Some(id) = props.pointer("/info/id").and_then(Value::as_str) {
                    self.users.insert(id.to_string());
                }
            }
            Some("message.part.updated") => {
                let part = &props["part"];
                let msg = part["messageID"].as_str().unwrap_or_default();
                let ended = part.pointer("/time/end").is_some_and(|e| !e.is_null());
                if part["type"] == "text" && ended && !self.users.contains(msg) {
                    let id = part["id"].as_str().unwrap_or_default().to_string();
                    let text = part["text"].as_str().unwrap_or_default().to_string();
                    match self.parts.iter_mut().find(|(p, _)| *p == id) {
                        Some(slot) => slot.1 = text,
                        None => self.parts.push((id, text)),
                    }
                }
            }
            _ => {}
        }
        progress.feed(ev)
    }
}

#[cfg(test)]
#[path = "replay_tests.rs"]
mod tests;
