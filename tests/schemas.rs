//! The JSON Schemas in `assets/` match the file-format types, every built-in file validates
//! against them, and the schemas know exactly the fields the hand-written parsers know.
//!
//! After changing a file format: `BATON_BLESS=1 cargo test --test schemas` rewrites the
//! schemas in `assets/` (review the diff, commit it).

use baton::agents::schema::agent_schema_json;
use baton::pipeline::schema::pipeline_schema_json;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Compares (or, with `BATON_BLESS=1`, rewrites) one committed schema.
fn check_committed(name: &str, generated: &str) {
    let path = root().join("assets").join(name);
    if std::env::var_os("BATON_BLESS").is_some() {
        std::fs::write(&path, generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "assets/{name} is not what the types in src/ describe; run \
         `BATON_BLESS=1 cargo test --test schemas` and commit the result"
    );
}

#[test]
fn committed_schemas_match_the_types() {
    check_committed("pipeline.schema.json", &pipeline_schema_json());
    check_committed("agent.schema.json", &agent_schema_json());
}

fn validator(generated: &str) -> jsonschema::Validator {
    let schema: Value = serde_json::from_str(generated).unwrap();
    jsonschema::validator_for(&schema).expect("the schema is a valid JSON Schema")
}

fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no JSON files in {}", dir.display());
    files
}

fn errors(v: &jsonschema::Validator, doc: &Value) -> Vec<String> {
    v.iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

#[test]
fn every_builtin_pipeline_and_agent_validates_and_names_its_schema() {
    let pipelines = validator(&pipeline_schema_json());
    for file in json_files(&root().join("pipelines")) {
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let errs = errors(&pipelines, &doc);
        assert!(errs.is_empty(), "{}: {errs:#?}", file.display());
        assert_eq!(
            doc["$schema"],
            "../assets/pipeline.schema.json",
            "{}",
            file.display()
        );
    }
    let agents = validator(&agent_schema_json());
    for file in json_files(&root().join("pipelines/agents")) {
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let errs = errors(&agents, &doc);
        assert!(errs.is_empty(), "{}: {errs:#?}", file.display());
        assert_eq!(
            doc["$schema"],
            "../../assets/agent.schema.json",
            "{}",
            file.display()
        );
    }
}

#[test]
fn the_schemas_reject_what_the_loader_rejects() {
    let pipelines = validator(&pipeline_schema_json());
    let ok = json!({"id": "p", "statuses": [{"id": "a", "kind": "queue"},
        {"id": "b", "step": {"run": "true"}}, {"id": "d", "kind": "done"}]});
    assert!(errors(&pipelines, &ok).is_empty());
    let bad = [
        json!({"id": "p q", "statuses": [{"id": "d", "kind": "done"}]}),
        json!({"id": "p", "statuses": []}),
        json!({"id": "p", "statuses": [{"id": "d"}]}),
        json!({"id": "p", "statuses": [{"id": "d", "kind": "finished"}]}),
        json!({"id": "p", "statuses": [{"id": "s", "step": {"run": "a", "agent": "b"}}]}),
        json!({"id": "p", "statuses": [{"id": "s", "step": {"timeout": "1m"}}]}),
        json!({"id": "p", "statuses": [{"id": "d", "kind": "done"}],
               "transitions": [{"from": "d", "to": "d", "on": "resume"}]}),
        json!({"id": "p", "statuses": [{"id": "d", "kind": "done"}],
               "transitions": [{"from": "d", "to": "d", "on": "start", "guards": [{"max_visit": 1}]}]}),
    ];
    for doc in bad {
        assert!(!errors(&pipelines, &doc).is_empty(), "accepted {doc}");
    }
    let agents = validator(&agent_schema_json());
    assert!(
        errors(
            &agents,
            &json!({"id": "a", "backend": "command", "argv": ["x"]})
        )
        .is_empty()
    );
    for doc in [
        json!({"id": "a", "backend": "telepathy"}),
        json!({"id": "a", "backend": "command"}),
        json!({"id": "a", "backend": "openai", "url": "http://x/v1"}),
        json!({"id": "a", "backend": "command", "argv": ["x"], "format": "xml"}),
    ] {
        assert!(!errors(&agents, &doc).is_empty(), "accepted {doc}");
    }
}

/// The property names the schema gives an object found by `pointer` (following `$ref`).
fn properties(schema: &Value, pointer: &str) -> BTreeSet<String> {
    let mut node = schema
        .pointer(pointer)
        .unwrap_or_else(|| panic!("{pointer}"));
    while let Some(r) = node.get("$ref").and_then(Value::as_str) {
        node = schema.pointer(r.trim_start_matches('#')).unwrap();
    }
    node["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("{pointer} has no properties"))
        .keys()
        .filter(|k| !k.starts_with('$'))
        .cloned()
        .collect()
}

/// The known names the parser lists in its message about `bogus_field`.
fn parser_known(message: &str, after: &str) -> BTreeSet<String> {
    let start = message
        .find(after)
        .unwrap_or_else(|| panic!("no `{after}` in: {message}"))
        + after.len();
    let rest = &message[start..];
    let end = rest.find(')').unwrap_or(rest.len());
    rest[..end]
        .replace(", plus optional", ",")
        .replace(" or ", ", ")
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

fn pipeline_messages(doc: Value) -> Vec<String> {
    let text = serde_json::to_string_pretty(&doc).unwrap();
    let (_, diags) = baton::pipeline::parse_pipeline("t.json", &text, None);
    diags.iter().map(|d| d.message.clone()).collect()
}

fn message_about(messages: &[String], needle: &str) -> String {
    messages
        .iter()
        .find(|m| m.contains(needle))
        .unwrap_or_else(|| panic!("no message about {needle}: {messages:#?}"))
        .clone()
}

#[test]
fn the_schemas_know_the_fields_the_parsers_know() {
    let schema: Value = serde_json::from_str(&pipeline_schema_json()).unwrap();
    let msgs = pipeline_messages(json!({
        "id": "p", "bogus_field": 1,
        "statuses": [
            {"id": "s", "bogus_field": 1, "step": {"run": "x", "bogus_field": 1}},
            {"id": "d", "kind": "done"}
        ],
        "transitions": [{"from": "s", "to": "d", "on": "success", "bogus_field": 1,
                         "guards": [{"bogus_guard": 1}], "hooks": [{"bogus_hook": 1}]}]
    }));
    let cases = [
        ("pipeline: unknown field", "(known: ", ""),
        (
            "status `s`: unknown field",
            "(known: ",
            "/definitions/StatusFile",
        ),
        (
            "unknown step kind",
            "a step has one of ",
            "/definitions/StepFile",
        ),
        (
            "transition 1: unknown field",
            "(known: ",
            "/definitions/TransitionFile",
        ),
    ];
    for (needle, after, pointer) in cases {
        let parser = parser_known(&message_about(&msgs, needle), after);
        let described = properties(&schema, pointer);
        assert_eq!(
            parser, described,
            "the parser and assets/pipeline.schema.json disagree on {needle}; add the field to \
             src/pipeline/schema.rs and run `BATON_BLESS=1 cargo test --test schemas`"
        );
    }
    for (needle, def) in [("unknown guard", "Guard"), ("unknown hook", "Hook")] {
        let parser = parser_known(&message_about(&msgs, needle), "(expected ");
        let described: BTreeSet<String> = schema["definitions"][def]["oneOf"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|v| v["required"].as_array().unwrap().clone())
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        assert_eq!(parser, described, "{needle}");
    }

    let schema: Value = serde_json::from_str(&agent_schema_json()).unwrap();
    let (_, diags) = baton::agents::parse_profile(
        "a.json",
        r#"{"id": "a", "backend": "command", "argv": ["x"], "bogus_field": 1}"#,
    );
    let msg = diags
        .iter()
        .map(|d| d.message.clone())
        .find(|m| m.contains("bogus_field"))
        .unwrap();
    assert_eq!(parser_known(&msg, "(known: "), properties(&schema, ""));
}

#[test]
fn validate_accepts_a_schema_key() {
    let text = r#"{"$schema": "../assets/pipeline.schema.json", "id": "p",
        "statuses": [{"id": "d", "kind": "done"}]}"#;
    let (p, diags) = baton::pipeline::parse_pipeline("t.json", text, None);
    assert!(p.is_some() && diags.is_empty(), "{diags:?}");
    let (p, diags) = baton::agents::parse_profile(
        "a.json",
        r#"{"$schema": "../../assets/agent.schema.json", "id": "a", "backend": "command", "argv": ["x"]}"#,
    );
    assert!(p.is_some() && diags.is_empty(), "{diags:?}");
}
