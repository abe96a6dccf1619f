//! The pull request's title and body, built from the task (the `pr` hook's options are
//! the pipeline's): pure functions, so the shapes are tested without a forge.

use crate::handoff::HandoffFields;

pub use crate::pipeline::pr_options::PrOptions;

/// Test counts summed over a run's steps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TestCounts {
    /// Passed.
    pub passed: u64,
    /// Failed.
    pub failed: u64,
    /// Skipped.
    pub skipped: u64,
}

/// The pull request's body: the handoff's What Was Done, Decisions Made and Open
/// Questions, the test counts, and `Closes #N` when the task came from an issue.
pub fn body(
    handoff: Option<&HandoffFields>,
    tests: Option<TestCounts>,
    closes: Option<u64>,
    task_id: i64,
) -> String {
    let mut parts = Vec::new();
    if let Some(h) = handoff {
        for (title, text) in [
            ("What Was Done", &h.what_was_done),
            ("Decisions Made", &h.decisions_made),
            ("Open Questions", &h.open_questions),
        ] {
            if let Some(t) = text.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
                parts.push(format!("## {title}\n\n{t}"));
            }
        }
    }
    if let Some(t) = tests {
        parts.push(format!(
            "## Tests\n\n{} passed, {} failed, {} skipped",
            t.passed, t.failed, t.skipped
        ));
    }
    let mut tail = format!("Opened by baton for task {task_id}.");
    if let Some(n) = closes {
        tail.push_str(&format!("\n\nCloses #{n}"));
    }
    parts.push(tail);
    parts.join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn options_parse_and_refuse_in_one_sentence() {
        let o = PrOptions::parse(
            &json!({"draft": true, "base": "dev", "labels": ["a"], "reviewers": ["r"]}),
        )
        .unwrap();
        assert_eq!(
            o,
            PrOptions {
                draft: true,
                base: Some("dev".into()),
                labels: vec!["a".into()],
                reviewers: vec!["r".into()]
            }
        );
        assert_eq!(PrOptions::parse(&json!({})).unwrap(), PrOptions::default());
        for (v, want) in [
            (json!({"draft": "yes"}), "`draft` takes true or false"),
            (json!({"labels": "a"}), "`labels` takes a list of names"),
            (json!({"title": "x"}), "unknown option `title`"),
            (json!([1]), "takes an object"),
        ] {
            let err = PrOptions::parse(&v).unwrap_err();
            assert!(err.contains(want), "{err}");
        }
    }

    #[test]
    fn the_body_holds_the_handoff_sections_tests_and_closes() {
        let h = HandoffFields {
            what_was_done: Some("Added login.".into()),
            decisions_made: Some("Used argon2.".into()),
            open_questions: None,
            next_agent_context: Some("internal".into()),
        };
        let tests = TestCounts {
            passed: 10,
            failed: 0,
            skipped: 1,
        };
        let b = body(Some(&h), Some(tests), Some(4), 7);
        assert!(
            b.starts_with("## What Was Done\n\nAdded login.\n\n## Decisions Made\n\nUsed argon2."),
            "{b}"
        );
        assert!(
            !b.contains("Open Questions") && !b.contains("internal"),
            "{b}"
        );
        assert!(b.contains("10 passed, 0 failed, 1 skipped"), "{b}");
        assert!(b.ends_with("Closes #4"), "{b}");
        assert!(!body(None, None, None, 7).contains("Closes"));
    }
}
