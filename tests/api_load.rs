//! `baton serve` under load and after changes a client does not see coming: event streams
//! that fall behind lose no task's final state (live, and resumed with `Last-Event-ID`), a
//! rotated token ends the streams opened with the old one, creates are one transaction and
//! idempotent, pipelines are shown without their credentials, and idle sockets cannot take
//! the server's (and its engine's) file descriptors.

mod api_common;
mod infra;

use api_common::Server;
use reqwest::StatusCode;
use reqwest::blocking::Client;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long anything awaited may take (a bound, not a pause).
const PATIENCE: Duration = Duration::from_secs(60);

fn client() -> Client {
    Client::builder().timeout(None).build().unwrap()
}

fn post(s: &Server, path: &str, body: Value) -> (StatusCode, Value) {
    let res = client()
        .post(s.url(path))
        .bearer_auth(s.token())
        .json(&body)
        .send()
        .unwrap();
    let status = res.status();
    (status, res.json().unwrap_or(Value::Null))
}

/// What a stream said: `task` events as (event id, data), and its end.
enum Said {
    Task(String, Value),
    Ended,
}

/// Opens `/api/events` with `token` and hands on what it says.
fn stream(s: &Server, token: &str, last_id: Option<&str>) -> mpsc::Receiver<Said> {
    let mut req = client().get(s.url("/api/events")).bearer_auth(token);
    if let Some(id) = last_id {
        req = req.header("Last-Event-ID", id);
    }
    let res = req.send().unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (mut event, mut id) = (String::new(), String::new());
        for line in std::io::BufReader::new(res).lines() {
            let Ok(line) = line else { break };
            if let Some(v) = line.strip_prefix("event: ") {
                event = v.to_string();
            } else if let Some(v) = line.strip_prefix("id: ") {
                id = v.to_string();
            } else if let Some(v) = line.strip_prefix("data: ")
                && event == "task"
            {
                let data = serde_json::from_str(v).unwrap();
                if tx.send(Said::Task(id.clone(), data)).is_err() {
                    return;
                }
            }
        }
        let _ = tx.send(Said::Ended);
    });
    rx
}

/// Reads a stream until every task in `ids` was last seen at `status`/`state`; returns the
/// id of the last event read. Panics with what is missing after the patience.
fn until_all(rx: &mpsc::Receiver<Said>, ids: &[i64], status: &str, state: &str) -> String {
    let deadline = Instant::now() + PATIENCE;
    let mut last: HashMap<i64, (String, String)> = HashMap::new();
    let mut last_id = String::new();
    let done = |last: &HashMap<i64, (String, String)>| {
        ids.iter()
            .all(|id| last.get(id).is_some_and(|(a, b)| a == status && b == state))
    };
    while !done(&last) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Said::Task(id, data)) => {
                last_id = id;
                let t = data["id"].as_i64().unwrap();
                let at = (
                    data["status"].as_str().unwrap_or("").to_string(),
                    data["state"].as_str().unwrap_or("").to_string(),
                );
                last.insert(t, at);
            }
            Ok(Said::Ended) | Err(_) => {
                let missing: Vec<_> = ids
                    .iter()
                    .filter(|id| !last.get(id).is_some_and(|(a, b)| a == status && b == state))
                    .map(|id| (id, last.get(id)))
                    .collect();
                panic!("the stream never said these tasks reached {status}: {missing:?}");
            }
        }
    }
    last_id
}

/// Many streams with a change buffer of one while tasks run to a gate: every stream ends
/// with every task at the gate.
#[test]
fn streams_that_fall_behind_lose_no_task_update() {
    let ws = api_common::workspace();
    let s = Server::start(ws.path(), &[("BATON_EVENT_BUFFER", "1")]);
    let token = s.token();
    let streams: Vec<_> = (0..40).map(|_| stream(&s, &token, None)).collect();
    let ids: Vec<i64> = (0..150)
        .map(|n| {
            let body = json!({"title": format!("load {n}"), "pipeline": "fast", "start": true});
            let (status, task) = post(&s, "/api/tasks", body);
            assert_eq!(status, StatusCode::CREATED, "{task}");
            task["id"].as_i64().unwrap()
        })
        .collect();
    let mut first_ids = Vec::new();
    for rx in &streams {
        first_ids.push(until_all(rx, &ids, "review", "waiting"));
    }
    // A client that resumes from an early event id gets every task's latest state again.
    let early = stream(&s, &token, None);
    let (status, _) = post(
        &s,
        "/api/tasks",
        json!({"title": "marker", "pipeline": "fast"}),
    );
    assert_eq!(status, StatusCode::CREATED);
    let Ok(Said::Task(marker_id, _)) = early.recv_timeout(PATIENCE) else {
        panic!("no event for the marker task");
    };
    drop(early);
    for id in &ids {
        let (status, body) = post(
            &s,
            &format!("/api/tasks/{id}/approve"),
            json!({"note": "ok"}),
        );
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let resumed = stream(&s, &token, Some(&marker_id));
    until_all(&resumed, &ids, "done", "done");
}

/// A change whose time stamp is older than a stream's cursor (a clock stepped back, or a
/// writer that stamped its row before a later one committed) still reaches a client that
/// resumes with `Last-Event-ID`: the cursor is the change number, not a time.
#[test]
fn a_change_stamped_before_the_cursor_reaches_a_resumed_stream() {
    let ws = api_common::workspace();
    let s = Server::start(ws.path(), &[]);
    let token = s.token();
    let live = stream(&s, &token, None);
    let mut ids = Vec::new();
    for n in 0..2 {
        let (status, task) = post(
            &s,
            "/api/tasks",
            json!({"title": format!("t{n}"), "pipeline": "fast"}),
        );
        assert_eq!(status, StatusCode::CREATED, "{task}");
        ids.push(task["id"].as_i64().unwrap());
    }
    let cursor = until_all(&live, &ids, "backlog", "idle");
    drop(live);
    let db = rusqlite::Connection::open(ws.path().join(".baton/baton.db")).unwrap();
    db.busy_timeout(PATIENCE).unwrap();
    let changed = db
        .execute(
            "UPDATE tasks SET title = 'stamped in the past', updated_at = 1 WHERE id = ?1",
            [ids[0]],
        )
        .unwrap();
    assert_eq!(changed, 1);
    let resumed = stream(&s, &token, Some(&cursor));
    let deadline = Instant::now() + PATIENCE;
    loop {
        match resumed.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(Said::Task(_, data)) if data["title"] == "stamped in the past" => break,
            Ok(Said::Task(..)) => {}
            Ok(Said::Ended) | Err(_) => panic!("the resumed stream never sent the change"),
        }
    }
}

/// `baton token rotate` ends an event stream opened with the old token.
#[test]
fn a_rotated_token_ends_the_streams_opened_with_it() {
    let ws = api_common::workspace();
    let s = Server::start(ws.path(), &[]);
    let rx = stream(&s, &s.token(), None);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .arg("--dir")
        .arg(ws.path())
        .args(["token", "rotate"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // Changes after the rotation must not reach the old stream; it ends.
    let (status, _) = post(
        &s,
        "/api/tasks",
        json!({"title": "after", "pipeline": "fast"}),
    );
    assert_eq!(status, StatusCode::CREATED);
    let deadline = Instant::now() + PATIENCE;
    loop {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(Said::Ended) => break,
            Ok(Said::Task(_, data)) => {
                assert_ne!(
                    data["title"], "after",
                    "the old token's stream saw a new task"
                )
            }
            Err(_) => panic!("the stream of the rotated token is still open"),
        }
    }
}

/// A pipeline whose step env, webhook URL and webhook headers hold credentials.
const SECRETIVE: &str = r#"{"id": "secretive", "name": "Secretive", "statuses": [
  {"id": "todo", "label": "To do", "kind": "queue"},
  {"id": "work", "label": "Work", "step": {"run": "true", "env": {"DEPLOY_TOKEN": "tok-env-5f3a9e"}}},
  {"id": "done", "label": "Done", "kind": "done"},
  {"id": "failed", "label": "Failed", "kind": "failed"}],
  "transitions": [{"from": "work", "to": "done", "on": "success", "hooks": [{"webhook": {
    "url": "https://user:pw-url-77c1@hooks.example.com/services/T0/B0/path-secret-99?key=q-secret-31",
    "headers": {"Authorization": "Bearer hdr-secret-42"}}}]}]}"#;

/// `/api/pipelines/{id}` shows a pipeline without the credentials its file holds.
#[test]
fn pipelines_are_shown_without_their_credentials() {
    let ws = api_common::workspace();
    std::fs::write(ws.path().join(".baton/pipelines/secretive.json"), SECRETIVE).unwrap();
    let s = Server::start(ws.path(), &[]);
    let res = client()
        .get(s.url("/api/pipelines/secretive"))
        .bearer_auth(s.token())
        .send()
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let text = res.text().unwrap();
    for secret in [
        "tok-env-5f3a9e",
        "pw-url-77c1",
        "path-secret-99",
        "q-secret-31",
        "hdr-secret-42",
    ] {
        assert!(!text.contains(secret), "{secret} shown in {text}");
    }
    let v: Value = serde_json::from_str(&text).unwrap();
    // Names stay, so a reader still sees what is configured.
    assert!(
        text.contains("DEPLOY_TOKEN") && text.contains("Authorization"),
        "{v}"
    );
    assert!(text.contains("hooks.example.com"), "{v}");
}

/// A retried create with the same `Idempotency-Key` returns the first task; a key reused
/// for another task is refused.
#[test]
fn an_idempotency_key_makes_a_retried_create_return_the_first_task() {
    let ws = api_common::workspace();
    let s = Server::start(ws.path(), &[]);
    let create = |key: &str, title: &str| {
        let res = client()
            .post(s.url("/api/tasks"))
            .bearer_auth(s.token())
            .header("Idempotency-Key", key)
            .json(&json!({"title": title, "pipeline": "fast", "start": true}))
            .send()
            .unwrap();
        let status = res.status();
        (status, res.json::<Value>().unwrap())
    };
    let (first, a) = create("k-1", "once");
    assert_eq!(first, StatusCode::CREATED, "{a}");
    let (again, b) = create("k-1", "once");
    assert_eq!(again, StatusCode::OK, "{b}");
    assert_eq!(a["id"], b["id"]);
    let (other, c) = create("k-1", "another title");
    assert_eq!(other, StatusCode::CONFLICT, "{c}");
    let list: Value = client()
        .get(s.url("/api/tasks"))
        .bearer_auth(s.token())
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
}

/// A pipeline that starts at a gate: `start` is refused there.
const GATED: &str = r#"{"id": "gated", "name": "Gated", "statuses": [
  {"id": "wait", "label": "Wait", "kind": "gate"},
  {"id": "done", "label": "Done", "kind": "done"},
  {"id": "failed", "label": "Failed", "kind": "failed"}]}"#;

/// `new --start` whose start is refused leaves no task behind (create and start are one
/// transaction), and `move` without a status is a 422.
#[test]
fn a_refused_start_leaves_no_task_behind() {
    let ws = api_common::workspace();
    std::fs::write(ws.path().join(".baton/pipelines/gated.json"), GATED).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .arg("--dir")
        .arg(ws.path())
        .args(["new", "half made", "--pipeline", "gated", "--start"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    let list = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .arg("--dir")
        .arg(ws.path())
        .args(["list", "--json"])
        .output()
        .unwrap();
    let tasks: Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(tasks, json!([]), "a task was left behind");

    let s = Server::start(ws.path(), &[]);
    let (status, body) = post(
        &s,
        "/api/tasks",
        json!({"title": "t", "pipeline": "gated", "start": true}),
    );
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let (status, task) = post(&s, "/api/tasks", json!({"title": "t", "pipeline": "fast"}));
    assert_eq!(status, StatusCode::CREATED);
    let url = format!("/api/tasks/{}/move", task["id"]);
    let (status, body) = post(&s, &url, json!({}));
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let (status, body) = post(&s, &url, json!({"status": " "}));
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    // No body at all names no status either.
    let res = client()
        .post(s.url(&url))
        .bearer_auth(s.token())
        .send()
        .unwrap();
    let status = res.status();
    let body: Value = res.json().unwrap_or(Value::Null);
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(
        body.to_string().contains("status to move to"),
        "the sentence says what is missing: {body}"
    );
}

/// Starts `baton serve` with at most `nofile` open files (soft and hard).
fn serve_with_nofile(ws: &Path, nofile: u64) -> Server {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_baton"));
    cmd.arg("--dir")
        .arg(ws)
        .args(["serve", "--listen", "127.0.0.1:0"]);
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::resource::setrlimit(
                nix::sys::resource::Resource::RLIMIT_NOFILE,
                nofile,
                nofile,
            )
            .map_err(std::io::Error::from)
        });
    }
    Server::spawn(cmd)
}

/// More idle sockets than the server has file descriptors: the API answers again once they
/// time out, and a CLI command is applied by the engine meanwhile.
#[test]
fn idle_sockets_cannot_take_the_servers_descriptors() {
    let ws = api_common::workspace();
    let s = serve_with_nofile(ws.path(), 256);
    // Loopback only, and a bounded number.
    let idle: Vec<_> = (0..300)
        .filter_map(|_| std::net::TcpStream::connect(&s.addr).ok())
        .collect();
    assert!(idle.len() > 200, "only {} sockets connected", idle.len());
    // The engine still takes commands: the CLI's request is applied, not left queued.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .arg("--dir")
        .arg(ws.path())
        .args(["new", "still here", "--pipeline", "fast", "--start"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .arg("--dir")
        .arg(ws.path())
        .args(["abort", &id])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // The API answers again within the patience (idle sockets are closed after their
    // header timeout), the idle ones still open on this side.
    let deadline = Instant::now() + PATIENCE;
    let c = Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    loop {
        let res = c.get(s.url("/api/tasks")).bearer_auth(s.token()).send();
        if res.is_ok_and(|r| r.status() == StatusCode::OK) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the API did not answer within {PATIENCE:?} of the idle sockets"
        );
        // A refused connection answers at once: pace the retries rather than hammer it.
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(idle);
}
