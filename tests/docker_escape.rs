//! A step in a container cannot reach past its sandbox through what baton does on the host:
//! links it plants in the context folder are never written through, and the workspace's own
//! `.baton` folder is out of its reach when the workspace is not a git repository.
//!
//! These need a daemon (`.ci/run` starts one); where none answers they say so and pass.

mod common;
mod docker_support;
mod infra;
use common::Ws;
use docker_support::{Cleanup, IMAGE, image, run_wait};

/// A workspace without git whose `d` pipeline runs `first` then `second` in containers.
fn two_steps(first: &str, second: &str) -> Ws {
    let ws = Ws::new();
    let step = |script: &str| {
        serde_json::json!({
            "run": script,
            "executor": {"docker": {"image": IMAGE, "network": "none"}},
        })
    };
    let json = serde_json::json!({
        "id": "d",
        "statuses": [
            {"id": "todo", "kind": "queue"},
            {"id": "s1", "step": step(first)},
            {"id": "s2", "step": step(second)},
            {"id": "review", "kind": "gate"},
            {"id": "done", "kind": "done"},
            {"id": "failed", "kind": "failed"},
            {"id": "cancelled", "kind": "cancelled"}
        ]
    });
    ws.pipeline("d.json", &json.to_string());
    ws
}

#[test]
fn links_a_step_plants_in_the_context_folder_are_never_written_through() {
    let Some(_) = image() else { return };
    // Host files the engine's user may write, outside anything the container sees.
    let host = tempfile::tempdir().unwrap();
    let victims = ["own-log", "next-log", "prompt"].map(|n| {
        let p = host.path().join(n);
        std::fs::write(&p, "original\n").unwrap();
        p
    });
    // The container sees the host files' paths only as names: the links point at them on
    // the host. The step's own log, the next step's log and the prompt file are planted.
    let plant = format!(
        "ln -s {} \"$BATON_CONTEXT_DIR/id_s1_001.log\"; ln -s {} \"$BATON_CONTEXT_DIR/id_s2_002.log\"; rm -f \"$BATON_CONTEXT_DIR/prompt.md\"; ln -s {} \"$BATON_CONTEXT_DIR/prompt.md\"; echo planted-X",
        victims[0].display(),
        victims[1].display(),
        victims[2].display()
    );
    let ws = two_steps(&plant, "echo second-Y; cat \"$BATON_TASK_PROMPT_FILE\"");
    let _cleanup = Cleanup(ws.root().to_path_buf());
    let (code, shown) = run_wait(&ws, "plant links");
    assert_eq!(code, Some(2), "waits at review: {shown}");
    let logs = ws.ok(&["logs", "1", "--step", "1"]);
    assert!(logs.contains("planted-X"), "{logs}");
    let logs = ws.ok(&["logs", "1", "--step", "2"]);
    assert!(logs.contains("second-Y"), "{logs}");
    for v in &victims {
        assert_eq!(
            std::fs::read_to_string(v).unwrap(),
            "original\n",
            "{} was written through a planted link",
            v.display()
        );
    }
    // baton's own files are there, fresh, as plain files.
    let ctx = ws.root().join(".baton/context/1");
    for name in ["id_s1_001.log", "id_s2_002.log", "prompt.md"] {
        let meta = std::fs::symlink_metadata(ctx.join(name)).unwrap();
        assert!(meta.file_type().is_file(), "{name} is a plain file");
    }
    let own = std::fs::read_to_string(ctx.join("id_s1_001.log")).unwrap();
    assert!(own.contains("planted-X"), "{own}");
}

#[test]
fn a_step_in_a_workspace_without_git_cannot_touch_its_baton_folder() {
    let Some(_) = image() else { return };
    let pipeline = r#"{"id": "evil", "statuses": [{"id": "a", "kind": "queue"}, {"id": "d", "kind": "done"}]}"#;
    let script = format!(
        "mkdir -p /workspace/.baton/pipelines && printf '%s' '{pipeline}' > /workspace/.baton/pipelines/evil.json && echo wrote-pipeline; echo x >> /workspace/.baton/config.toml && echo wrote-config; echo ok > /workspace/made.txt; echo ctx > \"$BATON_CONTEXT_DIR/mine.txt\"; echo done"
    );
    let ws = two_steps(&script, "true");
    let _cleanup = Cleanup(ws.root().to_path_buf());
    let config = std::fs::read_to_string(ws.root().join(".baton/config.toml")).unwrap();
    let (code, shown) = run_wait(&ws, "rewrite .baton");
    assert_eq!(code, Some(2), "waits at review: {shown}");
    let logs = ws.ok(&["logs", "1", "--step", "1"]);
    // (The first line quotes the command: only whole lines are the step's output.)
    let printed = |what: &str| logs.lines().any(|l| l == what);
    assert!(printed("done"), "{logs}");
    assert!(!printed("wrote-pipeline"), "{logs}");
    assert!(!printed("wrote-config"), "{logs}");
    assert!(!ws.root().join(".baton/pipelines/evil.json").exists());
    assert_eq!(
        std::fs::read_to_string(ws.root().join(".baton/config.toml")).unwrap(),
        config
    );
    // The rest of the workspace and the context folder stay writable.
    assert_eq!(
        std::fs::read_to_string(ws.root().join("made.txt")).unwrap(),
        "ok\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.root().join(".baton/context/1/mine.txt")).unwrap(),
        "ctx\n"
    );
}

#[test]
fn a_link_planted_at_the_next_stdin_file_is_not_written_through() {
    let Some(_) = image() else { return };
    let host = tempfile::tempdir().unwrap();
    let victim = host.path().join("bashrc");
    std::fs::write(&victim, "original\n").unwrap();
    let ws = Ws::new();
    let _cleanup = Cleanup(ws.root().to_path_buf());
    // An agent that reads its prompt on standard input, in the container.
    std::fs::write(
        ws.root().join(".baton/agents/reader.json"),
        format!(
            r#"{{"id": "reader", "backend": "command", "format": "text", "prompt_via": "stdin",
  "argv": ["sh", "-c", "cat > /workspace/got-prompt.txt"], "executor": {{"docker": {{"image": "{IMAGE}", "network": "none"}}}}}}"#
        ),
    )
    .unwrap();
    // The first step plants links at the names the next steps' input files may take.
    let plant = format!(
        "for i in $(seq 1 20); do ln -s {} \"$BATON_CONTEXT_DIR/stdin-$i.txt\"; done; echo planted-X",
        victim.display()
    );
    let json = serde_json::json!({
        "id": "d",
        "statuses": [
            {"id": "todo", "kind": "queue"},
            {"id": "s1", "step": {"run": plant,
                "executor": {"docker": {"image": IMAGE, "network": "none"}}}},
            {"id": "s2", "step": {"agent": "reader"}},
            {"id": "review", "kind": "gate"},
            {"id": "done", "kind": "done"},
            {"id": "failed", "kind": "failed"},
            {"id": "cancelled", "kind": "cancelled"}
        ]
    });
    ws.pipeline("d.json", &json.to_string());
    let (code, shown) = run_wait(&ws, "prompt-Q on stdin");
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "original\n",
        "the prompt was written through a planted link"
    );
    assert_eq!(code, Some(2), "waits at review: {shown}");
    let logs = ws.ok(&["logs", "1", "--step", "1"]);
    assert!(logs.contains("planted-X"), "{logs}");
    // What the agent read on stdin, kept in its worktree (not its log, so the check does
    // not hang on how fast a short container's output is followed).
    let got = std::fs::read_to_string(ws.root().join("got-prompt.txt")).unwrap_or_default();
    assert!(
        got.contains("prompt-Q on stdin"),
        "the agent read its prompt: {got:?}"
    );
}

#[test]
fn a_git_file_a_step_writes_mounts_no_host_folder_for_the_next() {
    let Some(_) = image() else { return };
    let host = tempfile::tempdir().unwrap();
    std::fs::write(host.path().join("id_rsa"), "host-secret-Z\n").unwrap();
    // The workspace has no git: the first step writes a `.git` file naming a git folder it
    // makes in the context folder (which it sees at its host path), whose `commondir` names
    // the host folder.
    let plant = format!(
        "g=\"$BATON_CONTEXT_DIR/fakegit\"; mkdir -p \"$g\" && echo {} > \"$g/commondir\" && echo \"gitdir: $g\" > /workspace/.git && echo planted-X",
        host.path().display()
    );
    let read = format!("cat {}/id_rsa; echo second-Y", host.path().display());
    let ws = two_steps(&plant, &read);
    let _cleanup = Cleanup(ws.root().to_path_buf());
    let (code, shown) = run_wait(&ws, "plant .git");
    assert_eq!(code, Some(2), "waits at review: {shown}");
    let logs = ws.ok(&["logs", "1", "--step", "1"]);
    assert!(logs.contains("planted-X"), "{logs}");
    let logs = ws.ok(&["logs", "1", "--step", "2"]);
    let printed = |what: &str| logs.lines().any(|l| l == what);
    assert!(printed("second-Y"), "{logs}");
    assert!(
        !printed("host-secret-Z"),
        "the host folder was mounted into the next step: {logs}"
    );
}
