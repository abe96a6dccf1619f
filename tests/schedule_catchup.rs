//! Schedules after downtime: a slot missed while no engine ran fires once at the next
//! start when it is within `schedule_grace`; an older one is skipped with an event.

mod common;
use chrono::{Duration, Local, Timelike};
use common::Ws;

/// A pipeline whose schedule's last slot was `ago` before now (daily, at that minute).
fn daily_at(ws: &Ws, ago: Duration) {
    let slot = Local::now() - ago;
    ws.pipeline(
        "nightly.json",
        &format!(
            r#"{{"id": "nightly", "statuses": [
  {{"id": "todo", "kind": "queue"}},
  {{"id": "review", "kind": "gate"}},
  {{"id": "done", "kind": "done"}}
], "triggers": [{{"schedule": "{} {} * * *", "title": "nightly {{{{date}}}}"}}]}}"#,
            slot.minute(),
            slot.hour()
        ),
    );
}

/// Makes the store remember that an engine last looked at the schedule `ago` before now.
fn last_seen(ws: &Ws, ago: Duration) {
    let mut store = baton::store::Store::open(&ws.root().join(".baton/baton.db")).unwrap();
    let stamp = (Local::now() - ago).to_rfc3339();
    store
        .write(|db| db.set_meta("schedule-seen:nightly:0", &stamp))
        .unwrap();
}

fn titles(ws: &Ws) -> Vec<String> {
    let list: serde_json::Value = serde_json::from_str(&ws.ok(&["list", "--json"])).unwrap();
    list.as_array()
        .unwrap()
        .iter()
        .map(|t| t["title"].as_str().unwrap().to_string())
        .collect()
}

fn skipped_events(ws: &Ws) -> Vec<String> {
    let store = baton::store::Store::open(&ws.root().join(".baton/baton.db")).unwrap();
    store
        .read()
        .workspace_events(50)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "schedule.skipped")
        .map(|e| e.summary)
        .collect()
}

#[test]
fn a_slot_missed_within_the_grace_period_fires_once() {
    let ws = Ws::new();
    daily_at(&ws, Duration::minutes(10));
    ws.drain();
    // The first engine only notes the time: it cannot know what ran before it.
    assert!(titles(&ws).is_empty());
    last_seen(&ws, Duration::days(2) + Duration::minutes(30));
    ws.drain();
    let got = titles(&ws);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].starts_with("nightly 20"), "{got:?}");
    let skipped = skipped_events(&ws);
    assert_eq!(
        skipped.len(),
        1,
        "the two older days are skipped: {skipped:?}"
    );
    assert!(
        skipped[0].contains("missed 2 run(s)") && skipped[0].contains("only the latest fires"),
        "{skipped:?}"
    );
    // The history says a trigger made the task, not a person.
    let list: serde_json::Value = serde_json::from_str(&ws.ok(&["list", "--json"])).unwrap();
    let id = list[0]["id"].as_i64().unwrap().to_string();
    let shown: serde_json::Value = serde_json::from_str(&ws.ok(&["show", &id, "--json"])).unwrap();
    assert_eq!(shown["history"][0]["actor"], "trigger", "{shown}");
    // Another start: the slot is handled, nothing fires again.
    ws.drain();
    assert_eq!(titles(&ws).len(), 1);
    // Even if the memory were older again, the slot's dedupe key holds.
    last_seen(&ws, Duration::minutes(30));
    ws.drain();
    assert_eq!(titles(&ws).len(), 1);
}

#[test]
fn a_slot_older_than_the_grace_period_is_skipped_with_an_event() {
    let ws = Ws::new();
    ws.config("schedule_grace = \"5m\"\n");
    daily_at(&ws, Duration::minutes(10));
    last_seen(&ws, Duration::minutes(30));
    ws.drain();
    assert!(titles(&ws).is_empty());
    let skipped = skipped_events(&ws);
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert!(
        skipped[0].contains("missed 1 run(s)") && skipped[0].contains("schedule_grace (5m)"),
        "{skipped:?}"
    );
}
