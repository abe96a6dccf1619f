//! Pipeline definition types: the parsed, validated form of a pipeline JSON file.
//!
//! These types are plain data. Loading (`load.rs`) turns JSON text into them with located
//! errors; `decide.rs` answers "given this status and trigger, where does the task go?".

use super::executor_spec::{DockerSpec, ExecutorSpec, PullPolicy};
use super::outcome::normalize_outcome;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// A whole pipeline: ordered statuses (the board's columns) and transitions between them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pipeline {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub statuses: Vec<Status>,
    #[serde(default)]
    pub transitions: Vec<Transition>,
    /// Automatic task creators (`schedule`, `push`, `task_done`, `issue`); kept as raw JSON for now.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub triggers: Vec<serde_json::Value>,
}

/// One column of the board.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub id: String,
    pub label: String,
    pub kind: StatusKind,
    /// Present exactly when `kind == StatusKind::Step`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<StepSpec>,
}

/// What a status is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StatusKind {
    /// Backlog: waits for `start`.
    Queue,
    /// Waits for a human (`approve`, `reject`, `manual`).
    Gate,
    /// Runs its step on entry.
    Step,
    Done,
    Failed,
    Cancelled,
}

impl StatusKind {
    /// Done, failed and cancelled end a run.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Done | Self::Failed | Self::Cancelled)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queue => "queue",
            Self::Gate => "gate",
            Self::Step => "step",
            Self::Done => "done",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }
}

/// The variables baton gives a step (the task's text, ids and paths). A step's `env` may
/// not set them (see [`reserved_var`]).
pub const STEP_VARS: &[&str] = &[
    "BATON_TASK_ID",
    "BATON_TASK_TITLE",
    "BATON_TASK_PROMPT",
    "BATON_TASK_PROMPT_FILE",
    "BATON_PIPELINE",
    "BATON_STATUS",
    "BATON_RUN_ID",
    "BATON_ATTEMPT",
    "BATON_EXECUTION_KEY",
    "BATON_CONTEXT_DIR",
    "BATON_WORKSPACE",
    "BATON_NOTE",
    "BATON_BRANCH",
    "BATON_HANDOFF_FILE",
    "BATON_TRIGGER_PAYLOAD_FILE",
];

/// The variables baton gives a hook's command besides a step's.
pub const HOOK_VARS: &[&str] = &[
    "BATON_FROM",
    "BATON_TO",
    "BATON_TRIGGER",
    "BATON_HOOK_ATTEMPT",
];

/// The variables an executor uses to run a step elsewhere (the clone and the script on a
/// Kubernetes pod; `BATON_ARGV_0`, `BATON_ARGV_1`, … for a command over SSH).
const EXECUTOR_VARS: &[&str] = &[
    "BATON_GIT_REMOTE",
    "BATON_GIT_BRANCH",
    "BATON_SUBDIR",
    "BATON_STEP_SCRIPT",
    "BATON_TRIGGER_PAYLOAD",
];

/// A name a step's `env` may not set, because baton sets it: one of [`STEP_VARS`] or of the
/// executors'. Other `BATON_` names (`BATON_DEPLOY_TOKEN`) are the step's own.
pub fn reserved_var(name: &str) -> bool {
    STEP_VARS.contains(&name)
        || EXECUTOR_VARS.contains(&name)
        || name
            .strip_prefix("BATON_ARGV_")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Why `name` cannot name an environment variable (empty, or holding `=` or a NUL byte,
/// which would make `NAME=value` mean something else), if it cannot.
pub fn bad_var_name(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("it is empty")
    } else if name.contains('=') {
        Some("it holds `=`")
    } else if name.contains('\0') {
        Some("it holds a NUL byte")
    } else {
        None
    }
}

/// The work a step status runs when a task enters it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepSpec {
    pub action: StepAction,
    /// Per-attempt limit; `None` means the engine default.
    #[serde(default, with = "opt_duration")]
    pub timeout: Option<Duration>,
    /// Extra attempts after an `error` (never after `failure`), with exponential backoff.
    #[serde(default)]
    pub retries: u32,
    /// Extra environment for the step (values are literal, never shell-expanded by baton).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory relative to the task's working tree.
    #[serde(default)]
    pub workdir: Option<String>,
    /// Where the step runs (`"executor"`); `None` leaves it to the agent profile or the
    /// workspace default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor: Option<ExecutorSpec>,
    /// Labels an engine must all have to start this step (`"requires"`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<String>,
}

impl StepSpec {
    /// The step's `env` as it reaches the step: a name baton sets ([`reserved_var`]) or
    /// that names no variable is left out. Loading refuses such a name, but a task keeps
    /// the pipeline it was made with, which may hold one from before.
    pub fn own_env(&self) -> impl Iterator<Item = (String, String)> + '_ {
        self.env
            .iter()
            .filter(|(k, _)| !reserved_var(k) && bad_var_name(k).is_none())
            .map(|(k, v)| (k.clone(), v.clone()))
    }

    /// The executor the step itself asks for: its `executor` field, else the image of the
    /// `{"docker": {"image", "run"}}` shorthand.
    pub fn own_executor(&self) -> Option<ExecutorSpec> {
        match (&self.executor, &self.action) {
            (Some(e), _) => Some(e.clone()),
            (None, StepAction::Docker { image, .. }) => Some(ExecutorSpec::Docker(DockerSpec {
                image: image.clone(),
                network: None,
                memory: None,
                cpus: None,
                pull: PullPolicy::Never,
            })),
            (None, _) => None,
        }
    }
}

/// The kinds of step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepAction {
    /// `{"run": "cargo test"}` — one shell command line, `sh -c`.
    Run(String),
    /// `{"script": "multi\nline"}` — a multi-line shell script, `sh -c`.
    Script(String),
    /// `{"agent": "planner"}` — an agent profile id.
    Agent(String),
    /// `{"docker": {"image": "...", "run": "..."}}`.
    Docker { image: String, run: String },
}

impl StepAction {
    /// A short human description: `run: cargo test`, `agent: planner`.
    pub fn describe(&self) -> String {
        match self {
            Self::Run(cmd) => format!("run: {cmd}"),
            Self::Script(s) => format!("script: {}", s.lines().next().unwrap_or("")),
            Self::Agent(a) => format!("agent: {a}"),
            Self::Docker { image, run } => format!("docker {image}: {run}"),
        }
    }
}

/// An edge of the state machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transition {
    /// A status id, or `"*"` for every non-terminal status.
    pub from: String,
    pub to: String,
    pub on: Trigger,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guards: Vec<Guard>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<Hook>,
}

/// What makes a transition fire. Serialized as its string form (`"outcome:needs_info"`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Trigger {
    Start,
    Approve,
    Reject,
    /// Any human move.
    Manual,
    /// The step ran and succeeded.
    Success,
    /// The step ran and reported failure (exit != 0, agent outcome `failure`).
    Failure,
    /// The step could not complete (crash, timeout, backend unreachable).
    Error,
    /// An agent's named outcome.
    Outcome(String),
    Abort,
    /// The task's pull request was merged on the forge.
    PrMerged,
    /// The task's pull request was closed without merging.
    PrClosed,
    /// The checks (CI) of the task's pull request failed.
    CiFailed,
    /// Engine action: re-run an interrupted or failed step (never in a pipeline file).
    Resume,
    /// Engine action: start a new run from the first step (never in a pipeline file).
    Retry,
    /// Engine action: an interrupted task is given up, to its cancelled status.
    Dismiss,
    /// Engine action: a new run from a chosen status, earlier handoffs kept.
    Rerun,
    /// Engine action: someone said something to the task's agent, which continues its
    /// last session as a new attempt (never in a pipeline file).
    Say,
    /// Engine action: the agent's open questions were answered; back to the status that
    /// asked, as a new attempt (never in a pipeline file).
    Answer,
}

impl Trigger {
    /// Parses a trigger as written in a pipeline file; `None` for an unknown name.
    /// `resume` and `retry` are engine actions and are not accepted here. The name of an
    /// `outcome:<name>` trigger is normalised ([`normalize_outcome`]), so `outcome:needs-info`
    /// matches an agent answering `OUTCOME: Needs Info`.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "start" => Self::Start,
            "approve" => Self::Approve,
            "reject" => Self::Reject,
            "manual" => Self::Manual,
            "success" => Self::Success,
            "failure" => Self::Failure,
            "error" => Self::Error,
            "abort" => Self::Abort,
            "pr_merged" => Self::PrMerged,
            "pr_closed" => Self::PrClosed,
            "ci_failed" => Self::CiFailed,
            // A review asking for changes is an outcome, so one transition serves both a
            // reviewing agent and a reviewer on the forge.
            "changes_requested" => Self::Outcome("changes_requested".into()),
            _ => {
                let name = normalize_outcome(s.strip_prefix("outcome:")?);
                if name.is_empty() {
                    return None;
                }
                Self::Outcome(name)
            }
        })
    }

    /// True for triggers a person fires (as opposed to a step's result).
    pub fn is_human(&self) -> bool {
        matches!(
            self,
            Self::Start | Self::Approve | Self::Reject | Self::Manual
        )
    }
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Start => f.write_str("start"),
            Self::Approve => f.write_str("approve"),
            Self::Reject => f.write_str("reject"),
            Self::Manual => f.write_str("manual"),
            Self::Success => f.write_str("success"),
            Self::Failure => f.write_str("failure"),
            Self::Error => f.write_str("error"),
            Self::Outcome(name) => write!(f, "outcome:{name}"),
            Self::Abort => f.write_str("abort"),
            Self::PrMerged => f.write_str("pr_merged"),
            Self::PrClosed => f.write_str("pr_closed"),
            Self::CiFailed => f.write_str("ci_failed"),
            Self::Resume => f.write_str("resume"),
            Self::Retry => f.write_str("retry"),
            Self::Dismiss => f.write_str("dismiss"),
            Self::Rerun => f.write_str("rerun"),
            Self::Say => f.write_str("say"),
            Self::Answer => f.write_str("answer"),
        }
    }
}

impl Serialize for Trigger {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Trigger {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        match s.as_str() {
            "resume" => Ok(Self::Resume),
            "retry" => Ok(Self::Retry),
            "dismiss" => Ok(Self::Dismiss),
            "rerun" => Ok(Self::Rerun),
            "say" => Ok(Self::Say),
            "answer" => Ok(Self::Answer),
            other => Self::parse(other)
                .ok_or_else(|| serde::de::Error::custom(format!("unknown trigger `{other}`"))),
        }
    }
}

/// A condition a transition needs. All guards of a transition must pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Guard {
    /// Allowed while the task has entered the target status fewer than N times in this run.
    MaxVisits(u32),
    /// No step of the task is running.
    NoRunningStep(#[serde(default)] bool),
    /// The latest handoff has this field (e.g. `"next_agent_context"`).
    HasHandoffField(String),
    /// The task's worktree has no uncommitted changes.
    CleanWorktree(#[serde(default)] bool),
    /// The run's cost so far is below this many dollars.
    Budget(f64),
    /// `true`: the workspace has a usable forge (`[forge]` whose remote resolves to a
    /// repository); `false`: it has none.
    Forge(bool),
}

impl Guard {
    /// The guard's name as written in files and shown in `blocked_by`.
    pub fn name(&self) -> String {
        match self {
            Self::MaxVisits(n) => format!("max_visits: {n}"),
            Self::NoRunningStep(_) => "no_running_step".into(),
            Self::HasHandoffField(f) => format!("has_handoff_field: {f}"),
            Self::CleanWorktree(_) => "clean_worktree".into(),
            Self::Budget(b) => format!("budget: {b}"),
            Self::Forge(on) => format!("forge: {on}"),
        }
    }
}

/// A side effect of a transition. Everything but `merge` runs after the status change commits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Hook {
    Notify(#[serde(default)] serde_json::Value),
    Run(String),
    StartTask(serde_json::Value),
    Webhook(serde_json::Value),
    Merge(#[serde(default)] serde_json::Value),
    /// Pushes the task branch to the forge's remote (`--force-with-lease`).
    Push(#[serde(default)] serde_json::Value),
    /// Pushes, then opens or updates the branch's pull request.
    Pr(#[serde(default)] serde_json::Value),
    /// Posts the handoff (or a template) on the task's pull request.
    Comment(#[serde(default)] serde_json::Value),
}

impl Hook {
    pub fn name(&self) -> &'static str {
        match self {
            Self::Notify(_) => "notify",
            Self::Run(_) => "run",
            Self::StartTask(_) => "start_task",
            Self::Webhook(_) => "webhook",
            Self::Merge(_) => "merge",
            Self::Push(_) => "push",
            Self::Pr(_) => "pr",
            Self::Comment(_) => "comment",
        }
    }
}

impl Pipeline {
    /// The agents its steps run, in step order (one used twice comes twice).
    pub fn step_agents(&self) -> impl Iterator<Item = &str> {
        self.statuses
            .iter()
            .filter_map(|s| match s.step.as_ref().map(|st| &st.action) {
                Some(StepAction::Agent(id)) => Some(id.as_str()),
                _ => None,
            })
    }

    /// The status with this id.
    pub fn status(&self, id: &str) -> Option<&Status> {
        self.statuses.iter().find(|s| s.id == id)
    }

    /// Index of a status in the column order.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.statuses.iter().position(|s| s.id == id)
    }

    /// The first status of a kind (used by the `failure`/`error`/`abort` defaults).
    pub fn first_of_kind(&self, kind: StatusKind) -> Option<&Status> {
        self.statuses.iter().find(|s| s.kind == kind)
    }

    /// The status after `id` in the list, if any.
    pub fn next_after(&self, id: &str) -> Option<&Status> {
        self.index_of(id).and_then(|i| self.statuses.get(i + 1))
    }
}

/// Serde helper for `Option<Duration>` as a humantime string ("15m").
mod opt_duration {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.collect_str(&humantime::format_duration(*d)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        let s: Option<String> = Option::deserialize(d)?;
        s.map(|s| humantime::parse_duration(&s).map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_env_reaches_the_step_without_batons_names_or_broken_ones() {
        let spec: StepSpec = serde_json::from_value(serde_json::json!({
            "action": {"run": "true"},
            "env": {"MODE": "full", "BATON_DEPLOY_TOKEN": "t0k3n", "BATON_TASK_ID": "7",
                    "BATON_SUBDIR": "x", "BATON_ARGV_1": "rm", "A=B": "c", "": "d"}
        }))
        .unwrap();
        let env: Vec<_> = spec.own_env().collect();
        assert_eq!(
            env,
            [
                ("BATON_DEPLOY_TOKEN".to_string(), "t0k3n".to_string()),
                ("MODE".to_string(), "full".to_string())
            ]
        );
        assert!(!reserved_var("BATON_ARGV_") && !reserved_var("BATON_ARGV_X"));
    }
}
