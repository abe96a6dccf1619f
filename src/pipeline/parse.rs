//! Second parsing phase: walk a `serde_json::Value` into a [`Pipeline`], reporting every
//! problem (not just the first) at the line and column of the offending element.

use super::load::{Diagnostic, Severity};
use super::locate::{Locator, join};
use super::model::{Pipeline, Status, StatusKind};
use super::parse_edge::parse_transition;
use super::parse_step::parse_step;
use serde_json::{Map, Value};
use std::cell::OnceCell;
use std::collections::BTreeSet;

/// Collects diagnostics for one file, placing each at a JSON pointer's position.
pub(crate) struct Ctx<'a> {
    file: &'a str,
    text: &'a str,
    /// Where each value of `text` starts: found at the first problem to place, as most
    /// files have none.
    loc: OnceCell<Locator>,
    pub(crate) diags: Vec<Diagnostic>,
}

impl<'a> Ctx<'a> {
    pub(crate) fn new(file: &'a str, text: &'a str) -> Self {
        Self {
            file,
            text,
            loc: OnceCell::new(),
            diags: Vec::new(),
        }
    }

    fn loc(&self) -> &Locator {
        self.loc.get_or_init(|| Locator::new(self.text))
    }

    /// An error located at the value at `ptr`.
    pub(crate) fn error(&mut self, ptr: &str, message: impl Into<String>) {
        let pos = self.loc().value(ptr);
        self.push(pos, Severity::Error, message.into());
    }

    /// An error located at the key naming the member at `ptr`.
    pub(crate) fn error_key(&mut self, ptr: &str, message: impl Into<String>) {
        let pos = self.loc().key(ptr);
        self.push(pos, Severity::Error, message.into());
    }

    /// A warning located at the value at `ptr`.
    pub(crate) fn warn(&mut self, ptr: &str, message: impl Into<String>) {
        let pos = self.loc().value(ptr);
        self.push(pos, Severity::Warning, message.into());
    }

    /// A warning located at the key naming the member at `ptr`.
    pub(crate) fn warn_key(&mut self, ptr: &str, message: impl Into<String>) {
        let pos = self.loc().key(ptr);
        self.push(pos, Severity::Warning, message.into());
    }

    pub(crate) fn has_errors(&self) -> bool {
        self.diags.iter().any(Diagnostic::is_error)
    }

    fn push(&mut self, pos: Option<(usize, usize)>, severity: Severity, message: String) {
        self.diags.push(Diagnostic {
            file: self.file.to_string(),
            line: pos.map(|p| p.0),
            column: pos.map(|p| p.1),
            severity,
            message,
        });
    }
}

/// A parsed pipeline plus what the whole-pipeline checks need to locate their findings.
pub(crate) struct Parsed {
    pub(crate) pipeline: Pipeline,
    /// JSON pointer of each status, parallel to `pipeline.statuses`.
    pub(crate) status_ptrs: Vec<String>,
    /// JSON pointer of each transition, parallel to `pipeline.transitions`.
    pub(crate) transition_ptrs: Vec<String>,
    /// The `from` of every transition object, even one broken elsewhere.
    pub(crate) leaving: BTreeSet<String>,
    /// Some status had an unreadable kind, so kind-based checks would only add noise.
    pub(crate) kinds_uncertain: bool,
}

/// Walks the document root. `None` when it is too broken to say anything more.
pub(crate) fn parse_root(
    ctx: &mut Ctx,
    root: &Value,
    known_agents: Option<&BTreeSet<String>>,
) -> Option<Parsed> {
    let Some(obj) = root.as_object() else {
        ctx.error(
            "",
            format!(
                "a pipeline file holds one JSON object, not {}",
                type_name(root)
            ),
        );
        return None;
    };
    warn_unknown_keys(
        ctx,
        obj,
        "",
        &[
            "id",
            "name",
            "description",
            "statuses",
            "transitions",
            "triggers",
        ],
        "pipeline",
    );
    let id = req_str(ctx, obj, "", "id", "the pipeline").unwrap_or_default();
    if let Some(why) = super::id_problem(&id) {
        ctx.error("/id", format!("pipeline {why}"));
    }
    let name = opt_str(ctx, obj, "", "name").unwrap_or_else(|| id.clone());
    let description = opt_str(ctx, obj, "", "description").unwrap_or_default();

    let mut parsed = Parsed {
        pipeline: Pipeline {
            id,
            name,
            description,
            statuses: Vec::new(),
            transitions: Vec::new(),
            triggers: opt_array(ctx, obj, "", "triggers")
                .cloned()
                .unwrap_or_default(),
        },
        status_ptrs: Vec::new(),
        transition_ptrs: Vec::new(),
        leaving: BTreeSet::new(),
        kinds_uncertain: false,
    };
    super::parse_trigger::check(ctx, &parsed.pipeline.triggers);

    let mut ids = BTreeSet::new();
    match obj.get("statuses") {
        None => ctx.error(
            "",
            "missing required field `statuses` (the board's columns)",
        ),
        Some(Value::Array(items)) if items.is_empty() => ctx.error(
            "/statuses",
            "`statuses` is empty; a pipeline needs at least one",
        ),
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                let ptr = join("/statuses", &i.to_string());
                let Some((status, certain)) = parse_status(ctx, item, &ptr, i, known_agents) else {
                    continue;
                };
                parsed.kinds_uncertain |= !certain;
                if !ids.insert(status.id.clone()) {
                    ctx.error(
                        &join(&ptr, "id"),
                        format!(
                            "duplicate status id `{}`; status ids must be unique",
                            status.id
                        ),
                    );
                    continue;
                }
                parsed.pipeline.statuses.push(status);
                parsed.status_ptrs.push(ptr);
            }
        }
        Some(other) => ctx.error(
            "/statuses",
            format!("`statuses` must be an array, not {}", type_name(other)),
        ),
    }

    if let Some(items) = opt_array(ctx, obj, "", "transitions") {
        // In column order, for messages that list them.
        let order: Vec<String> = parsed
            .pipeline
            .statuses
            .iter()
            .map(|s| s.id.clone())
            .collect();
        let known: Vec<&str> = order.iter().map(String::as_str).collect();
        for (i, item) in items.iter().enumerate() {
            let ptr = join("/transitions", &i.to_string());
            if let Some(t) = parse_transition(ctx, item, &ptr, i, &known, &mut parsed.leaving) {
                parsed.pipeline.transitions.push(t);
                parsed.transition_ptrs.push(ptr);
            }
        }
    }
    Some(parsed)
}

/// One status. The flag is false when its kind could not be determined.
fn parse_status(
    ctx: &mut Ctx,
    v: &Value,
    ptr: &str,
    index: usize,
    known_agents: Option<&BTreeSet<String>>,
) -> Option<(Status, bool)> {
    let Some(obj) = v.as_object() else {
        ctx.error(
            ptr,
            format!(
                "status {} must be an object, not {}",
                index + 1,
                type_name(v)
            ),
        );
        return None;
    };
    let what = format!("status {}", index + 1);
    let id = req_str(ctx, obj, ptr, "id", &what);
    let name = id.clone().unwrap_or(what);
    warn_unknown_keys(
        ctx,
        obj,
        ptr,
        &["id", "label", "kind", "step"],
        &format!("status `{name}`"),
    );
    if id.as_deref() == Some("*") {
        ctx.error(
            &join(ptr, "id"),
            "`*` is reserved for \"every status\" in transitions; pick another status id",
        );
    } else if let Some(why) = id.as_deref().and_then(super::id_problem) {
        ctx.error(&join(ptr, "id"), format!("status {why}"));
    }
    let label = opt_str(ctx, obj, ptr, "label");
    let kind_ptr = join(ptr, "kind");
    let kind = opt_str(ctx, obj, ptr, "kind");
    let parsed_kind = kind.as_deref().map(|k| (k, kind_from_str(k)));
    if let Some((k, None)) = parsed_kind {
        ctx.error(
            &kind_ptr,
            format!("status `{name}`: unknown kind `{k}` (expected queue, gate, step, done, failed or cancelled)"),
        );
    }
    let step_ptr = join(ptr, "step");
    let step = obj
        .get("step")
        .and_then(|s| parse_step(ctx, s, &step_ptr, &name, known_agents));
    let has_step = obj.contains_key("step");
    let kind = match (parsed_kind, has_step) {
        (Some((_, Some(StatusKind::Step))) | None, true) => Some(StatusKind::Step),
        // Unknown kind: already reported.
        (Some((_, None)), _) => None,
        (Some((k, Some(_))), true) => {
            ctx.error(
                &kind_ptr,
                format!("status `{name}` has a `step` but kind `{k}`; a status with a step is a step status, so remove `kind`"),
            );
            None
        }
        (Some((_, Some(StatusKind::Step))), false) => {
            ctx.error(
                &kind_ptr,
                format!("status `{name}` has kind `step` but no `step` object saying what to run"),
            );
            None
        }
        (Some((_, kind)), false) => kind,
        (None, false) => {
            ctx.error(
                ptr,
                format!("status `{name}` needs a `kind` (queue, gate, done, failed, cancelled) or a `step`"),
            );
            None
        }
    };
    let id = id?;
    let label = label.unwrap_or_else(|| id.clone());
    let certain = kind.is_some();
    let status = Status {
        id,
        label,
        kind: kind.unwrap_or(StatusKind::Gate),
        step,
    };
    Some((status, certain))
}

fn kind_from_str(s: &str) -> Option<StatusKind> {
    Some(match s {
        "queue" => StatusKind::Queue,
        "gate" => StatusKind::Gate,
        "step" => StatusKind::Step,
        "done" => StatusKind::Done,
        "failed" => StatusKind::Failed,
        "cancelled" => StatusKind::Cancelled,
        _ => return None,
    })
}

/// "a string", "a number", … for messages.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A required, non-empty string member; reports a missing, empty or mistyped one.
pub(crate) fn req_str(
    ctx: &mut Ctx,
    obj: &Map<String, Value>,
    ptr: &str,
    key: &str,
    what: &str,
) -> Option<String> {
    match obj.get(key) {
        None => {
            ctx.error(ptr, format!("{what}: missing required field `{key}`"));
            None
        }
        Some(Value::String(s)) if s.trim().is_empty() => {
            ctx.error(&join(ptr, key), format!("{what}: `{key}` is empty"));
            None
        }
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            ctx.error(
                &join(ptr, key),
                format!("{what}: `{key}` must be a string, not {}", type_name(other)),
            );
            None
        }
    }
}

/// An optional string member; reports a mistyped one.
pub(crate) fn opt_str(
    ctx: &mut Ctx,
    obj: &Map<String, Value>,
    ptr: &str,
    key: &str,
) -> Option<String> {
    match obj.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => {
            ctx.error(
                &join(ptr, key),
                format!("`{key}` must be a string, not {}", type_name(other)),
            );
            None
        }
    }
}

/// An optional array member; reports a mistyped one.
pub(crate) fn opt_array<'v>(
    ctx: &mut Ctx,
    obj: &'v Map<String, Value>,
    ptr: &str,
    key: &str,
) -> Option<&'v Vec<Value>> {
    match obj.get(key)? {
        Value::Array(items) => Some(items),
        Value::Null => None,
        other => {
            ctx.error(
                &join(ptr, key),
                format!("`{key}` must be an array, not {}", type_name(other)),
            );
            None
        }
    }
}

/// Warns about members nobody reads (usually typos). Keys starting with `_` or `$` are
/// comments/schemas and pass silently.
pub(crate) fn warn_unknown_keys(
    ctx: &mut Ctx,
    obj: &Map<String, Value>,
    ptr: &str,
    known: &[&str],
    what: &str,
) {
    for key in obj.keys() {
        if !known.contains(&key.as_str()) && !key.starts_with(['_', '$']) {
            ctx.warn_key(
                &join(ptr, key),
                format!(
                    "{what}: unknown field `{key}` is ignored (known: {})",
                    known.join(", ")
                ),
            );
        }
    }
}
