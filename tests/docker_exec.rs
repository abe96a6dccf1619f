//! Steps in containers of a real Docker Engine: the step's file lands on the task branch,
//! task text arrives intact, abort removes the container, a killed engine finds its
//! container again, and a missing image or daemon is one plain sentence.
//!
//! These need a daemon (`.ci/run` starts one) and build their image themselves (see
//! `docker_support`). Where no daemon answers they say so on stderr and pass.

mod infra;
mod common;
mod docker_support;
use common::{Ws, git, spawn_engine, wait_for, wait_within};
use docker_support::{Cleanup, IMAGE, containers, image, pipeline, run_wait};
use std::time::{Duration, Instant};

/// A baton workspace in a fresh git repository, its task worktrees in `../worktrees`.
fn repo_ws() -> Ws {
    let dir = tempfile::tempdir().unwrap();
    common::git_init(&dir.path().join("repo"));
    let ws = Ws::at(dir, "repo");
    ws.baton(&["init"]).assert().success();
    ws.config("worktree_root = \"../worktrees\"\n");
    ws
}

#[test]
fn a_docker_steps_file_lands_on_the_task_branch_owned_by_the_host_user() {
    let Some(_) = image() else { return };
    let ws = repo_ws();
    // The repository's git folder is mounted too (read-only), so git in an image can read it.
    let repo_git = std::fs::canonicalize(ws.root().join(".git")).unwrap();
    ws.pipeline(
        "d.json",
        &pipeline(
            "echo \"user $(id -u):$(id -g) in $(pwd) home $HOME\"; echo from-the-container > made.txt; [ -f \"$REPO_GIT/HEAD\" ] && echo git-folder-mounted",
            &format!(r#""env": {{"REPO_GIT": "{}"}}"#, repo_git.display()),
        ),
    );
    let (code, shown) = run_wait(&ws, "make a file");
    assert_eq!(code, Some(2), "waits at review: {shown}");
    let log = ws.ok(&["logs", "1"]);
    assert!(log.contains("git-folder-mounted"), "{log}");
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    assert!(
        log.contains(&format!("user {uid}:{gid} in /workspace home ")),
        "{log}"
    );
    let home = ws.root().join(".baton/context/1/home");
    assert!(home.is_dir(), "HOME is kept under the context dir");
    let worktrees = ws.root().parent().unwrap().join("worktrees");
    let made = std::fs::read_dir(&worktrees)
        .unwrap()
        .map(|e| e.unwrap().path().join("made.txt"))
        .find(|p| p.exists())
        .expect("the file is in the task's worktree");
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        made.metadata().unwrap().uid(),
        uid.as_raw(),
        "owned by the host user"
    );
    assert!(
        containers(&ws, 1, false).is_empty(),
        "the container was removed"
    );
    assert!(
        !ws.root().join("made.txt").exists(),
        "the checkout is untouched"
    );

    ws.ok(&["approve", "1"]);
    ws.drain();
    // The file was committed on the task branch, which the merge then brought in.
    let added = git(
        ws.root(),
        &["log", "--format=%H %s", "main", "--", "made.txt"],
    );
    let (commit, subject) = added
        .trim()
        .split_once(' ')
        .expect("a commit added made.txt");
    assert!(subject.contains("task 1"), "{added}");
    let first_parents = git(ws.root(), &["log", "--first-parent", "--format=%H", "main"]);
    assert!(
        !first_parents.contains(commit),
        "the commit is the task branch's, not main's: {added}"
    );
    assert_eq!(
        git(ws.root(), &["show", "main:made.txt"]),
        "from-the-container\n",
        "and merged on approve"
    );
}

#[test]
fn a_step_cannot_plant_hooks_or_config_that_the_hosts_git_would_run() {
    let Some(_) = image() else { return };
    let ws = repo_ws();
    let repo_git = std::fs::canonicalize(ws.root().join(".git")).unwrap();
    let config_before = std::fs::read_to_string(repo_git.join("config")).unwrap();
    let script = [
        "G=$REPO_GIT",
        "printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > $G/hooks/post-checkout && echo hook-written",
        "printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> $G/config && echo config-written",
        "mv $G/config $G/config.old && echo config-moved",
        "echo 'gitdir: /tmp' > /workspace/.git && echo dotgit-written",
        "mv $G/worktrees $G/wt-moved && echo worktrees-moved",
        "echo ../../tmp > $G/commondir && echo commondir-written",
        "mkdir -p $G/refs/heads/evil && echo ref-written",
        "echo tried",
    ]
    .join("; ");
    ws.pipeline(
        "d.json",
        &pipeline(
            &script,
            &format!(r#""env": {{"REPO_GIT": "{}"}}"#, repo_git.display()),
        ),
    );
    let (code, shown) = run_wait(&ws, "try to escape");
    assert_eq!(code, Some(2), "waits at review: {shown}");
    let log = ws.ok(&["logs", "1"]);
    assert!(log.lines().any(|l| l == "tried"), "{log}");
    assert!(log.contains("Read-only file system"), "{log}");
    for written in [
        "hook-written",
        "config-written",
        "config-moved",
        "dotgit-written",
        "worktrees-moved",
        "commondir-written",
        "ref-written",
    ] {
        assert!(!log.lines().any(|l| l == written), "{written}: {log}");
    }
    assert!(!repo_git.join("hooks/post-checkout").exists());
    assert_eq!(
        std::fs::read_to_string(repo_git.join("config")).unwrap(),
        config_before
    );
    // The task's worktree is still a working checkout for the host's git.
    ws.ok(&["approve", "1"]);
    ws.drain();
    assert_eq!(ws.show(1)["status"], "done", "{}", ws.ok(&["logs", "1"]));
}

#[test]
fn task_text_arrives_intact_through_the_environment() {
    let Some(_) = image() else { return };
    let ws = Ws::new();
    ws.pipeline(
        "d.json",
        &pipeline(
            "printf '%s' \"$BATON_TASK_TITLE\" > title.txt; printf '%s' \"$BATON_TASK_PROMPT\" > prompt.txt; printf '%s' \"$EXTRA\" > extra.txt",
            r#""env": {"EXTRA": "a'b\"c $(x)"}"#,
        ),
    );
    let title = "it's \"quoted\" $(touch /workspace/pwned) `id` ; rm -rf / \\ end";
    let prompt = "line one\nline 'two' $HOME\n\n\"three\"\n";
    let id: i64 = ws
        .ok(&[
            "new",
            title,
            "--pipeline",
            "d",
            "--prompt",
            prompt,
            "--start",
        ])
        .trim()
        .parse()
        .unwrap();
    ws.drain();
    assert_eq!(ws.show(id)["status"], "review", "{}", ws.ok(&["logs", "1"]));
    assert_eq!(
        std::fs::read_to_string(ws.root().join("title.txt")).unwrap(),
        title
    );
    assert_eq!(
        std::fs::read_to_string(ws.root().join("prompt.txt")).unwrap(),
        prompt
    );
    assert_eq!(
        std::fs::read_to_string(ws.root().join("extra.txt")).unwrap(),
        "a'b\"c $(x)"
    );
    assert!(!ws.root().join("pwned").exists(), "nothing in the text ran");
}

#[test]
fn aborting_a_sleeping_container_removes_it_within_the_grace_period() {
    let Some(_) = image() else { return };
    let ws = Ws::new();
    ws.config("kill_grace = \"5s\"\n");
    ws.pipeline("d.json", &pipeline("echo sleeping; sleep 300", ""));
    let _cleanup = Cleanup(ws.root().to_path_buf());
    let engine = spawn_engine(&ws);
    let id = ws.new_task("d", "sleeper");
    ws.ok(&["start", &id.to_string()]);
    wait_for("the container to run", || {
        !containers(&ws, id, true).is_empty()
    });
    let aborted = Instant::now();
    ws.ok(&["abort", &id.to_string()]);
    wait_within(
        "the container to be removed",
        Duration::from_secs(5),
        || containers(&ws, id, false).is_empty(),
    );
    eprintln!(
        "removed {:.1} s after the abort",
        aborted.elapsed().as_secs_f64()
    );
    wait_for("the task to be cancelled", || {
        ws.show(id)["status"] == "cancelled"
    });
    assert_eq!(ws.show(id)["steps"][0]["state"], "cancelled");
    common::stop(engine);
}

/// A step that marks its start, waits for the test's `go` file, then marks its end: each
/// mark appended, so a second run would show.
const GATED: &str = "echo started >> started.txt; while [ ! -e go ]; do sleep 0.1; done; echo finished >> finished.txt; echo all-done";

#[test]
fn a_killed_engine_reattaches_to_its_running_container() {
    let Some(_) = image() else { return };
    let ws = Ws::new();
    ws.pipeline(
        "d.json",
        &pipeline(&format!("echo early-line; {GATED}"), ""),
    );
    let _cleanup = Cleanup(ws.root().to_path_buf());
    let mut engine = spawn_engine(&ws);
    let id = ws.new_task("d", "outlives its engine");
    ws.ok(&["start", &id.to_string()]);
    wait_for("the step's first line to be stored", || {
        ws.ok(&["logs", &id.to_string()])
            .lines()
            .any(|l| l == "early-line")
    });
    engine.kill().unwrap();
    engine.wait().unwrap();
    // The daemon may mark it running a moment after its process started.
    wait_for("the container to outlive its engine", || {
        containers(&ws, id, true).len() == 1
    });

    let engine = spawn_engine(&ws);
    wait_for("the engine to find the container", || {
        ws.ok(&["logs", &id.to_string()])
            .contains("reattaching to docker")
    });
    std::fs::write(ws.root().join("go"), "").unwrap();
    wait_for("the step to end", || ws.show(id)["status"] == "review");
    common::stop(engine);
    let shown = ws.show(id);
    assert_eq!(
        shown["steps"].as_array().unwrap().len(),
        1,
        "one step run: {shown}"
    );
    assert_eq!(shown["steps"][0]["state"], "succeeded");
    let read = |f: &str| std::fs::read_to_string(ws.root().join(f)).unwrap();
    assert_eq!(read("started.txt"), "started\n", "started once");
    assert_eq!(read("finished.txt"), "finished\n", "finished once");
    let log = ws.ok(&["logs", &id.to_string()]);
    assert!(log.contains("all-done"), "{log}");
    assert_eq!(
        log.lines().filter(|l| *l == "early-line").count(),
        1,
        "the output read again after the restart is not stored twice: {log}"
    );
    assert!(
        containers(&ws, id, false).is_empty(),
        "removed once recorded"
    );
}

#[test]
fn a_container_that_ended_while_no_engine_ran_is_recorded() {
    let Some(_) = image() else { return };
    let ws = Ws::new();
    ws.pipeline("d.json", &pipeline(&format!("{GATED}; exit 3"), ""));
    let _cleanup = Cleanup(ws.root().to_path_buf());
    let mut engine = spawn_engine(&ws);
    let id = ws.new_task("d", "ends alone");
    ws.ok(&["start", &id.to_string()]);
    wait_for("the step to start", || {
        ws.root().join("started.txt").exists()
    });
    engine.kill().unwrap();
    engine.wait().unwrap();
    std::fs::write(ws.root().join("go"), "").unwrap();
    wait_for("the container to exit", || {
        containers(&ws, id, true).is_empty() && containers(&ws, id, false).len() == 1
    });
    ws.drain();
    let shown = ws.show(id);
    assert_eq!(
        shown["steps"].as_array().unwrap().len(),
        1,
        "not run again: {shown}"
    );
    assert_eq!(shown["steps"][0]["state"], "failed");
    assert_eq!(
        shown["steps"][0]["exit_code"], 3,
        "its exit status is recorded"
    );
    assert_eq!(shown["status"], "failed");
    assert_eq!(
        std::fs::read_to_string(ws.root().join("started.txt")).unwrap(),
        "started\n"
    );
    assert!(containers(&ws, id, false).is_empty());
}

#[test]
fn a_missing_image_or_daemon_is_one_plain_sentence() {
    let Some(_) = image() else { return };
    let ws = Ws::new();
    ws.pipeline(
        "d.json",
        &pipeline("echo never", "").replace(IMAGE, "baton-no-such-image:404"),
    );
    let (_, shown) = run_wait(&ws, "no image");
    let error = shown["steps"][0]["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        error.contains("image `baton-no-such-image:404` is not on the Docker daemon")
            && error.contains("docker pull baton-no-such-image:404")
            && error.contains("\"pull\": \"missing\""),
        "{shown}"
    );
    assert_eq!(shown["status"], "failed");

    let ws = Ws::new();
    ws.pipeline("d.json", &pipeline("echo never", ""));
    let out = ws
        .baton(&["run", "d", "--title", "no daemon", "--wait", "--json"])
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let error = shown["steps"][0]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("cannot reach the Docker daemon at unix:///nonexistent/docker.sock")
            && error.contains("DOCKER_HOST"),
        "{shown}"
    );
}
