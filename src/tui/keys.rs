//! Key handling: the top layer first, else the keymap for the focused pane.

use super::app::{App, Focus, Mode};
use super::event::Effect;
use super::intent::Intent;
use super::keymap::{BINDINGS, Ctx, FULL_LOG, lookup};
use super::modal::{
    Confirm, DiffView, InputFor, InputOutcome, LineInput, Modal, MoveMenu, NewTaskForm, NoteFor,
    NoteForm, Outcome,
};
use super::ui::layout::{Areas, MIN_H, MIN_W, log_height};
use crate::engine::Action as EngineAction;
use crate::store::TaskState;
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::layout::Rect;

impl App {
    /// Cards that fit in a column at the current size.
    pub fn card_capacity(&self) -> usize {
        Areas::new(
            Rect::new(0, 0, self.size.0, self.size.1),
            self.focus,
            self.engine_banner(),
        )
        .card_capacity()
    }

    /// True while the screen only says it is too small (nothing else is drawn).
    pub fn too_small(&self) -> bool {
        self.size.0 < MIN_W || self.size.1 < MIN_H
    }

    pub(super) fn on_key(&mut self, key: KeyEvent) {
        if key.kind == KeyEventKind::Release {
            return;
        }
        // Esc typed just before a key (fast typing, a slow link, tmux) arrives as Alt+key;
        // no binding uses Alt, so take it as the two keys it was.
        if let KeyCode::Char(_) = key.code
            && key.modifiers.contains(KeyModifiers::ALT)
        {
            self.on_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
            self.on_key(KeyEvent::new(key.code, key.modifiers - KeyModifiers::ALT));
            return;
        }
        // A message stays until the next key, so it can be read.
        self.status = None;
        if self.too_small() {
            self.small_key(key);
            return;
        }
        if let Some(top) = self.modals.last_mut() {
            match top.key(key) {
                Outcome::Stay => {}
                Outcome::Say(text) => self.say(text, true),
                Outcome::Close => {
                    self.modals.pop();
                }
                Outcome::Replace(next) => {
                    self.modals.pop();
                    self.modals.push(next);
                }
                Outcome::Done(effect) => {
                    // A creation keeps its form until the engine answers: a refusal
                    // reopens it with everything typed.
                    if let (Some(Modal::NewTask(form)), Effect::Create(_)) =
                        (self.modals.pop(), &effect)
                    {
                        self.creating = Some(form);
                    }
                    self.effect(effect);
                }
                Outcome::Quit => {
                    self.modals.pop();
                    self.quit = true;
                }
                Outcome::Pass => self.layer_key(key),
            }
            return;
        }
        let ctxs: &[Ctx] = match self.focus {
            Focus::Board => &[Ctx::Board, Ctx::Task, Ctx::Global],
            Focus::Detail => &[Ctx::Log, Ctx::Detail, Ctx::Task, Ctx::Global],
        };
        if let Some(action) = lookup(BINDINGS, ctxs, &key) {
            self.act(action);
        }
    }

    /// The mouse wheel: scrolls the log in the detail pane and the full-screen log, moves
    /// through the cards on the board; popups and forms ignore it.
    pub(super) fn on_wheel(&mut self, delta: i8) {
        let down = delta > 0;
        let log = matches!(self.modals.last(), Some(Modal::FullLog))
            || (self.modals.is_empty() && self.focus == Focus::Detail);
        if log {
            // Three lines a notch, as terminals scroll.
            for _ in 0..3 {
                self.act(if down {
                    Intent::ScrollDown
                } else {
                    Intent::ScrollUp
                });
            }
        } else if self.modals.is_empty() && !self.too_small() {
            self.act(if down { Intent::Down } else { Intent::Up });
        }
    }

    /// Keys while the screen is too small to show what they would act on: only quitting
    /// (and answering its question, which the small screen shows) is allowed.
    fn small_key(&mut self, key: KeyEvent) {
        if let Some(top @ Modal::Confirm(Confirm::Quit { .. })) = self.modals.last_mut() {
            match top.key(key) {
                Outcome::Quit => {
                    self.modals.pop();
                    self.quit = true;
                }
                Outcome::Close => {
                    self.modals.pop();
                }
                _ => {}
            }
            return;
        }
        if lookup(BINDINGS, &[Ctx::Global], &key) == Some(Intent::Quit) {
            self.act(Intent::Quit);
        }
    }

    /// Keys for the layers that act on the app's own state: full-screen log and inputs.
    fn layer_key(&mut self, key: KeyEvent) {
        match self.modals.last_mut() {
            Some(Modal::Input(input)) => {
                let outcome = input.key(key);
                let (purpose, text) = (input.purpose, input.text.clone());
                match (outcome, purpose) {
                    (InputOutcome::Changed, InputFor::Filter) => self.set_filter(text),
                    (InputOutcome::Accept, InputFor::Filter) => {
                        self.modals.pop();
                    }
                    (InputOutcome::Cancel, InputFor::Filter) => {
                        self.modals.pop();
                        self.set_filter(String::new());
                    }
                    (InputOutcome::Accept, InputFor::Search) => {
                        self.modals.pop();
                        self.log.search = (!text.is_empty()).then_some(text);
                        let h = log_height(self);
                        // From the tail look back; from a paused view look ahead.
                        let forward = !self.log.follow;
                        if self.log.search.is_some() && !self.log.jump(forward, h) {
                            self.say("no match in the lines loaded", true);
                        }
                    }
                    (InputOutcome::Cancel, InputFor::Search) => {
                        self.modals.pop();
                        self.log.search = None;
                    }
                    _ => {}
                }
            }
            Some(Modal::FullLog) => {
                let action = lookup(FULL_LOG, &[Ctx::Log], &key)
                    .or_else(|| lookup(BINDINGS, &[Ctx::Log, Ctx::Task], &key));
                match action {
                    Some(Intent::Back) if self.log.search.is_some() => self.log.search = None,
                    Some(Intent::Back | Intent::Close | Intent::FullLog) => {
                        self.modals.pop();
                    }
                    Some(a) => self.act(a),
                    None => {}
                }
            }
            Some(Modal::Playground(_)) => self.playground_key(key),
            _ => {}
        }
    }

    fn set_filter(&mut self, text: String) {
        let before = self.board.selected;
        let w = self.size.0;
        self.board.set_filter(text, w);
        self.selection_changed(before);
    }

    /// Does what an action asks.
    pub(super) fn act(&mut self, action: Intent) {
        let width = self.size.0;
        let before = self.board.selected;
        let log_h = log_height(self);
        match action {
            Intent::Quit => {
                let running = self.running_count();
                if self.mode == Mode::Embedded && running > 0 {
                    self.modals.push(Modal::Confirm(Confirm::Quit { running }));
                } else {
                    self.quit = true;
                }
            }
            Intent::Help => self.modals.push(Modal::Help { scroll: 0 }),
            Intent::Tab(n) => {
                if self.board.go_to_tab(usize::from(n), width) {
                    self.focus = Focus::Board;
                    self.selection_changed(before);
                } else {
                    self.say(
                        format!("there is no pipeline tab {n} — [ and ] go through them"),
                        true,
                    );
                }
            }
            Intent::PrevTab | Intent::NextTab => {
                let delta = if action == Intent::NextTab { 1 } else { -1 };
                self.board.switch_tab(delta, width);
                self.focus = Focus::Board;
                self.selection_changed(before);
            }
            Intent::Left | Intent::Right => {
                let delta = if action == Intent::Right { 1 } else { -1 };
                let hidden = self.board.collapsed_beyond(delta, width);
                if !self.board.move_col(delta, width) && !hidden.is_empty() {
                    let what = hidden.join(", ");
                    self.say(format!("{what}: collapsed — z expands them"), false);
                }
            }
            Intent::Up | Intent::Down => {
                let delta = if action == Intent::Down { 1 } else { -1 };
                match self.focus {
                    Focus::Board => {
                        let cap = self.card_capacity();
                        self.board.move_row(delta, cap);
                    }
                    Focus::Detail => {
                        let next = self
                            .step
                            .map_or(0, |s| (s as isize + delta).max(0) as usize);
                        self.pick_step(next);
                    }
                }
            }
            Intent::Open => {
                if self.board.selected.is_some() {
                    self.focus = Focus::Detail;
                }
            }
            Intent::Back => match self.focus {
                Focus::Detail if self.log.search.is_some() => self.log.search = None,
                Focus::Detail => self.focus = Focus::Board,
                Focus::Board => {
                    if !self.board.filter.is_empty() {
                        self.set_filter(String::new());
                    } else {
                        self.took_over = false;
                    }
                }
            },
            Intent::Filter => self.modals.push(Modal::Input(LineInput {
                purpose: InputFor::Filter,
                text: self.board.filter.clone(),
            })),
            // A new search starts empty (typing replaces the old one; esc clears it).
            Intent::Search => self.modals.push(Modal::Input(LineInput {
                purpose: InputFor::Search,
                text: String::new(),
            })),
            Intent::NextMatch | Intent::PrevMatch => {
                if !self.log.jump(action == Intent::NextMatch, log_h) {
                    self.say("no search, or no match — `/` searches the log", true);
                }
            }
            Intent::ToggleCollapse => {
                self.board.collapse = Some(!self.board.collapsed(width));
                self.board.regroup(width);
            }
            Intent::ToggleWrap => self.log.wrap = !self.log.wrap,
            Intent::Playground => self.open_playground(),
            Intent::NewTask => {
                let current = self.board.pipeline().map(|p| p.id.clone());
                let warned = self
                    .board
                    .pipelines
                    .iter()
                    .map(|p| {
                        let problems = self.agent_problems(&p.id);
                        let (agent, why) = problems.first()?;
                        Some(format!("agent {agent}: {why}"))
                    })
                    .collect();
                let form = NewTaskForm::new(self.board.pipelines.clone(), current.as_deref())
                    .with_problems(warned);
                self.modals.push(Modal::NewTask(Box::new(form)));
            }
            Intent::ScrollUp | Intent::ScrollDown | Intent::PageUp | Intent::PageDown => {
                let page = (log_h / 2).max(1) as isize;
                let delta = match action {
                    Intent::ScrollUp => -1,
                    Intent::ScrollDown => 1,
                    Intent::PageUp => -page,
                    _ => page,
                };
                if let Some(q) = self.log.scroll(delta, log_h) {
                    self.effect(Effect::LoadLog(q));
                }
            }
            Intent::Top => {
                if let Some(q) = self.log.to_top() {
                    self.effect(Effect::LoadLog(q));
                }
            }
            Intent::Bottom => {
                if let Some(q) = self.log.to_bottom() {
                    self.effect(Effect::LoadLog(q));
                }
            }
            Intent::FullLog => {
                if self.log.step_run_id.is_some() {
                    self.modals.push(Modal::FullLog);
                } else {
                    self.say("this task has no step log yet", true);
                }
            }
            _ => self.task_action(action),
        }
        if self.board.selected != before {
            self.selection_changed(before);
        }
    }

    /// Actions on the selected task.
    fn task_action(&mut self, action: Intent) {
        let Some(target) = self.target() else {
            self.say("no task selected", true);
            return;
        };
        let send = |a: EngineAction| Effect::Send(target.request(a));
        match action {
            Intent::Start => self.effect(send(EngineAction::Start)),
            Intent::Approve => self.effect(send(EngineAction::Approve { note: None })),
            Intent::Resume => self.effect(send(EngineAction::Resume)),
            Intent::Retry => self.effect(send(EngineAction::Retry)),
            Intent::Reject => self.modals.push(Modal::Note(Box::new(NoteForm::new(
                target,
                NoteFor::Reject,
            )))),
            Intent::Say => self
                .modals
                .push(Modal::Note(Box::new(NoteForm::new(target, NoteFor::Say)))),
            Intent::Answer => {
                let questions = self
                    .detail
                    .as_ref()
                    .filter(|d| d.task.id == target.task_id)
                    .map(|d| d.questions.clone());
                match questions {
                    Some(q) if !q.is_empty() => self.modals.push(Modal::Answer(Box::new(
                        super::answer_form::AnswerForm::new(target, q),
                    ))),
                    Some(_) => self.say(
                        "its agent asks nothing: no open questions from a needs_info step — i says something to it",
                        true,
                    ),
                    None => self.say("loading the task…", false),
                }
            }
            Intent::Abort => self.modals.push(Modal::Confirm(Confirm::Abort(target))),
            Intent::Move => {
                self.effect(Effect::LoadMoves(target.task_id));
                self.modals.push(Modal::Move(MoveMenu {
                    target,
                    options: None,
                    cursor: 0,
                }));
            }
            Intent::Diff => {
                self.effect(Effect::LoadDiff(target.task_id));
                self.modals.push(Modal::Diff(DiffView {
                    target,
                    result: None,
                    scroll: 0,
                }));
            }
            Intent::Graph => {
                self.effect(Effect::LoadGraph(target.task_id));
                self.modals
                    .push(Modal::Graph(super::graph_view::GraphView::new(target)));
            }
            Intent::Dismiss => {
                let interrupted = self
                    .board
                    .selected_card()
                    .is_some_and(|c| c.state == TaskState::Interrupted);
                if interrupted {
                    self.modals.push(Modal::Confirm(Confirm::Dismiss(target)));
                } else {
                    self.say("only an interrupted task can be dismissed", true);
                }
            }
            Intent::Continue => self.effect(send(EngineAction::Continue)),
            Intent::Archive => self.effect(send(EngineAction::Archive)),
            Intent::Breakpoint | Intent::Rerun | Intent::Edit => self.fixup_layer(action, target),
            Intent::Shell
            | Intent::Editor
            | Intent::CopyBranch
            | Intent::CopyPath
            | Intent::Custom(_) => self.launch_action(action),
            Intent::TakeOver => self.take_over(),
            _ => {}
        }
    }
}
