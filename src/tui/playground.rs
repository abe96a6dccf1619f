//! `p`: the agent playground in a popup, the TUI's `baton try`. Pick an agent, type a
//! prompt, enter runs it once in a scratch worktree; the log streams into the popup, esc
//! stops the agent, and the handoff and the diff stat are shown at the end. Nothing reaches
//! the board. The run itself happens off the UI thread (`playground_run`); its lines and
//! result arrive as [`PlaygroundEvent`]s.

use super::app::App;
use super::event::Effect;
use super::modal::Modal;
use crate::engine::playground::{TryRequest, TryResult};
use crate::pipeline::StepAction;
use crate::store::{StepState, Stream};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui_textarea::TextArea;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio_util::sync::CancellationToken;

/// Log lines a try keeps (older ones are dropped, and counted).
pub const KEEP_LINES: usize = 500;

/// An agent profile the user can pick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentChoice {
    pub id: String,
    /// Its backend (`replay`, `codex`, …).
    pub backend: String,
    /// Its display name.
    pub name: String,
    /// Why it cannot run here (`agents check`), when it cannot.
    pub problem: Option<String>,
}

/// Work the playground asks the driver to do.
#[derive(Debug, Clone)]
pub enum PlaygroundEffect {
    /// Read the agent profiles in force.
    LoadAgents,
    /// Run one try; `cancel` stops it.
    Run {
        run: u64,
        request: TryRequest,
        cancel: CancellationToken,
    },
}

impl PartialEq for PlaygroundEffect {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::LoadAgents, Self::LoadAgents) => true,
            (Self::Run { run: a, .. }, Self::Run { run: b, .. }) => a == b,
            _ => false,
        }
    }
}

/// What the background work tells the playground.
#[derive(Debug)]
pub enum PlaygroundEvent {
    /// The agent profiles in force.
    Agents(Result<Vec<AgentChoice>, String>),
    /// A log line of try `run`.
    Line {
        run: u64,
        stream: Stream,
        text: String,
    },
    /// Try `run` ended.
    Done {
        run: u64,
        result: Result<TryResult, String>,
    },
}

/// Which part of the form has the keyboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PgField {
    Agent,
    Prompt,
}

/// How a try ended, its texts already made safe for the terminal.
#[derive(Debug, Clone)]
pub struct Finished {
    pub ok: bool,
    /// `succeeded · would fire `success` in a pipeline`, or the failure.
    pub summary: String,
    pub error: Option<String>,
    pub ran_in: String,
    pub handoff: Option<String>,
    /// One line per changed file, then the totals; `None` outside a git repository.
    pub diff_stat: Option<Vec<String>>,
}

/// One try: started, maybe finished.
#[derive(Debug)]
pub struct Run {
    pub id: u64,
    pub agent: String,
    cancel: CancellationToken,
    pub cancelling: bool,
    /// The newest [`KEEP_LINES`] lines, sanitised.
    pub lines: VecDeque<(Stream, String)>,
    /// Lines dropped from the front.
    pub dropped: usize,
    pub finished: Option<Finished>,
}

/// The popup's state.
#[derive(Debug)]
pub struct PlaygroundView {
    /// `None` while loading.
    pub agents: Option<Result<Vec<AgentChoice>, String>>,
    /// The agent to preselect once the list arrives.
    pub wanted: Option<String>,
    pub cursor: usize,
    pub prompt: TextArea<'static>,
    pub field: PgField,
    pub error: Option<String>,
    pub run: Option<Run>,
    /// Lines scrolled in the result.
    pub scroll: u16,
}

impl Drop for PlaygroundView {
    /// A popup that goes away (the board quits) stops its agent.
    fn drop(&mut self) {
        if let Some(r) = &self.run
            && r.finished.is_none()
        {
            r.cancel.cancel();
        }
    }
}

static NEXT_RUN: AtomicU64 = AtomicU64::new(1);

impl PlaygroundView {
    /// A form preselecting `wanted` once the agents are loaded.
    pub fn new(wanted: Option<String>) -> Self {
        let mut prompt = TextArea::default();
        prompt.set_placeholder_text("what should the agent do (enter runs it)");
        Self {
            agents: None,
            wanted,
            cursor: 0,
            prompt,
            field: PgField::Prompt,
            error: None,
            run: None,
            scroll: 0,
        }
    }

    /// The agents, once loaded.
    pub fn choices(&self) -> &[AgentChoice] {
        match &self.agents {
            Some(Ok(a)) => a,
            _ => &[],
        }
    }

    /// True while an agent runs.
    pub fn running(&self) -> bool {
        self.run.as_ref().is_some_and(|r| r.finished.is_none())
    }

    fn pick(&mut self, delta: isize) {
        let n = self.choices().len();
        if n > 0 {
            self.cursor = (self.cursor as isize + delta).rem_euclid(n as isize) as usize;
        }
    }

    /// Starts a try of the picked agent, or says what is missing.
    fn submit(&mut self) -> Option<Effect> {
        let Some(agent) = self.choices().get(self.cursor).map(|a| a.id.clone()) else {
            self.error = Some("no agent to run: add a profile under .baton/agents/".into());
            return None;
        };
        let prompt = self.prompt.lines().join("\n").trim().to_string();
        if prompt.is_empty() {
            self.error = Some("type a prompt for the agent first".into());
            self.field = PgField::Prompt;
            return None;
        }
        self.error = None;
        self.scroll = 0;
        let id = NEXT_RUN.fetch_add(1, Ordering::Relaxed);
        let cancel = CancellationToken::new();
        self.run = Some(Run {
            id,
            agent: agent.clone(),
            cancel: cancel.clone(),
            cancelling: false,
            lines: VecDeque::new(),
            dropped: 0,
            finished: None,
        });
        Some(Effect::Playground(PlaygroundEffect::Run {
            run: id,
            request: TryRequest {
                agent,
                prompt,
                base: None,
                keep: None,
            },
            cancel,
        }))
    }

    /// Applies an event; true when it was for this popup.
    fn apply(&mut self, ev: PlaygroundEvent) -> bool {
        match ev {
            PlaygroundEvent::Agents(list) => {
                if let Ok(list) = &list {
                    // The wanted agent when it works, else the first that works.
                    let works = |a: &AgentChoice| a.problem.is_none();
                    let wanted = self
                        .wanted
                        .as_ref()
                        .and_then(|w| list.iter().position(|a| &a.id == w && works(a)));
                    self.cursor = wanted.or_else(|| list.iter().position(works)).unwrap_or(0);
                }
                self.agents = Some(list);
                true
            }
            PlaygroundEvent::Line { run, stream, text } => {
                let Some(r) = self.run.as_mut().filter(|r| r.id == run) else {
                    return false;
                };
                let text = crate::ansi::sanitize(&text, false).into_owned();
                r.lines.push_back((stream, text));
                while r.lines.len() > KEEP_LINES {
                    r.lines.pop_front();
                    r.dropped += 1;
                }
                true
            }
            PlaygroundEvent::Done { run, result } => {
                let Some(r) = self.run.as_mut().filter(|r| r.id == run) else {
                    return false;
                };
                r.finished = Some(finished(result));
                true
            }
        }
    }

    /// Keys while picking; `Some` is an effect to perform, and `close` closes the popup.
    fn form_key(&mut self, key: KeyEvent) -> (Option<Effect>, bool) {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Esc => return (None, true),
            KeyCode::Up => self.pick(-1),
            KeyCode::Down => self.pick(1),
            KeyCode::Tab | KeyCode::BackTab => {
                self.field = match self.field {
                    PgField::Agent => PgField::Prompt,
                    PgField::Prompt => PgField::Agent,
                }
            }
            KeyCode::Char('s') if ctrl => return (self.submit(), false),
            KeyCode::Enter if self.field == PgField::Agent => self.field = PgField::Prompt,
            KeyCode::Enter => return (self.submit(), false),
            KeyCode::Char('k') if self.field == PgField::Agent => self.pick(-1),
            KeyCode::Char('j') if self.field == PgField::Agent => self.pick(1),
            _ if self.field == PgField::Prompt => {
                self.prompt.input(key);
                self.error = None;
            }
            _ => {}
        }
        (None, false)
    }

    /// Keys while running or done; true closes the popup.
    fn run_key(&mut self, key: KeyEvent) -> bool {
        let Some(r) = &mut self.run else { return false };
        if r.finished.is_none() {
            if matches!(key.code, KeyCode::Esc | KeyCode::Char('x')) && !r.cancelling {
                r.cancel.cancel();
                r.cancelling = true;
            }
            return false;
        }
        match key.code {
            KeyCode::Esc | KeyCode::Char('q') | KeyCode::Char('p') => return true,
            KeyCode::Down | KeyCode::Char('j') => self.scroll = self.scroll.saturating_add(1),
            KeyCode::Up | KeyCode::Char('k') => self.scroll = self.scroll.saturating_sub(1),
            KeyCode::PageDown | KeyCode::Char(' ') => self.scroll = self.scroll.saturating_add(20),
            KeyCode::PageUp => self.scroll = self.scroll.saturating_sub(20),
            KeyCode::Char('g') => self.scroll = 0,
            // Another try: back to the form, agent and prompt kept.
            KeyCode::Enter => {
                self.run = None;
                self.scroll = 0;
            }
            _ => {}
        }
        false
    }
}

fn finished(result: Result<TryResult, String>) -> Finished {
    let safe = |s: &str| crate::ansi::sanitize(s, false).into_owned();
    match result {
        Ok(r) => Finished {
            ok: r.state == StepState::Succeeded,
            summary: format!(
                "{} · would fire `{}` in a pipeline",
                r.state.as_str(),
                safe(&r.trigger)
            ),
            error: r.error.as_deref().map(safe),
            ran_in: safe(&r.ran_in),
            handoff: r.handoff.as_deref().map(|h| safe(h.trim_end())),
            diff_stat: r
                .diff
                .as_deref()
                .map(|d| super::diff_stat::diff_stat(&safe(d))),
        },
        Err(e) => Finished {
            ok: false,
            summary: "the try did not start".into(),
            error: Some(safe(&e)),
            ran_in: String::new(),
            handoff: None,
            diff_stat: None,
        },
    }
}

impl App {
    /// `p`: opens the playground, preselecting the agent of the selected task's latest
    /// agent step (else of the status it is in).
    pub(super) fn open_playground(&mut self) {
        let wanted = self.playground_agent();
        self.modals
            .push(Modal::Playground(Box::new(PlaygroundView::new(wanted))));
        self.effect(Effect::Playground(PlaygroundEffect::LoadAgents));
    }

    fn playground_agent(&self) -> Option<String> {
        let card = self.board.selected_card()?;
        let pipeline = self
            .board
            .pipelines
            .iter()
            .find(|p| p.id == card.pipeline_id)?;
        let agent_of = |status: &str| match pipeline.status(status)?.step.as_ref()?.action {
            StepAction::Agent(ref a) => Some(a.clone()),
            _ => None,
        };
        let steps = self
            .detail
            .as_ref()
            .filter(|d| d.task.id == card.id)
            .map(|d| d.steps.as_slice())
            .unwrap_or_default();
        steps
            .iter()
            .rev()
            .find_map(|s| agent_of(&s.status))
            .or_else(|| agent_of(&card.status))
    }

    /// Keys for the playground on top of the stack.
    pub(super) fn playground_key(&mut self, key: KeyEvent) {
        let Some(Modal::Playground(view)) = self.modals.last_mut() else {
            return;
        };
        let (effect, close) = if view.run.is_some() {
            (None, view.run_key(key))
        } else {
            view.form_key(key)
        };
        if close {
            self.modals.pop();
        }
        if let Some(e) = effect {
            self.effect(e);
        }
    }

    /// Hands an event to the open playground; true when the screen changed.
    pub(super) fn on_playground(&mut self, ev: PlaygroundEvent) -> bool {
        let ev = match ev {
            PlaygroundEvent::Agents(Ok(mut list)) => {
                for a in &mut list {
                    a.problem = self.agent_problems.get(&a.id).cloned();
                }
                PlaygroundEvent::Agents(Ok(list))
            }
            other => other,
        };
        match self.modals.iter_mut().rev().find_map(|m| match m {
            Modal::Playground(v) => Some(v),
            _ => None,
        }) {
            Some(view) => view.apply(ev),
            None => false,
        }
    }
}
