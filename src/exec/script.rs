//! Shell steps on this machine: `sh -c SCRIPT` through the `local` executor.

use super::executor::{Identity, Place, Program, drive};
use super::{Finish, LogSender, Spawned, StepEnv};
use tokio_util::sync::CancellationToken;

/// Runs `script` with `sh -c` in `env.workdir`. Task text reaches it only through
/// `env.vars`. `spawned` is called once the process exists.
pub async fn run_shell(
    script: &str,
    env: &StepEnv,
    log: LogSender,
    cancel: CancellationToken,
    spawned: impl FnOnce(Spawned),
) -> Finish {
    if cancel.is_cancelled() {
        return Finish::Cancelled;
    }
    let place = Place::local(env.workdir.clone());
    let mut step = match place.start(Program::Shell(script.into()), env, log).await {
        Ok(s) => s,
        Err(e) => return Finish::SpawnFailed(e.0),
    };
    if let Identity::Process { pid, start_time } = step.identity() {
        spawned(Spawned { pid, start_time });
    }
    drive(step.as_mut(), env.timeout, env.kill_grace, &cancel).await
}
