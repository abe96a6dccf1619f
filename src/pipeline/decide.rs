//! TEMPORARY stub of the decision function (replaced by the full implementation).
use super::*;
use std::collections::HashMap;

pub struct Facts<'a> {
    pub visits: &'a HashMap<String, u32>,
    pub step_running: bool,
    pub handoff_fields: &'a [String],
    pub worktree_clean: Option<bool>,
    pub run_cost: f64,
}
#[derive(Debug, Clone, serde::Serialize)]
pub struct GuardCheck {
    pub guard: String,
    pub passed: bool,
}
#[derive(Debug, Clone)]
pub struct Decision {
    pub to: String,
    pub trigger: Trigger,
    pub transition: Option<usize>,
    pub guards: Vec<GuardCheck>,
    pub blocked_by: Vec<String>,
    pub hooks: Vec<Hook>,
    pub label: Option<String>,
}
#[derive(Debug, thiserror::Error)]
pub enum DecideError {
    #[error("unknown status {status}")]
    UnknownStatus { status: String },
    #[error("terminal {status}")]
    Terminal { status: String },
    #[error("no {trigger} transition from {status}")]
    NoTransition { status: String, trigger: String },
    #[error("blocked {status} {trigger}: {blocked_by:?}")]
    Blocked { status: String, trigger: String, blocked_by: Vec<String> },
    #[error("cannot move from {from} to {to}")]
    NotAllowed { from: String, to: String },
}
pub struct MoveOption {
    pub to: String,
    pub trigger: Trigger,
    pub label: Option<String>,
    pub allowed: bool,
    pub blocked_by: Vec<String>,
}
fn dec(to: &str, trigger: Trigger) -> Decision {
    Decision { to: to.into(), trigger, transition: None, guards: vec![], blocked_by: vec![], hooks: vec![], label: None }
}
pub fn decide(p: &Pipeline, from: &str, trigger: &Trigger, _facts: &Facts) -> Result<Decision, DecideError> {
    let st = p.status(from).ok_or(DecideError::UnknownStatus { status: from.into() })?;
    if st.kind.is_terminal() {
        return Err(DecideError::Terminal { status: from.into() });
    }
    for (i, t) in p.transitions.iter().enumerate() {
        if (t.from == from || t.from == "*") && &t.on == trigger {
            let mut d = dec(&t.to, trigger.clone());
            d.transition = Some(i);
            d.hooks = t.hooks.clone();
            return Ok(d);
        }
    }
    let nt = || DecideError::NoTransition { status: from.into(), trigger: trigger.to_string() };
    let to = match trigger {
        Trigger::Success | Trigger::Start | Trigger::Approve => p.next_after(from).map(|s| s.id.clone()),
        Trigger::Failure | Trigger::Error => p.first_of_kind(StatusKind::Failed).map(|s| s.id.clone()),
        Trigger::Abort => p.first_of_kind(StatusKind::Cancelled).or(p.first_of_kind(StatusKind::Failed)).map(|s| s.id.clone()),
        Trigger::Outcome(o) if o == "success" => return decide(p, from, &Trigger::Success, _facts),
        Trigger::Outcome(o) if o == "failure" => return decide(p, from, &Trigger::Failure, _facts),
        _ => None,
    };
    to.map(|t| dec(&t, trigger.clone())).ok_or_else(nt)
}
pub fn decide_move(p: &Pipeline, from: &str, to: &str, _facts: &Facts) -> Result<Decision, DecideError> {
    for (i, t) in p.transitions.iter().enumerate() {
        if (t.from == from || t.from == "*") && t.to == to && t.on.is_human() {
            let mut d = dec(&t.to, t.on.clone());
            d.transition = Some(i);
            return Ok(d);
        }
    }
    Err(DecideError::NotAllowed { from: from.into(), to: to.into() })
}
pub fn move_options(_p: &Pipeline, _from: &str, _facts: &Facts) -> Vec<MoveOption> {
    vec![]
}
