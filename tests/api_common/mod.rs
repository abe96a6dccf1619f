//! Shared helpers of the API tests: a workspace with a fast pipeline, the Python MCP SDK in
//! a virtual environment, and running the Python client.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// A script step, then a gate (a rejection sends the task back to the step): a task
/// reaches the gate within a second.
pub const FAST: &str = r#"{"id": "fast", "name": "Fast", "statuses": [
  {"id": "backlog", "label": "Backlog", "kind": "queue"},
  {"id": "work", "label": "Work", "step": {"run": "echo \"hello from $BATON_TASK_TITLE\""}},
  {"id": "review", "label": "Review", "kind": "gate"},
  {"id": "done", "label": "Done", "kind": "done"},
  {"id": "failed", "label": "Failed", "kind": "failed"},
  {"id": "cancelled", "label": "Cancelled", "kind": "cancelled"}],
  "transitions": [{"from": "review", "to": "work", "on": "reject"}]}"#;

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
        crate::infra::missing(
            &format!("the Python MCP SDK in {}", venv.display()),
            "python3 -m venv, pip install mcp; .ci/run installs it",
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

/// A running `baton serve` on a free loopback port; stopped (SIGTERM) when dropped.
pub struct Server {
    child: std::process::Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    pub baton_dir: PathBuf,
    /// The line saying where it listens and whether it runs the engine.
    pub banner: String,
}

impl Server {
    /// Starts `baton serve --listen 127.0.0.1:0` in `ws` with extra environment, and waits
    /// for the line that says where it listens.
    pub fn start(ws: &Path, env: &[(&str, &str)]) -> Self {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_baton"));
        cmd.arg("--dir")
            .arg(ws)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .envs(env.iter().copied());
        Self::spawn(cmd)
    }

    /// Runs `cmd`, a `baton --dir WS serve …` command, and waits for the line that says
    /// where it listens.
    pub fn spawn(mut cmd: Command) -> Self {
        use std::io::BufRead;
        let ws = cmd
            .get_args()
            .skip_while(|a| *a != "--dir")
            .nth(1)
            .map(PathBuf::from)
            .expect("the command names the workspace with --dir");
        if !cmd.get_envs().any(|(k, _)| k == "BATON_GITHUB_SECRET") {
            cmd.env_remove("BATON_GITHUB_SECRET");
        }
        let mut child = cmd
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("baton serve");
        let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let (addr, banner) = loop {
            let line = lines
                .next()
                .expect("baton serve ended before it listened")
                .unwrap();
            if let Some(rest) = line.split("baton serve on http://").nth(1) {
                break (rest.split_whitespace().next().unwrap().to_string(), line);
            }
        };
        // Keep draining stderr so the server never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Self {
            child,
            addr,
            baton_dir: ws.join(".baton"),
            banner,
        }
    }

    /// The current token.
    pub fn token(&self) -> String {
        std::fs::read_to_string(self.baton_dir.join("token"))
            .unwrap()
            .trim()
            .to_string()
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let _ = self.child.wait();
    }
}
