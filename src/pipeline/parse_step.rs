//! Parsing a status's `step` object into a [`StepSpec`].

use super::executor_spec::{ExecutorSpec, parse_executor};
use super::locate::join;
use super::model::{StepAction, StepSpec, bad_var_name, reserved_var};
use super::parse::{Ctx, opt_str, req_str, type_name};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

const ACTIONS: &[&str] = &["run", "script", "agent", "docker"];
const COMMON: &[&str] = &[
    "timeout", "retries", "env", "workdir", "executor", "requires",
];

/// The one of `known` that `word` is most likely a misspelling of: at most two edits away
/// (one for short words), and closer than any other.
pub(crate) fn did_you_mean<'a>(
    word: &str,
    known: impl IntoIterator<Item = &'a &'a str>,
) -> Option<&'a str> {
    let limit = if word.chars().count() <= 4 { 1 } else { 2 };
    known
        .into_iter()
        .map(|k| (strsim::damerau_levenshtein(word, k), *k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Parses the step of status `status`; `None` (with diagnostics) when it is unusable.
pub(crate) fn parse_step(
    ctx: &mut Ctx,
    v: &Value,
    ptr: &str,
    status: &str,
    known_agents: Option<&BTreeSet<String>>,
) -> Option<StepSpec> {
    let Some(obj) = v.as_object() else {
        ctx.error(
            ptr,
            format!("status `{status}`: `step` must be an object like {{\"run\": \"cargo test\"}}, not {}", type_name(v)),
        );
        return None;
    };
    let mut unknown = false;
    for key in obj.keys() {
        if !ACTIONS.contains(&key.as_str())
            && !COMMON.contains(&key.as_str())
            && !key.starts_with('_')
        {
            unknown = true;
            let message = match did_you_mean(key, ACTIONS.iter().chain(COMMON)) {
                Some(near) => {
                    format!("status `{status}`: unknown field `{key}` — did you mean `{near}`?")
                }
                None => format!(
                    "status `{status}`: unknown step kind `{key}` (a step has one of run, script, agent, docker, plus optional timeout, retries, env, workdir, executor, requires)"
                ),
            };
            ctx.error_key(&join(ptr, key), message);
        }
    }
    let actions: Vec<&str> = ACTIONS
        .iter()
        .copied()
        .filter(|a| obj.contains_key(*a))
        .collect();
    let action = match actions.as_slice() {
        [] => {
            if !unknown {
                ctx.error(
                    ptr,
                    format!("status `{status}`: the step says nothing to do; give it one of run, script, agent or docker"),
                );
            }
            None
        }
        [one] => parse_action(ctx, obj, ptr, one, status, known_agents),
        many => {
            ctx.error(
                ptr,
                format!("status `{status}`: a step has exactly one of run, script, agent, docker, but this one has {}", many.join(" and ")),
            );
            None
        }
    };
    let timeout = parse_timeout(ctx, obj, ptr, status);
    let retries = parse_retries(ctx, obj, ptr, status);
    let env = parse_env(ctx, obj, ptr, status);
    let workdir = opt_str(ctx, obj, ptr, "workdir");
    let executor = parse_step_executor(ctx, obj, ptr, status);
    let requires = parse_requires(ctx, obj, ptr, status);
    if let (Some(Some(_)), Some(StepAction::Docker { .. })) = (&executor, &action) {
        ctx.error(
            &join(ptr, "executor"),
            format!("status `{status}`: a `docker` step already runs in a container; use {{\"run\": ...}} with this `executor`, or drop it"),
        );
        return None;
    }
    Some(StepSpec {
        action: action?,
        timeout: timeout.ok()?,
        retries: retries?,
        env: env?,
        workdir,
        executor: executor?,
        requires: requires?,
    })
}

/// The step's `requires`: engine labels, each a lowercase word, each named once.
fn parse_requires(
    ctx: &mut Ctx,
    obj: &Map<String, Value>,
    ptr: &str,
    status: &str,
) -> Option<Vec<String>> {
    let rptr = join(ptr, "requires");
    let items = match obj.get("requires") {
        None | Some(Value::Null) => return Some(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(other) => {
            ctx.error(
                &rptr,
                format!(
                    "status `{status}`: `requires` must be an array of engine labels like [\"gpu\"], not {}",
                    type_name(other)
                ),
            );
            return None;
        }
    };
    let mut labels: Vec<String> = Vec::new();
    let mut ok = true;
    for (i, item) in items.iter().enumerate() {
        let at = join(&rptr, &i.to_string());
        let problem = match item.as_str() {
            None => Some(format!("must be a string, not {}", type_name(item))),
            Some(l) => super::label_problem(l).or_else(|| {
                labels
                    .iter()
                    .any(|x| x == l)
                    .then(|| format!("`{l}` is named twice"))
            }),
        };
        match problem {
            Some(p) => {
                ok = false;
                ctx.error(&at, format!("status `{status}`: requires: label {p}"));
            }
            None => labels.push(item.as_str().unwrap_or_default().to_string()),
        }
    }
    ok.then_some(labels)
}

/// The step's `executor` field: `Some(None)` when absent, `None` when unusable.
fn parse_step_executor(
    ctx: &mut Ctx,
    obj: &Map<String, Value>,
    ptr: &str,
    status: &str,
) -> Option<Option<ExecutorSpec>> {
    let v = match obj.get("executor") {
        None | Some(Value::Null) => return Some(None),
        Some(v) => v,
    };
    match parse_executor(v) {
        Ok(e) => Some(Some(e)),
        Err(p) => {
            let mut at = join(ptr, "executor");
            for piece in &p.at {
                at = join(&at, piece);
            }
            ctx.error(&at, format!("status `{status}`: {}", p.message));
            None
        }
    }
}

fn parse_action(
    ctx: &mut Ctx,
    obj: &Map<String, Value>,
    ptr: &str,
    key: &str,
    status: &str,
    known_agents: Option<&BTreeSet<String>>,
) -> Option<StepAction> {
    let what = format!("status `{status}`: step");
    if key == "docker" {
        let dptr = join(ptr, "docker");
        let Some(d) = obj.get("docker").and_then(Value::as_object) else {
            ctx.error(
                &dptr,
                format!("{what}: `docker` must be an object like {{\"image\": \"rust:1\", \"run\": \"cargo test\"}}"),
            );
            return None;
        };
        let image = req_str(ctx, d, &dptr, "image", &format!("{what} docker"));
        let run = req_str(ctx, d, &dptr, "run", &format!("{what} docker"));
        return Some(StepAction::Docker {
            image: image?,
            run: run?,
        });
    }
    let value = req_str(ctx, obj, ptr, key, &what)?;
    Some(match key {
        "run" => StepAction::Run(value),
        "script" => StepAction::Script(value),
        _ => {
            if let Some(known) = known_agents
                && !known.contains(&value)
            {
                let list: Vec<&str> = known.iter().map(String::as_str).collect();
                ctx.error(
                    &join(ptr, "agent"),
                    format!("status `{status}`: unknown agent profile `{value}` (known: {}); add .baton/agents/{value}.json or fix the name", list.join(", ")),
                );
            }
            StepAction::Agent(value)
        }
    })
}

/// `Err` when present but unusable; `Ok(None)` when absent.
fn parse_timeout(
    ctx: &mut Ctx,
    obj: &Map<String, Value>,
    ptr: &str,
    status: &str,
) -> Result<Option<std::time::Duration>, ()> {
    let tptr = join(ptr, "timeout");
    match obj.get("timeout") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => match humantime::parse_duration(s.trim()) {
            Ok(d) if !d.is_zero() => Ok(Some(d)),
            Ok(_) => {
                ctx.error(
                    &tptr,
                    format!(
                        "status `{status}`: timeout `{s}` is zero; leave it out for the default"
                    ),
                );
                Err(())
            }
            Err(e) => {
                ctx.error(&tptr, format!("status `{status}`: bad timeout `{s}` ({e}); write it like \"15m\" or \"1h 30m\""));
                Err(())
            }
        },
        Some(other) => {
            ctx.error(
                &tptr,
                format!(
                    "status `{status}`: timeout must be a string like \"15m\", not {}",
                    type_name(other)
                ),
            );
            Err(())
        }
    }
}

fn parse_retries(ctx: &mut Ctx, obj: &Map<String, Value>, ptr: &str, status: &str) -> Option<u32> {
    match obj.get("retries") {
        None | Some(Value::Null) => Some(0),
        Some(v) => {
            let n = v.as_u64().and_then(|n| u32::try_from(n).ok());
            if n.is_none() {
                ctx.error(
                    &join(ptr, "retries"),
                    format!("status `{status}`: `retries` must be a whole number ≥ 0, not {v}"),
                );
            }
            n
        }
    }
}

fn parse_env(
    ctx: &mut Ctx,
    obj: &Map<String, Value>,
    ptr: &str,
    status: &str,
) -> Option<BTreeMap<String, String>> {
    let eptr = join(ptr, "env");
    let vars = match obj.get("env") {
        None | Some(Value::Null) => return Some(BTreeMap::new()),
        Some(Value::Object(vars)) => vars,
        Some(other) => {
            ctx.error(
                &eptr,
                format!(
                    "status `{status}`: `env` must be an object of strings, not {}",
                    type_name(other)
                ),
            );
            return None;
        }
    };
    let mut env = BTreeMap::new();
    let mut ok = true;
    for (name, value) in vars {
        if let Some(why) = bad_var_name(name) {
            ok = false;
            ctx.error_key(
                &join(&eptr, name),
                format!(
                    "status `{status}`: `env` name {name:?} names no variable: {why} — rename it"
                ),
            );
            continue;
        }
        if reserved_var(name) {
            ok = false;
            ctx.error_key(
                &join(&eptr, name),
                format!("status `{status}`: `env` may not set `{name}`: baton sets it for the step itself — rename it"),
            );
            continue;
        }
        match value.as_str() {
            Some(s) => {
                env.insert(name.clone(), s.to_string());
            }
            None => {
                ok = false;
                ctx.error(
                    &join(&eptr, name),
                    format!(
                        "status `{status}`: env `{name}` must be a string, not {}",
                        type_name(value)
                    ),
                );
            }
        }
    }
    ok.then_some(env)
}
