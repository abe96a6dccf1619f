//! Generators of line-based text: agents' Markdown answers and test runners' output.

use crate::gen_json::weird_str;
use proptest::prelude::*;

/// One line of an agent's Markdown answer, often a near-miss of something that matters.
pub fn answer_line() -> impl Strategy<Value = String> {
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

pub fn answer() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(answer_line(), 0..24),
        prop::sample::select(vec!["\n", "\r\n", "\r"]),
    )
        .prop_map(|(lines, end)| lines.join(end))
}

/// A line of test output, often a summary with extreme numbers.
pub fn test_output_line() -> impl Strategy<Value = String> {
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
