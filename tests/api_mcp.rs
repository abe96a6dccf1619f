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
}
