//! Where a step runs, resolved once as it starts and recorded on its step run before it
//! starts: a restart looks for the step there (and reattaches to it there), whatever the
//! configuration and agent profiles say by then.

use super::runner::{Job, placement_for};
use crate::exec::executor::{Placement, resolve};
use crate::pipeline::{ExecutorSpec, StepAction};
use crate::store::StoreHandle;

/// The job's placement, and for a new step on this machine the record of where it runs,
/// for the caller to write with the step's process group ([`record_local`]). A step on
/// another executor has its record committed first; a step picked back up after a restart
/// is placed on the executor recorded when it started.
pub(super) async fn placement(job: &Job, store: &StoreHandle) -> (Placement, Option<String>) {
    let mut placement = placement_for(job);
    let id = job.step.id;
    if job.reattach {
        let recorded = store.read(move |db| db.step_executor(id)).await;
        if let Some(spec) = recorded.ok().flatten().as_deref().and_then(parse)
            && spec != ExecutorSpec::Local
        {
            placement.step = Some(spec);
        }
        return (placement, None);
    }
    let spec = resolved(job, &placement);
    let json = to_record(&spec);
    // A local process is found again by the process group it records after it starts
    // (or by its mark), so its record need not be committed before it starts.
    if spec == ExecutorSpec::Local {
        return (placement, Some(json));
    }
    if let Err(e) = store.write(move |db| db.set_step_executor(id, &json)).await {
        tracing::warn!("recording where step run {id} runs failed: {e}");
    }
    (placement, None)
}

/// Queues the record of a local step: where it runs (`executor`, from [`placement`]) and,
/// once started, its process group.
pub(super) fn record_local(
    store: &StoreHandle,
    step_id: i64,
    executor: Option<String>,
    group: Option<(u32, Option<u64>)>,
) {
    if executor.is_none() && group.is_none() {
        return;
    }
    store.write_detached("where a step runs", move |db| {
        if let Some(json) = &executor {
            db.set_step_executor(step_id, json)?;
        }
        if let Some((pid, start)) = group {
            db.set_step_process(step_id, pid as i64, start.map(|t| t as i64))?;
        }
        Ok(())
    });
}

/// The executor a job's step runs on: its own, else its `command` agent profile's, else
/// the workspace default; other agent backends run on this machine.
fn resolved(job: &Job, placement: &Placement) -> ExecutorSpec {
    let StepAction::Agent(id) = &job.spec.action else {
        return resolve(placement.step.clone(), None, placement.default.as_ref());
    };
    let read;
    let catalog = match job.agents.as_deref() {
        Some(c) => c,
        None => {
            let ws = crate::workspace::Workspace::at(&job.workspace_root);
            read = crate::agents::load_agents(Some(&ws.agents_dir()));
            &read
        }
    };
    match catalog.get(id) {
        Ok(p) if p.backend != crate::agents::Backend::Command => ExecutorSpec::Local,
        Ok(p) => resolve(
            placement.step.clone(),
            p.executor.as_ref(),
            placement.default.as_ref(),
        ),
        Err(_) => resolve(placement.step.clone(), None, placement.default.as_ref()),
    }
}

/// The spec as recorded. A git remote may carry credentials in its URL, and finding a Job
/// again does not need it (the Job carries it): it is left out.
fn to_record(spec: &ExecutorSpec) -> String {
    let mut spec = spec.clone();
    if let ExecutorSpec::Kubernetes(k) = &mut spec {
        k.git_remote = None;
    }
    serde_json::to_string(&spec).unwrap_or_default()
}

/// A recorded spec; `None` for one this build cannot read.
pub(super) fn parse(json: &str) -> Option<ExecutorSpec> {
    serde_json::from_str(json).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::executor_spec::KubeSpec;

    #[test]
    fn a_recorded_spec_reads_back_without_its_git_remote() {
        let spec = ExecutorSpec::Kubernetes(KubeSpec {
            image: "alpine".into(),
            namespace: Some("team".into()),
            resources: Default::default(),
            node_selector: Default::default(),
            git_remote: Some("https://user:secret@git.example.com/r.git".into()),
        });
        let json = to_record(&spec);
        assert!(!json.contains("secret"), "{json}");
        let ExecutorSpec::Kubernetes(back) = parse(&json).unwrap() else {
            panic!("{json}")
        };
        assert_eq!(back.namespace.as_deref(), Some("team"));
        assert_eq!(
            parse(&to_record(&ExecutorSpec::Local)),
            Some(ExecutorSpec::Local)
        );
    }

    /// The store reads an unrecorded step of a named engine as this record.
    #[test]
    fn the_store_records_a_local_step_as_placement_does() {
        assert_eq!(to_record(&ExecutorSpec::Local), "\"local\"");
    }
}
