//! What reaches the reducer (events) and what it asks the driver to do (effects).
//! Background work talks to the UI only through these types.

use crate::engine::Request;
use crate::pipeline::{MoveOption, Pipeline};
use crate::store::{Event, HistoryEntry, LogLine, StepRun, Task, TaskCard};
use crossterm::event::KeyEvent;

/// Everything the board shows, loaded in one go (light rows, no logs).
#[derive(Debug, Clone, Default)]
pub struct BoardSnapshot {
    /// The pipelines the workspace sees (built-ins first).
    pub pipelines: Vec<Pipeline>,
    /// Every task, newest first.
    pub cards: Vec<TaskCard>,
    /// The pipeline new tasks go to by default (the workspace's own): the board opens on it
    /// while no task says otherwise, and `n` preselects it.
    pub home: Option<String>,
}

/// One task with its steps and history, for the detail pane.
#[derive(Debug, Clone)]
pub struct TaskDetail {
    pub task: Task,
    pub steps: Vec<StepRun>,
    pub history: Vec<HistoryEntry>,
    /// Warnings and errors recorded for the task (hook failures, extraction problems).
    pub notices: Vec<Event>,
    /// What people said to its agent, oldest first.
    pub messages: Vec<crate::store::Message>,
    /// The open questions its agent waits to have answered (`needs_info`), else empty.
    pub questions: Vec<String>,
}

/// Which part of a step's log to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LogAnchor {
    /// The newest lines.
    Tail,
    /// The oldest lines (jump to the start).
    Head,
    /// Lines after this id (following, or scrolling down past the window).
    After(i64),
    /// Lines before this id (scrolling back).
    Before(i64),
}

/// A request for part of a step's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LogQuery {
    pub step_run_id: i64,
    pub anchor: LogAnchor,
    pub limit: i64,
}

/// The answer to a [`LogQuery`].
#[derive(Debug, Clone)]
pub struct LogChunk {
    pub query: LogQuery,
    pub lines: Vec<LogLine>,
    /// Lines the step has logged in all.
    pub total: i64,
}

/// An input to the reducer.
#[derive(Debug)]
pub enum AppEvent {
    Key(KeyEvent),
    /// The mouse wheel turned (`[board] mouse = true`): negative up, positive down.
    Wheel(i8),
    Resize(u16, u16),
    /// The spinner clock (runs only while something runs).
    Tick,
    Board(BoardSnapshot),
    /// One task's card as it is now; None when it has left the board.
    Card {
        id: i64,
        card: Option<crate::store::TaskCard>,
    },
    Task(Box<TaskDetail>),
    Log(LogChunk),
    Moves {
        task_id: i64,
        result: Result<Vec<MoveOption>, String>,
    },
    Diff {
        task_id: i64,
        result: Result<Diff, String>,
    },
    /// A task's pipeline and path, for the graph view.
    Graph {
        task_id: i64,
        result: Result<super::graph_view::GraphData, String>,
    },
    /// The engine says a task changed.
    TaskChanged(i64),
    /// The engine wrote log lines of a step.
    LogAppended {
        step_run_id: i64,
    },
    /// Something in the store changed (attached mode, or the engine's event stream lagged).
    StoreChanged,
    /// The engine this board used has stopped by itself, or handed over (the driver
    /// connects again).
    EngineGone(crate::engine::client::Ended),
    /// Who runs the engine now, after the board connected again: this board (`took_over`:
    /// because the one it followed stopped), or another process (`owner` says which).
    EngineNow {
        mode: super::app::Mode,
        owner: Option<crate::engine::wake::Owner>,
        took_over: bool,
    },
    /// A message for people from the engine or a background job.
    Notice(String),
    /// A `notify` hook fired: ring the bell and post a desktop notification.
    Notified {
        title: String,
        body: String,
    },
    /// A request's one-line result or error sentence.
    Replied(Result<String, String>),
    /// A task was created (and, if asked, started).
    Created(Result<i64, String>),
    /// A read failed.
    LoadFailed(String),
    /// The engines registered on the board, as they stand (sent when they change).
    Engines(Vec<crate::store::EngineView>),
    /// The agents that fail `agents check` here (checked once when the board opens).
    AgentProblems(super::agent_health::Problems),
    /// The playground's agents, log lines and result.
    Playground(super::playground::PlaygroundEvent),
    /// A takeover of the task ended (the agent's UI was quit) and was recorded, or why not.
    TakenOver {
        task_id: i64,
        result: Result<(), String>,
    },
}

/// What `D` shows for a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Diff {
    /// The diff of the task's worktree against its base branch.
    Text(String),
    /// Why there is no diff to show (no worktree yet, or removed when the task ended).
    Absent(String),
}

/// A new task to create.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTask {
    pub pipeline: Pipeline,
    pub title: String,
    pub prompt: String,
    pub start: bool,
    /// Tasks it waits for.
    pub after: Vec<i64>,
}

/// Work the reducer asks the driver to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    LoadBoard,
    /// Reload one task's card (it changed).
    LoadCard(i64),
    LoadTask(i64),
    LoadLog(LogQuery),
    LoadMoves(i64),
    LoadDiff(i64),
    LoadGraph(i64),
    Send(Request),
    Create(NewTask),
    /// Load agents for, or run, the playground.
    Playground(super::playground::PlaygroundEffect),
    /// Run a program in a task's worktree (the board suspended, or a tmux window).
    Launch(super::launch::Launch),
    /// Take a task over in the agent's own UI (`baton attach`): the board suspended, or a
    /// tmux window.
    TakeOver {
        task_id: i64,
        /// The task's worktree.
        cwd: std::path::PathBuf,
    },
    /// Show a diff through the user's pager (the board suspended).
    Page(String),
    /// Put baton's own text (a branch, a path) on the terminal's clipboard.
    Copy(String),
    /// Ring the bell and post a desktop notification.
    Notify {
        title: String,
        body: String,
    },
}
