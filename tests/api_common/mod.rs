//! Shared helpers of the API tests: a workspace with a fast pipeline, the Python MCP SDK in
//! a virtual environment, and running the Python client.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// A script step, then a gate: a task reaches the gate within a second.
pub const FAST: &str = r#"{"id": "fast", "name": "Fast", "statuses": [
  {"id": "backlog", "label": "Backlog", "kind": "queue"},
  {"id": "work", "label": "Work", "step": {"run": "echo \"hello from $BATON_TASK_TITLE\""}},
  {"id": "review", "label": "Review", "kind": "gate"},
  {"id": "done", "label": "Done", "kind": "done"},
  {"id": "failed", "label": "Failed", "kind": "failed"},
  {"id": "cancelled", "label": "Cancelled", "kind": "cancelled"}]}"#;

/// `baton init` in a fresh temp dir, with the `fast` pipeline.
pub fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .arg("--dir")
        .arg(dir.path())
        .arg("init")
        .output()
        .expect("baton init");
    assert!(out.status.success(), "{out:?}");
    std::fs::write(dir.path().join(".baton/pipelines/fast.json"), FAST).unwrap();
    dir
}

/// The Python interpreter of a virtual environment holding the official MCP SDK (PyPI
/// `mcp`), made in `target/mcp-venv` on first use (`.ci/run` makes it beforehand). None,
/// with a visible message, when it cannot be made (no python3, no package index).
pub fn python() -> Option<PathBuf> {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/mcp-venv");
    let py = venv.join("bin/python");
    let has_sdk = |py: &Path| {
        Command::new(py)
            .args(["-c", "import mcp.client.streamable_http"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if has_sdk(&py) {
        return Some(py);
    }
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .is_ok_and(|s| s.success())
        && Command::new(venv.join("bin/pip"))
            .args(["install", "-q", "mcp"])
            .status()
            .is_ok_and(|s| s.success());
    if made && has_sdk(&py) {
        Some(py)
    } else {
        eprintln!(
            "SKIPPED: the Python MCP SDK could not be installed in {} (python3 -m venv, pip install mcp) — .ci/run installs it",
            venv.display()
        );
        None
    }
}

/// Runs `tests/mcp_client.py` with these arguments; panics with its output unless it
/// ends with `ok`.
pub fn run_client(py: &Path, args: &[&str]) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py");
    let out = Command::new(py)
        .arg(script)
        .args(args)
        .env("PYTHONWARNINGS", "ignore")
        .output()
        .expect("python");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the MCP client failed:\n{text}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().last(),
        Some("ok"),
        "{text}"
    );
    text
}
