//! Agent backends: `openai`, `opencode`, `command` and `replay`, one file each. Every
//! backend streams readable progress lines into the step's log as they happen, stops when
//! told (abort or timeout — the session is aborted, the process group killed) and returns the
//! final text with usage, cost and the backend's session id. [`step::run_step`] wraps a
//! backend into a whole agent step: profile, prompt, handoff, outcome.

mod claude;
mod cli_check;
mod codex;
mod command;
mod gemini;
mod http;
mod log;
mod openai;
mod opencode;
mod opencode_progress;
mod opencode_say;
pub mod opencode_serve;
mod outcome;
mod replay;
mod replay_fill;
mod session;
mod step;
mod talk;

pub use claude::ClaudeStream;
pub use cli_check::not_on_path;
pub use codex::CodexStream;
pub use command::find_program;
pub use gemini::GeminiStream;
pub use http::{Health, check};
pub use log::LineBuf;
pub use openai::ChatStream;
pub use opencode_progress::OpencodeProgress;
pub use outcome::{AgentEvent, AgentReport, report};
pub use step::{AgentStep, Earlier, handoff_file_name, run_step};

use super::{Spawned, StepEnv};
use crate::agents::{Backend, Profile};
use log::Log;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A message said to a running agent: its row and its text.
#[derive(Debug)]
pub struct LiveMessage {
    /// The message's id in the store.
    pub id: i64,
    pub text: String,
    /// Told whether the agent got it: `Err` holds the sentence saying why not (the message
    /// then waits for the next step).
    pub heard: Option<tokio::sync::oneshot::Sender<Result<(), String>>>,
}

impl LiveMessage {
    /// Tells whoever said it how it went.
    pub fn answer(&mut self, how: Result<(), String>) {
        if let Some(tx) = self.heard.take() {
            let _ = tx.send(how);
        }
    }
}

/// Where a running agent step finds the messages said to it. A backend that reads input
/// mid-run takes the receiver; one that does not leaves the messages to the next step.
pub type Inbox =
    std::sync::Arc<std::sync::Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<LiveMessage>>>>;

/// What an agent produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentRun {
    /// The final answer (the handoff's raw text).
    pub text: String,
    /// Token counts, normalised: `input_tokens`, `output_tokens`, and what else the backend
    /// reports (`reasoning_tokens`, `cache_read_tokens`, `cache_write_tokens`).
    pub usage: Option<serde_json::Value>,
    /// Cost in US dollars, when the backend reports it.
    pub cost: Option<f64>,
    /// The backend's session (OpenCode session, Claude session, Codex thread).
    pub session: Option<String>,
    /// What the backend noticed that the task's history should keep (Claude's refused tool
    /// calls), recorded as events with the step's result.
    pub events: Vec<AgentEvent>,
}

/// How an agent backend ended.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentFinish {
    /// The agent answered.
    Done(AgentRun),
    /// The agent ran and reported failure (`is_error`, a failed turn, a non-zero exit).
    Failed {
        error: String,
        exit_code: Option<i64>,
        run: AgentRun,
    },
    /// The agent could not be run or its answer could not be read. `retryable` for transient
    /// causes (connection refused, 5xx, a stream cut off).
    Error { error: String, retryable: bool },
    /// Ran past its timeout and was stopped.
    TimedOut,
    /// Stopped on request.
    Cancelled,
}

impl AgentFinish {
    fn error(error: impl Into<String>, retryable: bool) -> Self {
        Self::Error {
            error: error.into(),
            retryable,
        }
    }
}

/// One agent invocation, fully rendered.
pub struct AgentJob<'a> {
    pub profile: &'a Profile,
    /// The rendered prompt template.
    pub prompt: String,
    /// The rendered argv (`command` only).
    pub argv: Vec<String>,
    /// A short title for the backend's session.
    pub title: String,
    /// Working directory, environment, timeout and kill grace.
    pub env: StepEnv,
    /// Where a `command` agent's process runs.
    pub place: super::executor::Place,
    /// The workspace's OpenCode server, for profiles with `"serve": true`.
    pub opencode: Option<&'a opencode_serve::OpencodeServer>,
    /// The session this run continues (the prompt is then only what is new).
    pub resume: Option<String>,
    /// The messages said to the step while it runs.
    pub inbox: Option<Inbox>,
}

/// Callbacks that record what must survive a crash the moment it exists.
pub struct Hooks<'a> {
    /// The backend's session id became known.
    pub session: &'a (dyn Fn(&str) + Send + Sync),
    /// A `command` agent's process was started.
    pub spawned: &'a (dyn Fn(Spawned) + Send + Sync),
    /// The step continues this session (`None`: it fell back to a fresh one).
    pub continued: &'a (dyn Fn(Option<&str>) + Send + Sync),
    /// A message said while the step runs reached the agent (its id).
    pub delivered: &'a (dyn Fn(i64) + Send + Sync),
}

/// Runs one agent to its end. Stops it (aborting its session or killing its process group)
/// on `cancel` or once `job.env.timeout` has passed.
pub async fn run(
    job: &AgentJob<'_>,
    log: super::LogSender,
    cancel: CancellationToken,
    hooks: &Hooks<'_>,
) -> AgentFinish {
    let log = Log::new(log, log::secrets_for(job.profile, &job.env));
    let stop = CancellationToken::new();
    let work = async {
        match job.profile.backend {
            Backend::Openai => openai::run(job, &log, &stop).await,
            Backend::Opencode => opencode::run(job, &log, &stop, hooks).await,
            Backend::Command => command::run(job, &log, &stop, hooks).await,
            Backend::Replay => replay::run(job, &log, &stop, hooks).await,
        }
    };
    tokio::pin!(work);
    let why = tokio::select! {
        finish = &mut work => return finish,
        _ = cancel.cancelled() => AgentFinish::Cancelled,
        _ = tokio::time::sleep(job.env.timeout) => AgentFinish::TimedOut,
    };
    // Let the backend clean up (abort the session, end the process group), but not forever.
    stop.cancel();
    let cleanup = job.env.kill_grace + Duration::from_secs(5);
    if tokio::time::timeout(cleanup, &mut work).await.is_err() {
        log.system(format!(
            "the {} backend did not stop within {} s",
            job.profile.backend.as_str(),
            cleanup.as_secs()
        ))
        .await;
    }
    why
}
