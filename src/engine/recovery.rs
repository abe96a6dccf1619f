//! Start-up recovery: steps left `running` by a dead engine become `interrupted`, and a
//! process group that outlived its engine is ended once it is proven to be that step's,
//! with every process still holding the step's execution key.
//! A step on an executor that keeps it (a container, a Job) is looked for there and picked
//! back up; one whose executor does not answer stays `running` until it does.

use super::actions::{Action, Request, apply};
use super::results::interrupt_step;
use crate::exec::process::{
    Mark, Orphan, classify_orphan, end_marked_blocking, group_alive, signal_group,
};
use crate::pipeline::{ExecutorSpec, Pipeline, StepAction};
use crate::store::{NewEvent, StepRun, Store, StoreHandle, Task, TaskFilter, TaskState};
use crate::workspace::Workspace;
use nix::sys::signal::Signal;
use serde_json::json;
use std::time::{Duration, Instant};

/// What recovery found and did.
#[derive(Debug, Default, Clone)]
pub struct Recovered {
    pub interrupted: Vec<i64>,
    pub killed_groups: Vec<i64>,
    pub resumed: Vec<i64>,
    /// Step runs left running on an executor that kept them (a container), for the engine
    /// to pick back up.
    pub reattach: Vec<i64>,
    /// Step runs left running because their executor did not answer: whether they still
    /// run is unknown, so they are neither interrupted nor started again; the engine looks
    /// for them again later.
    pub unknown: Vec<i64>,
    /// The tasks of those step runs.
    pub unknown_tasks: Vec<i64>,
}

/// What became of a step's remote executor lookup.
#[derive(Debug)]
enum Remote {
    There,
    Gone,
    NoAnswer(String),
}

/// What recovery found of one step, looked up outside the store's writer.
#[derive(Debug)]
pub(super) struct Looked {
    step: StepRun,
    /// The local process group it recorded (a script, an agent CLI, an `ssh` client).
    group: Option<(i64, Orphan)>,
    /// What became of its OpenCode session.
    session: Option<String>,
    remote: Option<(ExecutorSpec, Remote)>,
}

/// Looks at the steps a dead engine left running (`only`: just these step runs): ends the
/// local process group a step recorded, whatever executor it ran on; aborts its OpenCode
/// session; and asks the executor it was started on (not the one configured now) whether
/// it is still there, each question under a time limit. Nothing here holds the store's
/// writer, so an executor that does not answer holds up no write. `owner`: on a board
/// shared by several engines, only the steps this engine's previous incarnation left.
pub(super) async fn look(
    ws: &Workspace,
    store: &StoreHandle,
    grace: Duration,
    only: Option<&[i64]>,
    owner: Option<&str>,
) -> super::Result<Vec<Looked>> {
    // A later look (`only`) asks the executor again; local groups and sessions were
    // already dealt with by the first.
    let first = only.is_none();
    let only = only.map(<[i64]>::to_vec);
    let owner = owner.map(str::to_string);
    let stale = store
        .read(move |db| {
            let mut out = Vec::new();
            for step in db.running_step_runs()? {
                if only.as_ref().is_some_and(|o| !o.contains(&step.id))
                    || owner.is_some() && db.step_engine(step.id)? != owner
                {
                    continue;
                }
                let task = db.task(step.task_id).ok();
                let pipeline = db.pipeline(step.task_id).ok();
                let recorded = db.step_executor(step.id)?;
                out.push((step, task, pipeline, recorded));
            }
            Ok(out)
        })
        .await?;
    let mut out = Vec::new();
    let mut asks = Vec::new();
    for (step, task, pipeline, recorded) in stale {
        let spec =
            super::reattach::executor_of(ws, pipeline.as_deref(), recorded.as_deref(), &step);
        let local = spec == ExecutorSpec::Local;
        let group = if !first {
            None
        } else {
            let step = step.clone();
            let root = ws.root().display().to_string();
            tokio::task::spawn_blocking(move || {
                // A step on another executor is ended here only by the pid it recorded:
                // looking for the key in every process's environment would find a local
                // container's processes too.
                let group = if local {
                    orphan_group(&step, &root)
                } else {
                    recorded_group(&step)
                };
                let ended = group.map(|g| (i64::from(g.0), end_group_of(g, grace)));
                // What left the group (a command in a session of its own) still holds
                // the step's key.
                if local {
                    end_marked_blocking(&Mark::new(&step.execution_key, &root), grace);
                }
                ended
            })
            .await
            .ok()
            .flatten()
        };
        let session = match (task, pipeline) {
            (Some(task), Some(pipeline)) if first => {
                let ws = ws.clone();
                let step = step.clone();
                tokio::task::spawn_blocking(move || {
                    abort_agent_session(&ws, &task, &pipeline, &step)
                })
                .await
                .ok()
                .flatten()
            }
            _ => None,
        };
        if !local {
            asks.push((out.len(), spec));
        }
        out.push(Looked {
            step,
            group,
            session,
            remote: None,
        });
    }
    // The executors are asked all at once: one that does not answer costs its time limit
    // once, not once per step.
    let answers = futures_util::future::join_all(
        asks.iter()
            .map(|(i, spec)| super::reattach::still_there(ws, spec, &out[*i].step)),
    )
    .await;
    for ((i, spec), found) in asks.into_iter().zip(answers) {
        let found = match found {
            Ok(true) => Remote::There,
            Ok(false) => Remote::Gone,
            Err(e) => Remote::NoAnswer(e),
        };
        out[i].remote = Some((spec, found));
    }
    Ok(out)
}

/// Records what [`look`] found, one transaction per step: a step found on its executor is
/// left running for the engine to reattach; one whose executor did not answer is left
/// running and reported; the others become interrupted. With `auto_resume`, interrupted
/// tasks resume (all of them at start-up; with `only_these`, those interrupted here).
pub(super) fn record(
    store: &mut Store,
    looked: Vec<Looked>,
    auto_resume: bool,
    only_these: bool,
) -> super::Result<Recovered> {
    let mut out = Recovered::default();
    for l in looked {
        let step = &l.step;
        let mut events = Vec::new();
        if let Some((pgid, verdict)) = &l.group {
            if *verdict == Orphan::Ours {
                out.killed_groups.push(*pgid);
            }
            events.push(NewEvent {
                task_id: Some(step.task_id),
                category: "lifecycle",
                kind: "recovery.process",
                summary: match verdict {
                    Orphan::Ours => {
                        format!("ended process group {pgid} left by a stopped engine")
                    }
                    Orphan::Gone => format!("process group {pgid} had already exited"),
                    Orphan::Reused => {
                        format!("pid {pgid} now belongs to another program; left it alone")
                    }
                },
                data: json!({ "pgid": pgid, "verdict": format!("{verdict:?}") }),
                actor: "engine",
                level: "info",
            });
        }
        if let Some(summary) = &l.session {
            events.push(NewEvent {
                task_id: Some(step.task_id),
                category: "agent",
                kind: "recovery.session",
                summary: summary.clone(),
                data: json!({ "session": step.session_id }),
                actor: "engine",
                level: "info",
            });
        }
        let mut interrupt = true;
        if let Some((spec, found)) = &l.remote {
            let (summary, level) = match found {
                Remote::There => {
                    interrupt = false;
                    out.reattach.push(step.id);
                    (
                        format!(
                            "found the step on {} after a restart; following it again",
                            spec.describe()
                        ),
                        "info",
                    )
                }
                Remote::Gone => (
                    format!("{} is gone; the step is interrupted", what_ran(spec)),
                    "warning",
                ),
                Remote::NoAnswer(e) => {
                    interrupt = false;
                    out.unknown.push(step.id);
                    out.unknown_tasks.push(step.task_id);
                    tracing::warn!(
                        "could not look for step run {} on {}: {e}; it stays running",
                        step.id,
                        spec.describe()
                    );
                    (
                        format!(
                            "could not look for the step on {} ({e}); it may still be running there, so it stays running and is not started again: the engine looks again every {} s at most",
                            spec.describe(),
                            super::recovery_retry::MAX_WAIT.as_secs()
                        ),
                        "warning",
                    )
                }
            };
            // Said once: a later look that still gets no answer adds nothing.
            let again = only_these && matches!(found, Remote::NoAnswer(_));
            events.extend((!again).then(|| NewEvent {
                task_id: Some(step.task_id),
                category: "lifecycle",
                kind: "recovery.executor",
                summary,
                data: json!({ "executor": spec.kind(), "step_run": step.id }),
                actor: "engine",
                level,
            }));
        }
        let id = step.id;
        let interrupted = store.write(|db| {
            for ev in &events {
                db.insert_event(ev)?;
            }
            if interrupt {
                interrupt_step(db, id, "the engine stopped while it ran")
            } else {
                Ok(false)
            }
        })?;
        if interrupted {
            out.interrupted.push(step.task_id);
        }
    }
    if auto_resume {
        let tasks = store.read().list_tasks(&TaskFilter::default())?;
        for task in tasks.into_iter().filter(|t| {
            t.state == TaskState::Interrupted && (!only_these || out.interrupted.contains(&t.id))
        }) {
            let req = Request {
                task_id: task.id,
                action: Action::Resume,
                expected_status: Some(task.status.clone()),
                actor: "auto_resume".into(),
            };
            match store.write(|db| apply(db, &req, &super::Outside::NONE)) {
                Ok(_) => out.resumed.push(task.id),
                Err(e) => tracing::warn!("auto-resume of task {} failed: {e}", task.id),
            }
        }
    }
    Ok(out)
}

/// What held a step on an executor, for sentences: "its docker container".
fn what_ran(spec: &ExecutorSpec) -> String {
    match spec {
        ExecutorSpec::Docker(_) => format!("its docker container ({})", spec.describe()),
        ExecutorSpec::Kubernetes(_) => format!("its Kubernetes Job ({})", spec.describe()),
        ExecutorSpec::Ssh(_) => format!("its ssh session ({})", spec.describe()),
        ExecutorSpec::Local => "its process".into(),
    }
}

/// Ends the process group a step recorded, if it is still that step's (pid reuse is checked
/// against the recorded start time), then whatever else holds the step's execution key.
/// Returns what was found of the group.
pub fn end_orphan(ws: &Workspace, step: &crate::store::StepRun, grace: Duration) -> Orphan {
    let root = ws.root().display().to_string();
    let verdict = match orphan_group(step, &root) {
        Some(group) => end_group_of(group, grace),
        None => Orphan::Gone,
    };
    end_marked_blocking(&Mark::new(&step.execution_key, &root), grace);
    verdict
}

/// Ends a recorded group if it is still the step's.
fn end_group_of((pgid, start): (u32, Option<u64>), grace: Duration) -> Orphan {
    let verdict = classify_orphan(pgid, start);
    if verdict == Orphan::Ours {
        end_group(pgid, grace);
    }
    verdict
}

/// The process group a step recorded, if it recorded one.
fn recorded_group(step: &StepRun) -> Option<(u32, Option<u64>)> {
    let pgid = step.pgid.filter(|p| *p > 1)?;
    Some((pgid as u32, step.proc_start.map(|t| t as u64)))
}

/// The process group a step recorded; when its engine died before recording it, the
/// group whose leader carries the step's execution key in its environment.
fn orphan_group(step: &crate::store::StepRun, root: &str) -> Option<(u32, Option<u64>)> {
    recorded_group(step)
        .or_else(|| crate::exec::process::find_group_by_mark(&Mark::new(&step.execution_key, root)))
}

/// An OpenCode session left running by a dead engine would keep editing the worktree while
/// a resumed attempt opens a new one: abort it. Returns what happened, for the event.
fn abort_agent_session(
    ws: &Workspace,
    task: &Task,
    pipeline: &Pipeline,
    step: &StepRun,
) -> Option<String> {
    let session = step.session_id.as_deref()?;
    let Some(StepAction::Agent(profile_id)) = pipeline
        .status(&step.status)
        .and_then(|s| s.step.as_ref())
        .map(|s| &s.action)
    else {
        return None;
    };
    let catalog = crate::agents::load_agents(Some(&ws.agents_dir()));
    let profile = catalog.get(profile_id).ok()?;
    if profile.backend != crate::agents::Backend::Opencode {
        return None;
    }
    if profile.serve {
        // The session lives in the server the dead engine started: ending it ends both.
        return crate::exec::agent::opencode_serve::end_left_behind(ws.root());
    }
    let dir = task
        .worktree
        .clone()
        .unwrap_or_else(|| ws.root().display().to_string());
    let mut url =
        reqwest::Url::parse(&format!("{}/session/{session}/abort", profile.base_url())).ok()?;
    url.query_pairs_mut().append_pair("directory", &dir);
    // Called on a blocking thread of its own (see `look`).
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .ok()?;
    Some(match client.post(url).send() {
        Ok(r) if r.status().is_success() => {
            format!("aborted OpenCode session {session} left by a stopped engine")
        }
        Ok(r) => format!(
            "OpenCode session {session} could not be aborted (HTTP {})",
            r.status()
        ),
        Err(e) => format!("OpenCode session {session} could not be aborted ({e})"),
    })
}

/// SIGTERM, up to `grace` for it to go, then SIGKILL.
fn end_group(pgid: u32, grace: Duration) {
    signal_group(pgid, Signal::SIGTERM);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline && group_alive(pgid) {
        std::thread::sleep(Duration::from_millis(20));
    }
    signal_group(pgid, Signal::SIGKILL);
}
