//! A git workspace whose agent steps run the real Claude Code CLI against the loopback
//! Anthropic stub (`stubs::anthropic`), with a throwaway HOME, no nonessential traffic and one
//! retry; and what the tests read from the stub's requests. Shared by the real-claude tests,
//! which declare `mod common; mod infra; mod stubs;` beside it.
#![allow(dead_code)]

use crate::common::{self, Ws};
use crate::infra;
pub use crate::stubs::anthropic::text_of;
use crate::stubs::{
    self,
    anthropic::{AnthropicState, Reply, anthropic},
};
use serde_json::Value;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::Duration;

/// The API key the CLI is given (and that must not leak).
pub const KEY: &str = "sk-ant-test-0123456789abcdef";
/// The task's own prompt, which a continued session must not be sent again.
pub const TASK: &str = "Write hello.txt with a greeting.";

pub struct Rig {
    pub ws: Ws,
    pub home: tempfile::TempDir,
    pub server: stubs::Server,
    pub stub: Arc<AnthropicState>,
    path: String,
    /// How long `drain` lets an engine run.
    limit: Duration,
}

impl Rig {
    /// The stub answering with `script`; None (after a SKIPPED line) where the CLI is not
    /// installed.
    pub fn new(script: Vec<Reply>, limit: Duration) -> Option<Self> {
        let cli = infra::agent_cli("claude")?;
        let (server, stub) = anthropic(script);
        let dir = tempfile::tempdir().unwrap();
        common::git_init(&dir.path().join("repo"));
        let ws = Ws::at(dir, "repo");
        ws.baton(&["init"]).assert().success();
        ws.config("worktree_root = \"../worktrees\"\nkill_grace = \"2s\"\n");
        let path = format!(
            "{}:{}",
            cli.parent().unwrap().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        Some(Self {
            ws,
            home: tempfile::tempdir().unwrap(),
            server,
            stub,
            path,
            limit,
        })
    }

    /// The environment the engine (and so the CLI) gets.
    pub fn vars(&self) -> Vec<(&'static str, String)> {
        vec![
            ("HOME", self.home.path().display().to_string()),
            ("PATH", self.path.clone()),
            ("ANTHROPIC_BASE_URL", self.server.url.clone()),
            ("ANTHROPIC_API_KEY", KEY.into()),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
            ("CLAUDE_CODE_MAX_RETRIES", "1".into()),
            ("DISABLE_AUTOUPDATER", "1".into()),
        ]
    }

    /// `baton ARGS` with the rig's environment; stdout, asserting success.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.ws.baton(args).envs(self.vars()).output().unwrap();
        assert!(
            out.status.success(),
            "baton {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs an engine until nothing runs or is queued.
    pub fn drain(&self) {
        self.ws
            .baton(&["engine", "--exit-when-idle"])
            .envs(self.vars())
            .timeout(self.limit)
            .assert()
            .success();
    }

    /// An engine in the background, stopped when the guard drops.
    pub fn engine(&self) -> Engine {
        let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("baton"))
            .current_dir(self.ws.root())
            .env_remove("BATON_DIR")
            .env("XDG_CONFIG_HOME", self.ws.dir.path().join("xdg"))
            .envs(self.vars())
            .arg("engine")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Engine(Some(child))
    }

    /// A started task "Hello" with [`TASK`] as its prompt, and `args`; its id.
    pub fn new_task(&self, args: &[&str]) -> i64 {
        let mut all = vec!["new", "Hello", "--prompt", TASK, "--start"];
        all.extend_from_slice(args);
        self.ok(&all).trim().parse().unwrap()
    }

    /// The conversation requests' bodies, in order.
    pub fn turns(&self) -> Vec<Value> {
        self.stub.turn_bodies()
    }
}

/// A background engine: SIGTERM and reaped on drop, unless the test killed it.
pub struct Engine(Option<Child>);

impl Engine {
    /// SIGKILL, as a crash would end it.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if let Some(c) = self.0.take() {
            common::stop(c);
        }
    }
}

/// Every user message's text in a request that is not only tool results, in order.
pub fn user_texts(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .map(|m| text_of(&m["content"]))
        .filter(|t| !t.trim().is_empty())
        .collect()
}

/// The text of the last user message of a request that is not only tool results.
pub fn last_user_text(body: &Value) -> String {
    user_texts(body).pop().unwrap_or_default()
}
