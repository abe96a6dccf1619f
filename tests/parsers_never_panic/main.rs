//! Everything a user or an agent writes reaches a parser: pipeline files, agent profiles, an
//! agent's answer, a test runner's output. Whatever the input, each of them returns a value
//! or a located error and never panics.
//!
//! Two kinds of input: arbitrary text (any Unicode, bytes read lossily, JSON-looking token
//! soup), which mostly exercises the JSON and line readers, and generated documents shaped
//! like the real thing (pipelines with plausible ids, kinds, steps, guards and hooks mixed
//! with wrong types, huge numbers, odd durations, Unicode and deep nesting; Markdown answers
//! built from near-miss headings and fences), which reach the checks behind them.

mod checks;
mod gen_json;
mod gen_pipeline;
mod gen_profile;
mod gen_text;

use baton::agents::parse_profile;
use baton::pipeline::{Trigger, normalize_outcome, parse_pipeline};
use baton::testcounts::TestScanner;
use checks::{assert_inside, check_handoff, check_pipeline, check_profile};
use gen_json::{any_text, render};
use gen_pipeline::{mostly_valid_pipeline, pipeline_doc, trigger_name};
use gen_profile::{mostly_valid_profile, profile_doc};
use gen_text::{answer, test_output_line};
use proptest::prelude::*;
use std::collections::BTreeSet;

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

/// A profile that is JSON but not an object, byte-order mark or not, is placed where its
/// value begins (CI found `\u{feff}3` unplaced).
#[test]
fn a_profile_that_is_not_an_object_is_placed_where_it_begins() {
    for (text, at) in [
        ("\u{feff}3", (1, 1)),
        ("\n  [1]", (2, 3)),
        ("\"x\"", (1, 1)),
    ] {
        let (profile, diags) = parse_profile("x.json", text);
        assert!(profile.is_none());
        assert_eq!(diags.len(), 1, "{diags:#?}");
        assert_eq!(
            (diags[0].line, diags[0].column),
            (Some(at.0), Some(at.1)),
            "{text:?}"
        );
        assert!(diags[0].message.contains("one JSON object"), "{}", diags[0]);
    }
}

/// A task keeps a snapshot of its pipeline as JSON; serde_json's default float reader can
/// be one unit in the last place off, so a budget or a trigger's number changed on the way
/// back from the store.
#[test]
fn pipeline_snapshots_keep_their_numbers_exactly() {
    let text = r#"{"id": "p", "statuses": [{"id": "todo", "kind": "queue"}, {"id": "done", "kind": "done"}],
        "transitions": [{"from": "todo", "to": "done", "on": "start", "guards": [{"budget": 5.561776205215212e180}]}],
        "triggers": [{"schedule": "0 3 * * *", "title": "nightly", "_n": 5.561776205215212e180}]}"#;
    let pipeline = check_pipeline(text, None).expect("loads");
    assert_eq!(
        pipeline.triggers[0]["_n"].as_f64(),
        Some(5.561776205215212e180)
    );
}
