//! `say` and `answer` over the HTTP API and the MCP tools: a message is kept for the task's
//! next agent step and listed in `messages`; bad bodies and finished tasks get a sentence
//! with the right status; an answer where nothing was asked is refused.

mod api_common;
mod infra;

use api_common::Server;
use reqwest::StatusCode;
use reqwest::blocking::Client;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::time::Duration;

const PATIENCE: Duration = Duration::from_secs(30);

fn post(s: &Server, path: &str, body: &str) -> (StatusCode, Value) {
    let res = Client::new()
        .post(s.url(path))
        .bearer_auth(s.token())
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .unwrap();
    let status = res.status();
    (status, res.json().unwrap_or(Value::Null))
}

fn show(s: &Server, id: i64) -> Value {
    Client::new()
        .get(s.url(&format!("/api/tasks/{id}")))
        .bearer_auth(s.token())
        .send()
        .unwrap()
        .json()
        .unwrap()
}

fn create(s: &Server, start: bool) -> i64 {
    let body = json!({"title": "talk", "pipeline": "fast", "start": start}).to_string();
    let (code, task) = post(s, "/api/tasks", &body);
    assert_eq!(code, StatusCode::CREATED, "{task}");
    task["id"].as_i64().unwrap()
}

#[test]
fn say_and_answer_over_http() {
    let ws = api_common::workspace();
    // What is said through the workspace's token is said by the server's person.
    let s = Server::start(ws.path(), &[("BATON_USER", "dana")]);
    let id = create(&s, false);
    let (code, task) = post(
        &s,
        &format!("/api/tasks/{id}/say"),
        r#"{"text": "Keep it short."}"#,
    );
    assert_eq!(code, StatusCode::OK, "{task}");
    let m = &task["messages"][0];
    assert_eq!(m["text"], "Keep it short.", "{task:#}");
    assert_eq!(m["actor"], "dana");
    assert_eq!(m["state"], "queued");
    assert_eq!(m["via"], "next step");
    assert_eq!(task["questions"], json!([]));
    // Blank text, a NUL byte: 400 with the engine's sentence; the wrong shape: 422.
    for (body, want) in [
        (r#"{"text": "  "}"#, "is empty"),
        (r#"{"text": "a\u0000b"}"#, "NUL byte"),
    ] {
        let (code, e) = post(&s, &format!("/api/tasks/{id}/say"), body);
        assert_eq!(code, StatusCode::BAD_REQUEST, "{body}: {e}");
        assert!(e["error"].as_str().unwrap().contains(want), "{e}");
    }
    let (code, e) = post(&s, &format!("/api/tasks/{id}/say"), r#"{"message": "x"}"#);
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{e}");
    let (code, e) = post(&s, "/api/tasks/999/say", r#"{"text": "x"}"#);
    assert_eq!(code, StatusCode::NOT_FOUND, "{e}");
    // Nothing was asked: 409 saying so, and what to do instead.
    let (code, e) = post(
        &s,
        &format!("/api/tasks/{id}/answer"),
        r#"{"answers": ["yes"]}"#,
    );
    assert_eq!(code, StatusCode::CONFLICT, "{e}");
    let said = e["error"].as_str().unwrap();
    assert!(
        said.contains("asked nothing") && said.contains("baton say"),
        "{said}"
    );
    let (code, e) = post(
        &s,
        &format!("/api/tasks/{id}/answer"),
        r#"{"answers": "yes"}"#,
    );
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{e}");
    assert_eq!(show(&s, id)["messages"].as_array().unwrap().len(), 1);
    // A finished task has no agent to hear it.
    let done = create(&s, true);
    let start = std::time::Instant::now();
    while show(&s, done)["status"] != "review" {
        assert!(
            start.elapsed() < PATIENCE,
            "the task never reached its gate"
        );
        std::thread::yield_now();
    }
    let (code, _) = post(&s, &format!("/api/tasks/{done}/approve"), "{}");
    assert_eq!(code, StatusCode::OK);
    let (code, e) = post(&s, &format!("/api/tasks/{done}/say"), r#"{"text": "hi"}"#);
    assert_eq!(code, StatusCode::CONFLICT, "{e}");
    assert!(e["error"].as_str().unwrap().contains("has finished"), "{e}");
}

#[test]
fn the_openapi_document_lists_say_and_answer() {
    let ws = api_common::workspace();
    let s = Server::start(ws.path(), &[]);
    let doc: Value = Client::new()
        .get(s.url("/api/openapi.json"))
        .bearer_auth(s.token())
        .send()
        .unwrap()
        .json()
        .unwrap();
    for path in ["/api/tasks/{id}/say", "/api/tasks/{id}/answer"] {
        assert!(doc["paths"][path]["post"].is_object(), "{path}");
    }
    let show = &doc["components"]["schemas"]["ShowTask"]["properties"];
    assert!(show["messages"].is_object() && show["questions"].is_object());
}

#[test]
fn say_and_answer_as_mcp_tools() {
    let ws = api_common::workspace();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .arg("--dir")
        .arg(ws.path())
        .arg("mcp")
        // MCP on stdio acts as the person running it.
        .env("BATON_USER", "eve")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let lines = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"create_task","arguments":{"title":"talk","pipeline":"fast"}}}"#,
    ];
    for l in lines {
        writeln!(stdin, "{l}").unwrap();
    }
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut answer = |want: i64| loop {
        let v: Value = serde_json::from_str(&out.next().unwrap().unwrap()).unwrap();
        if v["id"].as_i64() == Some(want) {
            return v;
        }
    };
    let tools = answer(2);
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"say") && names.contains(&"answer"),
        "{names:?}"
    );
    let made = answer(3);
    let task: Value =
        serde_json::from_str(made["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    let id = task["id"].as_i64().unwrap();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{{"name":"say","arguments":{{"id":{id},"text":"Mind the tests."}}}}}}"#
    )
    .unwrap();
    let said = answer(4);
    let shown: Value =
        serde_json::from_str(said["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(shown["messages"][0]["text"], "Mind the tests.", "{shown:#}");
    assert_eq!(shown["messages"][0]["actor"], "eve", "{shown:#}");
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{{"name":"answer","arguments":{{"id":{id},"answers":["yes"]}}}}}}"#
    )
    .unwrap();
    let refused = answer(5);
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    let text = refused["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("asked nothing"), "{text}");
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{{"name":"say","arguments":{{"id":{id}}}}}}}"#
    )
    .unwrap();
    let wrong = answer(6);
    let text = wrong["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("the arguments of say are wrong"), "{text}");
    drop(stdin);
    let _ = child.wait();
}
