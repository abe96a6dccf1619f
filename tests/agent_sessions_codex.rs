//! Codex sessions that carry on: the real Codex CLI, set up by `baton init --agent codex`,
//! against the loopback Responses API stub. A rejected change continues the coder's thread
//! with `codex exec resume` (the model sees the earlier turns and only the note as new), and
//! a thread codex cannot find falls back to a fresh one with a warning.

mod common;
mod infra;
mod stubs;

use common::Ws;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use stubs::responses::{self, ResponsesState, Script};

const KEY: &str = "sk-codex-test-0123456789";
const LIMIT: Duration = Duration::from_secs(180);
const TASK: &str = "Write hello.txt with a greeting.";

/// The coder `init --agent codex` wrote, then a review gate.
const PIPELINE: &str = r#"{"id": "code", "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "build", "step": {"agent": "coder", "timeout": "3m"}},
    {"id": "review", "kind": "gate"},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"},
    {"id": "cancelled", "kind": "cancelled"}],
  "transitions": [{"from": "review", "to": "build", "on": "reject"}]}"#;

struct Setup {
    ws: Ws,
    stub: Arc<ResponsesState>,
    _server: stubs::Server,
    clis: PathBuf,
}

impl Setup {
    /// None (after a SKIPPED line) when the codex CLI is not installed.
    fn new() -> Option<Self> {
        let codex = infra::agent_cli("codex")?;
        let (server, stub) = responses::responses(Script {
            answer: "## What Was Done\nWrote hello.txt.\n\n## Next Agent Context\nCheck it.\n\nOUTCOME: success\n".into(),
            ..Script::default()
        });
        let dir = tempfile::tempdir().unwrap();
        common::git_init(&dir.path().join("repo"));
        let me = Self {
            ws: Ws::at(dir, "repo"),
            stub,
            clis: codex.parent().unwrap().to_path_buf(),
            _server: server,
        };
        std::fs::create_dir_all(me.codex_home()).unwrap();
        std::fs::create_dir_all(me.ws.dir.path().join("home")).unwrap();
        std::fs::write(
            me.codex_home().join("config.toml"),
            format!(
                "model = \"stub-model\"\nmodel_provider = \"stub\"\n\n[model_providers.stub]\n\
                 name = \"Loopback stub\"\nbase_url = \"{}/v1\"\nwire_api = \"responses\"\n\
                 env_key = \"STUB_OPENAI_KEY\"\nrequest_max_retries = 0\nstream_max_retries = 1\n",
                me._server.url
            ),
        )
        .unwrap();
        me.ok(&["init", "--agent", "codex"]);
        me.ws.config("worktree_root = \"../worktrees\"\n");
        me.ws.pipeline("code.json", PIPELINE);
        Some(me)
    }

    fn codex_home(&self) -> PathBuf {
        self.ws.dir.path().join("codex-home")
    }

    /// `baton ARGS` with codex on PATH and its hermetic home; stdout, asserting success.
    fn ok(&self, args: &[&str]) -> String {
        let path = format!(
            "{}:{}",
            self.clis.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let out = self
            .ws
            .baton(args)
            .env("PATH", path)
            .env("HOME", self.ws.dir.path().join("home"))
            .env("CODEX_HOME", self.codex_home())
            .env("STUB_OPENAI_KEY", KEY)
            .timeout(LIMIT)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "baton {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn drain(&self) {
        self.ok(&["engine", "--exit-when-idle"]);
    }

    /// The texts of request `i`'s user messages, in order.
    fn user_messages(&self, i: usize) -> Vec<String> {
        let reqs = self.stub.requests.lock().unwrap();
        reqs[i].1["input"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["role"] == "user")
            .map(|m| {
                m["content"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .collect()
    }

    /// Starts a task, lets it reach review, and sends it back with `note`; the index of the
    /// first request after the reject.
    fn reject_once(&self, note: &str) -> (i64, usize) {
        let id: i64 = self
            .ok(&[
                "new",
                "Hello",
                "--pipeline",
                "code",
                "--prompt",
                TASK,
                "--start",
            ])
            .trim()
            .parse()
            .unwrap();
        self.drain();
        assert_eq!(self.ws.show(id)["status"], "review");
        let first = self.stub.count();
        self.ok(&["reject", &id.to_string(), "--note", note]);
        (id, first)
    }
}

fn builds(shown: &Value) -> Vec<Value> {
    shown["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["status"] == "build")
        .cloned()
        .collect()
}

#[test]
fn a_rejected_change_continues_the_codex_thread_with_only_the_note() {
    let Some(s) = Setup::new() else { return };
    let (id, first) = s.reject_once("Make it louder.");
    s.drain();
    let shown = s.ws.show(id);
    assert_eq!(shown["status"], "review", "{shown:#}");
    let said = s.user_messages(first);
    // The earlier turn is in the request (the task's prompt), and the new user message is
    // only the note.
    assert!(said.iter().any(|m| m.contains(TASK)), "{said:#?}");
    let last = said.last().unwrap();
    assert!(
        last.contains("Make it louder.") && !last.contains(TASK),
        "{said:#?}"
    );
    let runs = builds(&shown);
    assert_eq!(runs.len(), 2, "{shown:#}");
    assert_eq!(runs[1]["continued"], true, "{shown:#}");
    assert_eq!(runs[0]["session"], runs[1]["session"], "{shown:#}");
}

#[test]
fn a_thread_codex_cannot_find_falls_back_to_a_fresh_one() {
    let Some(s) = Setup::new() else { return };
    let (id, first) = s.reject_once("Again.");
    // Codex's stored threads are gone.
    std::fs::remove_dir_all(s.codex_home().join("sessions")).unwrap();
    s.drain();
    let shown = s.ws.show(id);
    assert_eq!(shown["status"], "review", "{shown:#}");
    let runs = builds(&shown);
    assert_eq!(runs[1]["state"], "succeeded", "{shown:#}");
    assert_eq!(runs[1]["continued"], false, "{shown:#}");
    let said = s.user_messages(first).join("\n");
    assert!(said.contains(TASK) && said.contains("Again."), "{said}");
    let text = s.ok(&["show", &id.to_string()]);
    assert!(
        text.lines()
            .any(|l| l.contains("warn") && l.contains("could not find session")),
        "{text}"
    );
}
