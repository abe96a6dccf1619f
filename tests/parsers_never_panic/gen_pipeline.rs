//! Generators of documents shaped like pipeline files: plausible ids, kinds, steps,
//! transitions, guards and hooks, mixed with wrong types, huge numbers and odd durations.

use crate::gen_json::{any_json, member, object, or_any, weird_str};
use proptest::prelude::*;
use serde_json::{Map, Value};

pub const IDS: &[&str] = &[
    "todo",
    "plan",
    "build",
    "review",
    "done",
    "failed",
    "cancelled",
    "Plan Review",
    "ünïcode",
];

/// A status id: mostly from a small pool, so transitions hit real statuses.
pub fn status_id() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => prop::sample::select(IDS).prop_map(String::from),
        1 => Just("*".into()),
        1 => weird_str(),
    ]
}

pub fn duration() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::sample::select(vec![
            "15m",
            "1h 30m",
            "0s",
            "0",
            "1ns",
            "",
            "  2s ",
            "1y",
            "500000000y",
            "18446744073709551615s",
            "18446744073709551616s",
            "99999999999999999999h",
            "1.5h",
            "-5m",
            "5 parsecs",
            "9223372036854775807d",
        ])
        .prop_map(Value::from),
        (
            "[0-9]{1,22}",
            prop::sample::select(vec!["ns", "ms", "s", "m", "h", "d", "w", "y"])
        )
            .prop_map(|(n, unit)| Value::from(format!("{n}{unit}"))),
    ]
}

pub fn big_number() -> impl Strategy<Value = Value> {
    prop_oneof![
        (0u64..10).prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
    ]
}

pub fn step() -> impl Strategy<Value = Value> {
    object(vec![
        member("run", or_any(weird_str().prop_map(Value::from))),
        member("script", or_any(Just(Value::from("set -e\necho hi\n")))),
        member(
            "agent",
            or_any(
                prop::sample::select(vec!["planner", "coder", "ghost", ""]).prop_map(Value::from),
            ),
        ),
        member(
            "docker",
            or_any(object(vec![
                member("image", or_any(Just(Value::from("rust:1")))),
                member("run", or_any(Just(Value::from("cargo test")))),
            ])),
        ),
        member("timeout", or_any(duration())),
        member("retries", or_any(big_number())),
        member(
            "env",
            or_any(
                prop::collection::btree_map(weird_str(), weird_str().prop_map(Value::from), 0..3)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ),
        ),
        member("workdir", or_any(weird_str().prop_map(Value::from))),
    ])
}

pub fn status() -> impl Strategy<Value = Value> {
    let kind = prop::sample::select(vec![
        "queue",
        "gate",
        "step",
        "done",
        "failed",
        "cancelled",
        "Done",
        "",
        "terminal",
    ]);
    // Most statuses either have a kind or a step, as real files do.
    let shaped = prop_oneof![
        (status_id(), kind.clone())
            .prop_map(|(id, kind)| serde_json::json!({"id": id, "kind": kind})),
        (status_id(), step()).prop_map(|(id, step)| serde_json::json!({"id": id, "step": step})),
    ];
    let free = object(vec![
        member("id", or_any(status_id().prop_map(Value::from))),
        member("label", or_any(weird_str().prop_map(Value::from))),
        member("kind", or_any(kind.prop_map(Value::from))),
        member("step", step()),
    ]);
    prop_oneof![4 => shaped, 1 => free, 1 => any_json()]
}

pub fn trigger_name() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "start",
            "approve",
            "reject",
            "manual",
            "success",
            "failure",
            "error",
            "abort",
            "resume",
            "retry",
            "outcome:",
            "outcome:needs_info",
            "outcome:Needs-Info",
            "outcome:success",
            "outcome:failure",
            "outcome:**",
            "Outcome:x",
        ])
        .prop_map(String::from),
        weird_str().prop_map(|s| format!("outcome:{s}")),
        weird_str(),
    ]
}

/// A list of single-key objects, as guards and hooks are written.
pub fn singles(
    names: Vec<&'static str>,
    value: BoxedStrategy<Value>,
) -> impl Strategy<Value = Value> {
    let entry = prop_oneof![
        4 => (prop::sample::select(names), value)
            .prop_map(|(k, v)| Value::Object(Map::from_iter([(k.to_string(), v)]))),
        1 => any_json(),
    ];
    or_any(prop::collection::vec(entry, 0..4).prop_map(Value::Array))
}

pub fn transition() -> impl Strategy<Value = Value> {
    let guard_value = prop_oneof![
        big_number(),
        any::<bool>().prop_map(Value::from),
        Just(Value::from("what_was_done")),
        Just(Value::from(-1.0)),
        Just(Value::from(f64::MAX)),
        Just(Value::from(u64::from(u32::MAX) + 1)),
    ]
    .boxed();
    let hook_value = prop_oneof![
        Just(Value::Object(Map::new())),
        Just(Value::from("echo done")),
        Just(Value::from("  ")),
        any_json(),
    ]
    .boxed();
    let shaped = (status_id(), status_id(), trigger_name())
        .prop_map(|(from, to, on)| serde_json::json!({"from": from, "to": to, "on": on}));
    let full = object(vec![
        member("from", or_any(status_id().prop_map(Value::from))),
        member("to", or_any(status_id().prop_map(Value::from))),
        member("on", or_any(trigger_name().prop_map(Value::from))),
        member("label", or_any(weird_str().prop_map(Value::from))),
        member(
            "guards",
            singles(
                vec![
                    "max_visits",
                    "no_running_step",
                    "has_handoff_field",
                    "clean_worktree",
                    "budget",
                    "bogus",
                ],
                guard_value,
            ),
        ),
        member(
            "hooks",
            singles(
                vec!["notify", "run", "start_task", "webhook", "merge", "bogus"],
                hook_value,
            ),
        ),
    ]);
    prop_oneof![3 => shaped, 3 => full, 1 => any_json()]
}

/// A whole pipeline document.
pub fn pipeline_doc() -> impl Strategy<Value = Value> {
    let root = object(vec![
        member("id", or_any(weird_str().prop_map(Value::from))),
        member("name", or_any(weird_str().prop_map(Value::from))),
        member("description", or_any(weird_str().prop_map(Value::from))),
        prop::option::weighted(
            0.95,
            or_any(prop::collection::vec(status(), 0..9).prop_map(Value::Array))
                .prop_map(|v| ("statuses".to_string(), v)),
        )
        .boxed(),
        member(
            "transitions",
            or_any(prop::collection::vec(transition(), 0..10).prop_map(Value::Array)),
        ),
        member("triggers", any_json()),
    ]);
    prop_oneof![12 => root, 1 => any_json()]
}

/// A pipeline that usually loads (distinct ids, a `failed` status, known triggers), with
/// extra transitions, guards, hooks and odd durations, so that the whole-pipeline checks,
/// the snapshot round trip and `decide` run on many loaded pipelines.
pub fn mostly_valid_pipeline() -> impl Strategy<Value = Value> {
    const IDS: [&str; 7] = ["todo", "plan", "build", "review", "qa", "ship", "wait"];
    let kinds = prop::sample::select(vec![
        "queue",
        "gate",
        "step",
        "step",
        "step",
        "done",
        "cancelled",
    ]);
    let timeout = prop_oneof![
        4 => prop::sample::select(vec!["15m", "1h 30m", "1ns", "500000000y", "18446744073709551615s"])
            .prop_map(Value::from),
        1 => duration(),
    ];
    let statuses = prop::collection::vec((kinds, timeout, 0u32..4), 1..IDS.len());
    let trigger = prop_oneof![
        4 => prop::sample::select(vec![
            "start", "approve", "reject", "manual", "success", "failure", "error", "abort",
            "outcome:needs_info", "outcome:Needs-Info", "outcome:success", "outcome:failure",
        ])
        .prop_map(String::from),
        1 => trigger_name(),
    ];
    let guard = prop::sample::select(vec![
        r#"{"max_visits": 2}"#,
        r#"{"max_visits": 0}"#,
        r#"{"max_visits": 4294967295}"#,
        r#"{"no_running_step": true}"#,
        r#"{"clean_worktree": true}"#,
        r#"{"has_handoff_field": "what_was_done"}"#,
        r#"{"has_handoff_field": "open_questions"}"#,
        r#"{"budget": 1.0}"#,
        r#"{"budget": 1e300}"#,
    ]);
    let transition = (
        any::<prop::sample::Index>(),
        prop::option::weighted(0.9, any::<prop::sample::Index>()),
        any::<prop::sample::Index>(),
        trigger,
        prop::collection::vec(guard, 0..3),
    );
    let transitions = prop::collection::vec(transition, 0..8);
    (statuses, transitions).prop_map(|(statuses, transitions)| {
        // The last status is always `failed`, so every step has somewhere to fail to.
        let mut ids: Vec<&str> = IDS[..statuses.len()].to_vec();
        ids.push("failed");
        let mut list: Vec<Value> = statuses
            .iter()
            .zip(&ids)
            .map(|((kind, timeout, retries), id)| {
                if *kind == "step" {
                    serde_json::json!({"id": id, "step": {"run": "true", "timeout": timeout, "retries": retries}})
                } else {
                    serde_json::json!({"id": id, "kind": kind})
                }
            })
            .collect();
        list.push(serde_json::json!({"id": "failed", "kind": "failed"}));
        let transitions: Vec<Value> = transitions
            .into_iter()
            .map(|(to, from, label, on, guards)| {
                let from = from.map_or("*", |i| ids[i.index(ids.len())]);
                let guards: Vec<Value> = guards
                    .iter()
                    .map(|g| serde_json::from_str(g).expect("guard JSON"))
                    .collect();
                serde_json::json!({"from": from, "to": ids[to.index(ids.len())], "on": on,
                    "label": format!("label {}", label.index(100)),
                    "guards": guards, "hooks": [{"notify": {}}, {"run": "echo moved"}]})
            })
            .collect();
        serde_json::json!({"id": "gen", "statuses": list, "transitions": transitions})
    })
}
