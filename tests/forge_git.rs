//! The forge's git side against a real bare repository as the remote, over file:// and
//! over ssh to a real local sshd:
//! pushing a task branch, pushing a rework with --force-with-lease, refusing to overwrite
//! someone else's push, deleting the branch after a merge; and `baton forge check` against
//! a stub of GitHub's REST API.

mod common;
mod infra;
mod stubs;
mod support_sshd;

use baton::forge::push::{delete_branch, push_branch};
use common::{Ws, git, git_init};
use serde_json::json;
use std::path::Path;

/// A checkout with a bare `origin` over file://, and a task branch with one commit.
fn repo() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let bare = dir.path().join("remote.git");
    std::fs::create_dir_all(&bare).unwrap();
    git(&bare, &["init", "-q", "--bare", "-b", "main"]);
    let work = dir.path().join("work");
    git_init(&work);
    let url = format!("file://{}", bare.display());
    git(&work, &["remote", "add", "origin", &url]);
    git(&work, &["push", "-q", "origin", "main"]);
    git(&work, &["checkout", "-qb", "baton/1-task"]);
    std::fs::write(work.join("a.txt"), "one\n").unwrap();
    git(&work, &["add", "."]);
    git(&work, &["commit", "-qm", "first"]);
    (dir, work, bare)
}

fn remote_head(bare: &Path, branch: &str) -> Option<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(bare)
        .args([
            "rev-parse",
            "--verify",
            "-q",
            &format!("refs/heads/{branch}"),
        ])
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[test]
fn a_task_branch_is_pushed_reworked_with_lease_and_deleted_after_merge() {
    let (_dir, work, bare) = repo();
    push_branch(&work, "origin", "baton/1-task").expect("first push");
    let head = git(&work, &["rev-parse", "HEAD"]).trim().to_string();
    assert_eq!(
        remote_head(&bare, "baton/1-task").as_deref(),
        Some(head.as_str())
    );

    // A rework rewrites the commit: a plain push would be refused, the lease lets it through.
    std::fs::write(work.join("a.txt"), "two\n").unwrap();
    git(&work, &["commit", "-qam", "first, reworked", "--amend"]);
    let reworked = git(&work, &["rev-parse", "HEAD"]).trim().to_string();
    assert_ne!(head, reworked);
    push_branch(&work, "origin", "baton/1-task").expect("rework push");
    assert_eq!(
        remote_head(&bare, "baton/1-task").as_deref(),
        Some(reworked.as_str())
    );

    delete_branch(&work, "origin", "baton/1-task").expect("delete");
    assert_eq!(remote_head(&bare, "baton/1-task"), None);
    // Deleting it again is not an error.
    delete_branch(&work, "origin", "baton/1-task").expect("already gone");
}

#[test]
fn over_ssh_a_task_branch_is_pushed_reworked_with_lease_and_deleted() {
    let Some(sshd) = support_sshd::Sshd::start() else {
        return;
    };
    let (_dir, work, bare) = repo();
    let ssh = format!("ssh -F {}", sshd.client_config.display());
    git(&work, &["config", "core.sshCommand", &ssh]);
    let url = format!("{}:{}", support_sshd::HOST, bare.display());
    git(&work, &["remote", "set-url", "origin", &url]);
    push_branch(&work, "origin", "baton/1-task").expect("first push over ssh");
    let head = git(&work, &["rev-parse", "HEAD"]).trim().to_string();
    assert_eq!(
        remote_head(&bare, "baton/1-task").as_deref(),
        Some(head.as_str())
    );
    std::fs::write(work.join("a.txt"), "two\n").unwrap();
    git(&work, &["commit", "-qam", "first, reworked", "--amend"]);
    let reworked = git(&work, &["rev-parse", "HEAD"]).trim().to_string();
    push_branch(&work, "origin", "baton/1-task").expect("rework push over ssh");
    assert_eq!(
        remote_head(&bare, "baton/1-task").as_deref(),
        Some(reworked.as_str())
    );
    delete_branch(&work, "origin", "baton/1-task").expect("delete over ssh");
    assert_eq!(remote_head(&bare, "baton/1-task"), None);
}

#[test]
fn a_push_someone_else_made_is_not_overwritten() {
    let (dir, work, bare) = repo();
    push_branch(&work, "origin", "baton/1-task").expect("first push");
    // A reviewer pushes a fix onto the branch from another clone.
    let other = dir.path().join("other");
    git(
        dir.path(),
        &[
            "clone",
            "-q",
            &format!("file://{}", bare.display()),
            "other",
        ],
    );
    git(&other, &["config", "user.name", "R"]);
    git(&other, &["config", "user.email", "r@example.com"]);
    git(&other, &["checkout", "-q", "baton/1-task"]);
    std::fs::write(other.join("b.txt"), "theirs\n").unwrap();
    git(&other, &["add", "."]);
    git(&other, &["commit", "-qm", "reviewer fix"]);
    git(&other, &["push", "-q", "origin", "baton/1-task"]);
    let theirs = git(&other, &["rev-parse", "HEAD"]).trim().to_string();

    git(&work, &["commit", "-q", "--amend", "-m", "rework"]);
    let err = push_branch(&work, "origin", "baton/1-task").expect_err("lease holds");
    assert!(
        err.contains("pushing baton/1-task to origin failed") && err.contains("fetch"),
        "{err}"
    );
    assert_eq!(
        remote_head(&bare, "baton/1-task").as_deref(),
        Some(theirs.as_str())
    );
}

#[test]
fn forge_check_says_what_it_found_and_one_sentence_per_problem() {
    let (server, stub) = stubs::forge::start();
    stub.answer("GET", "/user", 200, json!({"login": "octo"}));
    stub.answer("GET", "/repos/acme/app/pulls", 200, json!([]));
    let ws = Ws::new();
    git_init(ws.root());
    git(
        ws.root(),
        &["remote", "add", "origin", "https://github.com/acme/app.git"],
    );
    ws.config(&format!(
        "[forge]\napi_url = \"{}\"\ntoken_env = \"FORGE_TEST_TOKEN\"\n",
        server.url
    ));
    let out = ws
        .baton(&["forge", "check"])
        .env("FORGE_TEST_TOKEN", "ghp_checktoken123456")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{text}");
    assert!(text.contains("GitHub repository acme/app"), "{text}");
    assert!(text.contains("reaches the API as `octo`"), "{text}");
    assert!(!text.contains("ghp_checktoken123456"), "{text}");
    assert_eq!(
        stub.calls("GET", "/user")[0].headers["authorization"],
        "Bearer ghp_checktoken123456"
    );

    // No token: one sentence naming the variable, exit 1.
    let out = ws
        .baton(&["forge", "check"])
        .env_remove("FORGE_TEST_TOKEN")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(1), "{text}");
    let fails: Vec<&str> = text.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert_eq!(fails.len(), 1, "{text}");
    assert!(fails[0].contains("$FORGE_TEST_TOKEN is not set"), "{text}");

    // A host baton cannot place: it asks for the kind.
    git(
        ws.root(),
        &[
            "remote",
            "set-url",
            "origin",
            "https://git.example.com/acme/app.git",
        ],
    );
    ws.config("[forge]\ntoken_env = \"FORGE_TEST_TOKEN\"\n");
    let out = ws.baton(&["forge", "check"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(text.contains("set kind = \"gitea\""), "{text}");

    // A bad setting is refused when the config loads, with its sentence.
    ws.config("[forge]\nkind = \"bitbucket\"\n");
    let out = ws.baton(&["forge", "check"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        err.contains("kind = \"bitbucket\" is not a forge baton knows"),
        "{err}"
    );
}

#[test]
fn forge_triggers_and_hooks_are_validated_like_the_others() {
    let ws = Ws::new();
    let good = r#"{"id": "p", "name": "P", "statuses": [
        {"id": "review", "kind": "gate"}, {"id": "in_pr", "kind": "gate"},
        {"id": "done", "kind": "done"}, {"id": "failed", "kind": "failed"}],
      "transitions": [
        {"from": "review", "to": "in_pr", "on": "approve", "hooks": [{"push": {}}, {"pr": {"draft": true, "labels": ["x"]}}]},
        {"from": "in_pr", "to": "done", "on": "pr_merged"},
        {"from": "in_pr", "to": "failed", "on": "pr_closed"},
        {"from": "in_pr", "to": "review", "on": "ci_failed"},
        {"from": "in_pr", "to": "review", "on": "changes_requested"}]}"#;
    let path = ws.pipeline("p.json", good);
    ws.baton(&["pipelines", "validate", path.to_str().unwrap()])
        .assert()
        .success();
    for (from, to, want) in [
        (
            "\"pr_merged\"",
            "\"pr_merge\"",
            "unknown trigger `pr_merge`",
        ),
        (
            "{\"draft\": true, \"labels\": [\"x\"]}",
            "{\"draft\": \"yes\"}",
            "hook `pr`: `draft` takes true or false",
        ),
    ] {
        let bad = ws.pipeline("p.json", &good.replace(from, to));
        let out = ws
            .baton(&["pipelines", "validate", bad.to_str().unwrap()])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{text}");
        assert!(text.contains(want), "{text}");
        assert!(
            text.contains("pr_merged, pr_closed, ci_failed") || !want.contains("trigger"),
            "{text}"
        );
    }
}
