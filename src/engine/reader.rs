//! The read side of the front door, for front ends that read on a thread of their own
//! (the board's loader, a command of the CLI): typed views of the workspace's board, read
//! through the store's read path in this process. Front ends never open the database
//! themselves; they hold a [`Reader`], which only reads.

use super::{Client, GitCtx, pipeline_of, views};
use crate::pipeline::{MoveOption, Pipeline};
use crate::store::{
    Event, HistoryEntry, LogLine, Result, StepRun, Store, StoreError, Task, TaskCard, TaskFilter,
};
use crate::workspace::git::GitError;
use crate::workspace::{Config, Workspace};
use std::sync::Arc;

/// Typed reads of one workspace's board.
pub struct Reader {
    store: Store,
}

impl Reader {
    /// A reader of `ws`'s board: read-only when this process may not write there (a
    /// read-only checkout or mount), so reading never needs to write. For a command: the
    /// file is opened read-only, through SQLite's side files when a write-ahead log holds
    /// commits, as it is (`immutable`) when none does.
    pub fn open(ws: &Workspace) -> Result<Self> {
        if let Some(t) = crate::engine::board::postgres_board(ws)? {
            return Ok(Self {
                store: Store::open_postgres(&t)?,
            });
        }
        let path = ws.db_path();
        let store = if Store::writable(&path) && !path.exists() {
            // A board nobody has written yet: made empty, as any first command makes it.
            Store::open(&path)?
        } else {
            Store::open_read_only(&path).or_else(|e| match e {
                // Older than this build: brought up to date by a writable connection.
                StoreError::ReadOnlyUpgrade { .. } if Store::writable(&path) => Store::open(&path),
                e => Err(e),
            })?
        };
        Ok(Self { store })
    }

    /// A reader that follows the board as others write it, for as long as a board is
    /// shown: it sees every commit, so it is never a frozen copy of the file.
    pub fn following(ws: &Workspace) -> Result<Self> {
        if let Some(t) = crate::engine::board::postgres_board(ws)? {
            return Ok(Self {
                store: Store::open_postgres(&t)?,
            });
        }
        let path = ws.db_path();
        let store = if Store::writable(&path) {
            Store::open(&path)?
        } else {
            Store::open_read_only(&path)?
        };
        Ok(Self { store })
    }

    /// True when nothing watches this workspace's running steps: a board of its own
    /// (SQLite), and no engine holds its lock (the one that ran them died, or the machine
    /// restarted). The next engine picks them up. False on a shared board, where another
    /// workspace's engine may be running them, and when the lock cannot be asked.
    pub fn unwatched(&self, ws: &Workspace) -> bool {
        !self.store.read().is_postgres()
            && crate::workspace::EngineLock::held_now(ws) == Some(false)
    }

    /// Tasks on the board (not archived), filtered, newest first.
    pub fn tasks(&self, filter: &TaskFilter) -> Result<Vec<Task>> {
        self.store.read().list_tasks(filter)
    }

    /// Archived tasks, most recently archived first.
    pub fn archived(&self) -> Result<Vec<Task>> {
        self.store.read().archived_tasks()
    }

    /// Whether task `id` is archived.
    pub fn is_archived(&self, id: i64) -> Result<bool> {
        self.store.read().is_archived(id)
    }

    /// The engines registered on the board, by name, as they stand now. An engine on this
    /// machine whose process is gone (killed before its lease ran out) is shown as gone at
    /// once rather than as running until its lease ends.
    pub fn engines(&self) -> Result<Vec<crate::store::EngineView>> {
        let mut views = self.store.read().engine_views()?;
        for v in views.iter_mut().filter(|v| v.live) {
            v.live = !super::engines::gone_from_here(&v.row);
        }
        Ok(views)
    }

    /// One task.
    pub fn task(&self, id: i64) -> Result<Task> {
        self.store.read().task(id)
    }

    /// Every card of the board, newest first.
    pub fn cards(&self) -> Result<Vec<TaskCard>> {
        self.store.read().task_cards()
    }

    /// One task's card; None when it has left the board (deleted or archived).
    pub fn card(&self, id: i64) -> Result<Option<TaskCard>> {
        self.store.read().task_card(id)
    }

    /// The pipeline a task runs on, as it was when the task was made.
    pub fn pipeline(&self, task: &Task) -> super::Result<Arc<Pipeline>> {
        pipeline_of(&self.store.read(), task)
    }

    /// The pipeline snapshot of task `id`.
    pub fn pipeline_of_task(&self, id: i64) -> Result<Arc<Pipeline>> {
        self.store.read().pipeline(id)
    }

    /// A task's step runs, in the order they ran.
    pub fn steps(&self, task_id: i64) -> Result<Vec<StepRun>> {
        self.store.read().step_runs(task_id)
    }

    /// One step run.
    pub fn step(&self, step_run_id: i64) -> Result<StepRun> {
        self.store.read().step_run(step_run_id)
    }

    /// A task's moves, oldest first.
    pub fn history(&self, task_id: i64) -> Result<Vec<HistoryEntry>> {
        self.store.read().history(task_id)
    }

    /// A task's events, oldest first.
    pub fn events(&self, task_id: i64) -> Result<Vec<Event>> {
        self.store.read().events(task_id)
    }

    /// A task's newest `limit` warnings and errors, oldest first.
    pub fn notices(&self, task_id: i64, limit: i64) -> Result<Vec<Event>> {
        self.store.read().notices(task_id, limit)
    }

    /// At most `limit` log lines of a step run after line id `after`.
    pub fn log_after(&self, step_run_id: i64, after: i64, limit: i64) -> Result<Vec<LogLine>> {
        self.store.read().log_lines(step_run_id, after, limit)
    }

    /// At most `limit` log lines of a step run before line id `before`.
    pub fn log_before(&self, step_run_id: i64, before: i64, limit: i64) -> Result<Vec<LogLine>> {
        self.store
            .read()
            .log_lines_before(step_run_id, before, limit)
    }

    /// A step run's last `limit` log lines.
    pub fn log_tail(&self, step_run_id: i64, limit: i64) -> Result<Vec<LogLine>> {
        self.store.read().log_tail(step_run_id, limit)
    }

    /// How many log lines a step run has.
    pub fn log_count(&self, step_run_id: i64) -> Result<i64> {
        self.store.read().log_count(step_run_id)
    }

    /// Where a human may move task `id` now.
    pub fn moves(&self, id: i64) -> super::Result<Vec<MoveOption>> {
        super::move_options(&self.store.read(), id)
    }

    /// The tasks task `id` waits for, with where each is now.
    pub fn blockers(&self, id: i64) -> Result<Vec<crate::store::Blocker>> {
        self.store.read().blockers(id)
    }

    /// True when task `id`'s start waits for its blockers.
    pub fn start_waits(&self, id: i64) -> Result<bool> {
        self.store.read().start_waits(id)
    }

    /// What taking task `id` over opens, or why it cannot be taken over now.
    pub fn attach_plan(
        &self,
        ws: &Workspace,
        agents: &crate::agents::AgentCatalog,
        id: i64,
        shell: Vec<String>,
    ) -> std::result::Result<super::attach::Plan, String> {
        super::attach::plan(&self.store.read(), ws, agents, id, shell)
    }

    /// What was said to task `id`'s agent, oldest first.
    pub fn messages(&self, id: i64) -> Result<Vec<crate::store::Message>> {
        self.store.read().messages(id)
    }

    /// The questions the agent of `task` asked and nobody has answered yet.
    pub fn open_questions(&self, task: &Task) -> Result<Vec<String>> {
        views::open_questions(&self.store.read(), task)
    }

    /// `show --json` of task `id`.
    pub fn show_json(&self, id: i64) -> Result<serde_json::Value> {
        views::show(&self.store.read(), id)
    }

    /// The branch `baton init` recorded as the base of task branches.
    pub fn recorded_base_branch(&self) -> Result<Option<String>> {
        self.store.read().meta("base_branch")
    }

    /// The workspace's git context (its repository and base branch); None outside git.
    pub fn git(
        &self,
        ws: &Workspace,
        cfg: &Config,
    ) -> std::result::Result<Option<GitCtx>, GitError> {
        GitCtx::detect(ws, cfg, &self.store.read())
    }
}

impl Client {
    /// A [`Reader`] of this client's workspace, for a front end that reads on a thread of
    /// its own.
    pub fn reader(&self) -> Result<Reader> {
        Reader::open(&self.ws)
    }

    /// Makes the board's database when the workspace has none, and records `base` as the
    /// branch task branches start from unless one is recorded already; returns the branch
    /// it recorded. For `baton init`: setting up, before any task exists.
    pub fn set_up_board(&self, base: Option<&str>) -> Result<Option<String>> {
        let mut store = crate::engine::board::open_store(&self.ws)?;
        let Some(base) = base else {
            return Ok(None);
        };
        if store.read().meta("base_branch")?.is_some() {
            return Ok(None);
        }
        store.write(|db| db.set_meta("base_branch", base))?;
        Ok(Some(base.to_string()))
    }
}
