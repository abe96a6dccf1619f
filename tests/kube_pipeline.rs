//! A Kubernetes step through the whole product (against the loopback API stub): `baton run`
//! with `git_remote` from `[executor.kubernetes]` in config.toml; the pod's commit lands on
//! the task branch.

mod common;
mod support_kube;

use common::{git, task_branch};
use std::time::Duration;
use support_kube::Stub;

#[tokio::test]
async fn a_kubernetes_step_runs_through_baton_run_and_its_commit_lands_on_the_branch() {
    let stub = Stub::start(&["team"]).await;
    let dir = tempfile::tempdir().unwrap();
    common::git_init(&dir.path().join("repo"));
    let remote = dir.path().join("shared.git");
    git(
        dir.path(),
        &["init", "-q", "--bare", remote.to_str().unwrap()],
    );
    let ws = common::Ws::at(dir, "repo");
    ws.baton(&["init"]).assert().success();
    ws.config(&format!(
        "worktree_root = \"../worktrees\"\n[executor]\ndefault = \"local\"\n[executor.kubernetes]\nimage = \"team/ci:1\"\nnamespace = \"team\"\ngit_remote = \"{}\"\n",
        remote.display()
    ));
    ws.pipeline(
        "k.json",
        r#"{"id": "k", "statuses": [
            {"id": "todo", "kind": "queue"},
            {"id": "build", "step": {
                "script": "echo in-the-pod\nprintf '%s' \"$BATON_TASK_TITLE\" > pod.txt\ngit add pod.txt && git commit -qm \"pod $BATON_TASK_ID\"",
                "env": {"GIT_AUTHOR_NAME": "Pod", "GIT_AUTHOR_EMAIL": "p@example.com",
                        "GIT_COMMITTER_NAME": "Pod", "GIT_COMMITTER_EMAIL": "p@example.com"},
                "executor": {"kubernetes": {"image": "team/ci:1"}}}},
            {"id": "done", "kind": "done"}, {"id": "failed", "kind": "failed"}],
          "transitions": []}"#,
    );
    let kubeconfig = stub.kubeconfig(ws.dir.path(), "default");
    let mut cmd = ws.baton(&["run", "k", "--title", "pod's $(work)", "--wait", "--json"]);
    cmd.env("KUBECONFIG", &kubeconfig)
        .timeout(Duration::from_secs(120));
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{shown:#} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let branch = task_branch(ws.root());
    let branch = branch.as_str();
    assert_eq!(
        git(ws.root(), &["show", &format!("{branch}:pod.txt")]),
        "pod's $(work)"
    );
    let logs = ws.ok(&["logs", "1"]);
    assert!(logs.contains("in-the-pod"), "{logs}");
    // The Job went to the namespace from config.toml.
    assert!(
        stub.requests()
            .iter()
            .any(|r| r.method == "POST" && r.path == "/apis/batch/v1/namespaces/team/jobs")
    );
}
