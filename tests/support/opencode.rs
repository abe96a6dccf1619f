//! A workspace whose agent steps go through a real OpenCode server that baton starts itself
//! (`"serve": true`), its model the loopback OpenAI stub (`stubs::openai`). OpenCode runs
//! hermetically: a throwaway HOME and XDG folders, its configuration inline, no model
//! catalog fetch, no auto-update. Shared by the real-OpenCode tests, which declare
//! `mod common; mod infra; mod stubs;` beside it.
#![allow(dead_code)]

use crate::common::{self, Ws};
use crate::infra;
use crate::stubs::{self, OpenAiState};
use serde_json::Value;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::Duration;

/// The model every step of the rig uses, as OpenCode names it.
pub const MODEL: &str = "stub/stub-model";

pub struct Rig {
    pub ws: Ws,
    pub home: tempfile::TempDir,
    pub model: stubs::Server,
    pub stub: Arc<OpenAiState>,
    config: String,
    path: String,
    /// How long one `baton` command may run.
    limit: Duration,
}

impl Rig {
    /// A workspace whose model answers every request with `answer`; None (after a SKIPPED
    /// line) where the CLI is not installed.
    pub fn new(answer: &str, limit: Duration) -> Option<Self> {
        let cli = infra::agent_cli("opencode")?;
        let (model, stub) = stubs::openai(&[("stub-model", answer)]);
        let config = serde_json::json!({
            "model": MODEL,
            "small_model": MODEL,
            "permission": {"edit": "allow", "bash": "allow", "webfetch": "allow"},
            "provider": {"stub": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Local stub",
                "options": {"baseURL": format!("{}/v1", model.url), "apiKey": "sk-test"},
                "models": {"stub-model": {"name": "Stub", "limit": {"context": 128000, "output": 8192}}}
            }}
        });
        let path = format!(
            "{}:{}",
            cli.parent().unwrap().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        Some(Self {
            ws: Ws::new(),
            home: tempfile::tempdir().unwrap(),
            model,
            stub,
            config: config.to_string(),
            path,
            limit,
        })
    }

    /// Writes the agent profile `.baton/agents/ID.json`.
    pub fn agent(&self, id: &str, json: &str) {
        std::fs::write(
            self.ws.root().join(format!(".baton/agents/{id}.json")),
            json,
        )
        .unwrap();
    }

    /// The environment baton (and so the OpenCode server it starts) gets.
    pub fn vars(&self) -> Vec<(&'static str, String)> {
        let h = self.home.path();
        let at = |sub: &str| h.join(sub).display().to_string();
        vec![
            ("PATH", self.path.clone()),
            ("HOME", h.display().to_string()),
            ("XDG_CONFIG_HOME", at("config")),
            ("XDG_DATA_HOME", at("data")),
            ("XDG_CACHE_HOME", at("cache")),
            ("XDG_STATE_HOME", at("state")),
            ("OPENCODE_CONFIG_CONTENT", self.config.clone()),
            ("OPENCODE_DISABLE_MODELS_FETCH", "1".into()),
            ("OPENCODE_DISABLE_AUTOUPDATE", "1".into()),
            ("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1".into()),
        ]
    }

    /// `baton ARGS` with the rig's environment; stdout, asserting success.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self
            .ws
            .baton(args)
            .envs(self.vars())
            .timeout(self.limit)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "baton {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs an engine until nothing runs or is queued (it stops its OpenCode server).
    pub fn drain(&self) {
        self.ok(&["engine", "--exit-when-idle"]);
    }

    /// An engine in the background, stopped when the guard drops.
    pub fn engine(&self) -> Engine {
        let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("baton"))
            .current_dir(self.ws.root())
            .env_remove("BATON_DIR")
            .env("NO_COLOR", "1")
            .envs(self.vars())
            .arg("engine")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Engine(Some(child))
    }

    /// The model requests of OpenCode's agent loop (those that offer tools), in order.
    pub fn turns(&self) -> Vec<Value> {
        self.stub
            .requests
            .lock()
            .unwrap()
            .iter()
            .map(|(_, body)| body.clone())
            .filter(|b| b["tools"].as_array().is_some_and(|t| !t.is_empty()))
            .collect()
    }
}

/// A background engine: SIGTERM and reaped on drop, so a failing test leaves none behind.
pub struct Engine(Option<Child>);

impl Engine {
    /// Guards an engine the test started itself.
    pub fn of(child: Child) -> Self {
        Self(Some(child))
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if let Some(c) = self.0.take() {
            common::stop(c);
        }
    }
}

/// The text of a chat message's content (a string or text parts).
pub fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The user messages of a chat request, in order.
pub fn user_texts(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .map(|m| text_of(&m["content"]))
        .collect()
}
