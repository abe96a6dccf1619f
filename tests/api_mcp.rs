//! `baton mcp` against the official Python MCP SDK as a client: tools listed, a task
//! created and started, approved at its gate (waited for through resource notifications),
//! its log read; bad input answered with the CLI's sentence.

mod api_common;

#[test]
fn python_client_drives_a_task_through_baton_mcp_on_stdio() {
    let Some(py) = api_common::python() else {
        return;
    };
    let ws = api_common::workspace();
    let out = api_common::run_client(
        &py,
        &[
            "stdio",
            env!("CARGO_BIN_EXE_baton"),
            ws.path().to_str().unwrap(),
        ],
    );
    assert!(out.contains("at the gate"), "{out}");
    assert!(out.contains("hello from from python"), "{out}");
    assert!(out.contains("listen ok (2026-07-28)"), "{out}");
}

/// Bad input never ends the server: a line that is not JSON, an unknown tool and wrong
/// arguments are answered (or skipped), and the next request is served.
#[test]
fn bad_input_is_answered_and_the_server_goes_on() {
    use std::io::{BufRead, BufReader, Write};
    let ws = api_common::workspace();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .arg("--dir")
        .arg(ws.path())
        .arg("mcp")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let lines = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        "this is not json",
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"approve","arguments":{"id":"seven"}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"list_tasks","arguments":{}}}"#,
    ];
    for l in lines {
        writeln!(stdin, "{l}").unwrap();
    }
    let mut answers = std::collections::HashMap::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let v: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        if let Some(id) = v["id"].as_i64() {
            answers.insert(id, v);
        }
        if answers.contains_key(&4) && answers.contains_key(&3) && answers.contains_key(&2) {
            break;
        }
    }
    drop(stdin);
    let wrong = &answers[&2]["result"];
    assert_eq!(wrong["isError"], true, "{wrong}");
    let text = wrong["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("the arguments of approve are wrong"),
        "{text}"
    );
    assert!(
        answers[&3]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no tool `no_such_tool`")
    );
    assert_eq!(answers[&4]["result"]["content"][0]["text"], "[]");
    assert!(child.wait().unwrap().success());
}
