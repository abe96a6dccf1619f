//! Whole-pipeline checks that need every status and transition parsed first: terminal
//! statuses, statuses that cannot be left, and statuses that cannot be reached.

use super::locate::join;
use super::model::{Pipeline, StatusKind, Trigger};
use super::parse::{Ctx, Parsed};
use std::collections::VecDeque;

/// Runs the whole-pipeline checks on a parsed (possibly partly broken) pipeline.
pub(crate) fn check(ctx: &mut Ctx, parsed: &Parsed) {
    let p = &parsed.pipeline;
    if p.statuses.is_empty() {
        return;
    }
    let errors_before = ctx.has_errors();
    // An unreadable kind would make these checks report problems that are not there.
    if !parsed.kinds_uncertain {
        if !p.statuses.iter().any(|s| s.kind.is_terminal()) {
            ctx.error(
                "/statuses",
                "no terminal status: add one with kind done, failed or cancelled so tasks can finish",
            );
        }
        check_exits(ctx, parsed);
    }
    for (t, ptr) in p.transitions.iter().zip(&parsed.transition_ptrs) {
        if p.status(&t.from).is_some_and(|s| s.kind.is_terminal()) {
            ctx.warn(
                &join(ptr, "from"),
                format!(
                    "a transition from terminal status `{}` is never taken: tasks stop there",
                    t.from
                ),
            );
        }
    }
    // A task whose hook starts a task on its own pipeline starts another, and so on.
    for (t, ptr) in p.transitions.iter().zip(&parsed.transition_ptrs) {
        for (i, hook) in t.hooks.iter().enumerate() {
            if let super::model::Hook::StartTask(spec) = hook
                && spec.get("pipeline").and_then(|v| v.as_str()) == Some(p.id.as_str())
            {
                ctx.warn(
                    &join(&join(ptr, "hooks"), &i.to_string()),
                    format!(
                        "this start_task hook starts a task on its own pipeline `{}`, which can start another for ever; baton stops such a chain after a few tasks",
                        p.id
                    ),
                );
            }
        }
    }
    // A task that waits for its siblings needs siblings: start_task hooks before it.
    for (t, ptr) in p.transitions.iter().zip(&parsed.transition_ptrs) {
        for (i, hook) in t.hooks.iter().enumerate() {
            let super::model::Hook::StartTask(spec) = hook else {
                continue;
            };
            let before = t.hooks[..i]
                .iter()
                .any(|h| matches!(h, super::model::Hook::StartTask(_)));
            if spec.get("after").is_some_and(|a| a.is_string()) && !before {
                ctx.error(
                    &join(
                        &join(&join(&join(ptr, "hooks"), &i.to_string()), "start_task"),
                        "after",
                    ),
                    "this start_task hook waits for its siblings, but no start_task hook comes before it in this transition — list the hooks that make them first".to_string(),
                );
            }
        }
    }
    // Reachability of a broken pipeline would mostly echo its errors.
    if !errors_before && !ctx.has_errors() {
        warn_unreachable(ctx, parsed);
    }
}

/// A step status needs some way out; gates and queues get a warning for the same problem.
fn check_exits(ctx: &mut Ctx, parsed: &Parsed) {
    let p = &parsed.pipeline;
    let has_failed = p.first_of_kind(StatusKind::Failed).is_some();
    let any_star = parsed.leaving.contains("*");
    for (i, (s, ptr)) in p.statuses.iter().zip(&parsed.status_ptrs).enumerate() {
        let is_last = i + 1 == p.statuses.len();
        let explicit = any_star || parsed.leaving.contains(&s.id);
        let id_ptr = join(ptr, "id");
        match s.kind {
            StatusKind::Step if !explicit && is_last && !has_failed => ctx.error(
                &id_ptr,
                format!(
                    "step status `{}` cannot be left: no transition starts there, it is the last \
                     status (no `success` default) and there is no `failed` status for failures; \
                     add a transition from it or move it up",
                    s.id
                ),
            ),
            StatusKind::Step if !has_failed && !leaves_on(p, &s.id, &Trigger::Failure) => ctx.warn(
                &id_ptr,
                format!(
                    "a failing step at `{}` has nowhere to go (no `failure` transition and no \
                     `failed` status), so the task will wait there for a person",
                    s.id
                ),
            ),
            StatusKind::Gate | StatusKind::Queue if !explicit && is_last => ctx.warn(
                &id_ptr,
                format!(
                    "{} `{}` is the last status and no transition starts there, so tasks can only be aborted out of it",
                    s.kind.as_str(),
                    s.id
                ),
            ),
            _ => {}
        }
    }
}

fn warn_unreachable(ctx: &mut Ctx, parsed: &Parsed) {
    let p = &parsed.pipeline;
    let mut seen = vec![false; p.statuses.len()];
    let mut queue = VecDeque::from([0usize]);
    seen[0] = true;
    while let Some(i) = queue.pop_front() {
        for j in successors(p, i) {
            if !seen[j] {
                seen[j] = true;
                queue.push_back(j);
            }
        }
    }
    let first = &p.statuses[0].id;
    for (i, ptr) in parsed.status_ptrs.iter().enumerate() {
        if !seen[i] {
            ctx.warn(
                &join(ptr, "id"),
                format!(
                    "status `{}` cannot be reached from `{first}` (the first status); add a transition to it or remove it",
                    p.statuses[i].id
                ),
            );
        }
    }
}

/// Where a task at status `i` can go next: explicit and `*` transitions plus the defaults a
/// status of its kind can actually use.
fn successors(p: &Pipeline, i: usize) -> Vec<usize> {
    let status = &p.statuses[i];
    if status.kind.is_terminal() {
        return Vec::new();
    }
    let mut out: Vec<usize> = p
        .transitions
        .iter()
        .filter(|t| t.from == status.id || t.from == "*")
        .filter_map(|t| p.index_of(&t.to))
        .collect();
    let abort = p
        .first_of_kind(StatusKind::Cancelled)
        .or_else(|| p.first_of_kind(StatusKind::Failed));
    out.extend(abort.and_then(|s| p.index_of(&s.id)));
    // A default applies only while no unguarded explicit transition for its trigger wins.
    let overridden = |trigger: Trigger| {
        p.transitions.iter().any(|t| {
            (t.from == status.id || t.from == "*") && t.on == trigger && t.guards.is_empty()
        })
    };
    let next_default = match status.kind {
        StatusKind::Step => Some(Trigger::Success),
        StatusKind::Queue => Some(Trigger::Start),
        StatusKind::Gate => Some(Trigger::Approve),
        _ => None,
    };
    if i + 1 < p.statuses.len() && next_default.is_some_and(|t| !overridden(t)) {
        out.push(i + 1);
    }
    if status.kind == StatusKind::Step && !overridden(Trigger::Failure) {
        out.extend(
            p.first_of_kind(StatusKind::Failed)
                .and_then(|s| p.index_of(&s.id)),
        );
    }
    out
}

/// True when some transition (own or `*`) leaves `id` on `trigger`.
fn leaves_on(p: &Pipeline, id: &str, trigger: &Trigger) -> bool {
    p.transitions
        .iter()
        .any(|t| (t.from == id || t.from == "*") && &t.on == trigger)
}
