//! Tests for the built-in pipelines, the catalog and agent ids.

use super::*;
use std::fs;

#[test]
fn builtin_pipelines_are_clean() {
    let agents = agent_ids(None);
    assert_eq!(
        agents.iter().map(String::as_str).collect::<Vec<_>>(),
        [
            "coder",
            "demo-coder",
            "demo-planner",
            "demo-reviewer",
            "planner",
            "reviewer"
        ]
    );
    let mut ids = Vec::new();
    for (file, text) in builtin_sources() {
        let (pipeline, diags) = parse_pipeline(file, text, Some(&agents));
        assert!(diags.is_empty(), "{file}: {diags:#?}");
        ids.push(pipeline.expect("parses").id);
    }
    assert_eq!(ids, ["demo", "quick_fix", "feature"]);
}

#[test]
fn builtin_agents_are_flat_profiles() {
    for (file, text) in builtin_agent_sources() {
        let v: serde_json::Value = serde_json::from_str(text).expect("agent JSON");
        for key in ["id", "backend", "prompt_template"] {
            assert!(v[key].is_string(), "{file}: {key}");
        }
        assert!(v["outcomes"].is_array(), "{file}: outcomes");
        let template = v["prompt_template"].as_str().unwrap_or_default();
        for var in ["{{title}}", "{{prompt}}", "{{handoff}}", "{{note}}"] {
            assert!(template.contains(var), "{file}: {var}");
        }
    }
}

#[test]
fn demo_runs_replayed_agents_and_a_script_and_never_splices_task_text() {
    let (_, text) = builtin_sources()[0];
    let (p, _) = parse_pipeline("demo", text, Some(&agent_ids(None)));
    let p = p.expect("demo parses");
    let steps: Vec<String> = p
        .statuses
        .iter()
        .map(|s| match &s.step {
            Some(step) => match &step.action {
                StepAction::Agent(a) => format!("agent {a}"),
                StepAction::Script(s) => {
                    assert!(!s.contains("{{"), "no templating in scripts");
                    "script".into()
                }
                other => panic!("{other:?}"),
            },
            None => s.kind.as_str().to_string(),
        })
        .collect();
    assert_eq!(
        steps,
        [
            "queue",
            "agent demo-planner",
            "agent demo-coder",
            "script",
            "agent demo-reviewer",
            "gate",
            "done",
            "failed",
            "cancelled"
        ]
    );
    assert!(text.contains("test result: ok. 12 passed; 0 failed; 0 ignored"));
}

#[test]
fn demo_flows_and_loops() {
    let (_, text) = builtin_sources()[0];
    let p = parse_pipeline("demo", text, None).0.expect("parses");
    let mut visits = std::collections::HashMap::new();
    let decide_at = |visits: &std::collections::HashMap<String, u32>, from: &str, t: Trigger| {
        let f = Facts {
            visits,
            step_running: false,
            handoff_fields: &[],
            worktree_clean: None,
            run_cost: 0.0,
            forge: false,
        };
        decide(&p, from, &t, &f).expect("decides").to
    };
    let path: Vec<String> = ["backlog", "plan", "build", "test", "ai_review"]
        .iter()
        .map(|from| {
            let trigger = if *from == "backlog" {
                Trigger::Start
            } else {
                Trigger::Success
            };
            decide_at(&visits, from, trigger)
        })
        .collect();
    assert_eq!(path, ["plan", "build", "test", "ai_review", "review"]);
    let changes = Trigger::Outcome("changes_requested".into());
    assert_eq!(decide_at(&visits, "ai_review", changes.clone()), "build");
    assert_eq!(decide_at(&visits, "test", Trigger::Failure), "build");
    assert_eq!(
        decide_at(&visits, "plan", Trigger::Outcome("needs_info".into())),
        "backlog"
    );
    visits.insert("build".to_string(), 3);
    let f = Facts {
        visits: &visits,
        step_running: false,
        handoff_fields: &[],
        worktree_clean: None,
        run_cost: 0.0,
        forge: false,
    };
    let blocked = decide(&p, "ai_review", &changes, &f).unwrap_err();
    assert!(
        format!("{blocked:?}").contains("max_visits: 3"),
        "{blocked:?}"
    );
    assert_eq!(decide_at(&visits, "review", Trigger::Reject), "build");
    assert_eq!(decide_at(&visits, "review", Trigger::Approve), "done");
    let back = decide_move(&p, "review", "backlog", &f).expect("moves back");
    assert_eq!(back.label.as_deref(), Some("Back to backlog"));
}

fn write(dir: &std::path::Path, name: &str, text: &str) {
    fs::write(dir.join(name), text).expect("write test file");
}

const MINIMAL: &str = r#"{"id": "ID", "name": "NAME", "statuses": [{"id": "todo", "kind": "queue"}, {"id": "done", "kind": "done"}]}"#;

fn minimal(id: &str, name: &str) -> String {
    MINIMAL.replace("ID", id).replace("NAME", name)
}

#[test]
fn catalog_overrides_in_place_and_keeps_bad_files_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "b_extra.json", &minimal("extra", "Extra"));
    write(dir.path(), "a_extra2.json", &minimal("extra2", "Extra 2"));
    write(
        dir.path(),
        "z_quick.json",
        &minimal("quick_fix", "My quick fix"),
    );
    write(dir.path(), "broken.json", "{\"id\": \"broken\",\n  oops}");
    write(
        dir.path(),
        "bad.json",
        &minimal("bad", "Bad").replace("\"done\"}", "\"finished\"}"),
    );
    write(dir.path(), "dup.json", &minimal("extra", "Duplicate"));
    write(dir.path(), "notes.txt", "not a pipeline");

    let catalog = load_catalog(Some(dir.path()), None);
    let ids: Vec<&str> = catalog.pipelines.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["demo", "quick_fix", "feature", "extra2", "extra"]);
    assert_eq!(
        catalog.get("quick_fix").map(|p| p.name.as_str()),
        Some("My quick fix")
    );
    assert_eq!(catalog.get("extra").map(|p| p.name.as_str()), Some("Extra"));
    assert!(catalog.has_errors());

    let errors: Vec<String> = catalog
        .diagnostics
        .iter()
        .map(ToString::to_string)
        .collect();
    let has = |file: &str, text: &str| errors.iter().any(|e| e.contains(file) && e.contains(text));
    assert!(
        has("broken.json:2:3: error:", "key must be a string"),
        "{errors:#?}"
    );
    assert!(has("bad.json:1:", "unknown kind `finished`"), "{errors:#?}");
    assert!(has("dup.json: error:", "already defined by"), "{errors:#?}");
    assert!(!errors.iter().any(|e| e.contains("notes.txt")));
}

#[test]
fn catalog_without_workspace_dir() {
    for dir in [
        None,
        Some(std::path::Path::new("/nonexistent/baton/pipelines")),
    ] {
        let catalog = load_catalog(dir, Some(&agent_ids(None)));
        assert_eq!(catalog.pipelines.len(), 3);
        assert!(catalog.diagnostics.is_empty(), "{:?}", catalog.diagnostics);
    }
}

#[test]
fn catalog_checks_agents_against_workspace_profiles() {
    let root = tempfile::tempdir().expect("tempdir");
    let pipelines = root.path().join("pipelines");
    let agents = root.path().join("agents");
    fs::create_dir_all(&pipelines).expect("mkdir");
    fs::create_dir_all(&agents).expect("mkdir");
    let text = r#"{"id": "mine", "name": "Mine", "statuses": [
        {"id": "todo", "kind": "queue"},
        {"id": "go", "step": {"agent": "local"}},
        {"id": "done", "kind": "done"}]}"#;
    write(&pipelines, "mine.json", text);

    let without = load_catalog(Some(&pipelines), Some(&agent_ids(Some(&agents))));
    assert!(without.get("mine").is_none());
    assert!(
        without.diagnostics[0]
            .message
            .contains("unknown agent profile `local`")
    );

    write(
        &agents,
        "local.json",
        r#"{"id": "local", "backend": "openai"}"#,
    );
    write(&agents, "broken.json", "{");
    write(&agents, "noid.json", r#"{"backend": "openai"}"#);
    let ids = agent_ids(Some(&agents));
    assert_eq!(ids.len(), 7, "{ids:?}");
    let with = load_catalog(Some(&pipelines), Some(&ids));
    assert!(with.get("mine").is_some(), "{:?}", with.diagnostics);
}

#[test]
fn the_default_pipeline_is_the_workspaces_own_even_when_it_overrides_a_builtin() {
    let none = load_catalog(None, None);
    assert_eq!(
        none.default_pipeline().map(|p| p.id.as_str()),
        Some("quick_fix")
    );
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "feature.json",
        &minimal("feature", "Our feature"),
    );
    write(dir.path(), "zz.json", &minimal("zz", "Later"));
    let catalog = load_catalog(Some(dir.path()), None);
    assert_eq!(catalog.own, ["feature", "zz"]);
    assert_eq!(
        catalog.default_pipeline().map(|p| p.name.as_str()),
        Some("Our feature")
    );
}

#[test]
fn feature_opens_a_pull_request_only_where_there_is_a_forge() {
    let (_, text) = builtin_sources()
        .iter()
        .find(|(name, _)| name.ends_with("feature.json"))
        .expect("feature is built in");
    let p = parse_pipeline("feature", text, None).0.expect("parses");
    let visits = std::collections::HashMap::new();
    let at = |from: &str, t: Trigger, forge: bool| {
        let f = Facts {
            visits: &visits,
            step_running: false,
            handoff_fields: &[],
            worktree_clean: None,
            run_cost: 0.0,
            forge,
        };
        let d = decide(&p, from, &t, &f).expect("decides");
        (d.to, d.hooks)
    };
    let (to, hooks) = at("review", Trigger::Approve, true);
    assert_eq!(to, "in_pr");
    assert!(
        matches!(hooks[..], [crate::pipeline::Hook::Pr(_)]),
        "{hooks:?}"
    );
    let (to, hooks) = at("review", Trigger::Approve, false);
    assert_eq!(to, "done");
    assert!(
        matches!(hooks[..], [crate::pipeline::Hook::Merge(_)]),
        "{hooks:?}"
    );
    for (trigger, want) in [
        ("pr_merged", "done"),
        ("pr_closed", "cancelled"),
        ("ci_failed", "build"),
        ("outcome:changes_requested", "build"),
    ] {
        let t = Trigger::parse(trigger).expect("a trigger");
        assert_eq!(at("in_pr", t, true).0, want, "{trigger}");
    }
}

#[test]
fn the_builtins_are_the_same_for_any_agents_that_include_theirs_and_refused_without_them() {
    let mut more = agent_ids(None);
    more.insert("extra".into());
    let first = load_catalog(None, Some(&more));
    let again = load_catalog(None, Some(&more));
    assert!(first.diagnostics.is_empty(), "{:#?}", first.diagnostics);
    assert_eq!(first.pipelines, again.pipelines);
    assert_eq!(first.pipelines.len(), builtin_sources().len());
    // Without the agents they name, the pipelines that name them are refused, every time.
    let none = std::collections::BTreeSet::new();
    for _ in 0..2 {
        let bare = load_catalog(None, Some(&none));
        assert!(
            bare.diagnostics
                .iter()
                .any(|d| d.message.contains("`planner`")),
            "{:#?}",
            bare.diagnostics
        );
        assert!(bare.pipelines.len() < builtin_sources().len());
    }
}
