//! Task subcommands: init, new, list, show, the actions, logs and run.

use super::run_wait::RanHere;
use super::{Command, Failure, Outcome, exit, json};
use crate::engine::client::{Change, Follower};
use crate::engine::{Action, Client, NewTask, Order, Reader, Request, Submitted};
use crate::pipeline::{Catalog, StatusKind, load_catalog};
use crate::store::{Stream, TaskFilter, TaskState, rfc3339};
use crate::workspace::{EngineLock, Workspace};
use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::time::Duration;

/// `baton init`.
pub fn init(dir: Option<&PathBuf>, agent: Option<&str>) -> Outcome {
    let root = match dir {
        Some(d) => d.clone(),
        None => std::env::current_dir().map_err(|e| Failure::new(e.to_string()))?,
    };
    if !root.is_dir() {
        return Err(Failure::new(format!(
            "{} is not a folder — create it first",
            root.display()
        )));
    }
    let (ws, created) = Workspace::init(&root)?;
    if super::init_cmd::write_schemas(&ws)? && !created {
        outln!("refreshed the file schemas in .baton/schemas/");
    }
    // Task branches start from (and merge back into) the branch checked out now.
    let branch = crate::workspace::git::current_branch(ws.root());
    let base = match Client::for_command(&ws).set_up_board(branch.as_deref()) {
        Ok(base) => base,
        Err(e) => {
            // A board that could not be made (a PostgreSQL server refusing, say) leaves no
            // half-made workspace: a second `init` would take it for a made one.
            if created {
                let _ = std::fs::remove_dir_all(ws.dir());
            }
            return Err(e.into());
        }
    };
    if let Some(branch) = base {
        outln!("base branch for task worktrees: {branch}");
        if !crate::workspace::git::has_commit(ws.root()) {
            eprintln!(
                "note: this repository has no commit yet; task worktrees branch off {branch}, so make a first commit before starting a task"
            );
        }
    }
    if created {
        outln!("created {}", ws.dir().display());
        // A first task on an agent this machine lacks would only fail: say so instead.
        let blocked = match agent {
            Some(_) => None,
            None => catalog(&ws).default_pipeline().and_then(|p| {
                let agents = crate::agents::load_agents(Some(&ws.agents_dir()));
                crate::engine::agent_reach::cannot_start(p, &agents)
            }),
        };
        match blocked {
            Some(why) => outln!(
                "next: {why}; then `baton new \"a title\" --start` and `baton` to watch it — `baton --demo` shows a tour meanwhile"
            ),
            None => outln!(
                "next: `baton new \"a title\" --start` then `baton` to watch it, or `baton --demo` for a tour"
            ),
        }
    } else {
        outln!("{} already exists; left it as it is", ws.dir().display());
    }
    match agent {
        Some(spec) => super::init_cmd::set_up_agent(&ws, spec),
        None => Ok(exit::OK),
    }
}

/// Loads the pipelines a workspace sees; load errors are reported, not fatal.
pub fn catalog(ws: &Workspace) -> Catalog {
    let agents = crate::pipeline::agent_ids(Some(&ws.agents_dir()));
    let catalog = load_catalog(Some(&ws.pipelines_dir()), Some(&agents));
    for d in &catalog.diagnostics {
        if d.severity == crate::pipeline::Severity::Error {
            eprintln!("{d} (this pipeline is skipped)");
        }
    }
    catalog
}

pub(super) fn read_prompt(prompt: Option<String>) -> Result<String, Failure> {
    match prompt.as_deref() {
        Some("-") => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .map_err(|e| Failure::new(format!("reading the prompt from stdin failed: {e}")))?;
            // A file or heredoc ends with a newline that is not part of the prompt.
            if s.ends_with('\n') {
                s.pop();
            }
            Ok(s)
        }
        Some(p) => Ok(p.to_string()),
        None => Ok(String::new()),
    }
}

/// Creates a task and optionally starts it, through the engine (which checks the title,
/// the pipeline and the branch); returns its id.
/// The creation a command asks for, its prompt read (`-`: standard input).
fn new_task(
    ws: &Workspace,
    pipeline: Option<&str>,
    title: &str,
    prompt: Option<String>,
    start: bool,
    branch: Option<String>,
    after: Vec<i64>,
) -> Result<NewTask, Failure> {
    Ok(NewTask {
        title: title.to_string(),
        prompt: read_prompt(prompt)?,
        pipeline: pipeline.map(str::to_string),
        start,
        branch,
        actor: super::people::me(ws)?,
        idempotency_key: None,
        after,
    })
}

/// Says on stderr that a task just made has an agent that cannot start here.
pub(super) fn say_cannot_start(m: &crate::engine::Made) {
    if let Some(why) = &m.cannot_start {
        eprintln!("note: task {}: {why}", m.id);
    }
}

/// Makes the task through the engine (or applies it here when none runs); its id.
fn create(ws: &Workspace, new: NewTask) -> Result<i64, Failure> {
    // Created and started in one transaction: a crash or a refused start leaves no task
    // behind whose id was never printed.
    let made = Client::for_command(ws)
        .submit_blocking(Order::Create { create: new })
        .map_err(Failure::new)?;
    match made.answer {
        crate::engine::Answer::Made(m) => {
            say_cannot_start(&m);
            if m.waits {
                eprintln!(
                    "task {}: waits for the tasks it comes after; it starts once they are all done",
                    m.id
                );
            }
            Ok(m.id)
        }
        other => Err(Failure::new(format!(
            "the engine answered a creation with `{}` — is it another baton version?",
            other.summary()
        ))),
    }
}

fn hint_if_no_engine(ws: &Workspace) {
    if EngineLock::is_held(ws) {
        return;
    }
    // On a board several machines share, an engine elsewhere runs the step.
    let elsewhere: Vec<String> = crate::engine::Reader::open(ws)
        .and_then(|r| r.engines())
        .map(|es| {
            es.into_iter()
                .filter(|e| e.live)
                .map(|e| e.row.name)
                .collect()
        })
        .unwrap_or_default();
    if elsewhere.is_empty() {
        eprintln!(
            "note: no engine is running here; its step waits until `baton engine` or `baton` starts one"
        );
    } else {
        eprintln!(
            "note: no engine runs here; one on the board ({}) runs its step",
            one_line(&elsewhere.join(", "), 120)
        );
    }
}

/// Task subcommands that need a workspace.
pub fn run(ws: &Workspace, command: Command) -> Outcome {
    // Read once, then closed: only a command that follows the board keeps its reader.
    let read = || Reader::open(ws);
    match command {
        Command::New {
            title,
            pipeline,
            prompt,
            start,
            branch,
            after,
        } => {
            let new = new_task(
                ws,
                pipeline.as_deref(),
                &title,
                prompt,
                start,
                branch,
                after,
            )?;
            let id = create(ws, new)?;
            outln!("{id}");
            if start {
                hint_if_no_engine(ws);
            }
            Ok(exit::OK)
        }
        Command::List {
            status,
            pipeline,
            json,
            mine,
            by,
            archived,
        } => {
            let by = super::people::filter(ws, mine, by)?;
            let filter = TaskFilter {
                status: status.as_deref(),
                pipeline: pipeline.as_deref(),
            };
            list(ws, &read()?, &filter, by.as_deref(), (archived, json))
        }
        Command::Show { id, json } => super::show::show(ws, &read()?, id, json),
        Command::Start(a) => act(ws, a.id, Action::Start),
        Command::Approve(a) => act(ws, a.id, Action::Approve { note: a.note }),
        Command::Reject(a) => act(ws, a.id, Action::Reject { note: a.note }),
        Command::Abort(a) => act(ws, a.id, Action::Abort { note: a.note }),
        Command::Resume(a) => act(ws, a.id, Action::Resume),
        Command::Retry(a) => act(ws, a.id, Action::Retry),
        Command::Move { id, status, note } => act(ws, id, Action::Move { to: status, note }),
        Command::Break { id, status } => act(ws, id, Action::Break { status }),
        Command::Continue { id } => act(ws, id, Action::Continue),
        Command::Logs { id, step, follow } => {
            // `--follow` reads what others write while it runs.
            let reader = if follow {
                Reader::following(ws)?
            } else {
                read()?
            };
            logs(ws, &reader, id, step, follow)
        }
        Command::Diff { id, color } => diff(ws, &read()?, id, color),
        Command::Run {
            pipeline,
            title,
            prompt,
            wait,
            json,
        } => {
            let prompt = read_prompt(prompt)?;
            let new = || {
                let prompt = Some(prompt.clone());
                new_task(ws, Some(&pipeline), &title, prompt, true, None, Vec::new())
            };
            // Waiting with no engine running: this process runs one, and the task is
            // made through it (one engine start, one store, no apply-only pass first).
            // Who makes it (git's user.name, perhaps) is found meanwhile.
            if wait && !EngineLock::is_held(ws) {
                let root = ws.root().to_path_buf();
                std::thread::spawn(move || crate::workspace::person::current(&root));
                match super::run_wait::run_new(ws, &new, json)? {
                    // Read by the engine before its store closed: the board is not opened
                    // again to print it.
                    RanHere::Made { waited, stopped } if stopped || waited.task.state.settled() => {
                        return super::run_wait::report(&waited, json);
                    }
                    // Not settled when this engine stopped (a command moved it back to a
                    // queue while the engine drained): followed until it settles.
                    RanHere::Made { waited, .. } => {
                        return super::run_wait::run_task(ws, waited.task.id, true, json);
                    }
                    RanHere::Elsewhere => {}
                }
            }
            // An engine runs (or started meanwhile): the task goes through it.
            let id = create(ws, new()?)?;
            if !wait {
                hint_if_no_engine(ws);
            }
            super::run_wait::run_task(ws, id, wait, json)
        }
        // Init, engine, pipelines, agents and the other workspace-free commands.
        _ => unreachable!("dispatched elsewhere"),
    }
}

pub(super) fn act(ws: &Workspace, id: i64, action: Action) -> Outcome {
    let task = Reader::open(ws)?.task(id)?;
    let queues_step = matches!(
        action,
        Action::Start | Action::Resume | Action::Retry | Action::Continue
    );
    let req = Request {
        task_id: id,
        action,
        expected_status: Some(task.status),
        actor: super::people::me(ws)?,
    };
    let Submitted { answer, here } = Client::for_command(ws)
        .submit_blocking(Order::Act(req))
        .map_err(Failure::new)?;
    outln!("{}", crate::ansi::strip(&answer.summary()));
    if here && (answer.queued() || queues_step) {
        hint_if_no_engine(ws);
    }
    Ok(exit::OK)
}

fn list(
    ws: &Workspace,
    store: &Reader,
    filter: &TaskFilter,
    by: Option<&str>,
    (archived, as_json): (bool, bool),
) -> Outcome {
    let (status, pipeline) = (filter.status, filter.pipeline);
    let mut tasks = match archived {
        true => store
            .archived()?
            .into_iter()
            .filter(|t| {
                status.is_none_or(|s| t.status == s) && pipeline.is_none_or(|p| t.pipeline_id == p)
            })
            .collect(),
        false => store.tasks(filter)?,
    };
    // An empty list for a pipeline no one has is a typo, not an empty board. (A task can
    // outlive its pipeline's file, so only an empty answer asks the catalog.)
    if tasks.is_empty()
        && let Some(p) = pipeline
    {
        let known = catalog(ws);
        if known.get(p).is_none()
            && store
                .tasks(&TaskFilter {
                    status: None,
                    pipeline: Some(p),
                })?
                .is_empty()
        {
            // Its file is gone, but archived tasks of it may remain.
            let kept = store
                .archived()?
                .iter()
                .filter(|t| t.pipeline_id == p)
                .count();
            if kept > 0 && archived {
                outln!("no archived tasks match — `baton list --archived` shows them all");
                return Ok(exit::OK);
            }
            if kept > 0 {
                outln!(
                    "no tasks of pipeline `{p}` on the board; {kept} archived — `baton list --archived --pipeline {p}` shows {}",
                    if kept == 1 { "it" } else { "them" }
                );
                return Ok(exit::OK);
            }
            let ids: Vec<&str> = known.pipelines.iter().map(|p| p.id.as_str()).collect();
            return Err(Failure::new(format!(
                "there is no pipeline `{p}` (known: {}) — `baton pipelines list` shows them",
                ids.join(", ")
            )));
        }
    }
    // The same for a status that no pipeline has (of the one named, or of any), unless a
    // task stands at it still.
    if tasks.is_empty()
        && let Some(st) = status
    {
        let known = catalog(ws);
        let pipelines: Vec<_> = known
            .pipelines
            .iter()
            .filter(|p| pipeline.is_none_or(|id| p.id == id))
            .collect();
        // A named pipeline whose file is gone has no statuses to check against.
        if !pipelines.is_empty()
            && !pipelines.iter().any(|p| p.status(st).is_some())
            && store
                .tasks(&TaskFilter {
                    status: Some(st),
                    pipeline: None,
                })?
                .is_empty()
        {
            let mut ids: Vec<&str> = pipelines
                .iter()
                .flat_map(|p| p.statuses.iter().map(|s| s.id.as_str()))
                .collect();
            ids.sort_unstable();
            ids.dedup();
            return Err(Failure::new(format!(
                "no pipeline has a status `{st}` (known: {}) — `baton pipelines show ID` lists a pipeline's statuses",
                ids.join(", ")
            )));
        }
    }
    if let Some(name) = by {
        if name.trim().is_empty() {
            return Err(Failure::new(
                "`--by` needs a name (who created or moved the tasks); `--mine` lists your own",
            ));
        }
        tasks.retain(|t| t.touched_by(name));
    }
    if as_json {
        let items: Vec<_> = tasks.iter().map(json::list_item).collect();
        outln!("{}", serde_json::Value::Array(items));
        return Ok(exit::OK);
    }
    if archived {
        let filtered = status.is_some() || pipeline.is_some() || by.is_some();
        return super::task_edits::print_archived(tasks, filtered);
    }
    if tasks.is_empty() {
        if status.is_some() || pipeline.is_some() || by.is_some() {
            outln!("no tasks match — `baton list` shows them all");
        } else {
            outln!("no tasks — `baton new \"a title\"` creates one");
        }
        return Ok(exit::OK);
    }
    outln!(
        "{:>5}  {:<14} {:<12} {:<12} {:<20} {:<10} TITLE",
        "ID",
        "STATUS",
        "STATE",
        "PIPELINE",
        "UPDATED",
        "BY"
    );
    let running = tasks
        .iter()
        .filter(|t| t.state == crate::store::TaskState::Running)
        .count();
    for t in tasks {
        outln!(
            "{:>5}  {:<14} {:<12} {:<12} {:<20} {:<10} {}",
            t.id,
            t.status,
            t.state.as_str(),
            t.pipeline_id,
            &rfc3339(t.updated_at)[..19],
            one_line(t.moved_by.as_deref().unwrap_or("-"), 10),
            one_line(&t.title, 80)
        );
    }
    if running > 0 && store.unwatched(ws) {
        eprintln!("{}", unwatched(running));
    }
    Ok(exit::OK)
}

/// Said under tasks shown `running` when no engine runs in the workspace: the one that ran
/// their steps died (or the machine restarted), and nothing watches them until one starts.
pub(super) fn unwatched(running: usize) -> String {
    let (tasks, their, them) = match running {
        1 => ("the task shown running".to_string(), "its", "it"),
        n => (format!("the {n} tasks shown running"), "their", "them"),
    };
    format!(
        "no engine is running here, so nothing watches {tasks}: {their} engine stopped without ending {them} (killed, or the machine restarted) — `baton engine` or `baton` picks {them} up and marks a step that died with its engine interrupted"
    )
}

fn logs(ws: &Workspace, db: &Reader, id: i64, step: Option<usize>, follow: bool) -> Outcome {
    db.task(id)?;
    let steps = db.steps(id)?;
    let mut chosen = match step {
        Some(0) => {
            return Err(Failure::new(
                "steps are numbered from 1, as in `baton show`",
            ));
        }
        Some(n) => steps.get(n - 1).cloned().ok_or_else(|| {
            Failure::new(format!(
                "task {id} has {} step(s); `baton show {id}` lists them",
                steps.len()
            ))
        })?,
        None => steps
            .last()
            .cloned()
            .ok_or_else(|| Failure::new(format!("task {id} has not run a step yet")))?,
    };
    // Without --step, --follow goes on to the task's next steps until it comes to rest.
    let across_steps = follow && step.is_none();
    let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let mut out = std::io::stdout().lock();
    let mut after = 0;
    let mut said_waiting = false;
    let mut follower = follow.then(|| Follower::new(ws));
    loop {
        let lines = db.log_after(chosen.id, after, 5_000)?;
        for l in &lines {
            if writeln!(out, "{}", render_line(l, color)).is_err() {
                return Ok(exit::OK);
            }
            after = l.id;
        }
        if lines.len() == 5_000 {
            continue;
        }
        let current = db.step(chosen.id)?;
        if !follow && after == 0 && current.state == crate::store::StepState::Pending {
            eprintln!(
                "{} has not started yet (is an engine running? `baton engine` or `baton` runs it)",
                current.status
            );
        }
        if current.state.is_final() || !follow {
            // One more read: lines committed between the query and the state check.
            for l in db.log_after(chosen.id, after, i64::MAX)? {
                let _ = writeln!(out, "{}", render_line(&l, color));
                after = l.id;
            }
            let next = db.steps(id)?.into_iter().find(|s| s.id > chosen.id);
            match next {
                Some(next) if across_steps => {
                    chosen = next;
                    after = 0;
                    continue;
                }
                _ if across_steps && !db.task(id)?.state.settled() => {}
                _ => return Ok(exit::OK),
            }
        } else if current.state == crate::store::StepState::Pending && !said_waiting {
            if EngineLock::is_held(ws) {
                eprintln!("waiting for {} to start…", current.status);
            } else {
                eprintln!(
                    "waiting for {} to start — no engine is running here; `baton engine` or `baton` runs it",
                    current.status
                );
            }
            said_waiting = true;
        }
        let _ = out.flush();
        // The running engine says when the step has new lines or the task moved on; with
        // none running, look again at the log writer's own batch interval.
        let step_run = chosen.id;
        if let Some(f) = &mut follower {
            f.wait(ws, Duration::from_millis(150), |c| match c {
                Change::Log(s) => *s == step_run,
                Change::Task(t) => *t == id,
                Change::All => true,
                _ => false,
            });
        }
    }
}

/// A stored log line for a terminal (stream marks, colours) or a pipe (plain text).
fn render_line(l: &crate::store::LogLine, color: bool) -> String {
    let text = crate::ansi::sanitize(&l.text, color);
    if !color {
        return text.into_owned();
    }
    match l.stream {
        Stream::Stderr => format!("\x1b[31m│\x1b[0m {text}"),
        Stream::System => format!("\x1b[2m{text}\x1b[0m"),
        Stream::Stdout => text.into_owned(),
    }
}

/// The exit code `run --wait` gives for a settled task.
pub fn wait_code(store: &Reader, id: i64) -> Result<i32, Failure> {
    let t = store.task(id)?;
    let p = store.pipeline(&t)?;
    Ok(code_for(t.state, p.status(&t.status).map(|s| s.kind)))
}

/// The exit code of a wait that ended with a task in `state`, at a status of `kind`.
pub fn code_for(state: TaskState, kind: Option<StatusKind>) -> i32 {
    match (state, kind) {
        (TaskState::Done, _) => exit::OK,
        (TaskState::Waiting, Some(StatusKind::Gate)) => exit::WAITING,
        _ => exit::ERROR,
    }
}

fn diff(ws: &Workspace, store: &Reader, id: i64, color: bool) -> Outcome {
    let task = store.task(id)?;
    let cfg = ws.config()?;
    let git = store
        .git(ws, &cfg)
        .map_err(|e| Failure::new(e.to_string()))?
        .ok_or_else(|| {
            Failure::new(format!(
                "{} is not a git repository, so tasks have no diffs",
                ws.root().display()
            ))
        })?;
    let base = task.base_branch.clone().unwrap_or(git.base);
    let color =
        color || (std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none());
    let text = crate::workspace::git::task_work(&git.repo, &task, &base, color)
        .map_err(|e| Failure::new(e.to_string()))?
        .ok_or_else(|| Failure::new(crate::workspace::git::no_work(&task, &base)))?;
    let pager = std::io::stdout()
        .is_terminal()
        .then(|| crate::tui::settings::git_pager(ws.root()))
        .flatten();
    if text.trim().is_empty() {
        outln!("task {id}: no changes against {base}");
    } else if let Some(pager) = pager {
        // Through the user's git pager (delta, less), as `git diff` would be.
        crate::tui::pager::page(&pager, &text).map_err(Failure::new)?;
    } else {
        // File contents written by steps may hold escape sequences of their own.
        outln!("{}", crate::ansi::sanitize(&text, color));
    }
    Ok(exit::OK)
}

/// Task or step text as one line: sanitised for the terminal, line breaks shown as `⏎`,
/// tabs as spaces, cut to `max` characters.
pub(super) fn one_line(text: &str, max: usize) -> String {
    let flat: String = crate::ansi::strip(text)
        .chars()
        .map(|c| match c {
            '\n' => '⏎',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect();
    if flat.chars().count() > max {
        flat.chars()
            .take(max - 1)
            .chain(std::iter::once('…'))
            .collect()
    } else {
        flat
    }
}
