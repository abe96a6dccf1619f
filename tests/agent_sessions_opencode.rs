//! OpenCode sessions that carry on: a real OpenCode server, started by baton for a
//! `"serve": true` profile with `"session": "continue"`, its model the loopback OpenAI stub.
//! A rejected change goes back to the same OpenCode session (kept across the two engines and
//! their two servers), and the model sees the earlier turn with only the note as new.

mod common;
mod infra;
mod stubs;

use assert_cmd::Command;
use common::Ws;
use serde_json::Value;
use std::time::Duration;

const PLAN: &str = "## What Was Done\nPlanned it.\n\n## Next Agent Context\nWrite hello.txt.\n";
const TASK: &str = "Write hello.txt with a greeting.";

/// The text of a chat message's content (a string or text parts).
fn text_of(content: &Value) -> String {
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
fn user_texts(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .map(|m| text_of(&m["content"]))
        .collect()
}

#[test]
fn a_rejected_change_continues_the_same_opencode_session_with_only_the_note() {
    let Some(_) = infra::agent_cli("opencode") else {
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
    let ws = Ws::new();
    ws.pipeline(
        "real.json",
        r#"{"id": "real", "statuses": [
            {"id": "todo", "kind": "queue"},
            {"id": "build", "step": {"agent": "oc", "timeout": "2m"}},
            {"id": "check", "kind": "gate"},
            {"id": "done", "kind": "done"}, {"id": "failed", "kind": "failed"}],
          "transitions": [{"from": "check", "to": "build", "on": "reject"}]}"#,
    );
    std::fs::write(
        ws.root().join(".baton/agents/oc.json"),
        r#"{"id": "oc", "backend": "opencode", "serve": true, "agent": "build",
  "model": "stub/stub-model", "session": "continue",
  "prompt_template": "{{title}}\n\n{{prompt}}\n\n{{note}}"}"#,
    )
    .unwrap();
    let baton = |args: &[&str]| {
        let h = home.path();
        let path = format!(
            "{}:{}",
            infra::agent_clis_dir().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let out = Command::cargo_bin("baton")
            .unwrap()
            .args(args)
            .current_dir(ws.root())
            .env("PATH", path)
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
            .env_remove("BATON_DIR")
            .timeout(Duration::from_secs(180))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "baton {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let id = baton(&[
        "new",
        "Hello",
        "--pipeline",
        "real",
        "--prompt",
        TASK,
        "--start",
    ]);
    let id = id.trim();
    // Each engine starts its own OpenCode server and stops it when it exits.
    let drain = || baton(&["engine", "--exit-when-idle"]);
    drain();
    assert_eq!(ws.show(id.parse().unwrap())["status"], "check");
    let first = stub.requests.lock().unwrap().len();
    baton(&["reject", id, "--note", "Louder, please."]);
    drain();
    let shown = ws.show(id.parse().unwrap());
    assert_eq!(shown["status"], "check", "{shown:#}");
    let steps = shown["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{shown:#}");
    assert_eq!(steps[1]["continued"], true, "{shown:#}");
    assert_eq!(steps[0]["session"], steps[1]["session"], "{shown:#}");
    let requests = stub.requests.lock().unwrap().clone();
    let continued = requests[first..]
        .iter()
        .map(|(_, body)| user_texts(body))
        .find(|said| said.last().is_some_and(|l| l.contains("Louder, please.")))
        .unwrap_or_else(|| panic!("no chat request ended with the note: {requests:#?}"));
    assert!(continued.iter().any(|m| m.contains(TASK)), "{continued:#?}");
    assert!(!continued.last().unwrap().contains(TASK), "{continued:#?}");
}
