//! Real infrastructure a test needs (a Docker daemon, sshd, the MCP SDK, the agent CLIs from
//! npm): where it is missing, a plain `cargo test` skips with one line saying what and how to
//! get it, and a run with `BATON_REQUIRE_INFRA=1` (what `.ci/run` sets) fails instead, so a
//! green CI proves these tests ran.
#![allow(dead_code)]

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// True when missing infrastructure must fail the test (`BATON_REQUIRE_INFRA=1`).
pub fn required() -> bool {
    std::env::var("BATON_REQUIRE_INFRA").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Reports that `what` is missing (`how` says how to get it): panics when it is required,
/// else prints one `SKIPPED` line per test binary and `what`, and the caller returns.
pub fn missing(what: &str, how: &str) {
    if required() {
        panic!("BATON_REQUIRE_INFRA is set and {what} is missing: {how}");
    }
    static SAID: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if said.get_or_insert_with(HashSet::new).insert(what.to_string()) {
        eprintln!("SKIPPED: {what} is missing ({how}); set BATON_REQUIRE_INFRA=1 to fail instead");
    }
}

/// The folder holding the agent CLIs' launchers (`claude`, `codex`, `gemini`, `opencode`):
/// `BATON_AGENT_CLIS`, else `target/agent-clis/node_modules/.bin` as `.ci/run` installs them.
pub fn agent_clis_dir() -> PathBuf {
    match std::env::var_os("BATON_AGENT_CLIS") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("target/agent-clis/node_modules/.bin"),
    }
}

/// The real agent CLI `name` installed from npm, or None after [`missing`] said so.
pub fn agent_cli(name: &str) -> Option<PathBuf> {
    let path = agent_clis_dir().join(name);
    if path.exists() {
        return Some(path);
    }
    missing(
        &format!("the `{name}` CLI ({})", path.display()),
        "run .ci/run, which installs the pinned agent CLIs from npm into target/agent-clis",
    );
    None
}
