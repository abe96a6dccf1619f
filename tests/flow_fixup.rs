//! Fixing tasks up from the command line: re-run from a middle status, dismiss an
//! interrupted task, resume with nothing to resume, edit, archive and delete.

mod common;
use common::{Ws, git, spawn_engine, wait_within};
use std::time::Duration;

/// plan (an agent) leaves a handoff; review fails. Steps run in the task's worktree, so the trace is
/// written beside it.
const CHAIN: &str = r#"{"id": "chain", "statuses": [
  {"id": "todo", "kind": "queue"},
  {"id": "plan", "step": {"agent": "planner"}},
  {"id": "build", "step": {"run": "echo build >> ../trace"}},
  {"id": "review", "step": {"run": "echo review >> ../trace; exit 1"}},
  {"id": "done", "kind": "done"},
  {"id": "failed", "kind": "failed"},
  {"id": "cancelled", "kind": "cancelled"}
]}"#;

fn trace(ws: &Ws) -> Vec<String> {
    std::fs::read_to_string(ws.root().join("../worktrees/trace"))
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect()
}

fn fails(ws: &Ws, args: &[&str]) -> String {
    let out = ws.baton(args).output().unwrap();
    assert!(!out.status.success(), "baton {args:?} should fail");
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn rerun_from_a_middle_status_keeps_the_earlier_handoff_and_branch() {
    let dir = tempfile::tempdir().unwrap();
    common::git_init(&dir.path().join("repo"));
    let ws = Ws::at(dir, "repo");
    ws.baton(&["init"]).assert().success();
    ws.config("worktree_root = \"../worktrees\"\n");
    ws.pipeline("chain.json", CHAIN);
    std::fs::write(
        ws.root().join(".baton/agents/planner.json"),
        r#"{"id": "planner", "backend": "command", "format": "text",
  "argv": ["sh", "-c", "echo plan >> ../trace; printf '## What Was Done\\nplanned it\\n## Next Agent Context\\nbuild the thing\\n'", "{{message}}"]}"#,
    )
    .unwrap();
    let id = ws.new_task("chain", "rerun me");
    let sid = id.to_string();
    ws.ok(&["start", &sid]);
    ws.drain();
    let first = ws.show(id);
    assert_eq!(first["status"], "failed");
    let branch = git(ws.root(), &["branch", "--list", "baton/*"]);

    // Bad input first: each says what is wrong.
    assert!(fails(&ws, &["rerun", &sid, "--from", "nowhere"]).contains("no status `nowhere`"));
    assert!(fails(&ws, &["rerun", "999", "--from", "build"]).contains("999"));
    assert!(fails(&ws, &["rerun", &sid, "--from", "done"]).contains("final status"));

    // A new title does not make a new branch: the re-run goes on on the task's own.
    ws.ok(&["edit", &sid, "--title", "renamed since"]);
    ws.ok(&["rerun", &sid, "--from", "build", "--break", "review"]);
    ws.drain();
    let shown = ws.show(id);
    assert_eq!(shown["run"], 2);
    assert_eq!(shown["status"], "review", "{shown:#}");
    assert_eq!(shown["state"], "waiting", "paused before review");
    // plan did not run again; its handoff was carried into run 2.
    assert_eq!(
        trace(&ws).iter().filter(|l| l.starts_with("plan")).count(),
        1,
        "{:?}",
        trace(&ws)
    );
    let steps = shown["steps"].as_array().unwrap();
    let carried = &steps[steps.len() - 2];
    assert_eq!(carried["status"], "plan");
    assert_eq!(carried["state"], "succeeded");
    assert!(
        carried["handoff"]["content"]
            .as_str()
            .unwrap()
            .contains("build the thing")
    );
    assert_eq!(steps.last().unwrap()["status"], "build");
    assert_eq!(steps.last().unwrap()["state"], "succeeded");
    // Same branch as the first run.
    assert_eq!(git(ws.root(), &["branch", "--list", "baton/*"]), branch);
    let history = shown["history"].as_array().unwrap();
    assert!(
        history
            .iter()
            .any(|h| h["trigger"] == "rerun" && h["from"] == "failed" && h["to"] == "build"),
        "{history:#?}"
    );

    // The task is not finished while it waits: no re-run.
    assert!(fails(&ws, &["rerun", &sid, "--from", "plan"]).contains("only a finished"));
    ws.ok(&["continue", &sid]);
    ws.drain();
    assert_eq!(ws.show(id)["status"], "failed");
}

/// One step that waits for a file, so an engine can be killed while it runs.
const SLOW: &str = r#"{"id": "slow", "statuses": [
  {"id": "todo", "kind": "queue"},
  {"id": "work", "step": {"script": "touch started\nwhile [ ! -f go ]; do sleep 0.05; done"}},
  {"id": "done", "kind": "done"},
  {"id": "failed", "kind": "failed"},
  {"id": "cancelled", "kind": "cancelled"}
]}"#;

#[test]
fn dismiss_is_kept_across_a_restart_with_its_reason() {
    let ws = Ws::new();
    ws.config("kill_grace = \"1s\"\n");
    ws.pipeline("slow.json", SLOW);
    let id = ws.new_task("slow", "cut off");
    let sid = id.to_string();
    assert!(fails(&ws, &["dismiss", &sid]).contains("only an interrupted task"));
    let mut engine = spawn_engine(&ws);
    ws.ok(&["start", &sid]);
    wait_within("the step to start", Duration::from_secs(30), || {
        ws.root().join("started").exists()
    });
    engine.kill().unwrap();
    engine.wait().unwrap();
    ws.drain();
    assert_eq!(ws.show(id)["state"], "interrupted");

    ws.ok(&["dismiss", &sid, "--note", "not needed any more"]);
    ws.drain();
    let shown = ws.show(id);
    assert_eq!(shown["status"], "cancelled", "{shown:#}");
    assert_eq!(shown["state"], "cancelled");
    let last = shown["history"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["trigger"], "dismiss");
    assert_eq!(last["reason"], "not needed any more");
    assert!(fails(&ws, &["dismiss", "42"]).contains("42"));
}

/// A gate whose reject ends the task as failed, with no step that failed.
const GATED: &str = r#"{"id": "gated", "statuses": [
  {"id": "todo", "kind": "queue"},
  {"id": "work", "step": {"run": "echo \"$BATON_TASK_TITLE\" >> ran"}},
  {"id": "review", "kind": "gate"},
  {"id": "done", "kind": "done"},
  {"id": "failed", "kind": "failed"},
  {"id": "cancelled", "kind": "cancelled"}
], "transitions": [{"from": "review", "to": "failed", "on": "reject"}]}"#;

#[test]
fn resume_with_nothing_to_resume_starts_over_and_says_so() {
    let ws = Ws::new();
    ws.pipeline("gated.json", GATED);
    let id = ws.new_task("gated", "again");
    let sid = id.to_string();
    ws.ok(&["start", &sid]);
    ws.drain();
    ws.ok(&["reject", &sid]);
    assert_eq!(ws.show(id)["state"], "failed");
    let said = ws.ok(&["resume", &sid]);
    assert!(
        said.contains("nothing to resume, so it started over"),
        "{said}"
    );
    ws.drain();
    let shown = ws.show(id);
    assert_eq!(shown["run"], 2);
    assert_eq!(shown["status"], "review");
}

#[test]
fn edit_archive_and_delete() {
    let ws = Ws::new();
    ws.pipeline("gated.json", GATED);
    ws.pipeline("slow.json", SLOW);
    let id = ws.new_task("gated", "first title");
    let sid = id.to_string();
    ws.ok(&[
        "edit",
        &sid,
        "--title",
        "better title",
        "--prompt",
        "more detail",
    ]);
    let shown = ws.ok(&["show", &sid]);
    assert!(
        shown.contains("better title") && shown.contains("more detail"),
        "{shown}"
    );
    assert!(fails(&ws, &["edit", &sid]).contains("nothing to change"));
    assert!(fails(&ws, &["edit", "77", "--title", "x"]).contains("77"));
    assert!(fails(&ws, &["edit", &sid, "--title", " "]).contains("a task needs a title"));

    // Only a finished task is archived; then it leaves `list` for `list --archived`.
    assert!(fails(&ws, &["archive", &sid]).contains("only a finished task"));
    ws.ok(&["start", &sid]);
    ws.drain();
    ws.ok(&["approve", &sid]);
    ws.ok(&["archive", &sid]);
    assert!(fails(&ws, &["archive", &sid]).contains("already archived"));
    let listed = ws.ok(&["list", "--json"]);
    assert!(!listed.contains("better title"), "{listed}");
    let archived = ws.ok(&["list", "--archived", "--json"]);
    assert!(archived.contains("better title"), "{archived}");
    // The filters apply to the archive too, typos refused.
    let done = ws.ok(&["list", "--archived", "--status", "done", "--json"]);
    assert!(done.contains("better title"), "{done}");
    assert_eq!(
        ws.ok(&["list", "--archived", "--status", "todo"]).trim(),
        "no archived tasks match — `baton list --archived` shows them all"
    );
    assert!(
        fails(&ws, &["list", "--archived", "--status", "dnoe"])
            .contains("no pipeline has a status `dnoe`")
    );
    assert!(
        fails(&ws, &["list", "--archived", "--pipeline", "nope"])
            .contains("there is no pipeline `nope`")
    );
    assert!(ws.ok(&["show", &sid]).contains(&format!(
        "archived — `baton unarchive {sid}` brings it back"
    )));
    // Archiving is undone by name.
    assert_eq!(
        ws.ok(&["unarchive", &sid]).trim(),
        format!("task {sid}: back on the board")
    );
    assert!(ws.ok(&["list", "--json"]).contains("better title"));
    assert!(fails(&ws, &["unarchive", &sid]).contains("it is not archived"));
    assert_eq!(
        ws.ok(&["archive", &sid]).trim(),
        format!("task {sid}: archived — `baton unarchive {sid}` brings it back")
    );

    // A running task is not deleted; a finished one is, with all it recorded.
    let slow = ws.new_task("slow", "busy");
    let engine = spawn_engine(&ws);
    ws.ok(&["start", &slow.to_string()]);
    wait_within("the step to start", Duration::from_secs(30), || {
        ws.root().join("started").exists()
    });
    wait_within("the task to run", Duration::from_secs(30), || {
        ws.show(slow)["state"] == "running"
    });
    assert!(fails(&ws, &["delete", &slow.to_string()]).contains("running"));
    assert!(fails(&ws, &["edit", &slow.to_string(), "--title", "x"]).contains("running"));
    std::fs::write(ws.root().join("go"), "").unwrap();
    wait_within("the task to finish", Duration::from_secs(30), || {
        ws.show(slow)["state"] == "done"
    });
    common::stop(engine);
    ws.ok(&["delete", &slow.to_string()]);
    assert!(fails(&ws, &["show", &slow.to_string()]).contains("does not exist"));
    // A re-run brings an archived task back to the board: it is at work again.
    ws.ok(&["rerun", &sid, "--from", "review"]);
    assert!(ws.ok(&["list", "--json"]).contains("better title"));
    assert_eq!(ws.ok(&["list", "--archived", "--json"]).trim(), "[]");
}

#[test]
fn new_with_a_branch_bases_the_worktree_on_it() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    common::git_init(&repo);
    git(&repo, &["checkout", "-q", "-b", "feature"]);
    std::fs::write(repo.join("feature.txt"), "on feature\n").unwrap();
    git(&repo, &["add", "feature.txt"]);
    git(&repo, &["commit", "-q", "-m", "feature"]);
    git(&repo, &["checkout", "-q", "-"]);
    let ws = Ws::at(dir, "repo");
    ws.baton(&["init"]).assert().success();
    ws.config("worktree_root = \"../worktrees\"\n");
    ws.pipeline(
        "look.json",
        r#"{"id": "look", "statuses": [
          {"id": "todo", "kind": "queue"},
          {"id": "look", "step": {"run": "cat feature.txt > ../seen.txt"}},
          {"id": "review", "kind": "gate"},
          {"id": "done", "kind": "done"},
          {"id": "failed", "kind": "failed"},
          {"id": "cancelled", "kind": "cancelled"}
        ]}"#,
    );
    let err = fails(&ws, &["new", "x", "--pipeline", "look", "--branch", "nope"]);
    assert!(err.contains("no such branch"), "{err}");
    let id = ws.ok(&[
        "new",
        "x",
        "--pipeline",
        "look",
        "--branch",
        "feature",
        "--start",
    ]);
    ws.drain();
    let shown = ws.ok(&["show", id.trim()]);
    assert!(shown.contains("(from feature)"), "{shown}");
    let seen = std::fs::read_to_string(ws.root().join("../worktrees/seen.txt")).unwrap();
    assert_eq!(seen, "on feature\n");

    // Deleting keeps the branch and worktree unless --purge.
    let other = ws.ok(&["new", "y", "--pipeline", "look", "--start"]);
    ws.drain();
    let kept = ws.ok(&["delete", other.trim()]);
    assert!(kept.contains("branch baton/2-y is kept"), "{kept}");
    assert!(git(ws.root(), &["branch", "--list", "baton/2-y"]).contains("baton/2-y"));
    // With an engine running, the engine applies the delete and the CLI gets its answer at
    // once (it used to wait 10 s and fail, its command row deleted with the task).
    let engine = spawn_engine(&ws);
    let third = ws.ok(&["new", "z", "--pipeline", "look", "--start"]);
    wait_within("the engine to run a task", Duration::from_secs(30), || {
        // Its step fails (no feature.txt on the main branch): what matters is that it ran.
        ws.show(third.trim().parse().unwrap())["state"] == "failed"
    });
    let purged = ws
        .baton(&["delete", id.trim(), "--purge"])
        .timeout(Duration::from_secs(8))
        .output()
        .unwrap();
    common::stop(engine);
    let said = String::from_utf8_lossy(&purged.stdout);
    assert!(purged.status.success(), "{purged:?}");
    assert!(said.contains("removed branch baton/1-x"), "{said}");
    assert!(
        !ws.root().join(".baton/context/1").exists(),
        "the task's prompt and log copies go with it"
    );
    assert_eq!(git(ws.root(), &["branch", "--list", "baton/1-x"]), "");
    assert!(!ws.root().join("../worktrees/1-x").exists());
}
