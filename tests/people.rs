//! People on every row: the person (BATON_USER) recorded on history rows, events and gate
//! decisions whether an engine runs elsewhere or none does; racing approvals from several
//! processes, where one wins and the others are told who; `list --mine` / `--by`; named API
//! tokens acting as their names, and a revoked one refused.

mod api_common;
mod common;
mod infra;

use baton::store::Store;
use common::Ws;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::process::{Command, Stdio};

/// A backlog, then a gate: no step, so nothing moves but what people do.
const PIPELINE: &str = r#"{"id": "p", "name": "People", "statuses": [
  {"id": "backlog", "kind": "queue"},
  {"id": "review", "kind": "gate"},
  {"id": "done", "kind": "done"},
  {"id": "failed", "kind": "failed"},
  {"id": "cancelled", "kind": "cancelled"}],
  "transitions": [
    {"from": "backlog", "to": "review", "on": "start"},
    {"from": "review", "to": "done", "on": "approve"}]}"#;

fn workspace() -> Ws {
    let ws = Ws::new();
    ws.pipeline("p.json", PIPELINE);
    ws
}

/// `baton ARGS` as `who`.
fn as_person(ws: &Ws, who: &str, args: &[&str]) -> std::process::Output {
    ws.baton(args).env("BATON_USER", who).output().unwrap()
}

fn ok_as(ws: &Ws, who: &str, args: &[&str]) -> String {
    let out = as_person(ws, who, args);
    assert!(
        out.status.success(),
        "baton {args:?} as {who}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `(trigger, actor)` of each history row.
fn moves(ws: &Ws, id: i64) -> Vec<(String, String)> {
    ws.show(id)["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["trigger"].as_str().unwrap().to_string(),
                h["actor"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// `(type, actor)` of each of the task's events.
fn events(ws: &Ws, id: i64) -> Vec<(String, String)> {
    let store = Store::open_read_only(&ws.root().join(".baton/baton.db")).unwrap();
    let db = store.read();
    db.events(id)
        .unwrap()
        .into_iter()
        .map(|e| (e.kind, e.actor))
        .collect()
}

/// `baton engine` run as `who`, waited for until it listens.
fn engine_as(ws: &Ws, who: &str) -> std::process::Child {
    let child = Command::new(assert_cmd::cargo::cargo_bin("baton"))
        .current_dir(ws.root())
        .env_remove("BATON_DIR")
        .env("BATON_USER", who)
        .args(["engine"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let dir = ws.root().join(".baton");
    common::wait_for("the engine to listen", || {
        baton::engine::wake::listening(&dir) && dir.join("engine.sock").exists()
    });
    child
}

fn list(ws: &Ws, who: &str, filter: &[&str]) -> Vec<(i64, Value, Value)> {
    let mut args = vec!["list", "--json"];
    args.extend_from_slice(filter);
    let out: Value = serde_json::from_str(&ok_as(ws, who, &args)).unwrap();
    out.as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["id"].as_i64().unwrap(),
                t["by"].clone(),
                t["created_by"].clone(),
            )
        })
        .collect()
}

/// With no engine, the command applies its change itself; with an engine running as
/// someone else, the request travels through the commands table and the engine records the
/// requester, not its own person. Every row of the task names who made it.
#[test]
fn the_person_is_recorded_with_no_engine_and_with_one_running_elsewhere() {
    let ws = workspace();
    let id: i64 = ok_as(&ws, "alice", &["new", "t", "-p", "p"])
        .trim()
        .parse()
        .unwrap();
    ok_as(&ws, "bob", &["start", &id.to_string()]);

    let engine = engine_as(&ws, "the engine host");
    ok_as(
        &ws,
        "carol",
        &["approve", &id.to_string(), "--note", "fine"],
    );
    // The approval went through the running engine: it is a command it applied.
    let store = Store::open_read_only(&ws.root().join(".baton/baton.db")).unwrap();
    let cmd = store.read().command(1).unwrap().expect("a queued command");
    assert_eq!(cmd.body["actor"], "carol", "{:?}", cmd.body);
    assert!(cmd.result.is_some(), "the engine answered it");
    common::stop(engine);

    assert_eq!(
        moves(&ws, id),
        [
            ("create".to_string(), "alice".to_string()),
            ("start".into(), "bob".into()),
            ("approve".into(), "carol".into()),
        ]
    );
    let events = events(&ws, id);
    let who = |kind: &str| -> Vec<&str> {
        events
            .iter()
            .filter(|(k, _)| k == kind)
            .map(|(_, a)| a.as_str())
            .collect()
    };
    assert_eq!(who("task.created"), ["alice"]);
    assert_eq!(who("task.moved"), ["bob", "carol"]);
    assert!(
        events
            .iter()
            .all(|(_, a)| a != "the engine host" && a != "user"),
        "{events:?}"
    );
    assert_eq!(list(&ws, "x", &[]), [(id, json!("carol"), json!("alice"))]);
}

/// A name that is not one line of plain text is refused with a sentence naming BATON_USER,
/// and nothing is recorded.
#[test]
fn a_bad_baton_user_is_refused_before_anything_changes() {
    let ws = workspace();
    let id = ws.new_task("p", "t");
    for bad in ["al\nice", "\x1b[2Jx", &"n".repeat(65), "engine"] {
        let out = as_person(&ws, bad, &["start", &id.to_string()]);
        assert_eq!(out.status.code(), Some(1), "{bad:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("BATON_USER"), "{bad:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
    assert_eq!(ws.show(id)["status"], "backlog");
}

/// Three processes approve the same task at once, with and without an engine: exactly one
/// move; each loser is told who won, from the history row that moved it.
#[test]
fn racing_approvals_from_three_processes_make_one_move_and_name_the_winner() {
    for with_engine in [false, true] {
        let ws = workspace();
        let id = ws.new_task("p", "t");
        ws.ok(&["start", &id.to_string()]);
        let engine = with_engine.then(|| engine_as(&ws, "host"));
        let racers: Vec<_> = ["ann", "ben", "cat"]
            .iter()
            .map(|who| {
                let child = Command::new(assert_cmd::cargo::cargo_bin("baton"))
                    .current_dir(ws.root())
                    .env_remove("BATON_DIR")
                    .env("BATON_USER", who)
                    .env("NO_COLOR", "1")
                    .args(["approve", &id.to_string()])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap();
                (*who, child)
            })
            .collect();
        let answers: Vec<_> = racers
            .into_iter()
            .map(|(who, c)| (who, c.wait_with_output().unwrap()))
            .collect();
        if let Some(e) = engine {
            common::stop(e);
        }
        let approvals: Vec<_> = moves(&ws, id)
            .into_iter()
            .filter(|(t, _)| t == "approve")
            .collect();
        assert_eq!(approvals.len(), 1, "engine {with_engine}: {approvals:?}");
        let winner = approvals[0].1.clone();
        for (who, out) in &answers {
            let err = String::from_utf8_lossy(&out.stderr);
            if *who == winner {
                assert!(out.status.success(), "{who}: {err}");
            } else {
                assert_eq!(out.status.code(), Some(1), "{who}: {err}");
                let said = format!("task {id} is no longer at review — {winner} approved it");
                assert!(err.contains(&said), "engine {with_engine}, {who}: {err}");
            }
        }
    }
}

/// `list --mine` is what the person running it created or last moved; `--by NAME` the same
/// for NAME; the table shows who last moved each task.
#[test]
fn list_mine_and_by_name() {
    let ws = workspace();
    let a: i64 = ok_as(&ws, "alice", &["new", "a", "-p", "p"])
        .trim()
        .parse()
        .unwrap();
    let b: i64 = ok_as(&ws, "bob", &["new", "b", "-p", "p"])
        .trim()
        .parse()
        .unwrap();
    let c: i64 = ok_as(&ws, "bob", &["new", "c", "-p", "p"])
        .trim()
        .parse()
        .unwrap();
    // Alice moves one of Bob's: it is hers now (she last moved it) and still his (he made it).
    ok_as(&ws, "alice", &["start", &c.to_string()]);

    let ids = |rows: Vec<(i64, Value, Value)>| rows.iter().map(|r| r.0).collect::<Vec<_>>();
    assert_eq!(ids(list(&ws, "alice", &["--mine"])), [c, a]);
    assert_eq!(ids(list(&ws, "bob", &["--mine"])), [c, b]);
    assert_eq!(ids(list(&ws, "zed", &["--by", "alice"])), [c, a]);
    assert_eq!(ids(list(&ws, "zed", &["--mine"])), Vec::<i64>::new());
    assert_eq!(
        list(&ws, "zed", &["--by", "bob", "--status", "review"]),
        [(c, json!("alice"), json!("bob"))]
    );
    let table = ok_as(&ws, "zed", &["list", "--by", "bob"]);
    let row = table
        .lines()
        .find(|l| l.trim_start().starts_with(&c.to_string()))
        .unwrap();
    assert!(row.contains(" alice "), "{table}");
    let none = ok_as(&ws, "zed", &["list", "--mine"]);
    assert!(none.contains("no tasks match"), "{none}");
}

fn http() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder().build().unwrap()
}

fn call(
    s: &api_common::Server,
    token: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut req = http().request(method, s.url(path)).bearer_auth(token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let res = req.send().unwrap();
    let status = res.status();
    (status, res.json().unwrap_or(Value::Null))
}

/// A named token acts as its name on every row its requests make; the workspace's token
/// acts as the server's own person; `mine` filters by the token's person; the loser of a
/// second approval gets a 409 naming the winner; a revoked token is refused with 401.
#[test]
fn a_named_tokens_requests_are_recorded_under_its_name_until_it_is_revoked() {
    use reqwest::Method;
    let dir = api_common::workspace();
    std::fs::write(dir.path().join(".baton/pipelines/p.json"), PIPELINE).unwrap();
    let baton = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_baton"))
            .arg("--dir")
            .arg(dir.path())
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let alice = baton(&["token", "add", "alice"]).trim().to_string();
    assert_eq!(alice.len(), 64);
    let kept = std::fs::read_to_string(dir.path().join(".baton/tokens")).unwrap();
    assert!(!kept.contains(&alice), "the token itself is never kept");
    assert!(baton(&["token", "list"]).contains("alice"));

    let s = api_common::Server::start(dir.path(), &[("BATON_USER", "server-person")]);
    let own = s.token();
    let (st, made) = call(
        &s,
        &alice,
        Method::POST,
        "/api/tasks",
        Some(json!({"title": "hers", "pipeline": "p", "start": true})),
    );
    assert_eq!(st, StatusCode::CREATED, "{made}");
    let id = made["id"].as_i64().unwrap();
    let (st, other) = call(
        &s,
        &own,
        Method::POST,
        "/api/tasks",
        Some(json!({"title": "the server's", "pipeline": "p"})),
    );
    assert_eq!(st, StatusCode::CREATED, "{other}");

    let (st, shown) = call(
        &s,
        &alice,
        Method::POST,
        &format!("/api/tasks/{id}/approve"),
        None,
    );
    assert_eq!(st, StatusCode::OK, "{shown}");
    let actors: Vec<&str> = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["actor"].as_str().unwrap())
        .collect();
    assert_eq!(actors, ["alice", "alice", "alice"]);
    assert_eq!(other["history"][0]["actor"], "server-person");

    // The second approval lost: told who won, as a conflict.
    let (st, lost) = call(
        &s,
        &own,
        Method::POST,
        &format!("/api/tasks/{id}/approve"),
        None,
    );
    assert_eq!(st, StatusCode::CONFLICT, "{lost}");
    let said = lost["error"].as_str().unwrap();
    assert!(
        said.contains(&format!(
            "task {id} is no longer at review — alice approved it"
        )),
        "{said}"
    );

    let ids = |v: Value| -> Vec<i64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_i64().unwrap())
            .collect()
    };
    let (_, mine) = call(&s, &alice, Method::GET, "/api/tasks?mine=true", None);
    assert_eq!(ids(mine.clone()), [id]);
    assert_eq!(mine[0]["by"], "alice");
    let (_, by) = call(&s, &alice, Method::GET, "/api/tasks?by=server-person", None);
    assert_eq!(ids(by), [other["id"].as_i64().unwrap()]);

    // Her event stream, open while her token is revoked, ends with it.
    let stream = http()
        .get(s.url("/api/events"))
        .bearer_auth(&alice)
        .send()
        .unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    let (ended, stream_ended) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for _ in std::io::BufReader::new(stream)
            .lines()
            .map_while(Result::ok)
        {}
        let _ = ended.send(());
    });
    baton(&["token", "revoke", "alice"]);
    stream_ended
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("the revoked token's event stream ended");
    let (st, refused) = call(&s, &alice, Method::GET, "/api/tasks", None);
    assert_eq!(st, StatusCode::UNAUTHORIZED, "{refused}");
    let (st, _) = call(&s, &own, Method::GET, "/api/tasks", None);
    assert_eq!(st, StatusCode::OK, "the workspace's token still works");
    assert!(baton(&["token", "list"]).contains("no named tokens"));
}

/// MCP on stdio acts as the person running it: what it approves is recorded under that
/// name, and `list_tasks` takes `mine` and `by`.
#[test]
fn mcp_on_stdio_acts_as_its_person_and_lists_by_person() {
    use std::io::{BufRead, BufReader, Write};
    let ws = workspace();
    let a: i64 = ok_as(&ws, "alice", &["new", "a", "-p", "p", "--start"])
        .trim()
        .parse()
        .unwrap();
    let b: i64 = ok_as(&ws, "bob", &["new", "b", "-p", "p"])
        .trim()
        .parse()
        .unwrap();
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("baton"))
        .current_dir(ws.root())
        .env_remove("BATON_DIR")
        .env("BATON_USER", "bob")
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let call = |id: i64, tool: &str, args: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": args}})
    };
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        call(2, "approve", json!({"id": a})),
    ];
    for l in lines {
        writeln!(stdin, "{l}").unwrap();
    }
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut answer = |want: i64| -> Value {
        loop {
            let v: Value = serde_json::from_str(&out.next().unwrap().unwrap()).unwrap();
            if v["id"].as_i64() == Some(want) {
                let text = v["result"]["content"][0]["text"].as_str().unwrap();
                return serde_json::from_str(text).unwrap_or_else(|_| json!(text));
            }
        }
    };
    // Tool calls run side by side: each is sent once the one before has answered.
    let approved = answer(2);
    assert_eq!(approved["history"][2]["actor"], "bob", "{approved}");
    let ids = |v: Value| -> Vec<i64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_i64().unwrap())
            .collect()
    };
    // Bob made b and last moved a (which alice made); the one moved last comes first.
    writeln!(stdin, "{}", call(3, "list_tasks", json!({"mine": true}))).unwrap();
    assert_eq!(ids(answer(3)), [a, b]);
    writeln!(stdin, "{}", call(4, "list_tasks", json!({"by": "alice"}))).unwrap();
    assert_eq!(ids(answer(4)), [a]);
    drop(stdin);
    let _ = child.wait();
}

/// MCP over HTTP with a named token acts as its name too: the official Python client creates,
/// starts and approves a task, and every one of those rows names the token's person.
#[test]
fn a_named_tokens_mcp_calls_over_http_are_recorded_under_its_name() {
    let Some(py) = api_common::python() else {
        return;
    };
    let dir = api_common::workspace();
    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .arg("--dir")
        .arg(dir.path())
        .args(["token", "add", "alice"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let token = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let s = api_common::Server::start(dir.path(), &[("BATON_USER", "server-person")]);
    api_common::run_client(&py, &["http", &s.url("/mcp"), &token]);
    let (st, tasks) = call(
        &s,
        &token,
        reqwest::Method::GET,
        "/api/tasks?mine=true",
        None,
    );
    assert_eq!(st, StatusCode::OK);
    let id = tasks[0]["id"].as_i64().expect("alice's task");
    let (_, shown) = call(
        &s,
        &token,
        reqwest::Method::GET,
        &format!("/api/tasks/{id}"),
        None,
    );
    let people: Vec<(&str, &str)> = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["trigger"].as_str().unwrap(), h["actor"].as_str().unwrap()))
        .filter(|(_, a)| *a != "engine")
        .collect();
    assert_eq!(
        people,
        [
            ("create", "alice"),
            ("start", "alice"),
            ("approve", "alice")
        ],
        "{shown:#}"
    );
}
