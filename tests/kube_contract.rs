//! The Kubernetes executor against a loopback stub of the API (tested against the API
//! contract only, not yet on a real cluster): the Job it creates has the documented shape,
//! the pod's phases drive the step, its log arrives, its commit comes back through the git
//! remote, abort deletes the Job with propagation, recovery finds the Job by label.

mod common;
mod support_kube;

use baton::exec::executor::kubernetes::Kubernetes;
use baton::exec::executor::{Executor, Found, Labels, Launch, Program};
use baton::exec::{Finish, StepEnv};
use baton::pipeline::executor_spec::KubeSpec;
use baton::store::Stream;
use common::git;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use support_kube::Stub;
use tokio::sync::mpsc;

struct Setup {
    tmp: tempfile::TempDir,
    wt: PathBuf,
    remote: PathBuf,
}

/// A repository with a task worktree on `baton/1-kube`, and a bare git remote both sides
/// reach (a path: the stub's pods run on this machine).
fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    common::git_init(&repo);
    let wt = tmp.path().join("wt");
    git(
        &repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "baton/1-kube",
            wt.to_str().unwrap(),
        ],
    );
    let remote = tmp.path().join("remote.git");
    git(
        tmp.path(),
        &["init", "-q", "--bare", remote.to_str().unwrap()],
    );
    Setup { tmp, wt, remote }
}

fn spec(remote: &Path, image: &str) -> KubeSpec {
    KubeSpec {
        image: image.into(),
        namespace: Some("team".into()),
        resources: BTreeMap::from([
            ("cpu".into(), "500m".into()),
            ("memory".into(), "1Gi".into()),
        ]),
        node_selector: BTreeMap::from([("pool".into(), "ci".into())]),
        git_remote: Some(remote.display().to_string()),
    }
}

fn launch(s: &Setup, script: &str, title: &str, step_run_id: i64) -> Launch {
    Launch {
        program: Program::Shell(script.into()),
        env: StepEnv {
            vars: vec![
                ("BATON_TASK_TITLE".into(), title.into()),
                ("GIT_AUTHOR_NAME".into(), "Pod".into()),
                ("GIT_AUTHOR_EMAIL".into(), "pod@example.com".into()),
                ("GIT_COMMITTER_NAME".into(), "Pod".into()),
                ("GIT_COMMITTER_EMAIL".into(), "pod@example.com".into()),
            ],
            workdir: s.wt.clone(),
            timeout: Duration::from_secs(120),
            kill_grace: Duration::from_secs(2),
        },
        worktree: s.wt.clone(),
        context_dir: s.tmp.path().join("ctx"),
        labels: Labels {
            task_id: 1,
            step_run_id,
            execution_key: format!("1:build:{step_run_id}"),
            workspace: s.tmp.path().display().to_string(),
        },
        stdin: None,
    }
}

fn log_channel() -> (
    mpsc::Sender<(Stream, String)>,
    tokio::task::JoinHandle<Vec<String>>,
) {
    let (tx, mut rx) = mpsc::channel::<(Stream, String)>(1024);
    let all = tokio::spawn(async move {
        let mut v = Vec::new();
        while let Some((_, l)) = rx.recv().await {
            v.push(l);
        }
        v
    });
    (tx, all)
}

#[tokio::test]
async fn a_step_runs_as_a_job_and_its_commit_comes_back() {
    let stub = Stub::start(&["team"]).await;
    let s = setup();
    let exec = Kubernetes::with_client(
        &spec(&s.remote, "rust:1.91"),
        stub.client(s.tmp.path(), "default").await,
    );
    let tag = launch(&s, "", "", 42).labels.workspace_tag();
    let title = "it's \"quoted\" $(touch pwned) `id`";
    let script = "printf '%s' \"$BATON_TASK_TITLE\" > title.txt\necho pod-says-hello\ncp \"$BATON_TRIGGER_PAYLOAD_FILE\" payload.json\ngit add title.txt payload.json && git commit -qm 'from the pod'";
    let (tx, lines) = log_channel();
    stub.hold_pods();
    let payload = s.tmp.path().join("payload.json");
    std::fs::write(&payload, "{\"ref\": \"main\"}").unwrap();
    let mut l = launch(&s, script, title, 42);
    l.env.vars.push((
        "BATON_TRIGGER_PAYLOAD_FILE".into(),
        payload.display().to_string(),
    ));
    l.env
        .vars
        .push(("ANTHROPIC_API_KEY".into(), "sk-ant-kube-secret".into()));
    let mut step = exec.start(&l, tx).await.expect("the Job is created");
    // The pod stays Pending until baton watches it; then the stub moves it on.
    let is_watch = |r: &support_kube::Seen| {
        r.path == "/api/v1/namespaces/team/pods"
            && r.query.get("watch").map(String::as_str) == Some("true")
    };
    let release = async {
        stub.until("a watch on the pod", |reqs| reqs.iter().any(is_watch))
            .await;
        stub.release();
    };
    let (finish, ()) = tokio::join!(step.wait(), release);
    drop(step);
    let lines = lines.await.unwrap();
    assert_eq!(finish, Finish::Exited(0), "{lines:?}");
    assert!(
        lines.iter().any(|l| l == "pod-says-hello"),
        "the pod's log arrives: {lines:?}"
    );
    assert_eq!(
        git(&s.wt, &["log", "-1", "--format=%s %an"]).trim(),
        "from the pod Pod"
    );
    assert_eq!(
        std::fs::read_to_string(s.wt.join("title.txt")).unwrap(),
        title
    );
    assert_eq!(
        std::fs::read_to_string(s.wt.join("payload.json")).unwrap(),
        "{\"ref\": \"main\"}",
        "the trigger payload reaches the pod"
    );
    // The branch travels under baton's own per-workspace name on the shared remote.
    assert_eq!(
        git(
            &s.remote,
            &[
                "log",
                "-1",
                "--format=%s",
                &format!("baton-kube/{tag}/baton/1-kube")
            ]
        )
        .trim(),
        "from the pod"
    );
    assert!(
        git(&s.remote, &["branch", "--list", "baton/1-kube"])
            .trim()
            .is_empty(),
        "the task branch name itself is left alone on the remote"
    );

    // The requests match the documented shapes.
    let reqs = stub.requests();
    let create = reqs
        .iter()
        .find(|r| r.method == "POST" && r.path == "/apis/batch/v1/namespaces/team/jobs")
        .expect("a Job created in the step's namespace");
    let job = &create.body;
    assert_eq!(job["apiVersion"], "batch/v1");
    assert_eq!(job["kind"], "Job");
    assert_eq!(job["metadata"]["name"], format!("baton-{tag}-t1-s42"));
    for labels in [
        &job["metadata"]["labels"],
        &job["spec"]["template"]["metadata"]["labels"],
    ] {
        assert_eq!(labels["baton.dev/workspace"], tag.as_str());
        assert_eq!(labels["baton.dev/task"], "1");
        assert_eq!(labels["baton.dev/step-run"], "42");
        assert_eq!(labels["baton.dev/execution-key"], "1.build.42");
    }
    assert_eq!(job["spec"]["backoffLimit"], 0);
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never");
    assert_eq!(pod["nodeSelector"]["pool"], "ci");
    let c = &pod["containers"][0];
    assert_eq!(c["image"], "rust:1.91");
    assert_eq!(c["resources"]["limits"]["cpu"], "500m");
    assert_eq!(c["resources"]["requests"]["memory"], "1Gi");
    let env = c["env"].as_array().unwrap();
    let name = format!("baton-{tag}-t1-s42");
    for var in ["BATON_TASK_TITLE", "ANTHROPIC_API_KEY", "BATON_GIT_REMOTE"] {
        let e = env.iter().find(|e| e["name"] == var).unwrap();
        assert_eq!(e["valueFrom"]["secretKeyRef"]["name"], name.as_str());
        assert_eq!(e["valueFrom"]["secretKeyRef"]["key"], var);
    }
    assert!(
        !job.to_string().contains("sk-ant-kube-secret") && !job.to_string().contains("pwned"),
        "values stay out of the Job: {job}"
    );
    let secret = reqs
        .iter()
        .find(|r| r.method == "POST" && r.path == "/api/v1/namespaces/team/secrets")
        .expect("a Secret created for the step");
    assert_eq!(secret.body["metadata"]["name"], name.as_str());
    assert_eq!(secret.body["stringData"]["BATON_TASK_TITLE"], title);
    assert_eq!(
        secret.body["stringData"]["ANTHROPIC_API_KEY"],
        "sk-ant-kube-secret"
    );
    let owner = reqs
        .iter()
        .find(|r| {
            r.method == "PATCH" && r.path == format!("/api/v1/namespaces/team/secrets/{name}")
        })
        .expect("the Secret is handed to its Job");
    assert_eq!(owner.body["metadata"]["ownerReferences"][0]["kind"], "Job");
    assert_eq!(
        owner.body["metadata"]["ownerReferences"][0]["uid"],
        format!("uid-{name}")
    );
    assert!(stub.secrets().is_empty(), "the Secret goes with the Job");
    assert!(
        !c["command"].to_string().contains("pwned"),
        "task text never reaches the command"
    );
    let watch = reqs.iter().find(|r| is_watch(r));
    assert_eq!(
        watch
            .expect("the pod is watched")
            .query
            .get("labelSelector")
            .map(String::as_str),
        Some(format!("baton.dev/workspace={tag},baton.dev/step-run=42").as_str())
    );
    let log = reqs
        .iter()
        .find(|r| r.path.ends_with("/log"))
        .expect("the pod's log is read");
    assert_eq!(
        log.path,
        format!("/api/v1/namespaces/team/pods/baton-{tag}-t1-s42-x7k2p/log")
    );
    assert_eq!(log.query.get("follow").map(String::as_str), Some("true"));
    assert_eq!(log.query.get("container").map(String::as_str), Some("step"));
    let delete = reqs
        .iter()
        .find(|r| r.method == "DELETE" && r.path.contains("/jobs/"))
        .expect("the finished Job is deleted");
    assert_eq!(
        delete.path,
        format!("/apis/batch/v1/namespaces/team/jobs/baton-{tag}-t1-s42")
    );
    assert_eq!(delete.body["propagationPolicy"], "Background");
}

#[tokio::test]
async fn a_failing_step_reports_the_containers_exit_code() {
    let stub = Stub::start(&["team"]).await;
    let s = setup();
    let exec = Kubernetes::with_client(
        &spec(&s.remote, "img"),
        stub.client(s.tmp.path(), "default").await,
    );
    let (tx, _lines) = log_channel();
    let mut step = exec.start(&launch(&s, "exit 5", "t", 7), tx).await.unwrap();
    assert_eq!(step.wait().await, Finish::Exited(5));
}

#[tokio::test]
async fn abort_deletes_the_job_with_propagation() {
    let stub = Stub::start(&["team"]).await;
    let s = setup();
    let exec = Kubernetes::with_client(
        &spec(&s.remote, "img"),
        stub.client(s.tmp.path(), "default").await,
    );
    let (tx, _lines) = log_channel();
    let tag = launch(&s, "", "", 9).labels.workspace_tag();
    let mut step = exec
        .start(&launch(&s, "echo started; exec sleep 300", "t", 9), tx)
        .await
        .unwrap();
    let waiter = async {
        stub.until("the pod to run", |_| stub.containers_running() == 1)
            .await;
    };
    tokio::select! {
        _ = waiter => {},
        f = step.wait() => panic!("the step ended early: {f:?}"),
    }
    step.abort(Duration::from_secs(3)).await;
    let reqs = stub.requests();
    let delete = reqs
        .iter()
        .find(|r| r.method == "DELETE" && r.path.contains("/jobs/"))
        .expect("abort deletes the Job");
    assert_eq!(
        delete.path,
        format!("/apis/batch/v1/namespaces/team/jobs/baton-{tag}-t1-s9")
    );
    assert_eq!(delete.body["propagationPolicy"], "Foreground");
    assert_eq!(delete.body["gracePeriodSeconds"], 3);
    assert_eq!(stub.containers_running(), 0, "the pod's container is gone");
    assert!(stub.jobs().is_empty());
    assert!(stub.secrets().is_empty(), "abort deletes the step's Secret");
    assert_eq!(step.wait().await, Finish::Cancelled);
}

#[tokio::test]
async fn recovery_finds_the_job_by_label_and_brings_its_commit_back() {
    let stub = Stub::start(&["team"]).await;
    let s = setup();
    // The pod's step blocks reading a fifo until the test writes to it.
    let gate = s.tmp.path().join("go");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&gate)
            .status()
            .unwrap()
            .success()
    );
    let script = format!(
        "echo before-restart\nread go < '{}'\necho after-restart-line\necho after > after.txt\ngit add after.txt && git commit -qm after-restart",
        gate.display()
    );
    let first = Kubernetes::with_client(
        &spec(&s.remote, "img"),
        stub.client(s.tmp.path(), "default").await,
    );
    let (tx, _lines) = log_channel();
    let l = launch(&s, &script, "t", 11);
    let step = first.start(&l, tx).await.unwrap();
    stub.until("the pod's first line", |_| {
        stub.log_lines().iter().any(|l| l == "before-restart")
    })
    .await;
    // The engine dies: its handle on the step is gone.
    drop(step);
    drop(first);

    let again = Kubernetes::with_client(
        &spec(&s.remote, "img"),
        stub.client(s.tmp.path(), "default").await,
    );
    let (tx, lines) = log_channel();
    let found = again
        .find(&l.labels, tx)
        .await
        .expect("the cluster answers");
    let Found::Running(mut step) = found else {
        panic!("the Job was not found")
    };
    let list = stub
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.method == "GET" && r.path == "/apis/batch/v1/namespaces/team/jobs")
        .expect("Jobs are listed");
    assert_eq!(
        list.query.get("labelSelector").cloned(),
        Some(format!(
            "baton.dev/workspace={},baton.dev/step-run=11",
            l.labels.workspace_tag()
        ))
    );
    let opened = tokio::task::spawn_blocking(move || std::fs::write(&gate, "go\n"));
    assert_eq!(step.wait().await, Finish::Exited(0));
    opened.await.unwrap().unwrap();
    drop(step);
    let lines = lines.await.unwrap();
    assert!(lines.iter().any(|l| l == "after-restart-line"), "{lines:?}");
    assert!(
        !lines.iter().any(|l| l.contains("before-restart")),
        "a line stored before the restart is not stored again: {lines:?}"
    );
    assert_eq!(
        git(&s.wt, &["log", "-1", "--format=%s"]).trim(),
        "after-restart"
    );

    // A step run with no Job is gone.
    let (tx, _l) = log_channel();
    let other = Labels {
        step_run_id: 999,
        ..l.labels.clone()
    };
    assert!(matches!(again.find(&other, tx).await.unwrap(), Found::Gone));
}

#[tokio::test]
async fn a_missing_image_is_a_plain_error_and_the_job_is_removed() {
    let stub = Stub::start(&["team"]).await;
    stub.missing_image("nope:1");
    let s = setup();
    let exec = Kubernetes::with_client(
        &spec(&s.remote, "nope:1"),
        stub.client(s.tmp.path(), "default").await,
    );
    let (tx, _lines) = log_channel();
    let mut step = exec.start(&launch(&s, "true", "t", 13), tx).await.unwrap();
    let Finish::SpawnFailed(why) = step.wait().await else {
        panic!("a pod that cannot start is an error")
    };
    assert!(
        why.contains("ErrImagePull") && why.contains("check the image name"),
        "{why}"
    );
    assert!(stub.jobs().is_empty(), "the stuck Job is deleted");
}

#[tokio::test]
async fn an_unknown_namespace_and_a_missing_git_remote_are_sentences() {
    let stub = Stub::start(&["team"]).await;
    let s = setup();
    let mut sp = spec(&s.remote, "img");
    sp.namespace = Some("elsewhere".into());
    let exec = Kubernetes::with_client(&sp, stub.client(s.tmp.path(), "default").await);
    let (tx, _lines) = log_channel();
    let err = exec
        .start(&launch(&s, "true", "t", 15), tx)
        .await
        .err()
        .expect("refused");
    assert!(err.0.contains("namespace `elsewhere`"), "{}", err.0);

    let mut sp = spec(&s.remote, "img");
    sp.git_remote = None;
    let exec = Kubernetes::with_client(&sp, stub.client(s.tmp.path(), "default").await);
    let (tx, _lines) = log_channel();
    let err = exec
        .start(&launch(&s, "true", "t", 16), tx)
        .await
        .err()
        .expect("refused");
    assert!(err.0.contains("git_remote"), "{}", err.0);
}
