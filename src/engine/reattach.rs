//! Steps that outlived their engine on an executor that keeps them (a container): recovery
//! asks the executor for them, and the engine picks those it found back up, so a step is
//! never started twice for one execution key.

use crate::exec::executor::{ExecError, Found, Labels, executor_for};
use crate::pipeline::{ExecutorSpec, StepAction};
use crate::store::{Db, StepRun, Store};
use crate::workspace::Workspace;

/// The executor a recorded step ran on, from its task's pipeline snapshot, its agent
/// profile and the workspace default; `None` for one that ran locally.
pub(super) fn executor_of(ws: &Workspace, store: &Store, step: &StepRun) -> Option<ExecutorSpec> {
    let pipeline = store.read().pipeline(step.task_id).ok()?;
    let spec = pipeline.status(&step.status)?.step.clone()?;
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
    let chosen =
        crate::exec::executor::resolve(spec.own_executor(), profile.as_ref(), default.as_ref());
    (chosen != ExecutorSpec::Local).then_some(chosen)
}

/// Asks `spec`'s executor whether the step is still there (running, or ended with a status
/// to record). Runs on a thread of its own: recovery is not async.
pub(super) fn still_there(
    ws: &Workspace,
    spec: &ExecutorSpec,
    step: &StepRun,
) -> Result<bool, ExecError> {
    let executor = executor_for(spec)?;
    let labels = Labels {
        task_id: step.task_id,
        step_run_id: step.id,
        execution_key: step.execution_key.clone(),
        workspace: ws.root().display().to_string(),
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| ExecError(e.to_string()))?;
            rt.block_on(async {
                let (tx, _rx) = tokio::sync::mpsc::channel(1);
                Ok(match executor.find(&labels, tx).await? {
                    Found::Running(_) | Found::Exited(_) => true,
                    Found::Gone => false,
                })
            })
        })
        .join()
        .unwrap_or_else(|_| Err(ExecError("looking for the step panicked".into())))
    })
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
