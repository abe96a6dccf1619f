//! `say` and `answer`: talking to a task's agent.

use super::tasks::{act, read_prompt};
use super::{Command, Failure, Outcome};
use crate::engine::Action;
use crate::workspace::Workspace;
use std::io::{BufRead, IsTerminal, Read, Write};

/// Runs `say` or `answer`.
pub fn run(ws: &Workspace, command: Command) -> Outcome {
    match command {
        Command::Say { id, text } => {
            let text = read_prompt(Some(text))?;
            act(ws, id, Action::Say { text })
        }
        Command::Answer { id, json } => {
            let answers = match json {
                Some(j) => answers_from_json(&read_prompt(Some(j))?)?,
                None => {
                    let reader = crate::engine::Reader::open(ws)?;
                    let task = reader.task(id)?;
                    let questions = reader.open_questions(&task)?;
                    ask(id, &questions)?
                }
            };
            act(ws, id, Action::Answer { answers })
        }
        _ => unreachable!("dispatched elsewhere"),
    }
}

/// The answers of `{"answers": ["…", …]}`.
pub fn answers_from_json(text: &str) -> Result<Vec<String>, Failure> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Body {
        answers: Vec<String>,
    }
    serde_json::from_str::<Body>(text)
        .map(|b| b.answers)
        .map_err(|e| {
            Failure::new(format!(
                "--json: {e} — give {{\"answers\": [\"first answer\", \"second answer\"]}}, one string per question in order"
            ))
        })
}

/// Asks each question on the terminal; an empty line leaves one unanswered.
fn ask(id: i64, questions: &[String]) -> Result<Vec<String>, Failure> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        let mut all = String::new();
        stdin
            .lock()
            .read_to_string(&mut all)
            .map_err(|e| Failure::new(format!("reading the answers from stdin failed: {e}")))?;
        // Not a terminal: one answer per line, in order.
        return Ok(all.lines().map(str::to_string).collect());
    }
    let mut out = Vec::new();
    let mut err = std::io::stderr();
    let shown: Vec<String> = if questions.is_empty() {
        vec!["Its agent needs more information but listed no questions. Your answer".into()]
    } else {
        let _ = writeln!(
            err,
            "Task {id}'s agent asks {} question(s); an empty line leaves one unanswered.",
            questions.len()
        );
        questions.to_vec()
    };
    for (i, q) in shown.iter().enumerate() {
        let _ = write!(err, "\n{}. {}\n> ", i + 1, crate::ansi::strip(q));
        let _ = err.flush();
        let mut line = String::new();
        stdin
            .lock()
            .read_line(&mut line)
            .map_err(|e| Failure::new(format!("reading answer {} failed: {e}", i + 1)))?;
        out.push(line.trim_end_matches(['\n', '\r']).to_string());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_come_from_json_or_one_plain_sentence() {
        assert_eq!(
            answers_from_json(r#"{"answers": ["8080", ""]}"#).unwrap(),
            ["8080", ""]
        );
        for bad in [
            r#"["8080"]"#,
            r#"{"answer": ["x"]}"#,
            "{",
            r#"{"answers": [1]}"#,
        ] {
            let e = answers_from_json(bad).unwrap_err().message;
            assert!(e.starts_with("--json: "), "{bad}: {e}");
            assert!(e.contains("one string per question"), "{bad}: {e}");
        }
    }
}
