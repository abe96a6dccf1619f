//! Tasks that wait for tasks (`--after`): all-of start, a blocker that fails, blockers that
//! finish while no engine runs, refused blockers, and a hook fanning out into children and
//! a final task that waits for them all. Script steps only.

mod common;

use common::Ws;
use serde_json::Value;

/// A backlog, one script step that succeeds, done.
const WORK: &str = r#"{"id": "work", "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "build", "step": {"run": "true"}},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"},
    {"id": "cancelled", "kind": "cancelled"}],
  "transitions": [{"from": "todo", "to": "done", "on": "manual"}]}"#;

/// A backlog, one script step that fails.
const BREAKS: &str = r#"{"id": "breaks", "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "build", "step": {"run": "exit 1"}},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"}]}"#;

/// A pipeline that starts with its step (no backlog).
const AT_ONCE: &str = r#"{"id": "at_once", "statuses": [
    {"id": "build", "step": {"run": "true"}},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"}]}"#;

fn ws() -> Ws {
    let ws = Ws::new();
    ws.pipeline("work.json", WORK);
    ws.pipeline("breaks.json", BREAKS);
    ws.pipeline("at_once.json", AT_ONCE);
    ws
}

fn new(ws: &Ws, args: &[&str]) -> i64 {
    let mut all = vec!["new"];
    all.extend_from_slice(args);
    ws.ok(&all).trim().parse().expect("`new` prints the id")
}

fn after_ids(shown: &Value) -> Vec<(i64, String)> {
    shown["after"]
        .as_array()
        .expect("`after` is a list")
        .iter()
        .map(|b| {
            (
                b["id"].as_i64().unwrap(),
                b["state"].as_str().unwrap().into(),
            )
        })
        .collect()
}

/// What task `id`'s card says it waits for (`⛓ …`), read as the board reads it.
fn card_after(ws: &Ws, id: i64) -> Option<String> {
    let db = ws.root().join(".baton").join("baton.db");
    let store = baton::store::Store::open_read_only(&db).expect("the board");
    let cards = store.read().task_cards().expect("cards");
    cards
        .into_iter()
        .find(|c| c.id == id)
        .expect("its card")
        .after
}

fn list_field(ws: &Ws, id: i64, field: &str) -> Value {
    let list: Value = serde_json::from_str(&ws.ok(&["list", "--json"])).unwrap();
    list.as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == id)
        .map(|t| t[field].clone())
        .expect("the task is listed")
}

fn list_state(ws: &Ws, id: i64) -> Value {
    let list: Value = serde_json::from_str(&ws.ok(&["list", "--json"])).unwrap();
    list.as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == id)
        .map(|t| t["state"].clone())
        .expect("the task is listed")
}

#[test]
fn a_task_starts_by_itself_once_all_its_blockers_are_done() {
    let ws = ws();
    let a = new(&ws, &["A", "--pipeline", "work"]);
    let b = new(&ws, &["B", "--pipeline", "work"]);
    let c = new(
        &ws,
        &[
            "C",
            "--pipeline",
            "work",
            "--after",
            &format!("{a},{b}"),
            "--start",
        ],
    );
    let shown = ws.show(c);
    assert_eq!(shown["status"], "todo");
    assert_eq!(shown["start_waits"], true);
    assert_eq!(after_ids(&shown), [(a, "idle".into()), (b, "idle".into())]);
    assert_eq!(list_state(&ws, c), "idle");

    ws.ok(&["start", &a.to_string()]);
    ws.drain();
    assert_eq!(ws.show(a)["status"], "done");
    let shown = ws.show(c);
    assert_eq!(shown["status"], "todo", "B is not done yet: {shown:#}");
    assert_eq!(shown["steps"].as_array().unwrap().len(), 0);

    ws.ok(&["start", &b.to_string()]);
    ws.drain();
    let shown = ws.show(c);
    assert_eq!(shown["status"], "done", "{shown:#}");
    assert_eq!(shown["start_waits"], false);
    let start = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["trigger"] == "start")
        .expect("a start in the history");
    assert_eq!(start["actor"], format!("task {b}"), "B's end started it");
}

#[test]
fn a_start_asked_later_waits_too_and_a_step_first_pipeline_holds_its_step() {
    let ws = ws();
    let a = new(&ws, &["A", "--pipeline", "work"]);
    let c = new(&ws, &["C", "--pipeline", "work", "--after", &a.to_string()]);
    let d = new(
        &ws,
        &["D", "--pipeline", "at_once", "--after", &a.to_string()],
    );
    assert_eq!(ws.show(c)["start_waits"], false, "not asked to start yet");
    // Not started, it waits all the same: its card says for what.
    assert_eq!(card_after(&ws, c).as_deref(), Some(a.to_string().as_str()));
    let said = ws.ok(&["start", &c.to_string()]);
    assert!(said.contains(&format!("waits for task {a}")), "{said}");
    let shown = ws.show(d);
    assert_eq!(
        (&shown["status"], &shown["state"]),
        (&"build".into(), &"idle".into())
    );
    assert_eq!(shown["steps"].as_array().unwrap().len(), 0, "{shown:#}");
    // Started by hand, it says what it waits for rather than that no move fits.
    let said = ws.ok(&["start", &d.to_string()]);
    assert!(said.contains(&format!("waits for task {a}")), "{said}");
    // A task others wait for cannot be deleted out from under them.
    let refused = ws.baton(&["delete", &a.to_string()]).output().unwrap();
    assert!(!refused.status.success());
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(
        why.contains(&format!("tasks {c}, {d} wait for it")),
        "{why}"
    );
    ws.drain();
    assert_eq!(ws.show(d)["steps"].as_array().unwrap().len(), 0);
    ws.ok(&["start", &a.to_string()]);
    ws.drain();
    assert_eq!(ws.show(c)["status"], "done");
    assert_eq!(ws.show(d)["status"], "done");
}

#[test]
fn a_failed_blocker_leaves_the_task_waiting_and_says_so() {
    let ws = ws();
    let a = new(&ws, &["A", "--pipeline", "breaks"]);
    let c = new(
        &ws,
        &[
            "C",
            "--pipeline",
            "work",
            "--after",
            &a.to_string(),
            "--start",
        ],
    );
    let before = list_field(&ws, c, "updated_at");
    ws.ok(&["start", &a.to_string()]);
    ws.drain();
    assert_eq!(ws.show(a)["state"], "failed");
    // The waiting task changed with it, so boards read its card again, which says so.
    assert_ne!(list_field(&ws, c, "updated_at"), before);
    assert_eq!(card_after(&ws, c), Some(format!("{a} failed")));
    let shown = ws.show(c);
    assert_eq!(shown["status"], "todo");
    assert_eq!(shown["start_waits"], true);
    assert_eq!(after_ids(&shown), [(a, "failed".into())]);
    assert_eq!(list_state(&ws, c), "idle");
    let human = ws.ok(&["show", &c.to_string()]);
    assert!(
        human.contains(&format!("task {a} failed, so this task keeps waiting")),
        "{human}"
    );
    // An abort gives the waiting task up: it no longer waits.
    ws.ok(&["abort", &c.to_string()]);
    let shown = ws.show(c);
    assert_eq!(shown["state"], "cancelled");
    assert_eq!(shown["start_waits"], false);
}

#[test]
fn a_blocker_done_while_no_engine_runs_starts_the_task_at_the_next_engine() {
    let ws = ws();
    let a = new(&ws, &["A", "--pipeline", "work"]);
    let c = new(
        &ws,
        &[
            "C",
            "--pipeline",
            "work",
            "--after",
            &a.to_string(),
            "--start",
        ],
    );
    // No engine: the command line applies the move itself, and the start with it.
    ws.ok(&["move", &a.to_string(), "done"]);
    let shown = ws.show(c);
    assert_eq!(
        (&shown["status"], &shown["state"]),
        (&"build".into(), &"queued".into()),
        "{shown:#}"
    );
    ws.drain();
    assert_eq!(ws.show(c)["status"], "done");
}

#[test]
fn blockers_that_do_not_exist_or_are_archived_are_refused() {
    let ws = ws();
    let out = ws
        .baton(&["new", "C", "--pipeline", "work", "--after", "41"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("there is no task 41"), "{err}");
    let a = new(&ws, &["A", "--pipeline", "work"]);
    ws.ok(&["move", &a.to_string(), "done"]);
    ws.ok(&["archive", &a.to_string()]);
    let out = ws
        .baton(&["new", "C", "--pipeline", "work", "--after", &a.to_string()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("task {a} is archived")), "{err}");
    let list: Value = serde_json::from_str(&ws.ok(&["list", "--json"])).unwrap();
    assert_eq!(
        list.as_array().unwrap().len(),
        0,
        "no task was made: {list}"
    );
}

#[test]
fn a_planner_fans_out_and_a_final_task_waits_for_every_child() {
    let ws = ws();
    ws.pipeline(
        "plan.json",
        r#"{"id": "plan", "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "plan", "step": {"run": "true"}},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"}],
  "transitions": [{"from": "plan", "to": "done", "on": "success", "hooks": [
    {"start_task": {"pipeline": "gated", "title": "part 1 of {{title}}"}},
    {"start_task": {"pipeline": "gated", "title": "part 2 of {{title}}"}},
    {"start_task": {"pipeline": "work", "title": "ship {{title}}", "after": "siblings"}}]}]}"#,
    );
    // The children stop at a review gate, so the final task has something to wait for.
    ws.pipeline(
        "gated.json",
        r#"{"id": "gated", "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "build", "step": {"run": "true"}},
    {"id": "review", "kind": "gate"},
    {"id": "done", "kind": "done"}]}"#,
    );
    let p = new(&ws, &["big", "--pipeline", "plan", "--start"]);
    ws.drain();
    let list: Value = serde_json::from_str(&ws.ok(&["list", "--json"])).unwrap();
    let id_of = |title: &str| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|t| t["title"] == title)
            .and_then(|t| t["id"].as_i64())
            .unwrap_or_else(|| panic!("no task `{title}` in {list:#}"))
    };
    let (one, two, ship) = (
        id_of("part 1 of big"),
        id_of("part 2 of big"),
        id_of("ship big"),
    );
    assert_eq!(ws.show(p)["status"], "done");
    let shown = ws.show(ship);
    assert_eq!(
        after_ids(&shown),
        [(one, "waiting".into()), (two, "waiting".into())]
    );
    assert_eq!(shown["status"], "todo", "{shown:#}");
    assert_eq!(shown["start_waits"], true);
    ws.ok(&["approve", &one.to_string()]);
    ws.drain();
    assert_eq!(ws.show(ship)["status"], "todo", "part 2 is not done yet");
    ws.ok(&["approve", &two.to_string()]);
    ws.drain();
    let shown = ws.show(ship);
    assert_eq!(
        after_ids(&shown),
        [(one, "done".into()), (two, "done".into())]
    );
    assert_eq!(shown["status"], "done", "{shown:#}");
}

#[test]
fn a_start_task_hook_waiting_for_siblings_it_does_not_have_is_a_located_error() {
    let ws = ws();
    let file = ws.pipeline(
        "lonely.json",
        r#"{"id": "lonely", "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "done", "kind": "done"}],
  "transitions": [{"from": "todo", "to": "done", "on": "start", "hooks": [
    {"start_task": {"pipeline": "work", "after": "siblings"}}]},
   {"from": "todo", "to": "done", "on": "manual", "hooks": [
    {"start_task": {"pipeline": "work", "after": "everyone"}}]}]}"#,
    );
    let out = ws
        .baton(&["pipelines", "validate", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("no start_task hook comes before it"),
        "{text}"
    );
    assert!(text.contains("lonely.json:5:"), "{text}");
    assert!(text.contains("`after` takes \"siblings\""), "{text}");
    assert!(text.contains("lonely.json:7:"), "{text}");
}

#[test]
fn after_takes_ids_written_with_spaces_and_names_a_bad_one() {
    let ws = ws();
    let a = new(&ws, &["A", "--pipeline", "work"]);
    let b = new(&ws, &["B", "--pipeline", "work"]);
    let c = new(
        &ws,
        &["C", "--pipeline", "work", "--after", &format!("{a}, {b}")],
    );
    let waits: Vec<i64> = after_ids(&ws.show(c))
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(waits, [a, b]);
    let bad = ws.baton(&["new", "D", "--after", "1, x"]).output().unwrap();
    assert!(!bad.status.success());
    let why = String::from_utf8_lossy(&bad.stderr);
    assert!(
        why.contains("`x` is not a task id; give ids like 3,4"),
        "{why}"
    );
}
