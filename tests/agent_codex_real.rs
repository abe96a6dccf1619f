//! The real Codex CLI (`@openai/codex` from npm, as `.ci/run` installs it) driven through the
//! real `baton` binary, in a workspace set up by `baton init --agent codex`, against the
//! loopback Responses API stub. Codex runs hermetically: a throwaway HOME and CODEX_HOME whose
//! `config.toml` names the stub as its model provider, with retries made fast.

mod common;
mod infra;
mod stubs;

use common::{Ws, git};
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use stubs::responses::{
    self, CACHED_TOKENS, Fault, INPUT_TOKENS, OUTPUT_TOKENS, ResponsesState, Script,
};

const KEY: &str = "sk-codex-test-0123456789";
const LIMIT: Duration = Duration::from_secs(120);

/// The final answer with every handoff heading and an outcome.
fn answer(outcome: &str) -> String {
    format!(
        "## What Was Done\nWrote hello.txt.\n\n## Decisions Made\n- Plain text.\n\n## Open Questions\n- None.\n\n## Next Agent Context\nCheck hello.txt.\n\nOUTCOME: {outcome}\n"
    )
}

/// Writes the file, then tries to commit it as the prompt once told agents to; the sandbox
/// keeps the worktree's git dir read-only, so the commit fails and baton keeps the work.
const WRITE: &str = "printf 'hello\\n' > hello.txt; git add hello.txt && git commit -qm 'by codex'; echo \"commit exit $?\"";

/// One step (the `coder` that `init --agent codex` wrote), a review gate, and `needs_info`
/// back to the queue.
const PIPELINE: &str = r#"{"id": "code", "name": "Code",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "build", "step": {"agent": "coder", "timeout": "3m"}},
    {"id": "review", "kind": "gate"},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"},
    {"id": "cancelled", "kind": "cancelled"}
  ],
  "transitions": [
    {"from": "build", "to": "todo", "on": "outcome:needs_info"},
    {"from": "review", "to": "done", "on": "approve", "hooks": [{"merge": {}}]}
  ]}"#;

/// A git repository with `init --agent codex` done, codex's home pointing at the stub.
struct Setup {
    ws: Ws,
    stub: Arc<ResponsesState>,
    _server: stubs::Server,
    clis: PathBuf,
}

impl Setup {
    /// None (after a SKIPPED line) when the codex CLI is not installed.
    fn new(script: Script) -> Option<Self> {
        let codex = infra::agent_cli("codex")?;
        let clis = codex.parent().unwrap().to_path_buf();
        let (server, stub) = responses::responses(script);
        let dir = tempfile::tempdir().unwrap();
        common::git_init(&dir.path().join("repo"));
        let ws = Ws::at(dir, "repo");
        let me = Self {
            ws,
            stub,
            _server: server,
            clis,
        };
        let home = me.codex_home();
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(me.ws.dir.path().join("home")).unwrap();
        std::fs::write(
            home.join("config.toml"),
            format!(
                r#"model = "stub-model"
model_provider = "stub"

[model_providers.stub]
name = "Loopback stub"
base_url = "{}/v1"
wire_api = "responses"
env_key = "STUB_OPENAI_KEY"
request_max_retries = 0
stream_max_retries = 1
stream_idle_timeout_ms = 300000
"#,
                me._server.url
            ),
        )
        .unwrap();
        let out = me.baton(&["init", "--agent", "codex"]).output().unwrap();
        assert!(
            me.ws.root().join(".baton/agents/coder.json").exists(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        me.ws.config("worktree_root = \"../worktrees\"\n");
        me.ws.pipeline("code.json", PIPELINE);
        // Prices make a cost of the tokens codex reports.
        let file = me.ws.root().join(".baton/agents/coder.json");
        let mut coder: Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        coder["price_input"] = 2.0.into();
        coder["price_output"] = 8.0.into();
        std::fs::write(&file, coder.to_string()).unwrap();
        Some(me)
    }

    fn codex_home(&self) -> PathBuf {
        self.ws.dir.path().join("codex-home")
    }

    /// `baton` in the workspace with codex on PATH and its hermetic home.
    fn baton(&self, args: &[&str]) -> assert_cmd::Command {
        let mut cmd = self.ws.baton(args);
        for (k, v) in self.env() {
            cmd.env(k, v);
        }
        cmd
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            (
                "PATH",
                format!(
                    "{}:{}",
                    self.clis.display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            ),
            (
                "HOME",
                self.ws.dir.path().join("home").display().to_string(),
            ),
            ("CODEX_HOME", self.codex_home().display().to_string()),
            ("STUB_OPENAI_KEY", KEY.to_string()),
        ]
    }

    /// The same as a child process (`engine`, `run --wait` in the background).
    fn spawn(&self, args: &[&str]) -> Child {
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("baton"));
        cmd.current_dir(self.ws.root())
            .env_remove("BATON_DIR")
            .env("XDG_CONFIG_HOME", self.ws.dir.path().join("xdg"))
            .env("NO_COLOR", "1")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in self.env() {
            cmd.env(k, v);
        }
        cmd.spawn().expect("baton starts")
    }

    /// `run code --wait --json`: exit code and the task.
    fn run(&self, title: &str) -> (Option<i32>, Value, String) {
        let out = self
            .baton(&[
                "run",
                "code",
                "--title",
                title,
                "--prompt",
                "Write hello.txt.",
                "--wait",
                "--json",
            ])
            .timeout(LIMIT)
            .output()
            .unwrap();
        (
            out.status.code(),
            serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn log(&self, task: i64) -> String {
        self.ws.ok(&["logs", &task.to_string(), "--step", "1"])
    }

    /// The execution key of the task's latest step.
    fn key(&self, task: i64) -> Option<String> {
        let store = baton::store::Store::open(&self.ws.root().join(".baton/baton.db")).ok()?;
        let runs = store.read().step_runs(task).ok()?;
        runs.last().map(|r| r.execution_key.clone())
    }

    /// Processes of this test holding `key` in their environment (codex, its shells).
    fn holders(&self, key: &str) -> Vec<(i32, String)> {
        let want_key = format!("BATON_EXECUTION_KEY={key}");
        let want_home = format!("CODEX_HOME={}", self.codex_home().display());
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(env) = std::fs::read(entry.path().join("environ")) else {
                continue;
            };
            let vars: Vec<&[u8]> = env.split(|b| *b == 0).collect();
            let has = |w: &str| vars.contains(&w.as_bytes());
            if has(&want_key) && has(&want_home) && common::alive(pid) {
                let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
                found.push((pid, comm.trim().to_string()));
            }
        }
        found
    }

    /// Ends what a test left running (processes this test started, by pid).
    fn reap(&self, key: &str) {
        for (pid, _) in self.holders(key) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

fn step(shown: &Value) -> &Value {
    &shown["steps"].as_array().expect("steps")[0]
}

#[test]
fn codex_writes_a_file_that_baton_shows_and_merges_with_handoff_usage_and_cost() {
    let Some(s) = Setup::new(Script {
        command: Some(WRITE.into()),
        answer: answer("success"),
        gated: true,
        ..Script::default()
    }) else {
        return;
    };
    let mut run = s.spawn(&[
        "run",
        "code",
        "--title",
        "Say hello",
        "--prompt",
        "Write hello.txt.",
        "--wait",
        "--json",
    ]);
    // The log is live: the tool line is there while the model still holds its answer.
    common::wait_within("the [tool] line while codex waits", LIMIT, || {
        s.stub.waiting.load(Ordering::SeqCst)
            && s.log(1)
                .lines()
                .any(|l| l.contains("[tool] shell") && l.contains("hello.txt"))
    });
    assert_eq!(step(&s.ws.show(1))["state"], "running");
    s.stub.release();
    let out = wait_output(&mut run);
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(
        out.status.code(),
        Some(2),
        "waits at review: {shown} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(shown["status"], "review");
    let st = step(&shown);
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
    // Two model requests (the tool call, the answer), summed.
    assert_eq!(st["usage"]["input_tokens"], 2 * INPUT_TOKENS, "{st}");
    assert_eq!(st["usage"]["output_tokens"], 2 * OUTPUT_TOKENS);
    assert_eq!(st["usage"]["cache_read_tokens"], 2 * CACHED_TOKENS);
    let cost = (2 * INPUT_TOKENS) as f64 * 2.0 / 1e6 + (2 * OUTPUT_TOKENS) as f64 * 8.0 / 1e6;
    let got = st["cost"]
        .as_f64()
        .or_else(|| shown["cost"].as_f64())
        .unwrap_or_default();
    assert!((got - cost).abs() < 1e-9, "cost {got} != {cost}: {shown}");

    // Codex was sent the key, offered its shell tool, and given the task.
    assert_eq!(
        s.stub.requests.lock().unwrap()[0].0.as_deref(),
        Some(&*format!("Bearer {KEY}"))
    );
    assert!(
        s.stub.tools(0).iter().any(|t| t == "exec_command"),
        "{:?}",
        s.stub.tools(0)
    );
    assert!(s.stub.user_text(0).contains("Write hello.txt."));
    // The sandbox kept the worktree's git dir read-only: codex's own commit failed…
    let tool = s.stub.tool_output().unwrap_or_default();
    assert!(
        tool.contains("commit exit") && !tool.contains("commit exit 0"),
        "{tool}"
    );
    // …but the file is in the worktree and in `baton diff`, and the merge commits it.
    let diff = s.ws.ok(&["diff", "1"]);
    assert!(
        diff.contains("hello.txt") && diff.contains("+hello"),
        "{diff}"
    );
    let log = s.log(1);
    assert!(log.contains("codex thread "), "{log}");
    assert!(!log.contains(KEY), "{log}");
    s.ws.ok(&["approve", "1"]);
    common::wait_for("the merge", || {
        git(s.ws.root(), &["ls-tree", "--name-only", "main"]).contains("hello.txt")
    });
}

/// Waits for a child's exit, with its output, failing after [`LIMIT`].
fn wait_output(child: &mut Child) -> std::process::Output {
    let start = std::time::Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            panic!("baton did not finish");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    use std::io::Read;
    child
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_end(&mut stderr)
        .unwrap();
    std::process::Output {
        status: child.wait().unwrap(),
        stdout,
        stderr,
    }
}

#[test]
fn a_needs_info_outcome_sends_the_task_back() {
    let Some(s) = Setup::new(Script {
        answer: answer("needs_info"),
        ..Script::default()
    }) else {
        return;
    };
    let (_, shown, err) = s.run("Vague");
    assert_eq!(shown["status"], "todo", "{shown} {err}");
    assert_eq!(step(&shown)["outcome"], "needs_info");
}

/// The step failed with one line naming `what`, and the log says it once.
fn fails_clearly(s: &Setup, what: &str) {
    let (_, shown, err) = s.run("Doomed");
    assert_eq!(shown["status"], "failed", "{shown} {err}");
    let st = step(&shown);
    assert_eq!(st["state"], "failed", "{st}");
    let error = st["error"].as_str().unwrap_or_default();
    assert!(error.contains(what), "{error}");
    assert!(!error.contains('\n'), "{error}");
    let log = s.log(1);
    let said: Vec<&str> = log
        .lines()
        // baton's own closing `■ failed: …` line repeats the step's error.
        .filter(|l| l.contains(what) && !l.contains("Reconnecting") && !l.starts_with('■'))
        .collect();
    assert_eq!(said.len(), 1, "{log}");
    assert!(!log.contains(KEY) && !error.contains(KEY));
}

#[test]
fn a_refused_key_fails_the_step_with_one_clear_line() {
    let Some(s) = Setup::new(Script {
        fault: Fault::Unauthorized,
        ..Script::default()
    }) else {
        return;
    };
    fails_clearly(&s, "401 Unauthorized: Incorrect API key provided");
}

#[test]
fn a_server_error_fails_the_step_with_one_clear_line() {
    let Some(s) = Setup::new(Script {
        fault: Fault::ServerError,
        ..Script::default()
    }) else {
        return;
    };
    // Codex words every 5xx as this sentence, whatever the server said.
    fails_clearly(&s, "experiencing high demand");
    assert_eq!(s.stub.count(), 2, "one try and one retry");
}

#[test]
fn a_stream_cut_once_and_recovered_succeeds() {
    let Some(s) = Setup::new(Script {
        command: Some(WRITE.into()),
        answer: answer("success"),
        fault: Fault::CutOnce,
        ..Script::default()
    }) else {
        return;
    };
    let (code, shown, err) = s.run("Flaky");
    assert_eq!(code, Some(2), "{shown} {err}");
    let st = step(&shown);
    assert_eq!(st["state"], "succeeded", "{st}");
    assert_eq!(
        st["handoff"]["metadata"]["what_was_done"],
        "Wrote hello.txt."
    );
    let log = s.log(1);
    assert!(
        log.lines()
            .any(|l| l.contains("codex: Reconnecting... 1/1")),
        "{log}"
    );
    assert!(s.ws.ok(&["diff", "1"]).contains("+hello"));
}

/// Starts an engine and a task whose codex is held by `script`; returns both once `ready`.
fn running(s: &Setup, ready: impl Fn(&[(i32, String)]) -> bool) -> (Child, String) {
    let engine = s.spawn(&["engine"]);
    s.ws.ok(&["new", "Hold", "--pipeline", "code", "--start"]);
    let mut key = String::new();
    common::wait_within("codex to be busy", LIMIT, || {
        key = s.key(1).unwrap_or_default();
        !key.is_empty() && ready(&s.holders(&key))
    });
    (engine, key)
}

#[test]
fn abort_while_the_model_thinks_leaves_no_process() {
    let Some(s) = Setup::new(Script {
        answer: answer("success"),
        gated: true,
        ..Script::default()
    }) else {
        return;
    };
    let (engine, key) = running(&s, |h| !h.is_empty());
    common::wait_for("the model to be asked", || {
        s.stub.waiting.load(Ordering::SeqCst)
    });
    s.ws.ok(&["abort", "1"]);
    let gone = within(Duration::from_secs(20), || s.holders(&key).is_empty());
    let left = s.holders(&key);
    s.reap(&key);
    common::stop(engine);
    assert!(gone, "still holding {key}: {left:?}");
    assert_eq!(s.ws.show(1)["status"], "cancelled");
}

#[test]
fn abort_while_codex_runs_a_shell_command_leaves_no_process() {
    let Some(s) = Setup::new(Script {
        command: Some("sleep 1000".into()),
        answer: answer("success"),
        gated: true,
        ..Script::default()
    }) else {
        return;
    };
    let (engine, key) = running(&s, |h| h.iter().any(|(_, c)| c == "sleep"));
    s.ws.ok(&["abort", "1"]);
    let gone = within(Duration::from_secs(20), || s.holders(&key).is_empty());
    let left = s.holders(&key);
    s.reap(&key);
    common::stop(engine);
    assert!(gone, "still holding {key}: {left:?}");
}

#[test]
fn a_killed_engine_leaves_no_codex_running() {
    let Some(s) = Setup::new(Script {
        answer: answer("success"),
        gated: true,
        ..Script::default()
    }) else {
        return;
    };
    let (mut engine, key) = running(&s, |h| h.iter().any(|(_, c)| c.starts_with("codex")));
    common::wait_for("the model to be asked", || {
        s.stub.waiting.load(Ordering::SeqCst)
    });
    engine.kill().unwrap();
    engine.wait().unwrap();
    let gone = within(Duration::from_secs(20), || s.holders(&key).is_empty());
    let left = s.holders(&key);
    s.reap(&key);
    assert!(gone, "codex outlived its engine: {left:?}");
}

/// Polls `cond` until it holds or `limit` passes; whether it held.
fn within(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = std::time::Instant::now();
    while !cond() {
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

#[test]
fn a_200_kib_prompt_reaches_codex_on_stdin() {
    let Some(s) = Setup::new(Script {
        answer: answer("success"),
        ..Script::default()
    }) else {
        return;
    };
    // Linux caps one argv element at 128 KiB: the prompt goes on stdin (`codex exec -`).
    let file = s.ws.root().join(".baton/agents/coder.json");
    let mut coder: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    coder["prompt_via"] = "stdin".into();
    coder["argv"] = serde_json::json!([
        "codex",
        "exec",
        "--json",
        "--sandbox",
        "workspace-write",
        "-"
    ]);
    std::fs::write(&file, coder.to_string()).unwrap();
    let mut big = "A line of a long task description, repeated.\n".repeat(200 * 1024 / 45 + 1);
    big.push_str("END-OF-THE-LONG-PROMPT\n");
    s.baton(&[
        "new",
        "Big",
        "--pipeline",
        "code",
        "--prompt",
        "-",
        "--start",
    ])
    .write_stdin(big.clone())
    .assert()
    .success();
    s.baton(&["engine", "--exit-when-idle"])
        .timeout(LIMIT)
        .assert()
        .success();
    let shown = s.ws.show(1);
    assert_eq!(step(&shown)["state"], "succeeded", "{shown}");
    let asked = s.stub.user_text(0);
    assert!(
        asked.len() > 200 * 1024,
        "{} bytes reached the model",
        asked.len()
    );
    assert!(asked.contains("END-OF-THE-LONG-PROMPT"));
}
