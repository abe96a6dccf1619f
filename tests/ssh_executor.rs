//! The ssh executor against a real sshd on the loopback host: the branch goes there by git,
//! the step runs, its commit comes back; abort ends the remote process group; a cut
//! connection is an error.

mod infra;
mod common;
mod support_sshd;

use baton::exec::executor::ssh::{Ssh, SshHost};
use baton::exec::executor::{Executor, Labels, Launch, Program, drive};
use baton::exec::{Finish, StepEnv};
use baton::store::Stream;
use common::{alive, git, git_init, wait_within};
use std::path::{Path, PathBuf};
use std::time::Duration;
use support_sshd::{HOST, Proxy, Sshd};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A repository with a task worktree on `baton/1-ssh`, as the engine makes one.
fn worktree(root: &Path) -> PathBuf {
    let repo = root.join("repo");
    git_init(&repo);
    let wt = root.join("wt");
    git(
        &repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "baton/1-ssh",
            wt.to_str().unwrap(),
        ],
    );
    wt
}

fn host_for(sshd: &Sshd) -> SshHost {
    let mut host = SshHost::new(HOST, Some(sshd.remote_dir().to_str().unwrap())).unwrap();
    host.options = vec!["-F".into(), sshd.client_config.display().to_string()];
    host
}

fn env(workdir: &Path, title: &str) -> StepEnv {
    StepEnv {
        vars: vec![
            ("BATON_TASK_TITLE".into(), title.into()),
            ("BATON_EXECUTION_KEY".into(), "1:build:1".into()),
            ("BATON_BRANCH".into(), "baton/1-ssh".into()),
            ("GIT_AUTHOR_NAME".into(), "Remote".into()),
            ("GIT_AUTHOR_EMAIL".into(), "remote@example.com".into()),
            ("GIT_COMMITTER_NAME".into(), "Remote".into()),
            ("GIT_COMMITTER_EMAIL".into(), "remote@example.com".into()),
        ],
        workdir: workdir.to_path_buf(),
        timeout: Duration::from_secs(120),
        kill_grace: Duration::from_secs(3),
    }
}

/// Runs `script` on `host` as the engine does: [`Ssh`]'s start, then [`drive`] until it
/// ends, is cancelled or times out.
async fn run_ssh(
    host: &SshHost,
    script: &str,
    env: &StepEnv,
    log: mpsc::Sender<(Stream, String)>,
    cancel: CancellationToken,
) -> Finish {
    let launch = Launch {
        program: Program::Shell(script.into()),
        env: env.clone(),
        worktree: env.workdir.clone(),
        context_dir: env.workdir.clone(),
        labels: Labels {
            task_id: 1,
            step_run_id: 1,
            execution_key: String::new(),
            workspace: String::new(),
        },
    };
    let ssh = Ssh::with_host(host.clone());
    match ssh.start(&launch, log).await {
        Ok(mut step) => drive(step.as_mut(), env.timeout, env.kill_grace, &cancel).await,
        Err(e) => Finish::SpawnFailed(e.0),
    }
}

/// The log's sender, the lines it collected, and a signal at the first marked line.
type Collector = (
    mpsc::Sender<(Stream, String)>,
    tokio::task::JoinHandle<Vec<(Stream, String)>>,
    tokio::sync::oneshot::Receiver<()>,
);

/// Collects log lines until the channel closes; `started` fires at the first line that
/// contains `mark`.
fn collect(mark: &'static str) -> Collector {
    let (tx, mut rx) = mpsc::channel::<(Stream, String)>(1024);
    let (started_tx, started) = tokio::sync::oneshot::channel();
    let lines = tokio::spawn(async move {
        let mut all = Vec::new();
        let mut started_tx = Some(started_tx);
        while let Some((s, l)) = rx.recv().await {
            if l.contains(mark)
                && let Some(t) = started_tx.take()
            {
                let _ = t.send(());
            }
            all.push((s, l));
        }
        all
    });
    (tx, lines, started)
}

#[tokio::test]
async fn an_ssh_step_runs_on_the_host_and_its_commit_comes_back() {
    let Some(sshd) = Sshd::start() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let wt = worktree(tmp.path());
    let title = "it's $(touch pwned) `id`; \"quoted\"\nsecond line \\ end";
    let script = "printf '%s' \"$BATON_TASK_TITLE\" > title.txt\necho remote-out\necho remote-err >&2\ngit add title.txt && git commit -qm 'from the host'";
    let (tx, lines, _) = collect("never");
    let finish = run_ssh(
        &host_for(&sshd),
        script,
        &env(&wt, title),
        tx,
        CancellationToken::new(),
    )
    .await;
    let lines = lines.await.unwrap();
    assert_eq!(finish, Finish::Exited(0), "{lines:?}");
    assert!(
        lines.contains(&(Stream::Stdout, "remote-out".into())),
        "{lines:?}"
    );
    assert!(
        lines.contains(&(Stream::Stderr, "remote-err".into())),
        "{lines:?}"
    );
    assert!(
        lines.iter().all(|(_, l)| !l.contains("@@baton-")),
        "baton's markers stay out of the log: {lines:?}"
    );
    // The commit is on the local task branch, and the files in the local worktree.
    assert_eq!(
        git(&wt, &["log", "-1", "--format=%s %an"]).trim(),
        "from the host Remote"
    );
    assert_eq!(
        std::fs::read_to_string(wt.join("title.txt")).unwrap(),
        title
    );
    assert!(!wt.join("pwned").exists());
    assert!(!sshd.remote_dir().join("pwned").exists());

    // A second step on the same branch starts from the first one's commit.
    let (tx, lines, _) = collect("never");
    let finish = run_ssh(
        &host_for(&sshd),
        "test -f title.txt && echo again > two.txt && git add two.txt && git commit -qm second",
        &StepEnv {
            vars: env(&wt, "t")
                .vars
                .into_iter()
                .map(|(k, v)| {
                    if k == "BATON_EXECUTION_KEY" {
                        (k, "1:build:2".into())
                    } else {
                        (k, v)
                    }
                })
                .collect(),
            ..env(&wt, "t")
        },
        tx,
        CancellationToken::new(),
    )
    .await;
    assert_eq!(finish, Finish::Exited(0), "{:?}", lines.await.unwrap());
    assert_eq!(git(&wt, &["rev-list", "--count", "HEAD"]).trim(), "3");
}

#[tokio::test]
async fn a_failing_step_reports_its_exit_code() {
    let Some(sshd) = Sshd::start() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let wt = worktree(tmp.path());
    let (tx, _lines, _) = collect("never");
    let finish = run_ssh(
        &host_for(&sshd),
        "exit 7",
        &env(&wt, "t"),
        tx,
        CancellationToken::new(),
    )
    .await;
    assert_eq!(finish, Finish::Exited(7));
}

/// The pid the step wrote on the (loopback) host.
fn remote_pid(file: &Path) -> i32 {
    std::fs::read_to_string(file)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Aborts a step whose remote `sleep` was started in the background, then waits for that
/// sleep to end: the whole remote process group is stopped, not just the job's shell.
async fn abort_ends_the_remote_group(no_setsid: bool) {
    let Some(sshd) = Sshd::start() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let wt = worktree(tmp.path());
    let pid_file = tmp.path().join("sleeper.pid");
    let script = format!(
        "sleep 300 & echo $! > '{}'; echo started; wait",
        pid_file.display()
    );
    let (tx, lines, started) = collect("started");
    let cancel = CancellationToken::new();
    let stopper = cancel.clone();
    tokio::spawn(async move {
        if started.await.is_ok() {
            stopper.cancel();
        }
    });
    let step_env = if no_setsid {
        without_setsid(env(&wt, "t"))
    } else {
        env(&wt, "t")
    };
    let finish = run_ssh(&host_for(&sshd), &script, &step_env, tx, cancel).await;
    assert_eq!(finish, Finish::Cancelled, "{:?}", lines.await.unwrap());
    let sleeper = remote_pid(&pid_file);
    wait_within("the remote sleep to end", Duration::from_secs(10), || {
        !alive(sleeper)
    });
}

#[tokio::test]
async fn abort_ends_the_remote_process_group() {
    abort_ends_the_remote_group(false).await;
}

#[tokio::test]
async fn a_cut_connection_is_an_error_and_the_remote_step_is_ended() {
    let Some(sshd) = Sshd::start() else { return };
    let proxy = Proxy::start(sshd.port);
    let user = std::env::var("USER").unwrap_or_else(|_| "root".into());
    sshd.write_client_config(proxy.port, &user);
    let tmp = tempfile::tempdir().unwrap();
    let wt = worktree(tmp.path());
    let pid_file = tmp.path().join("sleeper.pid");
    let script = format!(
        "sleep 300 & echo $! > '{}'; echo started; wait",
        pid_file.display()
    );
    let (tx, lines, started) = collect("started");
    let run = tokio::spawn({
        let host = host_for(&sshd);
        let env = env(&wt, "t");
        async move { run_ssh(&host, &script, &env, tx, CancellationToken::new()).await }
    });
    started.await.expect("the step started on the host");
    proxy.cut();
    let finish = run.await.unwrap();
    let Finish::SpawnFailed(why) = finish else {
        panic!(
            "a cut connection is an error, got {finish:?}: {:?}",
            lines.await.unwrap()
        );
    };
    assert!(why.contains("lost the connection"), "{why}");
    // baton ends the step left on the host once it can reach it again.
    let sleeper = remote_pid(&pid_file);
    wait_within(
        "the orphaned remote sleep to end",
        Duration::from_secs(20),
        || !alive(sleeper),
    );
}

#[tokio::test]
async fn an_unreachable_host_is_a_plain_error() {
    let Some(sshd) = Sshd::start() else { return };
    let user = std::env::var("USER").unwrap_or_else(|_| "root".into());
    // Nothing listens on the proxy port once its listener is gone.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    sshd.write_client_config(port, &user);
    let tmp = tempfile::tempdir().unwrap();
    let wt = worktree(tmp.path());
    let (tx, _lines, _) = collect("never");
    let finish = run_ssh(
        &host_for(&sshd),
        "true",
        &env(&wt, "t"),
        tx,
        CancellationToken::new(),
    )
    .await;
    let Finish::SpawnFailed(why) = finish else {
        panic!("{finish:?}")
    };
    assert!(why.contains("ssh host `baton-test`"), "{why}");
}

#[tokio::test]
async fn a_step_never_outlives_the_client_that_started_it() {
    let Some(sshd) = Sshd::start() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let wt = worktree(tmp.path());
    let pid_file = tmp.path().join("sleeper.pid");
    let script = format!(
        "sleep 300 & echo $! > '{}'; echo started; wait",
        pid_file.display()
    );
    let (tx, _lines, started) = collect("started");
    let step = baton::exec::executor::ssh::start_ssh(&host_for(&sshd), &script, &env(&wt, "t"), tx)
        .await
        .expect("started");
    started.await.expect("the step started on the host");
    // An engine that dies takes its ssh client with it (recovery ends the recorded group).
    drop(step);
    let sleeper = remote_pid(&pid_file);
    wait_within("the remote sleep to end", Duration::from_secs(10), || {
        !alive(sleeper)
    });
}

/// `env` with `BATON_SSH_NO_SETSID=1`: the job takes its path for hosts without `setsid`.
fn without_setsid(env: StepEnv) -> StepEnv {
    let mut env = env;
    env.vars.push(("BATON_SSH_NO_SETSID".into(), "1".into()));
    env
}

#[tokio::test]
async fn without_setsid_abort_still_ends_the_remote_process_group() {
    abort_ends_the_remote_group(true).await;
}

/// A step that ignores TERM is killed once the grace has passed after its connection went.
#[tokio::test]
async fn a_step_that_ignores_term_is_killed_after_the_grace() {
    let Some(sshd) = Sshd::start() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let wt = worktree(tmp.path());
    let pid_file = tmp.path().join("stubborn.pid");
    let script = format!(
        "trap '' TERM; echo $$ > '{}'; echo started; while :; do sleep 1; done",
        pid_file.display()
    );
    for env in [env(&wt, "t"), without_setsid(env(&wt, "t"))] {
        let (tx, _lines, started) = collect("started");
        let step = baton::exec::executor::ssh::start_ssh(&host_for(&sshd), &script, &env, tx)
            .await
            .expect("started");
        started.await.expect("the step started on the host");
        drop(step);
        let stubborn = remote_pid(&pid_file);
        wait_within(
            "the stubborn step to be killed",
            Duration::from_secs(20),
            || !alive(stubborn),
        );
    }
}

#[tokio::test]
async fn the_trigger_payload_file_reaches_the_host() {
    let Some(sshd) = Sshd::start() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let wt = worktree(tmp.path());
    let payload = tmp.path().join("trigger.json");
    std::fs::write(&payload, "{\"action\": \"opened\"}").unwrap();
    let mut e = env(&wt, "t");
    e.vars.push((
        "BATON_TRIGGER_PAYLOAD_FILE".into(),
        payload.display().to_string(),
    ));
    let (tx, lines, _) = collect("never");
    let finish = run_ssh(
        &host_for(&sshd),
        "case $BATON_TRIGGER_PAYLOAD_FILE in */context/*) ;; *) exit 3 ;; esac; cp \"$BATON_TRIGGER_PAYLOAD_FILE\" got.json && git add got.json && git commit -qm payload",
        &e,
        tx,
        CancellationToken::new(),
    )
    .await;
    assert_eq!(finish, Finish::Exited(0), "{:?}", lines.await.unwrap());
    assert_eq!(
        std::fs::read_to_string(wt.join("got.json")).unwrap(),
        "{\"action\": \"opened\"}"
    );
}
