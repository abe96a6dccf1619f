//! `baton show`: a task with its steps, costs, history (with the guards and hooks of each
//! move) and notable events.

use super::tasks::one_line;
use super::{Outcome, exit};
use crate::engine::{MAX_TITLE, Reader};
use crate::store::{StepRun, TaskState, rfc3339};
use crate::workspace::Workspace;

fn step_symbol(s: &StepRun) -> &'static str {
    use crate::store::StepState::*;
    match s.state {
        Succeeded => "✓",
        Failed | TimedOut => "✗",
        Running => "●",
        Pending => "○",
        Interrupted => "⏸",
        Cancelled => "–",
    }
}

pub(super) fn show(ws: &Workspace, db: &Reader, id: i64, as_json: bool) -> Outcome {
    if as_json {
        outln!("{}", db.show_json(id)?);
        return Ok(exit::OK);
    }
    let t = db.task(id)?;
    let pipeline = db.pipeline(&t)?;
    let label = pipeline
        .status(&t.status)
        .map_or(t.status.clone(), |s| one_line(&s.label, 80));
    outln!("#{} {}", t.id, one_line(&t.title, MAX_TITLE));
    outln!(
        "pipeline {} · status {} ({}) · {}",
        t.pipeline_id,
        t.status,
        label,
        t.state
    );
    if db.is_archived(id)? {
        outln!("archived — `baton unarchive {id}` brings it back to the board");
    }
    if let Some(b) = &t.breakpoint {
        outln!("breakpoint before {b}");
    }
    // A queued step that no running engine may start: which labels it waits for.
    if t.state == crate::store::TaskState::Queued
        && let Some(step) = pipeline.status(&t.status).and_then(|s| s.step.as_ref())
        && let Some(why) = crate::engine::engines::label_wait(&step.requires, &db.engines()?)
    {
        outln!(
            "{why} — `baton engine --labels {}` starts one",
            step.requires.join(",")
        );
    }
    let blockers = db.blockers(id)?;
    if !blockers.is_empty() {
        let list: Vec<String> = blockers
            .iter()
            .map(|b| format!("{} ({})", b.id, b.state))
            .collect();
        // Held, or not started yet: it waits. Started since: it waited.
        let waiting = db.start_waits(id)? || t.state == crate::store::TaskState::Idle;
        let verb = if waiting {
            "starts when these are done"
        } else {
            "waited for"
        };
        outln!("⛓ {verb}: {}", list.join(", "));
    }
    if super::why::paused(&t) {
        outln!(
            "paused before {} — context {} · `baton continue {id}` runs it",
            t.status,
            ws.context_dir(id).display()
        );
    }
    if let Some(branch) = &t.branch {
        let base = t.base_branch.as_deref().unwrap_or("?");
        match &t.worktree {
            Some(wt) => outln!("branch {branch} (from {base}) · worktree {wt}"),
            None => outln!("branch {branch} (from {base})"),
        }
    }
    if !t.prompt.is_empty() {
        // A long prompt is cut: the rest is one `show --json` away.
        const PROMPT_LINES: usize = 40;
        let lines: Vec<&str> = t.prompt.trim_end().lines().collect();
        outln!();
        for line in lines.iter().take(PROMPT_LINES) {
            outln!("{}", one_line(line, 200));
        }
        if lines.len() > PROMPT_LINES {
            outln!(
                "… {} more line(s); `baton show {id} --json` has the whole prompt",
                lines.len() - PROMPT_LINES
            );
        }
    }
    let steps = db.steps(id)?;
    if !steps.is_empty() {
        outln!("\nsteps:");
        for (i, s) in steps.iter().enumerate() {
            let mut line = format!(
                "  {:>2}. {} {:<14} attempt {} {}",
                i + 1,
                step_symbol(s),
                s.status,
                s.attempt,
                s.state
            );
            if let Some(c) = s.exit_code {
                line.push_str(&format!(" exit {c}"));
            }
            if let Some(o) = &s.outcome {
                line.push_str(&format!(" outcome {o}"));
            }
            if let Some(c) = s.cost {
                line.push_str(&format!(" ${c:.4}"));
            }
            if let Some(e) = &s.error {
                line.push_str(&format!(" — {}", one_line(e, 300)));
            }
            outln!("{line}");
        }
    }
    let run = t.run_id.unwrap_or_default();
    let spent: f64 = steps
        .iter()
        .filter(|s| s.run_id == run)
        .filter_map(|s| s.cost)
        .sum();
    if steps.iter().any(|s| s.cost.is_some()) {
        outln!("cost ${spent:.4} this run");
    }
    outln!("\nhistory:");
    for h in db.history(id)? {
        let from = h.from.as_deref().unwrap_or("·");
        let reason = h
            .reason
            .as_ref()
            .map(|r| format!(" — {}", one_line(r, 300)))
            .unwrap_or_default();
        outln!(
            "  {} {} → {} ({}, {}){}",
            &rfc3339(h.at)[..19],
            from,
            h.to,
            h.trigger,
            h.actor,
            reason
        );
        for line in super::why::history_lines(&h) {
            outln!("      {}", one_line(&line, 300));
        }
    }
    let events = db.events(id)?;
    let notable: Vec<_> = events.iter().filter(|e| e.level != "info").collect();
    if !notable.is_empty() {
        outln!("\nevents:");
        for e in notable.iter().rev().take(10).rev() {
            outln!(
                "  {} {} {}",
                &rfc3339(e.at)[..19],
                e.level,
                one_line(&e.summary, 300)
            );
        }
    }
    if t.state == TaskState::Running && db.unwatched(ws) {
        eprintln!("\n{}", super::tasks::unwatched(1));
    }
    if t.state == TaskState::Interrupted {
        outln!(
            "\ninterrupted — `baton resume {id}` re-runs the step, `baton retry {id}` starts over"
        );
    }
    Ok(exit::OK)
}
