//! Start-up recovery: steps left `running` by a dead engine become `interrupted`, and a
//! process group that outlived its engine is ended once it is proven to be that step's.

use super::actions::{Action, Request, apply};
use super::results::interrupt_step;
use crate::exec::process::{Orphan, classify_orphan, group_alive, signal_group};
use crate::pipeline::StepAction;
use crate::store::{NewEvent, StepRun, Store, TaskFilter, TaskState};
use crate::workspace::Workspace;
use nix::sys::signal::Signal;
use serde_json::json;
use std::time::{Duration, Instant};

/// What recovery found and did.
#[derive(Debug, Default)]
pub struct Recovered {
    pub interrupted: Vec<i64>,
    pub killed_groups: Vec<i64>,
    pub resumed: Vec<i64>,
    /// Step runs left running on an executor that kept them (a container), for the engine
    /// to pick back up.
    pub reattach: Vec<i64>,
}

/// Ends orphaned groups, marks their steps interrupted, and resumes when `auto_resume`.
pub fn recover(
    ws: &Workspace,
    store: &mut Store,
    grace: Duration,
    auto_resume: bool,
) -> super::Result<Recovered> {
    let mut out = Recovered::default();
    let stale = store.read().running_step_runs()?;
    for step in stale {
        if let Some(spec) = super::reattach::executor_of(ws, store, &step) {
            let (summary, level) = match super::reattach::still_there(ws, &spec, &step) {
                Ok(true) => {
                    out.reattach.push(step.id);
                    (
                        format!(
                            "found the step on {} after a restart; following it again",
                            spec.describe()
                        ),
                        "info",
                    )
                }
                Ok(false) => (
                    format!(
                        "the step's {} container is gone; it is interrupted",
                        spec.kind()
                    ),
                    "warning",
                ),
                Err(e) => (
                    format!(
                        "could not look for the step on {}: {e}; it is interrupted",
                        spec.describe()
                    ),
                    "warning",
                ),
            };
            store.write(|db| {
                db.insert_event(&NewEvent {
                    task_id: Some(step.task_id),
                    category: "lifecycle",
                    kind: "recovery.executor",
                    summary,
                    data: json!({ "executor": spec.kind(), "step_run": step.id }),
                    actor: "engine",
                    level,
                })
            })?;
            if out.reattach.last() != Some(&step.id)
                && store
                    .write(|db| interrupt_step(db, step.id, "the engine stopped while it ran"))?
            {
                out.interrupted.push(step.task_id);
            }
            continue;
        }
        if let Some((pgid, _)) = orphan_group(&step) {
            let pgid = i64::from(pgid);
            let verdict = end_orphan(&step, grace);
            if verdict == Orphan::Ours {
                out.killed_groups.push(pgid);
            }
            store.write(|db| {
                db.insert_event(&NewEvent {
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
                })
            })?;
        }
        if let Some(summary) = abort_agent_session(ws, store, &step) {
            store.write(|db| {
                db.insert_event(&NewEvent {
                    task_id: Some(step.task_id),
                    category: "agent",
                    kind: "recovery.session",
                    summary,
                    data: json!({ "session": step.session_id }),
                    actor: "engine",
                    level: "info",
                })
            })?;
        }
        if store.write(|db| interrupt_step(db, step.id, "the engine stopped while it ran"))? {
            out.interrupted.push(step.task_id);
        }
    }
    if auto_resume {
        let tasks = store.read().list_tasks(&TaskFilter::default())?;
        for task in tasks
            .into_iter()
            .filter(|t| t.state == TaskState::Interrupted)
        {
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

/// Ends the process group a step recorded, if it is still that step's (pid reuse is checked
/// against the recorded start time). Returns what was found.
pub fn end_orphan(step: &crate::store::StepRun, grace: Duration) -> Orphan {
    let Some((pgid, start)) = orphan_group(step) else {
        return Orphan::Gone;
    };
    let verdict = classify_orphan(pgid, start);
    if verdict == Orphan::Ours {
        end_group(pgid, grace);
    }
    verdict
}

/// The process group a step recorded; when its engine died before recording it, the
/// group whose leader carries the step's execution key in its environment.
fn orphan_group(step: &crate::store::StepRun) -> Option<(u32, Option<u64>)> {
    match step.pgid.filter(|p| *p > 1) {
        Some(pgid) => Some((pgid as u32, step.proc_start.map(|t| t as u64))),
        None => crate::exec::process::find_group_by_env("BATON_EXECUTION_KEY", &step.execution_key),
    }
}

/// An OpenCode session left running by a dead engine would keep editing the worktree while
/// a resumed attempt opens a new one: abort it. Returns what happened, for the event.
fn abort_agent_session(ws: &Workspace, store: &Store, step: &StepRun) -> Option<String> {
    let session = step.session_id.as_deref()?;
    let task = store.read().task(step.task_id).ok()?;
    let pipeline = store.read().pipeline(task.id).ok()?;
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
    let dir = task
        .worktree
        .clone()
        .unwrap_or_else(|| ws.root().display().to_string());
    let mut url =
        reqwest::Url::parse(&format!("{}/session/{session}/abort", profile.base_url())).ok()?;
    url.query_pairs_mut().append_pair("directory", &dir);
    // The blocking client must not run on an async thread (recovery runs inside the
    // engine's runtime): give it one of its own.
    let session = session.to_string();
    std::thread::spawn(move || {
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
    })
    .join()
    .ok()
    .flatten()
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
