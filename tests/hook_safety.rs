//! Hooks and hostile or secret text: `run` hook output is redacted, webhook credentials never
//! reach events or logs, and a `start_task` hook that starts its own pipeline is flagged.

mod common;
use common::Ws;

fn pipeline_with_hooks(hooks: &str) -> String {
    format!(
        r#"{{"id": "h", "statuses": [
          {{"id": "todo", "kind": "queue"}},
          {{"id": "review", "kind": "gate"}},
          {{"id": "done", "kind": "done"}},
          {{"id": "failed", "kind": "failed"}},
          {{"id": "cancelled", "kind": "cancelled"}}
        ], "transitions": [
          {{"from": "todo", "to": "review", "on": "start"}},
          {{"from": "review", "to": "done", "on": "approve", "hooks": {hooks}}}
        ]}}"#
    )
}

/// Everything the store holds as text about hooks: events and history.
fn stored_text(ws: &Ws) -> String {
    let db = rusqlite::Connection::open(ws.root().join(".baton/baton.db")).unwrap();
    let mut out = String::new();
    for sql in [
        "SELECT summary || ' ' || data_json FROM events",
        "SELECT hooks_json FROM history",
        "SELECT COALESCE(result, '') || ' ' || body_json FROM followups",
    ] {
        let mut stmt = db.prepare(sql).unwrap();
        let rows = stmt.query_map([], |r| r.get::<_, String>(0)).unwrap();
        for r in rows {
            out.push_str(&r.unwrap());
            out.push('\n');
        }
    }
    out
}

#[test]
fn run_hook_output_is_redacted_before_it_is_stored_or_shown() {
    let ws = Ws::new();
    ws.pipeline(
        "h.json",
        &pipeline_with_hooks(
            r#"[{"run": "echo \"deploying with $DEPLOY_TOKEN\""},
                {"run": "echo \"failed: $DEPLOY_TOKEN\" >&2; exit 3"}]"#,
        ),
    );
    let id = ws.new_task("h", "ship");
    ws.ok(&["start", &id.to_string()]);
    ws.baton(&["approve", &id.to_string()])
        .env("DEPLOY_TOKEN", "s3cr3t-deploy-value")
        .assert()
        .success();
    let stored = stored_text(&ws);
    assert!(stored.contains("deploying with [redacted]"), "{stored}");
    assert!(stored.contains("exited 3: failed: [redacted]"), "{stored}");
    assert!(!stored.contains("s3cr3t-deploy-value"), "{stored}");
    let shown = ws.ok(&["show", &id.to_string()]);
    assert!(!shown.contains("s3cr3t-deploy-value"), "{shown}");
}

#[test]
fn webhook_credentials_never_reach_events_logs_or_show() {
    let ws = Ws::new();
    ws.pipeline(
        "h.json",
        &pipeline_with_hooks(
            r#"[{"webhook": {"url": "http://alice:hunter2pass@127.0.0.1:9/hook?token=qtok9",
                             "headers": {"Authorization": "Bearer hdrsecret7"}}}]"#,
        ),
    );
    let id = ws.new_task("h", "notify");
    ws.ok(&["start", &id.to_string()]);
    ws.ok(&["approve", &id.to_string()]);
    let mut everything = stored_text(&ws);
    everything.push_str(&ws.ok(&["show", &id.to_string()]));
    everything.push_str(&ws.ok(&["show", &id.to_string(), "--json"]));
    for log in std::fs::read_dir(ws.root().join(".baton/logs"))
        .into_iter()
        .flatten()
    {
        everything.push_str(&std::fs::read_to_string(log.unwrap().path()).unwrap_or_default());
    }
    assert!(
        everything.contains("POST http://***@127.0.0.1:9/***"),
        "the failure names the receiver: {everything}"
    );
    // The hook's own definition (in the pipeline snapshot) is the user's file; what baton
    // writes about it must not repeat the secrets.
    let written: String = everything
        .lines()
        .filter(|l| !l.contains("\"webhook\""))
        .collect();
    for secret in ["hunter2pass", "alice:", "qtok9", "hdrsecret7"] {
        assert!(!written.contains(secret), "{secret} leaked: {written}");
    }
}

#[test]
fn validate_warns_of_a_start_task_hook_that_starts_its_own_pipeline() {
    let ws = Ws::new();
    let file = ws.pipeline(
        "h.json",
        &pipeline_with_hooks(r#"[{"start_task": {"pipeline": "h"}}]"#),
    );
    let out = ws
        .baton(&["pipelines", "validate", file.to_str().unwrap()])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "a warning, not an error: {text}");
    assert!(text.contains("starts a task on its own pipeline"), "{text}");
    assert!(text.contains("h.json:"), "located: {text}");
}
