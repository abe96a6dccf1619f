//! Generators of any text and any JSON, and helpers to build JSON objects from optional
//! members.

use proptest::prelude::*;
use serde_json::{Map, Value};

/// Any text: Unicode strings, bytes read the way a file with bad UTF-8 is read, and JSON
/// tokens in any order (so the reader sees near-JSON, not just noise).
pub fn any_text() -> impl Strategy<Value = String> {
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
pub fn any_json() -> impl Strategy<Value = Value> {
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
pub fn weird_str() -> impl Strategy<Value = String> {
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

/// A value at a key: usually of the right shape, sometimes anything at all.
pub fn or_any(right: impl Strategy<Value = Value>) -> impl Strategy<Value = Value> {
    prop_oneof![5 => right, 1 => any_json()]
}

/// An object from optional members: each present or not, with extra unknown keys.
pub fn object(members: Vec<BoxedStrategy<Option<(String, Value)>>>) -> BoxedStrategy<Value> {
    let extra = prop::collection::vec((weird_str(), any_json()), 0..2);
    (members, extra)
        .prop_map(|(members, extra)| {
            let mut obj: Map<String, Value> = members.into_iter().flatten().collect();
            obj.extend(extra.into_iter().take(1));
            Value::Object(obj)
        })
        .boxed()
}

pub fn member(
    key: &'static str,
    value: impl Strategy<Value = Value> + 'static,
) -> BoxedStrategy<Option<(String, Value)>> {
    prop::option::weighted(0.7, value.prop_map(move |v| (key.to_string(), v))).boxed()
}

/// JSON text of a value, compact or pretty.
pub fn render(v: &Value, pretty: bool) -> String {
    if pretty {
        serde_json::to_string_pretty(v)
    } else {
        serde_json::to_string(v)
    }
    .expect("a Value serialises")
}
