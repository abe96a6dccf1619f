//! End to end in tmux: from a card to its code. `o` opens a tmux window in the task's
//! worktree; a `keys.toml` command runs there with `{{…}}` filled in as arguments and the
//! board comes back after it; `baton shell ID` opens the same window from the CLI. Waits
//! poll tmux for an observable condition, with a deadline.

mod common;
#[path = "support/tmux.rs"]
mod tmux;
use common::Ws;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tmux::Tmux;

const PIPELINE: &str = r#"{"id": "g", "name": "Git",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "code", "step": {"script": "echo change > change.txt"}},
    {"id": "review", "kind": "gate"},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"},
    {"id": "cancelled", "kind": "cancelled"}
  ]
}"#;

/// A git workspace whose task 1 waits at review with a worktree; returns it and the
/// worktree's path.
fn task_at_review() -> (Ws, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    common::git_init(&dir.path().join("repo"));
    let ws = Ws::at(dir, "repo");
    ws.baton(&["init"]).assert().success();
    ws.config("worktree_root = \"../worktrees\"\n");
    ws.pipeline("g.json", PIPELINE);
    let out = ws
        .baton(&["run", "g", "--title", "it's a \"task\"; x", "--wait"])
        .timeout(Duration::from_secs(60))
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let (_, wt) = branch_and_worktree(&ws);
    (ws, std::fs::canonicalize(wt).expect("worktree exists"))
}

/// Task 1's branch and worktree, from `baton show 1`.
fn branch_and_worktree(ws: &Ws) -> (String, String) {
    let shown = ws.ok(&["show", "1"]);
    let line = shown
        .lines()
        .find(|l| l.starts_with("branch "))
        .unwrap_or_else(|| panic!("no branch line in:\n{shown}"));
    let (branch, rest) = line["branch ".len()..].split_once(' ').expect("branch");
    let (_, wt) = rest.split_once("· worktree ").expect("worktree");
    (branch.to_string(), wt.to_string())
}

/// The board on `ws` in tmux, with a plain shell as `$SHELL` and test config folders.
fn board(name: &str, ws: &Ws) -> Tmux {
    let bin = env!("CARGO_BIN_EXE_baton");
    let cmd = format!(
        "cd '{}' && env XDG_CONFIG_HOME='{}' SHELL=/bin/sh {bin}",
        ws.root().display(),
        ws.dir.path().join("xdg").display()
    );
    let tmux = Tmux::start(name, &cmd);
    // The task's detail has loaded once its step shows in the step list.
    tmux.wait(
        "the board with the task's steps",
        || tmux.screen(),
        |s| s.contains("#1 ") && s.contains("code"),
    );
    tmux
}

fn canon(p: &str) -> PathBuf {
    std::fs::canonicalize(p.trim()).unwrap_or_else(|_| Path::new(p.trim()).to_path_buf())
}

#[test]
fn o_opens_a_tmux_window_in_the_tasks_worktree() {
    let (ws, wt) = task_at_review();
    let tmux = board("o", &ws);
    tmux.run(&["send-keys", "-t", "t:0", "o"]);
    tmux.wait(
        "a second window in the worktree",
        || tmux.display_or_empty(1, "#{pane_current_path}"),
        |path| !path.is_empty() && canon(path) == wt,
    );
    tmux.wait(
        "the status line",
        || tmux.screen(),
        |s| s.contains("opened a tmux window in"),
    );
}

#[test]
fn a_keys_toml_command_runs_in_the_worktree_and_the_board_comes_back() {
    let (ws, wt) = task_at_review();
    let xdg = ws.dir.path().join("xdg/baton");
    std::fs::create_dir_all(&xdg).expect("config folder");
    // `sh -c` reads only its own script; the values arrive as its arguments.
    std::fs::write(
        xdg.join("keys.toml"),
        "[[command]]\nkey = \"G\"\nrun = [\"sh\", \"-c\", \"pwd > ran; printf '%s\\\\n' \\\"$@\\\" >> ran\", \"sh\", \"{{id}}\", \"{{branch}}\"]\ndescription = \"record\"\n",
    )
    .expect("keys.toml");
    let tmux = board("cmd", &ws);
    tmux.run(&["send-keys", "-t", "t:0", "G"]);
    let ran = wt.join("ran");
    tmux.wait(
        "the command's file",
        || std::fs::read_to_string(&ran).unwrap_or_default(),
        |t| t.lines().count() == 3,
    );
    let text = std::fs::read_to_string(&ran).expect("ran");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(canon(lines[0]), wt);
    assert_eq!(lines[1], "1");
    let (branch, _) = branch_and_worktree(&ws);
    assert_eq!(lines[2], branch);
    // The board takes the terminal back and says how the command ended.
    tmux.wait(
        "the board again",
        || tmux.screen(),
        |s| s.contains("back from sh") && s.contains("#1 "),
    );
}

#[test]
fn baton_shell_opens_the_same_window_from_the_cli() {
    let (ws, wt) = task_at_review();
    let bin = env!("CARGO_BIN_EXE_baton");
    let tmux = Tmux::start(
        "cli",
        &format!(
            "cd '{}' && SHELL=/bin/sh {bin} shell 1; exec sleep 600",
            ws.root().display()
        ),
    );
    // The second window, once its shell runs in the worktree (a new pane reports the
    // folder of its process, which is there once the process started).
    tmux.wait(
        "a second window in the worktree",
        || tmux.windows(),
        |w| {
            w.lines()
                .nth(1)
                .and_then(|l| l.split_once(' '))
                .is_some_and(|(_, path)| canon(path) == wt)
        },
    );
    // A task without a worktree is one plain sentence.
    let out = ws.baton(&["shell", "99"]).output().expect("run");
    assert!(!out.status.success());
}
