//! `GET /api/events`: Server-Sent Events for the board. Events: `task` (a task changed: its
//! `list --json` item), `step_started` / `step_finished`, and `log` (lines of the task named
//! by `?task=ID`). Each event's id is a cursor on durable store values, `T.L`: T the newest
//! task `updated_at` (ms) sent, L the last log line id sent. A client reconnecting with
//! `Last-Event-ID` gets every task changed since T and every line after L again
//! (at-least-once: a task changed twice in one millisecond may come twice).

use super::extract::ApiQuery;
use super::http::AppState;
use super::ops::log_line;
use crate::cli::json;
use crate::engine::wake::Change;
use crate::store::{StepState, now_ms};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::convert::Infallible;
use tokio::sync::mpsc;

/// Log lines read per look.
const LOG_BATCH: i64 = 1_000;

/// `GET /api/events` parameters.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
pub struct EventsQuery {
    /// Also stream this task's log lines.
    task: Option<i64>,
}

/// Where a stream stands.
#[derive(Debug, Clone, Copy)]
struct Cursor {
    task_at: i64,
    log_id: i64,
}

impl Cursor {
    fn parse(s: &str) -> Option<Self> {
        let (t, l) = s.trim().split_once('.')?;
        Some(Self {
            task_at: t.parse().ok()?,
            log_id: l.parse().ok()?,
        })
    }
    fn id(&self) -> String {
        format!("{}.{}", self.task_at, self.log_id)
    }
}

/// The live event stream of the board.
#[utoipa::path(get, path = "/api/events",
    params(EventsQuery, ("Last-Event-ID" = Option<String>, Header, description = "resume after this event id")),
    responses((status = 200, content_type = "text/event-stream", body = String,
        description = "events task, step_started, step_finished, log")),
    security(("bearer" = [])))]
pub async fn events(
    State(s): State<AppState>,
    ApiQuery(q): ApiQuery<EventsQuery>,
    headers: HeaderMap,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(Cursor::parse);
    let (tx, rx) = mpsc::channel::<Event>(256);
    let mut feed = Feed {
        s: s.clone(),
        task: q.task,
        since: resume.map_or_else(now_ms, |c| c.task_at),
        cursor: resume.unwrap_or(Cursor {
            task_at: now_ms(),
            log_id: 0,
        }),
        steps: HashMap::new(),
        shown: HashMap::new(),
        tx,
    };
    // Subscribe before the catch-up read, so nothing falls between the two.
    let mut changes = s.ops.changes();
    let stopping = s.stopping.clone();
    tokio::spawn(async move {
        use tokio::sync::broadcast::error::RecvError;
        let mut change = Change::All;
        loop {
            if feed.apply(change).await.is_err() {
                return;
            }
            change = tokio::select! {
                c = changes.recv() => match c {
                    Ok(c) => c,
                    Err(RecvError::Lagged(_)) => Change::All,
                    Err(RecvError::Closed) => return,
                },
                _ = stopping.cancelled() => return,
                _ = feed.tx.closed() => return,
            };
        }
    });
    let stream =
        futures_util::stream::unfold(
            rx,
            |mut rx| async move { rx.recv().await.map(|e| (Ok(e), rx)) },
        );
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// One stream's state.
struct Feed {
    s: AppState,
    task: Option<i64>,
    /// Steps that started or finished before this are not announced on first sight.
    since: i64,
    cursor: Cursor,
    /// The last state seen of each step run.
    steps: HashMap<i64, StepState>,
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
            Change::Task(id) => self.task_changed(id).await,
            Change::Log(step) => self.logs(Some(step)).await,
            Change::Notify {
                task_id,
                title,
                body,
            } => {
                let data = serde_json::json!({"task": task_id, "title": title, "body": body});
                self.send("notify", data).await
            }
            Change::All => {
                let since = self.cursor.task_at;
                let ids = self
                    .s
                    .ops
                    .store()
                    .read(move |db| {
                        let all = db.list_tasks(&crate::store::TaskFilter {
                            status: None,
                            pipeline: None,
                        })?;
                        Ok(all
                            .into_iter()
                            .filter(|t| t.updated_at >= since)
                            .map(|t| t.id)
                            .collect::<Vec<_>>())
                    })
                    .await
                    .unwrap_or_default();
                for id in ids.into_iter().rev() {
                    self.task_changed(id).await?;
                }
                self.logs(None).await
            }
        }
    }

    async fn task_changed(&mut self, id: i64) -> Result<(), Gone> {
        let read = self
            .s
            .ops
            .store()
            .read(move |db| Ok((db.task(id)?, db.step_runs(id)?)))
            .await;
        let Ok((task, steps)) = read else {
            return Ok(());
        };
        self.cursor.task_at = self.cursor.task_at.max(task.updated_at);
        // Lines first, then steps, then the task: a step logs, ends, and its task moves on.
        // (A step that ended may have written lines the last look missed.)
        if self.task == Some(id) {
            self.logs(None).await?;
        }
        for (n, step) in steps.iter().enumerate() {
            let before = self.steps.insert(step.id, step.state);
            let since = self.since;
            let recent = |at: Option<i64>| before.is_some() || at.is_some_and(|a| a >= since);
            let data = json!({
                "task": id, "step": n + 1, "status": step.status, "attempt": step.attempt,
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
                .store()
                .read(move |db| {
                    let runs = match step {
                        Some(s) => vec![db.step_run(s)?],
                        None => db.step_runs(task)?,
                    };
                    let mut out = Vec::new();
                    for r in runs.iter().filter(|r| r.task_id == task) {
                        out.extend(db.log_lines(r.id, after, LOG_BATCH)?);
                    }
                    out.sort_by_key(|l| l.id);
                    out.truncate(LOG_BATCH as usize);
                    Ok(out)
                })
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
