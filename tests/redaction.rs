//! Known secret values never reach the log or the database: not when a long line is cut
//! into pieces across the secret, and not when the value is short.

mod common;
use common::Ws;

fn leak_pipeline(ws: &Ws, script: &str) {
    let json = serde_json::json!({
        "id": "leak",
        "statuses": [
            {"id": "todo", "kind": "queue"},
            {"id": "work", "step": {"run": script}},
            {"id": "done", "kind": "done"},
            {"id": "failed", "kind": "failed"}
        ]
    });
    ws.pipeline("leak.json", &json.to_string());
}

fn assert_nowhere(ws: &Ws, needles: &[&str]) {
    let logs = ws.ok(&["logs", "1"]);
    for n in needles {
        assert!(!logs.contains(n), "{n:?} is in the log");
    }
    for f in ["baton.db", "baton.db-wal"] {
        if let Ok(bytes) = std::fs::read(ws.root().join(".baton").join(f)) {
            for n in needles {
                let hit = bytes.windows(n.len()).any(|w| w == n.as_bytes());
                assert!(!hit, "{n:?} is in {f}");
            }
        }
    }
}

#[test]
fn a_secret_across_the_16_kib_cut_of_a_long_line_is_redacted() {
    let ws = Ws::new();
    // 16,380 characters, then the secret: the line is cut 4 bytes into it.
    leak_pipeline(
        &ws,
        "head -c 16380 /dev/zero | tr '\\0' x; printf '%s tail\\n' \"$MY_API_KEY\"",
    );
    let secret = "sk-live-ABCDEFGHIJKLMNOP";
    let out = ws
        .baton(&["run", "leak", "--title", "t", "--wait"])
        .env("MY_API_KEY", secret)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(ws.ok(&["logs", "1"]).contains("[redacted] tail"));
    // Neither half of the secret as it would have been cut.
    assert_nowhere(&ws, &[secret, "sk-l", "ive-ABCDEFGHIJKLMNOP"]);
}

#[test]
fn short_secret_values_of_four_characters_and_more_are_redacted() {
    let ws = Ws::new();
    leak_pipeline(&ws, "echo \"pw=$DB_PASSWORD pin=$PIN_TOKEN\"");
    let out = ws
        .baton(&["run", "leak", "--title", "t", "--wait"])
        .env("DB_PASSWORD", "hu7!x")
        .env("PIN_TOKEN", "42")
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let logs = ws.ok(&["logs", "1"]);
    assert!(logs.contains("pw=[redacted] pin=42"), "{logs}");
    assert_nowhere(&ws, &["hu7!x"]);
}

#[test]
fn the_engines_baton_secrets_never_reach_a_step_or_its_log() {
    let ws = Ws::new();
    // `env` prints everything the step inherited; the step's own `BATON_*` secret is
    // printed by name.
    let json = serde_json::json!({
        "id": "leak",
        "statuses": [
            {"id": "todo", "kind": "queue"},
            {"id": "work", "step": {
                "run": "env; echo \"own=$BATON_DEPLOY_TOKEN\"; echo \"gh=${BATON_GITHUB_SECRET:-unset}\"",
                "env": {"BATON_DEPLOY_TOKEN": "deploy-4b1e7c"}
            }},
            {"id": "done", "kind": "done"},
            {"id": "failed", "kind": "failed"}
        ]
    });
    ws.pipeline("leak.json", &json.to_string());
    let (gh, api) = ("gh-hook-7d2f9a1c", "api-token-e3b0c442");
    let out = ws
        .baton(&["run", "leak", "--title", "t", "--wait"])
        .env("BATON_GITHUB_SECRET", gh)
        .env("BATON_TOKEN", api)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let logs = ws.ok(&["logs", "1"]);
    assert!(logs.contains("gh=unset"), "not handed to the step: {logs}");
    assert!(logs.contains("own=[redacted]"), "{logs}");
    assert!(
        logs.contains("BATON_TASK_ID=1"),
        "baton's own names are kept: {logs}"
    );
    assert_nowhere(&ws, &[gh, api]);
    // (The step's own value is in the pipeline, so in the task's snapshot of it.)
    assert!(!logs.contains("deploy-4b1e7c"), "{logs}");
    let context_log =
        std::fs::read_to_string(ws.root().join(".baton/context/1/id_work_001.log")).unwrap();
    for n in [gh, api, "deploy-4b1e7c"] {
        assert!(!context_log.contains(n), "{n:?} is in the context log");
    }
}

#[test]
fn a_secret_split_by_a_colour_code_is_redacted() {
    let ws = Ws::new();
    // The script names no part of the secret: it is in the task's snapshot of the pipeline.
    leak_pipeline(&ws, "printf 'tok-\\033[0m%s\\n' \"${DEPLOY_TOKEN#tok-}\"");
    let out = ws
        .baton(&["run", "leak", "--title", "t", "--wait"])
        .env("DEPLOY_TOKEN", "tok-DEPLOY-5f3a9e")
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let logs = ws.ok(&["logs", "1"]);
    assert!(logs.contains("[redacted]"), "{logs}");
    assert_nowhere(&ws, &["tok-DEPLOY-5f3a9e", "DEPLOY-5f3a9e"]);
}

#[test]
fn a_failed_agents_error_and_events_keep_no_secret_of_its_profile() {
    let ws = Ws::new();
    let secret = "sk-live-QRSTUVWXYZ012345";
    // A Claude-format agent that fails, quoting the key in its answer, in a refused tool
    // call (a `permission_denied` event) and on stderr (the step's error).
    let script = r#"printf '{"type":"result","subtype":"success","is_error":true,"result":"rejected %s","permission_denials":[{"tool_name":"Bash","tool_input":{"command":"curl -H %s"}}]}\n' "$MY_API_KEY" "$MY_API_KEY"; echo "stderr $MY_API_KEY" >&2; exit 1"#;
    let profile = serde_json::json!({
        "id": "leaky", "backend": "command", "format": "claude-stream-json",
        "prompt_via": "stdin", "argv": ["sh", "-c", script],
        "env": {"MY_API_KEY": secret},
    });
    std::fs::write(
        ws.root().join(".baton/agents/leaky.json"),
        profile.to_string(),
    )
    .unwrap();
    let json = serde_json::json!({
        "id": "leak",
        "statuses": [
            {"id": "todo", "kind": "queue"},
            {"id": "work", "step": {"agent": "leaky"}},
            {"id": "done", "kind": "done"},
            {"id": "failed", "kind": "failed"}
        ]
    });
    ws.pipeline("leak.json", &json.to_string());
    let out = ws
        .baton(&["run", "leak", "--title", "t", "--wait", "--json"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("\"failed\""), "{out:?}");
    assert!(!shown.contains(secret), "{shown}");
    assert!(shown.contains("rejected [redacted]"), "{shown}");
    let db = rusqlite::Connection::open(ws.root().join(".baton/baton.db")).unwrap();
    let (summary, data): (String, String) = db
        .query_row(
            "SELECT summary, data_json FROM events WHERE type = 'permission_denied'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert!(summary.contains("Bash curl -H [redacted]"), "{summary}");
    assert!(data.contains("curl -H [redacted]"), "{data}");
    assert_nowhere(&ws, &[secret]);
}
