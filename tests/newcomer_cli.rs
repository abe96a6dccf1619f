//! A newcomer's commands end to end: what `init` writes, completions, the man page.

mod common;
use common::Ws;

#[test]
fn init_writes_the_schemas_and_validate_accepts_a_schema_key() {
    let ws = Ws::new();
    let schemas = ws.root().join(".baton/schemas");
    let pipeline = std::fs::read_to_string(schemas.join("pipeline.schema.json")).unwrap();
    assert_eq!(pipeline, baton::pipeline::schema::pipeline_schema_json());
    let agent = std::fs::read_to_string(schemas.join("agent.schema.json")).unwrap();
    assert_eq!(agent, baton::agents::schema::agent_schema_json());

    // A stale schema (an older baton) is refreshed by a second init.
    std::fs::write(schemas.join("agent.schema.json"), "{}").unwrap();
    let out = ws.ok(&["init"]);
    assert!(out.contains("refreshed the file schemas"), "{out}");
    let agent = std::fs::read_to_string(schemas.join("agent.schema.json")).unwrap();
    assert_eq!(agent, baton::agents::schema::agent_schema_json());

    let file = ws.pipeline(
        "mine.json",
        r#"{"$schema": "../schemas/pipeline.schema.json", "id": "mine",
            "statuses": [{"id": "todo", "kind": "queue"}, {"id": "done", "kind": "done"}],
            "transitions": [{"from": "todo", "to": "done", "on": "start"}]}"#,
    );
    let out = ws
        .baton(&["pipelines", "validate", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let all =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(!all.contains("$schema"), "no warning about $schema: {all}");
}
