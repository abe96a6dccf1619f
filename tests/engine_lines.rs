//! The headless engine prints one line per move (each step's result moves its task), like a
//! CI runner, so a tmux window running `baton engine` shows what happens; `--quiet` keeps
//! it to problems.

mod common;

use common::{GATE, Ws};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Starts `baton engine ARGS` with its stdout read line by line into a channel.
fn engine(ws: &Ws, args: &[&str]) -> (std::process::Child, mpsc::Receiver<String>) {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("baton"))
        .current_dir(ws.root())
        .env_remove("BATON_DIR")
        .arg("engine")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("engine starts");
    let (tx, rx) = mpsc::channel();
    let out = child.stdout.take().unwrap();
    // stderr says when the engine is up: its first line.
    let err = child.stderr.take().unwrap();
    let up = tx.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            let _ = up.send(format!("stderr: {line}"));
        }
    });
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    (child, rx)
}

/// Reads lines until one contains `want`; panics with what was read after 60 s.
fn read_until(rx: &mpsc::Receiver<String>, want: &str) -> Vec<String> {
    let mut seen = Vec::new();
    loop {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => {
                let done = line.contains(want);
                seen.push(line);
                if done {
                    return seen;
                }
            }
            Err(_) => panic!("no line with {want:?}; read {seen:#?}"),
        }
    }
}

#[test]
fn the_headless_engine_prints_each_move_once() {
    let ws = Ws::new();
    ws.pipeline("gate.json", GATE);
    let (engine, rx) = engine(&ws, &[]);
    read_until(&rx, "stderr: baton engine running");
    let id = ws.new_task("gate", "placeholder");
    // No front end takes such a title now; an older board may hold one.
    ws.store_raw_title(id, "Print \x1b[31mme\x1b[0m");
    ws.ok(&["start", &id.to_string()]);
    let seen = read_until(&rx, "→ review");
    common::stop(engine);
    let moves: Vec<&String> = seen.iter().filter(|l| !l.starts_with("stderr:")).collect();
    for want in [
        format!("#{id} Print me: todo → build (start"),
        format!("#{id} Print me: build → review (success)"),
    ] {
        assert!(
            moves.iter().any(|l| l.contains(&want)),
            "{want}: {moves:#?}"
        );
    }
    assert!(moves.iter().all(|l| !l.contains('\x1b')), "{moves:#?}");
    let builds = moves
        .iter()
        .filter(|l| l.contains("build → review"))
        .count();
    assert_eq!(builds, 1, "{moves:#?}");
}

#[test]
fn exit_when_idle_prints_the_last_move_and_quiet_prints_none() {
    for quiet in [false, true] {
        let ws = Ws::new();
        ws.pipeline("gate.json", GATE);
        let id = ws.new_task("gate", "Quiet");
        ws.ok(&["start", &id.to_string()]);
        let mut args = vec!["--exit-when-idle"];
        if quiet {
            args.push("--quiet");
        }
        let (mut engine, rx) = engine(&ws, &args);
        assert!(engine.wait().unwrap().success());
        assert_eq!(ws.show(id)["status"], "review");
        // Both pipes end with the engine, and with them the channel.
        let lines: Vec<String> = rx.iter().filter(|l| !l.starts_with("stderr:")).collect();
        // The move that made the engine idle is printed before it exits, unless quiet.
        let last = lines.iter().any(|l| l.contains("build → review (success)"));
        assert_eq!(last, !quiet, "quiet {quiet}: {lines:#?}");
        if quiet {
            assert!(lines.is_empty(), "{lines:#?}");
        }
    }
}

/// Quiet, an engine with nothing going wrong prints nothing on either stream, not even the
/// line saying it runs, nor that it stops when nothing runs.
#[test]
fn quiet_says_nothing_from_its_start_when_nothing_goes_wrong() {
    let ws = Ws::new();
    ws.pipeline("gate.json", GATE);
    let (engine, rx) = engine(&ws, &["--quiet"]);
    let id = ws.new_task("gate", "Silent");
    ws.ok(&["start", &id.to_string()]);
    // Up and working once it has moved the task to its gate.
    common::wait_for("the task at its gate", || ws.show(id)["status"] == "review");
    common::stop(engine);
    // Both pipes end with the engine, and with them the channel.
    let lines: Vec<String> = rx.iter().collect();
    assert!(lines.is_empty(), "{lines:#?}");
}

/// `baton engine` running one task whose step holds until the test writes to the
/// workspace's `go` pipe: the engine, its lines and the task's id.
fn holding(ws: &Ws) -> (std::process::Child, mpsc::Receiver<String>, i64) {
    ws.pipeline(
        "hold.json",
        r#"{"id": "hold", "name": "Hold", "statuses": [
  {"id": "q", "label": "Queue", "kind": "queue"},
  {"id": "s", "label": "Step", "step": {"run": "echo holding; read line < \"$BATON_WORKSPACE/go\""}},
  {"id": "done", "label": "Done", "kind": "done"},
  {"id": "failed", "label": "Failed", "kind": "failed"}]}"#,
    );
    nix::unistd::mkfifo(&ws.root().join("go"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let (engine, rx) = engine(ws, &[]);
    let id = ws.new_task("hold", "held");
    ws.ok(&["start", &id.to_string()]);
    common::wait_for("the step to run", || {
        ws.ok(&["logs", &id.to_string()]).contains("holding")
    });
    (engine, rx, id)
}

/// Stopped while a step runs with `shutdown = "drain"`, the engine says it waits for the
/// step; a second ctrl+c interrupts it, for `baton resume`.
#[test]
fn a_second_ctrl_c_interrupts_what_a_draining_stop_waits_for() {
    let ws = Ws::new();
    ws.config("shutdown = \"drain\"\n");
    let (mut engine, rx, id) = holding(&ws);
    let pid = nix::unistd::Pid::from_raw(engine.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    read_until(
        &rx,
        "shutting down: waiting for 1 running step(s) to finish (drain; a second ctrl+c interrupts them)",
    );
    assert!(
        engine.try_wait().unwrap().is_none(),
        "it waits for the step"
    );
    // Not a pause to wait for anything: a person's second press comes later than a copy of
    // the first that a wrapper forwards, which the engine takes as the same press.
    std::thread::sleep(Duration::from_millis(300));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    read_until(&rx, "shutting down: interrupting 1 running step(s)");
    assert!(engine.wait().unwrap().success());
    assert_eq!(ws.show(id)["state"], "interrupted");
}

/// Under a wrapper (an npm script, `tini -g`) one ctrl+c reaches the engine twice at once:
/// from the terminal and forwarded. The copy is the same press: the stop keeps draining.
#[test]
fn a_ctrl_c_forwarded_at_once_is_not_a_second_one() {
    let ws = Ws::new();
    ws.config("shutdown = \"drain\"\n");
    let (mut engine, rx, id) = holding(&ws);
    let pid = nix::unistd::Pid::from_raw(engine.id() as i32);
    // Back to back, as a wrapper forwards them; two different stop signals, which the
    // system never merges into one (two SIGINTs may reach the engine as one, testing
    // nothing), and both count as presses.
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let mut lines = read_until(
        &rx,
        "shutting down: waiting for 1 running step(s) to finish",
    );
    // The engine logs that it took the copy as the same press; a second press would have it
    // say that it interrupts the step.
    let log = ws.root().join(".baton/logs/engine.log");
    common::wait_for("the copy handled", || {
        lines.extend(rx.try_iter());
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("the same one, forwarded"))
            || lines.iter().any(|l| l.contains("interrupting"))
    });
    assert!(
        !lines.iter().any(|l| l.contains("interrupting")),
        "{lines:#?}"
    );
    std::fs::write(ws.root().join("go"), "go\n").unwrap();
    assert!(engine.wait().unwrap().success());
    lines.extend(rx.iter());
    assert!(
        !lines.iter().any(|l| l.contains("interrupting")),
        "{lines:#?}"
    );
    assert_eq!(ws.show(id)["state"], "done", "{lines:#?}");
}

/// Quiet, a failed step's move (with why) and a failed hook still reach stderr; nothing
/// reaches stdout.
#[test]
fn quiet_still_says_what_failed() {
    let ws = Ws::new();
    ws.pipeline(
        "f.json",
        r#"{"id": "f", "statuses": [
  {"id": "todo", "kind": "queue"},
  {"id": "work", "step": {"run": "exit 3"}},
  {"id": "done", "kind": "done"},
  {"id": "failed", "kind": "failed"},
  {"id": "cancelled", "kind": "cancelled"}],
 "transitions": [{"from": "work", "to": "failed", "on": "failure",
   "hooks": [{"run": "echo the hook broke >&2; exit 4"}]}]}"#,
    );
    let id = ws.new_task("f", "Breaks");
    ws.ok(&["start", &id.to_string()]);
    let (mut engine, rx) = engine(&ws, &["--exit-when-idle", "--quiet"]);
    assert!(engine.wait().unwrap().success());
    let lines: Vec<String> = rx.iter().collect();
    assert!(
        lines.iter().all(|l| l.starts_with("stderr:")),
        "stdout stays empty: {lines:#?}"
    );
    assert!(
        // With the step's reason: a CI log shows why, not only that it failed.
        lines
            .iter()
            .any(|l| l.contains("work → failed (failure: exited with code 3)")),
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains(&format!("task {id}: error: hook run"))
                && l.contains("the hook broke")),
        "{lines:#?}"
    );
}

/// A step that ends while another program holds the board's write past the busy timeout
/// keeps its result: the engine says so, waits, and records it once let in.
#[test]
fn a_result_waits_for_a_write_another_program_holds() {
    let ws = Ws::new();
    let (engine, rx, id) = holding(&ws);
    // Another program takes the board's write and keeps it.
    let other = rusqlite::Connection::open(ws.root().join(".baton/baton.db")).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    std::fs::write(ws.root().join("go"), "go\n").unwrap();
    read_until(
        &rx,
        "ended while another program holds the board's database: its result waits",
    );
    other.execute_batch("COMMIT").unwrap();
    common::wait_for("the result recorded", || ws.show(id)["state"] == "done");
    common::stop(engine);
    let shown = ws.show(id);
    assert_eq!(shown["steps"][0]["state"], "succeeded", "{shown}");
}
