//! Several `baton engine` processes on one board kept in PostgreSQL, each in a workspace
//! of its own (as on machines of their own): they share the steps, every step runs once;
//! an engine killed or paused mid-step loses it to another after its lease, and commits
//! nothing when it comes back; one killed and started again on its machine takes its name
//! back at once; racing approvals from three processes move a task once.
//! Each engine renews its heartbeat every second, so a lease lasts three seconds.

mod common;
mod infra;
mod pg_board;
mod pg_support;

use common::{GATE, Ws, wait_within};
use pg_board::{Board, stop};
use std::path::Path;
use std::process::Child;
use std::time::Duration;

fn signal(engine: &Child, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(engine.id() as i32), sig).unwrap();
}

/// Three script steps in a row; each appends its execution key to `ran`.
fn three_steps(ran: &Path) -> String {
    let script = format!("echo \\\"$BATON_EXECUTION_KEY\\\" >> {}", ran.display());
    format!(
        r#"{{"id": "three", "name": "Three steps", "statuses": [
            {{"id": "todo", "kind": "queue"}},
            {{"id": "one", "step": {{"script": "{script}"}}}},
            {{"id": "two", "step": {{"script": "{script}"}}}},
            {{"id": "three", "step": {{"script": "{script}"}}}},
            {{"id": "done", "kind": "done"}},
            {{"id": "failed", "kind": "failed"}},
            {{"id": "cancelled", "kind": "cancelled"}}
        ], "transitions": []}}"#
    )
}

/// One step that waits until file `release` exists, then appends its execution key to
/// `ran`.
fn held_step(release: &Path, ran: &Path) -> String {
    let script = format!(
        "while [ ! -e {} ]; do sleep 0.05; done; echo \\\"$BATON_EXECUTION_KEY\\\" >> {}",
        release.display(),
        ran.display()
    );
    format!(
        r#"{{"id": "hold", "name": "Held step", "statuses": [
            {{"id": "todo", "kind": "queue"}},
            {{"id": "build", "step": {{"script": "{script}"}}}},
            {{"id": "done", "kind": "done"}},
            {{"id": "failed", "kind": "failed"}},
            {{"id": "cancelled", "kind": "cancelled"}}
        ], "transitions": []}}"#
    )
}

/// The lines of `ran`, sorted.
fn ran_keys(ran: &Path) -> Vec<String> {
    let mut keys: Vec<String> = std::fs::read_to_string(ran)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    keys.sort();
    keys
}

#[test]
fn three_engines_share_the_steps_and_run_each_once() {
    let Some(board) = Board::start() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let ran = tmp.path().join("ran.txt");
    let pipeline = three_steps(&ran);
    let wss: Vec<Ws> = (0..3)
        .map(|_| board.workspace(&[("three.json", &pipeline)]))
        .collect();
    const TASKS: i64 = 60;
    for i in 0..TASKS {
        board.ok(
            &wss[0],
            &["new", &format!("t{i}"), "--pipeline", "three", "--start"],
        );
    }
    let engines: Vec<Child> = ["a", "b", "c"]
        .iter()
        .zip(&wss)
        .map(|(name, ws)| board.engine(ws, name))
        .collect();
    wait_within("every task done", Duration::from_secs(240), || {
        board.count("SELECT COUNT(*) FROM tasks WHERE status = 'done'") == TASKS
    });
    for e in engines {
        stop(e);
    }
    // Every step ran, and succeeded, exactly once.
    let runs = board.count("SELECT COUNT(*) FROM step_runs");
    assert_eq!(runs, TASKS * 3);
    assert_eq!(
        board
            .count("SELECT COUNT(DISTINCT execution_key) FROM step_runs WHERE state = 'succeeded'"),
        TASKS * 3
    );
    let keys = ran_keys(&ran);
    let mut unique = keys.clone();
    unique.dedup();
    assert_eq!((keys.len(), unique.len()), (runs as usize, runs as usize));
    // Each claim has a fence of its own.
    assert_eq!(
        board.count("SELECT COUNT(DISTINCT fence) FROM step_runs WHERE fence IS NOT NULL"),
        runs
    );
    // The steps spread over more than one engine.
    assert!(
        board.count("SELECT COUNT(DISTINCT engine) FROM step_runs") > 1,
        "one engine ran every step"
    );
}

#[test]
fn a_killed_engines_step_is_reaped_and_finished_by_another() {
    let Some(board) = Board::start() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let (release, ran) = (tmp.path().join("release"), tmp.path().join("ran.txt"));
    let pipeline = held_step(&release, &ran);
    let (wa, wb) = (
        board.workspace(&[("hold.json", &pipeline)]),
        board.workspace(&[("hold.json", &pipeline)]),
    );
    let id: i64 = board
        .ok(&wa, &["new", "held", "--pipeline", "hold", "--start"])
        .trim()
        .parse()
        .unwrap();
    let mut a = board.engine(&wa, "a");
    wait_within("a to run the step", Duration::from_secs(60), || {
        board.steps(id) == [(1, "running".into(), Some("a".into()))]
    });
    // A second engine starts beside it: its recovery leaves a's running step alone.
    let b = board.engine(&wb, "b");
    board.wait_live("b");
    assert_eq!(board.steps(id), [(1, "running".into(), Some("a".into()))]);
    // A second engine under a's name is refused while a lives, in one sentence.
    let out = board.baton(&wb, &["engine", "--name", "a", "--exit-when-idle"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        err.contains("an engine named a is already running on") && !err.contains("running in"),
        "{err}"
    );
    signal(&a, nix::sys::signal::Signal::SIGKILL);
    let _ = a.wait();
    // After a's lease, b reaps the step and resumes it as attempt 2.
    wait_within("b to take the step over", Duration::from_secs(60), || {
        board.steps(id)
            == [
                (1, "interrupted".into(), Some("a".into())),
                (2, "running".into(), Some("b".into())),
            ]
    });
    std::fs::write(&release, "").unwrap();
    wait_within("the task done", Duration::from_secs(60), || {
        board.count(&format!(
            "SELECT COUNT(*) FROM tasks WHERE id = {id} AND status = 'done'"
        )) == 1
    });
    let expired = board.events(id, "lease.expired");
    assert!(
        expired.len() == 1 && expired[0].contains("engine `a`"),
        "{expired:?}"
    );
    stop(b);
    let out = board.baton(&wb, &["db", "verify"]);
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn a_paused_engine_commits_nothing_when_it_comes_back() {
    let Some(board) = Board::start() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let (release, ran) = (tmp.path().join("release"), tmp.path().join("ran.txt"));
    let pipeline = held_step(&release, &ran);
    let (wa, wb) = (
        board.workspace(&[("hold.json", &pipeline)]),
        board.workspace(&[("hold.json", &pipeline)]),
    );
    let id: i64 = board
        .ok(&wa, &["new", "held", "--pipeline", "hold", "--start"])
        .trim()
        .parse()
        .unwrap();
    let a = board.engine(&wa, "a");
    wait_within("a to run the step", Duration::from_secs(60), || {
        board.steps(id) == [(1, "running".into(), Some("a".into()))]
    });
    let b = board.engine(&wb, "b");
    board.wait_live("b");
    signal(&a, nix::sys::signal::Signal::SIGSTOP);
    wait_within("b to take the step over", Duration::from_secs(60), || {
        board.steps(id)
            == [
                (1, "interrupted".into(), Some("a".into())),
                (2, "running".into(), Some("b".into())),
            ]
    });
    // Both attempts' scripts end: a's while a is still paused.
    std::fs::write(&release, "").unwrap();
    wait_within("the task done", Duration::from_secs(60), || {
        board.count(&format!(
            "SELECT COUNT(*) FROM tasks WHERE id = {id} AND status = 'done'"
        )) == 1
    });
    wait_within("a's script to end", Duration::from_secs(30), || {
        ran_keys(&ran).len() == 2
    });
    signal(&a, nix::sys::signal::Signal::SIGCONT);
    wait_within("a to say it lost the step", Duration::from_secs(30), || {
        !board.events(id, "lease.lost").is_empty()
    });
    let lost = board.events(id, "lease.lost");
    assert!(
        lost.len() == 1 && lost[0].contains("engine `a` lost its lease on build#1"),
        "{lost:?}"
    );
    // Nothing of a's result was written: its attempt stays interrupted, b's is the result,
    // and the task moved once.
    stop(a);
    stop(b);
    assert_eq!(
        board.steps(id),
        [
            (1, "interrupted".into(), Some("a".into())),
            (2, "succeeded".into(), Some("b".into())),
        ]
    );
    assert_eq!(
        board.count(&format!(
            "SELECT COUNT(*) FROM history WHERE task_id = {id} AND trigger = 'success'"
        )),
        1
    );
}

#[test]
fn racing_approvals_from_three_engines_workspaces_move_the_task_once() {
    let Some(board) = Board::start() else { return };
    let wss: Vec<Ws> = (0..3)
        .map(|_| board.workspace(&[("gate.json", GATE)]))
        .collect();
    // Several rounds, each a task approved from three processes at once: each engine
    // applies the commands it finds, its own and the others', so every round races.
    const ROUNDS: i64 = 5;
    let ids: Vec<i64> = (0..ROUNDS)
        .map(|i| {
            board
                .ok(
                    &wss[0],
                    &[
                        "new",
                        &format!("gated {i}"),
                        "--pipeline",
                        "gate",
                        "--start",
                    ],
                )
                .trim()
                .parse()
                .unwrap()
        })
        .collect();
    let engines: Vec<Child> = ["a", "b", "c"]
        .iter()
        .zip(&wss)
        .map(|(name, ws)| board.engine(ws, name))
        .collect();
    for name in ["a", "b", "c"] {
        board.wait_live(name);
    }
    wait_within("the tasks at review", Duration::from_secs(60), || {
        board.count("SELECT COUNT(*) FROM tasks WHERE status = 'review'") == ROUNDS
    });
    let mut rounds = Vec::new();
    for id in &ids {
        let outs: Vec<std::process::Output> = std::thread::scope(|s| {
            let handles: Vec<_> = wss
                .iter()
                .map(|ws| s.spawn(|| board.baton(ws, &["approve", &id.to_string()])))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        rounds.push((*id, outs));
    }
    for e in engines {
        stop(e);
    }
    for (id, outs) in rounds {
        let won = outs.iter().filter(|o| o.status.success()).count();
        assert_eq!(won, 1, "task {id}: {outs:?}");
        for o in outs.iter().filter(|o| !o.status.success()) {
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(
                err.trim().lines().count() == 1
                    && err.contains("no longer at review")
                    && !err.contains("panicked"),
                "{err}"
            );
        }
        assert_eq!(
            board.count(&format!(
                "SELECT COUNT(*) FROM history WHERE task_id = {id} AND trigger = 'approve'"
            )),
            1
        );
        // Each command was applied once: the winner's stays done (a second application,
        // refused, would have overwritten it with its refusal).
        let states: Vec<String> = board
            .client()
            .query(
                "SELECT state FROM commands WHERE task_id = $1 AND body_json LIKE '%approve%' \
                 ORDER BY state",
                &[&id],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(states, ["done", "failed", "failed"], "task {id}");
    }
}

/// `run --wait` under a name a live engine holds (here the default, the host's name, held
/// by an engine in another workspace) is refused before it makes its task.
#[test]
fn run_wait_under_a_held_name_makes_no_task() {
    let Some(board) = Board::start() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let pipeline = three_steps(&tmp.path().join("ran.txt"));
    let (wa, wb) = (
        board.workspace(&[]),
        board.workspace(&[("three.json", &pipeline)]),
    );
    // The engine's default name: the host's, as baton keeps it.
    let host: String = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        .take(64)
        .collect();
    let a = board.engine(&wa, &host);
    board.wait_live(&host);
    let out = board.baton(&wb, &["run", "three", "--title", "refused", "--wait"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(err.contains("is already running on"), "{err}");
    assert_eq!(board.count("SELECT COUNT(*) FROM tasks"), 0, "{err}");
    stop(a);
}

/// An engine killed (`kill -9`) and started again at once under its name on the same
/// machine takes the name back without waiting out its lease: its process is gone. The
/// step it left running is recovered as when it comes back after the lease: interrupted,
/// and resumed.
#[test]
fn an_engine_killed_and_started_again_here_takes_its_name_back_at_once() {
    let Some(board) = Board::start() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let (release, ran) = (tmp.path().join("release"), tmp.path().join("ran.txt"));
    let ws = board.workspace(&[("hold.json", &held_step(&release, &ran))]);
    // A lease of half a minute; the name is free once the dead engine misses a heartbeat
    // (ten seconds at most), well before the lease runs out.
    ws.config("auto_resume = true\n[engine]\nheartbeat = \"10s\"\n");
    let id: i64 = board
        .ok(&ws, &["new", "held", "--pipeline", "hold", "--start"])
        .trim()
        .parse()
        .unwrap();
    let mut first = board.engine(&ws, "a");
    wait_within("a to run the step", Duration::from_secs(60), || {
        board.steps(id) == [(1, "running".into(), Some("a".into()))]
    });
    signal(&first, nix::sys::signal::Signal::SIGKILL);
    let _ = first.wait();
    let mut again = board.engine(&ws, "a");
    let pid = i64::from(again.id());
    let mut c = board.client();
    wait_within("a to take its name back", Duration::from_secs(20), || {
        if let Some(code) = again.try_wait().unwrap() {
            let said = std::fs::read_to_string(ws.root().join(".baton/engine.out"));
            panic!("the engine ended ({code}): {said:?}");
        }
        c.query_one(
            "SELECT COUNT(*) FROM engines WHERE name = 'a' AND pid = $1 AND stopped_at IS NULL",
            &[&pid],
        )
        .map(|r| r.get::<_, i64>(0) == 1)
        .unwrap_or(false)
    });
    wait_within("the step resumed", Duration::from_secs(60), || {
        board.steps(id)
            == [
                (1, "interrupted".into(), Some("a".into())),
                (2, "running".into(), Some("a".into())),
            ]
    });
    std::fs::write(&release, "").unwrap();
    wait_within("the task done", Duration::from_secs(60), || {
        board.count(&format!(
            "SELECT COUNT(*) FROM tasks WHERE id = {id} AND status = 'done'"
        )) == 1
    });
    stop(again);
    // Only the second attempt ran to its end.
    assert_eq!(ran_keys(&ran).len(), 1, "{:?}", ran_keys(&ran));
}
