//! The app state and its one reducer: every event goes through [`App::update`], which says
//! whether anything visible changed and queues [`Effect`]s for the driver. No I/O here.

use super::board::Board;
use super::event::{AppEvent, BoardSnapshot, Effect, TaskDetail};
use super::logview::LogView;
use super::modal::{Modal, NewTaskForm, Target};
use super::theme::Theme;
use crate::store::{StepRun, TaskState};
use std::collections::HashMap;

/// Which pane has the keyboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    Board,
    Detail,
}

/// How the TUI reaches the engine (shown in the header; decides the quit question).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// This process runs the engine: quitting stops it.
    Embedded,
    /// Another process runs it: this TUI is a client.
    Attached,
}

/// A line in the status bar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusMsg {
    pub text: String,
    pub error: bool,
}

/// What a card's attention state is, for notifications.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attention {
    None,
    Approval,
    Failed,
}

/// Everything the UI shows.
pub struct App {
    pub theme: Theme,
    pub mode: Mode,
    /// Attached: who runs the engine (`baton engine (pid 12)`), when it said.
    pub owner: Option<crate::engine::wake::Owner>,
    /// This board took the engine over from one that stopped: a banner says what quitting
    /// does, until `esc` hides it.
    pub took_over: bool,
    /// Terminal size.
    pub size: (u16, u16),
    /// The clock the views use for elapsed times (set by the driver; fixed in tests).
    pub now_ms: i64,
    /// Spinner frame.
    pub frame: usize,
    pub board: Board,
    pub focus: Focus,
    /// The selected task's detail, once loaded.
    pub detail: Option<TaskDetail>,
    /// The step whose log is shown (index into `detail.steps`).
    pub step: Option<usize>,
    /// The user chose the step: do not jump to newer steps.
    pub step_pinned: bool,
    pub log: LogView,
    pub modals: Vec<Modal>,
    pub status: Option<StatusMsg>,
    /// The board has loaded at least once.
    pub loaded: bool,
    pub quit: bool,
    /// `[board]` options, `[[command]]`s and the pager (`settings`).
    pub settings: super::settings::BoardSettings,
    /// Agents that fail `agents check` here, with why (`agent_health`).
    pub agent_problems: super::agent_health::Problems,
    /// The new-task form last sent to the engine, kept until it answers: a refusal
    /// reopens it with what was typed and the engine's reason.
    pub creating: Option<Box<NewTaskForm>>,
    /// The engines registered on the board (the header names them).
    pub engines: Vec<crate::store::EngineView>,
    attention: HashMap<i64, Attention>,
    effects: Vec<Effect>,
}

impl App {
    /// A fresh app; queue the first board load.
    pub fn new(theme: Theme, mode: Mode, size: (u16, u16)) -> Self {
        Self {
            theme,
            mode,
            owner: None,
            took_over: false,
            size,
            now_ms: 0,
            frame: 0,
            board: Board::default(),
            focus: Focus::Board,
            detail: None,
            step: None,
            step_pinned: false,
            log: LogView::default(),
            modals: Vec::new(),
            status: None,
            loaded: false,
            quit: false,
            settings: Default::default(),
            agent_problems: Default::default(),
            creating: None,
            engines: Vec::new(),
            attention: HashMap::new(),
            effects: vec![Effect::LoadBoard],
        }
    }

    /// The effects queued since the last call.
    pub fn take_effects(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.effects)
    }

    pub(super) fn effect(&mut self, e: Effect) {
        if !self.effects.contains(&e) {
            self.effects.push(e);
        }
    }

    /// Shows a message in the status bar.
    pub fn say(&mut self, text: impl Into<String>, error: bool) {
        self.status = Some(StatusMsg {
            text: text.into(),
            error,
        });
    }

    /// True while some task runs: the spinner clock should tick.
    pub fn wants_tick(&self) -> bool {
        self.board
            .cards
            .iter()
            .any(|c| c.state == TaskState::Running)
    }

    /// Steps running now (for the quit question).
    pub fn running_count(&self) -> usize {
        self.board.counts().0
    }

    /// Whether the banner saying this board took the engine over shows.
    pub fn engine_banner(&self) -> bool {
        self.took_over && self.mode == Mode::Embedded
    }

    /// The step whose log is shown.
    pub fn shown_step(&self) -> Option<&StepRun> {
        self.detail.as_ref()?.steps.get(self.step?)
    }

    /// The selected task as a request target.
    pub fn target(&self) -> Option<Target> {
        let card = self.board.selected_card()?;
        Some(Target {
            task_id: card.id,
            status: card.status.clone(),
            title: card.title.clone(),
        })
    }

    /// Whether a banner shows for the detail's task: interrupted, or paused at a breakpoint.
    pub fn banner(&self) -> bool {
        self.detail.as_ref().is_some_and(|d| {
            d.task.state == TaskState::Interrupted || super::task_menus::paused(&d.task)
        })
    }

    /// Applies one event; returns true when something visible changed.
    pub fn update(&mut self, ev: AppEvent) -> bool {
        match ev {
            AppEvent::Key(key) => {
                self.on_key(key);
                true
            }
            AppEvent::Wheel(delta) => {
                self.on_wheel(delta);
                true
            }
            AppEvent::Resize(w, h) => {
                self.size = (w, h);
                self.board.regroup(w);
                let cap = self.card_capacity();
                self.board.keep_visible(cap);
                true
            }
            AppEvent::Tick => {
                self.frame = self.frame.wrapping_add(1);
                self.wants_tick()
            }
            AppEvent::Card { id, card } => match self.with_card(id, card) {
                Some(snapshot) => self.update(AppEvent::Board(snapshot)),
                None => {
                    self.effect(Effect::LoadBoard);
                    false
                }
            },
            AppEvent::Board(snapshot) => {
                // A reload that found nothing new (the store watcher is coarse) draws nothing.
                let same = self.loaded
                    && snapshot.cards == self.board.cards
                    && snapshot.pipelines == self.board.pipelines
                    && snapshot.home == self.board.home;
                if same {
                    return false;
                }
                self.on_board(snapshot);
                true
            }
            AppEvent::Task(detail) => {
                self.on_detail(*detail);
                true
            }
            AppEvent::Log(chunk) => {
                let shown = Some(chunk.query.step_run_id) == self.log.step_run_id;
                if let Some(q) = self.log.apply(chunk) {
                    self.effect(Effect::LoadLog(q));
                }
                shown
            }
            AppEvent::Moves { task_id, result } => {
                for m in &mut self.modals {
                    if let Modal::Move(menu) = m
                        && menu.target.task_id == task_id
                    {
                        menu.cursor = result
                            .as_ref()
                            .ok()
                            .and_then(|o| o.iter().position(|o| o.allowed))
                            .unwrap_or(0);
                        menu.options = Some(result);
                        return true;
                    }
                }
                false
            }
            AppEvent::Diff { task_id, result } => {
                if let Some(text) = super::pager::takes(self, task_id, &result) {
                    self.effect(Effect::Page(text));
                    return true;
                }
                for m in &mut self.modals {
                    if let Modal::Diff(d) = m
                        && d.target.task_id == task_id
                    {
                        d.result = Some(result);
                        return true;
                    }
                }
                false
            }
            AppEvent::Graph { task_id, result } => {
                for m in &mut self.modals {
                    if let Modal::Graph(g) = m
                        && g.target.task_id == task_id
                    {
                        g.loaded(result, self.size.1);
                        return true;
                    }
                }
                false
            }
            AppEvent::TaskChanged(id) => {
                // One task changed: its card is read again, not the whole board.
                self.effect(if self.loaded {
                    Effect::LoadCard(id)
                } else {
                    Effect::LoadBoard
                });
                if self.board.selected == Some(id) {
                    self.effect(Effect::LoadTask(id));
                }
                // The cards that wait for it show how it stands.
                if self.loaded {
                    for waiting in self.board.waiting_on(id) {
                        self.effect(Effect::LoadCard(waiting));
                    }
                }
                false
            }
            AppEvent::LogAppended { step_run_id } => {
                if let Some(q) = self.log.appended(step_run_id) {
                    self.effect(Effect::LoadLog(q));
                }
                false
            }
            // The driver reconnects; the reducer only reloads.
            AppEvent::EngineNow {
                mode,
                owner,
                took_over,
            } => {
                self.mode = mode;
                self.owner = owner;
                self.took_over = took_over && mode == Mode::Embedded;
                self.update(AppEvent::StoreChanged);
                true
            }
            AppEvent::StoreChanged | AppEvent::EngineGone(_) => {
                self.effect(Effect::LoadBoard);
                if let Some(id) = self.board.selected {
                    self.effect(Effect::LoadTask(id));
                }
                if let Some(id) = self.log.step_run_id
                    && let Some(q) = self.log.appended(id)
                {
                    self.effect(Effect::LoadLog(q));
                }
                false
            }
            AppEvent::Notice(text) => {
                self.say(text, true);
                true
            }
            AppEvent::Notified { title, body } => {
                self.say(format!("{title}: {body}"), false);
                self.effect(Effect::Notify { title, body });
                true
            }
            AppEvent::Replied(Ok(summary)) => {
                self.say(summary, false);
                true
            }
            AppEvent::Replied(Err(e)) | AppEvent::LoadFailed(e) => {
                self.say(e, true);
                true
            }
            AppEvent::Created(Ok(id)) => {
                self.creating = None;
                self.board.jump_to = Some(id);
                self.say(format!("created task {id}"), false);
                // Its card may be on the board already (its change can come before this
                // answer, and a reload that finds nothing new is not applied): jump now.
                if self.loaded && self.board.cards.iter().any(|c| c.id == id) {
                    let here = BoardSnapshot {
                        pipelines: self.board.pipelines.clone(),
                        cards: self.board.cards.clone(),
                        home: self.board.home.clone(),
                    };
                    self.on_board(here);
                }
                self.effect(Effect::LoadBoard);
                true
            }
            AppEvent::Playground(ev) => self.on_playground(ev),
            AppEvent::Engines(list) => std::mem::replace(&mut self.engines, list) != self.engines,
            AppEvent::AgentProblems(problems) => {
                self.agent_problems = problems;
                true
            }
            AppEvent::TakenOver { task_id, result } => {
                self.taken_over(task_id, result);
                true
            }
            AppEvent::Created(Err(e)) => {
                match self.creating.take() {
                    Some(mut form) => {
                        form.error = Some(format!("the task was not created: {e}"));
                        self.modals.push(Modal::NewTask(form));
                    }
                    None => self.say(format!("the task was not created: {e}"), true),
                }
                true
            }
        }
    }

    /// The board as loaded with task `id`'s card replaced, added (newest first) or taken
    /// away; None before the first board has loaded.
    fn with_card(&self, id: i64, card: Option<crate::store::TaskCard>) -> Option<BoardSnapshot> {
        if !self.loaded {
            return None;
        }
        let mut cards = self.board.cards.clone();
        let at = cards.iter().position(|c| c.id == id);
        match (card, at) {
            (Some(card), Some(i)) => cards[i] = card,
            (Some(card), None) => {
                let i = cards.partition_point(|c| c.id > id);
                cards.insert(i, card);
            }
            (None, Some(i)) => {
                cards.remove(i);
            }
            (None, None) => {}
        }
        Some(BoardSnapshot {
            pipelines: self.board.pipelines.clone(),
            cards,
            home: self.board.home.clone(),
        })
    }

    fn on_board(&mut self, snapshot: BoardSnapshot) {
        self.notify_changes(&snapshot);
        let before = self.board.selected;
        let width = self.size.0;
        self.board
            .apply(snapshot.pipelines, snapshot.cards, snapshot.home, width);
        let cap = self.card_capacity();
        self.board.keep_visible(cap);
        self.loaded = true;
        self.selection_changed(before);
    }

    /// Bell and desktop notification when a task newly needs approval or fails. The first
    /// snapshot only records the states, so opening the board does not ring.
    fn notify_changes(&mut self, snapshot: &BoardSnapshot) {
        let mut next = HashMap::new();
        for card in &snapshot.cards {
            let now = if card.state == TaskState::Failed {
                Attention::Failed
            } else if super::board::needs_approval(&snapshot.pipelines, card) {
                Attention::Approval
            } else {
                Attention::None
            };
            if self.loaded && now != Attention::None {
                let before = self.attention.get(&card.id).copied();
                if before != Some(now) {
                    let what = match now {
                        Attention::Approval => "needs approval",
                        _ => "failed",
                    };
                    self.effect(Effect::Notify {
                        title: format!("baton: task {} {what}", card.id),
                        body: card.title.clone(),
                    });
                }
            }
            next.insert(card.id, now);
        }
        self.attention = next;
    }

    /// After the selection may have moved: load the new task, or keep the current one fresh.
    pub(super) fn selection_changed(&mut self, before: Option<i64>) {
        let now = self.board.selected;
        if now != before {
            self.step_pinned = false;
            if self.detail.as_ref().map(|d| d.task.id) != now {
                self.detail = None;
                self.step = None;
                if let Some(q) = self.log.show(None) {
                    self.effect(Effect::LoadLog(q));
                }
            }
        }
        if let Some(id) = now {
            self.effect(Effect::LoadTask(id));
        } else if self.focus == Focus::Detail {
            self.focus = Focus::Board;
        }
    }

    fn on_detail(&mut self, detail: TaskDetail) {
        if Some(detail.task.id) != self.board.selected {
            return;
        }
        let old_step = self.shown_step().map(|s| s.id);
        let n = detail.steps.len();
        self.step = match (self.step_pinned, old_step) {
            (true, Some(id)) => detail.steps.iter().position(|s| s.id == id),
            _ => n.checked_sub(1),
        };
        self.detail = Some(detail);
        let new_step = self.shown_step().map(|s| s.id);
        if new_step != old_step {
            if let Some(q) = self.log.show(new_step) {
                self.effect(Effect::LoadLog(q));
            }
        } else if let Some(id) = new_step {
            // The step may have logged lines we missed between events.
            if let Some(q) = self.log.appended(id) {
                self.effect(Effect::LoadLog(q));
            }
        }
    }

    /// Shows step `i` of the detail (the user picked it).
    pub(super) fn pick_step(&mut self, i: usize) {
        let Some(d) = &self.detail else { return };
        if i >= d.steps.len() || Some(i) == self.step {
            return;
        }
        self.step = Some(i);
        self.step_pinned = i + 1 != d.steps.len();
        let id = d.steps[i].id;
        if let Some(q) = self.log.show(Some(id)) {
            self.effect(Effect::LoadLog(q));
        }
    }
}
