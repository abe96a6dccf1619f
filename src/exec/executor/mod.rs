//! The executor seam: where a step's process runs. `local` runs it on this machine in its
//! own process group; `docker` in a container of a Docker Engine. An executor starts a step, streams its output
//! lines, waits for it, stops it, and finds it again after an engine restart. The engine's
//! runner and the `command` agent backend use only this trait, never a step kind.
//!
//! Adding an executor: implement [`Executor`] in a new file here and add one arm to
//! [`executor_for`].

pub mod docker;
mod docker_mounts;
mod docker_step;
mod drain;
pub mod kubernetes;
mod local;
pub mod lookup;
pub mod remote_git;
pub mod ssh;

pub use docker::Docker;
pub use local::Local;

use super::{Finish, LogSender, StepEnv};
use crate::pipeline::ExecutorSpec;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A boxed future, so the trait can be used as `dyn Executor`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a step runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Program {
    /// A shell script from the pipeline (`sh -c SCRIPT`); task text reaches it only
    /// through the environment.
    Shell(String),
    /// An argv array (a `command` agent); `argv[0]` is looked up on the executor's side.
    Argv(Vec<String>),
}

/// The identity a step's process or container carries, so it can be found after a restart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Labels {
    pub task_id: i64,
    pub step_run_id: i64,
    /// `run:status:attempt`, unique per step run.
    pub execution_key: String,
    /// The workspace root: tells apart steps of two workspaces on one daemon or host.
    pub workspace: String,
}

impl Labels {
    /// A short stable tag of the workspace, for names (`baton-<tag>-<task>-<step run>`).
    pub fn workspace_tag(&self) -> String {
        // FNV-1a: stable across builds and platforms, unlike the std hasher.
        let hash = self
            .workspace
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
            });
        format!("{:08x}", hash as u32)
    }
}

/// Everything an executor needs to start one step.
#[derive(Debug, Clone)]
pub struct Launch {
    pub program: Program,
    /// Environment, working directory (inside `worktree`), timeout and kill grace.
    pub env: StepEnv,
    /// The task's working tree (the git worktree, or the workspace root without git).
    pub worktree: PathBuf,
    /// The task's context folder (`BATON_CONTEXT_DIR`).
    pub context_dir: PathBuf,
    pub labels: Labels,
    /// Bytes for the process's standard input, which is closed after them; `None` for an
    /// empty one. Set only for executors whose [`Executor::stdin`] is [`StdinWay::Pipe`].
    pub stdin: Option<Stdin>,
}

/// Bytes a step reads on its standard input (an agent's prompt), and, where the executor
/// pipes it, more bytes sent while it runs: the input is closed once the sender is dropped.
#[derive(Clone, PartialEq, Eq)]
pub struct Stdin(pub Arc<[u8]>, pub Option<MoreInput>);

impl std::fmt::Debug for Stdin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Stdin({} bytes)", self.0.len())
    }
}

impl Stdin {
    /// These bytes, then the end of the input.
    pub fn bytes(bytes: &[u8]) -> Self {
        Self(bytes.into(), None)
    }
}

/// What a running step is sent on its standard input after the first bytes; taken by the
/// executor that writes it (an executor that cannot leaves it, and the sender sees it gone).
#[derive(Clone)]
pub struct MoreInput(Arc<std::sync::Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>>>>);

impl MoreInput {
    /// The input fed from `rx`.
    pub fn new(rx: tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>) -> Self {
        Self(Arc::new(std::sync::Mutex::new(Some(rx))))
    }

    /// The receiver, for the one writer that takes it.
    pub fn take(&self) -> Option<tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>> {
        self.0.lock().ok()?.take()
    }
}

impl PartialEq for MoreInput {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for MoreInput {}

/// How an executor gives a step the bytes meant for its standard input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdinWay {
    /// It writes [`Launch::stdin`] to the process itself.
    Pipe,
    /// The step sees the context folder at the host's path: the bytes go into a file there
    /// and the command is wrapped in `sh -c 'exec "$@" <"$0"' FILE ARGV…` (argv elements only).
    ContextFile,
    /// It cannot.
    Unsupported,
}

/// How a started step can be found again, recorded as soon as it exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// A local process group leader: pid and start time (clock ticks since boot).
    Process { pid: u32, start_time: Option<u64> },
    /// A container, by id.
    Container(String),
}

impl Identity {
    /// For the log: `pid 4242`, `container 1ea8eefe0f21`.
    pub fn describe(&self) -> String {
        match self {
            Self::Process { pid, .. } => format!("pid {pid}"),
            Self::Container(id) => format!("container {}", docker_step::short(id)),
        }
    }
}

/// Why a step could not be started or found: one sentence saying what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ExecError(pub String);

/// A step that is running (or has just ended) on some executor.
pub trait Started: Send {
    /// How to find it again.
    fn identity(&self) -> Identity;
    /// Waits for its end, output drained. Cancel-safe: dropping the future and calling it
    /// again (or [`Started::abort`]) loses nothing.
    fn wait(&mut self) -> BoxFuture<'_, Finish>;
    /// Stops it: a polite stop, then a kill once `grace` has passed, then clean up (a
    /// container is removed).
    fn abort(&mut self, grace: Duration) -> BoxFuture<'_, ()>;
}

/// What [`Executor::find`] found of a step that outlived its engine.
pub enum Found {
    /// Still running: reattached, its further output going to the log.
    Running(Box<dyn Started>),
    /// It ended while no engine watched; this is how.
    Exited(Finish),
    /// Nothing of it is left (or this executor cannot find steps after a restart).
    Gone,
}

/// An executor: where and how steps run.
pub trait Executor: Send + Sync {
    /// Its name in files (`local`, `docker`).
    fn name(&self) -> &'static str;
    /// Starts `launch`, its output lines going to `log`.
    fn start<'a>(
        &'a self,
        launch: &'a Launch,
        log: LogSender,
    ) -> BoxFuture<'a, Result<Box<dyn Started>, ExecError>>;
    /// Finds a step started by an engine that has since died, by its labels.
    fn find<'a>(
        &'a self,
        labels: &'a Labels,
        log: LogSender,
    ) -> BoxFuture<'a, Result<Found, ExecError>>;
    /// How this executor feeds a step's standard input ([`StdinWay::Unsupported`] unless
    /// it says otherwise).
    fn stdin(&self) -> StdinWay {
        StdinWay::Unsupported
    }
    /// Removes what a start of the step run `labels` names, cut off part-way, may have
    /// left behind (a container with no owner). Nothing to do by default.
    fn discard<'a>(&'a self, _labels: &'a Labels) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }
}

/// The executor for a spec: the one place executors are registered.
pub fn executor_for(spec: &ExecutorSpec) -> Result<Arc<dyn Executor>, ExecError> {
    match spec {
        ExecutorSpec::Local => Ok(Arc::new(Local)),
        ExecutorSpec::Docker(spec) => Ok(Arc::new(Docker { spec: spec.clone() })),
        ExecutorSpec::Ssh(s) => Ok(Arc::new(ssh::Ssh::new(s)?)),
        ExecutorSpec::Kubernetes(k) => Ok(Arc::new(kubernetes::Kubernetes::new(k))),
    }
}

/// Whether an executor can run steps as configured, for `baton agents check`: one line
/// saying what answered, or the sentence saying what to fix.
pub async fn check(spec: &ExecutorSpec) -> Result<String, ExecError> {
    match spec {
        ExecutorSpec::Local => Ok("runs on this machine".into()),
        ExecutorSpec::Docker(d) => docker::check(d).await,
        other => executor_for(other).map(|_| String::new()),
    }
}

/// Which executor a step uses: the step's own (`executor`, or the `docker` step shorthand),
/// else its `command` agent profile's, else the workspace default, else local.
pub fn resolve(
    step: Option<ExecutorSpec>,
    profile: Option<&ExecutorSpec>,
    default: Option<&ExecutorSpec>,
) -> ExecutorSpec {
    step.or_else(|| profile.cloned())
        .or_else(|| default.cloned())
        .unwrap_or(ExecutorSpec::Local)
}

/// Waits for a started step, stopping it on `cancel` or once `timeout` has passed.
pub async fn drive(
    step: &mut dyn Started,
    timeout: Duration,
    grace: Duration,
    cancel: &CancellationToken,
) -> Finish {
    let stopped = tokio::select! {
        biased;
        _ = cancel.cancelled() => Finish::Cancelled,
        finish = step.wait() => return finish,
        _ = tokio::time::sleep(timeout) => Finish::TimedOut,
    };
    step.abort(grace).await;
    stopped
}

/// A step that had already ended when it was found.
pub struct Ended(pub Finish, pub Identity);

impl Started for Ended {
    fn identity(&self) -> Identity {
        self.1.clone()
    }
    fn wait(&mut self) -> BoxFuture<'_, Finish> {
        let f = self.0.clone();
        Box::pin(async move { f })
    }
    fn abort(&mut self, _grace: Duration) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// Where a step runs and as what, handed to whatever starts its process.
#[derive(Clone)]
pub struct Place {
    pub executor: Arc<dyn Executor>,
    pub worktree: PathBuf,
    pub context_dir: PathBuf,
    pub labels: Labels,
    /// Set when the engine restarted while the step ran: find it rather than start it.
    pub reattach: bool,
}

impl Place {
    /// Starts `program` (or, when reattaching, finds the step already started).
    pub async fn start(
        &self,
        program: Program,
        env: &StepEnv,
        log: LogSender,
    ) -> Result<Box<dyn Started>, ExecError> {
        self.start_fed(program, None, env, log).await
    }

    /// [`Place::start`] with bytes for the program's standard input.
    pub async fn start_fed(
        &self,
        program: Program,
        stdin: Option<Stdin>,
        env: &StepEnv,
        log: LogSender,
    ) -> Result<Box<dyn Started>, ExecError> {
        if self.reattach {
            return match self.executor.find(&self.labels, log).await? {
                Found::Running(s) => Ok(s),
                Found::Exited(f) => Ok(Box::new(Ended(f, Identity::Container(String::new())))),
                Found::Gone => Err(ExecError(format!(
                    "the step's {} process is gone (it ended while no engine watched and left no exit status)",
                    self.executor.name()
                ))),
            };
        }
        let (program, stdin) = match stdin {
            None => (program, None),
            Some(bytes) => match self.executor.stdin() {
                StdinWay::Pipe => (program, Some(bytes)),
                StdinWay::ContextFile => {
                    // The file holds the first bytes only: more input has no way in, so its
                    // sender must see it gone rather than write into a channel nobody reads.
                    drop(bytes.1.as_ref().and_then(MoreInput::take));
                    (self.stdin_from_file(program, &bytes).await?, None)
                }
                StdinWay::Unsupported => {
                    return Err(ExecError(format!(
                        "the {} executor cannot give a command its prompt on standard input — set `\"prompt_via\": \"argv\"` in the agent profile, or run the agent on the local or docker executor",
                        self.executor.name()
                    )));
                }
            },
        };
        let launch = Launch {
            program,
            env: env.clone(),
            worktree: self.worktree.clone(),
            context_dir: self.context_dir.clone(),
            labels: self.labels.clone(),
            stdin,
        };
        self.executor.start(&launch, log).await
    }

    /// Writes `bytes` to a file in the context folder and wraps `program` so that its
    /// standard input is that file. The file's path and the program travel as argv
    /// elements; nothing is spliced into the shell's script.
    async fn stdin_from_file(&self, program: Program, bytes: &Stdin) -> Result<Program, ExecError> {
        let file = self
            .context_dir
            .join(format!("stdin-{}.txt", self.labels.step_run_id));
        // A container step can write the context folder: a link planted under this name
        // must be replaced, never written through.
        crate::exec::safe_file::write_fresh_async(file.clone(), bytes.0.to_vec())
            .await
            .map_err(|e| {
                ExecError(format!(
                    "could not write the step's standard input to {}: {e}",
                    file.display()
                ))
            })?;
        let argv = match program {
            Program::Shell(script) => vec!["/bin/sh".into(), "-c".into(), script],
            Program::Argv(argv) => argv,
        };
        let mut wrapped: Vec<String> = vec![
            "/bin/sh".into(),
            "-c".into(),
            r#"exec "$@" <"$0""#.into(),
            file.display().to_string(),
        ];
        wrapped.extend(argv);
        Ok(Program::Argv(wrapped))
    }

    /// [`Place::start`], given up when `stop` completes first (an abort, the step's time
    /// limit): whatever the cut-off start left is removed and `stop`'s outcome returned.
    pub async fn start_until<T>(
        &self,
        program: Program,
        env: &StepEnv,
        log: LogSender,
        stop: impl Future<Output = T>,
    ) -> Result<Result<Box<dyn Started>, ExecError>, T> {
        self.start_fed_until(program, None, env, log, stop).await
    }

    /// [`Place::start_until`] with bytes for the program's standard input.
    pub async fn start_fed_until<T>(
        &self,
        program: Program,
        stdin: Option<Stdin>,
        env: &StepEnv,
        log: LogSender,
        stop: impl Future<Output = T>,
    ) -> Result<Result<Box<dyn Started>, ExecError>, T> {
        let started = tokio::select! {
            biased;
            why = stop => Err(why),
            started = self.start_fed(program, stdin, env, log) => Ok(started),
        };
        if started.is_err() {
            self.executor.discard(&self.labels).await;
        }
        started
    }

    /// A place on this machine (for callers without a task: tests, hooks).
    pub fn local(dir: PathBuf) -> Self {
        Self {
            executor: Arc::new(Local),
            worktree: dir.clone(),
            context_dir: dir,
            labels: Labels {
                task_id: 0,
                step_run_id: 0,
                execution_key: String::new(),
                workspace: String::new(),
            },
            reattach: false,
        }
    }
}

/// Everything that decides where a step runs, before its agent profile (if any) is known.
#[derive(Debug, Clone)]
pub struct Placement {
    /// The step's own executor (its `executor` field or the `docker` shorthand).
    pub step: Option<ExecutorSpec>,
    /// The workspace default (`[executor]` in `.baton/config.toml`).
    pub default: Option<ExecutorSpec>,
    pub worktree: PathBuf,
    pub context_dir: PathBuf,
    pub labels: Labels,
    /// Set when the engine restarted while the step ran.
    pub reattach: bool,
}

impl Placement {
    /// The executor for this step given its agent profile's choice, ready to start it.
    pub fn place(
        &self,
        profile: Option<&ExecutorSpec>,
    ) -> Result<(ExecutorSpec, Place), ExecError> {
        let spec = resolve(self.step.clone(), profile, self.default.as_ref());
        let executor = executor_for(&spec)?;
        Ok((
            spec,
            Place {
                executor,
                worktree: self.worktree.clone(),
                context_dir: self.context_dir.clone(),
                labels: self.labels.clone(),
                reattach: self.reattach,
            },
        ))
    }
}

impl std::fmt::Debug for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Place")
            .field("executor", &self.executor.name())
            .field("worktree", &self.worktree)
            .field("labels", &self.labels)
            .field("reattach", &self.reattach)
            .finish()
    }
}

#[cfg(test)]
mod tests;
