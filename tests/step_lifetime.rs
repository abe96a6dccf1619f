//! Nothing a step or a `run` hook starts outlives it: abort, a time-out and a killed
//! engine end every process holding its execution key, including one started in a session
//! of its own (`setsid`), which no process-group signal reaches.

mod common;
use common::{Ws, alive, spawn_engine, stop, wait_for, wait_within};
use std::path::Path;
use std::time::Duration;

/// Starts a detached grandchild (its own session, as Claude runs its shell commands), then
/// waits; on a second attempt it finishes. Its key and pids go to files for the test.
const DETACHED: &str = r#"setsid sh -c 'echo $$ > detached.pid; exec tail -f /dev/null' >/dev/null 2>&1 &
echo "$BATON_EXECUTION_KEY" >> keys
echo $$ > step.pid
if [ "$BATON_ATTEMPT" = 1 ]; then sleep 300; fi"#;

fn pipeline(step: serde_json::Value) -> String {
    serde_json::json!({"id": "lasting", "statuses": [
        {"id": "todo", "kind": "queue"},
        {"id": "work", "step": step},
        {"id": "done", "kind": "done"},
        {"id": "failed", "kind": "failed"},
        {"id": "cancelled", "kind": "cancelled"}
    ]})
    .to_string()
}

/// Every process of this user whose environment holds the key of a step of `ws` (keys are
/// unique only within a workspace, and tests run side by side).
fn holders(ws: &Ws, key: &str) -> Vec<u32> {
    let root = std::fs::canonicalize(ws.root()).unwrap();
    let needles = [
        format!("BATON_EXECUTION_KEY={key}"),
        format!("BATON_WORKSPACE={}", root.display()),
    ];
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| alive(*pid as i32))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
                needles
                    .iter()
                    .all(|n| env.split(|b| *b == 0).any(|kv| kv == n.as_bytes()))
            })
        })
        .collect()
}

fn pid_in(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Waits until the step (attempt `n`) has started its detached grandchild; its key.
fn started(ws: &Ws, n: usize) -> String {
    let root = ws.root();
    wait_for("the step and its detached grandchild to start", || {
        let keys = std::fs::read_to_string(root.join("keys")).unwrap_or_default();
        keys.lines().count() >= n
            && pid_in(&root.join("step.pid")).is_some()
            && pid_in(&root.join("detached.pid")).is_some_and(alive)
    });
    let keys = std::fs::read_to_string(root.join("keys")).unwrap();
    let key = keys.lines().nth(n - 1).unwrap().to_string();
    assert!(
        !holders(ws, &key).is_empty(),
        "the step's processes carry its key"
    );
    key
}

fn gone(ws: &Ws, key: &str, what: &str) {
    wait_within(what, Duration::from_secs(15), || {
        holders(ws, key).is_empty()
    });
}

#[test]
fn abort_ends_a_grandchild_in_its_own_session() {
    let ws = Ws::new();
    ws.pipeline(
        "lasting.json",
        &pipeline(serde_json::json!({"script": DETACHED})),
    );
    ws.config("kill_grace = \"2s\"\n");
    let id = ws.new_task("lasting", "abort me");
    let engine = spawn_engine(&ws);
    ws.ok(&["start", &id.to_string()]);
    let key = started(&ws, 1);
    let said = ws.ok(&["abort", &id.to_string()]);
    assert!(said.contains("cancelled"), "{said}");
    gone(
        &ws,
        &key,
        "every process with the step's key to end after abort",
    );
    assert_eq!(ws.show(id)["state"], "cancelled");
    stop(engine);
}

#[test]
fn a_time_out_ends_a_grandchild_in_its_own_session() {
    let ws = Ws::new();
    ws.pipeline(
        "lasting.json",
        &pipeline(serde_json::json!({"script": DETACHED, "timeout": "1s"})),
    );
    ws.config("kill_grace = \"1s\"\n");
    let id = ws.new_task("lasting", "too slow");
    let engine = spawn_engine(&ws);
    ws.ok(&["start", &id.to_string()]);
    let key = started(&ws, 1);
    wait_for("the step to time out", || {
        ws.show(id)["steps"][0]["state"] == "timed_out"
    });
    gone(
        &ws,
        &key,
        "every process with the step's key to end at the time-out",
    );
    stop(engine);
}

/// A step that exits at once while its detached grandchild runs on: the step's guard must
/// not report it as having left nothing, and the grandchild ends with the step.
#[test]
fn a_step_that_finishes_ends_its_grandchild_in_its_own_session() {
    let ws = Ws::new();
    let script = r#"setsid sh -c 'echo $$ > detached.pid; exec tail -f /dev/null' >/dev/null 2>&1 &
echo "$BATON_EXECUTION_KEY" >> keys
while [ ! -s detached.pid ]; do sleep 0.01; done"#;
    ws.pipeline(
        "lasting.json",
        &pipeline(serde_json::json!({"script": script})),
    );
    let id = ws.new_task("lasting", "leave a child");
    let engine = spawn_engine(&ws);
    ws.ok(&["start", &id.to_string()]);
    wait_for("the step to succeed", || ws.show(id)["state"] == "done");
    let keys = std::fs::read_to_string(ws.root().join("keys")).unwrap();
    let key = keys.lines().next().unwrap().to_string();
    gone(&ws, &key, "the grandchild to end with its step");
    let detached = pid_in(&ws.root().join("detached.pid")).expect("its pid");
    assert!(
        !alive(detached),
        "the detached grandchild outlived its step"
    );
    stop(engine);
}

/// The engine is killed with SIGKILL: nothing can read the step any more, so its guard ends
/// it (the detached grandchild too) at once, not when a next engine starts. The step is
/// interrupted as before, and runs again to success when resumed.
#[test]
fn a_killed_engine_takes_its_steps_with_it_and_resume_runs_them_again() {
    let ws = Ws::new();
    ws.pipeline(
        "lasting.json",
        &pipeline(serde_json::json!({"script": DETACHED})),
    );
    ws.config("kill_grace = \"2s\"\n");
    let id = ws.new_task("lasting", "orphan");
    let mut engine = spawn_engine(&ws);
    ws.ok(&["start", &id.to_string()]);
    let key = started(&ws, 1);
    engine.kill().unwrap();
    engine.wait().unwrap();
    gone(&ws, &key, "the step's processes to end with their engine");

    ws.drain();
    assert_eq!(ws.show(id)["state"], "interrupted");
    ws.ok(&["resume", &id.to_string()]);
    ws.drain();
    let shown = ws.show(id);
    assert_eq!(shown["state"], "done", "{shown:#}");
    let keys = std::fs::read_to_string(ws.root().join("keys")).unwrap();
    let second = keys.lines().nth(1).expect("the step ran again");
    assert!(
        holders(&ws, second).is_empty(),
        "a finished step leaves no process behind"
    );
}

/// A `run` hook whose engine is killed: its first attempt (and what it started in its own
/// session) is gone before the next engine runs it again, so two never run at once.
#[test]
fn a_run_hook_killed_with_its_engine_ends_before_it_runs_again() {
    let ws = Ws::new();
    let hook = r#"for p in $(cat hook.pids 2>/dev/null); do kill -0 "$p" 2>/dev/null && echo "$p" >> overlap; done
echo $$ >> hook.pids
setsid sh -c 'echo $$ > hookchild.pid; exec tail -f /dev/null' >/dev/null 2>&1 &
echo "$BATON_HOOK_ATTEMPT" >> hook.log
while [ ! -f go ]; do sleep 0.05; done"#;
    ws.pipeline(
        "hooked.json",
        &serde_json::json!({"id": "hooked", "statuses": [
            {"id": "todo", "kind": "queue"},
            {"id": "review", "kind": "gate"},
            {"id": "done", "kind": "done"},
            {"id": "failed", "kind": "failed"},
            {"id": "cancelled", "kind": "cancelled"}
        ], "transitions": [
            {"from": "todo", "to": "review", "on": "start"},
            {"from": "review", "to": "done", "on": "approve", "hooks": [{"run": hook}]}
        ]})
        .to_string(),
    );
    ws.config("kill_grace = \"2s\"\n");
    let id = ws.new_task("hooked", "ship");
    ws.ok(&["start", &id.to_string()]);
    let mut engine = spawn_engine(&ws);
    wait_for("the engine to listen", || {
        ws.root().join(".baton/engine.sock").exists()
    });
    ws.ok(&["approve", &id.to_string()]);
    let log = ws.root().join("hook.log");
    wait_for("the hook and its detached child to start", || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.lines().count() == 1)
            && pid_in(&ws.root().join("hookchild.pid")).is_some_and(alive)
    });
    let first_child = pid_in(&ws.root().join("hookchild.pid")).unwrap();
    engine.kill().unwrap();
    engine.wait().unwrap();

    let engine = spawn_engine(&ws);
    wait_for("the hook to run again", || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.lines().count() == 2)
    });
    let overlap = std::fs::read_to_string(ws.root().join("overlap")).unwrap_or_default();
    assert!(overlap.is_empty(), "the first attempt still ran: {overlap}");
    assert!(
        !alive(first_child),
        "the first attempt's detached child is gone"
    );
    std::fs::write(ws.root().join("go"), "").unwrap();
    wait_for("the hook's result to be recorded", || {
        ws.show(id)["history"]
            .as_array()
            .and_then(|h| h.last())
            .and_then(|h| h["hooks"].as_array().cloned())
            .is_some_and(|a| a.len() == 1 && a[0]["state"] == "ok")
    });
    stop(engine);
}

/// The database refuses writes (a full disk, simulated by triggers): the abort cannot be
/// queued as a command nor recorded, yet the step stops at once; the abort is recorded
/// once writes work again.
#[test]
fn abort_stops_the_step_while_the_database_cannot_be_written() {
    let ws = Ws::new();
    ws.pipeline(
        "lasting.json",
        &pipeline(serde_json::json!({"script": DETACHED})),
    );
    ws.config("kill_grace = \"2s\"\n");
    let id = ws.new_task("lasting", "full disk");
    let engine = spawn_engine(&ws);
    wait_for("the engine to listen", || {
        ws.root().join(".baton/engine.sock").exists()
    });
    ws.ok(&["start", &id.to_string()]);
    let key = started(&ws, 1);
    let step_pid = pid_in(&ws.root().join("step.pid")).unwrap();
    let raw = rusqlite::Connection::open(ws.root().join(".baton/baton.db")).unwrap();
    raw.busy_timeout(Duration::from_secs(10)).unwrap();
    raw.execute_batch(
        "CREATE TRIGGER full_commands BEFORE INSERT ON commands \
           BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;
         CREATE TRIGGER full_tasks BEFORE UPDATE ON tasks \
           BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;",
    )
    .unwrap();
    let said = ws.ok(&["abort", &id.to_string(), "--note", "out of space"]);
    assert!(said.contains("stopped"), "{said}");
    gone(
        &ws,
        &key,
        "the step's processes to end though nothing could be written",
    );
    assert!(!alive(step_pid));
    assert_eq!(ws.show(id)["state"], "running", "nothing was recorded yet");

    raw.execute_batch("DROP TRIGGER full_commands; DROP TRIGGER full_tasks;")
        .unwrap();
    wait_for("the abort to be recorded", || {
        ws.show(id)["state"] == "cancelled"
    });
    stop(engine);
}

/// An abort the engine refuses (here the task's status is not in its pipeline, as after a
/// hand edit of the database) is refused in words and leaves the step running: it goes on
/// to finish, and the task moves on as if no abort had been asked for.
#[test]
fn a_refused_abort_leaves_the_step_running() {
    let ws = Ws::new();
    let waits = "echo $$ > step.pid\nwhile [ ! -f go ]; do sleep 0.05; done";
    ws.pipeline(
        "lasting.json",
        &pipeline(serde_json::json!({"script": waits})),
    );
    ws.config("kill_grace = \"2s\"\n");
    let id = ws.new_task("lasting", "keep going");
    let engine = spawn_engine(&ws);
    wait_for("the engine to listen", || {
        ws.root().join(".baton/engine.sock").exists()
    });
    ws.ok(&["start", &id.to_string()]);
    wait_for("the step to start", || {
        pid_in(&ws.root().join("step.pid")).is_some_and(alive)
    });
    let raw = rusqlite::Connection::open(ws.root().join(".baton/baton.db")).unwrap();
    raw.busy_timeout(Duration::from_secs(10)).unwrap();
    raw.execute("UPDATE tasks SET status = 'nowhere' WHERE id = ?1", [id])
        .unwrap();
    let out = ws.baton(&["abort", &id.to_string()]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the abort was refused: {err}");
    assert!(err.contains("nowhere"), "{err}");

    raw.execute("UPDATE tasks SET status = 'work' WHERE id = ?1", [id])
        .unwrap();
    std::fs::write(ws.root().join("go"), "").unwrap();
    wait_for("the step to finish and the task to move on", || {
        ws.show(id)["state"] != "running"
    });
    let shown = ws.show(id);
    assert_eq!(shown["state"], "done", "the step ran to its end: {shown:#}");
    stop(engine);
}

/// An agent that exits without reading its prompt (a refused login, say) ends its own
/// step only. The rest of a prompt larger than a pipe holds meets a closed pipe; that
/// write used to end the engine by SIGPIPE, and with it every other step.
#[test]
fn an_agent_that_does_not_read_its_prompt_does_not_end_the_engine() {
    let agent = serde_json::json!({
        "id": "quits", "backend": "command", "format": "claude-stream-json",
        "prompt_via": "stdin", "argv": ["sh", "-c", "exit 3"],
    });
    let (ws, out) = run_agent(agent, "x".repeat(1 << 20));
    let shown = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(shown.contains("(failed)"), "{out:?}");
    let logs = ws.ok(&["logs", "1"]);
    assert!(logs.contains("exited with code 3"), "{logs}");
}

/// `baton run --wait` of a one-step task whose step is `agent` (a profile, saved under its
/// id), with `prompt` on standard input: the workspace, and how the command ended.
fn run_agent(agent: serde_json::Value, prompt: String) -> (Ws, std::process::Output) {
    let ws = Ws::new();
    let id = agent["id"].as_str().unwrap().to_string();
    let profile = ws.root().join(format!(".baton/agents/{id}.json"));
    std::fs::write(profile, agent.to_string()).unwrap();
    let step = pipeline(serde_json::json!({ "agent": id }));
    ws.pipeline("lasting.json", &step);
    let out = ws
        .baton(&["run", "lasting", "--title", "t", "--prompt", "-", "--wait"])
        .write_stdin(prompt)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    (ws, out)
}

/// A model server that answers before it has read the whole request (an HTTP 413 for a
/// prompt too large) and closes ends the step, not the engine: the rest of the request
/// meets a reset connection, and that write used to end baton by SIGPIPE.
#[test]
fn a_model_server_that_answers_before_reading_the_prompt_does_not_end_the_engine() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut seen = Vec::new();
            let mut buf = [0u8; 4096];
            while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => seen.extend_from_slice(&buf[..n]),
                }
            }
            let _ = conn.write_all(
                b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
            // Closed with the body unread: the kernel answers what comes next with a reset.
            let _ = conn.shutdown(std::net::Shutdown::Write);
        }
    });
    let agent = serde_json::json!({
        "id": "remote", "backend": "openai",
        "url": format!("http://127.0.0.1:{port}/v1"), "model": "m",
    });
    let (_ws, out) = run_agent(agent, "y".repeat(4 << 20));
    let shown = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(shown.contains("(failed)"), "{out:?}");
}
