//! `GET /api/events`: Server-Sent Events for the board. Events: `task` (a task changed: its
//! `list --json` item), `step_started` / `step_finished`, and `log` (lines of the task named
//! by `?task=ID`). Each event's id is a cursor on durable store values, `C.L.T`: C the task
//! change number read up to (every change of a task takes the next number in its own
//! transaction), L the last log line id sent, T the time (ms) the stream stood at. A client
//! reconnecting with `Last-Event-ID` gets every task changed after C, in its latest state,
//! and every line after L (at-least-once: a task may come again in the same state).
//! A stream ends when the token it was opened with is rotated away (a named one: revoked).

use super::extract::ApiQuery;
use super::http::AppState;
use super::http::error;
use super::ops::log_line;
use crate::engine::views as json;
use crate::engine::wake::Change;
use crate::store::{StepState, now_ms};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::convert::Infallible;
use tokio::sync::mpsc;

/// Log lines read per look.
const LOG_BATCH: i64 = 1_000;

/// `GET /api/events` parameters.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Also stream this task's log lines.
    task: Option<i64>,
}

/// Tasks read per look when catching up.
const TASK_BATCH: i64 = 500;

/// Where a stream stands.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Cursor {
    /// The task change number read up to: every change up to it has been sent.
    change: i64,
    log_id: i64,
    /// When the stream stood here (ms): steps that started or ended before are not
    /// announced on first sight.
    at: i64,
}

impl Cursor {
    fn parse(s: &str) -> Option<Self> {
        let parts: Vec<&str> = s.trim().split('.').collect();
        match parts[..] {
            [c, l, t] => Some(Self {
                change: c.parse().ok()?,
                log_id: l.parse().ok()?,
                at: t.parse().ok()?,
            }),
            // An id of an older baton (`time.line`): every task is sent again.
            [t, l] => Some(Self {
                change: 0,
                log_id: l.parse().ok()?,
                at: t.parse().ok()?,
            }),
            _ => None,
        }
    }
    fn id(&self) -> String {
        format!("{}.{}.{}", self.change, self.log_id, self.at)
    }
}

/// The live event stream of the board.
#[utoipa::path(get, path = "/api/events",
    params(EventsQuery, ("Last-Event-ID" = Option<String>, Header, description = "resume after this event id")),
    responses((status = 200, content_type = "text/event-stream", body = String,
        description = "events task, step_started, step_finished, log"),
        (status = 404, body = super::schema::ErrorBody, description = "`task` names no task"),
        (status = 503, body = super::schema::ErrorBody, description = "the board's database could not be read")),
    security(("bearer" = [])))]
pub async fn events(
    State(s): State<AppState>,
    ApiQuery(q): ApiQuery<EventsQuery>,
    headers: HeaderMap,
) -> Response {
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(Cursor::parse);
    // Subscribe before the first read, so nothing falls between the two.
    let mut changes = s.ops.changes();
    let client = s.ops.client().await;
    let last = match client.last_change().await {
        Ok(change) => change,
        Err(e) => {
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "the board's database could not be read ({}) — try again",
                    e.message
                ),
            );
        }
    };
    if let Some(id) = q.task
        && let Err(e) = client.status_of(id).await
    {
        let code = match e.kind {
            crate::engine::views::Kind::NotFound => StatusCode::NOT_FOUND,
            _ => StatusCode::SERVICE_UNAVAILABLE,
        };
        return error(code, e.message);
    }
    drop(client);
    let cursor = match resume {
        // An id from further on than this board has come (another board's, or one from
        // before a restore) would wait for changes that may never come: the stream goes
        // on from where the board stands.
        Some(c) if c.change > last => Cursor { change: last, ..c },
        Some(c) => c,
        None => Cursor {
            change: last,
            log_id: 0,
            at: now_ms(),
        },
    };
    let (tx, rx) = mpsc::channel::<Event>(256);
    let mut feed = Feed {
        s: s.clone(),
        task: q.task,
        cursor,
        steps: HashMap::new(),
        seen: Default::default(),
        shown: HashMap::new(),
        tx,
    };
    let stopping = s.stopping.clone();
    // The stream ends when the token it was opened with stops being the token.
    let mut rotated = s.token_changes();
    let opened_with = super::http::bearer(&headers).map(str::to_string);
    tokio::spawn(async move {
        use tokio::sync::broadcast::error::RecvError;
        let mut change = Some(Change::All);
        loop {
            if let Some(c) = change
                && feed.apply(c).await.is_err()
            {
                return;
            }
            change = tokio::select! {
                c = changes.recv() => match c {
                    Ok(c) => Some(c),
                    Err(RecvError::Lagged(_)) => Some(Change::All),
                    Err(RecvError::Closed) => return,
                },
                r = rotated.changed() => {
                    let still = r.is_ok() && opened_with.as_deref().is_some_and(|given| {
                        let now = rotated.borrow_and_update();
                        !now.is_empty() && super::token::matches(&now, given)
                    });
                    // A person's own token: still there unless revoked.
                    let named = match (&opened_with, still || r.is_err()) {
                        (Some(given), false) => {
                            super::http::named_owner_of(&feed.s, given).await.is_some()
                        }
                        _ => false,
                    };
                    if !still && !named {
                        return;
                    }
                    None
                }
                _ = stopping.cancelled() => return,
                _ = feed.tx.closed() => return,
            };
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|e| (Ok::<_, Infallible>(e), rx))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// One stream's state.
struct Feed {
    s: AppState,
    task: Option<i64>,
    cursor: Cursor,
    /// The last state seen of each step run.
    steps: HashMap<i64, StepState>,
    /// The step run the next look at each task's step runs starts at: the ones before it
    /// were seen ending, so a long history is not read again at each change.
    seen: std::sync::Arc<HashMap<i64, i64>>,
    /// The last `task` event sent of each task: one engine change can wake the feed
    /// several times, and a client wants each state once.
    shown: HashMap<i64, String>,
    tx: mpsc::Sender<Event>,
}

/// The client has gone.
struct Gone;

impl Feed {
    async fn send(&mut self, name: &str, data: Value) -> Result<(), Gone> {
        let ev = Event::default()
            .event(name)
            .id(self.cursor.id())
            .data(data.to_string());
        self.tx.send(ev).await.map_err(|_| Gone)
    }

    async fn apply(&mut self, change: Change) -> Result<(), Gone> {
        match change {
            // Any task change: every task changed since the cursor, in change order. A
            // notice names one task, but notices can be dropped or overtake each other;
            // the change numbers cannot.
            Change::Task(_) => self.tasks_since().await,
            Change::All => {
                self.tasks_since().await?;
                self.logs(None).await
            }
            Change::Log(step) => self.logs(Some(step)).await,
            Change::Notify {
                task_id,
                title,
                body,
            } => {
                let data = serde_json::json!({"task": task_id, "title": title, "body": body});
                self.send("notify", data).await
            }
            // The engine's sentences for people are the boards' to show.
            Change::Notice(_) => Ok(()),
        }
    }

    /// Sends each task changed after the cursor; the cursor then stands at the last change
    /// read, every change before it having been read too.
    async fn tasks_since(&mut self) -> Result<(), Gone> {
        loop {
            let after = self.cursor.change;
            let read = self
                .s
                .ops
                .client()
                .await
                .changed_after(after, TASK_BATCH, self.cursor.at, self.seen.clone())
                .await;
            // A failed read is tried again at the next change; the cursor stays.
            let Ok(batch) = read else {
                return Ok(());
            };
            let full = batch.len() as i64 == TASK_BATCH;
            for changed in batch {
                self.cursor.change = changed.change;
                // The read's copy is gone by now: this changes the map in place.
                std::sync::Arc::make_mut(&mut self.seen).insert(changed.task.id, changed.next_from);
                self.task_changed(changed.task, &changed.steps).await?;
                // Those behind the task's next look are never read again.
                for step in changed.steps.iter().filter(|s| s.id < changed.next_from) {
                    self.steps.remove(&step.id);
                }
            }
            if !full {
                return Ok(());
            }
        }
    }

    async fn task_changed(
        &mut self,
        task: crate::store::Task,
        steps: &[crate::store::StepRun],
    ) -> Result<(), Gone> {
        let id = task.id;
        // Lines first, then steps, then the task: a step logs, ends, and its task moves on.
        // (A step that ended may have written lines the last look missed.)
        if self.task == Some(id) {
            self.logs(None).await?;
        }
        for step in steps {
            let before = self.steps.insert(step.id, step.state);
            let since = self.cursor.at;
            let recent = |at: Option<i64>| before.is_some() || at.is_some_and(|a| a >= since);
            let data = json!({
                "task": id, "step": step.seq, "status": step.status, "attempt": step.attempt,
                "state": step.state, "exit_code": step.exit_code, "outcome": step.outcome,
            });
            if step.state == StepState::Running
                && before != Some(StepState::Running)
                && recent(step.started_at)
            {
                self.send("step_started", data).await?;
            } else if step.state.is_final()
                && !before.is_some_and(StepState::is_final)
                && recent(step.finished_at)
            {
                self.send("step_finished", data).await?;
            }
        }
        let item = json::list_item(&task);
        let text = item.to_string();
        if self.shown.get(&id) == Some(&text) {
            return Ok(());
        }
        self.shown.insert(id, text);
        self.send("task", item).await
    }

    /// New lines of the followed task: of one step run, or of all of them.
    async fn logs(&mut self, step: Option<i64>) -> Result<(), Gone> {
        let Some(task) = self.task else {
            return Ok(());
        };
        loop {
            let after = self.cursor.log_id;
            let lines = self
                .s
                .ops
                .client()
                .await
                .task_lines(task, step, after, LOG_BATCH)
                .await
                .unwrap_or_default();
            let full = lines.len() as i64 == LOG_BATCH;
            for l in &lines {
                self.cursor.log_id = l.id;
                let mut data = log_line(l);
                data["task"] = json!(task);
                data["step_run"] = json!(l.step_run_id);
                self.send("log", data).await?;
            }
            if !full {
                return Ok(());
            }
        }
    }
}
