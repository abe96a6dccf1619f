//! The MCP tools: their arguments (named like the CLI's), the schemas generated from them,
//! descriptions written for a model, and the operation each one runs.

use super::ops::{Kind, NewTask, OpError, OpResult, Ops};
use crate::engine::Action;
use rmcp::handler::server::common::schema_for_type;
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use rmcp::schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;

/// This tool takes no arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct NoArgs {}

/// Filters for the task list; leave both out for every task.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct ListArgs {
    /// Only tasks at this status id (a column, such as `review`).
    pub status: Option<String>,
    /// Only tasks on this pipeline id.
    pub pipeline: Option<String>,
    /// Only tasks this person created or last moved.
    pub by: Option<String>,
    /// Only tasks you created or last moved (as `by` with your own name).
    #[serde(default)]
    pub mine: bool,
}

/// Which task.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct IdArgs {
    /// The task's id, as `list_tasks` shows it.
    pub id: i64,
}

/// Which task, and an optional note for its history and next step.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct NoteArgs {
    /// The task's id.
    pub id: i64,
    /// A note kept in the history and handed to the next step (for a reject: what to change).
    pub note: Option<String>,
}

/// Which task, where to move it, and an optional note.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct MoveArgs {
    /// The task's id.
    pub id: i64,
    /// The status id to move to; the pipeline must allow it from where the task is.
    pub status: String,
    /// A note kept in the history and handed to the next step.
    pub note: Option<String>,
}

/// Which task, and what to say to its agent.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct SayArgs {
    /// The task's id.
    pub id: i64,
    /// What to say to the task's agent (at most 32 KiB).
    pub text: String,
}

/// Which task, and the answers to its agent's open questions.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct AnswerArgs {
    /// The task's id.
    pub id: i64,
    /// One answer per question in the task's `questions`, in order ("" leaves one
    /// unanswered).
    pub answers: Vec<String>,
}

/// The new task.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct CreateArgs {
    /// One line saying what to do (at most 500 characters).
    pub title: String,
    /// The details, in markdown; steps and agents receive it.
    pub prompt: Option<String>,
    /// Pipeline id (see `list_pipelines`); default: the workspace's first own pipeline, else `quick_fix`.
    pub pipeline: Option<String>,
    /// Start it right away (default false: it waits in the backlog).
    #[serde(default)]
    pub start: bool,
    /// A key of your choosing for this creation: calling again with the same key returns
    /// the task the first call made instead of making another (safe retries).
    pub idempotency_key: Option<String>,
    /// Ids of tasks it waits for: it starts only once every one of them is done.
    #[serde(default)]
    pub after: Vec<i64>,
}

/// Which task and step, and which of its log lines.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct LogsArgs {
    /// The task's id.
    pub id: i64,
    /// The step's position in `show_task`'s `steps`, counting from 1; default the latest.
    pub step: Option<usize>,
    /// Only the last this many lines (at most 2000; default 200).
    pub tail: Option<usize>,
    /// Only lines after this line id (`next_after` of an earlier call), to follow a log.
    pub after: Option<i64>,
}

/// Which pipeline.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct PipelineArgs {
    /// The pipeline's id, as `list_pipelines` shows it.
    pub id: String,
}

/// The pipeline file to check.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct ValidateArgs {
    /// The pipeline file's JSON text.
    pub text: String,
    /// The file name to give in error locations (default `pipeline.json`).
    pub file: Option<String>,
}

/// Default number of log lines `task_logs` returns.
const DEFAULT_TAIL: usize = 200;

fn tool<T: JsonSchema + 'static>(
    name: &'static str,
    description: &'static str,
    read: bool,
) -> Tool {
    let schema: std::sync::Arc<JsonObject> = schema_for_type::<T>();
    let mut ann = ToolAnnotations::new();
    ann.read_only_hint = Some(read);
    ann.destructive_hint = Some(matches!(name, "abort"));
    ann.open_world_hint = Some(false);
    Tool::new(name, description, schema).with_annotations(ann)
}

/// Every tool, in the order a model should meet them.
pub fn tools() -> Vec<Tool> {
    vec![
        tool::<ListArgs>(
            "list_tasks",
            "List baton tasks (cards on the kanban board), newest first. Each item: id, title, pipeline, status (the column), state (idle, queued, running, waiting, interrupted, done, failed, cancelled), updated_at, by (the last person who created or moved it), created_by. Filter by `status`, `pipeline`, and `by` (a name) or `mine`.",
            true,
        ),
        tool::<IdArgs>(
            "show_task",
            "Show one task in full: status, state, run number, every step run (state, exit code, outcome, error, handoff, usage, cost, test counts) in the order they ran, and the history of transitions with notes.",
            true,
        ),
        tool::<CreateArgs>(
            "create_task",
            "Create a task on a pipeline. With `start: true` it starts at once and its first step runs; otherwise it waits in the backlog until `start`. Returns the task as show_task does.",
            false,
        ),
        tool::<IdArgs>(
            "start",
            "Start a task waiting in its backlog: it moves to the pipeline's first step, which runs.",
            false,
        ),
        tool::<NoteArgs>(
            "approve",
            "Approve a task waiting at a gate (state `waiting`), so it moves on. The note is kept and handed to the next step.",
            false,
        ),
        tool::<NoteArgs>(
            "reject",
            "Reject a task waiting at a gate; it goes back as its pipeline says. Say in `note` what must change: the next step receives it.",
            false,
        ),
        tool::<MoveArgs>(
            "move",
            "Move a task to another status that its pipeline allows from where it is (a manual transition).",
            false,
        ),
        tool::<NoteArgs>(
            "abort",
            "Abort a task: stop its running step and move it to cancelled.",
            false,
        ),
        tool::<IdArgs>(
            "resume",
            "Re-run an interrupted or failed step as a new attempt and go on from there.",
            false,
        ),
        tool::<IdArgs>(
            "retry",
            "Start the task over: a new run from the first step.",
            false,
        ),
        tool::<SayArgs>(
            "say",
            "Say something to a task's agent. A running agent that takes input mid-run hears it at once; otherwise its next step gets it. A task waiting at a gate or failed continues its agent's last session with the message as a new attempt. The task's `messages` show where each message went.",
            false,
        ),
        tool::<AnswerArgs>(
            "answer",
            "Answer the open questions of a task whose agent ended with needs_info (show_task lists them as `questions`): one answer per question, in order. The agent gets the question and answer pairs and the task goes back to the status that asked.",
            false,
        ),
        tool::<LogsArgs>(
            "task_logs",
            "Read a step's log lines (default: the latest step, last 200 lines). Each line has id, stream (stdout, stderr, system), text and time. Pass `after` = `next_after` from the previous call to read only new lines.",
            true,
        ),
        tool::<IdArgs>(
            "task_diff",
            "The task's code changes: its branch against the base branch, plus uncommitted work in its worktree, as a unified diff.",
            true,
        ),
        tool::<NoArgs>(
            "list_pipelines",
            "List the pipelines tasks can run on (built-in and the workspace's): id, name, description and their statuses in board order.",
            true,
        ),
        tool::<PipelineArgs>(
            "show_pipeline",
            "Show one pipeline as JSON: its statuses (queue, step, gate, done, failed, cancelled) with their steps, transitions, guards, hooks and triggers.",
            true,
        ),
        tool::<ValidateArgs>(
            "validate_pipeline",
            "Check the JSON text of a pipeline file without saving it. Returns ok, and each error or warning with its line and column and a plain reason.",
            true,
        ),
        tool::<NoArgs>(
            "list_agents",
            "List the agent profiles steps can use: id, backend (command, openai, opencode), where it runs, its file; and problems in profile files.",
            true,
        ),
    ]
}

fn args<T: DeserializeOwned>(name: &str, raw: Option<JsonObject>) -> Result<T, OpError> {
    let value = serde_json::Value::Object(raw.unwrap_or_default());
    serde_json::from_value(value).map_err(|e| {
        OpError::new(
            Kind::Invalid,
            format!("the arguments of {name} are wrong: {e} — see the tool's input schema"),
        )
    })
}

/// Runs a tool by name.
pub async fn call(ops: &Ops, name: &str, raw: Option<JsonObject>) -> OpResult {
    match name {
        "list_tasks" => {
            let a: ListArgs = args(name, raw)?;
            let by = super::who::mine_or(a.mine, a.by);
            ops.list_tasks_by(a.status, a.pipeline, by).await
        }
        "show_task" => ops.show_task(args::<IdArgs>(name, raw)?.id).await,
        "create_task" => {
            let a: CreateArgs = args(name, raw)?;
            let new = NewTask {
                title: a.title,
                prompt: a.prompt,
                pipeline: a.pipeline,
                start: a.start,
                idempotency_key: a.idempotency_key,
                after: a.after,
            };
            ops.create_task(new).await.map(|c| c.task)
        }
        "start" => ops.act(args::<IdArgs>(name, raw)?.id, Action::Start).await,
        "approve" => {
            let a: NoteArgs = args(name, raw)?;
            ops.act(a.id, Action::Approve { note: a.note }).await
        }
        "reject" => {
            let a: NoteArgs = args(name, raw)?;
            ops.act(a.id, Action::Reject { note: a.note }).await
        }
        "abort" => {
            let a: NoteArgs = args(name, raw)?;
            ops.act(a.id, Action::Abort { note: a.note }).await
        }
        "move" => {
            let a: MoveArgs = args(name, raw)?;
            let action = Action::Move {
                to: a.status,
                note: a.note,
            };
            ops.act(a.id, action).await
        }
        "resume" => ops.act(args::<IdArgs>(name, raw)?.id, Action::Resume).await,
        "say" => {
            let a: SayArgs = args(name, raw)?;
            ops.talk(a.id, Action::Say { text: a.text }).await
        }
        "answer" => {
            let a: AnswerArgs = args(name, raw)?;
            ops.talk(a.id, Action::Answer { answers: a.answers }).await
        }
        "retry" => ops.act(args::<IdArgs>(name, raw)?.id, Action::Retry).await,
        "task_logs" => {
            let a: LogsArgs = args(name, raw)?;
            let tail = a.tail.or(a.after.is_none().then_some(DEFAULT_TAIL));
            ops.task_logs(a.id, a.step, a.after, tail).await
        }
        "task_diff" => ops.task_diff(args::<IdArgs>(name, raw)?.id).await,
        "list_pipelines" => ops.list_pipelines().await,
        "show_pipeline" => {
            ops.show_pipeline(&args::<PipelineArgs>(name, raw)?.id)
                .await
        }
        "validate_pipeline" => {
            let a: ValidateArgs = args(name, raw)?;
            ops.validate_pipeline(a.text, a.file).await
        }
        "list_agents" => ops.list_agents().await,
        other => Err(OpError::new(
            Kind::NotFound,
            format!("no tool `{other}` — list the tools to see the ones baton offers"),
        )),
    }
}
