//! Shell steps: `sh -c SCRIPT` in its own process group, output streamed line by line.

use super::process::{signal_group, start_time, stop_child};
use super::redact::Redactor;
use super::{Finish, LogSender, Spawned, StepEnv, lines::pump};
use crate::store::Stream;
use nix::sys::signal::Signal;
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

/// How long output may keep flowing after the step's shell exits (background children
/// holding the pipes) before the rest of its group is killed.
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(1);

/// Runs `script` with `sh -c` in `env.workdir`. Task text reaches it only through
/// `env.vars`. `spawned` is called once the process exists, before any output is read.
pub async fn run_shell(
    script: &str,
    env: &StepEnv,
    log: LogSender,
    cancel: CancellationToken,
    spawned: impl FnOnce(Spawned),
) -> Finish {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(script)
        .current_dir(&env.workdir)
        .envs(env.vars.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if cancel.is_cancelled() {
        return Finish::Cancelled;
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return Finish::SpawnFailed(format!(
                "could not start `sh` in {}: {e}",
                env.workdir.display()
            ));
        }
    };
    let Some(pid) = child.id() else {
        return Finish::SpawnFailed("the step's process vanished at start".into());
    };
    spawned(Spawned {
        pid,
        start_time: start_time(pid),
    });
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

    let finish = tokio::select! {
        biased;
        _ = cancel.cancelled() => {
            stop_child(&mut child, pid, env.kill_grace).await;
            Finish::Cancelled
        }
        status = child.wait() => match status {
            Ok(s) => match (s.code(), s.signal()) {
                (Some(code), _) => Finish::Exited(code),
                (None, Some(sig)) => Finish::Signalled(sig),
                (None, None) => Finish::Exited(-1),
            },
            Err(e) => Finish::SpawnFailed(format!("waiting for the step failed: {e}")),
        },
        _ = tokio::time::sleep(env.timeout) => {
            stop_child(&mut child, pid, env.kill_grace).await;
            Finish::TimedOut
        }
    };

    // Let the pipes drain; a background child still holding them is ended with the group.
    for reader in readers.into_iter().flatten() {
        let abort = reader.abort_handle();
        if tokio::time::timeout(DRAIN_AFTER_EXIT, reader)
            .await
            .is_err()
        {
            signal_group(pid, Signal::SIGKILL);
            abort.abort();
        }
    }
    signal_group(pid, Signal::SIGKILL);
    finish
}
