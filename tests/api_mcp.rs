//! `baton mcp` against the official Python MCP SDK as a client: tools listed, a task
//! created and started, approved at its gate (waited for through resource notifications),
//! its log read; bad input answered with the CLI's sentence.

mod infra;
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

/// Bad input never ends the server: a line that is not JSON is skipped; JSON of the wrong
/// shape, an unknown tool or method and wrong arguments are answered with a sentence, and
/// the next request is served.
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
        "[]",
        r#"{"jsonrpc":"2.0","id":5,"method":"bogus/method"}"#,
        r#"{"jsonrpc":"2.0","id":6,"method":"tools/call"}"#,
    ];
    for l in lines {
        writeln!(stdin, "{l}").unwrap();
    }
    let mut answers = std::collections::HashMap::new();
    let mut unnumbered = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let v: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        match v["id"].as_i64() {
            Some(id) => {
                answers.insert(id, v);
            }
            None => unnumbered.push(v),
        }
        if (2..=6).all(|id| answers.contains_key(&id)) && !unnumbered.is_empty() {
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
    // JSON that is no JSON-RPC message, an unknown method, a method without its params:
    // each answered with a sentence saying what to send.
    let not_a_message = unnumbered[0]["error"]["message"].as_str().unwrap();
    assert!(
        not_a_message.contains("not a JSON-RPC message"),
        "{not_a_message}"
    );
    let unknown = answers[&5]["error"]["message"].as_str().unwrap();
    assert!(unknown.contains("no method `bogus/method`"), "{unknown}");
    let shapeless = answers[&6]["error"]["message"].as_str().unwrap();
    assert!(shapeless.contains("params are missing"), "{shapeless}");
    assert!(child.wait().unwrap().success());
}
