//! The API's types for the OpenAPI document: request bodies the handlers parse, and the
//! shapes `baton list --json` and `baton show --json` print (a test keeps them in step).

#![allow(dead_code)] // Response types exist for their schemas.

use serde::Deserialize;
use utoipa::ToSchema;

/// An error: one plain sentence saying what is wrong and what to do next.
#[derive(Debug, ToSchema)]
pub struct ErrorBody {
    pub error: String,
}

/// The body of an action (all optional).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ActionBody {
    /// Kept in the history and handed to the next step.
    pub note: Option<String>,
}

/// The actions of `POST /api/tasks/{id}/{action}`.
#[derive(Debug, ToSchema)]
#[schema(rename_all = "lowercase")]
pub enum ActionName {
    Start,
    Approve,
    Reject,
    Abort,
    Resume,
    Retry,
}

/// The body of `POST /api/tasks/{id}/move`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveBody {
    /// The status to move to; the pipeline must allow it from where the task is.
    pub status: String,
    /// Kept in the history and handed to the next step.
    pub note: Option<String>,
}

/// The body of `POST /api/tasks/{id}/say`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SayBody {
    /// What to say to the task's agent: not blank, no NUL byte, at most 32768 characters.
    #[schema(
        min_length = 1,
        pattern = r"^[^\u0000]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000]*$"
    )]
    pub text: String,
}

/// The body of `POST /api/tasks/{id}/answer`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AnswerBody {
    /// One answer per open question (`questions` of the task), in order; an empty string
    /// leaves one unanswered (but not all of them).
    #[schema(min_items = 1)]
    pub answers: Vec<AnswerText>,
}

/// One answer: no NUL byte, at most 32768 characters.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(value_type = String, pattern = r"^[^\u0000]*$")]
pub struct AnswerText(pub String);

/// `POST /api/pipelines/validate`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ValidateBody {
    /// The pipeline file's JSON text.
    pub text: String,
    /// The file name to give in error locations.
    pub file: Option<String>,
}

/// `POST /hooks/trigger/{pipeline}`: the task's title and prompt; the whole body reaches
/// the task's steps as the file named by `BATON_TRIGGER_PAYLOAD_FILE`.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct TriggerBody {
    /// One line for the card, no control characters (default: `<pipeline> (webhook)`).
    #[schema(
        min_length = 1,
        max_length = 500,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$"
    )]
    pub title: Option<String>,
    /// The task's prompt; no NUL byte, which no step could be given.
    #[schema(pattern = r"^[^\u0000]*$")]
    pub prompt: Option<String>,
}

/// One element of `baton list --json`.
#[derive(Debug, ToSchema)]
pub struct ListItem {
    pub id: i64,
    pub title: String,
    pub pipeline: String,
    /// The status id (the board's column).
    pub status: String,
    /// idle, queued, running, waiting, interrupted, done, failed or cancelled.
    pub state: String,
    pub updated_at: String,
    /// The last person who created or moved it (the engine's own moves do not count).
    pub by: Option<String>,
    /// The person who created it (none for tasks made by triggers and hooks).
    pub created_by: Option<String>,
}

/// `baton show --json`.
#[derive(Debug, ToSchema)]
pub struct ShowTask {
    pub id: i64,
    pub title: String,
    pub pipeline: String,
    pub status: String,
    pub state: String,
    /// The run's number (retry from scratch starts a new run).
    pub run: Option<i64>,
    /// In the order they ran.
    pub steps: Vec<StepItem>,
    pub history: Vec<HistoryItem>,
    /// The task's pull request on the forge, once a `pr` hook opened one.
    pub pr: Option<PrItem>,
    /// What people said to the task's agent, oldest first.
    pub messages: Vec<MessageItem>,
    /// The open questions of its agent's `needs_info` handoff, while they wait for
    /// answers (`POST /api/tasks/{id}/answer`); else empty.
    pub questions: Vec<String>,
    /// The tasks this one waits for (`after`), with where each is now.
    pub after: Vec<BlockerItem>,
    /// True while its start waits for those tasks to be done.
    pub start_waits: bool,
}

/// A task another waits for, in `show --json`'s `after`.
#[derive(Debug, ToSchema)]
pub struct BlockerItem {
    pub id: i64,
    /// idle, queued, running, waiting, interrupted, done, failed or cancelled.
    pub state: String,
    pub status: String,
}

/// A message said to a task's agent in `show --json`.
#[derive(Debug, ToSchema)]
pub struct MessageItem {
    pub id: i64,
    pub text: String,
    /// Who said it: user, tui, api or mcp.
    pub actor: String,
    pub at: String,
    /// queued or delivered.
    pub state: String,
    /// live (into the running step), next step, or new attempt.
    pub via: String,
    /// The attempt of the step it reached, as `status#attempt`.
    pub delivered_to: Option<String>,
    pub delivered_at: Option<String>,
}

/// A task's pull request in `show --json`.
#[derive(Debug, ToSchema)]
pub struct PrItem {
    /// Its web page.
    pub url: String,
    pub number: i64,
    /// open, draft, merged or closed.
    pub state: String,
    /// none, pending, passed or failed.
    pub checks: String,
    /// The checks in a few words.
    pub checks_summary: String,
}

/// A step run in `show --json`.
#[derive(Debug, ToSchema)]
pub struct StepItem {
    pub status: String,
    pub attempt: i64,
    /// pending, running, succeeded, failed, timed_out, cancelled or interrupted.
    pub state: String,
    pub exit_code: Option<i64>,
    pub outcome: Option<String>,
    pub error: Option<String>,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    /// `{"content", "metadata"}` of an agent's handoff.
    pub handoff: Option<serde_json::Value>,
    pub usage: Option<serde_json::Value>,
    pub cost: Option<f64>,
    /// `{"passed", "failed", "skipped"}` when the log held a test summary.
    pub tests: Option<serde_json::Value>,
    /// The agent's session (claude's session, codex's thread, the OpenCode session).
    pub session: Option<String>,
    /// True when the step continued an earlier session of its agent rather than start one.
    pub continued: bool,
}

/// A transition in `show --json`.
#[derive(Debug, ToSchema)]
pub struct HistoryItem {
    pub from: Option<String>,
    pub to: String,
    pub trigger: String,
    pub actor: String,
    /// The note given with it.
    pub reason: Option<String>,
    pub at: String,
    pub guards: serde_json::Value,
    pub hooks: serde_json::Value,
}

/// A page of a step's log.
#[derive(Debug, ToSchema)]
pub struct LogsPage {
    pub task: i64,
    /// The step's position, from 1.
    pub step: i64,
    pub status: String,
    pub state: String,
    pub lines: Vec<LogLineItem>,
    /// Pass as `after` to read the lines that follow.
    pub next_after: i64,
}

/// A log line.
#[derive(Debug, ToSchema)]
pub struct LogLineItem {
    /// Its id: increases along the log.
    pub id: i64,
    /// stdout, stderr or system.
    pub stream: String,
    pub text: String,
    pub at: String,
}

#[cfg(test)]
mod tests {
    use crate::engine::{Action, Outside, Request, actions::apply, create_task};
    use crate::store::Store;
    use serde_json::Value;
    use std::collections::BTreeSet;
    use utoipa::OpenApi;

    fn keys(v: &Value) -> BTreeSet<String> {
        v.as_object().unwrap().keys().cloned().collect()
    }

    /// The documented shapes have exactly the fields the CLI's `--json` prints.
    #[test]
    fn documented_shapes_match_the_cli_json() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("b.db")).unwrap();
        let text = r#"{"id": "p", "name": "P", "statuses": [
            {"id": "todo", "label": "To do", "kind": "queue"},
            {"id": "work", "label": "Work", "step": {"run": "true"}},
            {"id": "done", "label": "Done", "kind": "done"},
            {"id": "failed", "label": "Failed", "kind": "failed"}]}"#;
        let (p, diags) = crate::pipeline::parse_pipeline("p.json", text, None);
        let p = p.unwrap_or_else(|| panic!("{diags:?}"));
        let id = store.write(|db| create_task(db, &p, "t", "")).unwrap();
        let req = Request {
            task_id: id,
            action: Action::Start,
            expected_status: None,
            actor: "test".into(),
        };
        store.write(|db| apply(db, &req, &Outside::NONE)).unwrap();
        let show = crate::engine::views::show(&store.read(), id).unwrap();
        let item = crate::engine::views::list_item(&store.read().task(id).unwrap());
        let doc = serde_json::to_value(super::super::openapi::ApiDoc::openapi()).unwrap();
        let props = |name: &str| keys(&doc["components"]["schemas"][name]["properties"]);
        assert_eq!(props("ShowTask"), keys(&show));
        assert_eq!(props("ListItem"), keys(&item));
        assert_eq!(props("StepItem"), keys(&show["steps"][0]));
        assert_eq!(props("HistoryItem"), keys(&show["history"][0]));
    }
}
