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
