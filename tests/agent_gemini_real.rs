//! The real Gemini CLI (`@google/gemini-cli` from npm, as `.ci/run` installs it) driven
//! through the real `baton` binary with a `gemini-stream-json` profile, against the loopback
//! Gemini API stub (`GOOGLE_GEMINI_BASE_URL`). The CLI runs hermetically: a throwaway HOME
//! whose settings choose API-key auth.

mod common;
mod infra;
mod stubs;

use common::Ws;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use stubs::gemini::{CACHED_TOKENS, GeminiState, OUTPUT_TOKENS, PROMPT_TOKENS, Script};

const KEY: &str = "AIza-gemini-test-0123456789";
const LIMIT: Duration = Duration::from_secs(120);

const ANSWER: &str = "## What Was Done\nWrote hello.txt.\n\n## Decisions Made\n- Plain text.\n\n## Open Questions\n- None.\n\n## Next Agent Context\nCheck hello.txt.\n\nOUTCOME: success\n";

const PIPELINE: &str = r#"{"id": "code", "name": "Code",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "build", "step": {"agent": "gemini", "timeout": "3m"}},
    {"id": "review", "kind": "gate"},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"},
    {"id": "cancelled", "kind": "cancelled"}
  ]}"#;

/// The profile docs/agents.md shows, with prices.
const PROFILE: &str = r#"{"id": "gemini", "backend": "command", "format": "gemini-stream-json",
  "argv": ["gemini", "--output-format", "stream-json", "--approval-mode", "auto_edit",
           "--skip-trust", "-m", "gemini-2.5-pro", "-p", "{{message}}"],
  "outcomes": ["success", "failure", "needs_info"],
  "price_input": 1.25, "price_output": 10.0}"#;

struct Setup {
    ws: Ws,
    stub: Arc<GeminiState>,
    server: stubs::Server,
    clis: PathBuf,
}

impl Setup {
    fn new(script: Script) -> Option<Self> {
        let gemini = infra::agent_cli("gemini")?;
        let clis = gemini.parent().unwrap().to_path_buf();
        let (server, stub) = stubs::gemini::gemini(script);
        let dir = tempfile::tempdir().unwrap();
        common::git_init(&dir.path().join("repo"));
        let ws = Ws::at(dir, "repo");
        ws.baton(&["init"]).assert().success();
        ws.config("worktree_root = \"../worktrees\"\n");
        ws.pipeline("code.json", PIPELINE);
        std::fs::write(ws.root().join(".baton/agents/gemini.json"), PROFILE).unwrap();
        // API-key auth: with the base URL alone the CLI picks "gateway" auth, which its
        // headless mode refuses.
        let settings = ws.dir.path().join("home/.gemini");
        std::fs::create_dir_all(&settings).unwrap();
        std::fs::write(
            settings.join("settings.json"),
            r#"{"security": {"auth": {"selectedType": "gemini-api-key"}}}"#,
        )
        .unwrap();
        Some(Self {
            ws,
            stub,
            server,
            clis,
        })
    }

    fn run(&self) -> (Option<i32>, Value, String) {
        let out = self
            .ws
            .baton(&[
                "run",
                "code",
                "--title",
                "Say hello",
                "--prompt",
                "Write hello.txt.",
                "--wait",
                "--json",
            ])
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    self.clis.display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            )
            .env("HOME", self.ws.dir.path().join("home"))
            .env("GOOGLE_GEMINI_BASE_URL", &self.server.url)
            .env("GEMINI_API_KEY", KEY)
            .timeout(LIMIT)
            .output()
            .unwrap();
        (
            out.status.code(),
            serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

#[test]
fn gemini_writes_a_file_and_hands_off_with_usage_and_cost() {
    let Some(s) = Setup::new(Script {
        write: Some(("hello.txt".into(), "hello\n".into())),
        answer: ANSWER.into(),
        ..Script::default()
    }) else {
        return;
    };
    let (code, shown, err) = s.run();
    assert_eq!(code, Some(2), "waits at review: {shown} {err}");
    let st = &shown["steps"][0];
    assert_eq!(st["state"], "succeeded", "{st}");
    assert_eq!(st["outcome"], "success");
    assert_eq!(
        st["handoff"]["metadata"]["what_was_done"],
        "Wrote hello.txt."
    );
    assert_eq!(
        st["handoff"]["metadata"]["next_agent_context"],
        "Check hello.txt."
    );
    // Two model requests (the tool call, the answer), summed by the CLI.
    assert_eq!(st["usage"]["input_tokens"], 2 * PROMPT_TOKENS, "{st}");
    assert_eq!(st["usage"]["output_tokens"], 2 * OUTPUT_TOKENS);
    assert_eq!(st["usage"]["cache_read_tokens"], 2 * CACHED_TOKENS);
    let cost = (2 * PROMPT_TOKENS) as f64 * 1.25 / 1e6 + (2 * OUTPUT_TOKENS) as f64 * 10.0 / 1e6;
    let got = st["cost"].as_f64().unwrap_or_default();
    assert!((got - cost).abs() < 1e-9, "cost {got} != {cost}: {shown}");

    let reqs = s.stub.requests.lock().unwrap();
    assert!(
        reqs[0]
            .0
            .starts_with("gemini-2.5-pro:streamGenerateContent"),
        "{}",
        reqs[0].0
    );
    assert_eq!(reqs[0].1.as_deref(), Some(KEY));
    drop(reqs);
    assert!(s.stub.tools(0).iter().any(|t| t == "write_file"));
    let diff = s.ws.ok(&["diff", "1"]);
    assert!(
        diff.contains("hello.txt") && diff.contains("+hello"),
        "{diff}"
    );
    let log = s.ws.ok(&["logs", "1", "--step", "1"]);
    assert!(log.contains("gemini session "), "{log}");
    assert!(log.contains("[tool] write_file hello.txt"), "{log}");
    assert!(!log.contains(KEY), "{log}");
}

#[test]
fn a_refused_gemini_key_fails_the_step_with_its_message() {
    let Some(s) = Setup::new(Script {
        bad_key: true,
        ..Script::default()
    }) else {
        return;
    };
    let (_, shown, err) = s.run();
    assert_eq!(shown["status"], "failed", "{shown} {err}");
    let error = shown["steps"][0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("gemini reported an error"), "{error}");
    assert!(error.contains("API key not valid"), "{error}");
    assert!(!error.contains(KEY));
}
