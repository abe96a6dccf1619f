//! One warden per engine: the engine's local steps are children of one `baton-guard
//! --warden` process (not of a guard each), a warden that dies takes its steps with it and
//! the next step gets a new one, and a step too large for one message to the warden still
//! runs (under a guard of its own).

mod common;
use common::{Ws, alive, spawn_engine, stop, wait_for};

fn pipeline(script: &str) -> String {
    with_steps(
        "w",
        &[
            serde_json::json!({"script": script}),
            serde_json::json!({"run": "echo next ran"}),
        ],
    )
}

/// Pipeline `id`: a queue, then a status for each step (`work`, then `next`), then the
/// three terminal statuses.
fn with_steps(id: &str, steps: &[serde_json::Value]) -> String {
    let mut statuses = vec![serde_json::json!({"id": "todo", "kind": "queue"})];
    for (name, step) in ["work", "next"].iter().zip(steps) {
        statuses.push(serde_json::json!({"id": name, "step": step}));
    }
    for s in ["done", "failed", "cancelled"] {
        statuses.push(serde_json::json!({"id": s, "kind": s}));
    }
    serde_json::json!({"id": id, "statuses": statuses}).to_string()
}

/// Field 4 of `/proc/<pid>/stat`: the parent's pid.
fn parent(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 2..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn cmdline(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

fn pids_in(ws: &Ws, name: &str) -> Vec<i32> {
    std::fs::read_to_string(ws.root().join(name))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Three steps at once: all three are children of the same warden, itself a child of the
/// engine; each step leads a process group of its own.
#[test]
fn an_engines_steps_are_children_of_its_one_warden() {
    let ws = Ws::new();
    ws.pipeline("w.json", &pipeline("echo $$ >> leaders; sleep 300"));
    ws.config("max_parallel = 3\n");
    let ids: Vec<i64> = (0..3).map(|i| ws.new_task("w", &format!("t{i}"))).collect();
    let engine = spawn_engine(&ws);
    for id in &ids {
        ws.ok(&["start", &id.to_string()]);
    }
    wait_for("three steps to start", || {
        pids_in(&ws, "leaders").len() == 3
    });
    let leaders = pids_in(&ws, "leaders");
    let wardens: std::collections::HashSet<i32> =
        leaders.iter().map(|p| parent(*p).unwrap()).collect();
    assert_eq!(wardens.len(), 1, "one warden for all steps: {wardens:?}");
    let warden = *wardens.iter().next().unwrap();
    assert!(
        cmdline(warden).contains("--warden"),
        "the steps' parent is the warden: {}",
        cmdline(warden)
    );
    assert_eq!(
        parent(warden),
        Some(engine.id() as i32),
        "the engine started it"
    );
    for p in &leaders {
        let pgid = nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(*p))).unwrap();
        assert_eq!(pgid.as_raw(), *p, "each step leads its own group");
    }
    for id in &ids {
        ws.ok(&["abort", &id.to_string()]);
    }
    wait_for("the aborted steps to end", || {
        leaders.iter().all(|p| !alive(*p))
    });
    stop(engine);
    wait_for("the warden to end with its engine", || !alive(warden));
}

/// The warden is killed while a step runs: the step fails saying so, nothing of it is left,
/// and the next step runs under a new warden.
#[test]
fn a_killed_warden_fails_its_step_and_the_next_step_gets_a_new_one() {
    let ws = Ws::new();
    ws.pipeline(
        "w.json",
        &pipeline(
            "setsid sh -c 'echo $$ > detached.pid; exec sleep 300' >/dev/null 2>&1 &\necho $$ >> leaders; sleep 300",
        ),
    );
    let id = ws.new_task("w", "t");
    let engine = spawn_engine(&ws);
    ws.ok(&["start", &id.to_string()]);
    wait_for("the step and its detached child to start", || {
        pids_in(&ws, "leaders").len() == 1 && !pids_in(&ws, "detached.pid").is_empty()
    });
    let leader = pids_in(&ws, "leaders")[0];
    let detached = pids_in(&ws, "detached.pid")[0];
    let warden = parent(leader).unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(warden),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    wait_for("the step to fail", || ws.show(id)["state"] == "failed");
    let shown = ws.show(id);
    let error = shown["steps"][0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("warden stopped"), "{shown:#}");
    wait_for("the step's processes to end", || {
        !alive(leader) && !alive(detached)
    });
    // The next step of another task starts under a new warden.
    ws.pipeline(
        "w.json",
        &pipeline("echo $$ >> leaders; echo $PPID >> wardens"),
    );
    let again = ws.new_task("w", "again");
    ws.ok(&["start", &again.to_string()]);
    wait_for("the second task to finish", || {
        ws.show(again)["state"] == "done"
    });
    let second = pids_in(&ws, "wardens");
    assert_eq!(second.len(), 1);
    assert_ne!(second[0], warden, "a new warden");
    stop(engine);
}

/// A step whose environment cannot travel in one message to the warden (variables of
/// 180 KiB in all) still runs, under a guard of its own.
#[test]
fn a_step_too_large_for_the_warden_runs_under_its_own_guard() {
    let ws = Ws::new();
    let big = "x".repeat(60 * 1024);
    // Each of the step's own variables adds to the message: three of 60 KiB pass the
    // warden's limit, and none passes the kernel's limit for one variable.
    let spec = serde_json::json!({"id": "w", "statuses": [
        {"id": "todo", "kind": "queue"},
        {"id": "work", "step": {
            "script": "echo $PPID > parent.pid; echo ${#A}${#B}${#C}",
            "env": {"A": big, "B": big, "C": big}}},
        {"id": "done", "kind": "done"},
        {"id": "failed", "kind": "failed"},
        {"id": "cancelled", "kind": "cancelled"}
    ]});
    ws.pipeline("w.json", &spec.to_string());
    let id = ws.new_task("w", "big");
    let engine = spawn_engine(&ws);
    ws.ok(&["start", &id.to_string()]);
    wait_for("the big step to finish", || ws.show(id)["state"] == "done");
    let log = ws.ok(&["logs", &id.to_string()]);
    assert!(log.contains("614406144061440"), "{log}");
    let parent = pids_in(&ws, "parent.pid")[0];
    // Its parent was a guard of its own, gone with the step (the warden lives on).
    assert!(!alive(parent), "the step's own guard ended with it");
    stop(engine);
}

/// A step starts with no signal blocked, whatever the warden blocks for its own reading:
/// the SIGTERM of an abort or a time-out reaches it.
#[test]
fn a_step_starts_with_no_signal_blocked() {
    let ws = Ws::new();
    ws.pipeline("w.json", &pipeline("grep SigBlk /proc/self/status"));
    let id = ws.new_task("w", "mask");
    let engine = spawn_engine(&ws);
    ws.ok(&["start", &id.to_string()]);
    wait_for("the step to finish", || ws.show(id)["state"] == "done");
    let log = ws.ok(&["logs", &id.to_string(), "--step", "1"]);
    assert!(log.contains("SigBlk:\t0000000000000000"), "{log}");
    stop(engine);
}

/// A step starts with SIGPIPE's default action, though the engine that starts it ignores
/// the signal: `producer | head` in a step ends the producer as in a terminal. Through the
/// warden (`baton engine`) and through `run --wait`'s own engine.
#[test]
fn a_step_does_not_inherit_the_engines_ignored_sigpipe() {
    let ws = Ws::new();
    ws.pipeline("w.json", &pipeline("grep SigIgn /proc/self/status"));
    let check = |log: &str| {
        let mask = log
            .lines()
            .find_map(|l| l.trim().strip_prefix("SigIgn:"))
            .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
            .unwrap_or_else(|| panic!("no SigIgn line in {log}"));
        // SIGPIPE is signal 13: bit 12.
        assert_eq!(mask & (1 << 12), 0, "{log}");
    };
    let id = ws.new_task("w", "engine");
    let engine = spawn_engine(&ws);
    ws.ok(&["start", &id.to_string()]);
    wait_for("the step to finish", || ws.show(id)["state"] == "done");
    check(&ws.ok(&["logs", &id.to_string(), "--step", "1"]));
    stop(engine);
    let out = ws.ok(&["run", "w", "--title", "run", "--wait"]);
    let id = out.split_whitespace().next().unwrap();
    check(&ws.ok(&["logs", id, "--step", "1"]));
}

/// A step the warden cannot start (its `workdir` does not exist) fails with the reason
/// and the folder, and the warden goes on to start the next one. A step whose PATH has
/// no `sh` says so.
#[test]
fn a_step_the_warden_cannot_start_fails_with_the_reason() {
    let ws = Ws::new();
    let missing = with_steps(
        "m",
        &[serde_json::json!({"run": "true", "workdir": "gone"})],
    );
    ws.pipeline("m.json", &missing);
    ws.pipeline("w.json", &pipeline("echo started"));
    let bad = ws.new_task("m", "no folder");
    let good = ws.new_task("w", "fine");
    let engine = spawn_engine(&ws);
    ws.ok(&["start", &bad.to_string()]);
    wait_for("the step to fail", || ws.show(bad)["state"] == "failed");
    let error = ws.show(bad)["steps"][0]["error"].to_string();
    assert!(
        error.contains("could not start `sh`: the step's folder")
            && error.contains("gone does not exist"),
        "{error}"
    );
    ws.ok(&["start", &good.to_string()]);
    wait_for("the next task to finish", || {
        ws.show(good)["state"] == "done"
    });
    stop(engine);
    let no_path = with_steps(
        "np",
        &[serde_json::json!({"run": "true", "env": {"PATH": "/nonexistent"}})],
    );
    ws.pipeline("np.json", &no_path);
    let out = ws
        .baton(&["run", "np", "--title", "no sh", "--wait", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let error = shown["steps"][0]["error"].to_string();
    assert!(
        error.contains("`sh`: it is not on the step's PATH (/nonexistent)"),
        "{error}"
    );
    // The log's last line says it once.
    let logs = ws.ok(&["logs", &shown["id"].to_string()]);
    assert!(
        logs.contains("■ could not start `sh`: it is not on the step's PATH")
            && !logs.contains("could not start: could not start"),
        "{logs}"
    );
}

/// A task made before loading refused an `env` that sets one of baton's own variables
/// keeps that `env` in its stored pipeline: it still runs, and its step gets baton's value
/// of each such name, and only that one, beside the rest of its `env`.
#[test]
fn a_stored_env_that_sets_batons_own_variables_loses_to_baton() {
    let ws = Ws::new();
    let step = serde_json::json!({"run": "env",
        "env": {"OLD_TASK_ID": "forged", "OLD_STATUS": "forged", "WHO": "the step's"}});
    ws.pipeline("e.json", &with_steps("e", &[step]));
    let id = ws.new_task("e", "stored before");
    // The task's snapshot as such a task holds it: the file would no longer load.
    let db = rusqlite::Connection::open(ws.root().join(".baton/baton.db")).unwrap();
    let changed = db
        .execute(
            "UPDATE snapshots SET json = replace(json, '\"OLD_', '\"BATON_')",
            [],
        )
        .unwrap();
    assert_eq!(changed, 1);
    drop(db);
    ws.ok(&["start", &id.to_string()]);
    ws.drain();
    assert_eq!(ws.show(id)["state"], "done");
    // `env` prints every entry it was given, a name given twice twice.
    let log = ws.ok(&["logs", &id.to_string(), "--step", "1"]);
    let given = |name: &str| -> Vec<String> {
        let prefix = format!("{name}=");
        log.lines()
            .filter_map(|l| l.split_once(&prefix).map(|(_, v)| v.trim().to_string()))
            .collect()
    };
    assert_eq!(given("BATON_TASK_ID"), [id.to_string()], "{log}");
    assert_eq!(given("BATON_STATUS"), ["work"], "{log}");
    assert_eq!(given("WHO"), ["the step's"], "{log}");
}

/// A name in a step's `env` that the engine also has reaches the step's program once, with
/// the step's value: a program that reads the first of two entries (glibc's `getenv`) would
/// get the engine's. (A shell would hide a second entry: the program here is `env`.)
#[test]
fn a_steps_own_env_wins_over_the_engines() {
    let ws = Ws::new();
    std::fs::create_dir_all(ws.root().join(".baton/agents")).unwrap();
    std::fs::write(
        ws.root().join(".baton/agents/pe.json"),
        r#"{"id": "pe", "backend": "command", "format": "text",
  "argv": ["env"]}"#,
    )
    .unwrap();
    let step = serde_json::json!({"agent": "pe", "env": {"BATON_X_TWICE": "the step's"}});
    ws.pipeline("e.json", &with_steps("e", &[step]));
    let out = ws
        .baton(&["run", "e", "--title", "env", "--wait"])
        .env("BATON_X_TWICE", "the engine's")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let id = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    // `env` prints every entry it was given, a name given twice twice.
    let log = ws.ok(&["logs", &id, "--step", "1"]);
    let given: Vec<&str> = log
        .lines()
        .filter_map(|l| l.split_once("BATON_X_TWICE=").map(|(_, v)| v.trim()))
        .collect();
    assert_eq!(given, ["the step's"], "{log}");
}
