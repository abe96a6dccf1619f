//! Tests of trigger parsing, templates and firing.

use super::*;

#[test]
fn globs() {
    for (p, t, want) in [
        ("main", "main", true),
        ("main", "mainx", false),
        ("release/*", "release/1.2", true),
        ("release/*", "release", false),
        ("*", "anything", true),
        ("feat/*/x", "feat/a/b/x", true),
        ("feat/*/x", "feat/a/b/y", false),
    ] {
        assert_eq!(glob(p, t), want, "{p} ~ {t}");
    }
}

fn pipeline(triggers: Value) -> Pipeline {
    serde_json::from_value(json!({
        "id": "p", "name": "P",
        "statuses": [{"id": "todo", "label": "todo", "kind": "queue"}],
        "triggers": triggers,
    }))
    .unwrap()
}

#[test]
fn parses_each_kind_and_names_bad_ones() {
    let (ok, errs) = parse(&pipeline(json!([
        {"schedule": "0 3 * * *", "title": "nightly {{date}}"},
        {"schedule": "*/5 * * * * *"},
        {"push": {"branches": ["main", "release/*"]}},
        {"task_done": {"pipeline": "feature"}},
        {"schedule": "not cron"},
        {"push": {}},
        {"webhook": {}},
    ])));
    assert_eq!(ok.len(), 4);
    assert_eq!(ok[0].title, "nightly {{date}}");
    assert_eq!(errs.len(), 3, "{errs:?}");
    assert!(errs[0].contains("trigger 5") && errs[0].contains("cron"));
    assert!(errs[1].contains("branches"));
    assert!(errs[2].contains("unknown trigger"));
}

#[test]
fn after_previous_waits_only_for_a_task_still_on_the_board() {
    let (p, _) = crate::pipeline::parse_pipeline(
        "p.json",
        r#"{"id": "p", "statuses": [{"id": "todo", "kind": "queue"},
            {"id": "review", "kind": "gate"}, {"id": "done", "kind": "done"}],
          "triggers": [{"schedule": "0 3 * * *", "after": "previous"}]}"#,
        None,
    );
    let p = p.unwrap();
    let (ts, errs) = parse(&p);
    assert!(errs.is_empty() && ts[0].after_previous, "{errs:?}");
    let dir = tempfile::tempdir().unwrap();
    let mut store = crate::store::Store::open(&dir.path().join("t.db")).unwrap();
    let fire_as = |store: &mut crate::store::Store, key: &str| {
        store
            .write(|db| {
                let id = fire(db, &p, &ts[0], key, &[])?.unwrap();
                Ok::<_, super::super::EngineError>((id, db.start_waits(id)?))
            })
            .unwrap()
    };
    let (a, held) = fire_as(&mut store, "1");
    assert!(!held, "nothing before the first");
    let (b, held) = fire_as(&mut store, "2");
    assert!(held, "the second waits for task {a}");
    // The one before archived: the next starts at once.
    store.write(|db| db.set_archived(b, true)).unwrap();
    let (c, held) = fire_as(&mut store, "3");
    assert!(!held, "task {b} is archived");
    // The one before gone from the store: the same.
    store
        .write(|db| db.set_meta("trigger-last:p:0", &(c + 100).to_string()))
        .unwrap();
    let (_, held) = fire_as(&mut store, "4");
    assert!(!held, "no task {}", c + 100);
}

#[test]
fn a_trigger_after_is_previous_or_an_error() {
    let (ok, errs) = parse(&pipeline(json!([
        {"schedule": "0 3 * * *", "after": "previous"},
        {"schedule": "0 3 * * *"},
        {"schedule": "0 3 * * *", "after": "siblings"},
    ])));
    assert!(ok[0].after_previous && !ok[1].after_previous);
    assert_eq!(
        errs,
        [
            "pipeline p trigger 3: after takes \"previous\" (wait for the task this trigger made last), not \"siblings\""
        ]
    );
}

#[test]
fn next_fire_is_after_now() {
    let (ok, _) = parse(&pipeline(json!([{"schedule": "*/5 * * * * *"}])));
    let Kind::Schedule(cron) = &ok[0].kind else {
        panic!()
    };
    let now = Local::now();
    let next = next_fire(cron, now).unwrap();
    assert!(next > now && next <= now + chrono::Duration::seconds(5));
}

#[test]
fn renders_templates() {
    assert_eq!(
        render("{{branch}}@{{sha}}", &[("branch", "main"), ("sha", "abc")]),
        "main@abc"
    );
}
