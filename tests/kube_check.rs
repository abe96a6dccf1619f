//! `baton agents check` and the cluster check against a loopback stub of the Kubernetes API:
//! each says in one line what answered, or what is wrong.

mod common;
mod support_kube;

use baton::exec::executor::kubernetes::check_cluster;
use support_kube::{Stub, TOKEN};

#[tokio::test]
async fn the_cluster_check_says_what_is_wrong() {
    let stub = Stub::start(&["team"]).await;
    let tmp = tempfile::tempdir().unwrap();
    let ok = check_cluster(Some(stub.client(tmp.path(), "team").await), None).await;
    assert!(
        ok.as_ref()
            .is_ok_and(|t| t.contains("namespace `team` is usable")),
        "{ok:?}"
    );
    let missing = check_cluster(Some(stub.client(tmp.path(), "team").await), Some("ghost")).await;
    assert!(
        missing
            .as_ref()
            .is_err_and(|e| e.contains("namespace `ghost` does not exist")),
        "{missing:?}"
    );
    // Nothing listens here once the listener is dropped.
    let dead = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let kc = std::fs::read_to_string(stub.kubeconfig(tmp.path(), "team"))
        .unwrap()
        .replace(&format!(":{}", stub.port), &format!(":{dead}"));
    std::fs::write(tmp.path().join("dead"), kc).unwrap();
    let kc = kube::config::Kubeconfig::read_from(tmp.path().join("dead")).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let down = check_cluster(Some(kube::Client::try_from(cfg).unwrap()), None).await;
    assert!(
        down.as_ref().is_err_and(|e| e.contains("does not answer")),
        "{down:?}"
    );
    assert!(!TOKEN.is_empty());
}

#[tokio::test]
async fn agents_check_checks_the_cluster_a_pipeline_uses() {
    let stub = Stub::start(&["team"]).await;
    let ws = common::Ws::new();
    ws.pipeline(
        "k.json",
        r#"{"id": "k", "statuses": [
            {"id": "todo", "kind": "queue"},
            {"id": "build", "step": {"run": "true", "executor": {"kubernetes": {"image": "img", "namespace": "team"}}}},
            {"id": "other", "step": {"run": "true", "executor": {"kubernetes": {"image": "img", "namespace": "ghost"}}}},
            {"id": "done", "kind": "done"}, {"id": "failed", "kind": "failed"}],
          "transitions": []}"#,
    );
    let kubeconfig = stub.kubeconfig(ws.dir.path(), "default");
    let mut cmd = ws.baton(&["agents", "check"]);
    cmd.env("KUBECONFIG", &kubeconfig)
        .env("HOME", ws.dir.path());
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(
            "ok   kubernetes  cluster answers (Kubernetes 1.33); namespace `team` is usable"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("FAIL kubernetes  namespace `ghost` does not exist"),
        "{stdout}"
    );
    assert!(!out.status.success());
}
