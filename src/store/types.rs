//! Row types and the state enums stored as text.

use serde::Serialize;

/// Declares a string-backed enum with `as_str`, `parse` and `Display`.
macro_rules! text_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($variant),+ }

        impl $name {
            /// The stored text.
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $text),+ }
            }
            /// Parses the stored text.
            pub fn parse(s: &str) -> Option<Self> {
                match s { $($text => Some(Self::$variant),)+ _ => None }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl super::sql::FromValue for $name {
            fn from_value(v: super::sql::Value<'_>) -> Result<Self, String> {
                match v {
                    super::sql::Value::Text(s) => Self::parse(s)
                        .ok_or_else(|| format!("unknown {} `{s}`", stringify!($name))),
                    v => Err(format!("expected text, found {}", v.kind())),
                }
            }
        }

        impl super::sql::Param for $name {
            fn value(&self) -> super::sql::Value<'_> {
                super::sql::Value::Text(self.as_str())
            }
        }

        impl rusqlite::types::FromSql for $name {
            fn column_result(v: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
                let s = v.as_str()?;
                Self::parse(s).ok_or_else(|| rusqlite::types::FromSqlError::Other(
                    format!("unknown {} `{s}`", stringify!($name)).into()))
            }
        }

        impl rusqlite::types::ToSql for $name {
            fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
                Ok(self.as_str().into())
            }
        }
    };
}

text_enum!(
    /// What is happening to a task at its status.
    TaskState {
        Idle = "idle",
        Queued = "queued",
        Running = "running",
        Waiting = "waiting",
        Interrupted = "interrupted",
        Done = "done",
        Failed = "failed",
        Cancelled = "cancelled",
    }
);

impl TaskState {
    /// Nothing more happens to the task without someone: its step is neither queued nor
    /// running (what `run --wait` waits for).
    pub fn settled(self) -> bool {
        !matches!(self, Self::Queued | Self::Running)
    }
}

text_enum!(
    /// The state of one pass of a task through its pipeline.
    RunState {
        Running = "running",
        Waiting = "waiting",
        Completed = "completed",
        Failed = "failed",
        Cancelled = "cancelled",
        Interrupted = "interrupted",
    }
);

text_enum!(
    /// The state of one execution of a status's step.
    StepState {
        Pending = "pending",
        Running = "running",
        Succeeded = "succeeded",
        Failed = "failed",
        TimedOut = "timed_out",
        Cancelled = "cancelled",
        Interrupted = "interrupted",
    }
);

impl StepState {
    /// A step run in this state will not change again.
    pub fn is_final(self) -> bool {
        !matches!(self, Self::Pending | Self::Running)
    }
}

text_enum!(
    /// Where a log line came from (`system`: lines baton itself writes: start, exit, kill).
    Stream {
        Stdout = "stdout",
        Stderr = "stderr",
        System = "system",
    }
);

text_enum!(
    /// The lifecycle of a queued client command. `answering`: applied, its answer comes
    /// once a running step has said whether its agent took a message (never taken again).
    CommandState {
        Pending = "pending",
        Answering = "answering",
        Done = "done",
        Failed = "failed",
    }
);

/// A task row.
#[derive(Debug, Clone)]
pub struct Task {
    pub id: i64,
    pub title: String,
    pub prompt: String,
    /// The pipeline's id; its definition as it was when the task was created (the
    /// snapshot) comes from [`super::Db::pipeline`].
    pub pipeline_id: String,
    pub status: String,
    pub state: TaskState,
    pub run_id: Option<i64>,
    pub branch: Option<String>,
    pub worktree: Option<String>,
    /// The branch the worktree was made from (and merges go back into).
    pub base_branch: Option<String>,
    pub breakpoint: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
    /// The person who created it (none: made by a trigger, a hook, or before names).
    pub created_by: Option<String>,
    /// The last person who created or moved it (the engine's own moves do not count).
    pub moved_by: Option<String>,
}

impl Task {
    /// True when `name` created it or is the last person to have moved it.
    pub fn touched_by(&self, name: &str) -> bool {
        self.moved_by.as_deref() == Some(name) || self.created_by.as_deref() == Some(name)
    }
}

/// A run row.
#[derive(Debug, Clone)]
pub struct Run {
    pub id: i64,
    pub task_id: i64,
    pub number: i64,
    pub state: RunState,
    pub started_at: i64,
    pub finished_at: Option<i64>,
}

/// A step-run row.
#[derive(Debug, Clone)]
pub struct StepRun {
    pub id: i64,
    pub task_id: i64,
    pub run_id: i64,
    pub status: String,
    pub attempt: i64,
    pub execution_key: String,
    pub state: StepState,
    pub exit_code: Option<i64>,
    pub outcome: Option<String>,
    pub error: Option<String>,
    /// The human note handed to this step (from approve/reject/move).
    pub note: Option<String>,
    pub not_before: i64,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
    pub pid: Option<i64>,
    pub pgid: Option<i64>,
    pub proc_start: Option<i64>,
    pub session_id: Option<String>,
    pub usage: Option<serde_json::Value>,
    pub cost: Option<f64>,
    pub tests: Option<serde_json::Value>,
    pub handoff_content: Option<String>,
    pub handoff_metadata: Option<serde_json::Value>,
    /// The step run's position among its task's step runs (1 = first), across runs.
    pub seq: i64,
    /// The agent session this step run continued; `None` when it started a fresh one.
    pub continued_from: Option<String>,
}

/// A transition-history row.
#[derive(Debug, Clone)]
pub struct HistoryEntry {
    pub id: i64,
    pub task_id: i64,
    pub run_id: Option<i64>,
    pub from: Option<String>,
    pub to: String,
    pub trigger: String,
    pub actor: String,
    pub reason: Option<String>,
    pub guards: serde_json::Value,
    pub hooks: serde_json::Value,
    pub at: i64,
}

/// A task event: one entry of a task's timeline.
#[derive(Debug, Clone)]
pub struct Event {
    pub id: i64,
    pub task_id: Option<i64>,
    pub category: String,
    pub kind: String,
    pub summary: String,
    pub data: serde_json::Value,
    pub actor: String,
    pub level: String,
    pub at: i64,
}

/// An event to record.
#[derive(Debug, Clone)]
pub struct NewEvent<'a> {
    pub task_id: Option<i64>,
    pub category: &'a str,
    pub kind: &'a str,
    pub summary: String,
    pub data: serde_json::Value,
    pub actor: &'a str,
    pub level: &'a str,
}

/// One stored log line.
#[derive(Debug, Clone, PartialEq)]
pub struct LogLine {
    pub id: i64,
    pub step_run_id: i64,
    pub stream: Stream,
    pub ts: i64,
    pub text: String,
}

/// A log line on its way to the store.
#[derive(Debug, Clone, PartialEq)]
pub struct NewLogLine {
    pub step_run_id: i64,
    pub stream: Stream,
    pub ts: i64,
    pub text: String,
}

/// A queued client command.
#[derive(Debug, Clone)]
pub struct CommandRow {
    pub id: i64,
    pub task_id: Option<i64>,
    pub body: serde_json::Value,
    pub state: CommandState,
    pub result: Option<String>,
}
