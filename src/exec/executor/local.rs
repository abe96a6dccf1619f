//! The `local` executor: the step's process on this machine, in the task's worktree, in a
//! process group of its own, its output streamed line by line. From the `baton` binary it
//! is started by the engine's warden (`exec::warden`), or under a guard of its own
//! (`exec::guard`), either of which ends it when the engine dies; stopping it ends every
//! process holding its execution key, in whatever session (unless its warden or guard saw
//! that none is left).

use super::drain::drain_readers;
use super::{
    BoxFuture, ExecError, Executor, Found, Identity, Labels, Launch, Program, Started, StdinWay,
};
use crate::exec::lines::pump;
use crate::exec::process::{
    Mark, end_marked, engine_secret_names, kill_marked_blocking, signal_group, start_time,
    stop_child, terminate_group,
};
use crate::exec::redact::Redactor;
use crate::exec::warden::wire::Status;
use crate::exec::{Finish, LogSender};
use crate::store::Stream;
use nix::sys::signal::Signal;
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::process::Child;
use tokio::task::JoinHandle;

/// How long output may keep flowing after the step's process exits (background children
/// holding the pipes) before the rest of its group is killed.
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(1);

/// Runs steps on this machine.
#[derive(Debug, Clone, Copy, Default)]
pub struct Local;

impl Executor for Local {
    fn name(&self) -> &'static str {
        "local"
    }

    fn start<'a>(
        &'a self,
        launch: &'a Launch,
        log: LogSender,
    ) -> BoxFuture<'a, Result<Box<dyn Started>, ExecError>> {
        Box::pin(async move {
            spawn(launch, log)
                .await
                .map(|s| Box::new(s) as Box<dyn Started>)
        })
    }

    fn stdin(&self) -> StdinWay {
        StdinWay::Pipe
    }

    /// A local step's process group is found by the engine's recovery from its recorded pid;
    /// it is never reattached (its pipes died with the engine).
    fn find<'a>(
        &'a self,
        _labels: &'a Labels,
        _log: LogSender,
    ) -> BoxFuture<'a, Result<Found, ExecError>> {
        Box::pin(async { Ok(Found::Gone) })
    }
}

async fn spawn(launch: &Launch, log: LogSender) -> Result<LocalStep, ExecError> {
    let env = &launch.env;
    let argv: Vec<String> = match &launch.program {
        Program::Shell(script) => vec!["sh".into(), "-c".into(), script.clone()],
        Program::Argv(argv) => argv.clone(),
    };
    let Some(what) = argv.first().cloned() else {
        return Err(ExecError("the command line is empty".into()));
    };
    // A missing folder and a missing program both come back as "no such file": each is
    // said for what it is.
    let no_folder = || {
        (!env.workdir.is_dir()).then(|| {
            ExecError(format!(
                "could not start `{what}`: the step's folder {} does not exist — check the step's `workdir`",
                env.workdir.display()
            ))
        })
    };
    let cannot = |e: std::io::Error| {
        let missing = e.kind() == std::io::ErrorKind::NotFound;
        missing.then(no_folder).flatten().unwrap_or_else(|| {
            ExecError(format!(
                "could not start `{what}` in {}: {e}",
                env.workdir.display()
            ))
        })
    };
    // Looked up here, on the step's own PATH: a missing program is said as such, not
    // only as the exit of whatever started it.
    let path = env
        .var("PATH")
        .map(Into::into)
        .or_else(|| std::env::var_os("PATH"));
    let look = match &launch.program {
        Program::Shell(_) => super::lookup::find_shell,
        Program::Argv(_) => super::lookup::find,
    };
    let program = look(&what, &env.workdir, path.as_deref()).map_err(|_| {
        no_folder().unwrap_or_else(|| {
            ExecError(match (what.contains('/'), &path) {
                (true, _) => format!(
                    "could not start `{what}`: {}",
                    super::lookup::why_not_found(&what, &env.workdir)
                ),
                (false, Some(p)) if p.is_empty() => format!(
                    "could not start `{what}`: the step's PATH is empty — give its full path, or set PATH in the step's `env`"
                ),
                (false, Some(p)) => format!(
                    "could not start `{what}`: it is not on the step's PATH ({}) — install it, or set PATH in the step's `env`",
                    p.to_string_lossy()
                ),
                (false, None) => format!(
                    "could not start `{what}`: the step has no PATH to find it on — give its full path, or set PATH in the step's `env`"
                ),
            })
        })
    })?;
    // The same secrets the engine masks in the step's lines: long lines are cut around them.
    let pumps = Pumps {
        log,
        secrets: Arc::new(Redactor::from_vars(
            crate::exec::redact::env_secrets().chain(env.vars.iter().cloned()),
        )),
    };
    let (proc, pid, stdin, readers) = match by_warden(launch, &argv, &program, &pumps).await {
        Some(started) => started.map_err(cannot)?,
        None => by_guard(launch, &argv, &what, &pumps).map_err(cannot)?,
    };
    // Written from a task of its own, so a program that prints before it has read all its
    // input cannot deadlock against the output pipes. A program that exits without reading
    // it all closes the pipe: that is its business, not an error.
    if let (Some(bytes), Some(input)) = (launch.stdin.clone(), stdin) {
        // The rest of the input is taken now: if the first bytes cannot be written, it is
        // dropped with this task and whoever sends more sees the input gone.
        let more = bytes.1.as_ref().and_then(|m| m.take());
        tokio::spawn(feed(input, bytes.0, more));
    }
    // The warden read it as it started the step; a guard's step is read here.
    let started = match &proc {
        Proc::Warden(child) => child.start_time.or_else(|| start_time(pid)),
        _ => start_time(pid),
    };
    Ok(LocalStep {
        start_time: started,
        // Every process of the step starts after its leader: older ones are not read.
        mark: Mark::from_vars(env.vars.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .map(|m| m.since(started)),
        left_nothing: false,
        proc,
        pid,
        readers,
        exited: None,
        drain_until: None,
    })
}

type Input = Box<dyn tokio::io::AsyncWrite + Send + Unpin>;
type Output = Box<dyn tokio::io::AsyncRead + Send + Unpin>;
/// A started step: its leader, its pid, its standard input, the tasks reading its output.
type Spawned = (Proc, u32, Option<Input>, Vec<JoinHandle<()>>);

/// Where a step's output lines go.
struct Pumps {
    log: LogSender,
    secrets: Arc<Redactor>,
}

impl Pumps {
    /// Reads the step's standard output and error, line by line, from now on.
    fn start(&self, out: Output, err: Output) -> Vec<JoinHandle<()>> {
        vec![
            tokio::spawn(pump(
                out,
                Stream::Stdout,
                self.log.clone(),
                self.secrets.clone(),
            )),
            tokio::spawn(pump(
                err,
                Stream::Stderr,
                self.log.clone(),
                self.secrets.clone(),
            )),
        ]
    }
}

/// The step started by the engine's warden, with pipes made here; None when there is no
/// warden or the step does not fit in a message to it.
async fn by_warden(
    launch: &Launch,
    argv: &[String],
    program: &Path,
    pumps: &Pumps,
) -> Option<std::io::Result<Spawned>> {
    use tokio::net::unix::pipe;
    let env = &launch.env;
    // The engine's own secrets (a webhook secret, an API token) are none of a step's
    // business: it does not inherit them. One the step's `env` names is its own.
    let secret = engine_secret_names();
    let mut vars: Vec<std::ffi::OsString> = crate::exec::process::process_env()
        .iter()
        .filter(|(k, _)| !secret.contains(k))
        .cloned()
        .chain(env.vars.iter().map(|(k, v)| (k.into(), v.into())))
        .map(|(k, v)| {
            let mut kv = k;
            kv.push("=");
            kv.push(v);
            kv
        })
        .collect();
    vars.shrink_to_fit();
    let ready =
        crate::exec::warden::ready(program, argv, vars, &env.workdir, env.kill_grace).await?;
    let pipes = || -> std::io::Result<_> {
        let out = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        let err = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        let input = match launch.stdin {
            Some(_) => {
                let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
                (r, Some(w))
            }
            None => (OwnedFd::from(std::fs::File::open("/dev/null")?), None),
        };
        Ok((out, err, input))
    };
    let ((out_r, out_w), (err_r, err_w), (in_r, in_w)) = match pipes() {
        Ok(p) => p,
        Err(e) => return Some(Err(e)),
    };
    // Read from before the step starts, as its lines come: a fast step's two streams
    // stay in the order it wrote them as far as the two pipes can tell. (If it does not
    // start, its write ends close and the readers end.)
    let readers = match (
        pipe::Receiver::from_owned_fd(out_r),
        pipe::Receiver::from_owned_fd(err_r),
    ) {
        (Ok(out), Ok(err)) => pumps.start(Box::new(out), Box::new(err)),
        (Err(e), _) | (_, Err(e)) => return Some(Err(e)),
    };
    // Its input is written from before it starts too, into the pipe's buffer.
    if let (Some(bytes), Some(w)) = (launch.stdin.clone(), in_w) {
        match pipe::Sender::from_owned_fd(w) {
            Ok(input) => {
                let more = bytes.1.as_ref().and_then(|m| m.take());
                tokio::spawn(feed(Box::new(input), bytes.0, more));
            }
            Err(e) => return Some(Err(e)),
        }
    }
    let child = match ready.spawn([in_r, out_w, err_w]).await {
        Ok(c) => c,
        Err(e) => return Some(Err(e)),
    };
    let pid = child.pid;
    Some(Ok((Proc::Warden(child), pid, None, readers)))
}

/// The step started under a guard of its own (or, under a test harness, directly).
fn by_guard(
    launch: &Launch,
    argv: &[String],
    what: &str,
    pumps: &Pumps,
) -> std::io::Result<Spawned> {
    let env = &launch.env;
    let (mut cmd, engine_end) = match launch.stdin {
        Some(_) => crate::exec::guard::command(argv, env.kill_grace).map(|(mut c, end)| {
            c.stdin(Stdio::piped());
            (c, end)
        }),
        None => crate::exec::guard::command_without_input(argv, env.kill_grace),
    }
    .map_err(|e| std::io::Error::other(format!("could not make the step's guard pipe: {e}")))?;
    // The engine's own secrets (a webhook secret, an API token) are none of a step's
    // business: it does not inherit them. One the step's `env` names is its own.
    for name in engine_secret_names() {
        cmd.env_remove(name);
    }
    cmd.current_dir(&env.workdir)
        .envs(env.vars.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        // A guard ends the step itself when its pipe closes, after the grace period; a
        // SIGKILL would leave the program running without it.
        .kill_on_drop(engine_end.is_none());
    let mut child = cmd.spawn()?;
    let Some(pid) = child.id() else {
        return Err(std::io::Error::other(format!(
            "`{what}` vanished as it started"
        )));
    };
    let input = child.stdin.take().map(|i| Box::new(i) as Input);
    let (Some(out), Some(err)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(std::io::Error::other(
            "the step's output pipes were not made",
        ));
    };
    let proc = Proc::Own { child, engine_end };
    Ok((proc, pid, input, pumps.start(Box::new(out), Box::new(err))))
}

/// Writes `first` and then whatever comes on `more` to the step's standard input, and
/// closes it.
async fn feed(
    mut input: Input,
    first: Arc<[u8]>,
    more: Option<tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>>,
) {
    use tokio::io::AsyncWriteExt;
    // A step that exits without reading its input all makes a write fail, not the engine:
    // every command that runs steps ignores SIGPIPE (`Command::hosts_work`).
    if input.write_all(&first).await.is_ok()
        && let Some(mut more) = more
    {
        let _ = input.flush().await;
        while let Some(chunk) = more.recv().await {
            if input.write_all(&chunk).await.is_err() || input.flush().await.is_err() {
                break;
            }
        }
    }
    let _ = input.shutdown().await;
}

/// The step's leader, and how its end is learnt.
enum Proc {
    /// Started by the engine's warden, which says how it ended and whether anything of it
    /// is left.
    Warden(crate::exec::warden::Child),
    /// Started by the engine: its guard (or, under a test harness, the program itself).
    /// The engine's end of the guard's socket closes when the engine dies (or this is
    /// dropped), which ends the step; the guard says on it when it left nothing behind.
    Own {
        child: Child,
        engine_end: Option<OwnedFd>,
    },
}

impl Proc {
    /// Waits for the leader to end: how, and whether nothing of the step is left.
    async fn wait(&mut self) -> (Finish, bool) {
        match self {
            Proc::Warden(child) => match child.wait().await {
                Some(ended) => {
                    let finish = match ended.status {
                        Status::Exited(code) => Finish::Exited(code),
                        Status::Signalled(sig) => Finish::Signalled(sig),
                    };
                    (finish, ended.clean)
                }
                None => (
                    Finish::SpawnFailed("the engine's warden stopped, and the step with it".into()),
                    false,
                ),
            },
            Proc::Own { child, engine_end } => {
                let finish = match child.wait().await {
                    Ok(s) => match (s.code(), s.signal()) {
                        (Some(code), _) => Finish::Exited(code),
                        (None, Some(sig)) => Finish::Signalled(sig),
                        (None, None) => Finish::Exited(-1),
                    },
                    Err(e) => Finish::SpawnFailed(format!("waiting for the step failed: {e}")),
                };
                let clean = engine_end
                    .as_ref()
                    .is_some_and(crate::exec::guard::left_nothing);
                (finish, clean)
            }
        }
    }

    /// SIGTERM to the group, SIGKILL after `grace`, the leader reaped; what is left of
    /// the group gets the rest of the grace period.
    async fn stop(&mut self, pgid: u32, grace: Duration) {
        match self {
            Proc::Own { child, .. } => stop_child(child, pgid, grace).await,
            Proc::Warden(child) => {
                let started = tokio::time::Instant::now();
                signal_group(pgid, Signal::SIGTERM);
                if tokio::time::timeout(grace, child.wait()).await.is_err() {
                    signal_group(pgid, Signal::SIGKILL);
                    // Its end comes through the warden: a stuck warden does not hold the
                    // stop (the group is gone by now whatever it says).
                    let _ = tokio::time::timeout(grace, child.wait()).await;
                    return;
                }
                terminate_group(pgid, grace.saturating_sub(started.elapsed())).await;
            }
        }
    }
}

/// A local step's process group.
struct LocalStep {
    proc: Proc,
    pid: u32,
    start_time: Option<u64>,
    /// Its execution key and workspace: stopping it ends every process that carries them.
    mark: Option<Mark>,
    /// Whoever watched the step said so: no process of the step is left.
    left_nothing: bool,
    readers: Vec<JoinHandle<()>>,
    exited: Option<Finish>,
    drain_until: Option<tokio::time::Instant>,
}

impl LocalStep {
    /// Lets the pipes drain; a background child still holding them past the deadline
    /// (set at the first call, so a caller that drops and repeats this cannot extend it) is
    /// ended with the group.
    async fn drain(&mut self) {
        drain_readers(&mut self.readers, &mut self.drain_until, DRAIN_AFTER_EXIT).await;
        signal_group(self.pid, Signal::SIGKILL);
        // A warden or guard that saw the last process of the step end has said so:
        // nothing of it is left, and /proc need not be read.
        if self.left_nothing {
            return;
        }
        // What left the group (a `setsid` child) goes too: nothing outlives its step.
        if let Some(mark) = self.mark.clone() {
            let _ = tokio::task::spawn_blocking(move || kill_marked_blocking(&mark)).await;
        }
    }
}

impl Started for LocalStep {
    fn identity(&self) -> Identity {
        Identity::Process {
            pid: self.pid,
            start_time: self.start_time,
        }
    }

    fn wait(&mut self) -> BoxFuture<'_, Finish> {
        Box::pin(async move {
            if self.exited.is_none() {
                let (finish, clean) = self.proc.wait().await;
                self.exited = Some(finish);
                self.left_nothing = clean;
            }
            self.drain().await;
            self.exited.clone().unwrap_or(Finish::Exited(-1))
        })
    }

    fn abort(&mut self, grace: Duration) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if self.exited.is_none() {
                let started = tokio::time::Instant::now();
                self.proc.stop(self.pid, grace).await;
                self.exited = Some(Finish::Cancelled);
                // The processes out of the group's reach get what is left of the grace.
                if let Some(mark) = &self.mark {
                    end_marked(mark, grace.saturating_sub(started.elapsed())).await;
                }
            }
            self.drain().await;
        })
    }
}
