//! The one spelling of an agent outcome name.
//!
//! Outcome names meet in three places: a profile's `outcomes` list, a pipeline transition's
//! `outcome:<name>` trigger and the `OUTCOME: <name>` an agent writes. People and models
//! write `needs-info`, `Needs Info` or `**needs_info**.` for the same thing, so all three go
//! through [`normalize_outcome`] before they are compared.

/// Normalises an outcome name: `" **Needs-Info**."` → `needs_info`.
///
/// - lowercase;
/// - everything that is not a letter or digit is cut from both ends (spaces, Markdown `*`
///   and `` ` ``, quotes, a final `.`, stray `_` or `-`);
/// - inside, every run of whitespace, `-` and `_` becomes one `_`;
/// - any other character inside the name (`.`, `/`, …) is kept as written.
///
/// The result is empty when the text names nothing (`""`, `"**"`). Normalising twice gives
/// the same name as normalising once, so a stored name can be normalised again safely.
pub fn normalize_outcome(text: &str) -> String {
    // Lowercase first: lowercasing can add characters (`İ` becomes `i` plus a combining
    // dot), and trimming after it keeps the function idempotent.
    let lower = text.to_lowercase();
    lower
        .trim_matches(|c: char| !c.is_alphanumeric())
        .split(|c: char| c.is_whitespace() || c == '-' || c == '_')
        .filter(|word| !word.is_empty())
        .collect::<Vec<_>>()
        .join("_")
}

#[cfg(test)]
mod tests {
    use super::normalize_outcome;
    use crate::pipeline::Trigger;

    #[test]
    fn outcome_triggers_are_normalised_and_must_name_something() {
        for written in [
            "outcome:needs_info",
            "outcome:needs-info",
            "outcome: Needs Info",
        ] {
            assert_eq!(
                Trigger::parse(written),
                Some(Trigger::Outcome("needs_info".into())),
                "{written}"
            );
        }
        assert_eq!(
            Trigger::Outcome("needs_info".into()).to_string(),
            "outcome:needs_info"
        );
        for nothing in ["outcome:", "outcome: ", "outcome:**", "outcome:-"] {
            assert_eq!(Trigger::parse(nothing), None, "{nothing}");
        }
    }

    #[test]
    fn normalisation_table() {
        let cases = [
            ("success", "success"),
            ("needs_info", "needs_info"),
            ("needs-info", "needs_info"),
            ("Needs Info", "needs_info"),
            ("NEEDS-INFO", "needs_info"),
            ("  needs \t info  ", "needs_info"),
            ("needs - info", "needs_info"),
            ("needs__info", "needs_info"),
            ("**needs-info**.", "needs_info"),
            ("`success`", "success"),
            ("\"failure\"", "failure"),
            ("'failure'.", "failure"),
            ("_private_", "private"),
            ("v1.2", "v1.2"),
            ("ask/human", "ask/human"),
            ("Überprüfung nötig", "überprüfung_nötig"),
            // Lowercase `İ` is `i` plus a combining dot, which is not a letter at the end.
            ("İ", "i"),
            ("", ""),
            ("  ", ""),
            ("**", ""),
            ("-_-", ""),
        ];
        for (input, expected) in cases {
            assert_eq!(normalize_outcome(input), expected, "{input:?}");
            assert_eq!(
                normalize_outcome(expected),
                expected,
                "{expected:?} is already normal"
            );
        }
    }
}
