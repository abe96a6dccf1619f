//! Git worktrees per task: isolation, diff, merge on approve, conflicts, clean-up, test counts.

mod common;
use common::{Ws, git};

/// A workspace that is a git repository on `main` with one commit.
fn repo() -> Ws {
    let dir = tempfile::tempdir().unwrap();
    common::git_init(&dir.path().join("repo"));
    let ws = Ws::at(dir, "repo");
    ws.baton(&["init"]).assert().success();
    ws.config("worktree_root = \"../worktrees\"\n");
    ws.pipeline("g.json", PIPELINE);
    ws
}

/// The step commits a change to `shared.txt`, leaves `f<ID>.txt` uncommitted and prints a
/// cargo-style test summary; review merges on approve.
const PIPELINE: &str = r#"{"id": "g", "name": "Git",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "code", "step": {"script": "echo \"$BATON_TASK_TITLE\" > shared.txt\necho extra > \"f$BATON_TASK_ID.txt\"\ngit add shared.txt\ngit commit -qm \"task $BATON_TASK_ID\"\necho 'test result: ok. 3 passed; 1 failed; 2 ignored; 0 measured'"}},
    {"id": "review", "kind": "gate"},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"},
    {"id": "cancelled", "kind": "cancelled"}
  ],
  "transitions": [{"from": "review", "to": "done", "on": "approve", "hooks": [{"merge": {}}]}]
}"#;

fn run_to_review(ws: &Ws, title: &str) -> serde_json::Value {
    let out = ws
        .baton(&["run", "g", "--title", title, "--wait", "--json"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_steps_commit_lands_on_the_task_branch_not_the_users_checkout() {
    let ws = repo();
    let shown = run_to_review(&ws, "first change");
    assert_eq!(
        shown["steps"][0]["tests"],
        serde_json::json!({"passed": 3, "failed": 1, "skipped": 2})
    );
    assert!(
        !ws.root().join("shared.txt").exists(),
        "the user's checkout is untouched"
    );
    assert_eq!(
        git(ws.root(), &["log", "--oneline", "main"])
            .lines()
            .count(),
        1
    );
    let branch_log = git(ws.root(), &["log", "--oneline", "baton/1-first-change"]);
    assert!(branch_log.contains("task 1"), "{branch_log}");
    let wt = ws.root().join("../worktrees/1-first-change");
    assert!(wt.join("shared.txt").exists());

    let diff = ws.ok(&["diff", "1"]);
    assert!(
        diff.contains("+first change"),
        "committed change in the diff: {diff}"
    );
    assert!(
        diff.contains("f1.txt"),
        "uncommitted file in the diff: {diff}"
    );

    ws.ok(&["approve", "1"]);
    assert_eq!(
        std::fs::read_to_string(ws.root().join("shared.txt")).unwrap(),
        "first change\n"
    );
    assert!(
        ws.root().join("f1.txt").exists(),
        "uncommitted work was committed and merged"
    );
    assert!(!wt.exists(), "the worktree is removed once done");
    assert!(
        !git(ws.root(), &["branch"]).contains("baton/1"),
        "a merged branch is deleted"
    );
    assert_eq!(ws.show(1)["state"], "done");
    let out = ws.baton(&["diff", "1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "baton: task 1's worktree and its branch baton/1-first-change are gone (merged into main, or deleted) — `git log main` shows what was merged"
    );
}

#[test]
fn a_cancelled_tasks_kept_branch_still_shows_its_diff() {
    let ws = repo();
    run_to_review(&ws, "left over");
    ws.ok(&["abort", "1"]);
    assert_eq!(ws.show(1)["status"], "cancelled");
    assert!(
        !ws.root().join("../worktrees/1-left-over").exists(),
        "the worktree is removed"
    );
    // The branch keeps the work.
    let diff = ws.ok(&["diff", "1"]);
    assert!(diff.contains("shared.txt | 1 +"), "{diff}");
    assert!(diff.contains("+left over"), "{diff}");
    // One cancelled before any step ran never had any work.
    let id = ws.new_task("g", "never started");
    ws.ok(&["abort", &id.to_string()]);
    let out = ws.baton(&["diff", &id.to_string()]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        format!("baton: task {id} ended (cancelled) before a step ran, so it has no work to show")
    );
}

#[test]
fn a_conflicting_task_keeps_its_branch_and_stays_at_review() {
    let ws = repo();
    run_to_review(&ws, "one");
    run_to_review(&ws, "two");
    ws.ok(&["approve", "1"]);
    let out = ws.baton(&["approve", "2"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("conflicts in: shared.txt"), "{err}");
    let shown = ws.show(2);
    assert_eq!(shown["status"], "review");
    assert!(git(ws.root(), &["branch"]).contains("baton/2-two"));
    assert!(ws.root().join("../worktrees/2-two").exists());
    let human = ws.ok(&["show", "2"]);
    assert!(
        human.contains("conflicts in: shared.txt"),
        "the event is shown: {human}"
    );
    assert_eq!(
        git(
            ws.root(),
            &["status", "--porcelain", "--untracked-files=no"]
        ),
        ""
    );
}

#[test]
fn a_dirty_target_checkout_is_never_overwritten() {
    let ws = repo();
    run_to_review(&ws, "change");
    std::fs::write(ws.root().join("README"), "my local edit\n").unwrap();
    let out = ws.baton(&["approve", "1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("modified tracked files (README)"));
    assert_eq!(
        std::fs::read_to_string(ws.root().join("README")).unwrap(),
        "my local edit\n"
    );
    assert_eq!(ws.show(1)["status"], "review");
}

#[test]
fn cancel_removes_the_worktree_and_keeps_the_branch() {
    let ws = repo();
    run_to_review(&ws, "abandon me");
    ws.ok(&["abort", "1"]);
    assert!(!ws.root().join("../worktrees/1-abandon-me").exists());
    assert!(git(ws.root(), &["branch"]).contains("baton/1-abandon-me"));
}

#[test]
fn parallel_tasks_get_separate_worktrees() {
    let ws = repo();
    for t in ["a", "b", "c"] {
        let id = ws.new_task("g", t);
        ws.ok(&["start", &id.to_string()]);
    }
    ws.drain();
    for (id, t) in [(1, "a"), (2, "b"), (3, "c")] {
        let wt = ws.root().join(format!("../worktrees/{id}-{t}"));
        assert_eq!(
            std::fs::read_to_string(wt.join("shared.txt")).unwrap(),
            format!("{t}\n")
        );
    }
}

#[test]
fn context_dir_holds_each_steps_log() {
    let ws = repo();
    run_to_review(&ws, "ctx");
    let log = ws.root().join(".baton/context/1/id_code_001.log");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("test result: ok. 3 passed"), "{text}");
}

#[test]
fn a_missing_base_branch_fails_the_step_with_a_clear_error() {
    let ws = repo();
    ws.config("worktree_root = \"../worktrees\"\nbase_branch = \"release\"\n");
    let out = ws
        .baton(&["run", "g", "--title", "x", "--wait", "--json"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["status"], "failed");
    let err = shown["steps"][0]["error"].as_str().unwrap();
    assert!(
        err.contains("base branch `release` does not exist"),
        "{err}"
    );
}

#[test]
fn missing_git_is_named() {
    let ws = repo();
    run_to_review(&ws, "x");
    let out = ws
        .baton(&["diff", "1"])
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("git is not installed"));
}

#[test]
fn a_taken_worktree_path_is_named() {
    let ws = repo();
    std::fs::create_dir_all(ws.root().join("../worktrees/1-x")).unwrap();
    std::fs::write(ws.root().join("../worktrees/1-x/mine.txt"), "keep").unwrap();
    let out = ws
        .baton(&["run", "g", "--title", "x", "--wait", "--json"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let err = shown["steps"][0]["error"].as_str().unwrap();
    assert!(err.contains("is taken"), "{err}");
    assert_eq!(
        std::fs::read_to_string(ws.root().join("../worktrees/1-x/mine.txt")).unwrap(),
        "keep"
    );
}

#[test]
fn cancelling_keeps_uncommitted_work_on_the_branch() {
    let ws = repo();
    run_to_review(&ws, "keep me");
    ws.ok(&["abort", "1"]);
    let files = git(
        ws.root(),
        &["ls-tree", "-r", "--name-only", "baton/1-keep-me"],
    );
    assert!(
        files.contains("f1.txt"),
        "the uncommitted file was saved on the branch: {files}"
    );
}

#[test]
fn a_merge_hook_on_an_automatic_move_merges() {
    let ws = repo();
    ws.pipeline(
        "auto.json",
        r#"{"id": "auto", "name": "Auto",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "code", "step": {"script": "echo auto > auto.txt"}},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"}
  ],
  "transitions": [{"from": "code", "to": "done", "on": "success", "hooks": [{"merge": {}}]}]
}"#,
    );
    let out = ws
        .baton(&["run", "auto", "--title", "auto", "--wait"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(ws.root().join("auto.txt")).unwrap(),
        "auto\n"
    );
}

#[test]
fn a_clean_worktree_guard_blocks_while_work_is_uncommitted() {
    let ws = repo();
    ws.pipeline(
        "guarded.json",
        r#"{"id": "guarded", "name": "Guarded",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "code", "step": {"script": "echo dirty > dirty.txt"}},
    {"id": "review", "kind": "gate"},
    {"id": "done", "kind": "done"}
  ],
  "transitions": [{"from": "review", "to": "done", "on": "manual", "guards": [{"clean_worktree": true}]}]
}"#,
    );
    let out = ws
        .baton(&["run", "guarded", "--title", "g", "--wait"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = ws.baton(&["move", "1", "done"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("clean_worktree"));
    let wt = ws.root().join("../worktrees/1-g");
    git(&wt, &["add", "-A"]);
    git(&wt, &["commit", "-qm", "clean it"]);
    ws.ok(&["move", "1", "done"]);
}

#[test]
fn an_untracked_file_in_the_way_is_named_in_one_sentence() {
    let ws = repo();
    run_to_review(&ws, "collide");
    std::fs::write(ws.root().join("f1.txt"), "mine, untracked\n").unwrap();
    let out = ws.baton(&["approve", "1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "one sentence: {err}");
    assert!(
        err.contains("untracked files") && err.contains("f1.txt"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.root().join("f1.txt")).unwrap(),
        "mine, untracked\n"
    );
}

#[test]
fn aborting_a_running_step_removes_its_worktree_only_after_it_stopped() {
    let ws = repo();
    ws.pipeline(
        "busy.json",
        r#"{"id": "busy", "name": "Busy",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "code", "step": {"script": "i=0\nwhile true; do mkdir -p d$i; echo x > d$i/f; i=$((i+1)); sleep 0.01; done"}},
    {"id": "done", "kind": "done"},
    {"id": "cancelled", "kind": "cancelled"}
  ]
}"#,
    );
    ws.config("worktree_root = \"../worktrees\"\nkill_grace = \"2s\"\n");
    let mut engine = std::process::Command::new(assert_cmd::cargo::cargo_bin("baton"))
        .current_dir(ws.root())
        .arg("engine")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let id = ws.new_task("busy", "busy").to_string();
    ws.ok(&["start", &id]);
    let wt = ws.root().join("../worktrees/1-busy");
    let start = std::time::Instant::now();
    while !wt.join("d5").exists() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "the step never ran"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    ws.ok(&["abort", &id]);
    let start = std::time::Instant::now();
    while wt.exists() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "worktree never removed"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(engine.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    engine.wait().unwrap();
    assert!(!git(ws.root(), &["worktree", "list"]).contains("1-busy"));
    let files = git(ws.root(), &["ls-tree", "-r", "--name-only", "baton/1-busy"]);
    assert!(
        files.contains("d0/f"),
        "the step's files were kept on the branch"
    );
}
