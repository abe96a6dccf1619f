//! What people (and clients) ask of a task, and how each request becomes a transition.
//! These functions run inside one write transaction and are shared by the engine and by
//! the CLI when no engine runs.

use super::breakpoints::{continue_paused, set_break};
use super::error::{EngineError, Result};
use super::request::NewTask;
use super::restart::retry_decision;
use super::transition::{FactsOwned, Moved, entry_state, pipeline_of, transition};
use crate::pipeline::{
    DecideError, Decision, Facts, Pipeline, StatusKind, Trigger, decide, decide_move,
};
use crate::store::{Db, NewEvent, RunState, Task, TaskState};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// A request about one task. Also the JSON body of a queued command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    Start,
    Approve {
        note: Option<String>,
    },
    Reject {
        note: Option<String>,
    },
    Move {
        to: String,
        note: Option<String>,
    },
    Abort {
        note: Option<String>,
    },
    /// Re-run the interrupted or failed step as a new attempt.
    Resume,
    /// Start a new run from the first step.
    Retry,
    /// Pause before the step of `status`.
    Break {
        status: String,
    },
    /// Clear the breakpoint and run the paused step.
    Continue,
    /// Give up an interrupted task: to its cancelled status, the note kept as the reason.
    Dismiss {
        note: Option<String>,
    },
    /// A new run from `from`, keeping the steps before it; `brk` pauses before a status.
    Rerun {
        from: String,
        brk: Option<String>,
    },
    /// Change the title and/or prompt of a task that is not running.
    Edit {
        title: Option<String>,
        prompt: Option<String>,
    },
    /// Hide a finished task from the board.
    Archive,
    /// Bring an archived task back to the board.
    Unarchive,
    /// Delete a task that is not running.
    Delete,
    /// Something happened on the forge: `pr_merged`, `pr_closed`, `ci_failed` or
    /// `outcome:changes_requested`, with what the forge said as the note.
    Forge {
        trigger: String,
        note: Option<String>,
        /// Keys naming the delivery and the event: noted in the transaction that applies
        /// the event, so a crash cannot apply it twice or lose it; one seen before makes
        /// the request do nothing.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        seen: Vec<String>,
        /// What the event writes on the task, in the same transaction.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        record: Option<super::forge_events::ForgeRecord>,
    },
    /// A person quit the agent's own UI opened on the task (`baton attach`): commit what
    /// the session changed and record who took it over. `committed` is the engine's to
    /// fill (what became of the changes); a front end leaves it out.
    TakenOver {
        by: String,
        #[serde(default)]
        committed: Option<String>,
    },
    /// Say something to the task's agent: to its running step where the backend takes
    /// input, else queued for its next step, or a new attempt continuing its last session.
    Say {
        text: String,
    },
    /// Answer the open questions of the agent that ended with `needs_info`, one answer per
    /// question, in order; the task goes back to the status that asked.
    Answer {
        answers: Vec<String>,
    },
    /// A `/baton` comment on the task's pull request: said to its agent as `Say` is (the
    /// request's actor names the author), unless `refused` says why not; recorded on the
    /// task either way. `seen` (the delivery) is noted in the same transaction, so a
    /// redelivery says nothing twice.
    ForgeSay {
        text: String,
        /// The pull request's number.
        number: u64,
        /// Who wrote the comment.
        author: String,
        seen: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        refused: Option<String>,
    },
}

impl Action {
    /// True for a forge event or comment, whose answer says what became of it by type.
    pub fn is_forge(&self) -> bool {
        matches!(self, Self::Forge { .. } | Self::ForgeSay { .. })
    }

    /// The verb, for messages.
    pub fn verb(&self) -> &'static str {
        match self {
            Self::Start => "start",
            Self::Approve { .. } => "approve",
            Self::Reject { .. } => "reject",
            Self::Move { .. } => "move",
            Self::Abort { .. } => "abort",
            Self::Resume => "resume",
            Self::Retry => "retry",
            Self::Break { .. } => "break",
            Self::Continue => "continue",
            Self::Dismiss { .. } => "dismiss",
            Self::Rerun { .. } => "rerun",
            Self::Edit { .. } => "edit",
            Self::Archive => "archive",
            Self::Unarchive => "unarchive",
            Self::Delete => "delete",
            Self::Forge { .. } => "forge",
            Self::TakenOver { .. } => "take over",
            Self::Say { .. } => "say",
            Self::Answer { .. } => "answer",
            Self::ForgeSay { .. } => "say",
        }
    }
}

/// A request with who asked and what status they saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub task_id: i64,
    pub action: Action,
    /// The status the requester saw; the request fails if the task is no longer there.
    pub expected_status: Option<String>,
    pub actor: String,
}

/// The effect of an applied request.
#[derive(Debug, Clone, Default)]
pub struct Applied {
    pub task_id: i64,
    /// A one-line summary for people ("task 3: plan_review → build (approve)").
    pub summary: String,
    /// The transition made, if the request moved the task.
    pub moved: Option<Moved>,
    /// A step was queued again for a retry after a backoff.
    pub retry: bool,
    /// What became of a forge request (None for any other request).
    pub forge: Option<super::forge_events::ForgeOutcome>,
}

/// Why a transition that carries a `merge` hook cannot commit yet.
#[derive(Debug, Clone, PartialEq)]
pub enum MergeGate {
    /// The merge has not run: run it outside the transaction, then apply the request again.
    Pending,
    /// The merge was refused (a conflict, a dirty target): the task stays, with this sentence.
    Refused(String),
}

/// Given the task and the hooks of the decision taken: may the transition commit?
pub type MergeCheck<'a> =
    &'a dyn Fn(&Task, &[crate::pipeline::Hook]) -> std::result::Result<(), MergeGate>;

/// What a transaction learns from outside it: git facts gathered before it began, and the
/// `merge` hook's result. No command runs inside a write transaction.
#[derive(Clone, Copy)]
pub struct Outside<'a> {
    /// Given the task and the hooks of the decision taken: may the transition commit?
    pub merge: MergeCheck<'a>,
    /// `git status` of the task's worktree, when a `clean_worktree` guard may need it.
    pub worktree_clean: Option<bool>,
    /// The workspace has a usable forge (`[forge]` whose remote resolves), for `forge` guards.
    pub forge: bool,
}

fn no_merge(_: &Task, _: &[crate::pipeline::Hook]) -> std::result::Result<(), MergeGate> {
    Ok(())
}

impl Outside<'static> {
    /// Nothing from outside: no git, or a move that carries no hook (start, resume).
    pub const NONE: Outside<'static> = Outside {
        merge: &no_merge,
        worktree_clean: None,
        forge: false,
    };
}

/// The merge gate of a workspace: with git, a decision carrying a `merge` hook waits for
/// `merged`, the result of running the merge outside the transaction (None: not run yet).
pub fn merge_gate(
    git: bool,
    merged: &Option<std::result::Result<(), String>>,
    hooks: &[crate::pipeline::Hook],
) -> std::result::Result<(), MergeGate> {
    if !git
        || !hooks
            .iter()
            .any(|h| matches!(h, crate::pipeline::Hook::Merge(_)))
    {
        return Ok(());
    }
    match merged {
        None => Err(MergeGate::Pending),
        Some(Ok(())) => Ok(()),
        Some(Err(m)) => Err(MergeGate::Refused(m.clone())),
    }
}

/// Applies a request inside the caller's write transaction.
pub fn apply(db: &Db, req: &Request, outside: &Outside) -> Result<Applied> {
    let task = db.task(req.task_id)?;
    // Abort is allowed from any status, so a move that raced it does not make it fail.
    if let Some(expected) = &req.expected_status
        && &task.status != expected
        && !matches!(req.action, Action::Abort { .. })
    {
        return Err(EngineError::NoLongerAt {
            task: task.id,
            expected: expected.clone(),
            actual: task.status.clone(),
            by: super::moved_by::left(db, task.id, expected),
        });
    }
    let pipeline = pipeline_of(db, &task)?;
    let run_id = task.run_id.unwrap_or_default();
    let owned = FactsOwned::load(db, &task, &pipeline, outside.worktree_clean, outside.forge)?;
    let facts = owned.facts();
    let refuse = |message: String| EngineError::Refused {
        task: task.id,
        message,
    };
    let decided = |r: std::result::Result<Decision, DecideError>| {
        r.map_err(|source| {
            // A person's approve/reject/start that finds the task gone from the gate or
            // backlog it was at lost a race (or came late): say so plainly.
            let wanted = match &req.action {
                Action::Approve { .. } | Action::Reject { .. } => Some(StatusKind::Gate),
                Action::Start => Some(StatusKind::Queue),
                _ => None,
            };
            let left = db
                .history(task.id)
                .ok()
                .and_then(|h| h.last().and_then(|l| l.from.clone()));
            match (wanted, left) {
                (Some(kind), Some(from))
                    if pipeline.status(&task.status).map(|s| s.kind) != Some(kind)
                        && pipeline.status(&from).map(|s| s.kind) == Some(kind) =>
                {
                    EngineError::NoLongerAt {
                        task: task.id,
                        by: super::moved_by::left(db, task.id, &from),
                        expected: from,
                        actual: task.status.clone(),
                    }
                }
                _ => explain(&task, &pipeline, &facts, &req.action, source),
            }
        })
    };

    // A start waits for the task's blockers: at its backlog, or at the first step of a
    // pipeline that begins with one, held there until they are done.
    if matches!(req.action, Action::Start)
        && match pipeline.status(&task.status).map(|s| s.kind) {
            Some(StatusKind::Queue) => true,
            Some(StatusKind::Step) => task.state == TaskState::Idle && db.start_waits(task.id)?,
            _ => false,
        }
    {
        let open = super::waits::open_blockers(db, task.id)?;
        if !open.is_empty() {
            return Ok(Applied {
                task_id: task.id,
                summary: super::waits::hold(db, task.id, &open, &req.actor)?,
                moved: None,
                retry: false,
                forge: None,
            });
        }
    }
    let (decision, note, run_id) = match &req.action {
        Action::Start => (
            decided(decide(&pipeline, &task.status, &Trigger::Start, &facts))?,
            None,
            run_id,
        ),
        Action::Approve { note } => (
            decided(decide(&pipeline, &task.status, &Trigger::Approve, &facts))?,
            note.clone(),
            run_id,
        ),
        Action::Reject { note } => (
            decided(decide(&pipeline, &task.status, &Trigger::Reject, &facts))?,
            note.clone(),
            run_id,
        ),
        Action::Move { to, note } => {
            if pipeline.status(to).is_none() {
                return Err(refuse(format!(
                    "its pipeline `{}` has no status `{to}` — `baton pipelines show {}` lists them",
                    pipeline.id, pipeline.id
                )));
            }
            (
                decided(decide_move(&pipeline, &task.status, to, &facts))?,
                note.clone(),
                run_id,
            )
        }
        Action::Abort { note } => (
            decided(decide(&pipeline, &task.status, &Trigger::Abort, &facts))?,
            note.clone(),
            run_id,
        ),
        Action::Resume => super::task_edits::resume_or_fresh(db, &task, &pipeline, &req.actor)?,
        Action::Retry => retry_decision(db, &task, &pipeline)?,
        Action::Break { status } => return set_break(db, &task, &pipeline, status, &req.actor),
        Action::Continue => return continue_paused(db, &task, &pipeline),
        Action::Dismiss { note } => super::task_edits::dismiss(&task, &pipeline, note.as_deref())?,
        Action::Rerun { from, brk } => {
            super::task_edits::rerun(db, &task, &pipeline, from, brk.as_deref(), &req.actor)?
        }
        Action::Edit { title, prompt } => {
            return super::task_edits::edit(
                db,
                &task,
                title.as_deref(),
                prompt.as_deref(),
                &req.actor,
            );
        }
        Action::Archive => {
            return super::task_edits::archive(db, &task, &pipeline, &req.actor);
        }
        Action::Unarchive => return super::task_edits::unarchive(db, &task, &req.actor),
        Action::Delete => return super::task_edits::delete(db, &task),
        Action::TakenOver { by, committed } => {
            return super::takeover::record(db, &task, req, by, committed.as_deref());
        }
        Action::Say { text } => match super::say::say(db, &task, &pipeline, text, &req.actor)? {
            super::say::Said::Queued(applied) => return Ok(*applied),
            super::say::Said::Attempt(planned) => planned,
        },
        Action::Answer { answers } => {
            super::answer::answer(db, &task, &pipeline, answers, &req.actor)?
        }
        Action::ForgeSay { .. } => match super::forge_say::apply(db, &task, &pipeline, req)? {
            Ok(planned) => planned,
            Err(done) => return Ok(done),
        },
        Action::Forge {
            trigger,
            note,
            seen,
            record,
        } => {
            use super::forge_events as fe;
            let Some(trigger) = Trigger::parse(trigger) else {
                return Err(refuse(format!("`{trigger}` is not a pipeline trigger")));
            };
            if let Some(seen_before) = fe::note(db, task.id, seen, record.as_ref())? {
                return Ok(seen_before);
            }
            match decide(&pipeline, &task.status, &trigger, &facts) {
                Ok(d) => (d, note.clone(), run_id),
                // The event stays recorded (and seen) though the task does not move.
                Err(source) => {
                    let why = explain(&task, &pipeline, &facts, &req.action, source);
                    return Ok(fe::moved_nothing(task.id, &why.to_string()));
                }
            }
        }
    };
    // A re-run may have set a breakpoint on the way in.
    let task = if matches!(req.action, Action::Rerun { .. }) {
        db.task(task.id)?
    } else {
        task
    };
    if !decision.hooks.is_empty() {
        match (outside.merge)(&task, &decision.hooks) {
            Ok(()) => {}
            Err(MergeGate::Pending) => return Err(EngineError::MergePending { task: task.id }),
            Err(MergeGate::Refused(message)) => {
                return Err(EngineError::Merge {
                    task: task.id,
                    from: task.status.clone(),
                    message,
                });
            }
        }
    }
    let moved = transition(
        db,
        &task,
        &pipeline,
        &decision,
        &req.actor,
        note.as_deref(),
        run_id,
    )?;
    let fresh = if matches!(req.action, Action::Resume) && moved.trigger == Trigger::Retry {
        "nothing to resume, so it started over: "
    } else {
        ""
    };
    Ok(Applied {
        task_id: task.id,
        summary: format!(
            "task {}: {fresh}{} → {} ({})",
            task.id, moved.from, moved.to, moved.trigger
        ),
        moved: Some(moved),
        retry: false,
        forge: match req.action {
            Action::Forge { .. } => Some(super::forge_events::ForgeOutcome::Moved),
            Action::ForgeSay { .. } => Some(super::forge_events::ForgeOutcome::Said),
            _ => None,
        },
    })
}

/// Turns a refused decision into a sentence about this task and what can be done instead.
fn explain(
    task: &Task,
    pipeline: &Pipeline,
    facts: &Facts,
    action: &Action,
    source: DecideError,
) -> EngineError {
    let kind = pipeline.status(&task.status).map(|s| s.kind);
    let refuse = |message: String| EngineError::Refused {
        task: task.id,
        message,
    };
    match (&source, action) {
        (DecideError::Terminal { status }, _) => {
            let next = if task.state == TaskState::Failed || task.state == TaskState::Cancelled {
                format!(" — `baton retry {}` runs it again", task.id)
            } else {
                String::new()
            };
            refuse(format!("it has finished (at `{status}`){next}"))
        }
        (DecideError::NoTransition { .. }, Action::Start) => refuse(format!(
            "it is already started (at `{}`) — use `baton move` to re-route it",
            task.status
        )),
        (DecideError::NoTransition { .. }, Action::Approve { .. } | Action::Reject { .. })
            if kind != Some(StatusKind::Gate) =>
        {
            refuse(format!(
                "it is {} at `{}`, not waiting at a gate, so there is nothing to {}",
                task.state,
                task.status,
                action.verb()
            ))
        }
        (DecideError::NotAllowed { .. }, Action::Move { .. }) => {
            let options: Vec<String> = crate::pipeline::move_options(pipeline, &task.status, facts)
                .into_iter()
                .filter(|o| o.allowed)
                .map(|o| o.to)
                .collect();
            let hint = if options.is_empty() {
                " and no manual moves from there".to_string()
            } else {
                format!("; it can move to: {}", options.join(", "))
            };
            EngineError::Refused {
                task: task.id,
                message: format!("{source}{hint}"),
            }
        }
        _ => EngineError::Decide {
            task: task.id,
            source,
        },
    }
}

/// The longest task title, in characters: a title is one line on a card; details belong in
/// the prompt.
pub const MAX_TITLE: usize = 500;

/// True when a title shows nothing: blank, or only escape sequences and control characters
/// (which the board and the CLI drop before they show it).
pub fn blank_title(title: &str) -> bool {
    crate::ansi::strip(title)
        .chars()
        .all(|c| c.is_whitespace() || c.is_control())
}

/// Why `title` cannot be a task's, in one sentence: it shows nothing, holds a NUL byte or
/// another control character (a newline, a tab, an escape, which every card would drop), a
/// line separator or a bidirectional override (which shift a card's row), or is longer
/// than [`MAX_TITLE`]. The same for every front end, new tasks and edits.
pub fn title_problem(title: &str) -> Option<String> {
    if blank_title(title) {
        return Some("a task needs a title: one line saying what to do".into());
    }
    if let Some(problem) = nul_problem(title, "") {
        return Some(problem);
    }
    if let Some(c) = title.chars().find(|c| c.is_control()) {
        return Some(format!(
            "the title holds a control character (U+{:04X}); a title is one line of plain text — put the rest in the prompt",
            c as u32
        ));
    }
    if let Some(c) = title.chars().find(|&c| crate::ansi::is_layout_format(c)) {
        return Some(format!(
            "the title holds a line separator or a bidirectional override (U+{:04X}); a title is one line of plain text — put the rest in the prompt",
            c as u32
        ));
    }
    let n = title.chars().count();
    (n > MAX_TITLE).then(|| {
        format!(
            "the title is {n} characters long; keep it to {MAX_TITLE} at most and put the details in the prompt"
        )
    })
}

/// Text made into a task's title (a trigger's or a hook's template filled in, an issue's
/// title): its first line that shows something, control characters, line separators and
/// bidirectional overrides as spaces, trimmed,
/// cut to [`MAX_TITLE`] with an ellipsis. Empty when the text shows nothing.
pub fn card_title(text: &str) -> String {
    let line: String = crate::ansi::strip(text)
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .chars()
        .map(|c| {
            if c.is_control() || crate::ansi::is_layout_format(c) {
                ' '
            } else {
                c
            }
        })
        .collect();
    let line = line.trim();
    if line.chars().count() > MAX_TITLE {
        line.chars().take(MAX_TITLE - 1).collect::<String>() + "…"
    } else {
        line.to_string()
    }
}

/// Why a new task's text cannot be given to a step, in one sentence: a NUL byte ends an
/// environment variable or an argument, so no step could start.
pub fn nul_problem(title: &str, prompt: &str) -> Option<String> {
    let field = if title.contains('\0') {
        "title"
    } else if prompt.contains('\0') {
        "prompt"
    } else {
        return None;
    };
    Some(format!(
        "the {field} holds a NUL byte, which no step can be given — remove it"
    ))
}

/// Creates a task at the first status of `pipeline` (snapshotting the definition) and
/// records its creation. Returns the new id.
pub fn create_task(db: &Db, pipeline: &Pipeline, title: &str, prompt: &str) -> Result<i64> {
    create_task_by(db, pipeline, title, prompt, "user")
}

/// [`create_task`] on behalf of `actor` (`user`, `trigger`, `hook`), as the history and
/// events record it.
pub fn create_task_by(
    db: &Db,
    pipeline: &Pipeline,
    title: &str,
    prompt: &str,
    actor: &str,
) -> Result<i64> {
    create_task_held(db, pipeline, title, prompt, actor, false)
}

/// [`create_task_by`]; `held`: its first step, if the pipeline starts with one, is not
/// queued (the task waits for other tasks first).
fn create_task_held(
    db: &Db,
    pipeline: &Pipeline,
    title: &str,
    prompt: &str,
    actor: &str,
    held: bool,
) -> Result<i64> {
    let first = pipeline
        .statuses
        .first()
        .ok_or_else(|| EngineError::Other(format!("pipeline `{}` has no statuses", pipeline.id)))?;
    let snapshot =
        serde_json::to_string(pipeline).map_err(|e| EngineError::Other(e.to_string()))?;
    let state = if held {
        TaskState::Idle
    } else {
        entry_state(first.kind, false)
    };
    let id = db.insert_task(title, prompt, &pipeline.id, &snapshot, &first.id, state)?;
    let task = db.task(id)?;
    let run_id = task.run_id.unwrap_or_default();
    db.insert_history(
        id,
        Some(run_id),
        None,
        &first.id,
        "create",
        actor,
        None,
        &json!([]),
        &json!([]),
    )?;
    if crate::workspace::person::is_person(actor) {
        db.set_created_by(id, actor)?;
    }
    db.insert_event(&NewEvent {
        task_id: Some(id),
        category: "lifecycle",
        kind: "task.created",
        summary: format!("created on pipeline {} at {}", pipeline.id, first.id),
        data: json!({ "pipeline": pipeline.id }),
        actor,
        level: "info",
    })?;
    if first.kind == StatusKind::Step && !held {
        db.insert_step_run(id, run_id, &first.id, None, 0)?;
        db.set_run_state(run_id, RunState::Running)?;
    }
    Ok(id)
}

/// What [`create_and_start`] did.
#[derive(Debug, Clone)]
pub struct Created {
    /// The task's id.
    pub id: i64,
    /// The idempotency key named a task made before: nothing new was made.
    pub existed: bool,
    /// The start, when one was asked for and made.
    pub started: Option<Applied>,
    /// It waits for other tasks: nothing was started or queued yet.
    pub waits: bool,
}

/// Creates a task and, when asked, starts it, inside the caller's write transaction: a
/// crash leaves either both or neither, and a start that is refused takes the new task
/// with it. A key already used returns the task it made, if the request is the same one.
pub fn create_and_start(db: &Db, pipeline: &Pipeline, new: &NewTask) -> Result<Created> {
    new.check()?;
    if let Some(key) = &new.idempotency_key
        && let Some(id) = db.task_by_idempotency_key(key)?
    {
        let made = db.task(id)?;
        if made.title != new.title || made.prompt != new.prompt || made.pipeline_id != pipeline.id {
            return Err(EngineError::Refused {
                task: id,
                message: format!(
                    "the idempotency key `{key}` was used to create this task with another title, prompt or pipeline — use a new key for a new task"
                ),
            });
        }
        return Ok(Created {
            id,
            existed: true,
            started: None,
            waits: db.start_waits(id)?,
        });
    }
    let open = super::waits::check_after(db, &new.after)?;
    let held = !open.is_empty();
    let id = create_task_held(db, pipeline, &new.title, &new.prompt, &new.actor, held)?;
    if let Some(key) = &new.idempotency_key {
        db.set_idempotency_key(id, key)?;
    }
    if let Some(b) = &new.branch {
        db.set_base_branch(id, b)?;
    }
    super::waits::add_deps(db, id, &new.after)?;
    // A pipeline whose first status is a step has queued it already, or would have: with
    // tasks to wait for, that start is held like an asked-for one.
    let queued = pipeline.statuses.first().map(|s| s.kind) == Some(StatusKind::Step);
    if held && (new.start || queued) {
        super::waits::hold(db, id, &open, &new.actor)?;
    }
    let started = if new.start && !queued && !held {
        let req = Request {
            task_id: id,
            action: Action::Start,
            expected_status: None,
            actor: new.actor.to_string(),
        };
        Some(apply(db, &req, &Outside::NONE)?)
    } else {
        None
    };
    Ok(Created {
        id,
        existed: false,
        started,
        waits: held,
    })
}

/// The human moves available from where a task is, with the guards that block the others
/// (for the TUI's move menu).
pub fn move_options(db: &Db, task_id: i64) -> Result<Vec<crate::pipeline::MoveOption>> {
    let task = db.task(task_id)?;
    let pipeline = pipeline_of(db, &task)?;
    let owned = FactsOwned::load(db, &task, &pipeline, None, false)?;
    Ok(crate::pipeline::move_options(
        &pipeline,
        &task.status,
        &owned.facts(),
    ))
}
