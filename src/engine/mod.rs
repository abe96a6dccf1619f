//! The engine: applies requests through `transition()`, runs steps at most `max_parallel`
//! at once, writes their logs, and moves tasks on when steps end. It knows nothing of the
//! TUI: front ends talk to it through an [`EngineHandle`] or, from another process, through
//! the `commands` table.

pub mod actions;
pub mod client;
mod effects;
mod error;
mod logwriter;
mod recovery;
mod results;
mod runner;
mod scheduler;
mod transition;
mod trigger_loop;
pub mod triggers;

pub use actions::{Action, Applied, Request, create_task, move_options};
pub use effects::GitCtx;
pub use error::{EngineError, Result};
pub use recovery::Recovered;
pub use results::StepReport;
pub use transition::{entry_state, pipeline_of};

use crate::store::{CommandState, Db, NewLogLine, Store};
use crate::workspace::{Config, EngineLock, ShutdownMode, Workspace};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// How often the engine looks at the commands table and the step queue.
const POLL: Duration = Duration::from_millis(100);
/// How often the engine looks for due work even when nothing seems to have changed.
const SWEEP: Duration = Duration::from_secs(2);

/// Something that happened, for subscribers such as the TUI.
#[derive(Debug, Clone)]
pub enum EngineEvent {
    /// A task's status, state or steps changed: reload it.
    TaskChanged { task_id: i64 },
    /// New log lines of a running step.
    LogLines {
        task_id: i64,
        step_run_id: i64,
        lines: Vec<NewLogLine>,
    },
    /// A message for people (a failed request, a hook error).
    Notice { task_id: Option<i64>, text: String },
}

type Reply = oneshot::Sender<std::result::Result<String, String>>;

/// A front end's connection to an embedded engine.
#[derive(Clone)]
pub struct EngineHandle {
    requests: mpsc::Sender<(Request, Reply)>,
    events: broadcast::Sender<EngineEvent>,
    shutdown: CancellationToken,
}

impl EngineHandle {
    /// Sends a request and waits for its one-line result or error sentence.
    pub async fn send(&self, req: Request) -> std::result::Result<String, String> {
        let (tx, rx) = oneshot::channel();
        self.requests
            .send((req, tx))
            .await
            .map_err(|_| "the engine has stopped".to_string())?;
        rx.await.map_err(|_| "the engine has stopped".to_string())?
    }

    /// Subscribes to engine events.
    pub fn subscribe(&self) -> broadcast::Receiver<EngineEvent> {
        self.events.subscribe()
    }

    /// Asks the engine to shut down gracefully (per the workspace's `shutdown` mode).
    pub fn shutdown(&self) {
        self.shutdown.cancel();
    }
}

/// Why the engine stopped a running step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopReason {
    /// Abort or the task moved on: the step run is already final.
    Moved,
    /// Engine shutdown: the step is interrupted and can be resumed.
    Shutdown,
}

struct Running {
    cancel: CancellationToken,
    reason: Option<StopReason>,
    /// Cancelled by the step's task once its process is gone and its report is sent.
    ended: CancellationToken,
}

/// A condition on the store that ends a run.
pub type StopWhen = Box<dyn Fn(&Db) -> bool + Send>;

/// When a headless engine returns.
#[derive(Default)]
pub struct RunOptions {
    /// Stop once nothing runs or is queued (and no command is pending).
    pub exit_when_idle: bool,
    /// Stop (draining running steps) once this returns true.
    pub stop_when: Option<StopWhen>,
}

/// The engine of one workspace. Holds the workspace's engine lock while it exists.
pub struct Engine {
    ws: Workspace,
    cfg: Config,
    store: Arc<Mutex<Store>>,
    _lock: EngineLock,
    events: broadcast::Sender<EngineEvent>,
    requests_tx: mpsc::Sender<(Request, Reply)>,
    requests: mpsc::Receiver<(Request, Reply)>,
    shutdown: CancellationToken,
    running: HashMap<i64, Running>,
    finished_tx: mpsc::UnboundedSender<(i64, StepReport)>,
    finished: mpsc::UnboundedReceiver<(i64, StepReport)>,
    logs: mpsc::Sender<logwriter::LogMsg>,
    log_writer: tokio::task::JoinHandle<()>,
    git: Option<GitCtx>,
    /// Clean-ups and hooks running after committed transitions.
    followups: tokio::task::JoinSet<()>,
    triggers: triggers::TriggerSet,
    /// Problems in the workspace's pipeline triggers (those triggers are skipped).
    pub trigger_errors: Vec<String>,
    /// What start-up recovery did.
    pub recovered: Recovered,
}

impl Engine {
    /// Takes the workspace's engine lock, opens the store and recovers interrupted work.
    /// Must be called inside a tokio runtime (it starts the log writer).
    pub fn start(ws: &Workspace) -> Result<Self> {
        // Clients probe the lock for microseconds; a short wait rides those out.
        let lock = EngineLock::acquire(ws, Duration::from_millis(300))?;
        let cfg = ws.config()?;
        let mut store = Store::open_checked(&ws.db_path())?;
        let recovered = recovery::recover(ws, &mut store, cfg.kill_grace, cfg.auto_resume)?;
        let git = match GitCtx::detect(ws, &cfg, &store.read()) {
            Ok(g) => g,
            Err(e) => {
                tracing::warn!("{e}; steps run in the workspace root");
                None
            }
        };
        let agents = crate::pipeline::agent_ids(Some(&ws.agents_dir()));
        let catalog = crate::pipeline::load_catalog(Some(&ws.pipelines_dir()), Some(&agents));
        let (triggers, trigger_errors) = triggers::TriggerSet::new(&catalog.pipelines);
        let store = Arc::new(Mutex::new(store));
        let (events, _) = broadcast::channel(1024);
        let (requests_tx, requests) = mpsc::channel(64);
        let (finished_tx, finished) = mpsc::unbounded_channel();
        let (logs, log_rx) = mpsc::channel(8192);
        let log_store = Arc::new(Mutex::new(Store::open(&ws.db_path())?));
        let log_writer = tokio::spawn(logwriter::run(log_store, log_rx, events.clone()));
        Ok(Self {
            ws: ws.clone(),
            cfg,
            store,
            _lock: lock,
            events,
            requests_tx,
            requests,
            shutdown: CancellationToken::new(),
            running: HashMap::new(),
            finished_tx,
            finished,
            logs,
            log_writer,
            git,
            followups: tokio::task::JoinSet::new(),
            triggers,
            trigger_errors,
            recovered,
        })
    }

    /// A handle for an embedded front end.
    pub fn handle(&self) -> EngineHandle {
        EngineHandle {
            requests: self.requests_tx.clone(),
            events: self.events.clone(),
            shutdown: self.shutdown.clone(),
        }
    }

    /// The token that, once cancelled, shuts the engine down gracefully.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Runs until shut down (or per `opts`). Returns once every step it ran has ended.
    pub async fn run(mut self, opts: RunOptions) -> Result<()> {
        let mut stopping: Option<ShutdownMode> = None;
        // Work is looked for when something may have changed: another process committed
        // (data_version moved), this engine did something, or a while has passed (retry
        // backoffs come due). An idle engine costs one PRAGMA per poll.
        let mut seen_version = None;
        let mut dirty = true;
        let mut last_sweep = tokio::time::Instant::now();
        loop {
            let version = self.with_db(|db| db.data_version()).ok();
            if version != seen_version || dirty || last_sweep.elapsed() >= SWEEP {
                seen_version = version;
                dirty = false;
                last_sweep = tokio::time::Instant::now();
            } else {
                if stopping.is_some() && self.running.is_empty() {
                    break;
                }
                if self.wait(&mut stopping).await {
                    dirty = true;
                }
                continue;
            }
            self.drain_commands().await;
            if stopping.is_none() {
                self.run_triggers().await;
                // A failed pass (say, the database busy past its timeout) is retried on the
                // next one rather than stopping the engine.
                if let Err(e) = self.schedule().await {
                    tracing::error!("scheduling steps failed: {e}");
                    dirty = true;
                }
                if let Some(pred) = &opts.stop_when {
                    let done = self.with_db(|db| pred(db));
                    if done {
                        stopping = Some(ShutdownMode::Drain);
                    }
                }
                if opts.exit_when_idle && self.running.is_empty() && self.idle().unwrap_or(false) {
                    break;
                }
            }
            if stopping.is_some() && self.running.is_empty() {
                break;
            }
            if self.wait(&mut stopping).await {
                dirty = true;
            }
        }
        while self.followups.join_next().await.is_some() {}
        drop(self.logs);
        let _ = self.log_writer.await;
        Ok(())
    }

    /// Waits for the next thing to happen; true when this engine changed something.
    async fn wait(&mut self, stopping: &mut Option<ShutdownMode>) -> bool {
        tokio::select! {
                Some((id, report)) = self.finished.recv() => {
                    self.on_finished(id, report).await;
                    true
                }
                Some((req, reply)) = self.requests.recv() => {
                    let out = self.apply(req).await;
                    let _ = reply.send(out);
                    true
                }
                _ = self.shutdown.cancelled(), if stopping.is_none() => {
                    *stopping = Some(self.cfg.shutdown);
                    let n = self.running.len();
                    let text = match self.cfg.shutdown {
                        ShutdownMode::Drain => format!("shutting down: waiting for {n} running step(s) to finish (drain)"),
                        ShutdownMode::Interrupt => format!("shutting down: interrupting {n} running step(s); `baton resume` continues them"),
                    };
                    tracing::info!("{text}");
                    let _ = self.events.send(EngineEvent::Notice { task_id: None, text });
                    if self.cfg.shutdown == ShutdownMode::Interrupt {
                        for r in self.running.values_mut() {
                            r.reason = Some(StopReason::Shutdown);
                            r.cancel.cancel();
                        }
                    }
                    true
                }
                _ = tokio::time::sleep(POLL) => false,
        }
    }

    fn with_db<T>(&self, f: impl FnOnce(&Db) -> T) -> T {
        let guard = self.store.lock().unwrap_or_else(|p| p.into_inner());
        f(&guard.read())
    }

    /// Runs a write transaction on the blocking pool.
    async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Db) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || {
            let mut guard = store.lock().unwrap_or_else(|p| p.into_inner());
            guard.write(f)
        })
        .await
        .map_err(|e| EngineError::Other(format!("a database task panicked: {e}")))?
    }

    fn idle(&self) -> Result<bool> {
        self.with_db(|db| Ok(!db.any_open_step_runs()? && db.pending_commands()?.is_empty()))
    }

    /// Applies one request and stops the steps it ended.
    async fn apply(&mut self, req: Request) -> std::result::Result<String, String> {
        self.apply_command(req, None).await
    }

    /// Applies a request; a queued command is marked done in the same transaction, so a
    /// crash can never apply it twice.
    async fn apply_command(
        &mut self,
        req: Request,
        command: Option<i64>,
    ) -> std::result::Result<String, String> {
        let task_id = req.task_id;
        let git = self.git.clone();
        let out = self
            .write(move |db| {
                let applied =
                    actions::apply(db, &req, &|t, h| effects::pre_commit(git.as_ref(), t, h))?;
                if let Some(id) = command {
                    db.finish_command(id, CommandState::Done, &applied.summary)?;
                }
                Ok(applied)
            })
            .await;
        let out = match out {
            Ok(applied) => {
                self.after(&applied);
                Ok(applied.summary)
            }
            Err(e) => {
                let store = self.store.clone();
                let text = e.to_string();
                let failed = text.clone();
                let _ = tokio::task::spawn_blocking(move || {
                    let mut guard = store.lock().unwrap_or_else(|p| p.into_inner());
                    effects::record_refusal(&mut guard, &e);
                    if let Some(id) = command {
                        let _ =
                            guard.write(|db| db.finish_command(id, CommandState::Failed, &failed));
                    }
                })
                .await;
                Err(text)
            }
        };
        let _ = self.events.send(EngineEvent::TaskChanged { task_id });
        out
    }

    /// Follow-up of a committed change: stop the steps it ended; then, once they are gone,
    /// the worktree clean-up and hooks (in the background, so the engine keeps answering).
    fn after(&mut self, applied: &Applied) {
        let Some(moved) = applied.moved.clone() else {
            return;
        };
        let mut ended = Vec::new();
        for s in &moved.stop {
            if let Some(r) = self.running.get_mut(&s.id) {
                r.reason = Some(StopReason::Moved);
                r.cancel.cancel();
                ended.push(r.ended.clone());
            }
        }
        let done = self
            .with_db(|db| db.task(moved.task_id))
            .ok()
            .filter(|t| t.state == crate::store::TaskState::Done);
        if let Some(task) = done {
            let firings = self.triggers.done(&task);
            self.record_firings(firings);
        }
        let (ws, git) = (self.ws.clone(), self.git.clone());
        let grace = self.cfg.kill_grace + Duration::from_secs(5);
        let events = self.events.clone();
        self.followups.spawn(async move {
            for e in ended {
                let _ = tokio::time::timeout(grace, e.cancelled()).await;
            }
            let task_id = moved.task_id;
            let _ = tokio::task::spawn_blocking(move || {
                effects::after_commit(&ws, git.as_ref(), &moved)
            })
            .await;
            let _ = events.send(EngineEvent::TaskChanged { task_id });
        });
    }

    async fn drain_commands(&mut self) {
        let pending = self.with_db(|db| db.pending_commands());
        let pending = match pending {
            Ok(p) => p,
            Err(e) => {
                tracing::error!("reading commands failed: {e}");
                return;
            }
        };
        for cmd in pending {
            match serde_json::from_value::<Request>(cmd.body.clone()) {
                Ok(req) => {
                    let _ = self.apply_command(req, Some(cmd.id)).await;
                }
                Err(e) => {
                    let (id, text) = (
                        cmd.id,
                        format!(
                            "command {} is malformed ({e}) — was it written by another baton version?",
                            cmd.id
                        ),
                    );
                    if let Err(e) = self
                        .write(move |db| Ok(db.finish_command(id, CommandState::Failed, &text)?))
                        .await
                    {
                        tracing::error!("recording the result of command {id} failed: {e}");
                    }
                }
            }
        }
    }
}
