//! Recording a GitHub push delivery: once per delivery id, and once per commit for each
//! matching `push` trigger, under the key the engine's own branch watcher uses.

use crate::engine::triggers::{self, Trigger};
use crate::pipeline::Pipeline;
use crate::store::{Db, NewEvent};
use serde_json::json;

/// A verified delivery.
#[derive(Debug, Clone)]
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
) -> crate::engine::Result<(bool, Vec<i64>)> {
    record_push_within(db, d, matching, KEEP_DELIVERIES)
}

/// [`record_push`], remembering the newest `keep` delivery ids.
pub fn record_push_within(
    db: &Db,
    d: &Delivery,
    matching: &[(Trigger, Pipeline)],
    keep: i64,
) -> crate::engine::Result<(bool, Vec<i64>)> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::triggers::TriggerSet;
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
