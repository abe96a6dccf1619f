//! Forge events reaching a task, whichever path brought them (a webhook, a poll): recorded
//! once by what they mean, the task's pull request updated, an event written. The caller
//! then fires the event's trigger.

use crate::forge::webhook::{ForgeEvent, What};
use crate::store::{Db, NewEvent};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Event keys remembered (in the webhook deliveries' window).
pub const KEEP: i64 = 10_000;
/// How long they are remembered.
pub const KEEP_MS: i64 = 7 * 24 * 3600 * 1000;

/// The note handed to the next step for failed checks.
pub fn failure_note(ev: &ForgeEvent) -> Option<String> {
    let What::ChecksFailed { failures, .. } = &ev.what else {
        return None;
    };
    let lines: Vec<String> = failures
        .iter()
        .map(|f| format!("check `{}` failed: {}", f.name, f.summary))
        .collect();
    Some(if lines.is_empty() {
        "the checks failed".into()
    } else {
        lines.join("\n")
    })
}

/// What a forge event writes on its task, worked out before the transaction that applies
/// it (and carried in the request, so a queued one is applied the same way).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ForgeRecord {
    /// The key naming the event itself (the merge of #12, failed checks on `abc`).
    pub key: String,
    /// The pull request's number.
    pub number: u64,
    /// The event's summary, with where it came from.
    pub summary: String,
    /// The pull request's new state (`merged`, `closed`), when the event changes it.
    pub state: Option<String>,
    /// The checks failed.
    pub failed: bool,
    /// The trigger it fires.
    pub trigger: String,
    /// `webhook …` or `poll`.
    pub source: String,
}

/// The last words of a request's summary when its keys were seen before: nothing was done.
pub const SEEN: &str = "this forge event was seen before, so nothing was done";
/// The words of a request's summary when the event was recorded but moved nothing.
pub const MOVED_NOTHING: &str = "the forge event is recorded; it moved nothing";

/// What became of a forge request (a delivery, a polled event, a `/baton` comment), set
/// where the engine decides it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ForgeOutcome {
    /// One of its keys was seen before: nothing was done.
    Seen,
    /// Recorded on the task; its trigger moved nothing.
    Recorded,
    /// Recorded, and its trigger moved the task.
    Moved,
    /// A comment, said to the task's agent.
    Said,
    /// A comment recorded on the task but not said (its author may not write, the task
    /// takes no message).
    NotSaid,
}

impl ForgeOutcome {
    /// True unless the event was seen before.
    pub fn fresh(self) -> bool {
        self != Self::Seen
    }
}

/// The record of `ev` on pull request `number`, seen by `source`.
pub fn describe(number: u64, ev: &ForgeEvent, source: &str) -> ForgeRecord {
    let (summary, state) = match &ev.what {
        What::Merged => (format!("#{number} was merged"), Some("merged")),
        What::Closed => (
            format!("#{number} was closed without merging"),
            Some("closed"),
        ),
        What::ChangesRequested { .. } => (format!("changes requested on #{number}"), None),
        What::ChecksFailed { failures, .. } => (
            format!(
                "checks failed on #{number}: {}",
                failures
                    .iter()
                    .map(|f| f.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None,
        ),
    };
    ForgeRecord {
        key: ev.key(number),
        number,
        summary: format!("{summary} ({source})"),
        state: state.map(String::from),
        failed: matches!(ev.what, What::ChecksFailed { .. }),
        trigger: ev.trigger().to_string(),
        source: source.to_string(),
    }
}

/// Notes `keys` (delivery ids, the event's own key) as seen, in the caller's transaction.
/// False when one was seen before: the event was applied then, and is not again.
pub fn note_seen<'a>(
    db: &Db,
    keys: impl IntoIterator<Item = &'a String>,
) -> crate::store::Result<bool> {
    let mut fresh = true;
    for key in keys {
        // Every key is noted, so a redelivery under a new id of an event applied before is
        // remembered by its id too.
        fresh &= db.note_delivery(key, KEEP, KEEP_MS)?;
    }
    Ok(fresh)
}

/// Notes a forge request's keys and writes its record on `task`, in the transaction that
/// applies it. `Some`: the keys were seen before, and this is the request's whole answer.
pub fn note(
    db: &Db,
    task: i64,
    seen: &[String],
    record: Option<&ForgeRecord>,
) -> crate::store::Result<Option<super::Applied>> {
    if !note_seen(db, seen.iter().chain(record.map(|r| &r.key)))? {
        return Ok(Some(super::Applied {
            task_id: task,
            summary: format!("task {task}: {SEEN}"),
            moved: None,
            retry: false,
            forge: Some(ForgeOutcome::Seen),
        }));
    }
    if let Some(rec) = record {
        self::record(db, task, rec)?;
    }
    Ok(None)
}

/// The answer to a forge event recorded on `task` that moved nothing, and why.
pub fn moved_nothing(task: i64, why: &str) -> super::Applied {
    super::Applied {
        task_id: task,
        summary: format!("task {task}: {MOVED_NOTHING} ({why})"),
        moved: None,
        retry: false,
        forge: Some(ForgeOutcome::Recorded),
    }
}

/// Writes `rec` on `task`: its pull request's state and checks, and an event.
pub fn record(db: &Db, task: i64, rec: &ForgeRecord) -> crate::store::Result<()> {
    if let Some(mut pr) = db.task_pr(task)? {
        if let Some(st) = &rec.state {
            pr.state = st.clone();
        }
        if rec.failed {
            pr.checks = "failed".into();
        }
        db.set_task_pr(&pr)?;
    }
    db.insert_event(&NewEvent {
        task_id: Some(task),
        category: "forge",
        kind: "forge.event",
        summary: rec.summary.clone(),
        data: json!({"number": rec.number, "trigger": rec.trigger, "source": rec.source}),
        actor: "forge",
        level: if rec.failed { "warning" } else { "info" },
    })?;
    Ok(())
}

impl super::Engine {
    /// After a forge event saying a task's pull request was merged, applied for the first
    /// time (whichever path brought it: a webhook, a poll): deletes its branch on the
    /// remote, as a follow-up of this engine.
    pub(super) fn after_forge(&mut self, req: &super::Request, applied: &super::Applied) {
        let super::Action::Forge {
            record: Some(rec), ..
        } = &req.action
        else {
            return;
        };
        let fresh = applied.forge.is_some_and(ForgeOutcome::fresh);
        if !fresh || rec.state.as_deref() != Some("merged") {
            return;
        }
        let (store, root, task) = (
            self.store.clone(),
            self.ws.root().to_path_buf(),
            req.task_id,
        );
        let settings = self.cfg.forge.clone().unwrap_or_default();
        self.followups
            .spawn(async move { after_merge(&store, root, settings, task).await });
    }
}

/// After a pull request was merged: deletes its branch on the remote (through the
/// repository's git queue), and records what happened as an event.
pub async fn after_merge(
    store: &crate::store::StoreHandle,
    root: std::path::PathBuf,
    settings: crate::forge::ForgeSettings,
    task: i64,
) {
    let Ok(t) = store.read(move |db| db.task(task)).await else {
        return;
    };
    let Some(branch) = t.branch else { return };
    let remote = settings.remote().to_string();
    let gone = {
        let (branch, remote) = (branch.clone(), remote.clone());
        tokio::task::spawn_blocking(move || {
            let repo = crate::workspace::git::repo_root(&root)
                .ok_or("the workspace is not a git repository")?;
            crate::workspace::GitQueue::for_repo(&repo)
                .run(move |repo| crate::forge::push::delete_branch(repo, &remote, &branch))
        })
        .await
        .unwrap_or_else(|e| Err(e.to_string()))
    };
    let (summary, level) = match &gone {
        Ok(()) => (
            format!("deleted {branch} on {remote} after the merge"),
            "info",
        ),
        Err(e) => (e.clone(), "warning"),
    };
    let written = store
        .write(move |db| {
            db.insert_event(&NewEvent {
                task_id: Some(task),
                category: "git",
                kind: "forge.branch_deleted",
                summary,
                data: json!({}),
                actor: "forge",
                level,
            })
        })
        .await;
    if let Err(e) = written {
        tracing::warn!("recording the branch deletion of task {task} failed: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::actions::{Action, Outside, Request, apply};
    use crate::engine::{EngineError, Result};
    use crate::store::{Store, TaskState};

    const P: &str = r#"{
      "id": "p", "name": "P",
      "statuses": [
        {"id": "in_pr", "kind": "gate"},
        {"id": "review", "kind": "gate"},
        {"id": "done", "kind": "done"}
      ],
      "transitions": [{"from": "in_pr", "to": "done", "on": "pr_merged"}]
    }"#;

    fn merged(delivery: &str) -> Request {
        let ev = ForgeEvent {
            number: Some(12),
            branch: None,
            head_repo: None,
            what: What::Merged,
        };
        Request {
            task_id: 1,
            action: Action::Forge {
                trigger: "pr_merged".into(),
                note: None,
                seen: vec![format!("github:{delivery}")],
                record: Some(describe(12, &ev, "test")),
            },
            expected_status: None,
            actor: "forge".into(),
        }
    }

    fn store_at(status: &str) -> (tempfile::TempDir, Store) {
        let (p, _) = crate::pipeline::parse_pipeline("p", P, None);
        let json = serde_json::to_string(&p.expect("parses")).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("t.db")).unwrap();
        store
            .write(|db| db.insert_task("t", "", "p", &json, status, TaskState::Waiting))
            .unwrap();
        (dir, store)
    }

    fn forge_events(store: &Store) -> usize {
        let events = store.read().events(1).unwrap();
        events.iter().filter(|e| e.kind == "forge.event").count()
    }

    #[test]
    fn a_delivery_is_noted_in_the_transaction_that_applies_it() {
        let (_dir, mut store) = store_at("in_pr");
        // The transaction fails after applying the event (a crash before the commit): the
        // delivery is not remembered either, so its redelivery applies it.
        let crashed: Result<()> = store.write(|db| {
            apply(db, &merged("d1"), &Outside::NONE)?;
            Err(EngineError::Other("the process died".into()))
        });
        assert!(crashed.is_err());
        assert_eq!(store.read().task(1).unwrap().status, "in_pr");
        assert_eq!(forge_events(&store), 0);

        let applied = store
            .write(|db| apply(db, &merged("d1"), &Outside::NONE))
            .unwrap();
        assert_eq!(
            applied.forge,
            Some(ForgeOutcome::Moved),
            "{}",
            applied.summary
        );
        assert_eq!(store.read().task(1).unwrap().status, "done");
        // The same delivery, and another delivery of the same merge: nothing more.
        for d in ["d1", "d2"] {
            let again = store
                .write(|db| apply(db, &merged(d), &Outside::NONE))
                .unwrap();
            assert_eq!(again.forge, Some(ForgeOutcome::Seen), "{}", again.summary);
            assert!(again.moved.is_none());
        }
        assert_eq!(forge_events(&store), 1);
    }

    #[test]
    fn an_event_with_nowhere_to_go_is_recorded_once_and_moves_nothing() {
        let (_dir, mut store) = store_at("review");
        let applied = store
            .write(|db| apply(db, &merged("d1"), &Outside::NONE))
            .unwrap();
        assert_eq!(
            applied.forge,
            Some(ForgeOutcome::Recorded),
            "{}",
            applied.summary
        );
        assert_eq!(store.read().task(1).unwrap().status, "review");
        assert_eq!(forge_events(&store), 1);
        let again = store
            .write(|db| apply(db, &merged("d2"), &Outside::NONE))
            .unwrap();
        assert_eq!(again.forge, Some(ForgeOutcome::Seen), "{}", again.summary);
        assert_eq!(forge_events(&store), 1);
    }
}
