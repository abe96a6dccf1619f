//! Webhook deliveries the engine takes: a GitHub push, recorded once per delivery id and
//! once per commit for each matching `push` trigger (under the key the engine's own branch
//! watcher uses); a forge delivery about no task of this board, noted so its redelivery is
//! told apart; and the record of a task a webhook created.

use super::error::EngineError;
use super::forge_events::{KEEP, KEEP_MS};
use super::request::{Answer, Noted};
use super::triggers::{self, Trigger};
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

/// Records a delivery in one transaction: fires the matching triggers unless this delivery
/// was seen before, and records it as an event. A replay records nothing. Returns (seen
/// before, tasks created).
pub fn record_push(
    db: &Db,
    d: &Delivery,
    matching: &[(Trigger, Pipeline)],
) -> super::Result<(bool, Vec<i64>)> {
    record_push_within(db, d, matching, KEEP_DELIVERIES)
}

/// [`record_push`], remembering the newest `keep` delivery ids.
pub fn record_push_within(
    db: &Db,
    d: &Delivery,
    matching: &[(Trigger, Pipeline)],
    keep: i64,
) -> super::Result<(bool, Vec<i64>)> {
    let duplicate = !db.note_delivery(&d.id, keep, KEEP_DELIVERIES_MS)?;
    if duplicate {
        return Ok((true, Vec::new()));
    }
    let mut fired = Vec::new();
    if let Some(branch) = &d.branch {
        let sha = &d.sha;
        let short: String = sha.chars().take(12).collect();
        let vars = [("branch", branch.as_str()), ("sha", short.as_str())];
        for (t, p) in matching {
            // The watcher's memory and key: it will not fire this commit again.
            let memo = format!("push-seen:{}:{}:{branch}", t.pipeline, t.index);
            db.set_meta(&memo, sha)?;
            let key = format!("push:{}:{}:{branch}:{sha}", t.pipeline, t.index);
            fired.extend(triggers::fire(db, p, t, &key, &vars)?);
        }
    }
    db.insert_event(&NewEvent {
        task_id: None,
        category: "webhook",
        kind: "webhook.github",
        summary: format!(
            "GitHub {} delivery {}: {} task(s) created",
            d.event,
            d.id,
            fired.len()
        ),
        data: json!({"event": d.event, "delivery": d.id, "branch": d.branch, "sha": d.sha,
            "tasks": fired}),
        actor: "webhook",
        level: "info",
    })?;
    Ok((false, fired))
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
                let (duplicate, tasks) = record_push(db, &d, &matching)?;
                finish(db, command, Noted { duplicate, tasks })
            })
            .await;
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
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("b.db")).unwrap();
        let text = r#"{"id": "ci", "name": "CI", "statuses": [
            {"id": "todo", "label": "To do", "kind": "queue"},
            {"id": "done", "label": "Done", "kind": "done"}],
            "triggers": [{"push": {"branches": ["main"]}}]}"#;
        let (p, diags) = crate::pipeline::parse_pipeline("ci.json", text, None);
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
        let (dup, made) = store
            .write(|db| record_push(db, &delivery("a"), &m))
            .unwrap();
        assert!(!dup);
        assert_eq!(made.len(), 1);
        let (dup, made) = store
            .write(|db| record_push(db, &delivery("a"), &m))
            .unwrap();
        assert!(dup && made.is_empty());
        let (dup, made) = store
            .write(|db| record_push(db, &delivery("b"), &m))
            .unwrap();
        assert!(!dup && made.is_empty());
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
            let (dup, made) = store
                .write(|db| record_push_within(db, &delivery("r"), &m, 5))
                .unwrap();
            assert!(dup && made.is_empty());
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
        let (_, made) = store
            .write(|db| record_push(db, &delivery("c"), &m))
            .unwrap();
        assert!(made.is_empty());
        assert_eq!(tasks(&store), 1);
    }
}
