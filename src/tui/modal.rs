//! The layers drawn over the board: forms, menus, confirmations, help, the diff and the
//! full-screen log. They live on a stack in `App`; the top one consumes keys and `Esc`
//! closes it.

use super::event::{Diff, Effect, NewTask};
use super::intent::Intent;
use super::keymap::{BINDINGS, Ctx, lookup};
use crate::engine::{Action as EngineAction, Request};
use crate::pipeline::{MoveOption, Pipeline};
use crossterm::event::KeyEvent;
use ratatui_textarea::TextArea;

/// One layer of the stack.
#[derive(Debug)]
pub enum Modal {
    Help {
        scroll: u16,
    },
    NewTask(Box<NewTaskForm>),
    /// A note sent with a reject or a move, or a message for the agent.
    Note(Box<NoteForm>),
    /// `I`: one answer per open question of the agent.
    Answer(Box<super::answer_form::AnswerForm>),
    Move(MoveMenu),
    Confirm(Confirm),
    Diff(DiffView),
    FullLog,
    Input(LineInput),
    /// `b` breakpoint / `f` re-run: a menu of statuses.
    Pick(Box<super::task_menus::PickMenu>),
    /// `e`: edit the title and prompt.
    Edit(Box<super::task_menus::EditForm>),
    /// `g`: the task's pipeline as a graph.
    Graph(super::graph_view::GraphView),
    /// `p`: the agent playground.
    Playground(Box<super::playground::PlaygroundView>),
}

/// What a key did to the top layer.
#[derive(Debug)]
pub enum Outcome {
    /// The layer stays (it may have changed).
    Stay,
    /// The layer stays; say why the key did nothing (in the status line).
    Say(String),
    /// Close the layer and open this one in its place.
    Replace(Modal),
    /// Close the layer.
    Close,
    /// Close the layer and do this.
    Done(Effect),
    /// Close the layer and quit.
    Quit,
    /// The key is not for this layer (the app handles it).
    Pass,
}

/// The task a layer acts on, as the user saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub task_id: i64,
    pub status: String,
    pub title: String,
}

impl Target {
    /// A request about this task, valid only while it is still where the user saw it.
    pub fn request(&self, action: EngineAction) -> Request {
        Request {
            task_id: self.task_id,
            action,
            expected_status: Some(self.status.clone()),
            actor: super::person(),
        }
    }
}

/// Fields of the new-task form, in tab order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Title,
    Pipeline,
    Prompt,
    /// The tasks it waits for (`3, 4`).
    After,
    Start,
}

/// `n`: title, multi-line prompt, pipeline picker, start now — in that order, on screen and
/// for Tab.
#[derive(Debug)]
pub struct NewTaskForm {
    pub title: TextArea<'static>,
    pub prompt: TextArea<'static>,
    pub pipelines: Vec<Pipeline>,
    pub pipeline: usize,
    /// Ids of the tasks it waits for, as typed.
    pub after: TextArea<'static>,
    pub start: bool,
    pub field: Field,
    pub error: Option<String>,
    /// Per pipeline: why one of its agents cannot run here, when one cannot.
    pub warned: Vec<Option<String>>,
    /// `esc` with text typed: asking before the draft is thrown away.
    pub discard: super::discard::Discard,
}

impl NewTaskForm {
    /// Marks the pipelines whose agents fail `agents check` (`warned`, one per pipeline):
    /// a task on one of them is not started by default, since its first agent step would
    /// fail at once.
    pub fn with_problems(mut self, warned: Vec<Option<String>>) -> Self {
        self.warned = warned;
        self.start = self.warning().is_none();
        self
    }

    /// Why the chosen pipeline's agents cannot run here, if they cannot.
    pub fn warning(&self) -> Option<&str> {
        self.warned.get(self.pipeline)?.as_deref()
    }

    fn pick(&mut self, pipeline: usize) {
        self.pipeline = pipeline;
        self.start = self.warning().is_none();
        self.error = None;
    }

    /// A blank form on `pipelines`, with `current` preselected.
    pub fn new(pipelines: Vec<Pipeline>, current: Option<&str>) -> Self {
        let pipeline = current
            .and_then(|id| pipelines.iter().position(|p| p.id == id))
            .unwrap_or(0);
        let mut title = TextArea::default();
        title.set_placeholder_text("what should be done");
        let mut prompt = TextArea::default();
        prompt.set_placeholder_text("details for the steps (markdown, several lines)");
        let mut after = TextArea::default();
        after.set_placeholder_text("ids of tasks to finish first, e.g. 3, 4");
        Self {
            title,
            prompt,
            pipelines,
            pipeline,
            after,
            start: true,
            field: Field::Title,
            error: None,
            warned: Vec::new(),
            discard: Default::default(),
        }
    }

    /// True when something was typed into the title, prompt or after field.
    fn typed(&self) -> bool {
        [&self.title, &self.prompt, &self.after]
            .iter()
            .any(|t| t.lines().iter().any(|l| !l.trim().is_empty()))
    }

    fn cycle(&mut self, forward: bool) {
        use Field::*;
        let order = [Title, Prompt, Pipeline, After, Start];
        let i = order.iter().position(|f| *f == self.field).unwrap_or(0) as isize;
        let next = (i + if forward { 1 } else { -1 }).rem_euclid(order.len() as isize);
        self.field = order[next as usize];
    }

    fn key(&mut self, key: KeyEvent) -> Outcome {
        use crossterm::event::KeyCode;
        if let Some(out) = self.discard.answer(&key) {
            return out;
        }
        match lookup(BINDINGS, &[Ctx::Form], &key) {
            Some(Intent::Back) => return self.discard.esc(self.typed()),
            Some(Intent::NextField) => self.cycle(true),
            Some(Intent::PrevField) => self.cycle(false),
            Some(Intent::Submit) => return self.submit(),
            _ => match self.field {
                Field::Title => {
                    // One line: enter moves on instead of breaking the line.
                    if key.code == KeyCode::Enter {
                        self.cycle(true);
                    } else {
                        self.title.input(key);
                        self.error = None;
                    }
                }
                Field::Prompt => {
                    self.prompt.input(key);
                }
                Field::After => {
                    if key.code == KeyCode::Enter {
                        self.cycle(true);
                    } else {
                        self.after.input(key);
                        self.error = None;
                    }
                }
                // Only the arrows change the pipeline: letters typed here (a prompt meant
                // for the field above) must not silently pick another one.
                Field::Pipeline => match key.code {
                    KeyCode::Left => {
                        let n = self.pipelines.len().max(1);
                        self.pick((self.pipeline + n - 1) % n);
                    }
                    KeyCode::Right => {
                        self.pick((self.pipeline + 1) % self.pipelines.len().max(1));
                    }
                    KeyCode::Enter => self.cycle(true),
                    _ => {
                        self.error =
                            Some("←/→ pick the pipeline · tab moves to the next field".into());
                    }
                },
                Field::Start => match key.code {
                    KeyCode::Char(' ') | KeyCode::Char('x') => self.start = !self.start,
                    KeyCode::Enter => return self.submit(),
                    _ => {}
                },
            },
        }
        Outcome::Stay
    }

    fn submit(&mut self) -> Outcome {
        let title = self.title.lines().join(" ").trim().to_string();
        // The engine's rule, checked here too so that what was typed stays in the form.
        if let Some(problem) = crate::engine::actions::title_problem(&title) {
            self.error = Some(problem);
            self.field = Field::Title;
            return Outcome::Stay;
        }
        let Some(pipeline) = self.pipelines.get(self.pipeline).cloned() else {
            self.error = Some("no pipeline to put it on".into());
            return Outcome::Stay;
        };
        let after = match parse_ids(&self.after.lines().join(" ")) {
            Ok(ids) => ids,
            Err(word) => {
                self.error = Some(format!(
                    "`{word}` is not a task id — give ids like 3, 4 (or leave it empty)"
                ));
                self.field = Field::After;
                return Outcome::Stay;
            }
        };
        Outcome::Done(Effect::Create(NewTask {
            pipeline,
            title,
            prompt: self.prompt.lines().join("\n").trim_end().to_string(),
            start: self.start,
            after,
        }))
    }
}

/// Task ids typed as `3, 4`, `3 4` or `#3,#4`; the first word that is not one, if any.
pub fn parse_ids(text: &str) -> Result<Vec<i64>, String> {
    text.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|w| !w.is_empty())
        .map(|w| {
            w.trim_start_matches('#')
                .parse::<i64>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| w.to_string())
        })
        .collect()
}

/// What a note goes with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoteFor {
    /// `r`: reject.
    Reject,
    /// `m` then enter: move to this status.
    Move { to: String },
    /// `i`: a message for the task's agent.
    Say,
}

/// A note for the next step, sent with a rejection or a move (multi-line, optional).
#[derive(Debug)]
pub struct NoteForm {
    pub target: Target,
    pub purpose: NoteFor,
    pub note: TextArea<'static>,
}

impl NoteForm {
    /// A blank note about `target`.
    pub fn new(target: Target, purpose: NoteFor) -> Self {
        let mut note = TextArea::default();
        let hint = match purpose {
            NoteFor::Reject => "what should change (handed to the next step)",
            NoteFor::Move { .. } => {
                "a note for the next step (optional) — ctrl+s moves; enter on an empty note too"
            }
            NoteFor::Say => "what to tell the agent (a running one hears it now)",
        };
        note.set_placeholder_text(hint);
        Self {
            target,
            purpose,
            note,
        }
    }

    fn text(&self) -> Option<String> {
        let text = self.note.lines().join("\n").trim().to_string();
        (!text.is_empty()).then_some(text)
    }

    fn submit(&self) -> Outcome {
        let note = self.text();
        let action = match &self.purpose {
            NoteFor::Say => match note {
                Some(text) => EngineAction::Say { text },
                None => return Outcome::Say("type what to tell the agent first".into()),
            },
            NoteFor::Reject => EngineAction::Reject { note },
            NoteFor::Move { to } => EngineAction::Move {
                to: to.clone(),
                note,
            },
        };
        Outcome::Done(Effect::Send(self.target.request(action)))
    }

    fn key(&mut self, key: KeyEvent) -> Outcome {
        use crossterm::event::KeyCode;
        match lookup(BINDINGS, &[Ctx::Form], &key) {
            Some(Intent::Back) => Outcome::Close,
            Some(Intent::Submit) => self.submit(),
            // A move is quick: enter on an empty note moves at once.
            _ if key.code == KeyCode::Enter
                && matches!(self.purpose, NoteFor::Move { .. })
                && self.text().is_none() =>
            {
                self.submit()
            }
            _ => {
                self.note.input(key);
                Outcome::Stay
            }
        }
    }
}

/// `m`: where the task can go, and where it cannot and why.
#[derive(Debug)]
pub struct MoveMenu {
    pub target: Target,
    /// `None` while loading.
    pub options: Option<Result<Vec<MoveOption>, String>>,
    pub cursor: usize,
}

impl MoveMenu {
    fn key(&mut self, key: KeyEvent) -> Outcome {
        let options = match &self.options {
            Some(Ok(o)) => o.as_slice(),
            _ => &[],
        };
        match lookup(BINDINGS, &[Ctx::Popup], &key) {
            Some(Intent::Back | Intent::No) => Outcome::Close,
            Some(Intent::Up) => {
                self.cursor = self.cursor.saturating_sub(1);
                Outcome::Stay
            }
            Some(Intent::Down) => {
                self.cursor = (self.cursor + 1).min(options.len().saturating_sub(1));
                Outcome::Stay
            }
            Some(Intent::Open) => match options.get(self.cursor) {
                Some(o) if o.allowed => Outcome::Replace(Modal::Note(Box::new(NoteForm::new(
                    self.target.clone(),
                    NoteFor::Move { to: o.to.clone() },
                )))),
                Some(o) => Outcome::Say(format!(
                    "cannot move to {}: blocked by {}",
                    o.to,
                    if o.blocked_by.is_empty() {
                        "a guard".to_string()
                    } else {
                        o.blocked_by.join(", ")
                    }
                )),
                None => Outcome::Stay,
            },
            _ => Outcome::Stay,
        }
    }
}

/// A yes/no question.
#[derive(Debug, PartialEq)]
pub enum Confirm {
    /// `x`: abort the task (stops its step).
    Abort(Target),
    /// `d`: give up an interrupted task for good.
    Dismiss(Target),
    /// `q` while steps run in the embedded engine.
    Quit { running: usize },
}

impl Confirm {
    fn key(&mut self, key: KeyEvent) -> Outcome {
        match lookup(BINDINGS, &[Ctx::Popup], &key) {
            Some(Intent::Yes | Intent::Open) => match self {
                Confirm::Abort(t) => {
                    Outcome::Done(Effect::Send(t.request(EngineAction::Abort { note: None })))
                }
                Confirm::Dismiss(t) => Outcome::Done(Effect::Send(
                    t.request(EngineAction::Dismiss { note: None }),
                )),
                Confirm::Quit { .. } => Outcome::Quit,
            },
            Some(Intent::No | Intent::Back) => Outcome::Close,
            _ => Outcome::Stay,
        }
    }
}

/// `D`: the task's diff, scrollable.
#[derive(Debug)]
pub struct DiffView {
    pub target: Target,
    /// `None` while loading.
    pub result: Option<Result<Diff, String>>,
    pub scroll: u16,
}

impl DiffView {
    fn key(&mut self, key: KeyEvent) -> Outcome {
        use crossterm::event::KeyCode;
        match key.code {
            KeyCode::Esc | KeyCode::Char('q') | KeyCode::Char('D') => Outcome::Close,
            KeyCode::Down | KeyCode::Char('j') => {
                self.scroll = self.scroll.saturating_add(1);
                Outcome::Stay
            }
            KeyCode::Up | KeyCode::Char('k') => {
                self.scroll = self.scroll.saturating_sub(1);
                Outcome::Stay
            }
            KeyCode::PageDown | KeyCode::Char(' ') => {
                self.scroll = self.scroll.saturating_add(20);
                Outcome::Stay
            }
            KeyCode::PageUp => {
                self.scroll = self.scroll.saturating_sub(20);
                Outcome::Stay
            }
            KeyCode::Char('g') => {
                self.scroll = 0;
                Outcome::Stay
            }
            _ => Outcome::Stay,
        }
    }
}

/// What a one-line input is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputFor {
    /// Filter the board's cards (live, as typed).
    Filter,
    /// Search the log.
    Search,
}

/// A one-line prompt at the bottom of the screen.
#[derive(Debug)]
pub struct LineInput {
    pub purpose: InputFor,
    pub text: String,
}

/// What a key did to a line input.
#[derive(Debug, PartialEq)]
pub enum InputOutcome {
    Changed,
    Accept,
    Cancel,
    Ignored,
}

impl LineInput {
    /// Edits the text; enter accepts, esc cancels.
    pub fn key(&mut self, key: KeyEvent) -> InputOutcome {
        use crossterm::event::{KeyCode, KeyModifiers};
        match key.code {
            KeyCode::Esc => InputOutcome::Cancel,
            KeyCode::Enter => InputOutcome::Accept,
            KeyCode::Backspace => {
                self.text.pop();
                InputOutcome::Changed
            }
            KeyCode::Char('u') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                self.text.clear();
                InputOutcome::Changed
            }
            KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => {
                self.text.push(c);
                InputOutcome::Changed
            }
            _ => InputOutcome::Ignored,
        }
    }
}

impl Modal {
    /// Hands a key to this layer. Full-screen log and line inputs answer `Pass`: the app
    /// handles them, since they act on its log and board.
    pub fn key(&mut self, key: KeyEvent) -> Outcome {
        use crossterm::event::KeyCode;
        match self {
            Modal::Help { scroll } => match key.code {
                KeyCode::Down | KeyCode::Char('j') => {
                    *scroll = scroll.saturating_add(1);
                    Outcome::Stay
                }
                KeyCode::Up | KeyCode::Char('k') => {
                    *scroll = scroll.saturating_sub(1);
                    Outcome::Stay
                }
                _ => Outcome::Close,
            },
            Modal::NewTask(f) => f.key(key),
            Modal::Note(f) => f.key(key),
            Modal::Answer(f) => f.key(key),
            Modal::Move(m) => m.key(key),
            Modal::Confirm(c) => c.key(key),
            Modal::Diff(d) => d.key(key),
            Modal::Pick(m) => m.key(key),
            Modal::Edit(f) => f.key(key),
            Modal::Graph(g) => g.key(key),
            Modal::FullLog | Modal::Input(_) | Modal::Playground(_) => Outcome::Pass,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossterm::event::KeyCode;

    /// A pipeline whose agents cannot run here is not started by default: its first agent
    /// step would fail at once, on a tab nobody watches.
    #[test]
    fn a_pipeline_whose_agents_fail_is_not_started_by_default() {
        let catalog = crate::pipeline::load_catalog(None, None);
        let pipelines: Vec<Pipeline> = ["demo", "quick_fix"]
            .iter()
            .map(|id| catalog.get(id).cloned().expect("a built-in pipeline"))
            .collect();
        let warned = vec![
            None,
            Some("agent coder: `claude` is not on PATH".to_string()),
        ];
        let mut form = NewTaskForm::new(pipelines, Some("quick_fix")).with_problems(warned);
        assert!(!form.start);
        assert!(form.warning().is_some_and(|w| w.contains("claude")));
        form.field = Field::Pipeline;
        form.key(KeyEvent::from(KeyCode::Left));
        assert_eq!((form.pipeline, form.start), (0, true));
        form.key(KeyEvent::from(KeyCode::Right));
        assert_eq!((form.pipeline, form.start), (1, false));
    }
}
