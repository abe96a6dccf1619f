//! The OpenAPI document tells the truth: Schemathesis (PyPI `schemathesis`, pinned below)
//! drives a real `baton serve` from `/api/openapi.json` with generated requests and every
//! check it has (undocumented status codes, bodies the schema refuses, requests the schema
//! allows but the server refuses or the other way round, …). Any finding fails the test.
//! The event stream is left out: it never ends, and a generated request cannot read it.

mod api_common;
mod infra;

use api_common::Server;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The Schemathesis release this test was written against.
const SCHEMATHESIS: &str = "schemathesis==4.32.5";

/// `st` of a virtual environment in `target/st-venv`, made on first use (`.ci/run` makes it
/// beforehand). None, with a visible message (a failure under `BATON_REQUIRE_INFRA`), when
/// it cannot be made.
fn schemathesis() -> Option<PathBuf> {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/st-venv");
    let st = venv.join("bin/st");
    let works = |st: &Path| {
        Command::new(st)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if works(&st) {
        return Some(st);
    }
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .is_ok_and(|s| s.success())
        && Command::new(venv.join("bin/pip"))
            .args(["install", "-q", SCHEMATHESIS])
            .status()
            .is_ok_and(|s| s.success());
    if made && works(&st) {
        Some(st)
    } else {
        infra::missing(
            &format!("Schemathesis in {}", venv.display()),
            &format!(
                "python3 -m venv target/st-venv && target/st-venv/bin/pip install {SCHEMATHESIS}; .ci/run installs it"
            ),
        );
        None
    }
}

#[test]
fn the_openapi_document_describes_every_answer() {
    let Some(st) = schemathesis() else { return };
    let ws = api_common::workspace();
    let s = Server::start(ws.path(), &[]);
    let report = tempfile::tempdir().unwrap();
    let out = Command::new(st)
        .arg("run")
        .arg(s.url("/api/openapi.json"))
        .args(["--checks", "all", "--max-examples", "25", "--seed", "1"])
        .args(["--exclude-path", "/api/events"])
        .args(["--workers", "1", "--request-timeout", "20", "--no-color"])
        .arg("--header")
        .arg(format!("Authorization: Bearer {}", s.token()))
        .arg("--report-dir")
        .arg(report.path())
        .current_dir(report.path())
        .output()
        .expect("st run");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "Schemathesis found problems:\n{text}");
}
