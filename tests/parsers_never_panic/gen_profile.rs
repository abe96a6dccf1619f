//! Generators of documents shaped like agent profiles.

use crate::gen_json::{any_json, member, object, or_any, weird_str};
use crate::gen_pipeline::duration;
use proptest::prelude::*;
use serde_json::Value;

pub fn profile_doc() -> impl Strategy<Value = Value> {
    let s = || weird_str().prop_map(Value::from);
    let root = object(vec![
        member("id", or_any(prop_oneof![Just(Value::from("coder")), s()])),
        member("name", or_any(s())),
        member(
            "backend",
            or_any(
                prop::sample::select(vec!["openai", "opencode", "command", "Command", ""])
                    .prop_map(Value::from),
            ),
        ),
        member(
            "url",
            or_any(
                prop::sample::select(vec!["http://127.0.0.1:4096/", "https://x", "ftp://x", ""])
                    .prop_map(Value::from),
            ),
        ),
        member(
            "model",
            or_any(
                prop::sample::select(vec!["qwen", "anthropic/claude", "/"]).prop_map(Value::from),
            ),
        ),
        member("api_key_env", or_any(s())),
        member("agent", or_any(s())),
        member("system", or_any(s())),
        member(
            "argv",
            or_any(
                prop::collection::vec(prop_oneof![Just(Value::from("{{message}}")), s()], 0..4)
                    .prop_map(Value::Array),
            ),
        ),
        member(
            "format",
            or_any(
                prop::sample::select(vec![
                    "text",
                    "claude-stream-json",
                    "codex-json",
                    "gemini-stream-json",
                    "xml",
                ])
                .prop_map(Value::from),
            ),
        ),
        member("prompt_template", or_any(s())),
        member(
            "outcomes",
            or_any(
                prop::collection::vec(
                    prop_oneof![
                        prop::sample::select(vec![
                            "success",
                            "failure",
                            "needs-info",
                            "Needs Info",
                            "**",
                            ""
                        ])
                        .prop_map(Value::from),
                        s(),
                    ],
                    0..5,
                )
                .prop_map(Value::Array),
            ),
        ),
        member("timeout", or_any(duration())),
        member(
            "env",
            or_any(
                prop::collection::btree_map(weird_str(), s(), 0..3)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ),
        ),
    ]);
    prop_oneof![12 => root, 1 => any_json()]
}

/// A profile that usually loads: one of the three backends with what it needs, plus odd
/// outcomes, timeouts and templates.
pub fn mostly_valid_profile() -> impl Strategy<Value = Value> {
    let backend = prop_oneof![
        Just(
            serde_json::json!({"backend": "command", "argv": ["claude", "-p", "{{message}}"], "format": "claude-stream-json"})
        ),
        Just(serde_json::json!({"backend": "command", "argv": ["sh", "-c", "echo {{ message }}"]})),
        Just(
            serde_json::json!({"backend": "openai", "url": "http://127.0.0.1:11434/v1/", "model": "qwen", "api_key_env": "KEY"})
        ),
        Just(
            serde_json::json!({"backend": "opencode", "model": "anthropic/claude", "agent": "build"})
        ),
        Just(serde_json::json!({"backend": "opencode"})),
    ];
    let outcomes = prop::collection::vec(
        prop_oneof![
            4 => prop::sample::select(vec!["success", "failure", "needs-info", "Needs Info", "`review`", "ünïcode outcome"])
                .prop_map(String::from),
            1 => weird_str(),
        ],
        1..5,
    );
    let timeout = prop_oneof![
        3 => prop::sample::select(vec!["15m", "1ns", "500000000y"]).prop_map(Value::from),
        1 => duration(),
    ];
    let template = prop_oneof![
        Just(
            "# {{title}}\n{{prompt}}\n{{handoff}}{{note}}{{branch}}{{status}}{{context_dir}}"
                .to_string()
        ),
        weird_str(),
    ];
    (backend, outcomes, timeout, template, weird_str()).prop_map(
        |(mut profile, outcomes, timeout, template, name)| {
            let obj = profile.as_object_mut().expect("an object");
            obj.insert("id".into(), Value::from("gen"));
            obj.insert("name".into(), Value::from(name));
            obj.insert("outcomes".into(), Value::from(outcomes));
            obj.insert("timeout".into(), timeout);
            obj.insert("prompt_template".into(), Value::from(template));
            profile
        },
    )
}
