//! The operations both API front ends offer (MCP tools and HTTP endpoints), in the CLI's
//! `--json` shapes. Reads go through the store's own threads, requests through the engine
//! link; pipeline files, agent profiles and git run on blocking threads.

use super::link::Link;
use crate::cli::json;
use crate::engine::wake::Change;
use crate::engine::{Action, EngineError, MAX_TITLE, Request, create_and_start};
use crate::store::{StoreError, StoreHandle, TaskFilter, rfc3339};
use crate::workspace::Workspace;
use serde_json::{Value, json};
use tokio::sync::broadcast;

/// Log lines one call returns at most.
pub const MAX_LOG_LINES: usize = 2_000;

/// What kind of failure an operation met, for HTTP status codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// No such task, pipeline or step.
    NotFound,
    /// The input is wrong.
    Invalid,
    /// The request does not fit the task's state (no longer at a gate, say).
    Refused,
    /// Something failed inside.
    Internal,
}

/// A failure: the sentence the CLI prints, and its kind.
#[derive(Debug, Clone)]
pub struct OpError {
    pub kind: Kind,
    pub message: String,
}

impl OpError {
    /// An error of a kind.
    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for OpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<StoreError> for OpError {
    fn from(e: StoreError) -> Self {
        let kind = match e {
            StoreError::NoTask(_) => Kind::NotFound,
            _ => Kind::Internal,
        };
        Self::new(kind, e.to_string())
    }
}

/// A request's failure sentence, classified by what it says.
fn refused(message: String) -> OpError {
    let kind = if message.contains("does not exist") {
        Kind::NotFound
    } else {
        Kind::Refused
    };
    OpError::new(kind, message)
}

/// The result of an operation.
pub type OpResult = Result<Value, OpError>;

/// A new task, as `baton new` takes it.
#[derive(Debug, Clone, Default, serde::Deserialize, utoipa::ToSchema)]
pub struct NewTask {
    /// One line for the card (at most 500 characters, not blank).
    #[schema(min_length = 1, max_length = 500, pattern = r"\S")]
    pub title: String,
    /// The task's prompt (markdown).
    #[serde(default)]
    pub prompt: Option<String>,
    /// Pipeline id (default: the workspace's first own pipeline, else `quick_fix`).
    #[serde(default)]
    pub pipeline: Option<String>,
    /// Start it right away (in the same transaction as the creation).
    #[serde(default)]
    pub start: bool,
    /// Over HTTP, the `Idempotency-Key` header.
    #[serde(skip)]
    pub idempotency_key: Option<String>,
}

/// A task made (or found by its idempotency key).
#[derive(Debug, Clone)]
pub struct CreatedTask {
    /// The task as `show --json` prints it.
    pub task: Value,
    /// The idempotency key named a task made before: nothing new was made.
    pub existed: bool,
}

/// The longest idempotency key, in bytes.
pub const MAX_IDEMPOTENCY_KEY: usize = 255;

/// The operations over one workspace.
pub struct Ops {
    pub(super) ws: Workspace,
    store: StoreHandle,
    link: std::sync::Arc<tokio::sync::RwLock<Link>>,
    changes: broadcast::Sender<Change>,
    /// Takes over the engine when the one followed stops.
    takeover: tokio::task::JoinHandle<()>,
}

impl Ops {
    /// Opens the workspace's store and connects to (or runs) its engine.
    pub async fn open(ws: &Workspace) -> Result<Self, String> {
        let changes = super::link::changes();
        let (link, gone) = Link::connect(ws, &changes).await?;
        let link = std::sync::Arc::new(tokio::sync::RwLock::new(link));
        let takeover = tokio::spawn(take_over(ws.clone(), link.clone(), changes.clone(), gone));
        let path = ws.db_path();
        let shown = path.display().to_string();
        let store = tokio::task::spawn_blocking(move || StoreHandle::open(&path))
            .await
            .map_err(|e| {
                format!("opening the board's database {shown} stopped unexpectedly ({e}) — run the command again")
            })?
            .map_err(|e| {
                format!("cannot open the board's database {shown}: {e} — check that .baton/ is readable and writable, then run the command again")
            })?;
        Ok(Self {
            ws: ws.clone(),
            store,
            link,
            changes,
            takeover,
        })
    }

    /// The workspace.
    pub fn workspace(&self) -> &Workspace {
        &self.ws
    }

    /// The store handle (reads for event streams).
    pub fn store(&self) -> &StoreHandle {
        &self.store
    }

    /// True when this process runs the engine.
    pub fn embedded(&self) -> bool {
        self.link.try_read().is_ok_and(|l| l.embedded())
    }

    /// Changes as they happen: `task N`, `log N` (a step run), `all`.
    pub fn changes(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }

    /// Stops an embedded engine.
    pub async fn shutdown(self) {
        self.takeover.abort();
        let link = std::mem::replace(
            &mut *self.link.write().await,
            Link::Attached { socket: None },
        );
        link.shutdown().await;
    }

    /// `list --json`, filtered by status and pipeline.
    pub async fn list_tasks(&self, status: Option<String>, pipeline: Option<String>) -> OpResult {
        Ok(self
            .store
            .read(move |db| {
                let tasks = db.list_tasks(&TaskFilter {
                    status: status.as_deref(),
                    pipeline: pipeline.as_deref(),
                })?;
                Ok(Value::Array(tasks.iter().map(json::list_item).collect()))
            })
            .await?)
    }

    /// `show --json`.
    pub async fn show_task(&self, id: i64) -> OpResult {
        Ok(self.store.read(move |db| json::show(db, id)).await?)
    }

    /// Creates a task, and starts it if asked, in one transaction; returns it as
    /// `show --json` does. A key used before returns the task it made.
    pub async fn create_task(&self, new: NewTask) -> Result<CreatedTask, OpError> {
        let title = new.title;
        if let Some(key) = &new.idempotency_key
            && (key.is_empty() || key.len() > MAX_IDEMPOTENCY_KEY)
        {
            return Err(OpError::new(
                Kind::Invalid,
                format!(
                    "the idempotency key is {} bytes long; give 1 to {MAX_IDEMPOTENCY_KEY} bytes, such as a UUID",
                    key.len()
                ),
            ));
        }
        if crate::engine::blank_title(&title) {
            return Err(OpError::new(
                Kind::Invalid,
                "a task needs a title — give `title`, one line saying what to do",
            ));
        }
        if let Some(problem) =
            crate::engine::nul_problem(&title, new.prompt.as_deref().unwrap_or(""))
        {
            return Err(OpError::new(Kind::Invalid, problem));
        }
        if title.chars().count() > MAX_TITLE {
            return Err(OpError::new(
                Kind::Invalid,
                format!(
                    "the title is {} characters long; keep it to {MAX_TITLE} at most and put the details in the prompt",
                    title.chars().count()
                ),
            ));
        }
        let pipeline = self.pipeline_or_default(new.pipeline.as_deref()).await?;
        let prompt = new.prompt.unwrap_or_default();
        let (start, key) = (new.start, new.idempotency_key);
        let made = self
            .store
            .write(move |db| {
                create_and_start(
                    db,
                    &crate::engine::NewTask {
                        pipeline: &pipeline,
                        title: &title,
                        prompt: &prompt,
                        actor: "api",
                        start,
                        base_branch: None,
                        idempotency_key: key.as_deref(),
                    },
                )
            })
            .await
            .map_err(|e| match e {
                EngineError::Refused { .. } | EngineError::Decide { .. } => {
                    OpError::new(Kind::Refused, e.to_string())
                }
                _ => OpError::new(Kind::Internal, e.to_string()),
            })?;
        // The engine runs the step and the start's hooks; boards show the new card.
        self.poke().await;
        Ok(CreatedTask {
            task: self.show_task(made.id).await?,
            existed: made.existed,
        })
    }

    /// Applies an action to a task (start, approve, reject, move, abort, resume, retry);
    /// returns the task afterwards as `show --json` does.
    pub async fn act(&self, id: i64, action: Action) -> OpResult {
        self.request(id, action).await?;
        self.show_task(id).await
    }

    async fn request(&self, id: i64, action: Action) -> Result<String, OpError> {
        // The status seen now: the request fails if someone moved the task meanwhile.
        let task = self.store.read(move |db| db.task(id)).await?;
        let expected_status = match action {
            Action::Start => None,
            _ => Some(task.status),
        };
        let req = Request {
            task_id: id,
            action,
            expected_status,
            actor: "api".into(),
        };
        let link = self.link.read().await;
        link.send(&self.ws, req).await.map_err(refused)
    }

    /// Wakes a running engine (and the boards it serves) after a direct write.
    async fn poke(&self) {
        let dir = self.ws.dir();
        let _ = tokio::task::spawn_blocking(move || crate::engine::wake::poke(&dir)).await;
    }

    /// A step's log lines: `step` counts from 1 as in `baton show` (default: the latest);
    /// `after` is the last line id already seen; `tail` keeps only the last lines.
    pub async fn task_logs(
        &self,
        id: i64,
        step: Option<usize>,
        after: Option<i64>,
        tail: Option<usize>,
    ) -> OpResult {
        if tail == Some(0) {
            return Err(OpError::new(
                Kind::Invalid,
                "`tail` counts lines from 1: leave it out for the whole log",
            ));
        }
        let limit = tail.unwrap_or(MAX_LOG_LINES).clamp(1, MAX_LOG_LINES);
        self.store
            .read(move |db| {
                db.task(id)?;
                let steps = db.step_runs(id)?;
                let (n, chosen) = match step {
                    Some(0) => {
                        return Ok(Err(OpError::new(
                            Kind::Invalid,
                            "steps are numbered from 1, as in `baton show`",
                        )));
                    }
                    Some(n) => match steps.get(n - 1) {
                        Some(s) => (n, s.clone()),
                        None => {
                            return Ok(Err(OpError::new(
                                Kind::NotFound,
                                format!(
                                    "task {id} has {} step(s); `baton show {id}` lists them",
                                    steps.len()
                                ),
                            )));
                        }
                    },
                    None => match steps.last() {
                        Some(s) => (steps.len(), s.clone()),
                        None => {
                            return Ok(Err(OpError::new(
                                Kind::NotFound,
                                format!(
                                    "task {id} has not run a step yet, so it has no logs — start it (`baton start {id}`) and ask again"
                                ),
                            )));
                        }
                    },
                };
                // With `after`, the lines that follow it; else the last `limit` lines.
                let lines = match after {
                    Some(a) => db.log_lines(chosen.id, a, limit as i64)?,
                    None => db.log_tail(chosen.id, limit as i64)?,
                };
                let next = lines.last().map_or(after.unwrap_or(0), |l| l.id);
                let lines: Vec<Value> = lines.iter().map(log_line).collect();
                Ok(Ok(json!({
                    "task": id,
                    "step": n,
                    "status": chosen.status,
                    "state": chosen.state,
                    "lines": lines,
                    "next_after": next,
                })))
            })
            .await?
    }

    /// The task's changes: its branch against the base, plus uncommitted work.
    pub async fn task_diff(&self, id: i64) -> OpResult {
        let task = self.store.read(move |db| db.task(id)).await?;
        // Finding the repository runs git: on a blocking thread with a connection of its own.
        let ws = self.ws.clone();
        let git = tokio::task::spawn_blocking(move || {
            let cfg = ws.config().map_err(|e| {
                format!("cannot show task {id}'s diff because config.toml is wrong: {e} — fix .baton/config.toml and ask again")
            })?;
            let store = crate::store::Store::open_read_only(&ws.db_path()).map_err(|e| {
                format!("cannot show task {id}'s diff because the board's database did not open: {e} — ask again")
            })?;
            crate::engine::GitCtx::detect(&ws, &cfg, &store.read()).map_err(|e| {
                format!("cannot show task {id}'s diff because git failed on the repository: {e} — check `git status` in the workspace and ask again")
            })
        })
        .await
        .map_err(|e| {
            OpError::new(
                Kind::Internal,
                format!("finding task {id}'s repository stopped unexpectedly ({e}) — ask again"),
            )
        })?
        .map_err(|e| OpError::new(Kind::Internal, e))?;
        let Some(git) = git else {
            return Err(OpError::new(
                Kind::Refused,
                format!(
                    "{} is not a git repository, so tasks have no diffs",
                    self.ws.root().display()
                ),
            ));
        };
        let Some(wt) = task.worktree.clone() else {
            return Err(OpError::new(
                Kind::Refused,
                format!(
                    "task {id} has no worktree (it has not started a step yet, or it was removed when the task ended) — its branch is {}",
                    task.branch.as_deref().unwrap_or("not created")
                ),
            ));
        };
        let base = task.base_branch.clone().unwrap_or(git.base);
        let b = base.clone();
        let text = tokio::task::spawn_blocking(move || {
            crate::workspace::git::diff(std::path::Path::new(&wt), &b, false)
        })
        .await
        .map_err(|e| OpError::new(Kind::Internal, e.to_string()))?
        .map_err(|e| OpError::new(Kind::Internal, e.to_string()))?;
        Ok(json!({
            "task": id,
            "base": base,
            "branch": task.branch,
            "diff": crate::ansi::strip(&text),
        }))
    }
}

/// When the engine followed stops, runs one here (or follows the next one), as the TUI does,
/// so requested steps do not wait for nobody.
async fn take_over(
    ws: Workspace,
    link: std::sync::Arc<tokio::sync::RwLock<Link>>,
    changes: broadcast::Sender<Change>,
    mut gone: super::link::Gone,
) {
    while let Some(rx) = gone.take() {
        if rx.await.is_err() {
            return;
        }
        match Link::connect(&ws, &changes).await {
            Ok((next, next_gone)) => {
                if next.embedded() {
                    tracing::info!("the engine followed has stopped; this process runs one now");
                }
                *link.write().await = next;
                gone = next_gone;
            }
            Err(e) => {
                tracing::error!("the engine followed has stopped and none could start here: {e}");
                return;
            }
        }
    }
}

/// A stored log line as JSON (escape sequences removed).
pub fn log_line(l: &crate::store::LogLine) -> Value {
    json!({
        "id": l.id,
        "stream": l.stream,
        "text": crate::ansi::strip(&l.text),
        "at": rfc3339(l.ts),
    })
}
