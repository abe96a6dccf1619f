//! The Open Questions of an agent's handoff, one per list item (or per line when the
//! section is not a list), so that each can be answered on its own. Pure.

/// The questions in an `Open Questions` section. A list item's continuation lines belong to
/// it; an empty section, or one that only says there are none, has no questions.
pub fn split(section: &str) -> Vec<String> {
    let lines: Vec<&str> = section
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect();
    let listed = lines.iter().any(|l| item(l).is_some());
    let mut out: Vec<String> = Vec::new();
    for line in lines {
        match item(line) {
            Some(text) => out.push(text.to_string()),
            None if listed && !out.is_empty() => {
                let last = out.last_mut().expect("not empty");
                last.push(' ');
                last.push_str(line.trim());
            }
            None => out.push(line.trim().to_string()),
        }
    }
    out.retain(|q| !none(q));
    out
}

/// The text of a list item (`- x`, `* x`, `+ x`, `1. x`, `1) x`), else None.
fn item(line: &str) -> Option<&str> {
    let t = line.trim_start();
    if let Some(rest) = t
        .strip_prefix("- ")
        .or_else(|| t.strip_prefix("* "))
        .or_else(|| t.strip_prefix("+ "))
    {
        return Some(rest.trim());
    }
    let digits = t.chars().take_while(char::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let rest = &t[digits..];
    rest.strip_prefix(". ")
        .or_else(|| rest.strip_prefix(") "))
        .map(str::trim)
}

/// True for an item that says there is nothing to ask.
fn none(q: &str) -> bool {
    let q: String = q
        .chars()
        .filter(|c| c.is_alphanumeric() || c.is_whitespace())
        .collect::<String>()
        .to_lowercase();
    matches!(
        q.trim(),
        "" | "none" | "n a" | "na" | "no" | "nothing" | "no open questions" | "none so far"
    )
}

/// Questions and answers as the agent is given them. Questions left unanswered (an empty
/// answer, or fewer answers than questions) say so.
pub fn pairs(questions: &[String], answers: &[String]) -> String {
    let mut out = String::from("## Answers to your open questions\n");
    let n = questions.len().max(answers.len());
    for i in 0..n {
        let q = questions
            .get(i)
            .map(String::as_str)
            .unwrap_or("(no question)");
        let a = answers
            .get(i)
            .map(|a| a.trim())
            .filter(|a| !a.chars().all(|c| c.is_whitespace() || c.is_control()))
            .unwrap_or("(no answer given)");
        out.push_str(&format!("\nQ{}: {q}\nA{}: {a}\n", i + 1, i + 1));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_items_with_their_continuations_are_questions() {
        let s = "- Which database?\n  Postgres or SQLite.\n* Keep the old API?\n1. Tabs or spaces?\n2) Deadline?";
        assert_eq!(
            split(s),
            [
                "Which database? Postgres or SQLite.",
                "Keep the old API?",
                "Tabs or spaces?",
                "Deadline?"
            ]
        );
    }

    #[test]
    fn plain_lines_are_questions_and_none_is_nothing() {
        assert_eq!(
            split("Which port?\nWhich user?\n"),
            ["Which port?", "Which user?"]
        );
        for empty in ["", "None.", "- None", "N/A", "  \n"] {
            assert!(split(empty).is_empty(), "{empty:?}");
        }
    }

    #[test]
    fn pairs_name_each_question_and_a_missing_answer() {
        let q = vec!["Port?".to_string(), "User?".to_string()];
        let p = pairs(&q, &["8080".to_string()]);
        assert!(p.contains("Q1: Port?\nA1: 8080\n"), "{p}");
        assert!(p.contains("Q2: User?\nA2: (no answer given)"), "{p}");
    }
}
