//! Tests for the built-in pipelines, the catalog and agent ids.

use super::*;
use std::fs;

#[test]
fn builtin_pipelines_are_clean() {
    let agents = agent_ids(None);
    assert_eq!(
        agents.iter().map(String::as_str).collect::<Vec<_>>(),
        ["coder", "planner", "reviewer"]
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
fn demo_runs_scripts_only_and_never_splices_task_text() {
    let (_, text) = builtin_sources()[0];
    let (p, _) = parse_pipeline("demo", text, None);
    let p = p.expect("demo parses");
    let kinds: Vec<&str> = p.statuses.iter().map(|s| s.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "queue",
            "step",
            "step",
            "step",
            "gate",
            "done",
            "failed",
            "cancelled"
        ]
    );
    for s in &p.statuses {
        if let Some(step) = &s.step {
            let StepAction::Script(script) = &step.action else {
                panic!("{}: demo steps are scripts", s.id);
            };
            assert!(!script.contains("{{"), "{}: no templating in scripts", s.id);
        }
    }
    let test = p.status("test").and_then(|s| s.step.as_ref());
    let script = test.map(|s| s.action.describe()).unwrap_or_default();
    assert!(script.starts_with("script: "), "{script}");
    assert!(text.contains("test result: ok. 12 passed; 0 failed; 0 ignored"));
}

#[test]
fn demo_flows_and_loops() {
    let (_, text) = builtin_sources()[0];
    let p = parse_pipeline("demo", text, None).0.expect("parses");
    let mut visits = std::collections::HashMap::new();
    let facts = |visits: &std::collections::HashMap<String, u32>| -> Decision {
        let f = Facts {
            visits,
            step_running: false,
            handoff_fields: &[],
            worktree_clean: None,
            run_cost: 0.0,
        };
        decide(&p, "test", &Trigger::Failure, &f).expect("decides")
    };
    assert_eq!(facts(&visits).to, "build");
    visits.insert("build".to_string(), 3);
    assert_eq!(facts(&visits).to, "failed");
    let f = Facts {
        visits: &visits,
        step_running: false,
        handoff_fields: &[],
        worktree_clean: None,
        run_cost: 0.0,
    };
    let path: Vec<String> = ["backlog", "plan", "build", "test"]
        .iter()
        .map(|from| {
            let trigger = if *from == "backlog" {
                Trigger::Start
            } else {
                Trigger::Success
            };
            decide(&p, from, &trigger, &f).expect("moves").to
        })
        .collect();
    assert_eq!(path, ["plan", "build", "test", "review"]);
    let reject = decide(&p, "review", &Trigger::Reject, &f).expect("rejects");
    assert_eq!(reject.to, "build");
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
    assert_eq!(ids.len(), 4, "{ids:?}");
    let with = load_catalog(Some(&pipelines), Some(&ids));
    assert!(with.get("mine").is_some(), "{:?}", with.diagnostics);
}
