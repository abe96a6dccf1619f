//! The local executor through the seam: output, exit codes, argv, stop and timeout.

use super::*;
use crate::store::Stream;
use tokio::sync::mpsc;

fn env(dir: &std::path::Path, vars: &[(&str, &str)]) -> StepEnv {
    StepEnv {
        vars: vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        workdir: dir.to_path_buf(),
        timeout: Duration::from_secs(30),
        kill_grace: Duration::from_millis(500),
    }
}

async fn lines(mut rx: mpsc::Receiver<(Stream, String)>) -> Vec<(Stream, String)> {
    let mut out = Vec::new();
    while let Some(l) = rx.recv().await {
        out.push(l);
    }
    out
}

#[tokio::test]
async fn a_shell_step_streams_both_streams_and_its_exit() {
    let dir = tempfile::tempdir().unwrap();
    let (tx, rx) = mpsc::channel(64);
    let place = Place::local(dir.path().to_path_buf());
    let e = env(dir.path(), &[("TEXT", "it's \"$(rm -rf /)\"\nline2")]);
    let mut s = place
        .start(
            Program::Shell("printf '%s\\n' \"$TEXT\"; echo err >&2; exit 3".into()),
            &e,
            tx,
        )
        .await
        .expect("starts");
    assert!(matches!(s.identity(), Identity::Process { .. }));
    let cancel = CancellationToken::new();
    assert_eq!(
        drive(s.as_mut(), e.timeout, e.kill_grace, &cancel).await,
        Finish::Exited(3)
    );
    drop(s);
    let got = lines(rx).await;
    assert!(
        got.contains(&(Stream::Stdout, "it's \"$(rm -rf /)\"".into())),
        "{got:?}"
    );
    assert!(got.contains(&(Stream::Stdout, "line2".into())));
    assert!(got.contains(&(Stream::Stderr, "err".into())));
}

#[tokio::test]
async fn an_argv_step_gets_its_arguments_unexpanded() {
    let dir = tempfile::tempdir().unwrap();
    let (tx, rx) = mpsc::channel(64);
    let e = env(dir.path(), &[]);
    let mut s = Place::local(dir.path().to_path_buf())
        .start(
            Program::Argv(vec![
                "printf".into(),
                "%s|".into(),
                "$HOME".into(),
                "a b".into(),
            ]),
            &e,
            tx,
        )
        .await
        .expect("starts");
    let f = drive(
        s.as_mut(),
        e.timeout,
        e.kill_grace,
        &CancellationToken::new(),
    )
    .await;
    assert_eq!(f, Finish::Exited(0));
    drop(s);
    assert_eq!(lines(rx).await, vec![(Stream::Stdout, "$HOME|a b|".into())]);
}

#[tokio::test]
async fn a_missing_program_is_a_sentence() {
    let dir = tempfile::tempdir().unwrap();
    let (tx, _rx) = mpsc::channel(64);
    let e = env(dir.path(), &[]);
    let err = match Place::local(dir.path().to_path_buf())
        .start(
            Program::Argv(vec!["surely-not-a-program-xyz".into()]),
            &e,
            tx,
        )
        .await
    {
        Err(e) => e.0,
        Ok(_) => panic!("started"),
    };
    assert!(
        err.contains("could not start `surely-not-a-program-xyz`"),
        "{err}"
    );
}

#[tokio::test]
async fn cancel_and_timeout_stop_the_group() {
    let dir = tempfile::tempdir().unwrap();
    for cancelled in [true, false] {
        let (tx, _rx) = mpsc::channel(64);
        let mut e = env(dir.path(), &[]);
        if !cancelled {
            e.timeout = Duration::from_millis(200);
        }
        let mut s = Place::local(dir.path().to_path_buf())
            .start(Program::Shell("sleep 300 & sleep 300".into()), &e, tx)
            .await
            .expect("starts");
        let Identity::Process { pid, .. } = s.identity() else {
            panic!("a process")
        };
        let cancel = CancellationToken::new();
        if cancelled {
            cancel.cancel();
        }
        let f = drive(s.as_mut(), e.timeout, e.kill_grace, &cancel).await;
        assert_eq!(
            f,
            if cancelled {
                Finish::Cancelled
            } else {
                Finish::TimedOut
            }
        );
        assert!(
            !crate::exec::process::group_alive(pid),
            "nothing of the group is left"
        );
    }
}

#[test]
fn resolution_prefers_the_step_then_the_profile_then_the_default() {
    let docker = |i: &str| {
        crate::pipeline::parse_executor(&serde_json::json!({"docker": {"image": i}})).unwrap()
    };
    assert_eq!(resolve(None, None, None), ExecutorSpec::Local);
    assert_eq!(resolve(None, None, Some(&docker("d"))), docker("d"));
    assert_eq!(
        resolve(None, Some(&docker("p")), Some(&docker("d"))),
        docker("p")
    );
    assert_eq!(
        resolve(Some(ExecutorSpec::Local), Some(&docker("p")), None),
        ExecutorSpec::Local
    );
}

/// An executor whose start never finishes (an endless image pull); it counts the clean-ups
/// asked of it.
struct Stuck(Arc<std::sync::atomic::AtomicUsize>);

impl Executor for Stuck {
    fn name(&self) -> &'static str {
        "stuck"
    }
    fn start<'a>(
        &'a self,
        _launch: &'a Launch,
        _log: LogSender,
    ) -> BoxFuture<'a, Result<Box<dyn Started>, ExecError>> {
        Box::pin(std::future::pending())
    }
    fn find<'a>(
        &'a self,
        _labels: &'a Labels,
        _log: LogSender,
    ) -> BoxFuture<'a, Result<Found, ExecError>> {
        Box::pin(async { Ok(Found::Gone) })
    }
    fn discard<'a>(&'a self, labels: &'a Labels) -> BoxFuture<'a, ()> {
        assert_eq!(labels.step_run_id, 0);
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async {})
    }
}

#[tokio::test]
async fn a_start_that_hangs_is_given_up_on_abort_and_cleaned_up() {
    let dir = tempfile::tempdir().unwrap();
    let discarded = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let place = Place {
        executor: Arc::new(Stuck(discarded.clone())),
        ..Place::local(dir.path().to_path_buf())
    };
    let cancel = CancellationToken::new();
    let (tx, _rx) = mpsc::channel(1);
    let env = env(dir.path(), &[]);
    let starting = place.start_until(Program::Shell("true".into()), &env, tx, cancel.cancelled());
    cancel.cancel();
    assert!(matches!(starting.await, Err(())), "the start is given up");
    assert_eq!(discarded.load(std::sync::atomic::Ordering::SeqCst), 1);
}

/// The local executor under another way of feeding standard input.
struct FedAs(StdinWay);

impl Executor for FedAs {
    fn name(&self) -> &'static str {
        "fed"
    }
    fn start<'a>(
        &'a self,
        launch: &'a Launch,
        log: LogSender,
    ) -> BoxFuture<'a, Result<Box<dyn Started>, ExecError>> {
        Local.start(launch, log)
    }
    fn find<'a>(
        &'a self,
        _labels: &'a Labels,
        _log: LogSender,
    ) -> BoxFuture<'a, Result<Found, ExecError>> {
        Box::pin(async { Ok(Found::Gone) })
    }
    fn stdin(&self) -> StdinWay {
        self.0
    }
}

/// Runs `argv` fed `input` on `place`; its stdout lines.
async fn fed(place: &Place, argv: &[&str], input: &[u8]) -> Result<Vec<String>, ExecError> {
    let (tx, rx) = mpsc::channel(64);
    let collected = tokio::spawn(lines(rx));
    let e = env(&place.worktree, &[]);
    let argv = argv.iter().map(|a| a.to_string()).collect();
    let mut s = place
        .start_fed(Program::Argv(argv), Some(Stdin::bytes(input)), &e, tx)
        .await?;
    let f = drive(
        s.as_mut(),
        e.timeout,
        e.kill_grace,
        &CancellationToken::new(),
    )
    .await;
    assert_eq!(f, Finish::Exited(0));
    drop(s);
    let got = collected.await.unwrap();
    Ok(got
        .into_iter()
        .filter(|(s, _)| *s == Stream::Stdout)
        .map(|(_, l)| l)
        .collect())
}

#[tokio::test]
async fn a_large_input_reaches_a_program_that_prints_while_it_reads() {
    let dir = tempfile::tempdir().unwrap();
    // 1 MiB through `cat`: far more than a pipe holds in either direction, so writing it
    // all before reading the output would deadlock.
    let mut input = Vec::new();
    for i in 0..40_000 {
        input.extend_from_slice(format!("line {i:07} $(x) '\"\n").as_bytes());
    }
    let out = fed(&Place::local(dir.path().into()), &["cat"], &input)
        .await
        .expect("starts");
    assert_eq!(out.len(), 40_000);
    assert_eq!(out[39_999], "line 0039999 $(x) '\"");
}

#[tokio::test]
async fn an_executor_that_sees_the_context_folder_feeds_a_file_through_argv() {
    let dir = tempfile::tempdir().unwrap();
    let place = Place {
        executor: Arc::new(FedAs(StdinWay::ContextFile)),
        ..Place::local(dir.path().to_path_buf())
    };
    let out = fed(
        &place,
        &["sh", "-c", "cat; echo \"[$0]\"", "a b"],
        b"it's \"$(rm -rf /)\"\n",
    )
    .await
    .expect("starts");
    assert_eq!(out, ["it's \"$(rm -rf /)\"", "[a b]"]);
}

#[tokio::test]
async fn an_executor_that_cannot_feed_input_refuses_in_one_sentence() {
    let dir = tempfile::tempdir().unwrap();
    let place = Place {
        executor: Arc::new(FedAs(StdinWay::Unsupported)),
        ..Place::local(dir.path().to_path_buf())
    };
    let err = fed(&place, &["cat"], b"hi").await.unwrap_err().0;
    assert!(
        err.starts_with("the fed executor cannot give a command its prompt on standard input")
            && err.contains("\"prompt_via\": \"argv\""),
        "{err}"
    );
}

/// Starts `cat` on `place` with a first line and more input; the sender of the rest, the
/// more input (kept, as the agent backend keeps it while it talks), the step and its
/// collected lines.
async fn talking_cat(
    place: &Place,
) -> (
    mpsc::UnboundedSender<Vec<u8>>,
    MoreInput,
    Box<dyn Started>,
    tokio::task::JoinHandle<Vec<(Stream, String)>>,
) {
    let (tx, rx) = mpsc::channel(64);
    let collected = tokio::spawn(lines(rx));
    let (more_tx, more_rx) = mpsc::unbounded_channel();
    let input = MoreInput::new(more_rx);
    let stdin = Stdin(b"first\n"[..].into(), Some(input.clone()));
    let e = env(&place.worktree, &[]);
    let s = place
        .start_fed(Program::Argv(vec!["cat".into()]), Some(stdin), &e, tx)
        .await
        .expect("starts");
    (more_tx, input, s, collected)
}

#[tokio::test]
async fn more_input_reaches_a_piped_step_and_a_file_fed_one_refuses_it() {
    let dir = tempfile::tempdir().unwrap();
    // The local executor keeps the pipe open: a later line reaches the program.
    let (more, _input, mut s, collected) = talking_cat(&Place::local(dir.path().into())).await;
    assert!(more.send(b"second\n".to_vec()).is_ok());
    drop(more);
    let e = env(dir.path(), &[]);
    let f = drive(
        s.as_mut(),
        e.timeout,
        e.kill_grace,
        &CancellationToken::new(),
    )
    .await;
    assert_eq!(f, Finish::Exited(0));
    drop(s);
    let out: Vec<String> = collected
        .await
        .unwrap()
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    assert_eq!(out, ["first", "second"]);
    // An executor that feeds a file took the first bytes only: sending more fails at once,
    // so the sender knows the message did not go.
    let place = Place {
        executor: Arc::new(FedAs(StdinWay::ContextFile)),
        ..Place::local(dir.path().to_path_buf())
    };
    let (more, _input, mut s, collected) = talking_cat(&place).await;
    assert!(
        more.send(b"second\n".to_vec()).is_err(),
        "more input to a file-fed step must be refused"
    );
    let f = drive(
        s.as_mut(),
        e.timeout,
        e.kill_grace,
        &CancellationToken::new(),
    )
    .await;
    assert_eq!(f, Finish::Exited(0));
    drop(s);
    let out: Vec<String> = collected
        .await
        .unwrap()
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    assert_eq!(out, ["first"]);
}
