//! `baton serve` as a client sees it: the token, the Host/Origin guard, the event stream
//! following a task to its gate and on to done, signed GitHub pushes fired once, trigger
//! webhooks, body limits, and the Python MCP client over `/mcp`.

mod api_common;
mod infra;

use api_common::Server;
use reqwest::StatusCode;
use reqwest::blocking::Client;
use serde_json::{Value, json};
use std::io::BufRead;
use std::sync::mpsc;
use std::time::Duration;

/// How long any awaited event may take (a bound, not a pause).
const PATIENCE: Duration = Duration::from_secs(30);

fn client() -> Client {
    Client::builder().timeout(None).build().unwrap()
}

fn get(s: &Server, path: &str) -> reqwest::blocking::Response {
    client()
        .get(s.url(path))
        .bearer_auth(s.token())
        .send()
        .unwrap()
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

/// One server-sent event.
#[derive(Debug, Clone)]
struct Sse {
    event: String,
    id: String,
    data: Value,
}

/// Opens `/api/events` and hands each event to the returned channel.
fn events(s: &Server, query: &str, last_id: Option<&str>) -> mpsc::Receiver<Sse> {
    let mut req = client()
        .get(s.url(&format!("/api/events{query}")))
        .bearer_auth(s.token());
    if let Some(id) = last_id {
        req = req.header("Last-Event-ID", id);
    }
    let res = req.send().unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (mut event, mut id, mut data) = (String::new(), String::new(), String::new());
        for line in std::io::BufReader::new(res).lines() {
            let Ok(line) = line else { return };
            if let Some(v) = line.strip_prefix("event: ") {
                event = v.to_string();
            } else if let Some(v) = line.strip_prefix("id: ") {
                id = v.to_string();
            } else if let Some(v) = line.strip_prefix("data: ") {
                data = v.to_string();
            } else if line.is_empty() && !data.is_empty() {
                let ev = Sse {
                    event: std::mem::take(&mut event),
                    id: std::mem::take(&mut id),
                    data: serde_json::from_str(&std::mem::take(&mut data)).unwrap(),
                };
                if tx.send(ev).is_err() {
                    return;
                }
            }
        }
    });
    rx
}

/// Reads events until one matches; returns it and those before it.
fn until(rx: &mpsc::Receiver<Sse>, what: &str, pred: impl Fn(&Sse) -> bool) -> Vec<Sse> {
    let mut seen = Vec::new();
    loop {
        match rx.recv_timeout(PATIENCE) {
            Ok(ev) => {
                let done = pred(&ev);
                seen.push(ev);
                if done {
                    return seen;
                }
            }
            Err(_) => panic!("no event {what} within {PATIENCE:?}; saw {seen:#?}"),
        }
    }
}

fn task_state(ev: &Sse, id: i64, status: &str, state: &str) -> bool {
    ev.event == "task"
        && ev.data["id"] == id
        && ev.data["status"] == status
        && ev.data["state"] == state
}

#[test]
fn token_host_and_origin_are_checked_on_api_and_mcp() {
    let ws = api_common::workspace();
    let s = Server::start(ws.path(), &[]);
    let c = client();
    let url = s.url("/api/tasks");
    assert_eq!(
        c.get(&url).send().unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
    let wrong = c.get(&url).bearer_auth("not-the-token").send().unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    assert!(wrong.text().unwrap().contains(".baton/token"));
    assert_eq!(get(&s, "/api/tasks").status(), StatusCode::OK);
    for path in ["/api/tasks", "/mcp"] {
        let host = c
            .get(s.url(path))
            .bearer_auth(s.token())
            .header("Host", "attacker.example:80")
            .send()
            .unwrap();
        assert_eq!(host.status(), StatusCode::FORBIDDEN, "{path}");
        let origin = c
            .post(s.url(path))
            .bearer_auth(s.token())
            .header("Origin", "http://attacker.example")
            .json(&json!({"title": "x"}))
            .send()
            .unwrap();
        assert_eq!(origin.status(), StatusCode::FORBIDDEN, "{path}");
    }
    let mcp = c.post(s.url("/mcp")).json(&json!({})).send().unwrap();
    assert_eq!(mcp.status(), StatusCode::UNAUTHORIZED);
    // The server's own origin is welcome.
    let same = c
        .get(&url)
        .bearer_auth(s.token())
        .header("Origin", format!("http://{}", s.addr))
        .send()
        .unwrap();
    assert_eq!(same.status(), StatusCode::OK);
    // Nothing was created by the refused requests.
    assert_eq!(get(&s, "/api/tasks").json::<Value>().unwrap(), json!([]));
    // A rotated token applies at once.
    let old = s.token();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .arg("--dir")
        .arg(ws.path())
        .args(["token", "rotate"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_ne!(old, s.token());
    let stale = c.get(&url).bearer_auth(&old).send().unwrap();
    assert_eq!(stale.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(get(&s, "/api/tasks").status(), StatusCode::OK);
}

#[test]
fn events_follow_a_task_to_its_gate_and_after_approval_to_done() {
    let ws = api_common::workspace();
    let s = Server::start(ws.path(), &[]);
    let rx = events(&s, "", None);
    let (code, task) = post(
        &s,
        "/api/tasks",
        json!({"title": "watch me", "pipeline": "fast", "start": true, "prompt": "p"}),
    );
    assert_eq!(code, StatusCode::CREATED, "{task}");
    let id = task["id"].as_i64().unwrap();
    assert_eq!(task["title"], "watch me");
    let before = until(&rx, "at the gate", |e| {
        task_state(e, id, "review", "waiting")
    });
    // The step's start too, unless it started and ended between two looks of the stream.
    assert!(
        before
            .iter()
            .any(|e| e.event == "step_started" && e.data["status"] == "work")
            || before.iter().all(|e| e.event != "step_started"),
        "{before:#?}"
    );
    assert!(
        before
            .iter()
            .any(|e| e.event == "step_finished" && e.data["exit_code"] == 0 && e.data["step"] == 1),
        "{before:#?}"
    );
    // Sent back to the step: the stream's next look at the task reads only from the step
    // it had not seen end, and still numbers the new one second.
    let (code, moved) = post(
        &s,
        &format!("/api/tasks/{id}/reject"),
        json!({"note": "again"}),
    );
    assert_eq!(code, StatusCode::OK, "{moved}");
    let again = until(&rx, "at the gate again", |e| {
        task_state(e, id, "review", "waiting")
    });
    // A look sees the step as it stands: a step that started and ended between two
    // looks is announced by its end alone.
    let steps: Vec<_> = again
        .iter()
        .filter(|e| e.event.starts_with("step_"))
        .collect();
    assert!(
        steps
            .iter()
            .all(|e| e.data["step"] == 2 && e.data["attempt"] == 2),
        "{again:#?}"
    );
    assert_eq!(
        steps.last().map(|e| e.event.as_str()),
        Some("step_finished"),
        "{again:#?}"
    );
    let (code, done) = post(
        &s,
        &format!("/api/tasks/{id}/approve"),
        json!({"note": "ok"}),
    );
    assert_eq!(code, StatusCode::OK, "{done}");
    assert_eq!(done["state"], "done");
    until(&rx, "done", |e| task_state(e, id, "done", "done"));
    // A stream of a task that does not exist is refused; one resumed from an id further
    // on than the board has come goes on from where the board stands.
    let none = get(&s, "/api/events?task=999");
    assert_eq!(none.status(), StatusCode::NOT_FOUND);
    assert!(none.text().unwrap().contains("999"));
    let ahead = events(&s, "", Some("99999999.0.0"));
    let (code, other) = post(
        &s,
        "/api/tasks",
        json!({"title": "after a restore", "pipeline": "fast"}),
    );
    assert_eq!(code, StatusCode::CREATED, "{other}");
    until(&ahead, "the new task", |e| {
        e.event == "task" && e.data["id"] == other["id"]
    });
    // Approving again is refused with the CLI's sentence.
    let (code, again) = post(&s, &format!("/api/tasks/{id}/approve"), json!({}));
    assert_eq!(code, StatusCode::CONFLICT);
    assert!(
        again["error"].as_str().unwrap().contains("no longer at"),
        "{again}"
    );
    // Resuming from the first event's id replays what followed, up to done.
    let first = &before[0].id;
    let replay = events(&s, &format!("?task={id}"), Some(first));
    let seen = until(&replay, "done again", |e| task_state(e, id, "done", "done"));
    assert!(seen.iter().any(|e| {
        e.event == "log"
            && e.data["text"]
                .as_str()
                .is_some_and(|t| t.contains("hello from watch me"))
    }));
    let logs: Value = get(&s, &format!("/api/tasks/{id}/logs?step=1"))
        .json()
        .unwrap();
    assert!(
        logs["lines"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["text"] == "hello from watch me")
    );
}

/// GitHub's signature of a body.
fn sign(secret: &str, body: &[u8]) -> String {
    use hmac::{Hmac, Mac};
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256={hex}")
}

const ONPUSH: &str = r#"{"id": "onpush", "name": "On push", "statuses": [
  {"id": "backlog", "label": "Backlog", "kind": "queue"},
  {"id": "work", "label": "Work", "step": {"run": "cat \"$BATON_TRIGGER_PAYLOAD_FILE\" 2>/dev/null || echo no payload"}},
  {"id": "done", "label": "Done", "kind": "done"},
  {"id": "failed", "label": "Failed", "kind": "failed"},
  {"id": "cancelled", "label": "Cancelled", "kind": "cancelled"}],
 "triggers": [{"push": {"branches": ["main"]}, "title": "ci {{branch}} {{sha}}"}]}"#;

#[test]
fn a_signed_push_fires_once_and_a_bad_signature_changes_nothing() {
    let ws = api_common::workspace();
    std::fs::write(ws.path().join(".baton/pipelines/onpush.json"), ONPUSH).unwrap();
    let s = Server::start(ws.path(), &[("BATON_GITHUB_SECRET", "hush")]);
    let body =
        br#"{"ref": "refs/heads/main", "after": "0123456789abcdef0123456789abcdef01234567"}"#;
    let deliver = |delivery: &str, signature: &str| {
        client()
            .post(s.url("/hooks/github"))
            .header("X-GitHub-Event", "push")
            .header("X-GitHub-Delivery", delivery)
            .header("X-Hub-Signature-256", signature)
            .body(body.to_vec())
            .send()
            .unwrap()
    };
    let bad = deliver("d0", &sign("wrong", body));
    assert_eq!(bad.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(get(&s, "/api/tasks").json::<Value>().unwrap(), json!([]));
    let first: Value = deliver("d1", &sign("hush", body)).json().unwrap();
    assert_eq!(first["duplicate"], false);
    assert_eq!(first["tasks"].as_array().unwrap().len(), 1, "{first}");
    // The same delivery again, and a new delivery of the same commit: no new task.
    let again: Value = deliver("d1", &sign("hush", body)).json().unwrap();
    assert_eq!(again["duplicate"], true);
    let other: Value = deliver("d2", &sign("hush", body)).json().unwrap();
    assert_eq!(other["tasks"], json!([]));
    let tasks: Value = get(&s, "/api/tasks").json().unwrap();
    assert_eq!(tasks.as_array().unwrap().len(), 1, "{tasks}");
    assert_eq!(tasks[0]["title"], "ci main 0123456789ab");
}

#[test]
fn a_trigger_webhook_starts_a_task_whose_step_reads_the_payload() {
    let ws = api_common::workspace();
    std::fs::write(ws.path().join(".baton/pipelines/onpush.json"), ONPUSH).unwrap();
    let s = Server::start(ws.path(), &[]);
    let unauth = client()
        .post(s.url("/hooks/trigger/onpush"))
        .json(&json!({"title": "x"}))
        .send()
        .unwrap();
    assert_eq!(unauth.status(), StatusCode::UNAUTHORIZED);
    let rx = events(&s, "", None);
    let payload = json!({"title": "deploy", "prompt": "ship it", "build": 42});
    let (code, task) = post(&s, "/hooks/trigger/onpush", payload.clone());
    assert_eq!(code, StatusCode::CREATED, "{task}");
    let id = task["id"].as_i64().unwrap();
    until(&rx, "done", |e| task_state(e, id, "done", "done"));
    let logs: Value = get(&s, &format!("/api/tasks/{id}/logs")).json().unwrap();
    let out: Vec<&str> = logs["lines"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["stream"] == "stdout")
        .map(|l| l["text"].as_str().unwrap())
        .collect();
    let got: Value = serde_json::from_str(&out.join("\n")).unwrap();
    assert_eq!(got, payload);
    let (code, missing) = post(&s, "/hooks/trigger/nope", json!({}));
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert!(
        missing["error"]
            .as_str()
            .unwrap()
            .contains("no pipeline `nope`")
    );
}

/// Sends a request that announces a 2 MiB body and writes only its start (the server answers
/// before reading it); returns the status line and the body of the answer.
fn announce_big_body(s: &Server) -> (String, Value) {
    use std::io::{Read, Write};
    let mut sock = std::net::TcpStream::connect(&s.addr).unwrap();
    let head = format!(
        "POST /api/tasks HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{{\"title\": \"big\", \"prompt\": \"",
        s.addr,
        s.token(),
        2 * 1024 * 1024
    );
    sock.write_all(head.as_bytes()).unwrap();
    let mut reader = std::io::BufReader::new(sock);
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line.trim().is_empty() {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    (
        status.trim().to_string(),
        serde_json::from_slice(&body).unwrap(),
    )
}

#[test]
fn oversized_bodies_get_413_and_create_nothing() {
    let ws = api_common::workspace();
    let s = Server::start(ws.path(), &[]);
    let (status, body) = announce_big_body(&s);
    assert!(status.contains(" 413 "), "{status}");
    assert!(
        body["error"].as_str().unwrap().contains("max_body_bytes"),
        "{body}"
    );
    assert_eq!(get(&s, "/api/tasks").json::<Value>().unwrap(), json!([]));
    let doc: Value = get(&s, "/api/openapi.json").json().unwrap();
    assert!(doc["paths"]["/api/tasks/{id}/{action}"]["post"].is_object());
    assert!(doc["components"]["schemas"]["ShowTask"]["properties"]["steps"].is_object());
}

#[test]
fn python_client_drives_a_task_over_mcp_on_http() {
    let Some(py) = api_common::python() else {
        return;
    };
    let ws = api_common::workspace();
    let s = Server::start(ws.path(), &[]);
    let out = api_common::run_client(&py, &["http", &s.url("/mcp"), &s.token()]);
    assert!(out.contains("at the gate"), "{out}");
}

#[test]
fn an_attached_server_takes_over_when_the_engine_stops() {
    use nix::sys::signal::{Signal, kill};
    let ws = api_common::workspace();
    let mut engine = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .arg("--dir")
        .arg(ws.path())
        .arg("engine")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(engine.stderr.take().unwrap()).lines();
    assert!(lines.any(|l| l.unwrap().contains("baton engine running")));
    let s = Server::start(ws.path(), &[]);
    assert!(s.banner.contains("attached"), "{}", s.banner);
    let rx = events(&s, "", None);
    kill(
        nix::unistd::Pid::from_raw(engine.id() as i32),
        Signal::SIGTERM,
    )
    .unwrap();
    engine.wait().unwrap();
    // Whether the request or the takeover comes first, the step runs.
    let (code, task) = post(
        &s,
        "/api/tasks",
        json!({"title": "after the engine", "pipeline": "fast", "start": true}),
    );
    assert_eq!(code, StatusCode::CREATED, "{task}");
    let id = task["id"].as_i64().unwrap();
    until(&rx, "at the gate", |e| {
        task_state(e, id, "review", "waiting")
    });
}
