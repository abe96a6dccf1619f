//! A team's board as the team runs it: three clones of one repository (one per machine),
//! one bare remote they share, one PostgreSQL board, and an engine in each clone. Every
//! task's three steps build on each other's work through the task branch, with a review
//! between the first and the second that someone on another machine approves; all tasks end
//! done, every execution key succeeded once with a fence of its own, and each task's steps
//! ran on its home engine. Then an engine is killed with SIGKILL mid-step, again and
//! again: each time the others take its steps over after the lease, and nothing is lost.
//! And an engine frozen past its lease, whose step another engine took over, leaves
//! nothing of its own attempt on the shared branch.
//!
//! `BATON_TEAM_TASKS` sets how many tasks the first test runs (300 unless set).

mod common;
mod infra;
mod pg_board;
mod pg_support;

use common::{Ws, bare_remote, git, wait_within};
use pg_board::{Board, stop};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

/// Three steps, a review after the first; each appends a line to the task's own file, the
/// second and third only after checking the earlier steps' lines are there (from the task
/// branch, wherever the step runs).
const TEAM: &str = r#"{
  "id": "team",
  "name": "Team",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "one", "step": {"script": "echo one >> \"work-$BATON_TASK_ID.txt\""}},
    {"id": "review", "kind": "gate"},
    {"id": "two", "step": {"script": "grep -qx one \"work-$BATON_TASK_ID.txt\" || exit 3\necho two >> \"work-$BATON_TASK_ID.txt\""}},
    {"id": "three", "step": {"script": "grep -qx two \"work-$BATON_TASK_ID.txt\" || exit 3\necho three >> \"work-$BATON_TASK_ID.txt\""}},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"},
    {"id": "cancelled", "kind": "cancelled"}
  ]
}"#;

/// A clone of `bare` on `board`, its engine beating every second and resuming what it
/// finds interrupted.
fn clone_on(board: &Board, bare: &Path, name: &str) -> Ws {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", bare.display());
    git(dir.path(), &["clone", "-q", &url, name]);
    let ws = Ws::at(dir, name);
    git(ws.root(), &["config", "user.name", "Test"]);
    git(ws.root(), &["config", "user.email", "test@example.com"]);
    board.ok(&ws, &["init"]);
    board.configure(&ws, &[("team.json", TEAM)]);
    ws
}

#[test]
fn three_machines_run_a_shared_board_each_task_on_its_home_engine() {
    let Some(board) = Board::start() else { return };
    let tasks: i64 = std::env::var("BATON_TEAM_TASKS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(300);
    let remote = tempfile::tempdir().unwrap();
    let bare = bare_remote(remote.path());
    let names = ["a", "b", "c"];
    let clones: Vec<Ws> = names.iter().map(|n| clone_on(&board, &bare, n)).collect();
    let engines: Vec<_> = names
        .iter()
        .zip(&clones)
        .map(|(n, ws)| board.engine(ws, n))
        .collect();
    for n in names {
        board.wait_live(n);
    }
    // People on all three machines add work.
    let mut ids = Vec::new();
    for i in 0..tasks {
        let ws = &clones[i as usize % 3];
        let title = format!("task {i}");
        let id = board.ok(ws, &["new", &title, "--pipeline", "team", "--start"]);
        ids.push(id.trim().to_string());
    }
    // Each waits for review after its first step; someone on another machine approves it,
    // and the rest of its steps still run on its home engine.
    wait_within("every task at review", Duration::from_secs(900), || {
        board.count("SELECT COUNT(*) FROM tasks WHERE status = 'review'") == tasks
    });
    for (i, id) in ids.iter().enumerate() {
        board.ok(&clones[(i + 1) % 3], &["approve", id]);
    }
    wait_within("every task done", Duration::from_secs(900), || {
        board.count("SELECT COUNT(*) FROM tasks WHERE status IN ('done', 'failed', 'cancelled')")
            == tasks
    });
    for e in engines {
        stop(e);
    }
    assert_eq!(
        board.count("SELECT COUNT(*) FROM tasks WHERE status = 'done'"),
        tasks,
        "a task did not end done"
    );
    let mut c = board.client();
    // Each execution key succeeded once, under a fence of its own.
    let rows = c
        .query(
            "SELECT task_id, execution_key, fence, engine FROM step_runs WHERE state = 'succeeded'",
            &[],
        )
        .unwrap();
    assert_eq!(rows.len() as i64, tasks * 3);
    let keys: HashSet<String> = rows.iter().map(|r| r.get(1)).collect();
    assert_eq!(keys.len(), rows.len(), "an execution key succeeded twice");
    let fences: HashSet<i64> = rows.iter().map(|r| r.get(2)).collect();
    assert_eq!(
        fences.len(),
        rows.len(),
        "two committed steps share a fence"
    );
    // Every task's steps ran on one engine, its home, and the work spread over them all.
    let mut ran_on: HashMap<i64, HashSet<String>> = HashMap::new();
    for r in &rows {
        let engine: Option<String> = r.get(3);
        ran_on
            .entry(r.get(0))
            .or_default()
            .insert(engine.expect("a succeeded step names its engine"));
    }
    let homes: HashMap<i64, Option<String>> = c
        .query("SELECT id, home_engine FROM tasks", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    for (task, engines) in &ran_on {
        assert_eq!(engines.len(), 1, "task {task} ran on {engines:?}");
        let home = homes[task].clone().expect("a task that ran has a home");
        assert!(
            engines.contains(&home),
            "task {task}: home {home}, ran on {engines:?}"
        );
    }
    let used: HashSet<&String> = ran_on.values().flatten().collect();
    assert!(used.len() >= 2, "one engine ran everything: {used:?}");
    // The branches on the shared remote hold each task's three steps in order.
    for task in ran_on.keys().take(20) {
        let branch = c
            .query_one("SELECT branch FROM tasks WHERE id = $1", &[task])
            .unwrap()
            .get::<_, Option<String>>(0)
            .expect("a task in a git workspace has a branch");
        let file = git(&bare, &["show", &format!("{branch}:work-{task}.txt")]);
        assert_eq!(file, "one\ntwo\nthree\n", "task {task} on {branch}");
    }
    assert!(board.ok(&clones[0], &["db", "verify"]).contains("sound"));
}

/// One step that takes about a second, long enough to be killed in.
const SLOW: &str = r#"{
  "id": "slow",
  "name": "Slow",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "work", "step": {"script": "sleep 1"}},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"},
    {"id": "cancelled", "kind": "cancelled"}
  ]
}"#;

/// Waits until engine name `name` is free again: its last holder stopped, or its heartbeat
/// is a lease old by the database's clock.
fn name_free(c: &mut postgres::Client, name: &str) {
    wait_within(
        &format!("the engine name {name} free"),
        Duration::from_secs(60),
        || {
            c.query_one(
                "SELECT COUNT(*) FROM engines WHERE name = $1 AND stopped_at IS NULL \
                 AND heartbeat_at + lease_ms > CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
                &[&name],
            )
            .map(|r| r.get::<_, i64>(0) == 0)
            .unwrap_or(false)
        },
    );
}

#[test]
fn an_engine_killed_mid_step_twenty_times_loses_nothing() {
    let Some(board) = Board::start() else { return };
    let (steady, victim) = (
        board.workspace(&[("slow.json", SLOW)]),
        board.workspace(&[("slow.json", SLOW)]),
    );
    // The steady engine runs two steps at a time, so new work is left for the victim.
    let config = std::fs::read_to_string(steady.root().join(".baton/config.toml")).unwrap();
    steady.config(&config.replace("max_parallel = 4", "max_parallel = 2"));
    let keeper = board.engine(&steady, "steady");
    board.wait_live("steady");
    let mut c = board.client();
    let victim_runs = |c: &mut postgres::Client| -> i64 {
        c.query_one(
            "SELECT COUNT(*) FROM step_runs WHERE engine = 'victim' AND state = 'running'",
            &[],
        )
        .map(|r| r.get(0))
        .unwrap_or(-1)
    };
    for kill in 0..20 {
        for i in 0..6 {
            let title = format!("task {kill}-{i}");
            board.ok(&steady, &["new", &title, "--pipeline", "slow", "--start"]);
        }
        name_free(&mut c, "victim");
        let mut engine = board.engine(&victim, "victim");
        // Killed while it runs a step of its own.
        wait_within("the victim to run a step", Duration::from_secs(120), || {
            victim_runs(&mut c) > 0
        });
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(engine.id() as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        engine.wait().unwrap();
        // Its steps are taken from it once its lease runs out.
        wait_within(
            "the killed engine's steps reaped",
            Duration::from_secs(60),
            || victim_runs(&mut c) == 0,
        );
    }
    // The victim comes back for good and helps finish.
    name_free(&mut c, "victim");
    let last = board.engine(&victim, "victim");
    wait_within("every task done", Duration::from_secs(300), || {
        board.count("SELECT COUNT(*) FROM tasks WHERE status <> 'done'") == 0
    });
    stop(last);
    stop(keeper);
    assert_eq!(board.count("SELECT COUNT(*) FROM tasks"), 120);
    // Nothing lost: every task done, each after exactly one succeeded step, and each kill
    // left the step it cut off interrupted, not succeeded twice.
    assert_eq!(
        board.count(
            "SELECT COUNT(*) FROM (SELECT task_id FROM step_runs WHERE state = 'succeeded' \
             GROUP BY task_id HAVING COUNT(*) <> 1) d"
        ),
        0
    );
    assert!(
        board.count("SELECT COUNT(*) FROM step_runs WHERE state = 'interrupted'") >= 20,
        "each kill left an interrupted step"
    );
    assert!(
        board.count("SELECT COUNT(*) FROM events WHERE type = 'lease.expired'") >= 20,
        "each kill's steps were reaped after the lease"
    );
    assert!(board.ok(&steady, &["db", "verify"]).contains("sound"));
}

/// A quick first step, then one whose attempt N waits for file `release.N` and writes its
/// execution key.
fn held_pipeline(release: &Path) -> String {
    format!(
        r#"{{"id": "held", "statuses": [
            {{"id": "todo", "kind": "queue"}},
            {{"id": "one", "step": {{"script": "echo one > one.txt"}}}},
            {{"id": "two", "step": {{"script": "while [ ! -e {}.${{BATON_EXECUTION_KEY##*:}} ]; do sleep 0.05; done\necho \"$BATON_EXECUTION_KEY\" > out.txt"}}}},
            {{"id": "done", "kind": "done"}},
            {{"id": "failed", "kind": "failed"}},
            {{"id": "cancelled", "kind": "cancelled"}}
        ]}}"#,
        release.display()
    )
}

fn signal(engine: &std::process::Child, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(engine.id() as i32), sig).unwrap();
}

#[test]
fn a_paused_engines_work_never_reaches_the_shared_branch() {
    let Some(board) = Board::start() else { return };
    let remote = tempfile::tempdir().unwrap();
    let bare = bare_remote(remote.path());
    let release = remote.path().join("release");
    let pipeline = held_pipeline(&release);
    let (a, b) = (clone_on(&board, &bare, "a"), clone_on(&board, &bare, "b"));
    for ws in [&a, &b] {
        ws.pipeline("held.json", &pipeline);
    }
    let first = board.engine(&a, "a");
    board.wait_live("a");
    let id = board.ok(&a, &["new", "paused", "--pipeline", "held", "--start"]);
    let id: i64 = id.trim().parse().unwrap();
    let mut c = board.client();
    let mut running_on = |engine: &str, attempt: i64| {
        c.query_one(
            "SELECT COUNT(*) FROM step_runs WHERE task_id = $1 AND status = 'two' \
             AND attempt = $2 AND engine = $3 AND state = 'running'",
            &[&id, &attempt, &engine],
        )
        .map(|r| r.get::<_, i64>(0) == 1)
        .unwrap_or(false)
    };
    wait_within("step two running on a", Duration::from_secs(60), || {
        running_on("a", 1)
    });
    // a freezes past its lease; b reaps its step and takes the task over.
    signal(&first, nix::sys::signal::Signal::SIGSTOP);
    let second = board.engine(&b, "b");
    wait_within(
        "step two running again on b",
        Duration::from_secs(60),
        || running_on("b", 2),
    );
    // a's attempt finishes while a is frozen; a wakes and finds it lost the step, before
    // b's attempt (the one that counts) ends.
    std::fs::write(release.with_extension("1"), "").unwrap();
    signal(&first, nix::sys::signal::Signal::SIGCONT);
    wait_within(
        "a to notice it lost its lease",
        Duration::from_secs(60),
        || {
            board.count(&format!(
                "SELECT COUNT(*) FROM events WHERE task_id = {id} AND type = 'lease.lost'"
            )) == 1
        },
    );
    std::fs::write(release.with_extension("2"), "").unwrap();
    wait_within("the task done", Duration::from_secs(60), || {
        board.count(&format!(
            "SELECT COUNT(*) FROM tasks WHERE id = {id} AND status = 'done'"
        )) == 1
    });
    stop(first);
    stop(second);
    let branch: String = board
        .client()
        .query_one("SELECT branch FROM tasks WHERE id = $1", &[&id])
        .unwrap()
        .get(0);
    let out = git(&bare, &["show", &format!("{branch}:out.txt")]);
    assert!(out.trim().ends_with(":two:2"), "the remote holds {out:?}");
    let log = git(&bare, &["log", "--format=%s", &branch]);
    assert!(
        !log.contains("step two (attempt 1)"),
        "the paused engine's attempt reached the remote:\n{log}"
    );
}
