//! `baton try`: one agent run once in a scratch worktree, its log, handoff and diff shown,
//! the board untouched; `--keep` saves the result as a branch.

mod common;
use common::{Ws, alive, git, git_init, wait_for};

/// A git workspace with a replay agent and a command agent that writes a file.
fn workspace() -> Ws {
    let dir = tempfile::tempdir().unwrap();
    let ws = Ws::at(dir, "repo");
    git_init(ws.root());
    ws.ok(&["init"]);
    let agents = ws.root().join(".baton/agents");
    std::fs::write(
        agents.join("answer.txt"),
        "Looked at it.\n## What Was Done\nRead README.\n## Next Agent Context\nAdd a CONTRIBUTING file.\n",
    )
    .unwrap();
    std::fs::write(
        agents.join("replayer.json"),
        r#"{"id": "replayer", "backend": "replay", "format": "text", "recording": "answer.txt"}"#,
    )
    .unwrap();
    std::fs::write(
        agents.join("writer.json"),
        r#"{"id": "writer", "backend": "command",
            "argv": ["sh", "-c", "printf 'how to help\n' > CONTRIBUTING; echo '## What Was Done'; echo \"wrote CONTRIBUTING for: $BATON_TASK_PROMPT\""]}"#,
    )
    .unwrap();
    ws
}

#[test]
fn try_replays_an_agent_and_shows_its_handoff_without_touching_the_board() {
    let ws = workspace();
    let out = ws.ok(&["try", "replayer", "--prompt", "Document the project"]);
    assert!(
        out.contains("  › Document the project"),
        "the prompt it got: {out}"
    );
    assert!(out.contains("Looked at it."), "the streamed log: {out}");
    let handoff = out.split("── handoff").nth(1).unwrap();
    assert!(
        handoff.contains("**Your task**: Add a CONTRIBUTING file."),
        "{out}"
    );
    assert!(out.contains("(no changes)"), "{out}");
    assert!(out.contains("succeeded · would fire `success`"), "{out}");
    assert_eq!(
        ws.ok(&["list", "--json"]).trim(),
        "[]",
        "nothing on the board"
    );
    let worktrees = git(ws.root(), &["worktree", "list"]);
    assert_eq!(
        worktrees.lines().count(),
        1,
        "the scratch worktree is gone: {worktrees}"
    );
}

#[test]
fn keep_saves_the_agents_changes_as_a_branch() {
    let ws = workspace();
    let out = ws.ok(&[
        "try", "writer", "--prompt", "add docs", "--keep", "try/docs",
    ]);
    assert!(out.contains("wrote CONTRIBUTING for: add docs"), "{out}");
    let diff = out.split("── diff ──").nth(1).unwrap();
    assert!(diff.contains("+how to help"), "{out}");
    assert!(out.contains("kept the result as branch try/docs"), "{out}");
    let file = git(ws.root(), &["show", "try/docs:CONTRIBUTING"]);
    assert_eq!(file, "how to help\n");
    assert!(
        !ws.root().join("CONTRIBUTING").exists(),
        "the checkout is untouched"
    );
    assert_eq!(ws.ok(&["list", "--json"]).trim(), "[]");

    // Without --keep the change goes away with the scratch worktree.
    let out = ws.ok(&["try", "writer", "--prompt", "again"]);
    assert!(out.contains("nothing was kept"), "{out}");
    let branches = git(ws.root(), &["branch", "--list"]);
    assert_eq!(branches.lines().count(), 2, "{branches}");

    // An existing branch name is refused in one sentence.
    let out = ws
        .baton(&["try", "writer", "--prompt", "x", "--keep", "try/docs"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("try/docs") && err.contains("already exists"),
        "{err}"
    );
}

#[test]
fn an_unknown_agent_or_base_is_one_sentence() {
    let ws = workspace();
    let out = ws
        .baton(&["try", "nobody", "--prompt", "x"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown agent profile `nobody`"), "{err}");
    let out = ws
        .baton(&["try", "replayer", "--prompt", "x", "--branch", "nope"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("base branch `nope` does not exist"), "{err}");
}

/// Ctrl-C on `baton try` stops its agent and everything the agent started, even a process
/// in a session of its own, which no group signal reaches: the run carries a key of its own.
#[test]
fn an_interrupted_try_leaves_no_process_behind() {
    let ws = workspace();
    let root = ws.root().to_path_buf();
    let script = format!(
        "setsid sh -c 'echo $$ > {0}/detached.pid; exec tail -f /dev/null' >/dev/null 2>&1 &\n\
         echo \"$BATON_EXECUTION_KEY\" > {0}/key\n\
         sleep 300",
        root.display()
    );
    std::fs::write(
        root.join(".baton/agents/lingerer.json"),
        serde_json::json!({"id": "lingerer", "backend": "command", "argv": ["sh", "-c", script]})
            .to_string(),
    )
    .unwrap();
    let mut baton = std::process::Command::new(assert_cmd::cargo::cargo_bin("baton"))
        .current_dir(&root)
        .env_remove("BATON_DIR")
        .env("XDG_CONFIG_HOME", ws.dir.path().join("xdg"))
        .args(["try", "lingerer", "--prompt", "linger"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid_in = |name: &str| -> Option<i32> {
        std::fs::read_to_string(root.join(name))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    wait_for("the agent and its detached child to start", || {
        pid_in("detached.pid").is_some_and(alive) && root.join("key").exists()
    });
    let detached = pid_in("detached.pid").unwrap();
    let key = std::fs::read_to_string(root.join("key")).unwrap();
    assert!(
        key.trim().starts_with("try:"),
        "the run has a key of its own: {key:?}"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(baton.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    baton.wait().unwrap();
    assert!(
        !alive(detached),
        "the detached child ended with the interrupted try"
    );
}
