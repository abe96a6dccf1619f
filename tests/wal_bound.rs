//! A busy engine's write-ahead log: steps that end every millisecond never give a
//! background checkpoint a pause to catch up in, and the log grew for as long as they ran
//! (80 MB over 1,000 steps). Past about 16 MB the checkpointer makes it start over.

mod common;

use common::Ws;
use std::time::Duration;

const STEPS: usize = 1500;

/// A pipeline of `STEPS` statuses, each a `true` step.
fn long_pipeline() -> String {
    let mut statuses = vec![r#"{"id": "q", "kind": "queue"}"#.to_string()];
    statuses.extend((1..=STEPS).map(|n| format!(r#"{{"id": "s{n}", "step": {{"run": "true"}}}}"#)));
    statuses.extend(
        ["done", "failed", "cancelled"].map(|k| format!(r#"{{"id": "{k}", "kind": "{k}"}}"#)),
    );
    format!(r#"{{"id": "long", "statuses": [{}]}}"#, statuses.join(","))
}

#[test]
fn a_busy_engines_write_ahead_log_stays_bounded() {
    let ws = Ws::new();
    ws.pipeline("long.json", &long_pipeline());
    let wal = ws.root().join(".baton/baton.db-wal");
    let mut run = std::process::Command::new(assert_cmd::cargo::cargo_bin("baton"))
        .current_dir(ws.root())
        .env_remove("BATON_DIR")
        // The board is this workspace's SQLite file, whatever the environment says.
        .env_remove("BATON_DATABASE_URL")
        .env("XDG_CONFIG_HOME", ws.root().join("no-user-config"))
        .env("NO_COLOR", "1")
        .args(["run", "long", "--title", "many steps", "--wait"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start baton run");
    // The log's size, sampled until the run ends (a measurement, not a wait for an event).
    let mut largest = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    let status = loop {
        largest = largest.max(std::fs::metadata(&wal).map_or(0, |m| m.len()));
        if let Some(status) = run.try_wait().expect("wait for baton run") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = run.kill();
            panic!("baton run did not end within 180 s (the log reached {largest} bytes)");
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let out = run.wait_with_output().expect("baton run's output");
    assert!(status.success(), "baton run ended {status}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("done (done)"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // The log did reach the size at which it starts over (a run that wrote elsewhere, or
    // not at all, would read 0 here).
    assert!(
        largest >= 16 << 20,
        "the write-ahead log reached only {largest} bytes"
    );
    // About 80 KB of log a step: 120 MB had it never started over.
    assert!(
        largest < 40 << 20,
        "the write-ahead log grew to {largest} bytes over {STEPS} steps"
    );
}
