//! A firing recorded as the child of the task it came from. A task a trigger makes because
//! of another task — that task's end (`task_done`) or a commit on that task's own branch
//! (`push`) — is its child, and a chain of such tasks stops after [`MAX_CHAIN_DEPTH`]
//! generations: a trigger that answers its own tasks' work would otherwise never stop.
//! The engine's branch watcher and forge push webhooks both record through [`record`].

use super::followups::MAX_CHAIN_DEPTH;
use super::triggers::{self, Kind, Origin, Trigger};
use crate::pipeline::Pipeline;
use crate::store::{Db, NewEvent};
use serde_json::json;

/// What recording one firing did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recorded {
    /// This task was made.
    Made(i64),
    /// The firing's key was handled before (made a task, or was refused): nothing was done.
    Before,
    /// The chain is already as deep as it may go: nothing was made, and `why` is recorded
    /// on `parent`.
    Refused { parent: i64, why: String },
}

/// The task whose child a firing's task is: the one that ended, or the one whose own branch
/// the commit is on. None for any other branch, a schedule or an issue.
pub fn parent(db: &Db, origin: &Origin) -> crate::store::Result<Option<i64>> {
    match origin {
        Origin::Outside => Ok(None),
        Origin::Done(id) => Ok(Some(*id)),
        Origin::Push(branch) => db.task_by_branch(branch),
    }
}

/// Fires `trigger` for `key` in the caller's transaction, the new task a child of the task
/// `origin` names, unless that task's chain is already [`MAX_CHAIN_DEPTH`] deep: then the
/// refusal is recorded on it instead, where `baton show` finds it, once per key.
pub fn record(
    db: &Db,
    pipeline: &Pipeline,
    trigger: &Trigger,
    key: &str,
    vars: &[(&str, &str)],
    origin: &Origin,
) -> super::Result<Recorded> {
    let handled = triggers::handled_key(key);
    if db.meta(&handled)?.is_some() {
        return Ok(Recorded::Before);
    }
    let parent = match parent(db, origin)? {
        Some(parent) => {
            let depth = db.task_depth(parent)? + 1;
            if depth > MAX_CHAIN_DEPTH {
                let why = refusal(trigger, origin, parent, depth - 1);
                db.insert_event(&NewEvent {
                    task_id: Some(parent),
                    category: "lifecycle",
                    kind: "trigger.refused",
                    summary: why.clone(),
                    data: json!({ "trigger": key }),
                    actor: "engine",
                    level: "warn",
                })?;
                // A commit reaches both the branch watcher and a push webhook: the second
                // to see it says nothing more.
                db.set_meta(&handled, "refused")?;
                return Ok(Recorded::Refused { parent, why });
            }
            Some((parent, depth))
        }
        None => None,
    };
    let Some(id) = triggers::fire(db, pipeline, trigger, key, vars)? else {
        return Ok(Recorded::Before);
    };
    if let Some((parent, depth)) = parent {
        db.set_task_parent(id, parent, depth)?;
    }
    Ok(Recorded::Made(id))
}

/// Why a firing made no task, `parent` being `depth` deep: what is wrong, where, and what
/// to change, which differs by the kind of trigger that made the chain.
fn refusal(trigger: &Trigger, origin: &Origin, parent: i64, depth: i64) -> String {
    let head = format!(
        "trigger {} of {} did not start a task: task {parent} is already {depth} tasks deep in a chain of tasks that tasks made (at most {MAX_CHAIN_DEPTH})",
        trigger.index + 1,
        trigger.pipeline,
    );
    match (origin, &trigger.kind) {
        (Origin::Push(branch), Kind::Push(globs)) => {
            let glob = globs
                .iter()
                .find(|g| triggers::glob(g, branch))
                .map_or("*", String::as_str);
            format!(
                "{head} — the trigger's `{glob}` matches task {parent}'s own branch {branch}; give it branches that leave out baton/*, such as `main`"
            )
        }
        _ => format!("{head} — check for a task_done trigger on its own pipeline"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trigger(kind: Kind) -> Trigger {
        Trigger {
            pipeline: "loop".into(),
            index: 0,
            kind,
            title: String::new(),
            prompt: String::new(),
            after_previous: false,
        }
    }

    #[test]
    fn a_refusal_says_what_to_change_for_each_kind_of_trigger() {
        let push = trigger(Kind::Push(vec!["main".into(), "baton/*".into()]));
        let on = Origin::Push("baton/6-loop".into());
        assert_eq!(
            refusal(&push, &on, 6, 5),
            "trigger 1 of loop did not start a task: task 6 is already 5 tasks deep in a chain of tasks that tasks made (at most 5) — the trigger's `baton/*` matches task 6's own branch baton/6-loop; give it branches that leave out baton/*, such as `main`"
        );
        let done = trigger(Kind::TaskDone("loop".into()));
        assert!(
            refusal(&done, &Origin::Done(6), 6, 5)
                .ends_with("(at most 5) — check for a task_done trigger on its own pipeline")
        );
    }
}
