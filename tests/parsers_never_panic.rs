//! Everything a user or an agent writes reaches a parser: pipeline files, agent profiles, an
//! agent's answer, a test runner's output. Whatever the input, each of them returns a value
//! or a located error and never panics.
//!
//! Two kinds of input: arbitrary text (any Unicode, bytes read lossily, JSON-looking token
//! soup), which mostly exercises the JSON and line readers, and generated documents shaped
//! like the real thing (pipelines with plausible ids, kinds, steps, guards and hooks mixed
//! with wrong types, huge numbers, odd durations, Unicode and deep nesting; Markdown answers
//! built from near-miss headings and fences), which reach the checks behind them.

use baton::agents::{TemplateVars, parse_profile, render_argv, render_prompt};
use baton::handoff::{self, RAW_CONTEXT_LIMIT};
use baton::pipeline::{
    Diagnostic, Facts, Pipeline, Trigger, decide, decide_move, move_options, normalize_outcome,
    parse_pipeline,
};
use baton::testcounts::TestScanner;
use proptest::prelude::*;
use serde_json::{Map, Value};
use std::collections::{BTreeSet, HashMap};

/// proptest's default of 256 cases per property (`PROPTEST_CASES=20000` hunts longer).
/// A failure prints its minimal input, which then becomes a named regression test at the
/// end of this file rather than a file of seeds.
fn config() -> ProptestConfig {
    ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------------------
// Checks shared by the properties.

/// A located diagnostic points inside the text: a real line, and a column at most one past
/// that line's last character.
fn assert_inside(text: &str, d: &Diagnostic) {
    let (Some(line), Some(col)) = (d.line, d.column) else {
        return;
    };
    let lines: Vec<&str> = text.split('\n').collect();
    assert!(line >= 1 && line <= lines.len(), "line out of range: {d}");
    let width = lines[line - 1].chars().count();
    assert!(col >= 1 && col <= width + 1, "column out of range: {d}");
}

/// What every pipeline parse must satisfy, whatever the text.
fn check_pipeline(text: &str, known_agents: Option<&BTreeSet<String>>) -> Option<Pipeline> {
    let (pipeline, diags) = parse_pipeline("p.json", text, known_agents);
    let errors = diags.iter().filter(|d| d.is_error()).count();
    assert_eq!(pipeline.is_some(), errors == 0, "{diags:#?}");
    for d in &diags {
        assert_eq!(d.file, "p.json");
        assert!(!d.message.trim().is_empty());
        assert_inside(text, d);
    }
    if serde_json::from_str::<Value>(text).is_err() {
        // Text that is not JSON gets exactly one error, placed where the JSON broke.
        assert_eq!(diags.len(), 1, "{diags:#?}");
        assert!(
            diags[0].line.is_some() && diags[0].column.is_some(),
            "{}",
            diags[0]
        );
    } else {
        // Everything found in a JSON document is placed at the element it is about.
        for d in &diags {
            assert!(d.line.is_some() && d.column.is_some(), "unlocated: {d}");
        }
    }
    if let Some(p) = &pipeline {
        exercise_pipeline(p);
    }
    pipeline
}

/// A pipeline that loaded can be stored as a task's snapshot and read back unchanged, and
/// every decision on it is answered.
fn exercise_pipeline(p: &Pipeline) {
    let stored = serde_json::to_string(p).expect("a pipeline serialises");
    let back: Pipeline = serde_json::from_str(&stored)
        .unwrap_or_else(|e| panic!("the snapshot {stored} does not read back: {e}"));
    assert_eq!(&back, p);

    let visits: HashMap<String, u32> = p.statuses.iter().map(|s| (s.id.clone(), 2)).collect();
    let fields = ["what_was_done".to_string()];
    let facts = Facts {
        visits: &visits,
        step_running: false,
        handoff_fields: &fields,
        worktree_clean: Some(false),
        run_cost: 1.5,
    };
    let mut triggers: Vec<Trigger> = [
        "start", "approve", "reject", "manual", "success", "failure", "error", "abort",
    ]
    .iter()
    .filter_map(|t| Trigger::parse(t))
    .chain([Trigger::Resume, Trigger::Retry])
    .collect();
    triggers.extend(p.transitions.iter().map(|t| t.on.clone()));
    for from in p.statuses.iter().map(|s| s.id.as_str()).chain(["nowhere"]) {
        for trigger in &triggers {
            if let Ok(d) = decide(p, from, trigger, &facts) {
                assert!(
                    p.status(&d.to).is_some(),
                    "decided an unknown target {}",
                    d.to
                );
            }
        }
        for to in &p.statuses {
            let _ = decide_move(p, from, &to.id, &facts);
        }
        let _ = move_options(p, from, &facts);
    }
}

/// What every profile parse must satisfy, whatever the text.
fn check_profile(text: &str) {
    let (profile, diags) = parse_profile(".baton/agents/x.json", text);
    let errors = diags.iter().filter(|d| d.is_error()).count();
    assert_eq!(profile.is_some(), errors == 0, "{diags:#?}");
    for d in &diags {
        assert!(!d.message.trim().is_empty());
        assert_inside(text, d);
    }
    if serde_json::from_str::<Value>(text).is_err() {
        assert_eq!(diags.len(), 1, "{diags:#?}");
        let d = &diags[0];
        assert!(d.line.is_some_and(|l| l >= 1), "{d}");
        assert!(d.column.is_some_and(|c| c >= 1), "{d}");
    }
    if let Some(p) = profile {
        assert!(!p.id.trim().is_empty());
        assert!(!p.outcomes.is_empty());
        for o in &p.outcomes {
            assert!(!o.is_empty());
            assert_eq!(&normalize_outcome(o), o, "outcomes are stored normalised");
            assert!(p.declares(o));
            if o.is_ascii() {
                assert!(p.declares(&o.to_ascii_uppercase().replace('_', "-")), "{o}");
            }
        }
        let _ = (p.base_url(), p.target());
        let vars = TemplateVars {
            title: "{{prompt}}".into(),
            prompt: "{{".into(),
            ..TemplateVars::default()
        };
        let message = render_prompt(&p.prompt_template, &vars);
        assert_eq!(render_argv(&p.argv, &vars, &message).len(), p.argv.len());
    }
}

/// What every extraction must satisfy, whatever the answer.
fn check_handoff(raw: &str) -> handoff::Handoff {
    let h = handoff::extract(raw);
    assert_eq!(h.raw, raw);
    assert_eq!(h.structured, !h.fields.is_empty());
    for field in [
        &h.fields.what_was_done,
        &h.fields.decisions_made,
        &h.fields.open_questions,
        &h.fields.next_agent_context,
    ]
    .into_iter()
    .flatten()
    {
        assert!(!field.is_empty() && field.trim() == field, "{field:?}");
    }
    if let Some(o) = &h.outcome {
        assert!(!o.is_empty());
        assert_eq!(&normalize_outcome(o), o, "the outcome is normalised");
    }
    let header = handoff::context_header(&h, "plan");
    if !h.structured {
        let body = header
            .strip_prefix("[earlier output truncated: ")
            .and_then(|rest| rest.split_once('\n'))
            .map_or(header.as_str(), |(_, body)| body);
        assert!(body.len() <= RAW_CONTEXT_LIMIT, "{} bytes", body.len());
    }
    assert!(handoff::metadata(&h).is_object());
    assert_eq!(handoff::parse_outcome(raw), h.outcome);
    h
}

// ---------------------------------------------------------------------------------------
// Generators.

/// Any text: Unicode strings, bytes read the way a file with bad UTF-8 is read, and JSON
/// tokens in any order (so the reader sees near-JSON, not just noise).
fn any_text() -> impl Strategy<Value = String> {
    let tokens = prop::sample::select(vec![
        "{",
        "}",
        "[",
        "]",
        ":",
        ",",
        "\"",
        "\"id\"",
        "\"statuses\"",
        "\"transitions\"",
        "\"step\"",
        "\"kind\"",
        "\"backend\"",
        "\"outcomes\"",
        "\"a\"",
        "1",
        "-0",
        "1e999",
        "18446744073709551616",
        "true",
        "null",
        " ",
        "\n",
        "\r\n",
        "\\",
        "\\u",
        "\\ud800",
        "\u{feff}",
        "é",
        "\u{0}",
        "//",
        "/*",
    ]);
    prop_oneof![
        any::<String>(),
        prop::collection::vec(any::<u8>(), 0..200)
            .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        prop::collection::vec(tokens, 0..60).prop_map(|t| t.concat()),
    ]
}

/// Any JSON value, nested up to eight levels, with the numbers and strings that break
/// naive code.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        Just(Value::from(u64::MAX)),
        Just(Value::from(u64::from(u32::MAX) + 1)),
        any::<f64>().prop_map(Value::from),
        Just(Value::from(1e308)),
        weird_str().prop_map(Value::String),
    ];
    leaf.prop_recursive(8, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((weird_str(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// Strings people and generators get wrong: empty, blank, Unicode, control characters,
/// JSON-pointer specials, placeholders, very long.
fn weird_str() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just(" ".into()),
        Just("*".into()),
        Just("a/b~c".into()),
        Just("{{message}}".into()),
        Just("{{ title }} {{nope}} {{".into()),
        Just("x".repeat(5000)),
        "\\PC{0,12}",
        any::<String>(),
    ]
}

const IDS: &[&str] = &[
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
fn status_id() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => prop::sample::select(IDS).prop_map(String::from),
        1 => Just("*".into()),
        1 => weird_str(),
    ]
}

/// A value at a key: usually of the right shape, sometimes anything at all.
fn or_any(right: impl Strategy<Value = Value>) -> impl Strategy<Value = Value> {
    prop_oneof![5 => right, 1 => any_json()]
}

fn duration() -> impl Strategy<Value = Value> {
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

fn big_number() -> impl Strategy<Value = Value> {
    prop_oneof![
        (0u64..10).prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
    ]
}

/// An object from optional members: each present or not, with extra unknown keys.
fn object(members: Vec<BoxedStrategy<Option<(String, Value)>>>) -> BoxedStrategy<Value> {
    let extra = prop::collection::vec((weird_str(), any_json()), 0..2);
    (members, extra)
        .prop_map(|(members, extra)| {
            let mut obj: Map<String, Value> = members.into_iter().flatten().collect();
            obj.extend(extra.into_iter().take(1));
            Value::Object(obj)
        })
        .boxed()
}

fn member(
    key: &'static str,
    value: impl Strategy<Value = Value> + 'static,
) -> BoxedStrategy<Option<(String, Value)>> {
    prop::option::weighted(0.7, value.prop_map(move |v| (key.to_string(), v))).boxed()
}

fn step() -> impl Strategy<Value = Value> {
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

fn status() -> impl Strategy<Value = Value> {
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

fn trigger_name() -> impl Strategy<Value = String> {
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
fn singles(names: Vec<&'static str>, value: BoxedStrategy<Value>) -> impl Strategy<Value = Value> {
    let entry = prop_oneof![
        4 => (prop::sample::select(names), value)
            .prop_map(|(k, v)| Value::Object(Map::from_iter([(k.to_string(), v)]))),
        1 => any_json(),
    ];
    or_any(prop::collection::vec(entry, 0..4).prop_map(Value::Array))
}

fn transition() -> impl Strategy<Value = Value> {
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
fn pipeline_doc() -> impl Strategy<Value = Value> {
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
fn mostly_valid_pipeline() -> impl Strategy<Value = Value> {
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

/// JSON text of a value, compact or pretty.
fn render(v: &Value, pretty: bool) -> String {
    if pretty {
        serde_json::to_string_pretty(v)
    } else {
        serde_json::to_string(v)
    }
    .expect("a Value serialises")
}

fn profile_doc() -> impl Strategy<Value = Value> {
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
                prop::sample::select(vec!["text", "claude-stream-json", "codex-json", "xml"])
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
fn mostly_valid_profile() -> impl Strategy<Value = Value> {
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

/// One line of an agent's Markdown answer, often a near-miss of something that matters.
fn answer_line() -> impl Strategy<Value = String> {
    let name = prop::sample::select(vec![
        "What Was Done",
        "what-was done:",
        "Decisions_Made",
        "OPEN QUESTIONS",
        "Next Agent Context",
        "NextAgentContext",
        "Outcome",
        "Summary",
        "",
    ]);
    let heading = (
        0usize..9,
        0usize..5,
        prop::sample::select(vec!["", " ", "\t"]),
        name,
    )
        .prop_map(|(hashes, indent, gap, name)| {
            format!("{}{}{gap}{name}", " ".repeat(indent), "#".repeat(hashes))
        });
    let fence = (
        prop::sample::select(vec!['`', '~']),
        0usize..6,
        "[a-z]{0,4}",
    )
        .prop_map(|(c, n, lang)| format!("{}{lang}", c.to_string().repeat(n)));
    let outcome = (
        prop::sample::select(vec![
            "OUTCOME:",
            "**Outcome:**",
            "outcome :",
            "- ",
            "Outcome",
        ]),
        weird_str(),
    )
        .prop_map(|(key, value)| format!("{key} {value}"));
    prop_oneof![
        3 => heading,
        2 => fence,
        2 => outcome,
        3 => "[a-zA-Z0-9 .,*`-]{0,30}",
        2 => weird_str(),
        1 => Just(String::new()),
    ]
}

fn answer() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(answer_line(), 0..24),
        prop::sample::select(vec!["\n", "\r\n", "\r"]),
    )
        .prop_map(|(lines, end)| lines.join(end))
}

/// A line of test output, often a summary with extreme numbers.
fn test_output_line() -> impl Strategy<Value = String> {
    let n = || prop_oneof![0u64..20, any::<u64>()].prop_map(|n| n.to_string());
    let big = || {
        prop_oneof![
            n(),
            Just("18446744073709551616".to_string()),
            Just("-1".to_string())
        ]
    };
    prop_oneof![
        (big(), big(), big()).prop_map(|(p, f, i)| format!(
            "test result: ok. {p} passed; {f} failed; {i} ignored; 0 measured; 0 filtered out; finished in 0.01s"
        )),
        (big(), big()).prop_map(|(p, f)| format!(
            "Summary [   0.5s] {p} tests run: {p} passed (2 slow), {f} failed, 1 timed out, 2 skipped"
        )),
        (big(), big()).prop_map(|(p, f)| format!("Tests:       {f} failed, 2 skipped, {p} passed, 8 total")),
        (big(), big()).prop_map(|(p, f)| format!("Tests  {p} passed | {f} failed | 2 skipped ({p})")),
        (big(), big()).prop_map(|(p, f)| format!("==== {p} passed, {f} failed in 0.12s ====")),
        big().prop_map(|p| format!("ℹ pass {p}")),
        big().prop_map(|p| format!("# fail {p}")),
        (big(), big()).prop_map(|(p, f)| format!("tests: {p} passed, {f} failed.")),
        prop::sample::select(vec![
            "--- PASS: TestX (0.00s)",
            "--- FAIL: TestX (0.00s)",
            "    --- SKIP: TestX/sub (0.00s)",
            "ok  \tpkg\t0.01s",
            "FAIL\tpkg\t0.01s",
            "ok\t\t",
            "\u{1b}[32mtest result:\u{1b}[0m ok. 1 passed; 0 failed",
            "\u{1b}[",
            "\u{1b}]8;;",
            "10%\r50%\r100% 3 passed, 0 failed",
            "Summary [",
            "Tests (",
            " in s",
        ])
        .prop_map(String::from),
        weird_str(),
    ]
}

// ---------------------------------------------------------------------------------------
// The properties.

proptest! {
    #![proptest_config(config())]

    #[test]
    fn pipeline_loader_survives_any_text(text in any_text()) {
        check_pipeline(&text, None);
    }

    #[test]
    fn pipeline_loader_survives_pipeline_shaped_documents(
        doc in pipeline_doc(),
        pretty in any::<bool>(),
        check_agents in any::<bool>(),
    ) {
        let agents: BTreeSet<String> = ["planner".to_string(), "coder".to_string()].into();
        check_pipeline(&render(&doc, pretty), check_agents.then_some(&agents));
    }

    #[test]
    fn loaded_pipelines_round_trip_and_decide(doc in mostly_valid_pipeline(), pretty in any::<bool>()) {
        check_pipeline(&render(&doc, pretty), None);
    }

    #[test]
    fn pipeline_loader_survives_truncated_documents(doc in pipeline_doc(), cut in any::<prop::sample::Index>()) {
        // A file saved half-way: every prefix is either JSON or a located JSON error.
        let text = render(&doc, true);
        let mut at = cut.index(text.len() + 1);
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        check_pipeline(&text[..at], None);
    }

    #[test]
    fn triggers_parse_or_refuse_and_round_trip(text in prop_oneof![trigger_name(), any::<String>()]) {
        if let Some(t) = Trigger::parse(&text) {
            prop_assert_eq!(Trigger::parse(&t.to_string()), Some(t));
        }
    }

    #[test]
    fn profile_loader_survives_any_text(text in any_text()) {
        check_profile(&text);
    }

    #[test]
    fn profile_loader_survives_profile_shaped_documents(
        doc in prop_oneof![profile_doc(), mostly_valid_profile()],
        pretty in any::<bool>(),
    ) {
        check_profile(&render(&doc, pretty));
    }

    #[test]
    fn handoff_extractor_survives_any_text(raw in any_text()) {
        check_handoff(&raw);
    }

    #[test]
    fn handoff_extractor_survives_markdown_shaped_answers(raw in answer()) {
        check_handoff(&raw);
    }

    #[test]
    fn sections_come_back_trimmed_under_their_headings(
        bodies in prop::collection::vec("[a-zA-Z0-9][a-zA-Z0-9 .,]{0,30}", 4),
        outcome in "[a-zA-Z][a-zA-Z -]{0,12}",
    ) {
        let raw = format!(
            "Preamble.\n## What Was Done\n{}\n## Decisions Made\n{}\n\n## Open Questions\n  {}  \n## Next Agent Context\n{}\n\nOUTCOME: {outcome}\n",
            bodies[0], bodies[1], bodies[2], bodies[3]
        );
        let h = check_handoff(&raw);
        let f = &h.fields;
        let got = [&f.what_was_done, &f.decisions_made, &f.open_questions, &f.next_agent_context];
        for (got, body) in got.into_iter().zip(&bodies) {
            prop_assert_eq!(got.as_deref(), Some(body.trim()));
        }
        prop_assert_eq!(h.outcome, Some(normalize_outcome(&outcome)).filter(|o| !o.is_empty()));
    }

    #[test]
    fn outcome_names_normalise_once(text in prop_oneof![any::<String>(), "[ a-zA-Z_*`.-]{0,20}"]) {
        let name = normalize_outcome(&text);
        prop_assert_eq!(normalize_outcome(&name), name.clone());
        prop_assert!(!name.chars().any(|c| c.is_whitespace() || c == '-'), "{name:?}");
        prop_assert!(!name.starts_with('_') && !name.ends_with('_'), "{name:?}");
        if text.is_ascii() {
            prop_assert_eq!(normalize_outcome(&text.to_ascii_uppercase()), name);
        }
    }

    #[test]
    fn test_count_scanner_survives_any_output(
        lines in prop::collection::vec(prop_oneof![test_output_line(), any_text()], 0..40),
    ) {
        let mut scanner = TestScanner::default();
        for line in &lines {
            scanner.feed(line);
        }
        let _ = scanner.counts();
    }
}

#[test]
fn test_count_scanner_adds_up_summaries_without_overflowing() {
    let mut scanner = TestScanner::default();
    let max = u64::MAX;
    scanner.feed(&format!(
        "test result: ok. {max} passed; {max} failed; 0 ignored"
    ));
    scanner.feed("test result: ok. 5 passed; 1 failed; 2 ignored");
    let c = scanner.counts().expect("summaries were seen");
    assert_eq!((c.passed, c.failed, c.skipped), (max, max, 2));
}

// ---------------------------------------------------------------------------------------
// Regressions found by the properties above.

/// serde_json counts columns in bytes; a file with non-ASCII text before the error was
/// placed past the end of its line.
#[test]
fn json_errors_count_columns_in_characters() {
    let text = "{\"statuses\": [\n  {\"id\": \"🌀\", \"kind\": }\n]}";
    let (_, diags) = parse_pipeline("p.json", text, None);
    assert_eq!(
        (diags[0].line, diags[0].column),
        (Some(2), Some(23)),
        "{}",
        diags[0]
    );
    let (_, diags) = parse_profile("x.json", "{\"id\": \"é\" \"backend\": 1}");
    assert_eq!(
        (diags[0].line, diags[0].column),
        (Some(1), Some(12)),
        "{}",
        diags[0]
    );
}

/// An empty profile file was placed at column 0.
#[test]
fn an_empty_profile_is_placed_at_column_one() {
    for text in ["", "{\"id\": \"x\",\n"] {
        let (_, diags) = parse_profile("x.json", text);
        assert!(diags[0].column.is_some_and(|c| c >= 1), "{}", diags[0]);
        assert_inside(text, &diags[0]);
    }
}

/// A task keeps a snapshot of its pipeline as JSON; serde_json's default float reader can
/// be one unit in the last place off, so a budget or a trigger's number changed on the way
/// back from the store.
#[test]
fn pipeline_snapshots_keep_their_numbers_exactly() {
    let text = r#"{"id": "p", "statuses": [{"id": "todo", "kind": "queue"}, {"id": "done", "kind": "done"}],
        "transitions": [{"from": "todo", "to": "done", "on": "start", "guards": [{"budget": 5.561776205215212e180}]}],
        "triggers": [{"n": 5.561776205215212e180}]}"#;
    let pipeline = check_pipeline(text, None).expect("loads");
    assert_eq!(
        pipeline.triggers[0]["n"].as_f64(),
        Some(5.561776205215212e180)
    );
}
