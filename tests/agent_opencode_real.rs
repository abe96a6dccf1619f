//! Agent steps through a real OpenCode server (`opencode-ai` from npm, as `.ci/run`
//! installs it), whose model is the loopback OpenAI stub: one server the test runs, and one
//! baton starts itself for a `"serve": true` profile.
//!
//! OpenCode runs hermetically: temporary HOME and XDG folders, its configuration inline, no
//! model catalog fetch, no auto-update.

mod common;
mod infra;
mod stubs;

use common::Ws;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const PLAN: &str = "## What Was Done\nPlanned it.\n\n## Next Agent Context\nWrite hello.txt.\n";

/// Kills a process group when the test ends, however it ends.
struct Group(Child);

impl Drop for Group {
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

/// A hermetic OpenCode setup whose model is the stub at `model_url`.
struct Hermetic {
    home: tempfile::TempDir,
    config: String,
}

impl Hermetic {
    fn new(model_url: &str) -> Self {
        let config = serde_json::json!({
            "model": "stub/stub-model",
            "small_model": "stub/stub-model",
            "permission": {"edit": "allow", "bash": "allow", "webfetch": "allow"},
            "provider": {"stub": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Local stub",
                "options": {"baseURL": format!("{model_url}/v1"), "apiKey": "sk-test"},
                "models": {"stub-model": {"name": "Stub", "limit": {"context": 128000, "output": 8192}}}
            }}
        });
        Self {
            home: tempfile::tempdir().unwrap(),
            config: config.to_string(),
        }
    }

    /// The environment OpenCode (or baton, which passes it on) runs with.
    fn apply(&self, cmd: &mut Command, clis: &Path) {
        let h = self.home.path();
        let path = format!(
            "{}:{}",
            clis.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        cmd.env("PATH", path)
            .env("HOME", h)
            .env("XDG_CONFIG_HOME", h.join("config"))
            .env("XDG_DATA_HOME", h.join("data"))
            .env("XDG_CACHE_HOME", h.join("cache"))
            .env("XDG_STATE_HOME", h.join("state"))
            .env("OPENCODE_CONFIG_CONTENT", &self.config)
            .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
            .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
            .env("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1")
            .env("NO_COLOR", "1")
            .env_remove("BATON_DIR");
    }
}

/// A pipeline of two agent steps (`oc`), with a gate between them when `gate`.
fn pipeline(ws: &Ws, gate: bool) {
    let gate = if gate {
        r#"{"id": "check", "kind": "gate"},"#
    } else {
        ""
    };
    ws.pipeline(
        "real.json",
        &format!(
            r#"{{"id": "real", "statuses": [
            {{"id": "todo", "kind": "queue"}},
            {{"id": "plan", "step": {{"agent": "oc", "timeout": "2m"}}}},
            {gate}
            {{"id": "build", "step": {{"agent": "oc", "timeout": "2m"}}}},
            {{"id": "done", "kind": "done"}}, {{"id": "failed", "kind": "failed"}}]}}"#
        ),
    );
}

#[test]
fn two_agents_through_a_real_opencode_server() {
    let Some(bin) = infra::agent_cli("opencode") else {
        return;
    };
    let (model, stub) = stubs::openai(&[("stub-model", PLAN)]);
    let oc = Hermetic::new(&model.url);
    let port = free_port();
    let mut cmd = Command::new(&bin);
    cmd.args([
        "serve",
        "--hostname",
        "127.0.0.1",
        "--port",
        &port.to_string(),
    ])
    .current_dir(oc.home.path())
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .process_group(0);
    oc.apply(&mut cmd, &infra::agent_clis_dir());
    let server = Group(cmd.spawn().expect("start opencode"));
    let url = format!("http://127.0.0.1:{port}");
    stubs::wait_for("opencode to answer", Duration::from_secs(90), || {
        health(port).contains("\"healthy\":true")
    });

    let ws = Ws::new();
    pipeline(&ws, false);
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

/// The processes (pids) whose environment marks them as the OpenCode server of the
/// workspace at `root`, or one of its children.
fn served_processes(root: &Path) -> Vec<i32> {
    let canon = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let marks: Vec<Vec<u8>> = [canon, root.to_path_buf()]
        .iter()
        .map(|r| format!("BATON_OPENCODE_SERVE=engine:{}", r.display()).into_bytes())
        .collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| common::alive(*pid))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
                env.split(|b| *b == 0)
                    .any(|kv| marks.iter().any(|m| kv == m))
            })
        })
        .collect()
}

#[test]
fn baton_starts_the_server_restarts_it_and_stops_it_with_the_engine() {
    let Some(_) = infra::agent_cli("opencode") else {
        return;
    };
    let (model, _stub) = stubs::openai(&[("stub-model", PLAN)]);
    let oc = Hermetic::new(&model.url);
    let ws = Ws::new();
    pipeline(&ws, true);
    std::fs::write(
        ws.root().join(".baton/agents/oc.json"),
        r#"{"id": "oc", "backend": "opencode", "serve": true, "agent": "build", "model": "stub/stub-model",
  "prompt_template": "{{title}}\n\n{{handoff}}"}"#,
    )
    .unwrap();
    let baton = |args: &[&str]| {
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("baton"));
        cmd.args(args).current_dir(ws.root());
        oc.apply(&mut cmd, &infra::agent_clis_dir());
        cmd
    };
    let said =
        String::from_utf8_lossy(&baton(&["agents", "check"]).output().unwrap().stdout).into_owned();
    assert!(
        said.lines().any(|l| l.starts_with("ok")
            && l.contains("oc")
            && l.contains("baton starts `opencode serve` when a step needs it")),
        "{said}"
    );
    // Checking starts no server: only an engine does.
    assert!(served_processes(ws.root()).is_empty());

    // The engine's own secrets, one under the name the workspace chose for its webhook
    // secret: the server does not inherit them.
    let config = ws.root().join(".baton/config.toml");
    let mut toml = std::fs::read_to_string(&config).unwrap_or_default();
    toml.push_str("\n[serve]\ngithub_secret_env = \"HOOK_SIGNING_SECRET\"\n");
    std::fs::write(&config, toml).unwrap();
    let mut engine = baton(&["engine"]);
    engine
        .env("BATON_API_TOKEN", "engine-only-token-1234")
        .env("HOOK_SIGNING_SECRET", "engine-only-hook-5678")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    let engine = Group(engine.spawn().expect("engine starts"));
    let id = ws.ok(&["new", "Hello", "--pipeline", "real", "--start"]);
    let id = id.trim();
    let status = |ws: &Ws, id: &str| -> serde_json::Value {
        serde_json::from_str(&ws.ok(&["show", id, "--json"])).unwrap()
    };
    common::wait_within(
        "the plan step to reach the gate",
        Duration::from_secs(180),
        || status(&ws, id)["status"] == "check",
    );
    let log = ws.ok(&["logs", id, "--step", "1"]);
    assert!(
        log.contains("started `opencode serve` at http://127.0.0.1:"),
        "{log}"
    );
    assert!(!log.contains("OPENCODE_SERVER_PASSWORD"), "{log}");

    // The server dies between two steps: the next step starts another.
    let first = served_processes(ws.root());
    assert!(!first.is_empty(), "the server runs while the engine does");
    for pid in &first {
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        for name in ["BATON_API_TOKEN=", "HOOK_SIGNING_SECRET="] {
            assert!(
                !env.split(|b| *b == 0)
                    .any(|kv| kv.starts_with(name.as_bytes())),
                "the server inherited {name}"
            );
        }
    }
    for pid in &first {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    common::wait_for("the server to die", || {
        first.iter().all(|p| !common::alive(*p))
    });
    ws.ok(&["approve", id]);
    common::wait_within("the task to end", Duration::from_secs(180), || {
        matches!(status(&ws, id)["state"].as_str(), Some("done" | "failed"))
    });
    let shown = status(&ws, id);
    let log = ws.ok(&["logs", id, "--step", "2"]);
    assert_eq!(shown["status"], "done", "{shown}\n{log}");
    assert!(
        log.contains("the OpenCode server had stopped") && log.contains("started `opencode serve`"),
        "{log}"
    );
    assert!(!served_processes(ws.root()).is_empty());

    // An engine killed outright takes its server with it (the server runs under a guard,
    // as steps do), so no session goes on working with no one reading.
    let left = served_processes(ws.root());
    assert!(!left.is_empty());
    drop(engine); // SIGKILL, and reaped
    common::wait_for("the server to end with its engine", || {
        left.iter().all(|p| !common::alive(*p))
    });
    // The next engine has the same secrets (config.toml names the webhook's already).
    let mut engine = baton(&["engine"]);
    engine
        .env("BATON_API_TOKEN", "engine-only-token-1234")
        .env("HOOK_SIGNING_SECRET", "engine-only-hook-5678")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    let mut engine = Group(engine.spawn().expect("engine starts"));
    let id = ws.ok(&["new", "Again", "--pipeline", "real", "--start"]);
    let id = id.trim();
    common::wait_within(
        "the plan step to reach the gate",
        Duration::from_secs(180),
        || status(&ws, id)["status"] == "check",
    );
    let now = served_processes(ws.root());
    assert!(!now.is_empty());
    assert!(
        left.iter().all(|p| !now.contains(p)),
        "the stale server is gone: {left:?} {now:?}"
    );

    // Stopping the engine ends the server and everything it started.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(engine.0.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    engine.0.wait().unwrap();
    let left = served_processes(ws.root());
    assert!(
        left.is_empty(),
        "left running after the engine stopped: {left:?}"
    );
}
