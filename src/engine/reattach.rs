//! Steps that outlived their engine on an executor that keeps them (a container, a Job):
//! recovery asks the executor the step ran on for them, and the engine picks those it
//! found back up, so a step is never started twice for one execution key.

use crate::exec::executor::{Found, Labels, executor_for};
use crate::pipeline::{ExecutorSpec, Pipeline, StepAction};
use crate::store::{Db, StepRun};
use crate::workspace::Workspace;
use std::time::Duration;

/// How long recovery waits for an executor (a Docker daemon, a Kubernetes API) to say
/// whether a step is still there.
pub(super) const LOOKUP_LIMIT: Duration = Duration::from_secs(15);

/// The executor a recorded step ran on: the one recorded when it started; for a step
/// started before executors were recorded, the one its pipeline snapshot, agent profile
/// and the workspace default name now.
pub(super) fn executor_of(
    ws: &Workspace,
    pipeline: Option<&Pipeline>,
    recorded: Option<&str>,
    step: &StepRun,
) -> ExecutorSpec {
    if let Some(spec) = recorded.and_then(super::placement::parse) {
        return spec;
    }
    let Some(spec) = pipeline
        .and_then(|p| p.status(&step.status))
        .and_then(|s| s.step.clone())
    else {
        return ExecutorSpec::Local;
    };
    let profile = match &spec.action {
        StepAction::Agent(id) => {
            let catalog = crate::agents::load_agents(Some(&ws.agents_dir()));
            catalog
                .get(id)
                .ok()
                .filter(|p| p.backend == crate::agents::Backend::Command)
                .and_then(|p| p.executor.clone())
        }
        _ => None,
    };
    let default = ws.config().ok().and_then(|c| c.default_executor);
    crate::exec::executor::resolve(spec.own_executor(), profile.as_ref(), default.as_ref())
}

/// Asks `spec`'s executor whether the step is still there (running, or ended with a status
/// to record), waiting at most [`LOOKUP_LIMIT`]. `Err` when the executor did not answer:
/// then nobody knows whether the step still runs.
pub(super) async fn still_there(
    ws: &Workspace,
    spec: &ExecutorSpec,
    step: &StepRun,
) -> Result<bool, String> {
    let executor = executor_for(spec).map_err(|e| e.0)?;
    let labels = Labels {
        task_id: step.task_id,
        step_run_id: step.id,
        execution_key: step.execution_key.clone(),
        workspace: ws.root().display().to_string(),
    };
    let (tx, _rx) = tokio::sync::mpsc::channel(1);
    match tokio::time::timeout(LOOKUP_LIMIT, executor.find(&labels, tx)).await {
        Ok(Ok(Found::Running(_) | Found::Exited(_))) => Ok(true),
        Ok(Ok(Found::Gone)) => Ok(false),
        Ok(Err(e)) => Err(e.0),
        Err(_) => Err(format!("no answer within {} s", LOOKUP_LIMIT.as_secs())),
    }
}

/// The step runs recovery left running for the engine to reattach: still `running`.
pub(super) fn still_running(db: &Db, ids: &[i64]) -> crate::store::Result<Vec<StepRun>> {
    let mut out = Vec::new();
    for id in ids {
        let step = db.step_run(*id)?;
        if step.state == crate::store::StepState::Running {
            out.push(step);
        }
    }
    Ok(out)
}
