//! A two-agent pipeline against a real `opencode serve`, whose model is the loopback
//! OpenAI stub. Ignored by default because it needs the OpenCode binary:
//!
//! ```sh
//! (mkdir -p /tmp/oc && cd /tmp/oc && npm install opencode-ai@1.18.33)
//! OPENCODE_BIN=/tmp/oc/node_modules/opencode-linux-x64/bin/opencode \
//!   cargo test --test agent_opencode_real -- --ignored --nocapture
//! ```
//!
//! The server runs hermetically (temporary HOME and XDG folders, no model catalog fetch, no
//! auto-update) in its own process group, which the test kills at the end.

mod common;
mod stubs;

use common::Ws;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const PLAN: &str = "## What Was Done\nPlanned it.\n\n## Next Agent Context\nWrite hello.txt.\n";

/// Kills the server's process group when the test ends, however it ends.
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let pgid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        let _ = self.0.wait();
    }
}

/// `GET /global/health` by hand, so waiting needs no HTTP client.
fn health(port: u16) -> String {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = s.write_all(b"GET /global/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
#[ignore = "needs the OpenCode binary in OPENCODE_BIN"]
fn two_agents_through_a_real_opencode_server() {
    let Ok(bin) = std::env::var("OPENCODE_BIN") else {
        eprintln!("OPENCODE_BIN is not set; skipping");
        return;
    };
    let (model, stub) = stubs::openai(&[("stub-model", PLAN)]);
    let home = tempfile::tempdir().unwrap();
    let config = serde_json::json!({
        "model": "stub/stub-model",
        "small_model": "stub/stub-model",
        "permission": {"edit": "allow", "bash": "allow", "webfetch": "allow"},
        "provider": {"stub": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Local stub",
            "options": {"baseURL": format!("{}/v1", model.url), "apiKey": "sk-test"},
            "models": {"stub-model": {"name": "Stub", "limit": {"context": 128000, "output": 8192}}}
        }}
    });
    let port = free_port();
    let h = home.path();
    let server = Serve(
        Command::new(&bin)
            .args([
                "serve",
                "--hostname",
                "127.0.0.1",
                "--port",
                &port.to_string(),
            ])
            .current_dir(h)
            .env("HOME", h)
            .env("XDG_CONFIG_HOME", h.join("config"))
            .env("XDG_DATA_HOME", h.join("data"))
            .env("XDG_CACHE_HOME", h.join("cache"))
            .env("XDG_STATE_HOME", h.join("state"))
            .env("OPENCODE_CONFIG_CONTENT", config.to_string())
            .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
            .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
            .env("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1")
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("start opencode"),
    );
    let url = format!("http://127.0.0.1:{port}");
    stubs::wait_for("opencode to answer", Duration::from_secs(60), || {
        health(port).contains("\"healthy\":true")
    });

    let ws = Ws::new();
    ws.pipeline(
        "real.json",
        r#"{"id": "real", "statuses": [
            {"id": "todo", "kind": "queue"},
            {"id": "plan", "step": {"agent": "oc", "timeout": "2m"}},
            {"id": "build", "step": {"agent": "oc", "timeout": "2m"}},
            {"id": "done", "kind": "done"}, {"id": "failed", "kind": "failed"}]}"#,
    );
    std::fs::write(
        ws.root().join(".baton/agents/oc.json"),
        format!(
            r#"{{"id": "oc", "backend": "opencode", "url": "{url}", "agent": "build", "model": "stub/stub-model",
  "prompt_template": "{{{{title}}}}\n\n{{{{handoff}}}}"}}"#
        ),
    )
    .unwrap();
    // Built-in profiles (claude, a local model server) may fail here; ours must not.
    let check = ws.baton(&["agents", "check"]).output().unwrap();
    let check = String::from_utf8_lossy(&check.stdout).into_owned();
    assert!(
        check
            .lines()
            .any(|l| l.starts_with("ok") && l.contains("OpenCode 1.")),
        "{check}"
    );
    let out = ws
        .baton(&["run", "real", "--title", "Hello", "--wait", "--json"])
        .timeout(Duration::from_secs(240))
        .output()
        .unwrap();
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{shown} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let steps = shown["steps"].as_array().unwrap();
    assert_eq!(
        steps[0]["handoff"]["metadata"]["what_was_done"],
        "Planned it."
    );
    assert!(
        steps[0]["usage"]["input_tokens"].as_u64().unwrap() > 0,
        "{shown}"
    );
    let asked: Vec<String> = stub
        .requests
        .lock()
        .unwrap()
        .iter()
        .map(|(_, b)| b.to_string())
        .collect();
    assert!(
        asked
            .iter()
            .any(|b| b.contains("## Handoff from previous step (plan)")),
        "the second agent's model call carries the context header"
    );
    let log = ws.ok(&["logs", "1", "--step", "1"]);
    assert!(log.contains("OpenCode session ses_"), "{log}");
    drop(server);
}
