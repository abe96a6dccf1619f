//! The `local` executor: the step's process on this machine, in the task's worktree, in a
//! process group of its own, its output streamed line by line. From the `baton` binary it
//! runs under a guard (`exec::guard`) that ends it when the engine dies; stopping it ends
//! every process holding its execution key, in whatever session (unless its guard saw
//! that none is left).

use super::drain::drain_readers;
use super::{
    BoxFuture, ExecError, Executor, Found, Identity, Labels, Launch, Program, Started, StdinWay,
};
use crate::exec::lines::pump;
use crate::exec::process::{
    Mark, end_marked, engine_secret_names, kill_marked_blocking, signal_group, start_time,
    stop_child,
};
use crate::exec::redact::Redactor;
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
        Box::pin(async move { spawn(launch, log).map(|s| Box::new(s) as Box<dyn Started>) })
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

fn spawn(launch: &Launch, log: LogSender) -> Result<LocalStep, ExecError> {
    let env = &launch.env;
    let argv: Vec<String> = match &launch.program {
        Program::Shell(script) => vec!["sh".into(), "-c".into(), script.clone()],
        Program::Argv(argv) => argv.clone(),
    };
    let Some(what) = argv.first().cloned() else {
        return Err(ExecError("the command line is empty".into()));
    };
    let guarded = match launch.stdin {
        Some(_) => crate::exec::guard::command(&argv, env.kill_grace).map(|(mut c, end)| {
            c.stdin(Stdio::piped());
            (c, end)
        }),
        None => crate::exec::guard::command_without_input(&argv, env.kill_grace),
    };
    let (mut cmd, engine_end) =
        guarded.map_err(|e| ExecError(format!("could not make the step's guard pipe: {e}")))?;
    // Under a guard a missing program would only show as its exit: say it as before.
    if engine_end.is_some() {
        let path = env.vars.iter().rev().find(|(k, _)| k == "PATH");
        let path = path
            .map(|(_, v)| v.into())
            .or_else(|| std::env::var_os("PATH"));
        runnable(&what, &env.workdir, path.as_deref()).map_err(|e| {
            ExecError(format!(
                "could not start `{what}` in {}: {e}",
                env.workdir.display()
            ))
        })?;
    }
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
    let mut child = cmd.spawn().map_err(|e| {
        ExecError(format!(
            "could not start `{what}` in {}: {e}",
            env.workdir.display()
        ))
    })?;
    let Some(pid) = child.id() else {
        return Err(ExecError("the step's process vanished at start".into()));
    };
    // Written from a task of its own, so a program that prints before it has read all its
    // input cannot deadlock against the output pipes. A program that exits without reading
    // it all closes the pipe: that is its business, not an error.
    if let (Some(bytes), Some(mut input)) = (launch.stdin.clone(), child.stdin.take()) {
        // The rest of the input is taken now: if the first bytes cannot be written, it is
        // dropped with this task and whoever sends more sees the input gone.
        let more = bytes.1.as_ref().and_then(|m| m.take());
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            if input.write_all(&bytes.0).await.is_ok()
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
        });
    }
    // The same secrets the engine masks in the step's lines: long lines are cut around them.
    let secrets = Arc::new(Redactor::from_vars(
        crate::exec::redact::env_vars().chain(env.vars.iter().cloned()),
    ));
    let readers = [
        child
            .stdout
            .take()
            .map(|s| tokio::spawn(pump(s, Stream::Stdout, log.clone(), secrets.clone()))),
        child
            .stderr
            .take()
            .map(|s| tokio::spawn(pump(s, Stream::Stderr, log.clone(), secrets.clone()))),
    ];
    let started = start_time(pid);
    Ok(LocalStep {
        start_time: started,
        // Every process of the step starts after its guard: older ones are not read.
        mark: Mark::from_vars(env.vars.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .map(|m| m.since(started)),
        engine_end,
        left_nothing: false,
        child,
        pid,
        readers: readers.into_iter().flatten().collect(),
        exited: None,
        drain_until: None,
    })
}

/// Whether `program` can be started in `dir` with the search path `path`.
fn runnable(program: &str, dir: &Path, path: Option<&std::ffi::OsStr>) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let found = if program.contains('/') {
        executable(&dir.join(program))
    } else {
        path.is_some_and(|path| std::env::split_paths(path).any(|d| executable(&d.join(program))))
    };
    match found {
        true => Ok(()),
        false => Err(std::io::Error::from_raw_os_error(nix::libc::ENOENT)),
    }
}

/// A local step's process group.
struct LocalStep {
    child: Child,
    pid: u32,
    start_time: Option<u64>,
    /// Its execution key and workspace: stopping it ends every process that carries them.
    mark: Option<Mark>,
    /// The engine's end of the guard's socket: closed when the engine dies (or this is
    /// dropped), which ends the step; the guard says on it when it left nothing behind.
    engine_end: Option<OwnedFd>,
    /// The guard said so (it says it once): no process of the step is left.
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
        // A guard that saw the last process below it end has said so: nothing of the
        // step is left, and /proc need not be read.
        if self.exited.is_some() && !self.left_nothing {
            let end = self.engine_end.as_ref();
            self.left_nothing = end.is_some_and(crate::exec::guard::left_nothing);
        }
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
                let status = self.child.wait().await;
                self.exited = Some(match status {
                    Ok(s) => match (s.code(), s.signal()) {
                        (Some(code), _) => Finish::Exited(code),
                        (None, Some(sig)) => Finish::Signalled(sig),
                        (None, None) => Finish::Exited(-1),
                    },
                    Err(e) => Finish::SpawnFailed(format!("waiting for the step failed: {e}")),
                });
            }
            self.drain().await;
            self.exited.clone().unwrap_or(Finish::Exited(-1))
        })
    }

    fn abort(&mut self, grace: Duration) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if self.exited.is_none() {
                let started = tokio::time::Instant::now();
                stop_child(&mut self.child, self.pid, grace).await;
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
