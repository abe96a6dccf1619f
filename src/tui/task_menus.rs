//! Layers that fix a task up from the board: a menu of statuses (breakpoint `b`, re-run
//! `f`) and the edit form (`e`).

use super::event::Effect;
use super::intent::Intent;
use super::keymap::{BINDINGS, Ctx, Hint, lookup};
use super::modal::{Outcome, Target};
use crate::engine::Action as EngineAction;
use crate::pipeline::{Pipeline, StatusKind};
use crossterm::event::{KeyCode, KeyEvent};
use ratatui_textarea::TextArea;

/// A list of engine requests about one task; enter sends the chosen one.
#[derive(Debug)]
pub struct PickMenu {
    pub title: String,
    pub target: Target,
    pub options: Vec<(String, EngineAction)>,
    pub cursor: usize,
}

impl PickMenu {
    /// `b`: pause before one of the pipeline's step statuses, or clear the breakpoint.
    pub fn breakpoint(target: Target, pipeline: &Pipeline, current: Option<&str>) -> Self {
        let mut options = Vec::new();
        if let Some(c) = current {
            options.push((
                format!("clear the breakpoint before {c} (runs it if paused there)"),
                EngineAction::Continue,
            ));
        }
        for s in pipeline
            .statuses
            .iter()
            .filter(|s| s.kind == StatusKind::Step)
        {
            let mark = if current == Some(s.id.as_str()) {
                " ●"
            } else {
                ""
            };
            options.push((
                format!("pause before {}{mark}", s.id),
                EngineAction::Break {
                    status: s.id.clone(),
                },
            ));
        }
        Self {
            title: format!("Breakpoint for #{}", target.task_id),
            target,
            options,
            cursor: 0,
        }
    }

    /// `f`: re-run a finished task from one of its pipeline's statuses.
    pub fn rerun(target: Target, pipeline: &Pipeline) -> Self {
        let options = pipeline
            .statuses
            .iter()
            .filter(|s| !s.kind.is_terminal())
            .map(|s| {
                (
                    format!("re-run from {}", s.id),
                    EngineAction::Rerun {
                        from: s.id.clone(),
                        brk: None,
                    },
                )
            })
            .collect();
        Self {
            title: format!("Re-run #{} from…", target.task_id),
            target,
            options,
            cursor: 0,
        }
    }

    pub(super) fn key(&mut self, key: KeyEvent) -> Outcome {
        match lookup(BINDINGS, &[Ctx::Popup], &key) {
            Some(Intent::Back | Intent::No) => Outcome::Close,
            Some(Intent::Up) => {
                self.cursor = self.cursor.saturating_sub(1);
                Outcome::Stay
            }
            Some(Intent::Down) => {
                self.cursor = (self.cursor + 1).min(self.options.len().saturating_sub(1));
                Outcome::Stay
            }
            Some(Intent::Open) => match self.options.get(self.cursor) {
                Some((_, action)) => {
                    Outcome::Done(Effect::Send(self.target.request(action.clone())))
                }
                None => Outcome::Close,
            },
            _ => Outcome::Stay,
        }
    }
}

/// `e`: the title and prompt of a task that is not running.
#[derive(Debug)]
pub struct EditForm {
    pub target: Target,
    pub title: TextArea<'static>,
    pub prompt: TextArea<'static>,
    /// The prompt field has the cursor (else the title).
    pub on_prompt: bool,
    pub error: Option<String>,
    /// `esc` with the text changed: asking before the changes are thrown away.
    pub discard: super::discard::Discard,
    original: (String, String),
}

impl EditForm {
    /// A form holding the task's current text (control sequences dropped).
    pub fn new(target: Target, prompt: &str) -> Self {
        let (title_text, prompt_text) = (
            crate::ansi::strip(&target.title).replace(['\n', '\r'], " "),
            crate::ansi::strip(prompt).into_owned(),
        );
        let mut title = TextArea::from([title_text.clone()]);
        title.move_cursor(ratatui_textarea::CursorMove::End);
        let prompt = TextArea::from(prompt_text.lines().map(str::to_string));
        Self {
            target,
            title,
            prompt,
            on_prompt: false,
            error: None,
            discard: Default::default(),
            original: (title_text, prompt_text),
        }
    }

    /// The title and prompt as they would be saved.
    fn text(&self) -> (String, String) {
        (
            self.title.lines().join(" ").trim().to_string(),
            self.prompt.lines().join("\n").trim_end().to_string(),
        )
    }

    /// True when the title or prompt differs from what the form opened with.
    fn changed(&self) -> bool {
        let (title, prompt) = self.text();
        // As the prompt field holds it: its lines joined with `\n`.
        let opened = self.original.1.lines().collect::<Vec<_>>().join("\n");
        title != self.original.0.trim() || prompt != opened.trim_end()
    }

    pub(super) fn key(&mut self, key: KeyEvent) -> Outcome {
        if let Some(out) = self.discard.answer(&key) {
            return out;
        }
        match lookup(BINDINGS, &[Ctx::Form], &key) {
            Some(Intent::Back) => self.discard.esc(self.changed()),
            Some(Intent::NextField | Intent::PrevField) => {
                self.on_prompt = !self.on_prompt;
                Outcome::Stay
            }
            Some(Intent::Submit) => self.submit(),
            _ if !self.on_prompt && key.code == KeyCode::Enter => {
                self.on_prompt = true;
                Outcome::Stay
            }
            _ => {
                if self.on_prompt {
                    self.prompt.input(key);
                } else {
                    self.title.input(key);
                }
                self.error = None;
                Outcome::Stay
            }
        }
    }

    fn submit(&mut self) -> Outcome {
        let (title, prompt) = self.text();
        // The engine's rule, checked here too so that what was typed stays in the form.
        if let Some(problem) = crate::engine::actions::title_problem(&title) {
            self.error = Some(problem);
            self.on_prompt = false;
            return Outcome::Stay;
        }
        let changed_title = (title != self.original.0).then_some(title);
        let changed_prompt = (prompt != self.original.1.trim_end()).then_some(prompt);
        if changed_title.is_none() && changed_prompt.is_none() {
            return Outcome::Close;
        }
        Outcome::Done(Effect::Send(self.target.request(EngineAction::Edit {
            title: changed_title,
            prompt: changed_prompt,
        })))
    }
}

impl super::app::App {
    /// Opens the layer for `b`, `f` or `e` about `target`, or says why it cannot.
    pub(super) fn fixup_layer(&mut self, action: Intent, target: Target) {
        let card = self.board.selected_card().cloned();
        let pipeline = card.as_ref().and_then(|c| {
            self.board
                .pipelines
                .iter()
                .find(|p| p.id == c.pipeline_id)
                .cloned()
        });
        let Some(pipeline) = pipeline else {
            self.say("its pipeline is not loaded", true);
            return;
        };
        let detail = self.detail.as_ref().filter(|d| d.task.id == target.task_id);
        let finished = card.is_some_and(|c| {
            pipeline
                .status(&c.status)
                .is_some_and(|s| s.kind.is_terminal())
        });
        let layer = match action {
            Intent::Breakpoint if finished => {
                return self.say("it has finished — f re-runs it from a status", true);
            }
            Intent::Breakpoint => {
                let current = detail.and_then(|d| d.task.breakpoint.clone());
                PickMenu::breakpoint(target, &pipeline, current.as_deref()).into_modal()
            }
            Intent::Rerun if !finished => {
                return self.say(
                    "only a finished, failed or cancelled task can be re-run",
                    true,
                );
            }
            Intent::Rerun => PickMenu::rerun(target, &pipeline).into_modal(),
            Intent::Edit => match detail {
                Some(d) if d.task.state == crate::store::TaskState::Running => {
                    return self.say("its step is running; edit it once the step ends", true);
                }
                Some(d) => {
                    let prompt = d.task.prompt.clone();
                    super::modal::Modal::Edit(Box::new(EditForm::new(target, &prompt)))
                }
                None => return self.say("loading the task — try again", true),
            },
            _ => return,
        };
        self.modals.push(layer);
    }
}

impl PickMenu {
    fn into_modal(self) -> super::modal::Modal {
        super::modal::Modal::Pick(Box::new(self))
    }
}

/// The board's key bar: the decisions about an interrupted or paused selected task, else
/// the usual keys.
pub fn board_bar(app: &super::app::App) -> super::keymap::Bar {
    use super::keymap::Bar;
    let Some(card) = app.board.selected_card() else {
        return Bar::Board;
    };
    match card.state {
        crate::store::TaskState::Interrupted => return Bar::Interrupted,
        crate::store::TaskState::Done
        | crate::store::TaskState::Failed
        | crate::store::TaskState::Cancelled => return Bar::Finished,
        _ => {}
    }
    let paused = app
        .detail
        .as_ref()
        .is_some_and(|d| d.task.id == card.id && paused(&d.task));
    if paused {
        Bar::Paused
    } else if app.board.needs_approval(card) {
        Bar::Gate
    } else {
        Bar::Board
    }
}

/// True when the task waits at its breakpoint, before its status's step.
pub fn paused(task: &crate::store::Task) -> bool {
    task.state == crate::store::TaskState::Waiting
        && task.breakpoint.as_deref() == Some(task.status.as_str())
}

const fn hint(actions: &'static [Intent], label: &'static str, rank: u8) -> Hint {
    Hint {
        actions,
        label,
        rank,
    }
}

/// The board while the selected task was interrupted: what can be decided about it.
pub const INTERRUPTED_HINTS: &[Hint] = &[
    hint(&[Intent::Resume], "resume", 4),
    hint(&[Intent::Retry], "retry from scratch", 3),
    hint(&[Intent::Dismiss], "dismiss", 3),
    hint(&[Intent::Open], "open", 2),
    hint(&[Intent::Diff], "diff", 1),
    hint(&[Intent::Help], "help", 2),
    hint(&[Intent::Quit], "quit", 2),
];

/// The board while the selected task waits at a gate for a person: what to press.
pub const GATE_HINTS: &[Hint] = &[
    hint(&[Intent::Diff], "see the diff", 3),
    hint(&[Intent::Approve], "approve", 4),
    hint(&[Intent::Reject], "reject with a note", 4),
    hint(&[Intent::Shell], "shell", 1),
    hint(&[Intent::Open], "open", 2),
    hint(&[Intent::ToggleCollapse], "expand", 3),
    hint(&[Intent::Help], "help", 3),
    hint(&[Intent::Quit], "quit", 3),
];

/// The board while the selected task has finished: nothing to start or approve.
pub const FINISHED_HINTS: &[Hint] = &[
    hint(&[Intent::Open], "open", 3),
    hint(&[Intent::Rerun], "re-run from", 3),
    hint(&[Intent::Retry], "retry", 2),
    hint(&[Intent::Archive], "archive", 2),
    hint(&[Intent::Diff], "diff", 1),
    hint(&[Intent::Graph], "graph", 1),
    hint(&[Intent::Help], "help", 4),
    hint(&[Intent::Quit], "quit", 4),
];

/// The board while the selected task waits at its breakpoint.
pub const PAUSED_HINTS: &[Hint] = &[
    hint(&[Intent::Continue], "continue", 4),
    hint(&[Intent::Breakpoint], "breakpoint", 3),
    hint(&[Intent::Open], "open", 3),
    hint(&[Intent::Diff], "diff", 2),
    hint(&[Intent::Abort], "abort", 1),
    hint(&[Intent::Help], "help", 2),
    hint(&[Intent::Quit], "quit", 2),
];
