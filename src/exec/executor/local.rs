//! The `local` executor: the step's process on this machine, in the task's worktree, in a
//! process group of its own, its output streamed line by line.

use super::drain::drain_readers;
use super::{
    BoxFuture, ExecError, Executor, Found, Identity, Labels, Launch, Program, Started, StdinWay,
};
use crate::exec::lines::pump;
use crate::exec::process::{signal_group, start_time, stop_child};
use crate::exec::redact::Redactor;
use crate::exec::{Finish, LogSender};
use crate::store::Stream;
use nix::sys::signal::Signal;
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::process::{Child, Command};
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
    let (mut cmd, what) = match &launch.program {
        Program::Shell(script) => {
            let mut c = Command::new("sh");
            c.arg("-c").arg(script);
            (c, "sh".to_string())
        }
        Program::Argv(argv) => {
            let Some(program) = argv.first() else {
                return Err(ExecError("the command line is empty".into()));
            };
            let mut c = Command::new(program);
            c.args(&argv[1..]);
            (c, program.clone())
        }
    };
    cmd.current_dir(&env.workdir)
        .envs(env.vars.iter().map(|(k, v)| (k, v)))
        .stdin(match launch.stdin {
            Some(_) => Stdio::piped(),
            None => Stdio::null(),
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
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
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            let _ = input.write_all(&bytes.0).await;
            let _ = input.shutdown().await;
        });
    }
    // The same secrets the engine masks in the step's lines: long lines are cut around them.
    let secrets = Arc::new(Redactor::from_vars(
        std::env::vars().chain(env.vars.iter().cloned()),
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
    Ok(LocalStep {
        start_time: start_time(pid),
        child,
        pid,
        readers: readers.into_iter().flatten().collect(),
        exited: None,
        drain_until: None,
    })
}

/// A local step's process group.
struct LocalStep {
    child: Child,
    pid: u32,
    start_time: Option<u64>,
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
                stop_child(&mut self.child, self.pid, grace).await;
                self.exited = Some(Finish::Cancelled);
            }
            self.drain().await;
        })
    }
}
