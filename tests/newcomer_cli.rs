//! A newcomer's commands end to end: what `init` writes, completions, the man page.

mod common;
use common::Ws;

#[test]
fn init_writes_the_schemas_and_validate_accepts_a_schema_key() {
    let ws = Ws::new();
    let schemas = ws.root().join(".baton/schemas");
    let pipeline = std::fs::read_to_string(schemas.join("pipeline.schema.json")).unwrap();
    assert_eq!(pipeline, baton::pipeline::schema::pipeline_schema_json());
    let agent = std::fs::read_to_string(schemas.join("agent.schema.json")).unwrap();
    assert_eq!(agent, baton::agents::schema::agent_schema_json());

    // A stale schema (an older baton) is refreshed by a second init.
    std::fs::write(schemas.join("agent.schema.json"), "{}").unwrap();
    let out = ws.ok(&["init"]);
    assert!(out.contains("refreshed the file schemas"), "{out}");
    let agent = std::fs::read_to_string(schemas.join("agent.schema.json")).unwrap();
    assert_eq!(agent, baton::agents::schema::agent_schema_json());

    let file = ws.pipeline(
        "mine.json",
        r#"{"$schema": "../schemas/pipeline.schema.json", "id": "mine",
            "statuses": [{"id": "todo", "kind": "queue"}, {"id": "done", "kind": "done"}],
            "transitions": [{"from": "todo", "to": "done", "on": "start"}]}"#,
    );
    let out = ws
        .baton(&["pipelines", "validate", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let all =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(!all.contains("$schema"), "no warning about $schema: {all}");
}

/// `init` on a board it cannot reach (here a PostgreSQL URL on a closed port) fails in one
/// sentence and leaves no `.baton/` behind, so the next `init` starts again rather than
/// taking a half-made workspace for a made one.
#[test]
fn an_init_whose_board_cannot_be_made_leaves_nothing() {
    let ws = Ws::at(tempfile::tempdir().unwrap(), "");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let url = format!("postgres://nobody@127.0.0.1:{port}/board");
    let out = ws
        .baton(&["init"])
        .env("BATON_DATABASE_URL", &url)
        .env_remove("PGPASSWORD")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(!out.stderr.is_empty(), "{out:?}");
    assert!(!ws.root().join(".baton").exists(), "{out:?}");
    // Without the URL the same folder becomes a workspace.
    let out = ws.ok(&["init"]);
    assert!(out.contains("created"), "{out}");
}

#[test]
fn the_demo_hands_a_plan_to_the_coder_and_loops_its_review_once() {
    let ws = Ws::new();
    let out = ws
        .baton(&[
            "run",
            "demo",
            "--title",
            "Add a dark mode toggle",
            "--wait",
            "--json",
        ])
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "waits for approval: {out:?}");
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["status"], "review");
    let steps = shown["steps"].as_array().unwrap();
    let ran: Vec<&str> = steps
        .iter()
        .map(|s| s["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        ran,
        [
            "plan",
            "build",
            "test",
            "ai_review",
            "build",
            "test",
            "ai_review"
        ]
    );
    assert_eq!(steps[3]["outcome"], "changes_requested");
    assert_eq!(steps[6]["outcome"], "success");
    assert_eq!(steps[4]["attempt"], 2);
    let plan = steps[0]["handoff"]["content"].as_str().unwrap();
    assert!(plan.contains("## Next Agent Context"), "{plan}");
    let triggers: Vec<&str> = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["trigger"].as_str().unwrap())
        .collect();
    assert!(
        triggers.contains(&"outcome:changes_requested"),
        "{triggers:?}"
    );

    // The coder's log shows the prompt it got: the planner's plan, not its raw output.
    let id = shown["id"].as_i64().unwrap().to_string();
    let coder = ws.ok(&["logs", &id, "--step", "2"]);
    assert!(coder.contains("Add a `dark_mode` field"), "{coder}");
    assert!(
        coder.contains("[tool] edit update src/settings.rs"),
        "{coder}"
    );
    // The second build gets the reviewer's request.
    let rework = ws.ok(&["logs", &id, "--step", "5"]);
    assert!(
        rework.contains("Add a test that “Add a dark mode toggle” survives a save and reload"),
        "{rework}"
    );

    ws.ok(&["approve", &id]);
    assert_eq!(ws.show(id.parse().unwrap())["status"], "done");
}

#[test]
fn two_demo_tasks_get_reviews_of_their_own_title_and_files() {
    let dir = tempfile::tempdir().unwrap();
    common::git_init(dir.path());
    let ws = Ws::at(dir, "");
    ws.ok(&["init"]);
    let review = |title: &str| {
        let out = ws
            .baton(&["run", "demo", "--title", title, "--wait", "--json"])
            .timeout(std::time::Duration::from_secs(120))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "waits for approval: {out:?}");
        let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        // The first review, which asked for changes.
        shown["steps"][3]["handoff"]["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let dark = review("Add a dark mode toggle");
    let flaky = review("Fix the \"flaky\" login test");
    assert_ne!(dark, flaky);
    assert!(dark.contains("“Add a dark mode toggle”"), "{dark}");
    assert!(flaky.contains("“Fix the \"flaky\" login test”"), "{flaky}");
    // The test step's report is the change in the task's worktree.
    assert!(dark.contains("`test-report.txt`"), "{dark}");
}

#[test]
fn completions_and_the_man_page_cover_every_command() {
    let ws = Ws::new();
    for (shell, marker) in [
        ("bash", "complete -F _baton"),
        ("zsh", "#compdef baton"),
        ("fish", "complete -c baton"),
    ] {
        let script = ws.ok(&["completions", shell]);
        assert!(script.contains(marker), "{shell}: {script}");
        for sub in ["approve", "pipelines", "completions", "man"] {
            assert!(script.contains(sub), "{shell} completes {sub}");
        }
    }
    let out = ws.baton(&["completions", "tcsh"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("possible values"));

    let page = ws.ok(&["man"]);
    assert!(
        page.starts_with(".ie") && page.contains(".TH baton 1"),
        "{page}"
    );
    assert!(
        page.contains("baton\\-approve") || page.contains("approve"),
        "{page}"
    );
    assert!(page.contains("a terminal kanban"), "{page}");
}

#[test]
fn config_show_names_where_each_value_comes_from() {
    let ws = Ws::new();
    let user_dir = ws.dir.path().join("xdg/baton");
    std::fs::create_dir_all(&user_dir).unwrap();
    std::fs::write(
        user_dir.join("config.toml"),
        "max_parallel = 8\nkill_grace = \"9s\"\n",
    )
    .unwrap();
    ws.config("max_parallel = 2\n");
    let out = ws.ok(&["config", "show"]);
    let line = |key: &str| {
        out.lines()
            .find(|l| l.starts_with(&format!("{key} =")))
            .unwrap_or_else(|| panic!("no {key}: {out}"))
            .to_string()
    };
    assert!(
        line("max_parallel").starts_with("max_parallel = 2"),
        "{out}"
    );
    assert!(
        line("max_parallel").ends_with(".baton/config.toml"),
        "{out}"
    );
    assert!(line("kill_grace").contains("\"9s\""), "{out}");
    assert!(
        line("kill_grace").ends_with("xdg/baton/config.toml"),
        "{out}"
    );
    assert!(line("auto_resume").ends_with("# default"), "{out}");

    // The engine uses the layered values: a bad user setting is refused, naming the file.
    std::fs::write(user_dir.join("config.toml"), "kill_grace = \"soon\"\n").unwrap();
    let out = ws.baton(&["config", "show"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("xdg/baton/config.toml") && err.contains("kill_grace"),
        "{err}"
    );
}

#[test]
fn config_show_names_the_base_branch_init_recorded() {
    let ws = Ws::at(tempfile::tempdir().unwrap(), "repo");
    common::git_init(ws.root());
    ws.ok(&["init"]);
    let out = ws.ok(&["config", "show"]);
    let line = out
        .lines()
        .find(|l| l.starts_with("base_branch ="))
        .unwrap();
    assert!(line.starts_with("base_branch = \"main\""), "{out}");
    assert!(line.ends_with("# recorded by `baton init`"), "{out}");
    ws.config("base_branch = \"develop\"\n");
    let out = ws.ok(&["config", "show"]);
    assert!(out.contains("base_branch = \"develop\""), "{out}");
}
