//! The real Claude Code CLI (`@anthropic-ai/claude-code` from npm) run by the real `baton`
//! binary against a scripted loopback Anthropic API (`stubs::anthropic`): the built-in and
//! `init --agent claude` profiles edit files, the log is live, handoffs, outcomes, usage and
//! cost are recorded, API errors and retries read plainly, a long prompt goes on stdin, and
//! no CLI process outlives an abort or its engine.
//!
//! The CLI runs with a throwaway HOME, `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1` and one
//! retry (`CLAUDE_CODE_MAX_RETRIES=1`, about 0.6 s apart) so an API error ends in seconds.

#[path = "support/claude.rs"]
mod claude;
mod common;
mod infra;
mod stubs;

use claude::{KEY, Rig};
use common::wait_within;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;
use stubs::anthropic::{Gate, Reply};

/// Generous: a loaded two-core machine starts the 400 MB CLI slowly.
const LIMIT: Duration = Duration::from_secs(120);

fn new_rig(script: Vec<Reply>) -> Option<Rig> {
    Rig::new(script, LIMIT)
}

impl Rig {
    fn show(&self, id: i64) -> Value {
        self.ws.show(id)
    }

    /// The task's worktree.
    fn worktree(&self) -> PathBuf {
        let dir = self.ws.root().join("../worktrees");
        std::fs::read_dir(&dir)
            .unwrap()
            .next()
            .expect("a worktree")
            .unwrap()
            .path()
    }

    /// The stub's first conversation request's prompt.
    fn prompt(&self) -> String {
        self.stub.prompt()
    }
}

/// Pids of the live processes whose environment holds `name=value`.
fn holding(name: &str, value: &str) -> Vec<i32> {
    let needle = format!("{name}={value}");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()))
        })
        .filter(|pid| common::alive(*pid))
        .collect()
}

/// The value of `name` in a process's environment.
fn env_of(pid: i32, name: &str) -> Option<String> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{name}=");
    env.split(|b| *b == 0)
        .find_map(|kv| kv.strip_prefix(prefix.as_bytes()))
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

/// Kills (on drop) whatever still holds a step's execution key, so a failing test leaves
/// nothing behind; these are all processes the test started.
struct Reaper(String);

impl Drop for Reaper {
    fn drop(&mut self) {
        for pid in holding("BATON_EXECUTION_KEY", &self.0) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// Waits for the step's `claude` process (it talks to this rig's stub) and returns the
/// step's execution key.
fn step_key(rig: &Rig) -> String {
    let mut key = None;
    wait_within("the claude process", LIMIT, || {
        key = holding("ANTHROPIC_BASE_URL", &rig.server.url)
            .into_iter()
            .find_map(|pid| env_of(pid, "BATON_EXECUTION_KEY"));
        key.is_some()
    });
    key.unwrap()
}

fn new_task(rig: &Rig, title: &str, prompt: &str) -> i64 {
    rig.ok(&["new", title, "--prompt", prompt, "--start"])
        .trim()
        .parse()
        .unwrap()
}

/// The log of the task's first step (the coder's).
fn logs(rig: &Rig, id: i64) -> String {
    rig.ok(&["logs", &id.to_string(), "--step", "1"])
}

#[test]
fn the_builtin_coder_writes_the_file_and_hands_over_with_usage_and_cost() {
    let Some(rig) = new_rig(vec![
        Reply::write("hello.txt", "hello from claude\n"),
        Reply::handoff("success"),
    ]) else {
        return;
    };
    // No pipelines of its own: `new --start` uses the built-in quick_fix and its coder.
    let id = new_task(&rig, "Say hello", "Write hello.txt with a greeting.");
    rig.drain();
    let shown = rig.show(id);
    let step = &shown["steps"][0];
    assert_eq!(step["state"], "succeeded", "{shown:#}");
    assert_eq!(shown["status"], "review", "{shown:#}");
    assert_eq!(
        std::fs::read_to_string(rig.worktree().join("hello.txt")).unwrap(),
        "hello from claude\n"
    );
    let diff = rig.ok(&["diff", &id.to_string()]);
    assert!(diff.contains("+hello from claude"), "{diff}");
    let fields = &step["handoff"]["metadata"];
    for f in [
        "what_was_done",
        "decisions_made",
        "open_questions",
        "next_agent_context",
    ] {
        assert!(
            fields.to_string().contains(f),
            "{f} missing from {fields:#}"
        );
    }
    assert!(
        step["usage"]["input_tokens"].as_u64().unwrap() > 0,
        "{step:#}"
    );
    assert!(
        step["usage"]["output_tokens"].as_u64().unwrap() > 0,
        "{step:#}"
    );
    assert!(step["cost"].as_f64().unwrap() > 0.0, "{step:#}");
    let log = logs(&rig, id);
    assert!(log.contains("[tool] Write hello.txt"), "{log}");
    // The agent is told that baton commits, not to commit.
    let prompt = rig.prompt();
    assert!(prompt.contains("baton commits"), "{prompt}");
    assert!(!prompt.contains("commit it"), "{prompt}");
}

#[test]
fn the_log_is_live_while_claude_waits_for_the_model() {
    let gate = Gate::new();
    let Some(rig) = new_rig(vec![
        Reply::write("hello.txt", "hi\n"),
        Reply::handoff("success").gated(&gate),
    ]) else {
        return;
    };
    let _engine = rig.engine();
    let id = new_task(&rig, "Live", "Write hello.txt.");
    wait_within("the tool line in `baton logs`", LIMIT, || {
        logs(&rig, id).contains("[tool] Write hello.txt")
    });
    // The final answer is held at the stub until the gate opens, so the step is running.
    wait_within("the final request at the stub", LIMIT, || gate.holding());
    assert_eq!(rig.show(id)["status"], "fix");
    assert!(rig.worktree().join("hello.txt").exists());
    gate.open();
    wait_within("the task to reach review", LIMIT, || {
        rig.show(id)["status"] == "review"
    });
}

#[test]
fn needs_info_routes_back_and_a_refused_commit_is_a_warning_event() {
    let Some(rig) = new_rig(vec![
        Reply::bash("git commit -qam wip"),
        Reply::handoff("needs_info"),
    ]) else {
        return;
    };
    let id = new_task(&rig, "Unclear", "Do the thing.");
    rig.drain();
    let shown = rig.show(id);
    assert_eq!(shown["status"], "todo", "{shown:#}");
    assert_eq!(shown["steps"][0]["outcome"], "needs_info", "{shown:#}");
    let text = rig.ok(&["show", &id.to_string()]);
    let warning = text
        .lines()
        .find(|l| l.contains("warn") && l.contains("claude was not allowed"))
        .unwrap_or_else(|| panic!("no permission warning in:\n{text}"));
    assert!(warning.contains("Bash git commit -qam wip"), "{warning}");
}

#[test]
fn a_refused_key_ends_the_step_with_one_clear_line() {
    let Some(rig) = new_rig(vec![
        Reply::error(401, "authentication_error", "invalid x-api-key"),
        Reply::error(401, "authentication_error", "invalid x-api-key"),
        Reply::error(401, "authentication_error", "invalid x-api-key"),
    ]) else {
        return;
    };
    let id = new_task(&rig, "Key", "Anything.");
    rig.drain();
    let shown = rig.show(id);
    let error = shown["steps"][0]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("HTTP 401: Invalid API key") && !error.contains("success"),
        "{shown:#}"
    );
    assert!(!error.contains('\n') && !error.contains(KEY), "{error}");
}

#[test]
fn a_server_error_is_retried_visibly_and_ends_the_step_with_one_clear_line() {
    let boom = || Reply::error(500, "api_error", "Internal server error");
    let Some(rig) = new_rig(vec![boom(), boom(), boom()]) else {
        return;
    };
    let id = new_task(&rig, "Boom", "Anything.");
    rig.drain();
    let log = logs(&rig, id);
    assert!(
        log.contains("retrying after HTTP 500 (attempt 1 of 1, in "),
        "{log}"
    );
    let shown = rig.show(id);
    let error = shown["steps"][0]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("HTTP 500: Internal server error") && !error.contains("success:"),
        "{shown:#}"
    );
}

#[test]
fn a_stream_cut_once_is_retried_and_the_step_still_succeeds() {
    let Some(rig) = new_rig(vec![
        Reply::Cut,
        Reply::write("hello.txt", "after the cut\n"),
        Reply::handoff("success"),
    ]) else {
        return;
    };
    let id = new_task(&rig, "Cut", "Write hello.txt.");
    rig.drain();
    let shown = rig.show(id);
    assert_eq!(shown["steps"][0]["state"], "succeeded", "{shown:#}");
    assert!(
        rig.ok(&["diff", &id.to_string()])
            .contains("+after the cut")
    );
    let log = logs(&rig, id);
    assert!(log.contains("retrying after a failed request"), "{log}");
}

#[test]
fn a_200_kib_prompt_reaches_the_model() {
    let Some(rig) = new_rig(vec![Reply::handoff("success")]) else {
        return;
    };
    // One argv element may hold at most 128 KiB on Linux.
    let mut prompt = "Fix the following log.\n".to_string();
    while prompt.len() < 200 * 1024 {
        prompt.push_str("error: something went wrong at src/x.rs:42 — 'quoted' \"$(not run)\"\n");
    }
    prompt.push_str("THE END OF THE PROMPT");
    let out = rig
        .ws
        .baton(&["new", "Long", "--prompt", "-", "--start"])
        .envs(rig.vars())
        .write_stdin(prompt.clone())
        .output()
        .unwrap();
    assert!(out.status.success());
    let id: i64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    rig.drain();
    let shown = rig.show(id);
    assert_eq!(shown["steps"][0]["state"], "succeeded", "{shown:#}");
    let seen = rig.prompt();
    assert!(seen.len() > 200 * 1024, "{}", seen.len());
    assert!(seen.contains("THE END OF THE PROMPT"));
    assert!(seen.contains("\"$(not run)\""));
}

#[test]
fn init_agent_claude_profiles_plan_build_and_review() {
    let Some(rig) = new_rig(vec![
        Reply::text("## What Was Done\nPlanned.\n\n## Next Agent Context\n1. Write hello.txt."),
        Reply::write("hello.txt", "planned hello\n"),
        Reply::handoff("success"),
        Reply::text("## What Was Done\nReviewed.\n\nOUTCOME: success"),
    ]) else {
        return;
    };
    rig.ok(&["init", "--agent", "claude"]);
    let id: i64 = rig
        .ok(&[
            "new",
            "Feature",
            "--pipeline",
            "feature",
            "--prompt",
            "Say hello",
            "--start",
        ])
        .trim()
        .parse()
        .unwrap();
    rig.drain();
    assert_eq!(rig.show(id)["status"], "plan_review");
    rig.ok(&["approve", &id.to_string()]);
    rig.drain();
    let shown = rig.show(id);
    assert_eq!(shown["status"], "review", "{shown:#}");
    assert!(
        rig.ok(&["diff", &id.to_string()])
            .contains("+planned hello")
    );
    for body in rig.stub.turn_bodies() {
        let text = body["messages"].to_string();
        assert!(
            !text.contains("commit it"),
            "an agent was told to commit: {text}"
        );
    }
}

// ---------------------------------------------------------------- processes

#[test]
fn abort_while_the_model_thinks_leaves_no_process() {
    let gate = Gate::new();
    let Some(rig) = new_rig(vec![Reply::handoff("success").gated(&gate)]) else {
        return;
    };
    let _engine = rig.engine();
    let id = new_task(&rig, "Think", "Think hard.");
    let key = step_key(&rig);
    let _reaper = Reaper(key.clone());
    wait_within("the request at the stub", LIMIT, || gate.holding());
    rig.ok(&["abort", &id.to_string()]);
    wait_within("no process holding the step's key", LIMIT, || {
        holding("BATON_EXECUTION_KEY", &key).is_empty()
    });
}

/// A workspace `coder` that may run `tail` (the built-in one may not run commands).
fn coder_with_bash(root: &Path) {
    std::fs::write(
        root.join(".baton/agents/coder.json"),
        r#"{"id": "coder", "backend": "command", "format": "claude-stream-json",
            "prompt_via": "stdin",
            "argv": ["claude", "-p", "--output-format", "stream-json", "--verbose",
                     "--permission-mode", "acceptEdits", "--allowedTools", "Bash(tail:*)"]}"#,
    )
    .unwrap();
}

#[test]
fn abort_while_claude_runs_a_shell_command_leaves_no_process() {
    let Some(rig) = new_rig(vec![
        Reply::bash("tail -f README"),
        Reply::handoff("success"),
    ]) else {
        return;
    };
    coder_with_bash(rig.ws.root());
    // No grace: claude is killed at once and cannot end the command itself, which runs in
    // a session of its own (as after an OOM kill or a grace period that ran out).
    rig.ws
        .config("worktree_root = \"../worktrees\"\nkill_grace = \"1ms\"\n");
    let _engine = rig.engine();
    let id = new_task(&rig, "Tail", "Run tail.");
    let key = step_key(&rig);
    let _reaper = Reaper(key.clone());
    wait_within("claude's tail command", LIMIT, || {
        holding("BATON_EXECUTION_KEY", &key).into_iter().any(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.starts_with(b"tail\0-f\0README"))
        })
    });
    rig.ok(&["abort", &id.to_string()]);
    wait_within("no process holding the step's key", LIMIT, || {
        holding("BATON_EXECUTION_KEY", &key).is_empty()
    });
}

#[test]
fn a_killed_engine_leaves_no_claude_running() {
    let gate = Gate::new();
    let Some(rig) = new_rig(vec![Reply::handoff("success").gated(&gate)]) else {
        return;
    };
    let mut engine = rig.engine();
    new_task(&rig, "Orphan", "Think hard.");
    let key = step_key(&rig);
    let _reaper = Reaper(key.clone());
    wait_within("the request at the stub", LIMIT, || gate.holding());
    engine.kill9();
    wait_within("no process holding the step's key", LIMIT, || {
        holding("BATON_EXECUTION_KEY", &key).is_empty()
    });
}
