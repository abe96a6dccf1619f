//! Tasks that wait for other tasks (`--after 3,4`): all-of semantics. A waiting task's start
//! is held (`start_waits`) until every blocker is done; the blocker's move to done starts it
//! in the same transaction, so no engine needs to be running for it, and an engine coming up
//! starts any task left held with all its blockers done. A blocker that fails or is
//! cancelled leaves the task waiting, with an event saying so.

use super::actions::{Action, Outside, Request, apply};
use super::error::{EngineError, Result};
use super::transition::pipeline_of;
use crate::pipeline::StatusKind;
use crate::store::{Db, NewEvent, RunState, TaskState};
use serde_json::json;

/// The most tasks one task may wait for.
pub const MAX_AFTER: usize = 100;

/// The checks of a list of blockers that need no database: not too many, each named once.
pub fn check_list(after: &[i64]) -> Result<()> {
    let invalid = |m: String| Err(EngineError::Invalid(m));
    if after.len() > MAX_AFTER {
        return invalid(format!(
            "`after`: a task can wait for at most {MAX_AFTER} tasks, not {}",
            after.len()
        ));
    }
    for (i, id) in after.iter().enumerate() {
        if after[..i].contains(id) {
            return invalid(format!("`after`: task {id} is named twice"));
        }
    }
    Ok(())
}

/// Checks the tasks a new task is to wait for: each exists, is on the board (not archived)
/// and is named once. Returns the ones not done yet.
pub fn check_after(db: &Db, after: &[i64]) -> Result<Vec<i64>> {
    check_list(after)?;
    let mut open = Vec::new();
    for id in after {
        let task = match db.task(*id) {
            Ok(t) => t,
            Err(crate::store::StoreError::NoTask(_)) => {
                return Err(EngineError::NotFound(format!(
                    "`after`: there is no task {id} — `baton list` shows the tasks"
                )));
            }
            Err(e) => return Err(e.into()),
        };
        if db.is_archived(*id)? {
            return Err(EngineError::Invalid(format!(
                "`after`: task {id} is archived — a task waits only for tasks on the board (`baton list` shows them)"
            )));
        }
        if task.state != TaskState::Done {
            open.push(*id);
        }
    }
    Ok(open)
}

/// Records that `task` waits for `after`, refusing a cycle (a task that would wait, through
/// its blockers, for itself).
pub fn add_deps(db: &Db, task: i64, after: &[i64]) -> Result<()> {
    for a in after {
        if *a == task || db.waits_for(*a, task)? {
            return Err(EngineError::Invalid(format!(
                "task {task} cannot wait for task {a}: task {a} already waits for task {task}, and neither would ever start"
            )));
        }
    }
    db.insert_deps(task, after)?;
    Ok(())
}

/// The blockers of `task` not done yet, by id.
pub fn open_blockers(db: &Db, task: i64) -> Result<Vec<i64>> {
    Ok(db
        .blockers(task)?
        .into_iter()
        .filter(|b| b.state != TaskState::Done)
        .map(|b| b.id)
        .collect())
}

/// Ids for people: `3, 4`.
pub fn id_list(ids: &[i64]) -> String {
    ids.iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Holds `task`'s start until `open` are done, with an event saying so.
pub fn hold(db: &Db, task: i64, open: &[i64], actor: &str) -> Result<String> {
    db.set_start_waits(task, true)?;
    let summary = format!(
        "waits for task{} {} to be done before it starts",
        if open.len() == 1 { "" } else { "s" },
        id_list(open)
    );
    db.insert_event(&NewEvent {
        task_id: Some(task),
        category: "lifecycle",
        kind: "task.waits",
        summary: summary.clone(),
        data: json!({ "after": open }),
        actor,
        level: "info",
    })?;
    Ok(format!("task {task}: {summary}"))
}

/// Starts a held task whose blockers are all done: a task at its backlog gets the `start`
/// transition; one created at a step status gets that step queued.
pub fn release(db: &Db, task_id: i64, actor: &str) -> Result<()> {
    let task = db.task(task_id)?;
    let pipeline = pipeline_of(db, &task)?;
    // The start first: a start its pipeline refuses writes nothing, and the task stays held.
    match pipeline.status(&task.status).map(|s| s.kind) {
        Some(StatusKind::Queue) => {
            let req = Request {
                task_id,
                action: Action::Start,
                expected_status: None,
                actor: actor.to_string(),
            };
            apply(db, &req, &Outside::NONE)?;
        }
        Some(StatusKind::Step) if db.open_step_runs(task_id)?.is_empty() => {
            let run = task.run_id.unwrap_or_default();
            db.insert_step_run(task_id, run, &task.status, None, 0)?;
            db.set_task_state(task_id, TaskState::Queued)?;
            db.set_run_state(run, RunState::Running)?;
        }
        _ => {}
    }
    db.set_start_waits(task_id, false)?;
    db.insert_event(&NewEvent {
        task_id: Some(task_id),
        category: "lifecycle",
        kind: "task.released",
        summary: "every task it waited for is done: it starts".into(),
        data: json!({}),
        actor,
        level: "info",
    })?;
    Ok(())
}

/// [`release`], where a start the task's pipeline refuses becomes an error event on the
/// task (which stays held) instead of undoing the move that released it. A database error
/// still fails the whole transaction.
fn release_or_say(db: &Db, task_id: i64, actor: &str) -> Result<()> {
    match release(db, task_id, actor) {
        Err(e @ EngineError::Store(_)) => Err(e),
        Err(e) => {
            db.insert_event(&NewEvent {
                task_id: Some(task_id),
                category: "lifecycle",
                kind: "task.start_failed",
                summary: format!("every task it waited for is done, but it could not start: {e}"),
                data: json!({}),
                actor: "system",
                level: "error",
            })?;
            Ok(())
        }
        Ok(()) => Ok(()),
    }
}

/// After `blocker` reached a terminal status of `kind`: starts the tasks that were waiting
/// only for it, or tells the waiting ones it failed. Runs inside the blocker's transition.
pub fn blocker_finished(db: &Db, blocker: i64, kind: StatusKind) -> Result<()> {
    for d in db.dependents(blocker)? {
        // Its card shows how its blockers stand, held or not yet started.
        db.touch_task(d)?;
        if !db.start_waits(d)? {
            continue;
        }
        match kind {
            StatusKind::Done if open_blockers(db, d)?.is_empty() => {
                release_or_say(db, d, &format!("task {blocker}"))?;
            }
            StatusKind::Failed | StatusKind::Cancelled => {
                let how = if kind == StatusKind::Failed {
                    "failed"
                } else {
                    "was cancelled"
                };
                db.insert_event(&NewEvent {
                    task_id: Some(d),
                    category: "lifecycle",
                    kind: "task.blocked",
                    summary: format!(
                        "task {blocker} {how}, so this task keeps waiting — `baton retry {blocker}` runs it again, `baton abort {d}` gives this one up"
                    ),
                    data: json!({ "after": blocker, "state": how }),
                    actor: "system",
                    level: "warn",
                })?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// Starts every held task whose blockers are all done (an engine coming up).
pub fn release_ready(db: &Db) -> Result<Vec<i64>> {
    let ready = db.released_waiting()?;
    for id in &ready {
        release_or_say(db, *id, "engine")?;
    }
    Ok(ready)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    fn tasks(n: usize) -> (tempfile::TempDir, Store, Vec<i64>) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("t.db")).unwrap();
        let ids = store
            .write(|db| {
                (0..n)
                    .map(|i| {
                        db.insert_task(&format!("t{i}"), "", "p", "{}", "todo", TaskState::Idle)
                    })
                    .collect::<crate::store::Result<Vec<_>>>()
            })
            .unwrap();
        (dir, store, ids)
    }

    #[test]
    fn a_cycle_through_a_chain_of_blockers_is_refused() {
        let (_dir, mut store, ids) = tasks(3);
        let (a, b, c) = (ids[0], ids[1], ids[2]);
        store
            .write(|db| {
                add_deps(db, b, &[a])?;
                add_deps(db, c, &[b])
            })
            .unwrap();
        for (task, after) in [(a, c), (a, b), (b, b)] {
            let err = store.write(|db| add_deps(db, task, &[after])).unwrap_err();
            assert!(
                err.to_string().contains("neither would ever start"),
                "{task} after {after}: {err}"
            );
        }
        // Waiting for a task on another branch of the graph is fine.
        store.write(|db| add_deps(db, a, &[])).unwrap();
        store.write(|db| add_deps(db, c, &[a])).unwrap();
        let blockers: Vec<i64> = store
            .read()
            .blockers(c)
            .unwrap()
            .iter()
            .map(|b| b.id)
            .collect();
        assert_eq!(blockers, [a, b]);
    }

    #[test]
    fn blockers_are_checked_once_each_and_must_exist() {
        let (_dir, mut store, ids) = tasks(1);
        let a = ids[0];
        let err = store.write(|db| check_after(db, &[a, a])).unwrap_err();
        assert!(err.to_string().contains("named twice"), "{err}");
        let err = store.write(|db| check_after(db, &[a + 7])).unwrap_err();
        assert!(err.to_string().contains("no task"), "{err}");
        assert_eq!(store.write(|db| check_after(db, &[a])).unwrap(), [a]);
    }
}
