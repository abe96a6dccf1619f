//! Taking a task over in the agent's own UI: `baton attach ID` and the board's `T`. A fake
//! agent stands in for the CLI (no model is needed): its step reports a session the way
//! `claude -p --output-format stream-json` does, and its `attach_argv` records the argv,
//! folder and environment it was opened with, then leaves a change in the worktree. The
//! takeover's end is seen in the history, the task branch and (on the board) the move menu.

mod common;
#[path = "support/tmux.rs"]
mod tmux;
use common::{Ws, git};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tmux::Tmux;

/// One agent step, then a review gate.
const PIPELINE: &str = r#"{"id": "p", "name": "Agent",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "code", "step": {"agent": "fake", "env": {"FROM_STEP": "step-env", "WHO": "step"}}},
    {"id": "review", "kind": "gate"},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"},
    {"id": "cancelled", "kind": "cancelled"}
  ],
  "transitions": [{"from": "review", "to": "done", "on": "approve", "label": "Ship it"}]
}"#;

/// What the fake agent's step prints: a session, then an answer.
const STEP: &str = r###"#!/bin/sh
printf '%s\n' '{"type":"system","subtype":"init","session_id":"sess-42","model":"fake","tools":[]}'
printf '%s\n' '{"type":"result","subtype":"success","is_error":false,"result":"## What Was Done\nNothing yet.","session_id":"sess-42"}'
"###;

/// The fake agent's interactive UI: records how it was opened, leaves a change.
const ATTACH: &str = r#"#!/bin/sh
{ pwd; printf '%s\n' "$@"; echo "$BATON_TASK_ID $BATON_STATUS $FROM_STEP $FROM_PROFILE $WHO"; } > "$RECORD"
echo "made by hand" > taken.txt
"#;

fn script(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A git workspace whose task 1 waits at review after a fake agent step that recorded
/// session `sess-42`; its worktree, and the file the attach records to.
fn task_with_session() -> (Ws, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    common::git_init(&dir.path().join("repo"));
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let step = script(&bin, "fake-step", STEP);
    let attach = script(&bin, "fake-attach", ATTACH);
    let record = dir.path().join("attached.txt");
    let ws = Ws::at(dir, "repo");
    ws.ok(&["init"]);
    ws.config("worktree_root = \"../worktrees\"\n");
    ws.pipeline("p.json", PIPELINE);
    let profile = serde_json::json!({
        "id": "fake", "backend": "command", "format": "claude-stream-json",
        "argv": [step, "{{message}}"],
        "attach_argv": [attach, "--resume", "{{session}}"],
        "env": {"RECORD": record, "FROM_PROFILE": "profile-env", "WHO": "profile", "BATON_STATUS": "forged"}
    });
    std::fs::write(
        ws.root().join(".baton/agents/fake.json"),
        profile.to_string(),
    )
    .unwrap();
    let out = ws
        .baton(&["run", "p", "--title", "it's a \"task\"; x", "--wait"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(ws.show(1)["steps"][0]["session"], "sess-42");
    let wt = worktree(&ws);
    (ws, wt, record)
}

/// Task 1's worktree, from `baton show 1`.
fn worktree(ws: &Ws) -> PathBuf {
    let shown = ws.ok(&["show", "1"]);
    let wt = shown
        .lines()
        .find_map(|l| {
            l.split_once("· worktree ")
                .map(|(_, w)| w.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no worktree in:\n{shown}"));
    std::fs::canonicalize(wt).unwrap()
}

/// The fake attach's record: its folder, its arguments, then the environment line.
fn recorded(record: &Path) -> Vec<String> {
    std::fs::read_to_string(record)
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect()
}

/// The takeover's history row, once the engine recorded it.
fn takeover_reason(ws: &Ws) -> Option<String> {
    ws.show(1)["history"]
        .as_array()?
        .iter()
        .find(|h| h["trigger"] == "takeover")
        .map(|h| h["reason"].as_str().unwrap_or_default().to_string())
}

/// The attach opened the fake agent on the session, in the worktree, with the step's
/// environment; its change was committed to the task branch and the history names who.
fn check_recorded(ws: &Ws, wt: &Path, record: &Path) {
    let lines = recorded(record);
    assert_eq!(
        std::fs::canonicalize(&lines[0]).unwrap(),
        wt,
        "runs in the worktree: {lines:?}"
    );
    assert_eq!(lines[1..3], ["--resume", "sess-42"], "{lines:?}");
    // The step's `env` wins over the profile's, which cannot change baton's own variables.
    assert_eq!(lines[3], "1 code step-env profile-env step", "{lines:?}");
    let reason = takeover_reason(ws).expect("a takeover in the history");
    assert!(
        reason.starts_with("taken over by tester; its changes were committed to baton/1-"),
        "{reason}"
    );
    assert_eq!(
        git(wt, &["log", "-1", "--format=%s"]).trim(),
        "baton: task 1 taken over by tester"
    );
    assert_eq!(
        git(wt, &["show", "--name-only", "--format=", "HEAD"]).trim(),
        "taken.txt"
    );
    assert_eq!(
        git(wt, &["status", "--porcelain"]),
        "",
        "nothing left uncommitted"
    );
    assert_eq!(
        ws.show(1)["status"],
        "review",
        "the task stays where it was"
    );
}

#[test]
fn attach_here_opens_the_agent_on_its_session_and_commits_what_it_changed() {
    let (ws, wt, record) = task_with_session();
    let out = ws
        .baton(&["attach", "1", "--here"])
        .env_remove("TMUX")
        .env("BATON_USER", "tester")
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    check_recorded(&ws, &wt, &record);
    assert!(
        stdout.contains("agent `fake` on session sess-42"),
        "{stdout}"
    );
    assert!(stdout.contains("task 1: taken over by tester"), "{stdout}");
    // The next moves, as commands.
    assert!(stdout.contains("baton approve 1"), "{stdout}");
}

#[test]
fn attach_refuses_a_running_step_and_a_task_without_a_worktree() {
    let (ws, _wt, _record) = task_with_session();
    ws.pipeline(
        "slow.json",
        r#"{"id": "slow", "name": "Slow", "statuses": [
            {"id": "todo", "kind": "queue"},
            {"id": "wait", "step": {"run": "sleep 30"}},
            {"id": "done", "kind": "done"}, {"id": "failed", "kind": "failed"}]}"#,
    );
    let queued = ws.new_task("slow", "not started");
    let out = ws.baton(&["attach", &queued.to_string()]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("task {queued} has no worktree yet")),
        "{err}"
    );

    let engine = common::spawn_engine(&ws);
    ws.ok(&["start", &queued.to_string()]);
    common::wait_for("the step to run", || ws.show(queued)["state"] == "running");
    let out = ws.baton(&["attach", &queued.to_string()]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains(&format!(
            "task {queued}'s step is running; abort it or wait"
        )),
        "{err}"
    );
    ws.ok(&["abort", &queued.to_string()]);
    common::stop(engine);
}

#[test]
fn an_agent_without_an_interactive_resume_opens_a_shell_and_says_so() {
    let (ws, wt, _record) = task_with_session();
    let profile = ws.root().join(".baton/agents/fake.json");
    let mut p: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&profile).unwrap()).unwrap();
    p.as_object_mut().unwrap().remove("attach_argv");
    std::fs::write(&profile, p.to_string()).unwrap();
    let shell = script(ws.dir.path(), "fake-shell", "#!/bin/sh\npwd > \"$0.ran\"\n");
    let out = ws
        .baton(&["attach", "1", "--here"])
        .env("SHELL", &shell)
        .env("BATON_USER", "tester")
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("agent `fake` has no interactive resume"),
        "{stdout}"
    );
    let ran = std::fs::read_to_string(shell.with_extension("ran")).unwrap();
    assert_eq!(std::fs::canonicalize(ran.trim()).unwrap(), wt);
    assert!(
        takeover_reason(&ws)
            .unwrap()
            .contains("it left nothing uncommitted")
    );
}

/// The board on `ws` in tmux (`env` before the binary), its task's detail loaded.
fn board(name: &str, ws: &Ws, env: &str) -> Tmux {
    let bin = env!("CARGO_BIN_EXE_baton");
    let cmd = format!(
        "cd '{}' && env {env} XDG_CONFIG_HOME='{}' BATON_USER=tester SHELL=/bin/sh {bin}",
        ws.root().display(),
        ws.dir.path().join("xdg").display()
    );
    let tmux = Tmux::start(name, &cmd);
    // The task's detail (its steps) loads after the board: `T` before it is refused.
    tmux.wait_screen("the board with the task's steps", |s| {
        s.contains("#1 ") && s.contains("code #1")
    });
    tmux
}

#[test]
fn t_in_tmux_opens_a_window_on_the_session_and_its_end_is_recorded() {
    let (ws, wt, record) = task_with_session();
    let tmux = board("takeover", &ws, "");
    tmux.keys(&["T"]);
    let windows = tmux.wait(
        "a second window",
        || tmux.windows(),
        |w| w.lines().count() == 2,
    );
    let started = tmux.display(1, "#{pane_start_command}");
    assert!(started.contains("attach 1 --here"), "{started} {windows}");
    tmux.wait(
        "the attach's record",
        || recorded(&record).join("\n"),
        |r| r.lines().count() == 4,
    );
    // The window's end wakes the board, which offers the next move.
    tmux.wait_screen("the move menu", |s| {
        s.contains("the takeover ended") && s.contains("Ship it")
    });
    check_recorded(&ws, &wt, &record);
}

#[test]
fn t_outside_tmux_suspends_the_board_and_comes_back_to_the_move_menu() {
    let (ws, wt, record) = task_with_session();
    // Unset inside the pane: the board cannot tell it runs in tmux.
    let tmux = board("takeover-fg", &ws, "-u TMUX");
    tmux.keys(&["T"]);
    tmux.wait_screen("the move menu", |s| {
        s.contains("the takeover ended") && s.contains("Ship it")
    });
    assert_eq!(tmux.windows().lines().count(), 1, "no window was opened");
    check_recorded(&ws, &wt, &record);
}
