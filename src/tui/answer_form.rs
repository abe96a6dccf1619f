//! `I`: a form with one answer field per open question of the task's agent; ctrl+s sends
//! the answers and the task goes back to the status that asked.

use super::event::Effect;
use super::intent::Intent;
use super::keymap::{BINDINGS, Ctx, lookup};
use super::modal::{Outcome, Target};
use crate::engine::Action as EngineAction;
use crossterm::event::{KeyCode, KeyEvent};
use ratatui_textarea::TextArea;

/// The questions and the answers typed so far.
#[derive(Debug)]
pub struct AnswerForm {
    pub target: Target,
    pub questions: Vec<String>,
    pub answers: Vec<TextArea<'static>>,
    /// The field being typed in.
    pub field: usize,
}

impl AnswerForm {
    /// An empty answer for each of `questions`.
    pub fn new(target: Target, questions: Vec<String>) -> Self {
        let answers = questions
            .iter()
            .map(|_| {
                let mut a = TextArea::default();
                a.set_placeholder_text("your answer (empty: leave it open)");
                a
            })
            .collect();
        Self {
            target,
            questions,
            answers,
            field: 0,
        }
    }

    /// The answers as typed, one per question.
    pub fn texts(&self) -> Vec<String> {
        self.answers
            .iter()
            .map(|a| a.lines().join("\n").trim().to_string())
            .collect()
    }

    fn submit(&self) -> Outcome {
        let answers = self.texts();
        if answers.iter().all(String::is_empty) {
            return Outcome::Say("type at least one answer first".into());
        }
        Outcome::Done(Effect::Send(
            self.target.request(EngineAction::Answer { answers }),
        ))
    }

    /// Tab / shift+tab move between answers (enter too, to the next); ctrl+s sends.
    pub fn key(&mut self, key: KeyEvent) -> Outcome {
        let n = self.answers.len().max(1);
        match lookup(BINDINGS, &[Ctx::Form], &key) {
            Some(Intent::Back) => Outcome::Close,
            Some(Intent::Submit) => self.submit(),
            Some(Intent::NextField) => {
                self.field = (self.field + 1) % n;
                Outcome::Stay
            }
            Some(Intent::PrevField) => {
                self.field = (self.field + n - 1) % n;
                Outcome::Stay
            }
            _ if key.code == KeyCode::Enter => {
                if self.field + 1 == n {
                    self.submit()
                } else {
                    self.field += 1;
                    Outcome::Stay
                }
            }
            _ => {
                if let Some(a) = self.answers.get_mut(self.field) {
                    a.input(key);
                }
                Outcome::Stay
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form() -> AnswerForm {
        let target = Target {
            task_id: 4,
            status: "todo".into(),
            title: "t".into(),
        };
        AnswerForm::new(target, vec!["Port?".into(), "User?".into()])
    }

    fn typed(f: &mut AnswerForm, s: &str) {
        for c in s.chars() {
            f.key(KeyEvent::from(KeyCode::Char(c)));
        }
    }

    #[test]
    fn each_question_gets_its_answer_and_enter_on_the_last_sends() {
        let mut f = form();
        typed(&mut f, "8080");
        assert!(matches!(
            f.key(KeyEvent::from(KeyCode::Enter)),
            Outcome::Stay
        ));
        typed(&mut f, "root");
        assert_eq!(f.texts(), ["8080", "root"]);
        match f.key(KeyEvent::from(KeyCode::Enter)) {
            Outcome::Done(Effect::Send(req)) => {
                assert_eq!(req.task_id, 4);
                assert_eq!(
                    req.action,
                    EngineAction::Answer {
                        answers: vec!["8080".into(), "root".into()]
                    }
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn no_answer_at_all_is_not_sent() {
        let mut f = form();
        f.field = 1;
        assert!(matches!(
            f.key(KeyEvent::from(KeyCode::Enter)),
            Outcome::Say(_)
        ));
    }
}
