//! The engine: applies requests through `transition()`, runs steps at most `max_parallel`
//! at once, writes their logs, and moves tasks on when steps end. It knows nothing of the
//! TUI: front ends talk to it through an [`EngineHandle`] or, from another process, through
//! the `commands` table.

pub mod actions;
pub mod agent_reach;
mod answer;
pub mod attach;
pub mod board;
mod breakpoints;
pub mod client;
mod client_feed;
mod client_follow;
mod client_views;
mod effects;
pub mod engines;
mod error;
mod followups;
pub mod forge_events;
mod forge_hooks;
mod forge_issues;
mod forge_poll;
pub mod forge_say;
mod handover;
mod home;
mod lease;
mod log_cap;
mod log_replay;
mod logwriter;
mod moved_by;
mod notify_hook;
mod orders;
mod pg_wake;
mod placement;
pub mod playground;
pub mod progress;
pub mod push_in;
mod reader;
mod reattach;
mod recovery;
mod recovery_retry;
mod reload;
mod request;
mod restart;
mod results;
mod runner;
mod say;
mod say_live;
mod schedule_catchup;
mod scheduler;
mod session;
mod shared_branch;
mod step_report;
pub mod takeover;
mod task_edits;
mod transition;
mod trigger_chain;
mod trigger_loop;
pub mod triggers;
pub mod views;
pub mod waited;
pub mod waits;
pub mod wake;

pub use actions::{
    Action, Applied, Created, MAX_TITLE, MergeGate, Outside, Request, blank_title,
    create_and_start, create_task, move_options, nul_problem,
};
pub use client::{Client, Gone, Submitted};
pub use effects::{GitCtx, safe_url};
pub use error::{EngineError, Result};
pub use reader::Reader;
pub use recovery::Recovered;
pub use request::{Answer, MAX_IDEMPOTENCY_KEY, Made, NewTask, Order};
pub use results::{MAX_AUTOMATIC_VISITS, ResultDecision, ResultFacts, StepReport, on_result};
pub use say::{MAX_MESSAGE, check_answers, check_text};
pub use transition::{entry_state, pipeline_of};
pub use waited::{Waited, why_stopped};

use crate::store::{CommandState, Reads, StoreHandle};
use crate::workspace::{Config, EngineLock, ShutdownMode, Workspace};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Without a wake socket (its path too long for the OS, say), the engine looks at the
/// database this often instead.
const FALLBACK_SWEEP: Duration = Duration::from_secs(1);
/// An abort whose record failed (a full disk) is tried again this often.
const ABORT_RETRY: Duration = Duration::from_secs(1);

/// Something that happened, for subscribers such as the TUI.
#[derive(Debug, Clone)]
pub enum EngineEvent {
    /// A task's status, state or steps changed: reload it.
    TaskChanged { task_id: i64 },
    /// A running step has new log lines (in the store: subscribers read what they show).
    LogLines { task_id: i64, step_run_id: i64 },
    /// A message for people (a failed request, a hook error).
    Notice { task_id: Option<i64>, text: String },
    /// Another process changed the database (a task created from the CLI): reload.
    Changed,
    /// This engine hands over to `baton engine` (process `pid`) once `running` steps end.
    HandingOver { pid: u32, running: usize },
    /// This engine has begun to stop (also sent as a [`EngineEvent::Notice`]): boards
    /// attached from other processes hear it before its socket closes.
    Stopping { text: String },
    /// Pipeline, agent or config files changed and were read again; `problems` holds one
    /// sentence per error (the last good version of each broken file stays in force).
    Reloaded { problems: Vec<String> },
    /// The board's database was lost or is back (also sent as a [`EngineEvent::Notice`]):
    /// boards attached from other processes hear it.
    Database { text: String },
    /// A `notify` hook fired: boards ring the bell and post a desktop notification.
    /// Title and body are already sanitised (no control characters).
    Notify {
        task_id: i64,
        title: String,
        body: String,
    },
}

type Reply = oneshot::Sender<std::result::Result<Answer, String>>;

/// A front end's connection to an embedded engine.
#[derive(Clone)]
pub struct EngineHandle {
    requests: mpsc::Sender<(Order, Reply)>,
    events: broadcast::Sender<EngineEvent>,
    shutdown: CancellationToken,
    /// The `baton engine` this engine handed over to (0: none).
    handed_to: Arc<std::sync::atomic::AtomicU32>,
}

impl EngineHandle {
    /// Sends a request and waits for its one-line result or error sentence.
    pub async fn send(&self, req: Request) -> std::result::Result<String, String> {
        self.order(Order::Act(req)).await.map(|a| a.summary())
    }

    /// Hands the engine an order and waits for its answer or error sentence.
    pub async fn order(&self, order: Order) -> std::result::Result<Answer, String> {
        let (tx, rx) = oneshot::channel();
        self.requests
            .send((order, tx))
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

    /// True once a shutdown was asked for.
    pub fn shutting_down(&self) -> bool {
        self.shutdown.is_cancelled()
    }

    /// The process id of the `baton engine` this engine agreed to hand over to.
    pub fn handed_to(&self) -> Option<u32> {
        match self.handed_to.load(std::sync::atomic::Ordering::SeqCst) {
            0 => None,
            pid => Some(pid),
        }
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
    task_id: i64,
    /// Messages said to the step while it runs (a backend that reads none drops them).
    said: mpsc::UnboundedSender<crate::exec::agent::LiveMessage>,
    /// Where the step finds them: emptied once a backend that writes them to the agent's
    /// open input took the receiver (until then a message waits for the next step).
    inbox: crate::exec::agent::Inbox,
    /// Its pipeline has a `clean_worktree` guard, so its result needs `git status`.
    uses_clean: bool,
    /// The fence of this engine's claim on it: its renewals and result must match it.
    fence: Option<i64>,
    /// Its claim was found lost (reaped, aborted elsewhere) and reported.
    lost: bool,
}

/// When a headless engine returns.
#[derive(Default)]
pub struct RunOptions {
    /// Stop once nothing runs or is queued (and no command or follow-up is pending).
    pub exit_when_idle: bool,
    /// Stop (draining running steps) once this task has settled
    /// ([`TaskState::settled`](crate::store::TaskState::settled)).
    pub until_settled: Option<i64>,
    /// Called once when that task has settled while steps of other tasks still run.
    pub on_drain: Option<OnDrain>,
}

/// Told, when a task an engine ran for has settled, how many steps of other tasks still
/// run and what a stop signal would do to them: the caller's wait goes on until they end.
pub type OnDrain = Box<dyn FnOnce(usize, ShutdownMode) + Send>;

/// What an engine says as it interrupts `n` running steps.
fn interrupting(n: usize) -> String {
    format!("shutting down: interrupting {n} running step(s); `baton resume` continues them")
}

/// The engine of one workspace. Holds the workspace's engine lock while it exists.
pub struct Engine {
    ws: Workspace,
    cfg: Config,
    store: StoreHandle,
    /// Wake-ups from other processes through `.baton/engine.sock`. Declared before the
    /// lock: fields drop in order, so the socket is gone before another engine can start.
    _wake: Option<wake::Listener>,
    /// On a PostgreSQL board: other machines' commits, heard through LISTEN.
    _pg_wake: Option<pg_wake::Listener>,
    /// On a PostgreSQL board: whether its database can be reached, as the listener hears.
    db_up: Option<tokio::sync::watch::Receiver<bool>>,
    _lock: EngineLock,
    events: broadcast::Sender<EngineEvent>,
    requests_tx: mpsc::Sender<(Order, Reply)>,
    requests: mpsc::Receiver<(Order, Reply)>,
    shutdown: CancellationToken,
    /// A second stop signal: the steps a draining shutdown waits for are interrupted.
    force: CancellationToken,
    /// Who runs this engine: one a front end runs hands over to a `baton engine` that asks.
    role: wake::Role,
    /// The `baton engine` this engine hands over to: no step starts, and it stops once the
    /// running ones end.
    handover_to: Option<u32>,
    /// The same, for front ends.
    handed_to: Arc<std::sync::atomic::AtomicU32>,
    running: HashMap<i64, Running>,
    finished_tx: mpsc::UnboundedSender<(i64, StepReport)>,
    finished: mpsc::UnboundedReceiver<(i64, StepReport)>,
    logs: mpsc::Sender<logwriter::LogMsg>,
    log_writer: tokio::task::JoinHandle<()>,
    git: Option<GitCtx>,
    /// Hooks and worktree clean-ups of committed transitions, one runner per transition.
    followups: tokio::task::JoinSet<()>,
    /// The last follow-up runner of each task, which the next one waits for.
    followup_tails: HashMap<i64, CancellationToken>,
    /// Cancelled at an interrupting shutdown: running hooks stop and run again next start.
    followup_cancel: CancellationToken,
    /// Follow-up rows being run, so a sweep never starts one twice.
    followups_running: Arc<std::sync::Mutex<std::collections::HashSet<i64>>>,
    triggers: triggers::TriggerSet,
    /// The pipelines in force, with the last good version of each workspace file.
    live: crate::pipeline::LiveCatalog,
    /// The agent profiles likewise, and the catalog steps get.
    live_agents: crate::agents::LiveAgents,
    agents: Arc<crate::agents::AgentCatalog>,
    /// The pipelines in force, for a board shown by this process: one catalog per process.
    catalog_tx: tokio::sync::watch::Sender<Arc<crate::pipeline::Catalog>>,
    /// Changed definition files, reported by the watcher `reload::watch_later` starts.
    reload_rx: mpsc::UnboundedReceiver<Vec<std::path::PathBuf>>,
    wake_rx: mpsc::UnboundedReceiver<wake::Wake>,
    /// Something this engine did made work a look must find (a trigger's new task).
    look_again: bool,
    /// When the earliest delayed step (a retry's backoff) comes due, if known.
    next_due: Option<i64>,
    /// Problems in the workspace's pipeline triggers (those triggers are skipped).
    pub trigger_errors: Vec<String>,
    /// What start-up recovery did.
    pub recovered: Recovered,
    /// Later looks for the steps whose executor did not answer at start-up.
    recovery_rx: Option<mpsc::UnboundedReceiver<Recovered>>,
    /// The OpenCode server `"serve": true` profiles use, started when a step needs it and
    /// stopped when the engine ends.
    opencode: Arc<crate::exec::agent::opencode_serve::OpencodeServer>,
    /// Aborts applied to their steps but not yet recorded (the write failed).
    pending_aborts: Vec<Request>,
    /// An abort (one of those, or a queued command) waits to be recorded: look again soon.
    abort_retry: bool,
    /// Built to apply one command in a process with no engine running: it runs no step,
    /// and the steps a request stops belong to an engine that died.
    apply_only: bool,
    /// Its name and labels on the board, and its heartbeat.
    me: engines::Me,
    /// The answer to the order just taken, when it comes later (a message said to a
    /// running step answers once the step has told whether its agent took it): the
    /// engine does not wait for it, its caller does.
    later: Option<oneshot::Receiver<std::result::Result<Answer, String>>>,
    /// A shutdown was asked for and acted on (it is not acted on twice).
    stop_asked: bool,
    /// The task it ran for has settled: the steps running end, and no new one starts.
    winding_down: bool,
    /// The task of the step whose end the loop handled last, and whether that end queued
    /// its next step (so the task cannot have settled).
    step_ended: Option<(i64, bool)>,
}

/// Where an engine's store handle comes from.
enum StoreSource {
    /// A handle this process already has on the workspace's database (so the process has
    /// one writer).
    Given(StoreHandle),
    /// A handle of the engine's own, its reads as said.
    Own(Reads),
}

impl Engine {
    /// Takes the workspace's engine lock, opens the store on its own threads, recovers
    /// interrupted work and starts listening for other processes.
    pub async fn start(ws: &Workspace) -> Result<Self> {
        Self::start_on(ws, None).await
    }

    /// [`Engine::start`] writing through `store`, a handle this process already has on the
    /// workspace's database (so the process has one writer), else through its own.
    pub async fn start_on(ws: &Workspace, store: Option<StoreHandle>) -> Result<Self> {
        let store = match store {
            Some(handle) => StoreSource::Given(handle),
            None => StoreSource::Own(Reads::Apart),
        };
        Self::start_with(ws, store).await
    }

    /// [`Engine::start_on`], its store as `store` says.
    async fn start_with(ws: &Workspace, store: StoreSource) -> Result<Self> {
        // Clients probe the lock for microseconds; a short wait rides those out.
        let lock = {
            let ws = ws.clone();
            tokio::task::spawn_blocking(move || {
                EngineLock::acquire(&ws, Duration::from_millis(300))
            })
            .await
            .map_err(|e| EngineError::Other(e.to_string()))??
        };
        Self::open(ws, lock, false, store).await
    }

    /// [`Engine::start`] for `role`: `baton engine` and `run --wait` refuse to hand over.
    /// `run --wait`'s engine reads through its writer's connection: it is the workspace's
    /// engine while its task runs (it takes other processes' orders and runs what else is
    /// queued), so its own reads then wait behind its writes, but most runs are short, and
    /// a second connection costs each of them its opening (on SQLite its schema read and
    /// its statements compiled again, on PostgreSQL a server process). What boards and
    /// other commands read goes through connections of their own either way.
    pub async fn start_as(ws: &Workspace, role: wake::Role) -> Result<Self> {
        let reads = match role {
            wake::Role::Command => Reads::OnWriter,
            wake::Role::Front | wake::Role::Headless => Reads::Apart,
        };
        let mut engine = Self::start_with(ws, StoreSource::Own(reads)).await?;
        engine.set_role(role);
        Ok(engine)
    }

    /// [`Engine::start`] with the workspace's lock already taken (`baton engine` after a
    /// handover).
    pub async fn start_locked(ws: &Workspace, lock: EngineLock, role: wake::Role) -> Result<Self> {
        let mut engine = Self::open(ws, lock, false, StoreSource::Own(Reads::Apart)).await?;
        engine.set_role(role);
        Ok(engine)
    }

    /// Says who runs this engine (what `who` answers on its socket, whether it hands over).
    fn set_role(&mut self, role: wake::Role) {
        self.role = role;
        if let Some(l) = &self._wake {
            l.set_role(role);
        }
    }

    /// An engine that applies orders in this process and runs no step (the CLI's, when
    /// no engine runs): the same code as a running engine's, without its recovery, its
    /// socket or its watcher. The caller holds the workspace's lock and hands it over.
    pub async fn apply_only(ws: &Workspace, lock: EngineLock) -> Result<Self> {
        Self::open(ws, lock, true, StoreSource::Own(Reads::OnWriter)).await
    }

    async fn open(
        ws: &Workspace,
        lock: EngineLock,
        apply_only: bool,
        store: StoreSource,
    ) -> Result<Self> {
        // What the definition files look like before they are read, for the watch that
        // starts later (an apply-only engine reads none).
        let read_defs = (!apply_only).then(|| crate::workspace::watch::Snapshot::take(&ws.dir()));
        let cfg = ws.config()?;
        // Read while the store opens: the definitions, and the warden started.
        let defs = (!apply_only).then(|| {
            let (pipes, agents) = (ws.pipelines_dir(), ws.agents_dir());
            tokio::task::spawn_blocking(move || {
                (
                    crate::pipeline::LiveCatalog::load(&pipes, &agents),
                    crate::agents::LiveAgents::load(&agents),
                )
            })
        });
        if !apply_only {
            crate::exec::warden::start_early();
        }
        // The webhook secret, under whatever name the workspace gave it, stays with the engine.
        crate::exec::process::keep_from_children(&cfg.serve.github_secret_env);
        let db = ws.db_path();
        if db.exists() && !crate::store::Store::writable(&db) {
            return Err(EngineError::Other(format!(
                "the database {} is read-only for this user — the engine writes it as steps run; make it (and .baton/) writable, or run the engine as their owner",
                db.display()
            )));
        }
        let store = match store {
            // Opened before this engine held the lock (an API server's, whose engine
            // stopped, perhaps killed): checked as a store this engine opens would be.
            StoreSource::Given(s) => {
                s.check_after_unclean_end().await?;
                s
            }
            StoreSource::Own(reads) => {
                let ws = ws.clone();
                tokio::task::spawn_blocking(move || {
                    crate::engine::board::open_engine_handle(&ws, reads)
                })
                .await
                .map_err(|e| EngineError::Other(e.to_string()))??
            }
        };
        // This engine holds the workspace's lock: its store's last write may say that the
        // store closed cleanly.
        store.arm_clean_close();
        // A board in PostgreSQL may be run by several engines at once.
        let shared = store.read(|db| Ok(db.is_postgres())).await?;
        // Executors are asked outside the store's writer, each under a time limit. Only a
        // running engine recovers: a command applied here leaves that to the next one. On
        // a shared board that waits for the engine's name (see `lease::recover_own`).
        let recovered = if apply_only || shared {
            Recovered::default()
        } else {
            let looked = recovery::look(ws, &store, cfg.kill_grace, None, None).await?;
            // A message said to a step the last engine ran was answered by nobody: its
            // command was applied (the message is delivered or still queued).
            store
                .write(|db| db.settle_answering_commands(say_live::CUT_OFF))
                .await?;
            let auto = cfg.auto_resume;
            store
                .with_writer(move |s| recovery::record(s, looked, auto, false))
                .await??
        };
        let git = {
            let (ws, cfg) = (ws.clone(), cfg.clone());
            store
                .with_writer(move |s| GitCtx::detect(&ws, &cfg, &s.read()))
                .await?
        };
        let git = match git {
            Ok(g) => g,
            Err(e) => {
                tracing::warn!("{e}; steps run in the workspace root");
                None
            }
        };
        // An apply-only engine runs no step and fires no trigger (as a command applied
        // without an engine never did): it needs no definitions.
        let (live, live_agents) = match defs {
            None => Default::default(),
            Some(read) => read
                .await
                .map_err(|e| EngineError::Other(format!("reading the definitions failed: {e}")))?,
        };
        let mut me = engines::Me::new(engines::Identity::from_config(&cfg));
        me.shared = shared;
        let (triggers, trigger_errors) = triggers::TriggerSet::new(&live.catalog.pipelines);
        let agents = Arc::new(live_agents.catalog.clone());
        let (catalog_tx, _) = tokio::sync::watch::channel(Arc::new(live.catalog.clone()));
        let (reload_tx, reload_rx) = mpsc::unbounded_channel();
        if let Some(read) = read_defs {
            reload::watch_later(ws, read, reload_tx);
        }
        let (events, _) = broadcast::channel(1024);
        let (requests_tx, requests) = mpsc::channel(64);
        let (finished_tx, finished) = mpsc::unbounded_channel();
        // Messages carry up to ~1,000 lines each: this bounds what a fast step can queue.
        let (logs, log_rx) = mpsc::channel(16);
        let log_writer = tokio::spawn(logwriter::run(store.clone(), log_rx, events.clone()));
        let (wake_tx, wake_rx) = mpsc::unbounded_channel();
        let (pg_wake, db_up) = match crate::engine::board::postgres_board(ws) {
            Ok(Some(t)) if !apply_only => {
                let (up, db_up) = tokio::sync::watch::channel(true);
                let l = pg_wake::for_engine(t, wake_tx.clone(), events.clone(), up);
                (l, Some(db_up))
            }
            _ => (None, None),
        };
        let listener = match wake::Listener::bind(&ws.dir(), wake_tx, events.clone()) {
            _ if apply_only => None,
            Ok(l) => Some(l),
            Err(e) => {
                tracing::warn!(
                    "cannot listen on {}: {e}; other processes' commands are picked up within {} s instead",
                    wake::socket_path(&ws.dir()).display(),
                    FALLBACK_SWEEP.as_secs()
                );
                None
            }
        };
        Ok(Self {
            ws: ws.clone(),
            cfg,
            store,
            _lock: lock,
            events,
            requests_tx,
            requests,
            shutdown: CancellationToken::new(),
            force: CancellationToken::new(),
            role: wake::Role::default(),
            handover_to: None,
            handed_to: Arc::default(),
            running: HashMap::new(),
            finished_tx,
            finished,
            logs,
            log_writer,
            git,
            followups: tokio::task::JoinSet::new(),
            followups_running: Default::default(),
            followup_tails: HashMap::new(),
            followup_cancel: CancellationToken::new(),
            triggers,
            live,
            live_agents,
            agents,
            catalog_tx,
            reload_rx,
            wake_rx,
            _wake: listener,
            _pg_wake: pg_wake,
            db_up,
            look_again: false,
            next_due: None,
            trigger_errors,
            recovered,
            recovery_rx: None,
            opencode: Arc::new(crate::exec::agent::opencode_serve::OpencodeServer::new(
                ws.root(),
            )),
            pending_aborts: Vec::new(),
            abort_retry: false,
            apply_only,
            me,
            later: None,
            stop_asked: false,
            winding_down: false,
            step_ended: None,
        })
    }

    /// A handle for an embedded front end.
    pub fn handle(&self) -> EngineHandle {
        EngineHandle {
            requests: self.requests_tx.clone(),
            events: self.events.clone(),
            shutdown: self.shutdown.clone(),
            handed_to: self.handed_to.clone(),
        }
    }

    /// The pipelines in force, updated as the engine reloads them: a board in this process
    /// shows these rather than reading and watching the files a second time.
    pub fn catalog(&self) -> tokio::sync::watch::Receiver<Arc<crate::pipeline::Catalog>> {
        self.catalog_tx.subscribe()
    }

    /// The store the engine writes, for a headless engine's own progress lines.
    pub fn store(&self) -> StoreHandle {
        self.store.clone()
    }

    /// The token that, once cancelled, shuts the engine down gracefully.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Cancelled after the shutdown token, it interrupts the running steps a draining
    /// shutdown would wait for (a second ctrl+c).
    pub fn force_token(&self) -> CancellationToken {
        self.force.clone()
    }

    /// Runs until shut down (or per `opts`). Returns once every step it ran has ended.
    ///
    /// Nothing here polls: a step's end applies its result and starts what comes next in
    /// the same transaction; requests, other processes' wake-ups, the next retry backoff or
    /// trigger time, and finished follow-ups are what wake the loop.
    pub async fn run(self, opts: RunOptions) -> Result<()> {
        self.run_then_read(opts, None).await.map(drop)
    }

    /// [`Engine::run`] until task `id` settles (or a signal stops the engine), then the
    /// task as it stands, read before the store closes; `json` adds `show --json`'s view.
    /// `on_drain`: see [`RunOptions::on_drain`].
    pub async fn run_until_settled(
        self,
        id: i64,
        json: bool,
        on_drain: Option<OnDrain>,
    ) -> Result<Waited> {
        let opts = RunOptions {
            exit_when_idle: false,
            until_settled: Some(id),
            on_drain,
        };
        self.run_then_read(opts, Some(json))
            .await?
            .ok_or_else(|| EngineError::Other(format!("task {id} was not read back")))
    }

    /// [`Engine::run`]; with `read` (whether to add the JSON view), the task it waited for
    /// is read once everything has stopped and before the store closes.
    async fn run_then_read(
        mut self,
        mut opts: RunOptions,
        read: Option<bool>,
    ) -> Result<Option<Waited>> {
        let mut stopping: Option<ShutdownMode> = None;
        // Look for commands, due steps and follow-ups: at start, and after a wake-up from
        // outside. A step's end needs no look: it claims the next steps itself.
        let mut look = true;
        self.take_name().await?;
        if self.me.shared {
            self.recover_own().await?;
        }
        self.start_forge_poll();
        self.catch_up_schedules().await;
        if let Err(e) = self.reattach().await {
            tracing::error!("picking up steps that outlived the last engine failed: {e}");
        }
        self.retry_unknown();
        // A task held for blockers that finished without starting it (an older engine).
        match self.store.write(waits::release_ready).await {
            Ok(ids) => {
                for task_id in ids {
                    let _ = self.events.send(EngineEvent::TaskChanged { task_id });
                }
            }
            Err(e) => tracing::error!("starting tasks whose blockers are done failed: {e}"),
        }
        loop {
            if look {
                self.check_held().await;
                self.drain_commands().await;
                // A stop asked and not yet taken up (a signal in the engine's first moments,
                // before its first look) starts nothing: the wait below takes it up.
                if stopping.is_none() && !self.shutdown.is_cancelled() {
                    self.run_triggers().await;
                    // A failed pass (the database busy past its timeout, say) is retried
                    // a second later rather than stopping the engine.
                    // Hooks recorded by moves made inside other writes (a trigger's or a
                    // hook's new task starting) are found here.
                    self.sweep_followups().await;
                    if let Err(e) = self.schedule().await {
                        if e.is_fatal() {
                            tracing::error!("the engine stops: {e}");
                            self.mark_stopped().await;
                            return Err(e);
                        }
                        tracing::error!("scheduling steps failed: {e}");
                        self.next_due = Some(crate::store::now_ms() + 1000);
                    }
                }
            }
            if stopping.is_none() {
                // Read only when the task may have settled: not after a step of another
                // task ended, nor after its own step ended in a move to the next step.
                let known = std::mem::take(&mut self.step_ended).is_some_and(|(task, ahead)| {
                    !look && (ahead || opts.until_settled != Some(task))
                });
                if let Some(id) = opts.until_settled
                    && !known
                    && self
                        .store
                        .read(move |db| Ok(db.task(id)?.state.settled()))
                        .await
                        .unwrap_or(false)
                {
                    stopping = Some(ShutdownMode::Drain);
                    self.winding_down = true;
                    // Its own task's steps have ended or are being stopped (a cancel).
                    let others = self.running.values().filter(|r| r.task_id != id).count();
                    if others > 0
                        && let Some(say) = opts.on_drain.take()
                    {
                        say(others, self.cfg.shutdown);
                    }
                }
                if opts.exit_when_idle
                    && self.running.is_empty()
                    && self.followups.is_empty()
                    && self.idle().await.unwrap_or(false)
                {
                    break;
                }
            }
            if stopping.is_some() && self.running.is_empty() {
                break;
            }
            look = self.wait(&mut stopping).await;
        }
        // The hooks under way end too; a second stop signal cuts them short.
        loop {
            tokio::select! {
                next = self.followups.join_next() => if next.is_none() { break },
                _ = self.force.cancelled(), if !self.followup_cancel.is_cancelled() => {
                    self.followup_cancel.cancel();
                }
            }
        }
        self.opencode.stop().await;
        self.mark_stopped().await;
        drop(self.logs);
        let _ = self.log_writer.await;
        let waited = match (opts.until_settled, read) {
            (Some(id), Some(json)) => Some(
                self.store
                    .read(move |db| waited::read(db, id, json))
                    .await?,
            ),
            _ => None,
        };
        Ok(waited)
    }

    /// The next time work is due by the clock: a delayed step, a trigger, an abort to
    /// record again, or the fallback sweep when other processes cannot wake the engine.
    fn next_work(&self) -> Option<tokio::time::Instant> {
        let now = tokio::time::Instant::now();
        let due = self.next_due.map(|at| {
            let wait = (at - crate::store::now_ms()).max(0) as u64;
            now + Duration::from_millis(wait)
        });
        let trigger = self
            .triggers
            .next_wake()
            .map(tokio::time::Instant::from_std);
        let sweep = self._wake.is_none().then(|| now + FALLBACK_SWEEP);
        let abort = self.abort_retry.then(|| now + ABORT_RETRY);
        [due, trigger, sweep, abort].into_iter().flatten().min()
    }

    /// Waits for the next thing to happen; true when the database should be looked at.
    async fn wait(&mut self, stopping: &mut Option<ShutdownMode>) -> bool {
        // Work due by the clock, or else the engine's heartbeat.
        let work = self.next_work();
        let timer = work.into_iter().chain(self.me.next_beat).min();
        tokio::select! {
            Some((id, report)) = self.finished.recv() => {
                self.on_finished(id, report).await;
                // The step's end claimed what could start; a look is needed only when it
                // made new work elsewhere (a task_done trigger's task).
                std::mem::take(&mut self.look_again)
            }
            Some((order, reply)) = self.requests.recv() => {
                let out = self.take(order, None).await;
                match self.later.take() {
                    Some(later) => {
                        tokio::spawn(async move {
                            let _ = reply.send(later.await.unwrap_or(out));
                        });
                    }
                    None => {
                        let _ = reply.send(out);
                    }
                }
                // A request may have queued a step (start, approve, resume): claim it.
                true
            }
            Some(w) = self.wake_rx.recv() => {
                use tokio::io::AsyncWriteExt;
                let mut waiters = Vec::new();
                let mut aborts = Vec::new();
                let mut w = Some(w);
                // Coalesce a burst of wake-ups into one look.
                while let Some(next) = w.take().or_else(|| self.wake_rx.try_recv().ok()) {
                    match next {
                        wake::Wake::Wait(stream) => waiters.push(stream),
                        wake::Wake::Abort(req, stream) => aborts.push((req, stream)),
                        wake::Wake::Handover(pid, stream) => {
                            self.on_handover(pid, stream, stopping).await
                        }
                        wake::Wake::Poke => {}
                    }
                }
                for (req, mut s) in aborts {
                    let line = match self.apply_command(*req, None).await {
                        Ok(a) => format!("ok {}\n", a.summary().replace('\n', " ")),
                        Err(e) => format!("error {}\n", e.replace('\n', " ")),
                    };
                    let _ = s.write_all(line.as_bytes()).await;
                }
                let _ = self.events.send(EngineEvent::Changed);
                self.drain_commands().await;
                for mut s in waiters {
                    let _ = s.write_all(b"ok\n").await;
                }
                true
            }
            Some(_) = self.followups.join_next(), if !self.followups.is_empty() => true,
            found = recovery_retry::next(&mut self.recovery_rx) => {
                self.on_recovered(found).await;
                true
            }
            Some(changed) = self.reload_rx.recv() => {
                self.reload(changed).await;
                // New triggers may be due, a larger max_parallel may start queued steps.
                true
            }
            // A front end quitting while its engine hands over stops it as a quit does, and
            // so does one quitting while the engine drains because its stop condition was
            // met (`run --wait`'s ctrl+c while other tasks' steps finish).
            _ = self.shutdown.cancelled(), if !self.stop_asked
                && (stopping.is_none()
                    || self.handover_to.is_some()
                    || *stopping == Some(ShutdownMode::Drain)) => {
                self.stop_asked = true;
                self.handover_to = None;
                *stopping = Some(self.cfg.shutdown);
                let n = self.running.len();
                let text = match self.cfg.shutdown {
                    _ if n == 0 => "shutting down: no step is running".to_string(),
                    ShutdownMode::Drain => format!("shutting down: waiting for {n} running step(s) to finish (drain; a second ctrl+c interrupts them)"),
                    ShutdownMode::Interrupt => interrupting(n),
                };
                // With nothing running the engine is gone at once: nothing to tell.
                self.say_stopping(text, n > 0);
                if self.cfg.shutdown == ShutdownMode::Interrupt {
                    self.interrupt_running();
                }
                false
            }
            // A second signal while draining: what runs is interrupted, to resume later.
            _ = self.force.cancelled(), if self.stop_asked
                && *stopping == Some(ShutdownMode::Drain)
                && !self.running.is_empty() => {
                *stopping = Some(ShutdownMode::Interrupt);
                self.say_stopping(interrupting(self.running.len()), true);
                self.interrupt_running();
                false
            }
            _ = sleep_until(timer) => {
                let beat = self.beat_if_due().await;
                if self.next_due.is_some_and(|at| at <= crate::store::now_ms()) {
                    self.next_due = None;
                }
                // A heartbeat alone gives an engine's own board no look; on a board shared
                // with other engines it is the look for what they queued or reaped.
                (beat && self.me.shared)
                    || work.is_some_and(|at| at <= tokio::time::Instant::now())
            }
        }
    }

    /// Tells boards that the engine stops, and with `notice` the person at its console.
    fn say_stopping(&self, text: String, notice: bool) {
        tracing::info!("{text}");
        let _ = self
            .events
            .send(EngineEvent::Stopping { text: text.clone() });
        if notice {
            let _ = self.events.send(EngineEvent::Notice {
                task_id: None,
                text,
            });
        }
    }

    /// Interrupts every running step (and the follow-ups under way): they end
    /// `interrupted`, for `baton resume`.
    fn interrupt_running(&mut self) {
        self.followup_cancel.cancel();
        for r in self.running.values_mut() {
            r.reason = Some(StopReason::Shutdown);
            r.cancel.cancel();
        }
    }

    async fn idle(&self) -> Result<bool> {
        let me = self.me.ident.clone();
        Ok(self
            .store
            .read(move |db| {
                Ok(!scheduler::runnable_open(db, &me)?
                    && db.pending_commands()?.is_empty()
                    && !db.any_open_followups()?)
            })
            .await?)
    }

    /// Applies a request; a queued command is marked done in the same transaction, so a
    /// crash can never apply it twice. A `merge` hook runs between two transactions: the
    /// first finds that the move needs it, the second re-checks and commits with its result.
    async fn apply_command(
        &mut self,
        req: Request,
        command: Option<i64>,
    ) -> std::result::Result<Answer, String> {
        let task_id = req.task_id;
        // An abort that is written stops the task's step through `after`; one whose write
        // fails (a full disk) stops it all the same and is recorded once the database takes
        // it. One that is refused (a stale expected status) leaves the step running.
        let live = match &req.action {
            Action::Say { text }
            | Action::ForgeSay {
                text,
                refused: None,
                ..
            } => Some(text.clone()),
            _ => None,
        };
        if let Some(text) = live
            && let Some(out) = self.say_live(&req, &text, command).await
        {
            return out;
        }
        let abort = matches!(req.action, Action::Abort { .. });
        let clean = self.worktree_clean_for(task_id).await;
        let forge = self.forge_ready().await;
        let mut merged: Option<std::result::Result<(), String>> = None;
        let mut req = req;
        let mut prepared = self.commit_takeover(&mut req).await;
        let out = loop {
            if let Err(e) = std::mem::replace(&mut prepared, Ok(())) {
                break Err(e);
            }
            let (req2, has_git, merged2) = (req.clone(), self.git.is_some(), merged.clone());
            let out = self
                .store
                .write(move |db| {
                    let gate = |_: &crate::store::Task, hooks: &[crate::pipeline::Hook]| {
                        actions::merge_gate(has_git, &merged2, hooks)
                    };
                    let outside = Outside {
                        merge: &gate,
                        worktree_clean: clean,
                        forge,
                    };
                    let applied = actions::apply(db, &req2, &outside)?;
                    if let Some(id) = command {
                        db.finish_command(id, CommandState::Done, &applied.command_result())?;
                    }
                    Ok(applied)
                })
                .await;
            match out {
                Err(EngineError::MergePending { task }) if merged.is_none() => {
                    merged = Some(self.merge(task).await);
                }
                other => break other,
            }
        };
        let out = match out {
            Ok(applied) => {
                self.after(&applied).await;
                self.after_forge(&req, &applied);
                let queued = applied.moved.as_ref().is_some_and(|m| m.step_run.is_some());
                Ok(Answer::Applied {
                    summary: applied.summary,
                    queued,
                    forge: applied.forge,
                })
            }
            // Another engine applied the command first: its answer stands, nothing here.
            Err(EngineError::Store(crate::store::StoreError::Conflict(e))) if command.is_some() => {
                tracing::info!("{e}");
                return Err(e);
            }
            Err(EngineError::Store(e)) if abort => {
                self.stop_steps_of(task_id);
                tracing::warn!("recording the abort of task {task_id} failed: {e}; trying again");
                // A queued command stays pending and is applied again by the next look;
                // a request from elsewhere is kept for it.
                if command.is_none() && !self.pending_aborts.iter().any(|r| r.task_id == task_id) {
                    self.pending_aborts.push(req);
                }
                self.abort_retry = true;
                Ok(Answer::Applied {
                    summary: format!(
                        "task {task_id}: its step is stopped; the abort could not be recorded yet ({e}) and is recorded as soon as the database can be written"
                    ),
                    queued: false,
                    forge: None,
                })
            }
            Err(e) => {
                let text = e.to_string();
                let failed = text.clone();
                let refusal = effects::refusal_event(&e);
                let recorded = self
                    .store
                    .write(move |db| {
                        if let Some(ev) = &refusal {
                            db.insert_event(ev)?;
                        }
                        if let Some(id) = command {
                            db.finish_command(id, CommandState::Failed, &failed)?;
                        }
                        Ok::<_, crate::store::StoreError>(())
                    })
                    .await;
                if let Err(e) = recorded {
                    tracing::error!("recording a refused request failed: {e}");
                }
                Err(text)
            }
        };
        let _ = self.events.send(EngineEvent::TaskChanged { task_id });
        out
    }

    /// Runs a task's `merge` hook through the repository's git queue; the sentence on refusal.
    async fn merge(&self, task_id: i64) -> std::result::Result<(), String> {
        let Some(git) = self.git.clone() else {
            return Ok(());
        };
        let task = self
            .store
            .read(move |db| db.task(task_id))
            .await
            .map_err(|e| e.to_string())?;
        tokio::task::spawn_blocking(move || effects::merge_for(&git, &task))
            .await
            .unwrap_or_else(|e| Err(format!("the merge panicked: {e}")))
    }

    /// Whether the workspace has a usable forge: `[forge]` whose remote resolves to a
    /// repository on a known forge. Asked before a transaction (it reads git's config); a
    /// workspace with no `[forge]` costs nothing.
    async fn forge_ready(&self) -> bool {
        let Some(settings) = self.cfg.forge.clone() else {
            return false;
        };
        let root = self.ws.root().to_path_buf();
        tokio::task::spawn_blocking(move || {
            crate::forge::remote::url_of(&root, settings.remote()).is_some()
                && crate::forge::Target::of_workspace(&settings, &root).is_ok()
        })
        .await
        .unwrap_or(false)
    }

    /// `git status` of a task's worktree, asked only when its pipeline has a
    /// `clean_worktree` guard; gathered before the transaction that relies on it.
    async fn worktree_clean_for(&self, task_id: i64) -> Option<bool> {
        self.git.as_ref()?;
        let wt = self
            .store
            .read(move |db| {
                let task = db.task(task_id)?;
                let uses = db
                    .pipeline(task_id)
                    .is_ok_and(|p| transition::uses_clean_worktree(&p));
                Ok(task.worktree.filter(|_| uses))
            })
            .await
            .ok()
            .flatten()?;
        tokio::task::spawn_blocking(move || effects::worktree_clean(std::path::Path::new(&wt)))
            .await
            .ok()
            .flatten()
    }

    /// Follow-up of a committed change: stop the steps it ended, fire `task_done` triggers,
    /// then run its recorded follow-ups (clean-up, hooks) once the stopped steps are gone.
    async fn after(&mut self, applied: &Applied) {
        let Some(moved) = applied.moved.clone() else {
            return;
        };
        let mut ended = Vec::new();
        for s in &moved.stop {
            if let Some(r) = self.running.get_mut(&s.id) {
                r.reason = Some(StopReason::Moved);
                r.cancel.cancel();
                ended.push(r.ended.clone());
            } else if self.apply_only && !self.me.shared {
                // Recorded as running with no engine alive: a dead engine's step; end it.
                let (ws, step, grace) = (self.ws.clone(), s.clone(), self.cfg.kill_grace);
                let _ = tokio::task::spawn_blocking(move || {
                    recovery::end_orphan(&ws, &step, grace);
                })
                .await;
            }
        }
        if moved.done && !self.triggers.is_empty() {
            let task_id = moved.task_id;
            if let Ok(task) = self.store.read(move |db| db.task(task_id)).await {
                let firings = self.triggers.done(&task);
                if !firings.is_empty() {
                    self.record_firings(firings).await;
                    self.look_again = true;
                }
            }
        }
        if !moved.followups.is_empty() {
            self.spawn_followups(moved.task_id, moved.followups.clone(), ended);
        }
    }

    /// Stops the running steps of a task (an abort the database could not record yet).
    fn stop_steps_of(&mut self, task_id: i64) {
        for r in self.running.values_mut().filter(|r| r.task_id == task_id) {
            r.reason = Some(StopReason::Moved);
            r.cancel.cancel();
        }
    }

    async fn drain_commands(&mut self) {
        // Aborts whose steps were stopped but whose record failed: recorded now if the
        // database takes them (one that fails again is kept again).
        self.abort_retry = false;
        for req in std::mem::take(&mut self.pending_aborts) {
            let _ = self.apply_command(req, None).await;
        }
        let pending = match self.store.read(|db| db.pending_commands()).await {
            Ok(p) => p,
            Err(e) => {
                tracing::error!("reading commands failed: {e}");
                return;
            }
        };
        for cmd in pending {
            match serde_json::from_value::<Order>(cmd.body.clone()) {
                Ok(order) if self.for_another(&order).await => {}
                Ok(order) => {
                    let _ = self.take(order, Some(cmd.id)).await;
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
                        .store
                        .write(move |db| db.finish_command(id, CommandState::Failed, &text))
                        .await
                    {
                        tracing::error!("recording the result of command {id} failed: {e}");
                    }
                }
            }
        }
    }
}

/// Sleeps until `at`, or forever when there is nothing to wait for.
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
