//! Builds a TUI app from fixed state and injected events, with no engine or database:
//! fixed ids, a fixed clock and fixed timestamps keep snapshots stable.
#![allow(dead_code)]

use baton::pipeline::{Pipeline, load_catalog};
use baton::store::{HistoryEntry, LogLine, StepRun, StepState, Stream, Task, TaskCard, TaskState};
use baton::tui::app::{App, Mode};
use baton::tui::event::{AppEvent, BoardSnapshot, Effect, LogChunk, TaskDetail};
use baton::tui::theme::Theme;
use baton::tui::ui::render;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

/// Rows read back from a real store, used as templates with struct-update syntax, so the
/// fixtures keep compiling when the store's row types gain fields.
struct Templates {
    task: Task,
    step: StepRun,
    history: HistoryEntry,
}

fn templates() -> &'static Templates {
    static T: std::sync::OnceLock<Templates> = std::sync::OnceLock::new();
    T.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut store = baton::store::Store::open(&dir.path().join("t.db")).expect("store");
        let demo = load_catalog(None, None).get("demo").expect("demo").clone();
        let id = store
            .write(|db| baton::engine::create_task(db, &demo, "t", ""))
            .expect("task");
        let step = store
            .write(|db| db.insert_step_run(id, db.task(id)?.run_id.unwrap_or(0), "plan", None, 0))
            .expect("step");
        let db = store.read();
        Templates {
            task: db.task(id).expect("task"),
            step,
            history: db.history(id).expect("history").remove(0),
        }
    })
}

/// 2025-01-01T12:00:00Z, the fixtures' "now".
pub const NOW: i64 = 1_735_732_800_000;

pub fn pipelines() -> Vec<Pipeline> {
    load_catalog(None, None).pipelines
}

pub fn card(id: i64, title: &str, status: &str, state: TaskState) -> TaskCard {
    TaskCard {
        id,
        title: title.into(),
        pipeline_id: "demo".into(),
        status: status.into(),
        state,
        updated_at: NOW - id * 1000,
        steps_done: 0,
        running_since: None,
        tests: None,
        cost: None,
        alert: None,
        pr: None,
        after: None,
        moved_by: None,
    }
}

/// A demo board with a card in every interesting state.
pub fn cards() -> Vec<TaskCard> {
    let mut v = vec![
        card(1, "Tidy up the settings page", "backlog", TaskState::Idle),
        card(2, "Add a dark mode toggle", "build", TaskState::Running),
        card(
            3,
            "Fix the flaky login test",
            "plan",
            TaskState::Interrupted,
        ),
        card(4, "Speed up the search index", "review", TaskState::Waiting),
        card(5, "Upgrade the HTTP client", "done", TaskState::Done),
        card(6, "Write the onboarding guide", "failed", TaskState::Failed),
        card(7, "Rename the config keys", "test", TaskState::Queued),
    ];
    v[0].moved_by = Some("alice".into());
    v[3].moved_by = Some("bob".into());
    v[1].running_since = Some(NOW - 83_000);
    v[1].steps_done = 1;
    v[3].steps_done = 3;
    v[3].tests = Some(serde_json::json!({"passed": 12, "failed": 0, "skipped": 0}));
    v[3].cost = Some(0.42);
    v[3].alert = Some("merge of baton/4-x into main has conflicts in: a.rs".into());
    v[4].steps_done = 3;
    v[5].steps_done = 2;
    v[5].tests = Some(serde_json::json!({"passed": 9, "failed": 3, "skipped": 0}));
    v.reverse();
    v
}

pub fn task(id: i64, title: &str, status: &str, state: TaskState) -> Task {
    Task {
        id,
        title: title.into(),
        prompt: String::new(),
        pipeline_id: "demo".into(),
        status: status.into(),
        state,
        run_id: Some(1),
        created_at: NOW - 60_000,
        updated_at: NOW,
        ..templates().task.clone()
    }
}

pub fn step(id: i64, task_id: i64, status: &str, state: StepState, secs: i64) -> StepRun {
    let started = NOW - 60_000 + id * 5_000;
    StepRun {
        id,
        task_id,
        run_id: 1,
        status: status.into(),
        attempt: 1,
        execution_key: format!("1:{status}:1"),
        state,
        created_at: started,
        started_at: Some(started),
        finished_at: (state != StepState::Running).then_some(started + secs * 1000),
        ..templates().step.clone()
    }
}

pub fn history(task_id: i64, moves: &[(Option<&str>, &str, &str)]) -> Vec<HistoryEntry> {
    moves
        .iter()
        .enumerate()
        .map(|(i, (from, to, trigger))| HistoryEntry {
            id: i as i64 + 1,
            task_id,
            run_id: Some(1),
            from: from.map(String::from),
            to: (*to).into(),
            trigger: (*trigger).into(),
            // People's moves carry their names; a step's result is the engine's move.
            actor: match *trigger {
                "create" | "start" | "approve" | "reject" | "manual" | "abort" => "alice",
                _ => "engine",
            }
            .into(),
            at: NOW - 60_000 + i as i64 * 4_000,
            ..templates().history.clone()
        })
        .collect()
}

pub fn log_lines(step_run_id: i64, texts: &[&str]) -> Vec<LogLine> {
    texts
        .iter()
        .enumerate()
        .map(|(i, t)| LogLine {
            id: i as i64 + 1,
            step_run_id,
            stream: if t.starts_with("warning") {
                Stream::Stderr
            } else {
                Stream::Stdout
            },
            ts: NOW,
            text: (*t).into(),
        })
        .collect()
}

/// The test harness: an app plus a test terminal.
pub struct Harness {
    pub app: App,
    pub term: Terminal<TestBackend>,
}

impl Harness {
    /// An app of `w`×`h` with the demo board loaded.
    pub fn new(w: u16, h: u16) -> Self {
        Self::with_mode(w, h, Mode::Embedded)
    }

    pub fn with_mode(w: u16, h: u16, mode: Mode) -> Self {
        let mut app = App::new(Theme::new(true), mode, (w, h));
        app.now_ms = NOW;
        let mut me = Self {
            app,
            term: Terminal::new(TestBackend::new(w, h)).expect("test terminal"),
        };
        me.app.take_effects();
        me.event(AppEvent::Board(BoardSnapshot {
            pipelines: pipelines(),
            cards: cards(),
            home: None,
        }));
        me
    }

    pub fn event(&mut self, ev: AppEvent) -> bool {
        self.app.update(ev)
    }

    pub fn key(&mut self, code: KeyCode) {
        self.event(AppEvent::Key(KeyEvent::new(code, KeyModifiers::NONE)));
    }

    pub fn ctrl(&mut self, ch: char) {
        self.event(AppEvent::Key(KeyEvent::new(
            KeyCode::Char(ch),
            KeyModifiers::CONTROL,
        )));
    }

    pub fn chars(&mut self, s: &str) {
        for ch in s.chars() {
            self.key(KeyCode::Char(ch));
        }
    }

    /// Answers the app's pending loads the way the loader would, from `detail` and `log`.
    pub fn serve(&mut self, detail: &TaskDetail, log: &[LogLine]) {
        for _ in 0..4 {
            let effects = self.app.take_effects();
            if effects.is_empty() {
                return;
            }
            for e in effects {
                match e {
                    Effect::LoadTask(id) if id == detail.task.id => {
                        self.event(AppEvent::Task(Box::new(detail.clone())));
                    }
                    Effect::LoadLog(q) => {
                        let lines: Vec<LogLine> = log
                            .iter()
                            .filter(|l| l.step_run_id == q.step_run_id)
                            .cloned()
                            .collect();
                        let total = lines.len() as i64;
                        self.event(AppEvent::Log(LogChunk {
                            query: q,
                            lines,
                            total,
                        }));
                    }
                    _ => {}
                }
            }
        }
    }

    /// The screen as text.
    pub fn screen(&mut self) -> String {
        let app = &self.app;
        self.term.draw(|f| render(f, app)).expect("draw");
        format!("{}", self.term.backend())
    }

    /// Selects the card of task `id` by walking the board with keys.
    pub fn select(&mut self, id: i64) {
        for _ in 0..10 {
            self.key(KeyCode::Char('h'));
        }
        for _ in 0..10 {
            if self.app.board.selected == Some(id) {
                return;
            }
            let col = self.app.board.col;
            for _ in 0..self.app.board.column_len(col) {
                self.key(KeyCode::Char('j'));
                if self.app.board.selected == Some(id) {
                    return;
                }
            }
            for _ in 0..self.app.board.column_len(col) {
                self.key(KeyCode::Char('k'));
            }
            self.key(KeyCode::Char('l'));
        }
        assert_eq!(self.app.board.selected, Some(id), "task {id} not reachable");
    }
}

/// The running task #2 with two steps and a coloured build log.
pub fn running_detail() -> (TaskDetail, Vec<LogLine>) {
    let mut plan = step(11, 2, "plan", StepState::Succeeded, 3);
    plan.handoff_content = Some("## What Was Done\nSplit the work in three.".into());
    plan.handoff_metadata = Some(serde_json::json!({
        "what_was_done": "Split the work in three.",
        "next_agent_context": "Build the toggle, then test it."
    }));
    let build = step(12, 2, "build", StepState::Running, 0);
    let detail = TaskDetail {
        task: task(2, "Add a dark mode toggle", "build", TaskState::Running),
        steps: vec![plan, build],
        history: history(
            2,
            &[
                (None, "backlog", "create"),
                (Some("backlog"), "plan", "start"),
                (Some("plan"), "build", "success"),
            ],
        ),
        notices: vec![],
        messages: vec![],
        questions: vec![],
    };
    let mut texts: Vec<String> = vec!["Building: Add a dark mode toggle".into()];
    for i in 1..=14 {
        texts.push(format!(
            "\x1b[32m   Compiling\x1b[0m demo_module_{i:02} v0.1.0"
        ));
    }
    texts.push("warning: demo_module_13: unused variable `x`".into());
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut log = log_lines(12, &refs);
    log.extend(log_lines(
        11,
        &["Planning: Add a dark mode toggle", "✓ plan ready"],
    ));
    (detail, log)
}

/// The interrupted task #3.
pub fn interrupted_detail() -> (TaskDetail, Vec<LogLine>) {
    let mut plan = step(21, 3, "plan", StepState::Interrupted, 2);
    plan.error = Some("the engine was shut down".into());
    let detail = TaskDetail {
        task: task(
            3,
            "Fix the flaky login test",
            "plan",
            TaskState::Interrupted,
        ),
        steps: vec![plan],
        history: history(
            3,
            &[
                (None, "backlog", "create"),
                (Some("backlog"), "plan", "start"),
            ],
        ),
        notices: vec![],
        messages: vec![],
        questions: vec![],
    };
    let log = log_lines(
        21,
        &[
            "Planning: Fix the flaky login test",
            "→ reading the task and the repository layout",
        ],
    );
    (detail, log)
}

/// The waiting task #4 at the review gate.
pub fn gate_detail() -> TaskDetail {
    TaskDetail {
        task: task(4, "Speed up the search index", "review", TaskState::Waiting),
        steps: vec![
            step(31, 4, "plan", StepState::Succeeded, 3),
            step(32, 4, "build", StepState::Succeeded, 4),
            step(33, 4, "test", StepState::Succeeded, 2),
        ],
        history: history(4, &[(None, "backlog", "create")]),
        notices: vec![],
        messages: vec![],
        questions: vec![],
    }
}

/// The idle task #1 in the backlog.
pub fn backlog_detail() -> TaskDetail {
    TaskDetail {
        task: task(1, "Tidy up the settings page", "backlog", TaskState::Idle),
        steps: vec![],
        history: history(1, &[(None, "backlog", "create")]),
        notices: vec![],
        messages: vec![],
        questions: vec![],
    }
}
