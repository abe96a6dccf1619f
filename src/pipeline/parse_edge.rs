//! Parsing transitions with their guards and hooks.

use super::locate::join;
use super::model::{Guard, Hook, Transition, Trigger};
use super::parse::{Ctx, opt_str, req_str, type_name, warn_unknown_keys};
use serde_json::Value;
use std::collections::BTreeSet;

const TRIGGERS: &str = "start, approve, reject, manual, success, failure, error, abort, pr_merged, pr_closed, ci_failed, changes_requested or outcome:<name>";
const GUARDS: &str =
    "max_visits, no_running_step, has_handoff_field, clean_worktree, budget or forge";
const HOOKS: &str = "notify, run, start_task, webhook, merge, push, pr or comment";

/// Parses transition number `index` (`ids`: the status ids in order); `from` values go into `leaving` even when the rest is broken.
pub(crate) fn parse_transition(
    ctx: &mut Ctx,
    v: &Value,
    ptr: &str,
    index: usize,
    ids: &[&str],
    leaving: &mut BTreeSet<String>,
) -> Option<Transition> {
    let what = format!("transition {}", index + 1);
    let Some(obj) = v.as_object() else {
        ctx.error(
            ptr,
            format!("{what} must be an object, not {}", type_name(v)),
        );
        return None;
    };
    warn_unknown_keys(
        ctx,
        obj,
        ptr,
        &["from", "to", "on", "label", "guards", "hooks"],
        &what,
    );
    let from = req_str(ctx, obj, ptr, "from", &what);
    let to = req_str(ctx, obj, ptr, "to", &what);
    let on = req_str(ctx, obj, ptr, "on", &what);
    let known = || ids.join(", ");
    let from = from.filter(|f| {
        leaving.insert(f.clone());
        let ok = f == "*" || ids.contains(&f.as_str());
        if !ok {
            ctx.error(
                &join(ptr, "from"),
                format!("{what}: unknown status `{f}` in `from` (statuses: {}; or `*` for every status)", known()),
            );
        }
        ok
    });
    let to = to.filter(|t| {
        let ok = ids.contains(&t.as_str());
        if t == "*" {
            ctx.error(
                &join(ptr, "to"),
                format!("{what}: `to` must name one status; `*` only works in `from`"),
            );
        } else if !ok {
            ctx.error(
                &join(ptr, "to"),
                format!(
                    "{what}: unknown status `{t}` in `to` (statuses: {})",
                    known()
                ),
            );
        }
        ok
    });
    let on = on.and_then(|s| {
        let trigger = Trigger::parse(&s);
        if trigger.is_none() {
            let reason = if matches!(s.as_str(), "resume" | "retry" | "dismiss" | "rerun") {
                format!("{what}: `{s}` is an engine action, not a pipeline trigger (use one of {TRIGGERS})")
            } else {
                format!("{what}: unknown trigger `{s}` (expected {TRIGGERS})")
            };
            ctx.error(&join(ptr, "on"), reason);
        }
        trigger
    });
    let label = opt_str(ctx, obj, ptr, "label");
    let guards = parse_list(
        ctx,
        obj.get("guards"),
        &join(ptr, "guards"),
        &what,
        "guard",
        parse_guard,
    );
    let hooks = parse_list(
        ctx,
        obj.get("hooks"),
        &join(ptr, "hooks"),
        &what,
        "hook",
        parse_hook,
    );
    Some(Transition {
        from: from?,
        to: to?,
        on: on?,
        label,
        guards: guards?,
        hooks: hooks?,
    })
}

/// Parses an optional array of single-key objects (`[{"max_visits": 3}]`).
fn parse_list<T>(
    ctx: &mut Ctx,
    v: Option<&Value>,
    ptr: &str,
    what: &str,
    noun: &str,
    item: fn(&mut Ctx, &str, &Value, &str, &str) -> Option<T>,
) -> Option<Vec<T>> {
    let items = match v {
        None | Some(Value::Null) => return Some(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(other) => {
            ctx.error(
                ptr,
                format!(
                    "{what}: `{noun}s` must be an array, not {}",
                    type_name(other)
                ),
            );
            return None;
        }
    };
    let mut out = Vec::new();
    let mut ok = true;
    for (i, entry) in items.iter().enumerate() {
        let eptr = join(ptr, &i.to_string());
        let single = entry.as_object().filter(|o| o.len() == 1);
        let Some((name, value)) = single.and_then(|o| o.iter().next()) else {
            ok = false;
            ctx.error(
                &eptr,
                format!(
                    "{what}: each {noun} is an object with one key, like {}",
                    example(noun)
                ),
            );
            continue;
        };
        match item(ctx, name, value, &join(&eptr, name), what) {
            Some(parsed) => out.push(parsed),
            None => ok = false,
        }
    }
    ok.then_some(out)
}

fn example(noun: &str) -> &'static str {
    if noun == "guard" {
        "{\"max_visits\": 3}"
    } else {
        "{\"notify\": {}}"
    }
}

fn parse_guard(ctx: &mut Ctx, name: &str, v: &Value, ptr: &str, what: &str) -> Option<Guard> {
    let guard = match name {
        "max_visits" => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .map(Guard::MaxVisits),
        "no_running_step" => v.as_bool().map(Guard::NoRunningStep),
        "clean_worktree" => v.as_bool().map(Guard::CleanWorktree),
        "forge" => v.as_bool().map(Guard::Forge),
        "has_handoff_field" => v
            .as_str()
            .filter(|s| !s.trim().is_empty())
            .map(|s| Guard::HasHandoffField(s.to_string())),
        "budget" => v.as_f64().filter(|b| *b >= 0.0).map(Guard::Budget),
        _ => {
            ctx.error_key(
                ptr,
                format!("{what}: unknown guard `{name}` (expected {GUARDS})"),
            );
            return None;
        }
    };
    if guard.is_none() {
        let wanted = match name {
            "max_visits" => "a whole number ≥ 0",
            "no_running_step" | "clean_worktree" | "forge" => "true or false",
            "has_handoff_field" => "a handoff field name",
            _ => "a number of dollars ≥ 0",
        };
        ctx.error(
            ptr,
            format!("{what}: guard `{name}` takes {wanted}, not {v}"),
        );
    }
    guard
}

fn parse_hook(ctx: &mut Ctx, name: &str, v: &Value, ptr: &str, what: &str) -> Option<Hook> {
    Some(match name {
        "notify" => Hook::Notify(v.clone()),
        "start_task" => match v.get("after") {
            None | Some(Value::Null) => Hook::StartTask(v.clone()),
            Some(Value::String(s)) if s == "siblings" => Hook::StartTask(v.clone()),
            Some(a) => {
                ctx.error(
                    &join(ptr, "after"),
                    format!(
                        "{what}: hook `start_task`: `after` takes \"siblings\" (wait for the tasks the start_task hooks before it make), not {a}"
                    ),
                );
                return None;
            }
        },
        "webhook" => Hook::Webhook(v.clone()),
        "merge" => Hook::Merge(v.clone()),
        "push" => Hook::Push(v.clone()),
        "comment" => match v.get("body") {
            Some(b) if !b.is_string() => {
                ctx.error(
                    ptr,
                    format!("{what}: hook `comment`: `body` takes a text template, not {b}"),
                );
                return None;
            }
            _ if !v.is_object() && !v.is_null() => {
                ctx.error(
                    ptr,
                    format!(
                        "{what}: hook `comment` takes an object like {{\"body\": \"…\"}}, not {v}"
                    ),
                );
                return None;
            }
            _ => match v.get("on") {
                Some(on) if on != "pr" && on != "issue" => {
                    ctx.error(
                        ptr,
                        format!("{what}: hook `comment`: `on` is \"pr\" or \"issue\", not {on}"),
                    );
                    return None;
                }
                _ => Hook::Comment(v.clone()),
            },
        },
        "pr" => match super::pr_options::PrOptions::parse(v) {
            Ok(_) => Hook::Pr(v.clone()),
            Err(why) => {
                ctx.error(ptr, format!("{what}: hook `pr`: {why}"));
                return None;
            }
        },
        "run" => match v.as_str().filter(|s| !s.trim().is_empty()) {
            Some(cmd) => Hook::Run(cmd.to_string()),
            None => {
                ctx.error(
                    ptr,
                    format!("{what}: hook `run` takes a command line string, not {v}"),
                );
                return None;
            }
        },
        _ => {
            ctx.error_key(
                ptr,
                format!("{what}: unknown hook `{name}` (expected {HOOKS})"),
            );
            return None;
        }
    })
}
