//! The `pr` hook's options and the pull request's title and body, built from the task:
//! pure functions, so the shapes are tested without a forge.

use crate::handoff::HandoffFields;
use serde_json::Value;

/// `{"draft": true, "base": "main", "labels": [...], "reviewers": [...]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrOptions {
    /// Open it as a draft.
    pub draft: bool,
    /// The branch it goes into (default: the task's base branch).
    pub base: Option<String>,
    /// Labels to add.
    pub labels: Vec<String>,
    /// User names asked to review.
    pub reviewers: Vec<String>,
}

impl PrOptions {
    /// Reads the hook's value; a sentence saying what is wrong otherwise.
    pub fn parse(v: &Value) -> Result<Self, String> {
        let obj = match v {
            Value::Null => return Ok(Self::default()),
            Value::Object(o) => o,
            other => {
                return Err(format!(
                    "takes an object like {{\"draft\": true}}, not {other}"
                ));
            }
        };
        let mut out = Self::default();
        for (k, v) in obj {
            match k.as_str() {
                "draft" => {
                    out.draft = v
                        .as_bool()
                        .ok_or_else(|| format!("`draft` takes true or false, not {v}"))?;
                }
                "base" => {
                    out.base = Some(
                        v.as_str()
                            .filter(|s| !s.trim().is_empty())
                            .ok_or_else(|| format!("`base` takes a branch name, not {v}"))?
                            .to_string(),
                    );
                }
                "labels" | "reviewers" => {
                    let list = v
                        .as_array()
                        .and_then(|l| {
                            l.iter()
                                .map(|x| x.as_str().map(String::from))
                                .collect::<Option<Vec<_>>>()
                        })
                        .ok_or_else(|| format!("`{k}` takes a list of names, not {v}"))?;
                    if k == "labels" {
                        out.labels = list;
                    } else {
                        out.reviewers = list;
                    }
                }
                other if other.starts_with('_') || other.starts_with('$') => {}
                other => {
                    return Err(format!(
                        "unknown option `{other}` (expected draft, base, labels or reviewers)"
                    ));
                }
            }
        }
        Ok(out)
    }
}

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
