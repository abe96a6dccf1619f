//! What an agent step carries over from its task's earlier steps: the session it may
//! continue (the last one of the same agent in the same run) with what is new since, and,
//! when a failure led here, what failed. Read from the store as the step starts; whether the
//! session is continued is the profile's call (`exec::agent::run_step`).

use crate::exec::agent::Earlier;
use crate::exec::redact::{Redactor, env_vars};
use crate::pipeline::{Pipeline, StepAction};
use crate::store::{Db, HistoryEntry, Result, StepRun, StepState, StoreHandle};

/// The most log lines of a failed step quoted in `{{failure}}`.
const FAILURE_LINES: i64 = 200;
/// The most bytes of them (the end is kept).
const FAILURE_BYTES: usize = 16 * 1024;

/// What an agent step carries over.
#[derive(Debug, Default)]
pub struct Carried {
    /// The session it may continue, with what is new since.
    pub earlier: Option<Earlier>,
    /// `{{failure}}`: empty unless a failure led into the step.
    pub failure: String,
}

/// [`carried`] read off the async threads; a store that cannot answer leaves the step
/// fresh, with no failure (it still runs).
pub async fn carry(store: &StoreHandle, step: &StepRun) -> Carried {
    let step = step.clone();
    match store.read(move |db| carried(db, &step)).await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("reading what an agent step carries over failed: {e}");
            Carried::default()
        }
    }
}

/// What `step` carries over from its task's earlier step runs.
pub fn carried(db: &Db, step: &StepRun) -> Result<Carried> {
    let runs = db.step_runs(step.task_id)?;
    let before: Vec<&StepRun> = runs.iter().filter(|r| r.id < step.id).collect();
    let failed = failed_step(&db.history(step.task_id)?, &before, &step.status);
    let failure = match failed {
        Some(f) => describe_failure(db, f)?,
        None => String::new(),
    };
    let pipeline = db.pipeline(step.task_id).ok();
    let agent = pipeline.as_deref().and_then(|p| agent_of(p, &step.status));
    let same_agent = |r: &StepRun| match (&pipeline, agent) {
        (Some(p), Some(a)) => agent_of(p, &r.status) == Some(a),
        _ => r.status == step.status,
    };
    let earlier = before
        .iter()
        .rev()
        .filter(|r| r.run_id == step.run_id && same_agent(r))
        .find_map(|r| Some((*r, r.session_id.clone()?)))
        .map(|(from, session)| {
            // Only what came after the continued step is new to its session.
            let newer = |id: i64| id > from.id;
            let handoff = before
                .iter()
                .rev()
                .filter(|r| r.run_id == step.run_id && newer(r.id))
                .find(|r| r.state == StepState::Succeeded && r.handoff_content.is_some())
                .and_then(|h| {
                    let raw = h.handoff_content.as_deref()?;
                    Some(crate::handoff::context_header(
                        &crate::handoff::extract(raw),
                        &h.status,
                    ))
                })
                .unwrap_or_default();
            let new_failure = failed.is_some_and(|f| newer(f.id));
            Earlier {
                session,
                step_run: from.id,
                handoff,
                failure: if new_failure {
                    failure.clone()
                } else {
                    String::new()
                },
            }
        });
    Ok(Carried { earlier, failure })
}

/// The agent profile a status's step names.
fn agent_of<'a>(p: &'a Pipeline, status: &str) -> Option<&'a str> {
    match &p.status(status)?.step.as_ref()?.action {
        StepAction::Agent(a) => Some(a),
        _ => None,
    }
}

/// The step whose failure moved the task into `status`: the last move into it, when its
/// trigger was `failure`, `error` or `ci_failed`, names the status that failed; its last run
/// before now is the one.
fn failed_step<'a>(
    history: &[HistoryEntry],
    before: &[&'a StepRun],
    status: &str,
) -> Option<&'a StepRun> {
    let entry = history
        .iter()
        .rev()
        .find(|h| h.to == status && h.trigger != "resume")?;
    if !matches!(entry.trigger.as_str(), "failure" | "error" | "ci_failed") {
        return None;
    }
    let from = entry.from.as_deref()?;
    before.iter().rev().find(|r| r.status == from).copied()
}

/// `{{failure}}` for `step`: which step failed, its error, and the tail of its log (capped,
/// secrets masked).
fn describe_failure(db: &Db, step: &StepRun) -> Result<String> {
    let lines = db.log_tail(step.id, FAILURE_LINES)?;
    let mut tail = lines
        .iter()
        .map(|l| l.text.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    if tail.len() > FAILURE_BYTES {
        let mut cut = tail.len() - FAILURE_BYTES;
        while !tail.is_char_boundary(cut) {
            cut += 1;
        }
        tail.drain(..cut);
    }
    let mut how = match (step.state, step.exit_code, &step.outcome) {
        (_, _, Some(o)) if o != "success" => format!("ended with the outcome `{o}`"),
        (StepState::TimedOut, _, _) => "timed out".to_string(),
        (_, Some(code), _) => format!("failed (exit code {code})"),
        _ => "failed".to_string(),
    };
    if let Some(e) = step.error.as_deref().filter(|e| !e.trim().is_empty()) {
        how.push_str(&format!(": {e}"));
    }
    let mut text = format!(
        "## What failed\n\nThe step `{}` (attempt {}) {how}.",
        step.status, step.attempt
    );
    if !tail.trim().is_empty() {
        text.push_str(&format!(
            "\n\nThe last {} lines of its log:\n\n```\n{tail}\n```",
            lines.len()
        ));
    }
    Ok(Redactor::from_vars(env_vars()).apply(text))
}
