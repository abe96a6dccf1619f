//! JSON shapes the API adds where the CLI prints only text: pipelines, validation results,
//! agent profiles.

use crate::agents::AgentCatalog;
use crate::pipeline::{Diagnostic, Pipeline, Severity, StatusKind, parse_pipeline};
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// One element of the pipeline list.
pub fn pipeline_item(p: &Pipeline) -> Value {
    let statuses: Vec<Value> = p
        .statuses
        .iter()
        .map(|s| json!({"id": s.id, "label": s.label, "kind": s.kind.as_str()}))
        .collect();
    let steps = p
        .statuses
        .iter()
        .filter(|s| s.kind == StatusKind::Step)
        .count();
    json!({
        "id": p.id,
        "name": p.name,
        "description": p.description,
        "statuses": statuses,
        "steps": steps,
        "triggers": p.triggers.len(),
    })
}

/// A diagnostic with its place.
pub fn diagnostic(d: &Diagnostic) -> Value {
    json!({
        "file": d.file,
        "line": d.line,
        "column": d.column,
        "severity": match d.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        },
        "message": d.message,
        "text": d.to_string(),
    })
}

/// The result of checking a pipeline file's text: `ok` is false on any error.
pub fn validation(file: &str, text: &str, agents: &BTreeSet<String>) -> Value {
    let (pipeline, diags) = parse_pipeline(file, text, Some(agents));
    let mut out: Vec<Value> = diags.iter().map(diagnostic).collect();
    let mut ok = diags.iter().all(|d| d.severity != Severity::Error);
    if let Some(p) = &pipeline
        && ok
    {
        let (_, trigger_errors) = crate::engine::triggers::parse(p);
        for e in trigger_errors {
            ok = false;
            out.push(json!({
                "file": file, "line": null, "column": null, "severity": "error",
                "message": e, "text": format!("{file}: error: {e}"),
            }));
        }
    }
    json!({
        "ok": ok,
        "pipeline": pipeline.as_ref().filter(|_| ok).map(|p| p.id.clone()),
        "diagnostics": out,
    })
}

/// What stands in for a value kept from the API's readers.
pub const MASK: &str = "***";

/// A pipeline as its file holds it, less what may be a credential: step and executor `env`
/// values and webhook `headers` values are masked, a webhook `url` keeps only its scheme and
/// host (as the hook's events show it), a git remote loses its user and password. Answers of
/// the API reach agents' contexts and logs; the pipeline file itself is where these live.
pub fn masked_pipeline(p: &Pipeline) -> Value {
    let mut v = serde_json::to_value(p).unwrap_or(Value::Null);
    mask(&mut v, None);
    v
}

fn mask(v: &mut Value, key: Option<&str>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map.iter_mut() {
                match (key, k.as_str(), &mut *child) {
                    (_, "env" | "headers", Value::Object(vars)) => {
                        for value in vars.values_mut() {
                            *value = Value::String(MASK.into());
                        }
                    }
                    (Some("webhook"), "url", Value::String(url)) => {
                        *url = crate::engine::safe_url(url);
                    }
                    (_, "git_remote", Value::String(url)) => {
                        *url = crate::exec::executor::remote_git::display_url(url);
                    }
                    _ => mask(child, Some(k)),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| mask(i, key)),
        _ => {}
    }
}

/// Every agent profile: id, backend, where it runs, its file; and the files' problems.
pub fn agents(cat: &AgentCatalog) -> Value {
    let profiles: Vec<Value> = cat
        .profiles
        .iter()
        .map(|p| {
            json!({
                "id": p.id,
                "name": p.name,
                "backend": p.backend.as_str(),
                // A server's URL may carry a user and password.
                "target": crate::exec::executor::remote_git::display_url(&p.target()),
                "file": p.file,
                "outcomes": p.outcomes,
            })
        })
        .collect();
    json!({
        "agents": profiles,
        "diagnostics": cat.diagnostics.iter().map(diagnostic).collect::<Vec<_>>(),
    })
}
