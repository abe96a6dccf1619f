//! Requests that fix a task up rather than move it along its pipeline: dismiss an
//! interrupted task, re-run a finished one from a chosen status, edit, archive, delete.

use super::actions::Applied;
use super::error::{EngineError, Result};
use super::restart::{plain, resume_decision, retry_decision};
use crate::pipeline::{Decision, Pipeline, StatusKind, Trigger};
use crate::store::{Db, NewEvent, RunState, StepState, Task, TaskState};
use serde_json::json;

/// A decision with the note to record and the run it belongs to.
pub(super) type Planned = (Decision, Option<String>, i64);

fn refuse(task: &Task, message: impl Into<String>) -> EngineError {
    EngineError::Refused {
        task: task.id,
        message: message.into(),
    }
}

fn done(task: &Task, summary: String) -> Applied {
    Applied {
        task_id: task.id,
        summary,
        moved: None,
        retry: false,
        forge: None,
    }
}

fn event(db: &Db, task: &Task, kind: &'static str, summary: String, actor: &str) -> Result<()> {
    db.insert_event(&NewEvent {
        task_id: Some(task.id),
        category: "lifecycle",
        kind,
        summary,
        data: json!({}),
        actor,
        level: "info",
    })?;
    Ok(())
}

/// Resume, or a fresh start when the task has no step to resume.
pub(super) fn resume_or_fresh(
    db: &Db,
    task: &Task,
    pipeline: &Pipeline,
    actor: &str,
) -> Result<Planned> {
    match resume_decision(db, task) {
        Err(EngineError::Refused { message, .. }) if message.contains("no interrupted") => {
            event(
                db,
                task,
                "resume.fresh_start",
                "nothing to resume, so it started over from scratch".into(),
                actor,
            )?;
            retry_decision(db, task, pipeline)
        }
        other => other,
    }
}

/// Dismiss: an interrupted task goes to its cancelled status (else failed), for good.
pub(super) fn dismiss(task: &Task, pipeline: &Pipeline, note: Option<&str>) -> Result<Planned> {
    if task.state != TaskState::Interrupted {
        let hint = if pipeline
            .status(&task.status)
            .is_some_and(|s| s.kind.is_terminal())
        {
            String::new()
        } else {
            format!(" — `baton abort {}` stops it", task.id)
        };
        return Err(refuse(
            task,
            format!(
                "only an interrupted task can be dismissed; it is {} (at `{}`){hint}",
                task.state, task.status
            ),
        ));
    }
    let to = pipeline
        .first_of_kind(StatusKind::Cancelled)
        .or_else(|| pipeline.first_of_kind(StatusKind::Failed))
        .ok_or_else(|| refuse(task, "its pipeline has no cancelled or failed status"))?;
    let reason = note
        .map(str::to_string)
        .unwrap_or_else(|| format!("dismissed after it was interrupted at {}", task.status));
    Ok((
        plain(&to.id, Trigger::Dismiss),
        Some(reason),
        task.run_id.unwrap_or_default(),
    ))
}

/// Re-run: a new run entering `from`, carrying the succeeded steps (and their handoffs)
/// of the statuses before it; `brk` sets a breakpoint first.
pub(super) fn rerun(
    db: &Db,
    task: &Task,
    pipeline: &Pipeline,
    from: &str,
    brk: Option<&str>,
    actor: &str,
) -> Result<Planned> {
    if !matches!(
        task.state,
        TaskState::Done | TaskState::Failed | TaskState::Cancelled
    ) {
        return Err(refuse(
            task,
            format!(
                "only a finished, failed or cancelled task can be re-run; it is {} (at `{}`)",
                task.state, task.status
            ),
        ));
    }
    let ids = || {
        pipeline
            .statuses
            .iter()
            .map(|s| s.id.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let at = pipeline.index_of(from).ok_or_else(|| {
        refuse(
            task,
            format!("its pipeline has no status `{from}` (it has {})", ids()),
        )
    })?;
    if pipeline.statuses[at].kind.is_terminal() {
        return Err(refuse(
            task,
            format!("`{from}` is a final status; re-run from one before it"),
        ));
    }
    if let Some(b) = brk {
        match pipeline.status(b) {
            Some(s) if s.kind == StatusKind::Step => db.set_breakpoint(task.id, Some(b))?,
            Some(_) => {
                return Err(refuse(
                    task,
                    format!("`{b}` runs no step, so there is nothing to pause before"),
                ));
            }
            None => {
                return Err(refuse(
                    task,
                    format!("its pipeline has no status `{b}` (it has {})", ids()),
                ));
            }
        }
    }
    let old = task.run_id.unwrap_or_default();
    let new_run = db.insert_run(task.id, RunState::Running)?;
    let number = db.run(old).map(|r| r.number).unwrap_or_default();
    // The latest succeeded step of each earlier status, in the order they ran.
    let mut carried: Vec<_> = Vec::new();
    for s in db.step_runs(task.id)?.into_iter().rev() {
        let before = pipeline.index_of(&s.status).is_some_and(|i| i < at);
        if s.run_id == old
            && s.state == StepState::Succeeded
            && before
            && !carried
                .iter()
                .any(|c: &crate::store::StepRun| c.status == s.status)
        {
            carried.push(s);
        }
    }
    carried.reverse();
    for s in &carried {
        db.carry_step_run(s.id, new_run, &format!("kept from run {number}"))?;
    }
    event(
        db,
        task,
        "task.rerun",
        format!(
            "re-run from {from}; kept {} earlier step(s) from run {number}",
            carried.len()
        ),
        actor,
    )?;
    Ok((plain(from, Trigger::Rerun), None, new_run))
}

/// Edit the title and/or prompt of a task that is not running.
pub(super) fn edit(
    db: &Db,
    task: &Task,
    title: Option<&str>,
    prompt: Option<&str>,
    actor: &str,
) -> Result<Applied> {
    if task.state == TaskState::Running {
        return Err(refuse(
            task,
            format!(
                "its step at `{}` is running; edit it once the step ends (or abort it)",
                task.status
            ),
        ));
    }
    if title.is_none() && prompt.is_none() {
        return Err(refuse(task, "nothing to change — give --title or --prompt"));
    }
    // As a new task's.
    if let Some(problem) = title.and_then(super::actions::title_problem) {
        return Err(refuse(task, problem));
    }
    if let Some(problem) = super::actions::nul_problem("", prompt.unwrap_or("")) {
        return Err(refuse(task, problem));
    }
    db.set_task_text(task.id, title, prompt)?;
    let what = match (title, prompt) {
        (Some(_), Some(_)) => "title and prompt",
        (Some(_), None) => "title",
        _ => "prompt",
    };
    event(db, task, "task.edited", format!("{what} edited"), actor)?;
    Ok(done(task, format!("task {}: {what} changed", task.id)))
}

/// Archive a finished task: it leaves the board and `list`, `list --archived` shows it.
pub(super) fn archive(db: &Db, task: &Task, pipeline: &Pipeline, actor: &str) -> Result<Applied> {
    let finished = pipeline
        .status(&task.status)
        .is_some_and(|s| s.kind.is_terminal());
    if !finished {
        return Err(refuse(
            task,
            format!(
                "only a finished task can be archived; it is {} (at `{}`)",
                task.state, task.status
            ),
        ));
    }
    if db.is_archived(task.id)? {
        return Err(refuse(
            task,
            "it is already archived — `baton list --archived` shows it",
        ));
    }
    db.set_archived(task.id, true)?;
    event(db, task, "task.archived", "archived".into(), actor)?;
    Ok(done(
        task,
        format!(
            "task {0}: archived — `baton unarchive {0}` brings it back",
            task.id
        ),
    ))
}

/// Bring an archived task back to the board, where it was.
pub(super) fn unarchive(db: &Db, task: &Task, actor: &str) -> Result<Applied> {
    if !db.is_archived(task.id)? {
        return Err(refuse(task, "it is not archived; it is on the board"));
    }
    db.set_archived(task.id, false)?;
    event(
        db,
        task,
        "task.unarchived",
        "back on the board".into(),
        actor,
    )?;
    Ok(done(task, format!("task {}: back on the board", task.id)))
}

/// Delete a task that is not running, with everything recorded about it.
pub(super) fn delete(db: &Db, task: &Task) -> Result<Applied> {
    if task.state == TaskState::Running {
        return Err(refuse(
            task,
            format!(
                "its step at `{}` is running — `baton abort {}` stops it first",
                task.status, task.id
            ),
        ));
    }
    // A task others still wait for: deleting it would leave them held for good.
    let mut held = Vec::new();
    for d in db.dependents(task.id)? {
        if db.start_waits(d)? {
            held.push(d);
        }
    }
    if !held.is_empty() {
        return Err(refuse(
            task,
            format!(
                "task{} {} wait{} for it — `baton abort {}` cancels it and leaves them waiting, marked; delete them first to delete it",
                if held.len() == 1 { "" } else { "s" },
                super::waits::id_list(&held),
                if held.len() == 1 { "s" } else { "" },
                task.id
            ),
        ));
    }
    db.delete_task(task.id)?;
    Ok(done(task, format!("task {}: deleted", task.id)))
}
