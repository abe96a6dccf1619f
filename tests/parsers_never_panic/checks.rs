//! What every parse must satisfy, whatever its input.

use baton::agents::{TemplateVars, parse_profile, render_argv, render_prompt};
use baton::handoff::{self, RAW_CONTEXT_LIMIT};
use baton::pipeline::{
    Diagnostic, Facts, Pipeline, Trigger, decide, decide_move, move_options, normalize_outcome,
    parse_pipeline,
};
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};

/// A located diagnostic points inside the text: a real line, and a column at most one past
/// that line's last character.
pub fn assert_inside(text: &str, d: &Diagnostic) {
    let (Some(line), Some(col)) = (d.line, d.column) else {
        return;
    };
    let lines: Vec<&str> = text.split('\n').collect();
    assert!(line >= 1 && line <= lines.len(), "line out of range: {d}");
    let width = lines[line - 1].chars().count();
    assert!(col >= 1 && col <= width + 1, "column out of range: {d}");
}

/// What every pipeline parse must satisfy, whatever the text.
pub fn check_pipeline(text: &str, known_agents: Option<&BTreeSet<String>>) -> Option<Pipeline> {
    let (pipeline, diags) = parse_pipeline("p.json", text, known_agents);
    let errors = diags.iter().filter(|d| d.is_error()).count();
    assert_eq!(pipeline.is_some(), errors == 0, "{diags:#?}");
    for d in &diags {
        assert_eq!(d.file, "p.json");
        assert!(!d.message.trim().is_empty());
        assert_inside(text, d);
    }
    // The loaders drop a leading byte-order mark, as editors on Windows write one.
    if serde_json::from_str::<Value>(text.strip_prefix('\u{feff}').unwrap_or(text)).is_err() {
        // Text that is not JSON gets exactly one error, placed where the JSON broke.
        assert_eq!(diags.len(), 1, "{diags:#?}");
        assert!(
            diags[0].line.is_some() && diags[0].column.is_some(),
            "{}",
            diags[0]
        );
    } else {
        // Everything found in a JSON document is placed at the element it is about.
        for d in &diags {
            assert!(d.line.is_some() && d.column.is_some(), "unlocated: {d}");
        }
    }
    if let Some(p) = &pipeline {
        exercise_pipeline(p);
    }
    pipeline
}

/// A pipeline that loaded can be stored as a task's snapshot and read back unchanged, and
/// every decision on it is answered.
pub fn exercise_pipeline(p: &Pipeline) {
    let stored = serde_json::to_string(p).expect("a pipeline serialises");
    let back: Pipeline = serde_json::from_str(&stored)
        .unwrap_or_else(|e| panic!("the snapshot {stored} does not read back: {e}"));
    assert_eq!(&back, p);

    let visits: HashMap<String, u32> = p.statuses.iter().map(|s| (s.id.clone(), 2)).collect();
    let fields = ["what_was_done".to_string()];
    let facts = Facts {
        visits: &visits,
        step_running: false,
        handoff_fields: &fields,
        worktree_clean: Some(false),
        run_cost: 1.5,
        forge: true,
    };
    let mut triggers: Vec<Trigger> = [
        "start", "approve", "reject", "manual", "success", "failure", "error", "abort",
    ]
    .iter()
    .filter_map(|t| Trigger::parse(t))
    .chain([Trigger::Resume, Trigger::Retry])
    .collect();
    triggers.extend(p.transitions.iter().map(|t| t.on.clone()));
    for from in p.statuses.iter().map(|s| s.id.as_str()).chain(["nowhere"]) {
        for trigger in &triggers {
            if let Ok(d) = decide(p, from, trigger, &facts) {
                assert!(
                    p.status(&d.to).is_some(),
                    "decided an unknown target {}",
                    d.to
                );
            }
        }
        for to in &p.statuses {
            let _ = decide_move(p, from, &to.id, &facts);
        }
        let _ = move_options(p, from, &facts);
    }
}

/// What every profile parse must satisfy, whatever the text.
pub fn check_profile(text: &str) {
    let (profile, diags) = parse_profile(".baton/agents/x.json", text);
    let errors = diags.iter().filter(|d| d.is_error()).count();
    assert_eq!(profile.is_some(), errors == 0, "{diags:#?}");
    for d in &diags {
        assert!(!d.message.trim().is_empty());
        assert_inside(text, d);
    }
    // The loaders drop a leading byte-order mark, as editors on Windows write one.
    if serde_json::from_str::<Value>(text.strip_prefix('\u{feff}').unwrap_or(text)).is_err() {
        assert_eq!(diags.len(), 1, "{diags:#?}");
        let d = &diags[0];
        assert!(d.line.is_some_and(|l| l >= 1), "{d}");
        assert!(d.column.is_some_and(|c| c >= 1), "{d}");
    }
    if let Some(p) = profile {
        assert!(!p.id.trim().is_empty());
        assert!(!p.outcomes.is_empty());
        for o in &p.outcomes {
            assert!(!o.is_empty());
            assert_eq!(&normalize_outcome(o), o, "outcomes are stored normalised");
            assert!(p.declares(o));
            if o.is_ascii() {
                assert!(p.declares(&o.to_ascii_uppercase().replace('_', "-")), "{o}");
            }
        }
        let _ = (p.base_url(), p.target());
        let vars = TemplateVars {
            title: "{{prompt}}".into(),
            prompt: "{{".into(),
            ..TemplateVars::default()
        };
        let message = render_prompt(&p.prompt_template, &vars);
        assert_eq!(render_argv(&p.argv, &vars, &message).len(), p.argv.len());
    }
}

/// What every extraction must satisfy, whatever the answer.
pub fn check_handoff(raw: &str) -> handoff::Handoff {
    let h = handoff::extract(raw);
    assert_eq!(h.raw, raw);
    assert_eq!(h.structured, !h.fields.is_empty());
    for field in [
        &h.fields.what_was_done,
        &h.fields.decisions_made,
        &h.fields.open_questions,
        &h.fields.next_agent_context,
    ]
    .into_iter()
    .flatten()
    {
        assert!(!field.is_empty() && field.trim() == field, "{field:?}");
    }
    if let Some(o) = &h.outcome {
        assert!(!o.is_empty());
        assert_eq!(&normalize_outcome(o), o, "the outcome is normalised");
    }
    let header = handoff::context_header(&h, "plan");
    if !h.structured {
        let body = header
            .strip_prefix("[earlier output truncated: ")
            .and_then(|rest| rest.split_once('\n'))
            .map_or(header.as_str(), |(_, body)| body);
        assert!(body.len() <= RAW_CONTEXT_LIMIT, "{} bytes", body.len());
    }
    assert!(handoff::metadata(&h).is_object());
    assert_eq!(handoff::parse_outcome(raw), h.outcome);
    h
}
