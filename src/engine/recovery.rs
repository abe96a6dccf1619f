//! Start-up recovery: steps left `running` by a dead engine become `interrupted`, and a
//! process group that outlived its engine is ended once it is proven to be that step's.

use super::actions::{Action, Request, apply};
use super::results::interrupt_step;
use crate::exec::process::{Orphan, classify_orphan, group_alive, signal_group};
use crate::store::{NewEvent, StepState, Store, TaskState, TaskFilter};
use nix::sys::signal::Signal;
use serde_json::json;
use std::time::{Duration, Instant};

/// What recovery found and did.
#[derive(Debug, Default)]
pub struct Recovered {
    pub interrupted: Vec<i64>,
    pub killed_groups: Vec<i64>,
    pub resumed: Vec<i64>,
}

/// Ends orphaned groups, marks their steps interrupted, and resumes when `auto_resume`.
pub fn recover(store: &mut Store, grace: Duration, auto_resume: bool) -> super::Result<Recovered> {
    let mut out = Recovered::default();
    let stale = store.read().step_runs_in_state(StepState::Running)?;
    for step in stale {
        if let Some(pgid) = step.pgid.filter(|p| *p > 1) {
            let verdict = classify_orphan(pgid as u32, step.proc_start.map(|t| t as u64));
            if verdict == Orphan::Ours {
                end_group(pgid as u32, grace);
                out.killed_groups.push(pgid);
            }
            store.write(|db| {
                db.insert_event(&NewEvent {
                    task_id: Some(step.task_id),
                    category: "lifecycle",
                    kind: "recovery.process",
                    summary: match verdict {
                        Orphan::Ours => format!("ended process group {pgid} left by a stopped engine"),
                        Orphan::Gone => format!("process group {pgid} had already exited"),
                        Orphan::Reused => format!("pid {pgid} now belongs to another program; left it alone"),
                    },
                    data: json!({ "pgid": pgid, "verdict": format!("{verdict:?}") }),
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
        for task in tasks.into_iter().filter(|t| t.state == TaskState::Interrupted) {
            let req = Request {
                task_id: task.id,
                action: Action::Resume,
                expected_status: Some(task.status.clone()),
                actor: "auto_resume".into(),
            };
            match store.write(|db| apply(db, &req)) {
                Ok(_) => out.resumed.push(task.id),
                Err(e) => tracing::warn!("auto-resume of task {} failed: {e}", task.id),
            }
        }
    }
    Ok(out)
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
