//! The operations both API front ends offer (MCP tools and HTTP endpoints), in the CLI's
//! `--json` shapes. Reads and requests go through the engine client; pipeline files and
//! agent profiles are read on blocking threads.

use crate::engine::client::{self, Change, Client, Gone};
use crate::engine::{Action, Request};
use crate::workspace::Workspace;
use serde_json::Value;
use tokio::sync::broadcast;

pub use crate::engine::views::{Kind, MAX_LOG_LINES, OpError, OpResult, log_line};

/// A creation's failure sentence, classified by what it says: an unknown pipeline, a
/// refused start or a reused key (each about a task), else a failure inside.
fn creation_failed(message: String) -> OpError {
    let kind = if message.starts_with("no pipeline `")
        || message.starts_with("`after`: there is no task")
    {
        Kind::NotFound
    } else if message.starts_with("task ")
        || message.starts_with("`after`:")
        || message.starts_with("no pipeline was named")
    {
        Kind::Refused
    } else {
        Kind::Internal
    };
    OpError::new(kind, message)
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

/// Task ids: whole numbers, also when a client's JSON writes them as `3.0`.
fn task_ids<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<i64>, D::Error> {
    let numbers: Vec<serde_json::Number> = serde::Deserialize::deserialize(d)?;
    numbers
        .iter()
        .map(|n| {
            n.as_i64()
                .or_else(|| {
                    n.as_f64()
                        .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                        .map(|f| f as i64)
                })
                .ok_or_else(|| {
                    serde::de::Error::custom(format!("`after` holds task ids, and {n} is not one"))
                })
        })
        .collect()
}

/// A new task, as `baton new` takes it.
#[derive(Debug, Clone, Default, serde::Deserialize, utoipa::ToSchema)]
pub struct NewTask {
    /// One line for the card: at most 500 characters, not blank, no control characters.
    #[schema(
        min_length = 1,
        max_length = 500,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$"
    )]
    pub title: String,
    /// The task's prompt (markdown); no NUL byte, which no step could be given.
    #[serde(default)]
    #[schema(pattern = r"^[^\u0000]*$")]
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
    /// Ids of tasks it waits for: it starts (when asked to) only once every one of them
    /// is done.
    #[serde(default, deserialize_with = "task_ids")]
    #[schema(max_items = 100)]
    pub after: Vec<i64>,
}

/// A task made (or found by its idempotency key).
#[derive(Debug, Clone)]
pub struct CreatedTask {
    /// The task as `show --json` prints it.
    pub task: Value,
    /// The idempotency key named a task made before: nothing new was made.
    pub existed: bool,
}

/// The operations over one workspace.
pub struct Ops {
    pub(super) ws: Workspace,
    client: std::sync::Arc<tokio::sync::RwLock<Client>>,
    changes: broadcast::Sender<Change>,
    /// Takes over the engine when the one followed stops.
    takeover: tokio::task::JoinHandle<()>,
}

impl Ops {
    /// Connects to (or runs) the workspace's engine. The engine client holds the process's
    /// one store handle: the engine run here writes through it, the views read through it.
    pub async fn open(ws: &Workspace) -> Result<Self, String> {
        let changes = client::changes();
        let (client, gone) = Client::connect(ws, &changes).await?;
        let client = std::sync::Arc::new(tokio::sync::RwLock::new(client));
        let takeover = tokio::spawn(take_over(client.clone(), changes.clone(), gone));
        Ok(Self {
            ws: ws.clone(),
            client,
            changes,
            takeover,
        })
    }

    /// The workspace.
    pub fn workspace(&self) -> &Workspace {
        &self.ws
    }

    /// The engine client, for the typed reads and orders the operations below do not
    /// cover (event streams, webhooks).
    pub(crate) async fn client(&self) -> tokio::sync::RwLockReadGuard<'_, Client> {
        self.client.read().await
    }

    /// True when this process runs the engine.
    pub fn embedded(&self) -> bool {
        self.client.try_read().is_ok_and(|l| l.embedded())
    }

    /// Changes as they happen: `task N`, `log N` (a step run), `all`.
    pub fn changes(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }

    /// Stops an embedded engine.
    pub async fn shutdown(self) {
        self.takeover.abort();
        let client = self.client.read().await;
        client.shutdown(std::time::Duration::from_secs(30)).await;
    }

    /// `list --json`, filtered by status and pipeline.
    pub async fn list_tasks(&self, status: Option<String>, pipeline: Option<String>) -> OpResult {
        self.list_tasks_by(status, pipeline, None).await
    }

    /// [`Ops::list_tasks`], also filtered by who created or last moved a task.
    pub async fn list_tasks_by(
        &self,
        status: Option<String>,
        pipeline: Option<String>,
        by: Option<String>,
    ) -> OpResult {
        let mut all = self.client.read().await.board(status, pipeline).await?;
        if let (Some(name), Some(items)) = (by, all.as_array_mut()) {
            items.retain(|t| crate::engine::views::item_by(t, &name));
        }
        Ok(all)
    }

    /// `show --json`.
    pub async fn show_task(&self, id: i64) -> OpResult {
        self.client.read().await.task(id).await
    }

    /// Creates a task, and starts it if asked, in one transaction; returns it as
    /// `show --json` does. A key used before returns the task it made.
    pub async fn create_task(&self, new: NewTask) -> Result<CreatedTask, OpError> {
        self.create(new, None).await
    }

    /// [`Ops::create_task`] for `POST /hooks/trigger/{pipeline}`: the delivery (its body
    /// `bytes` long) is recorded on the task in the transaction that creates it.
    pub(crate) async fn create_triggered(
        &self,
        new: NewTask,
        bytes: usize,
    ) -> Result<CreatedTask, OpError> {
        self.create(new, Some(bytes)).await
    }

    async fn create(&self, new: NewTask, webhook: Option<usize>) -> Result<CreatedTask, OpError> {
        let order = crate::engine::NewTask {
            title: new.title,
            prompt: new.prompt.unwrap_or_default(),
            pipeline: new.pipeline,
            start: new.start,
            branch: None,
            actor: super::who::actor(),
            idempotency_key: new.idempotency_key,
            // A task named twice is waited for once.
            after: new
                .after
                .iter()
                .enumerate()
                .filter(|(i, id)| !new.after[..*i].contains(id))
                .map(|(_, id)| *id)
                .collect(),
        };
        // The engine checks it too; checked here, bad input is told apart from a refusal.
        order
            .check()
            .and_then(|()| crate::engine::waits::check_list(&order.after))
            .map_err(|e| OpError::new(Kind::Invalid, e.to_string()))?;
        let client = self.client.read().await;
        let made = match webhook {
            None => client.create(order).await,
            Some(bytes) => match client
                .order(crate::engine::Order::Triggered {
                    triggered: order,
                    bytes,
                })
                .await
            {
                Ok(crate::engine::Answer::Made(m)) => Ok(m),
                Ok(other) => Err(format!(
                    "the engine answered a creation with `{}` — is it another baton version?",
                    other.summary()
                )),
                Err(e) => Err(e),
            },
        }
        .map_err(creation_failed)?;
        drop(client);
        Ok(CreatedTask {
            task: self.show_task(made.id).await?,
            existed: made.existed,
        })
    }

    /// Applies an action to a task (start, approve, reject, move, abort, resume, retry);
    /// returns the task afterwards as `show --json` does.
    /// `say` and `answer`: their text is checked here first, so that bad input is a 400
    /// rather than a refusal.
    pub async fn talk(&self, id: i64, action: Action) -> OpResult {
        let checked = match &action {
            Action::Say { text } => crate::engine::check_text(text, "the message"),
            Action::Answer { answers } => crate::engine::check_answers(answers),
            _ => Ok(()),
        };
        checked.map_err(|e| OpError::new(Kind::Invalid, e.to_string()))?;
        self.act(id, action).await
    }

    pub async fn act(&self, id: i64, action: Action) -> OpResult {
        self.request(id, action).await?;
        self.show_task(id).await
    }

    /// Hands the engine an issue the forge showed (a task when an `issue` trigger watches
    /// it); the engine's one-line answer.
    pub(crate) async fn issue(
        &self,
        issue: crate::forge::issues::IssueSeen,
    ) -> Result<String, String> {
        let client = self.client.read().await;
        client
            .order(crate::engine::Order::Issue { issue })
            .await
            .map(|a| a.summary())
    }

    /// Hands the engine a request about task `id` at the status it is at now; its summary.
    pub(crate) async fn request(&self, id: i64, action: Action) -> Result<String, OpError> {
        self.request_as(id, action, &super::who::actor()).await
    }

    /// [`Ops::request`] on behalf of `actor`.
    pub(crate) async fn request_as(
        &self,
        id: i64,
        action: Action,
        actor: &str,
    ) -> Result<String, OpError> {
        // The status seen now (a task that is not there is told so here): the request
        // fails if someone moved the task meanwhile.
        let client = self.client.read().await;
        let status = client.status_of(id).await?;
        let expected_status = match action {
            Action::Start => None,
            _ => Some(status),
        };
        let req = Request {
            task_id: id,
            action,
            expected_status,
            actor: actor.into(),
        };
        client.send(req).await.map_err(refused)
    }

    /// Hands the engine a forge event or comment about task `id` (applied wherever the
    /// task is); its summary and what became of it.
    pub(crate) async fn forge(
        &self,
        id: i64,
        action: Action,
        actor: &str,
    ) -> Result<(String, crate::engine::forge_events::ForgeOutcome), OpError> {
        let req = Request {
            task_id: id,
            action,
            expected_status: None,
            actor: actor.into(),
        };
        match self
            .client
            .read()
            .await
            .order(crate::engine::Order::Act(req))
            .await
        {
            Ok(crate::engine::Answer::Applied {
                summary,
                forge: Some(outcome),
                ..
            }) => Ok((summary, outcome)),
            Ok(other) => Err(OpError::new(
                Kind::Internal,
                format!(
                    "the engine answered a forge event with `{}` — is it another baton version?",
                    other.summary()
                ),
            )),
            Err(e) => Err(refused(e)),
        }
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
        self.client.read().await.logs(id, step, after, tail).await
    }

    /// The task's changes: its branch against the base, plus uncommitted work.
    pub async fn task_diff(&self, id: i64) -> OpResult {
        self.client.read().await.diff(id).await
    }
}

/// When the engine followed stops, runs one here (or follows the next one), as the TUI does,
/// so requested steps do not wait for nobody.
async fn take_over(
    client: std::sync::Arc<tokio::sync::RwLock<Client>>,
    changes: broadcast::Sender<Change>,
    mut gone: Gone,
) {
    while let Some(rx) = gone.take() {
        let Ok(ended) = rx.await else { return };
        let next = client.read().await.after_end(&changes, ended).await;
        match next {
            Ok((next, next_gone)) => {
                if next.embedded() {
                    tracing::info!("the engine followed has stopped; this process runs one now");
                }
                *client.write().await = next;
                gone = next_gone;
            }
            Err(e) => {
                tracing::error!("the engine followed has stopped and none could start here: {e}");
                return;
            }
        }
    }
}
