//! The pure transition decision: given a pipeline, a status, a trigger and a few facts about
//! the task, where does the task go? No I/O; the engine performs what this decides.
//!
//! Rules: explicit transitions win. Candidates are the status's own transitions in
//! file order, then the `"*"` ones (which apply to every non-terminal status except the one
//! they lead to). The first whose guards all pass is taken; when every candidate is blocked,
//! or there is none, the trigger's default applies.

use super::model::{Guard, Hook, Pipeline, Status, StatusKind, Transition, Trigger};
use serde::Serialize;
use std::collections::HashMap;

/// What guards need to know about the task.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    /// How many times the task has entered each status in the current run.
    pub visits: &'a HashMap<String, u32>,
    /// A step of the task is running.
    pub step_running: bool,
    /// Fields present in the latest handoff.
    pub handoff_fields: &'a [String],
    /// None when the task has no git worktree (guard passes).
    pub worktree_clean: Option<bool>,
    /// Dollars spent in the current run.
    pub run_cost: f64,
    /// The workspace has a usable forge (`[forge]` with a remote that resolves).
    pub forge: bool,
}

/// One guard evaluated while deciding.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GuardCheck {
    /// The guard's name as [`Guard::name`] writes it (`max_visits: 3`).
    pub guard: String,
    /// Whether it let the transition through.
    pub passed: bool,
    /// What it found, for people: `max_visits 3 reached`, `implement entered 1 of 3 times`.
    pub detail: String,
}

/// Where the task goes and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    /// The target status id.
    pub to: String,
    /// The trigger actually used (`outcome:success` falling back to `success` reports `success`).
    pub trigger: Trigger,
    /// Index into `pipeline.transitions` of the explicit transition taken; None when a default applied.
    pub transition: Option<usize>,
    /// Every guard evaluated, in evaluation order (including those of candidates that were blocked).
    pub guards: Vec<GuardCheck>,
    /// Names of guards that blocked explicit candidates before this decision was reached.
    pub blocked_by: Vec<String>,
    /// Hooks of the transition taken (none for a default).
    pub hooks: Vec<Hook>,
    /// Label of the transition taken.
    pub label: Option<String>,
}

/// Why no transition happens.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DecideError {
    /// The task's status (or a move's target) is not in its pipeline.
    #[error("`{status}` is not a status of this pipeline")]
    UnknownStatus {
        /// The id that was not found.
        status: String,
    },
    /// Terminal statuses are never left.
    #[error("task is at terminal status `{status}`")]
    Terminal {
        /// The terminal status the task is at.
        status: String,
    },
    /// Neither an explicit transition nor a default applies.
    #[error("no transition from `{status}` on `{trigger}`")]
    NoTransition {
        /// The task's status.
        status: String,
        /// The trigger, in its file form (`outcome:needs_info`).
        trigger: String,
    },
    /// Transitions exist but their guards failed, and there is no default.
    #[error("the move from `{status}` on `{trigger}` is blocked by {}", .blocked_by.join(", "))]
    Blocked {
        /// The task's status.
        status: String,
        /// The trigger, in its file form.
        trigger: String,
        /// Names of the failing guards ([`Guard::name`]).
        blocked_by: Vec<String>,
    },
    /// The pipeline has no human move between these statuses.
    #[error("the pipeline has no move from `{from}` to `{to}`")]
    NotAllowed {
        /// The task's status.
        from: String,
        /// The requested target.
        to: String,
    },
}

/// Decides where `trigger` takes a task at status `from`.
pub fn decide(
    p: &Pipeline,
    from: &str,
    trigger: &Trigger,
    facts: &Facts,
) -> Result<Decision, DecideError> {
    let status = live_status(p, from)?;
    if matches!(
        trigger,
        Trigger::Resume
            | Trigger::Retry
            | Trigger::Dismiss
            | Trigger::Rerun
            | Trigger::Say
            | Trigger::Answer
    ) {
        return Err(no_transition(from, trigger));
    }
    let mut trace = Trace::default();
    decide_with(p, status, trigger, facts, &mut trace)
}

fn decide_with(
    p: &Pipeline,
    status: &Status,
    trigger: &Trigger,
    facts: &Facts,
    trace: &mut Trace,
) -> Result<Decision, DecideError> {
    let candidates = candidates(p, &status.id, |t| &t.on == trigger);
    if let Some(decision) = trace.first_passing(&candidates, facts) {
        return Ok(decision);
    }
    let next = || p.next_after(&status.id);
    let target = match trigger {
        Trigger::Success => next(),
        Trigger::Failure | Trigger::Error => p.first_of_kind(StatusKind::Failed),
        Trigger::Abort => p
            .first_of_kind(StatusKind::Cancelled)
            .or_else(|| p.first_of_kind(StatusKind::Failed)),
        Trigger::Start if status.kind == StatusKind::Queue => next(),
        Trigger::Approve if status.kind == StatusKind::Gate => next(),
        Trigger::Outcome(name) if name == "success" => {
            return decide_with(p, status, &Trigger::Success, facts, trace);
        }
        Trigger::Outcome(name) if name == "failure" => {
            return decide_with(p, status, &Trigger::Failure, facts, trace);
        }
        _ => None,
    };
    match target {
        Some(to) => Ok(trace.default_to(&to.id, trigger)),
        None if trace.blocked_by.is_empty() => Err(no_transition(&status.id, trigger)),
        None => Err(DecideError::Blocked {
            status: status.id.clone(),
            trigger: trigger.to_string(),
            blocked_by: std::mem::take(&mut trace.blocked_by),
        }),
    }
}

/// Decides a human move of a task from `from` to `to` (drag on the board, `baton move`).
///
/// Own transitions come before `*` ones; among each, `manual` before the other human
/// triggers, then file order. When every candidate is blocked the move is blocked; with no
/// candidate, the `start`/`approve` defaults are used if they lead to `to`.
pub fn decide_move(
    p: &Pipeline,
    from: &str,
    to: &str,
    facts: &Facts,
) -> Result<Decision, DecideError> {
    let status = live_status(p, from)?;
    if p.status(to).is_none() {
        return Err(DecideError::UnknownStatus { status: to.into() });
    }
    let candidates = move_candidates(p, from, to);
    let mut trace = Trace::default();
    if let Some((_, first)) = candidates.first() {
        if let Some(decision) = trace.first_passing(&candidates, facts) {
            return Ok(decision);
        }
        return Err(DecideError::Blocked {
            status: from.into(),
            trigger: first.on.to_string(),
            blocked_by: trace.blocked_by,
        });
    }
    match default_move(p, status) {
        Some((target, trigger)) if target == to => Ok(trace.default_to(to, &trigger)),
        _ => Err(DecideError::NotAllowed {
            from: from.into(),
            to: to.into(),
        }),
    }
}

/// A possible human move from a status, for menus and the board.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MoveOption {
    /// Target status id.
    pub to: String,
    /// The trigger the move would use (that of the first candidate when blocked).
    pub trigger: Trigger,
    /// Label of the transition, when it has one.
    pub label: Option<String>,
    /// False when guards block every way there.
    pub allowed: bool,
    /// The guards that block it.
    pub blocked_by: Vec<String>,
}

/// Every status a person can move a task at `from` to, in pipeline status order.
/// Empty for an unknown or terminal status.
pub fn move_options(p: &Pipeline, from: &str, facts: &Facts) -> Vec<MoveOption> {
    let Ok(status) = live_status(p, from) else {
        return Vec::new();
    };
    let default = default_move(p, status);
    let mut options = Vec::new();
    for target in &p.statuses {
        let candidates = move_candidates(p, from, &target.id);
        let by_default = default.as_ref().is_some_and(|(to, _)| *to == target.id);
        if candidates.is_empty() && !by_default {
            continue;
        }
        match decide_move(p, from, &target.id, facts) {
            Ok(d) => options.push(MoveOption {
                to: d.to,
                trigger: d.trigger,
                label: d.label,
                allowed: true,
                blocked_by: Vec::new(),
            }),
            Err(DecideError::Blocked { blocked_by, .. }) => {
                let (_, first) = candidates[0];
                options.push(MoveOption {
                    to: target.id.clone(),
                    trigger: first.on.clone(),
                    label: first.label.clone(),
                    allowed: false,
                    blocked_by,
                });
            }
            Err(_) => {}
        }
    }
    options
}

/// The status, provided it exists and is not terminal.
fn live_status<'p>(p: &'p Pipeline, id: &str) -> Result<&'p Status, DecideError> {
    let status = p
        .status(id)
        .ok_or_else(|| DecideError::UnknownStatus { status: id.into() })?;
    if status.kind.is_terminal() {
        return Err(DecideError::Terminal { status: id.into() });
    }
    Ok(status)
}

fn no_transition(status: &str, trigger: &Trigger) -> DecideError {
    DecideError::NoTransition {
        status: status.into(),
        trigger: trigger.to_string(),
    }
}

/// The human default out of a status: `start` from a queue, `approve` from a gate.
fn default_move(p: &Pipeline, status: &Status) -> Option<(String, Trigger)> {
    let trigger = match status.kind {
        StatusKind::Queue => Trigger::Start,
        StatusKind::Gate => Trigger::Approve,
        _ => return None,
    };
    Some((p.next_after(&status.id)?.id.clone(), trigger))
}

/// Transitions from `from` matching `keep`: own in file order, then `*` ones (never to `from`).
fn candidates<'p>(
    p: &'p Pipeline,
    from: &str,
    keep: impl Fn(&Transition) -> bool,
) -> Vec<(usize, &'p Transition)> {
    let indexed = || p.transitions.iter().enumerate();
    let own = indexed().filter(|(_, t)| t.from == from);
    let star = indexed().filter(|(_, t)| t.from == "*" && t.to != from);
    own.chain(star).filter(|(_, t)| keep(t)).collect()
}

/// Human-triggered transitions from `from` to `to`, in the order [`decide_move`] tries them.
fn move_candidates<'p>(p: &'p Pipeline, from: &str, to: &str) -> Vec<(usize, &'p Transition)> {
    let mut list = candidates(p, from, |t| t.to == to && t.on.is_human());
    // Stable: keeps own-before-`*` and file order within each group.
    list.sort_by_key(|(_, t)| (t.from == "*", t.on != Trigger::Manual));
    list
}

/// Guard results gathered across the candidates tried.
#[derive(Default)]
struct Trace {
    guards: Vec<GuardCheck>,
    blocked_by: Vec<String>,
}

impl Trace {
    /// Tries candidates in order; the first whose guards all pass becomes the decision.
    fn first_passing(
        &mut self,
        candidates: &[(usize, &Transition)],
        facts: &Facts,
    ) -> Option<Decision> {
        for &(index, t) in candidates {
            let mut passed_all = true;
            for guard in &t.guards {
                let (passed, detail) = check_guard(guard, &t.to, facts);
                let name = guard.name();
                if !passed {
                    passed_all = false;
                    if !self.blocked_by.contains(&name) {
                        self.blocked_by.push(name.clone());
                    }
                }
                self.guards.push(GuardCheck {
                    guard: name,
                    passed,
                    detail,
                });
            }
            if passed_all {
                return Some(Decision {
                    to: t.to.clone(),
                    trigger: t.on.clone(),
                    transition: Some(index),
                    guards: std::mem::take(&mut self.guards),
                    blocked_by: std::mem::take(&mut self.blocked_by),
                    hooks: t.hooks.clone(),
                    label: t.label.clone(),
                });
            }
        }
        None
    }

    fn default_to(&mut self, to: &str, trigger: &Trigger) -> Decision {
        Decision {
            to: to.into(),
            trigger: trigger.clone(),
            transition: None,
            guards: std::mem::take(&mut self.guards),
            blocked_by: std::mem::take(&mut self.blocked_by),
            hooks: Vec::new(),
            label: None,
        }
    }
}

/// Whether one guard lets a transition to `to` through, and what it found.
fn check_guard(guard: &Guard, to: &str, facts: &Facts) -> (bool, String) {
    match guard {
        Guard::MaxVisits(n) => {
            let seen = facts.visits.get(to).copied().unwrap_or(0);
            if seen < *n {
                (true, format!("{to} entered {seen} of {n} times"))
            } else {
                (false, format!("max_visits {n} reached"))
            }
        }
        // `false` switches the guard off: `{"no_running_step": false}` reads as "don't check".
        Guard::NoRunningStep(on) if *on && facts.step_running => {
            (false, "a step is running".into())
        }
        Guard::NoRunningStep(_) => (true, "no step running".into()),
        Guard::HasHandoffField(field) if facts.handoff_fields.iter().any(|f| f == field) => {
            (true, format!("handoff has {field}"))
        }
        Guard::HasHandoffField(field) => (false, format!("the last handoff has no {field}")),
        Guard::CleanWorktree(on) if *on && facts.worktree_clean == Some(false) => {
            (false, "the worktree has uncommitted changes".into())
        }
        Guard::CleanWorktree(_) => (true, "worktree clean".into()),
        Guard::Forge(want) if facts.forge == *want => (
            true,
            if facts.forge {
                "the workspace has a forge".into()
            } else {
                "the workspace has no forge".into()
            },
        ),
        Guard::Forge(_) if facts.forge => (false, "the workspace has a forge".into()),
        Guard::Forge(_) => (
            false,
            "the workspace has no forge ([forge] in config.toml with a remote)".into(),
        ),
        Guard::Budget(limit) if facts.run_cost < *limit => (
            true,
            format!("{} spent of {}", usd(facts.run_cost), usd(*limit)),
        ),
        Guard::Budget(limit) => (
            false,
            format!(
                "budget {} reached ({} spent)",
                usd(*limit),
                usd(facts.run_cost)
            ),
        ),
    }
}

/// Dollars as people write them: cents, with more digits only where cents would hide the
/// amount (a $0.002 cap is not "$0.00").
pub fn usd(amount: f64) -> String {
    let mut s = format!("{amount:.6}");
    while s.ends_with('0') && s.len() - s.find('.').unwrap_or(0) > 3 {
        s.pop();
    }
    format!("${s}")
}
