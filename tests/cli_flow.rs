//! The headless CLI end to end: gates, approvals, logs, task text safety, races, validation.

mod common;
use common::{GATE, Ws};

#[test]
fn gate_pipeline_waits_and_approve_finishes_it() {
    let ws = Ws::new();
    ws.pipeline("gate.json", GATE);
    let out = ws
        .baton(&["run", "gate", "--title", "first", "--wait", "--json"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "waits at a gate: {out:?}");
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["status"], "review");
    assert_eq!(shown["state"], "waiting");
    assert_eq!(shown["steps"][0]["state"], "succeeded");
    assert_eq!(shown["steps"][0]["exit_code"], 0);
    let id = shown["id"].as_i64().unwrap();

    ws.ok(&["approve", &id.to_string()]);
    let shown = ws.show(id);
    assert_eq!(shown["status"], "done");
    assert_eq!(shown["state"], "done");
    let triggers: Vec<&str> = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["trigger"].as_str().unwrap())
        .collect();
    assert_eq!(triggers, ["create", "start", "success", "approve"]);
}

#[test]
fn logs_hold_stdout_and_stderr() {
    let ws = Ws::new();
    ws.pipeline("gate.json", GATE);
    let out = ws
        .baton(&["run", "gate", "--title", "logs", "--wait"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let logs = ws.ok(&["logs", "1"]);
    assert!(logs.contains("out-line"), "{logs}");
    assert!(logs.contains("err-line"), "{logs}");
}

#[test]
fn hostile_title_reaches_the_step_intact_and_runs_nothing() {
    let ws = Ws::new();
    ws.pipeline("gate.json", GATE);
    let title = r#"x"; touch pwned; echo '$(touch pwned2)' `touch pwned3`"#;
    let out = ws
        .baton(&["run", "gate", "--title", title, "--wait"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let written = std::fs::read_to_string(ws.root().join("title.txt")).unwrap();
    assert_eq!(written, title);
    for f in ["pwned", "pwned2", "pwned3"] {
        assert!(!ws.root().join(f).exists(), "{f} was created");
    }
}

#[test]
fn reject_note_reaches_the_next_step() {
    let ws = Ws::new();
    ws.pipeline("gate.json", GATE);
    let out = ws
        .baton(&["run", "gate", "--title", "t", "--wait"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    ws.ok(&["reject", "1", "--note", "use smaller functions"]);
    ws.drain();
    let note = std::fs::read_to_string(ws.root().join("note.txt")).unwrap();
    assert_eq!(note, "use smaller functions");
    let shown = ws.show(1);
    assert_eq!(shown["status"], "review");
    assert_eq!(shown["steps"].as_array().unwrap().len(), 2);
    assert_eq!(shown["steps"][1]["attempt"], 2);
}

#[test]
fn racing_approvals_move_the_task_once() {
    let ws = Ws::new();
    ws.pipeline("gate.json", GATE);
    for round in 0..5 {
        let out = ws
            .baton(&["run", "gate", "--title", "race", "--wait"])
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let id = (round + 1).to_string();
        let spawn = || {
            let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("baton"));
            cmd.current_dir(ws.root())
                .args(["approve", &id])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            cmd.spawn().unwrap()
        };
        let (a, b) = (spawn(), spawn());
        let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
        let wins = [&a, &b].iter().filter(|o| o.status.success()).count();
        assert_eq!(wins, 1, "exactly one approval wins: {a:?} {b:?}");
        let loser = if a.status.success() { &b } else { &a };
        let err = String::from_utf8_lossy(&loser.stderr);
        assert!(err.contains("is no longer at review"), "{err}");
        let approvals = ws.show(round + 1)["history"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|h| h["trigger"] == "approve")
            .count();
        assert_eq!(approvals, 1);
    }
}

#[test]
fn malformed_pipeline_gets_a_located_error() {
    let ws = Ws::new();
    let path = ws.pipeline(
        "broken.json",
        "{\n  \"id\": \"x\",\n  \"statuses\": [\n    {\"id\": \"a\" \"kind\": \"queue\"}\n  ]\n}\n",
    );
    let out = ws.baton(&["pipelines", "validate"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("{}:4:", path.display())), "{err}");
}

#[test]
fn semantic_errors_are_all_reported() {
    let ws = Ws::new();
    ws.pipeline(
        "bad.json",
        r#"{"id": "bad", "name": "Bad",
  "statuses": [
    {"id": "a", "kind": "queue"},
    {"id": "a", "kind": "gate"},
    {"id": "s", "step": {"python": "x"}}
  ],
  "transitions": [{"from": "a", "to": "nowhere", "on": "finish"}]
}"#,
    );
    let out = ws.baton(&["pipelines", "validate"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    for needle in ["duplicate", "nowhere", "finish", "python", "terminal"] {
        assert!(err.contains(needle), "missing {needle}: {err}");
    }
}

#[test]
fn unknown_task_and_no_workspace_get_plain_answers() {
    let ws = Ws::new();
    let out = ws.baton(&["show", "42"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("task 42 does not exist"), "{err}");

    let empty = tempfile::tempdir().unwrap();
    let out = assert_cmd::Command::cargo_bin("baton")
        .unwrap()
        .current_dir(empty.path())
        .env_remove("BATON_DIR")
        .args(["list"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("baton init"));
}

#[test]
fn list_json_has_the_contract_shape() {
    let ws = Ws::new();
    ws.pipeline("gate.json", GATE);
    let a = ws.new_task("gate", "older");
    let b = ws.new_task("gate", "newer");
    let list: serde_json::Value = serde_json::from_str(&ws.ok(&["list", "--json"])).unwrap();
    let items = list.as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["id"], b);
    assert_eq!(items[1]["id"], a);
    let mut keys: Vec<_> = items[0].as_object().unwrap().keys().cloned().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "by",
            "created_by",
            "id",
            "pipeline",
            "state",
            "status",
            "title",
            "updated_at"
        ]
    );
    assert_eq!(items[0]["state"], "idle");
}

#[test]
fn secret_values_never_reach_the_log_or_the_database() {
    let ws = Ws::new();
    ws.pipeline(
        "leak.json",
        r#"{"id": "leak", "name": "Leak",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "work", "step": {"run": "echo \"the key is $MY_API_KEY\"; echo \"$MY_API_KEY\" >&2"}},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"}
  ]}"#,
    );
    let secret = "sk-test-0123456789abcdef";
    let out = ws
        .baton(&["run", "leak", "--title", "t", "--wait"])
        .env("MY_API_KEY", secret)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let logs = ws.ok(&["logs", "1"]);
    assert!(logs.contains("the key is [redacted]"), "{logs}");
    assert!(!logs.contains(secret));
    for f in ["baton.db", "baton.db-wal"] {
        if let Ok(bytes) = std::fs::read(ws.root().join(".baton").join(f)) {
            let hit = bytes.windows(secret.len()).any(|w| w == secret.as_bytes());
            assert!(!hit, "the secret is in {f}");
        }
    }
}

#[test]
fn hooks_run_after_the_move_and_a_failing_hook_never_rolls_it_back() {
    let ws = Ws::new();
    ws.pipeline(
        "hooks.json",
        r#"{"id": "hooks", "name": "Hooks",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "review", "kind": "gate"},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"}
  ],
  "transitions": [
    {"from": "review", "to": "done", "on": "approve", "hooks": [
      {"run": "printf '%s→%s' \"$BATON_FROM\" \"$BATON_TO\" > hook.txt"},
      {"run": "exit 3"},
      {"start_task": {"pipeline": "hooks", "title": "follow-up of #{{id}}"}}
    ]}
  ]}"#,
    );
    let id = ws.new_task("hooks", "t");
    ws.ok(&["start", &id.to_string()]);
    ws.ok(&["approve", &id.to_string()]);
    let shown = ws.show(id);
    assert_eq!(
        shown["status"], "done",
        "a failed hook does not roll the move back"
    );
    assert_eq!(
        std::fs::read_to_string(ws.root().join("hook.txt")).unwrap(),
        "review→done"
    );
    let human = ws.ok(&["show", &id.to_string()]);
    assert!(human.contains("hook run: `exit 3` exited 3"), "{human}");
    let list: serde_json::Value = serde_json::from_str(&ws.ok(&["list", "--json"])).unwrap();
    let follow = list
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["title"] == "follow-up of #1");
    assert_eq!(
        follow.expect("start_task created a task")["status"],
        "review"
    );
}

#[test]
fn a_breakpoint_pauses_before_the_step_until_continue() {
    let ws = Ws::new();
    ws.pipeline("gate.json", GATE);
    let id = ws.new_task("gate", "paused").to_string();
    ws.ok(&["break", &id, "build"]);
    ws.ok(&["start", &id]);
    ws.drain();
    let shown = ws.show(1);
    assert_eq!(shown["status"], "build");
    assert_eq!(shown["state"], "waiting");
    assert_eq!(
        shown["steps"].as_array().unwrap().len(),
        0,
        "the step did not run"
    );
    assert!(!ws.root().join("title.txt").exists());
    ws.ok(&["continue", &id]);
    ws.drain();
    assert_eq!(ws.show(1)["status"], "review");
    assert!(ws.root().join("title.txt").exists());
}

#[test]
fn move_follows_the_pipeline_and_refuses_plainly() {
    let ws = Ws::new();
    ws.pipeline(
        "m.json",
        r#"{"id": "m", "name": "M",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "doing", "kind": "gate"},
    {"id": "done", "kind": "done"},
    {"id": "cancelled", "kind": "cancelled"}
  ],
  "transitions": [
    {"from": "*", "to": "todo", "on": "manual", "label": "Back to backlog"},
    {"from": "doing", "to": "done", "on": "manual", "guards": [{"max_visits": 0}]}
  ]}"#,
    );
    let id = ws.new_task("m", "t").to_string();
    ws.ok(&["start", &id]);
    let out = ws.baton(&["move", &id, "done"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("max_visits"),
        "names the blocking guard: {err}"
    );
    let out = ws.baton(&["move", &id, "nowhere"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("has no status `nowhere`"));
    ws.ok(&["move", &id, "todo", "--note", "not now"]);
    let shown = ws.show(1);
    assert_eq!(shown["status"], "todo");
    let last = shown["history"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["trigger"], "manual");
    assert_eq!(last["reason"], "not now");
}

#[test]
fn a_webhook_hook_posts_the_move() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let receiver = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        // Read headers and the JSON body (the body ends with the closing brace).
        while !buf.ends_with(b"}") {
            let n = conn.read(&mut chunk).unwrap();
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        conn.write_all(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n")
            .unwrap();
        String::from_utf8(buf).unwrap()
    });
    let ws = Ws::new();
    ws.pipeline(
        "wh.json",
        &r#"{"id": "wh", "name": "Webhook",
  "statuses": [{"id": "todo", "kind": "queue"}, {"id": "review", "kind": "gate"}, {"id": "done", "kind": "done"}],
  "transitions": [{"from": "review", "to": "done", "on": "approve", "hooks": [{"webhook": {"url": "URL"}}]}]}"#
            .replace("URL", &url),
    );
    let id = ws.new_task("wh", "hooked").to_string();
    ws.ok(&["start", &id]);
    // Through a running engine: its hooks run on the blocking pool.
    let engine = common::spawn_engine(&ws);
    ws.ok(&["approve", &id]);
    let request = receiver.join().unwrap();
    common::stop(engine);
    assert!(request.starts_with("POST /hook"), "{request}");
    let body = &request[request.find("\r\n\r\n").unwrap() + 4..];
    let json: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(json["from"], "review");
    assert_eq!(json["to"], "done");
    assert_eq!(json["task"]["title"], "hooked");
    assert!(ws.ok(&["show", &id]).contains("done"));
}

#[test]
fn usage_errors_exit_1_not_the_gate_code() {
    let ws = Ws::new();
    let out = ws
        .baton(&["run", "demo", "--wait", "--titel", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let out = ws.baton(&["--help"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn an_unguarded_loop_of_steps_stops_at_the_loop_limit() {
    let ws = Ws::new();
    ws.pipeline(
        "cyc.json",
        r#"{"id": "cyc", "name": "Cycle",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "s1", "step": {"run": "true"}},
    {"id": "s2", "step": {"run": "true"}},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"}
  ],
  "transitions": [{"from": "s2", "to": "s1", "on": "success"}]
}"#,
    );
    let out = ws
        .baton(&["run", "cyc", "--title", "loop", "--wait", "--json"])
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["state"], "waiting");
    let human = ws.ok(&["show", "1"]);
    assert!(
        human.contains("max_visits"),
        "the event says how to fix it: {human}"
    );
}

#[test]
fn run_wait_says_why_it_waits_on_after_its_task_settled() {
    use std::io::BufRead;
    let ws = Ws::new();
    // Another task's first step holds until the test writes to a pipe; its second may
    // not start once `run --wait`'s own task has settled.
    for (id, runs) in [
        ("hold", vec![r#"read line < "$BATON_WORKSPACE/go""#, "true"]),
        ("quick", vec!["true"]),
    ] {
        let mut statuses = vec![serde_json::json!({"id": "q", "label": "Queue", "kind": "queue"})];
        for (n, run) in runs.iter().enumerate() {
            statuses.push(serde_json::json!({"id": format!("s{}", n + 1), "label": "Step", "step": {"run": run}}));
        }
        statuses.push(serde_json::json!({"id": "done", "label": "Done", "kind": "done"}));
        statuses.push(serde_json::json!({"id": "failed", "label": "Failed", "kind": "failed"}));
        let json = serde_json::json!({"id": id, "name": id, "statuses": statuses});
        ws.pipeline(&format!("{id}.json"), &json.to_string());
    }
    // Another task's step that holds until the test writes to a pipe; started with no
    // engine running, it waits for the next one: `run --wait`'s.
    nix::unistd::mkfifo(&ws.root().join("go"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let held = ws.new_task("hold", "held");
    ws.ok(&["start", &held.to_string()]);
    let mut run = std::process::Command::new(assert_cmd::cargo::cargo_bin("baton"))
        .current_dir(ws.root())
        .env_remove("BATON_DIR")
        .args(["run", "quick", "--title", "mine", "--wait"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Were the note never said, the step is let go after a minute, so that the test
    // fails rather than hangs.
    let (said, watchdog) = std::sync::mpsc::channel::<()>();
    let fifo = ws.root().join("go");
    let release = std::thread::spawn(move || {
        if watchdog
            .recv_timeout(std::time::Duration::from_secs(60))
            .is_err()
        {
            let _ = std::fs::write(fifo, "go\n");
        }
    });
    let mut err = std::io::BufReader::new(run.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("has settled") {
        line.clear();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "stderr ended without saying why the wait goes on"
        );
    }
    assert!(
        line.starts_with(&format!(
            "task {} has settled; waiting for 1 running step(s) of other tasks",
            held + 1
        )),
        "{line}"
    );
    assert!(line.contains("ctrl+c interrupts them"), "{line}");
    said.send(()).unwrap();
    release.join().unwrap();
    assert!(
        run.try_wait().unwrap().is_none(),
        "it waits for the other step"
    );
    std::fs::write(ws.root().join("go"), "go\n").unwrap();
    let out = run.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("{} done (done)", held + 1)
    );
    let other = ws.show(held);
    assert_eq!(
        other["steps"][0]["state"], "succeeded",
        "the other step was let finish"
    );
    assert_eq!(
        (&other["status"], &other["state"]),
        (&serde_json::json!("s2"), &serde_json::json!("queued")),
        "and none was started after: {other}"
    );
}

#[test]
fn run_wait_says_why_its_task_failed() {
    let ws = Ws::new();
    ws.pipeline(
        "bad.json",
        r#"{"id": "bad", "name": "Bad", "statuses": [
  {"id": "q", "label": "Queue", "kind": "queue"},
  {"id": "check", "label": "Check", "step": {"run": "echo nope; exit 3"}},
  {"id": "done", "label": "Done", "kind": "done"},
  {"id": "failed", "label": "Failed", "kind": "failed"}]}"#,
    );
    let out = ws
        .baton(&["run", "bad", "--title", "t", "--wait"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "1 failed (failed)"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "task 1 failed at check: exited with code 3 — `baton show 1` and `baton logs 1` say more"
        ),
        "{err}"
    );
    // Waiting on another process's engine says it too.
    let engine = common::spawn_engine(&ws);
    let out = ws
        .baton(&["run", "bad", "--title", "again", "--wait"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    common::stop(engine);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("task 2 failed at check: exited with code 3"),
        "{err}"
    );
}

#[test]
fn list_refuses_a_status_no_pipeline_has() {
    let ws = Ws::new();
    ws.pipeline("gate.json", GATE);
    let out = ws.baton(&["list", "--status", "reveiw"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no pipeline has a status `reveiw` (known: "),
        "{err}"
    );
    assert!(err.contains("review"), "the known ones are listed: {err}");
    // A real status with no task at it is an empty answer, not a mistake.
    assert_eq!(
        ws.ok(&["list", "--status", "review"]).trim(),
        "no tasks match — `baton list` shows them all"
    );
}

/// A wait stopped by ctrl+c while its task's step drains ends with the task queued at its
/// next step, and says that the next engine runs it.
#[test]
fn run_wait_stopped_before_the_next_step_says_the_task_waits_for_an_engine() {
    use std::io::BufRead;
    let ws = Ws::new();
    ws.config("shutdown = \"drain\"\n");
    ws.pipeline(
        "two.json",
        r#"{"id": "two", "name": "Two", "statuses": [
  {"id": "q", "label": "Queue", "kind": "queue"},
  {"id": "s1", "label": "One", "step": {"run": "touch started; read line < \"$BATON_WORKSPACE/go\""}},
  {"id": "s2", "label": "Two", "step": {"run": "true"}},
  {"id": "done", "label": "Done", "kind": "done"},
  {"id": "failed", "label": "Failed", "kind": "failed"}]}"#,
    );
    nix::unistd::mkfifo(&ws.root().join("go"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let mut run = std::process::Command::new(assert_cmd::cargo::cargo_bin("baton"))
        .current_dir(ws.root())
        .env_remove("BATON_DIR")
        .args(["run", "two", "--title", "stopped", "--wait"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_for("the first step to run", || {
        ws.root().join("started").exists()
    });
    let pid = nix::unistd::Pid::from_raw(run.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let mut err = std::io::BufReader::new(run.stderr.take().unwrap());
    let mut said = String::new();
    let mut line = String::new();
    while !line.contains("shutting down: waiting for 1 running step(s)") {
        line.clear();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "stderr ended without saying the stop drains: {said}"
        );
        said.push_str(&line);
    }
    std::fs::write(ws.root().join("go"), "go\n").unwrap();
    std::io::Read::read_to_string(&mut err, &mut said).unwrap();
    let out = run.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?} {said}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1 s2 (queued)");
    assert!(
        said.contains(
            "task 1 queued at s2: the wait was stopped before its step started — the next engine runs it"
        ),
        "{said}"
    );
}
