//! The loader: a thread that holds the engine's [`Reader`] and answers load requests with
//! snapshots, so the UI never waits on the database. Requests that pile up while it works
//! are coalesced (a burst of "reload the board" becomes one query).

use super::event::{AppEvent, BoardSnapshot, Diff, LogAnchor, LogChunk, LogQuery, TaskDetail};
use crate::engine::Reader;
use crate::pipeline::{Catalog, LiveCatalog};
use crate::store::{Task, TaskState};
use crate::workspace::{Workspace, git};
use std::sync::mpsc;
use tokio::sync::mpsc::UnboundedSender;

/// Something to read.
#[derive(Debug, Clone, PartialEq)]
pub enum LoadReq {
    Board,
    /// One task's card (it changed); the rest of the board stays as loaded.
    Card(i64),
    Task(i64),
    Log(LogQuery),
    Moves(i64),
    Diff(i64),
    Graph(i64),
    /// Definition files changed: read the pipelines again, then the board.
    Reload,
    /// The engine this board shared its pipelines with is gone (it handed over): read and
    /// reload them here from now on, then the board.
    ReadOwn,
}

/// The UI's handle on the loader thread (it ends when this is dropped).
pub struct Loader {
    tx: mpsc::Sender<LoadReq>,
}

impl Loader {
    /// Starts the loader thread for `ws`, reading the pipelines itself; answers arrive on
    /// `out`.
    pub fn spawn(ws: Workspace, out: UnboundedSender<AppEvent>) -> Self {
        Self::spawn_on(ws, out, None)
    }

    /// [`Loader::spawn`]; with `shared`, the board shows the pipelines of the engine this
    /// process runs (as it reloads them) instead of reading the files a second time.
    pub fn spawn_on(
        ws: Workspace,
        out: UnboundedSender<AppEvent>,
        shared: Option<crate::engine::client::Catalog>,
    ) -> Self {
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("baton-loader".into())
            .spawn(move || run(&ws, &rx, &out, shared))
            .expect("spawning the loader thread");
        Self { tx }
    }

    /// Queues a read.
    pub fn request(&self, req: LoadReq) {
        let _ = self.tx.send(req);
    }

    /// A way to queue reads from another thread (the file watcher).
    pub fn requester(&self) -> impl Fn(LoadReq) + Send + 'static {
        let tx = self.tx.clone();
        move |req| {
            let _ = tx.send(req);
        }
    }
}

/// Where the board's pipelines come from.
enum Pipelines {
    /// Read and reloaded here (no engine runs in this process).
    Own(LiveCatalog),
    /// The engine's in this process.
    Shared(crate::engine::client::Catalog),
}

impl Pipelines {
    fn current(&self) -> std::sync::Arc<Catalog> {
        match self {
            Self::Own(live) => std::sync::Arc::new(live.catalog.clone()),
            Self::Shared(rx) => rx.borrow().clone(),
        }
    }
}

fn run(
    ws: &Workspace,
    rx: &mpsc::Receiver<LoadReq>,
    out: &UnboundedSender<AppEvent>,
    shared: Option<crate::engine::client::Catalog>,
) {
    let store = match Reader::following(ws) {
        Ok(s) => s,
        Err(e) => {
            let _ = out.send(AppEvent::LoadFailed(e.to_string()));
            return;
        }
    };
    let mut source = match shared {
        Some(rx) => Pipelines::Shared(rx),
        None => Pipelines::Own(LiveCatalog::load(&ws.pipelines_dir(), &ws.agents_dir())),
    };
    let mut catalog = source.current();
    report(&startup_problems(&catalog), "this pipeline is skipped", out);
    // The engines as last sent: read again with the board or a card, sent when they change.
    let mut engines = None;
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        batch.extend(rx.try_iter());
        let mut seen = Vec::with_capacity(batch.len());
        for req in batch {
            if seen.contains(&req) {
                continue;
            }
            seen.push(req.clone());
            let req = match (req, &mut source) {
                (LoadReq::Reload, Pipelines::Own(live)) => {
                    let problems = live.reload(&ws.pipelines_dir(), &ws.agents_dir());
                    if problems.is_empty() {
                        let _ = out.send(AppEvent::Notice("pipelines reloaded".into()));
                    } else {
                        report(&problems, "", out);
                    }
                    catalog = source.current();
                    LoadReq::Board
                }
                // The engine reloads them and says what went wrong.
                (LoadReq::Reload, Pipelines::Shared(_)) => LoadReq::Board,
                (LoadReq::ReadOwn, Pipelines::Shared(_)) => {
                    source =
                        Pipelines::Own(LiveCatalog::load(&ws.pipelines_dir(), &ws.agents_dir()));
                    catalog = source.current();
                    LoadReq::Board
                }
                (LoadReq::ReadOwn, Pipelines::Own(_)) => LoadReq::Board,
                (req, _) => req,
            };
            if let Pipelines::Shared(rx) = &mut source
                && rx.has_changed().unwrap_or(false)
            {
                catalog = rx.borrow_and_update().clone();
            }
            let ev = answer(ws, &store, &catalog, req);
            if out.send(ev).is_err() {
                return;
            }
        }
        if seen.iter().any(|r| {
            matches!(
                r,
                LoadReq::Board | LoadReq::Card(_) | LoadReq::Reload | LoadReq::ReadOwn
            )
        }) && let Ok(now) = store.engines()
            && engines.as_ref() != Some(&now)
        {
            engines = Some(now.clone());
            if out.send(AppEvent::Engines(now)).is_err() {
                return;
            }
        }
    }
}

/// The error diagnostics of a catalog, as sentences.
fn startup_problems(catalog: &Catalog) -> Vec<String> {
    catalog
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(ToString::to_string)
        .collect()
}

/// Puts the first problem in the status line (with `suffix`), counting the rest.
fn report(problems: &[String], suffix: &str, out: &UnboundedSender<AppEvent>) {
    let Some(first) = problems.first() else {
        return;
    };
    let more = match problems.len() {
        1 => String::new(),
        n => format!(" (and {} more — `baton pipelines validate`)", n - 1),
    };
    let suffix = if suffix.is_empty() {
        String::new()
    } else {
        format!(" — {suffix}")
    };
    let _ = out.send(AppEvent::Notice(format!("{first}{suffix}{more}")));
}

fn answer(ws: &Workspace, db: &Reader, catalog: &Catalog, req: LoadReq) -> AppEvent {
    let failed = |what: &str, e: &dyn std::fmt::Display| {
        tracing::warn!("loading {what} failed: {e}");
        AppEvent::LoadFailed(format!("loading {what} failed: {e}"))
    };
    match req {
        LoadReq::Board | LoadReq::Reload | LoadReq::ReadOwn => match board(db, catalog) {
            Ok(b) => AppEvent::Board(b),
            Err(e) => failed("the board", &e),
        },
        LoadReq::Card(id) => match card(db, catalog, id) {
            Ok(Some(ev)) => ev,
            // Its pipeline is not on the board: the whole board, with that pipeline's tab.
            Ok(None) => answer(ws, db, catalog, LoadReq::Board),
            Err(e) => failed(&format!("task {id}'s card"), &e),
        },
        LoadReq::Task(id) => match task(db, id) {
            Ok(d) => AppEvent::Task(Box::new(d)),
            Err(e) => failed(&format!("task {id}"), &e),
        },
        LoadReq::Log(query) => match log(db, query) {
            Ok(chunk) => AppEvent::Log(chunk),
            Err(e) => failed("the log", &e),
        },
        LoadReq::Moves(task_id) => AppEvent::Moves {
            task_id,
            result: db.moves(task_id).map_err(|e| e.to_string()),
        },
        LoadReq::Graph(task_id) => AppEvent::Graph {
            task_id,
            result: graph(db, task_id).map_err(|e| e.to_string()),
        },
        LoadReq::Diff(task_id) => AppEvent::Diff {
            task_id,
            result: db
                .task(task_id)
                .map_err(|e| e.to_string())
                .and_then(|t| diff(ws, &t)),
        },
    }
}

/// The task's diff, or why it has none.
fn diff(ws: &Workspace, task: &Task) -> Result<Diff, String> {
    if let Some(text) = git::task_diff(ws.root(), task)? {
        if text.trim().is_empty() {
            let base = task
                .base_branch
                .clone()
                .or_else(|| git::repo_root(ws.root()).and_then(|r| git::current_branch(&r)))
                .unwrap_or_else(|| "its base branch".into());
            return Ok(Diff::Absent(format!("no changes against {base}")));
        }
        return Ok(Diff::Text(text));
    }
    let repo = git::repo_root(ws.root());
    let branch_kept = task.branch.as_ref().and_then(|b| {
        let heads = git::branch_heads(repo.as_ref()?).ok()?;
        Some(heads.iter().any(|(name, _)| name == b))
    });
    Ok(Diff::Absent(no_diff_reason(
        task,
        repo.is_some(),
        branch_kept,
    )))
}

/// Why a task without a worktree has no diff, in words. `in_git`: whether the workspace is
/// in a git repository; `branch_kept`: whether the task's branch still exists (`None` when
/// unknown).
pub fn no_diff_reason(task: &Task, in_git: bool, branch_kept: Option<bool>) -> String {
    let finished = matches!(
        task.state,
        TaskState::Done | TaskState::Cancelled | TaskState::Failed
    );
    let Some(branch) = &task.branch else {
        return if !in_git {
            "no diff — this workspace is not in a git repository, so tasks get no worktree"
        } else if finished {
            "no diff — this task ended before a step ran, so it never had a worktree"
        } else {
            "no worktree for this task yet — a diff appears once a step has run"
        }
        .into();
    };
    let when = if finished {
        format!("when the task ended ({})", task.state)
    } else {
        "when the task last ended".into()
    };
    let base = task.base_branch.as_deref().unwrap_or("its base branch");
    let rest = match branch_kept {
        Some(false) => format!("its branch {branch} is gone too (merged into {base}, or deleted)"),
        _ => format!("its work is on branch {branch} — `git diff {base}...{branch}` shows it"),
    };
    format!("the worktree was removed {when}; {rest}")
}

fn board(db: &Reader, catalog: &Catalog) -> crate::store::Result<BoardSnapshot> {
    let cards = db.cards()?;
    let mut pipelines = catalog.pipelines.clone();
    // Tasks on a pipeline the catalog no longer has: show their tab from a task's snapshot.
    for card in &cards {
        if pipelines.iter().all(|p| p.id != card.pipeline_id)
            && let Ok(p) = db.pipeline_of_task(card.id)
        {
            pipelines.push((*p).clone());
        }
    }
    let home = catalog.default_pipeline().map(|p| p.id.clone());
    Ok(BoardSnapshot {
        pipelines,
        cards,
        home,
    })
}

/// Task `id`'s card as an event (None: gone from the board), unless its pipeline is one the
/// board has no tab for (`Ok(None)`: load the whole board then).
fn card(db: &Reader, catalog: &Catalog, id: i64) -> crate::store::Result<Option<AppEvent>> {
    let card = db.card(id)?;
    if let Some(c) = &card
        && catalog.get(&c.pipeline_id).is_none()
    {
        return Ok(None);
    }
    Ok(Some(AppEvent::Card { id, card }))
}

fn task(db: &Reader, id: i64) -> crate::store::Result<TaskDetail> {
    let task = db.task(id)?;
    let steps = db.steps(id)?;
    let history = db.history(id)?;
    let notices = db.notices(id, 5)?;
    let messages = db.messages(id)?;
    let questions = db.open_questions(&task)?;
    Ok(TaskDetail {
        task,
        steps,
        history,
        notices,
        messages,
        questions,
    })
}

fn log(db: &Reader, query: LogQuery) -> crate::store::Result<LogChunk> {
    let id = query.step_run_id;
    let lines = match query.anchor {
        LogAnchor::Tail => db.log_tail(id, query.limit)?,
        LogAnchor::Head => db.log_after(id, 0, query.limit)?,
        LogAnchor::After(after) => db.log_after(id, after, query.limit)?,
        LogAnchor::Before(before) => db.log_before(id, before, query.limit)?,
    };
    Ok(LogChunk {
        query,
        lines,
        total: db.log_count(id)?,
    })
}

/// A task's pipeline snapshot and the moves of its current run, for the graph view.
fn graph(db: &Reader, id: i64) -> crate::store::Result<super::graph_view::GraphData> {
    let task = db.task(id)?;
    let pipeline = (*db.pipeline_of_task(id)?).clone();
    let moves = db
        .history(id)?
        .into_iter()
        .filter(|h| task.run_id.is_none() || h.run_id == task.run_id)
        .map(|h| (h.from, h.to, h.trigger))
        .collect();
    Ok(super::graph_view::GraphData {
        pipeline,
        path: crate::pipeline::graph::TaskPath {
            current: Some(task.status),
            moves,
        },
    })
}
