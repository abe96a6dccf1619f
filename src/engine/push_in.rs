//! Webhook deliveries the engine takes: a GitHub push, recorded once per delivery id and
//! once per commit for each matching `push` trigger (under the key the engine's own branch
//! watcher uses, and, as the watcher does, as the child of the task whose branch it is); a
//! forge delivery about no task of this board, noted so its redelivery is told apart; and
//! the record of a task a webhook created.

use super::error::EngineError;
use super::forge_events::{KEEP, KEEP_MS};
use super::request::{Answer, Noted};
use super::trigger_chain::{self, Recorded};
use super::triggers::{self, Origin, Trigger};
use super::{Engine, EngineEvent};
use crate::pipeline::Pipeline;
use crate::store::{CommandState, Db, NewEvent};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// A verified delivery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    /// `X-GitHub-Event`.
    pub event: String,
    /// `X-GitHub-Delivery`.
    pub id: String,
    /// The pushed branch, for a push to a branch that still exists.
    pub branch: Option<String>,
    /// The commit the branch now points at.
    pub sha: String,
}

/// Delivery ids remembered (GitHub redelivers within three days).
pub const KEEP_DELIVERIES: i64 = 10_000;
/// How long a delivery id is remembered.
pub const KEEP_DELIVERIES_MS: i64 = 7 * 24 * 3600 * 1000;

/// What recording a delivery did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pushed {
    /// The delivery was seen before: nothing was done.
    pub duplicate: bool,
    /// The tasks its triggers created.
    pub tasks: Vec<i64>,
    /// Firings refused because the push was to the branch of a task already at the end of a
    /// chain of tasks that tasks made: (that task, why), recorded on it.
    pub refused: Vec<(i64, String)>,
}

/// Records a delivery in one transaction: fires the matching triggers unless this delivery
/// was seen before, and records it as an event. A push to a task's own branch makes that
/// task the parent of what fires, as the branch watcher does. A replay records nothing.
pub fn record_push(
    db: &Db,
    d: &Delivery,
    matching: &[(Trigger, Pipeline)],
) -> super::Result<Pushed> {
    record_push_within(db, d, matching, KEEP_DELIVERIES)
}

/// [`record_push`], remembering the newest `keep` delivery ids.
pub fn record_push_within(
    db: &Db,
    d: &Delivery,
    matching: &[(Trigger, Pipeline)],
    keep: i64,
) -> super::Result<Pushed> {
    let duplicate = !db.note_delivery(&d.id, keep, KEEP_DELIVERIES_MS)?;
    if duplicate {
        return Ok(Pushed {
            duplicate,
            ..Pushed::default()
        });
    }
    let mut pushed = Pushed::default();
    if let Some(branch) = &d.branch {
        let sha = &d.sha;
        let short: String = sha.chars().take(12).collect();
        let vars = [("branch", branch.as_str()), ("sha", short.as_str())];
        let origin = Origin::Push(branch.clone());
        for (t, p) in matching {
            // The watcher's memory and key: it will not fire this commit again.
            let memo = t.push_memo(branch);
            db.set_meta(&memo, sha)?;
            let key = t.push_key(branch, sha);
            match trigger_chain::record(db, p, t, &key, &vars, &origin)? {
                Recorded::Made(id) => pushed.tasks.push(id),
                Recorded::Before => {}
                Recorded::Refused { parent, why } => pushed.refused.push((parent, why)),
            }
        }
    }
    let refused: Vec<i64> = pushed.refused.iter().map(|(id, _)| *id).collect();
    db.insert_event(&NewEvent {
        task_id: None,
        category: "webhook",
        kind: "webhook.github",
        summary: format!(
            "GitHub {} delivery {}: {} task(s) created",
            d.event,
            d.id,
            pushed.tasks.len()
        ),
        data: json!({"event": d.event, "delivery": d.id, "branch": d.branch, "sha": d.sha,
            "tasks": pushed.tasks, "refused_on": refused}),
        actor: "webhook",
        level: "info",
    })?;
    Ok(pushed)
}

/// Records on task `id` that `POST /hooks/trigger/{pipeline}` created it, with a body of
/// `bytes` bytes, in the transaction that creates it.
pub(super) fn record_trigger(
    db: &Db,
    id: i64,
    pipeline: &str,
    bytes: usize,
) -> crate::store::Result<()> {
    db.insert_event(&NewEvent {
        task_id: Some(id),
        category: "webhook",
        kind: "webhook.trigger",
        summary: format!("created by POST /hooks/trigger/{pipeline} ({bytes} bytes)"),
        data: json!({"pipeline": pipeline, "bytes": bytes}),
        actor: "webhook",
        level: "info",
    })?;
    Ok(())
}

impl Engine {
    /// A GitHub push delivery, recorded (and its triggers fired) in one transaction;
    /// `command` is its row when it came through the commands table.
    pub(super) async fn take_push(
        &mut self,
        d: Delivery,
        command: Option<i64>,
    ) -> Result<Answer, String> {
        let matching = match &d.branch {
            Some(branch) => self.push_triggers(branch.clone()).await?,
            None => Vec::new(),
        };
        let out = self
            .store
            .write(move |db| {
                let pushed = record_push(db, &d, &matching)?;
                let noted = Noted {
                    duplicate: pushed.duplicate,
                    tasks: pushed.tasks,
                };
                Ok((finish(db, command, noted)?, pushed.refused))
            })
            .await;
        let out = out.map(|(noted, refused)| {
            for (parent, why) in refused {
                self.announce(Recorded::Refused { parent, why });
            }
            noted
        });
        self.noted(out, command).await
    }

    /// A forge delivery about no task of this board, noted under `key`.
    pub(super) async fn take_stray(
        &mut self,
        key: String,
        command: Option<i64>,
    ) -> Result<Answer, String> {
        let out = self
            .store
            .write(move |db| {
                let duplicate = !db.note_delivery(&key, KEEP, KEEP_MS)?;
                finish(
                    db,
                    command,
                    Noted {
                        duplicate,
                        tasks: Vec::new(),
                    },
                )
            })
            .await;
        self.noted(out, command).await
    }

    /// The `push` triggers that fire for a push to `branch`, from the pipeline files as
    /// they are now (one written a moment ago counts, as it does for a new task).
    async fn push_triggers(&self, branch: String) -> Result<Vec<(Trigger, Pipeline)>, String> {
        let ws = self.ws.clone();
        tokio::task::spawn_blocking(move || {
            let agents = crate::pipeline::agent_ids(Some(&ws.agents_dir()));
            let catalog = crate::pipeline::load_catalog(Some(&ws.pipelines_dir()), Some(&agents));
            let (set, _) = triggers::TriggerSet::new(&catalog.pipelines);
            let mut matching = Vec::new();
            for t in &set.triggers {
                if let triggers::Kind::Push(globs) = &t.kind
                    && globs.iter().any(|g| triggers::glob(g, &branch))
                    && let Some(p) = set.pipelines.get(&t.pipeline)
                {
                    matching.push((t.clone(), p.clone()));
                }
            }
            matching
        })
        .await
        .map_err(|e| format!("reading the pipelines failed: {e}"))
    }

    /// Tells boards of the tasks a delivery created; records a failed one on its command.
    async fn noted(
        &mut self,
        out: Result<Noted, EngineError>,
        command: Option<i64>,
    ) -> Result<Answer, String> {
        match out {
            Ok(noted) => {
                for &task_id in &noted.tasks {
                    let _ = self.events.send(EngineEvent::TaskChanged { task_id });
                    self.look_again = true;
                }
                Ok(Answer::Noted(noted))
            }
            Err(e) => {
                let text = e.to_string();
                self.fail_command(command, &text, "a failed delivery").await;
                Err(text)
            }
        }
    }
}

/// Finishes a delivery's command (when it came as one) in its transaction.
fn finish(db: &Db, command: Option<i64>, noted: Noted) -> Result<Noted, EngineError> {
    if let Some(id) = command {
        let result = Answer::Noted(noted.clone()).command_result();
        db.finish_command(id, CommandState::Done, &result)?;
    }
    Ok(noted)
}

#[cfg(test)]
mod tests {
    use super::triggers::TriggerSet;
    use super::*;
    use crate::store::{Store, TaskFilter};

    const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

    fn setup() -> (tempfile::TempDir, Store, TriggerSet) {
        setup_on(r#"["main"]"#)
    }

    /// A store and the `ci` pipeline, whose one trigger watches `branches` (JSON).
    fn setup_on(branches: &str) -> (tempfile::TempDir, Store, TriggerSet) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("b.db")).unwrap();
        let text = format!(
            r#"{{"id": "ci", "name": "CI", "statuses": [
            {{"id": "todo", "label": "To do", "kind": "queue"}},
            {{"id": "done", "label": "Done", "kind": "done"}}],
            "triggers": [{{"push": {{"branches": {branches}}}}}]}}"#
        );
        let (p, diags) = crate::pipeline::parse_pipeline("ci.json", &text, None);
        let (set, errors) = TriggerSet::new(&[p.unwrap_or_else(|| panic!("{diags:?}"))]);
        assert!(errors.is_empty(), "{errors:?}");
        (dir, store, set)
    }

    fn matching(set: &TriggerSet) -> Vec<(Trigger, Pipeline)> {
        set.triggers
            .iter()
            .map(|t| (t.clone(), set.pipelines[&t.pipeline].clone()))
            .collect()
    }

    fn delivery(id: &str) -> Delivery {
        Delivery {
            event: "push".into(),
            id: id.into(),
            branch: Some("main".into()),
            sha: SHA.into(),
        }
    }

    fn tasks(store: &Store) -> usize {
        let all = TaskFilter {
            status: None,
            pipeline: None,
        };
        store.read().list_tasks(&all).unwrap().len()
    }

    /// The branch watcher's look at `main` pointing at the pushed commit.
    fn watcher_looks(store: &mut Store, set: &mut TriggerSet, old: &str) -> usize {
        let heads = vec![("main".to_string(), SHA.to_string())];
        let memo = set.push_memo_keys(&heads);
        let seen: std::collections::HashMap<String, String> = memo
            .into_iter()
            .map(|k| {
                let v = store
                    .read()
                    .meta(&k)
                    .unwrap()
                    .unwrap_or_else(|| old.to_string());
                (k, v)
            })
            .collect();
        let firings = set.pushes(&heads, |k| seen.get(k).cloned(), |_, _| {});
        let mut made = 0;
        for f in firings {
            let (t, p) = set.parts(&f).unwrap();
            let vars: Vec<(&str, &str)> = f
                .vars
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            made += store
                .write(|db| triggers::fire(db, &p, &t, &f.key, &vars))
                .unwrap()
                .into_iter()
                .count();
        }
        made
    }

    #[test]
    fn a_delivery_fires_once_and_the_watcher_never_fires_the_same_commit() {
        let (_dir, mut store, mut set) = setup();
        let m = matching(&set);
        let p = store
            .write(|db| record_push(db, &delivery("a"), &m))
            .unwrap();
        assert!(!p.duplicate);
        assert_eq!(p.tasks.len(), 1);
        let p = store
            .write(|db| record_push(db, &delivery("a"), &m))
            .unwrap();
        assert!(p.duplicate && p.tasks.is_empty());
        let p = store
            .write(|db| record_push(db, &delivery("b"), &m))
            .unwrap();
        assert!(!p.duplicate && p.tasks.is_empty());
        assert_eq!(watcher_looks(&mut store, &mut set, "older"), 0);
        assert_eq!(tasks(&store), 1);
    }

    /// Replays add no rows and no events; the ids kept stay within their window.
    #[test]
    fn replays_and_many_deliveries_leave_the_database_bounded() {
        let (_dir, mut store, set) = setup();
        let m = matching(&set);
        let events = |store: &Store| store.read().workspace_events(1_000_000).unwrap().len();
        store
            .write(|db| record_push_within(db, &delivery("r"), &m, 5))
            .unwrap();
        let (ids, evs) = (store.read().deliveries_kept().unwrap(), events(&store));
        for _ in 0..200 {
            let p = store
                .write(|db| record_push_within(db, &delivery("r"), &m, 5))
                .unwrap();
            assert!(p.duplicate && p.tasks.is_empty());
        }
        assert_eq!(store.read().deliveries_kept().unwrap(), ids);
        assert_eq!(events(&store), evs, "a replay recorded an event");
        for n in 0..20 {
            let d = Delivery {
                branch: None,
                ..delivery(&format!("d{n}"))
            };
            store.write(|db| record_push_within(db, &d, &m, 5)).unwrap();
        }
        assert!(store.read().deliveries_kept().unwrap() <= 6);
        assert_eq!(tasks(&store), 1);
    }

    #[test]
    fn a_commit_the_watcher_fired_first_makes_no_second_task_from_the_webhook() {
        let (_dir, mut store, mut set) = setup();
        assert_eq!(watcher_looks(&mut store, &mut set, "older"), 1);
        let m = matching(&set);
        let p = store
            .write(|db| record_push(db, &delivery("c"), &m))
            .unwrap();
        assert!(p.tasks.is_empty());
        assert_eq!(tasks(&store), 1);
    }

    /// A delivery of a commit on a task's own branch makes that task's child, one
    /// generation deeper; after five the push is refused and said on the last task. Any
    /// other branch starts a chain of its own.
    #[test]
    fn a_push_to_a_tasks_branch_makes_its_child_and_a_chain_stops_after_five() {
        let (_dir, mut store, set) = setup_on(r#"["release/*", "baton/*"]"#);
        let m = matching(&set);
        let push = |store: &mut Store, n: usize, branch: &str| {
            let d = Delivery {
                branch: Some(branch.into()),
                ..delivery(&format!("d{n}"))
            };
            store.write(|db| record_push(db, &d, &m)).unwrap()
        };
        let first = push(&mut store, 0, "release/1");
        assert_eq!(first.tasks.len(), 1, "{first:?}");
        let mut parent = first.tasks[0];
        assert_eq!(store.read().task_depth(parent).unwrap(), 0);
        let on_its_branch = |store: &mut Store, id: i64| {
            let branch = format!("baton/{id}-build");
            store
                .write(|db| db.set_worktree(id, Some(&branch), None, None))
                .unwrap();
            branch
        };
        for generation in 1..=5 {
            let branch = on_its_branch(&mut store, parent);
            let p = push(&mut store, generation, &branch);
            assert!(p.refused.is_empty(), "{p:?}");
            assert_eq!(p.tasks.len(), 1, "{p:?}");
            parent = p.tasks[0];
            assert_eq!(store.read().task_depth(parent).unwrap(), generation as i64);
        }
        let branch = on_its_branch(&mut store, parent);
        let p = push(&mut store, 6, &branch);
        assert!(p.tasks.is_empty(), "{p:?}");
        assert_eq!(p.refused.len(), 1, "{p:?}");
        assert_eq!(p.refused[0].0, parent);
        assert!(p.refused[0].1.contains("`baton/*`"), "{}", p.refused[0].1);
        let said = store.read().events(parent).unwrap();
        assert!(
            said.iter()
                .any(|e| e.kind == "trigger.refused" && e.summary == p.refused[0].1),
            "{said:?}"
        );
        assert_eq!(tasks(&store), 6);
        // The same commit again (the watcher's key, or a redelivery under a new id) is
        // refused once only.
        let again = push(&mut store, 7, &branch);
        assert!(
            again.tasks.is_empty() && again.refused.is_empty(),
            "{again:?}"
        );
        let said = store.read().events(parent).unwrap();
        let refusals = said.iter().filter(|e| e.kind == "trigger.refused").count();
        assert_eq!(refusals, 1, "{said:?}");
    }
}
