//! Checks a pipeline's `triggers` where the file is read, so a problem carries its
//! file:line:col like every other: unknown fields (with a "did you mean"), and cron patterns
//! explained by the field they are about ("minute 61 is out of range 0–59"), and `after`.

use super::locate::join;
use super::parse::Ctx;
use super::parse_step::did_you_mean;
use serde_json::Value;

const FIELDS: &[&str] = &[
    "schedule",
    "push",
    "task_done",
    "issue",
    "title",
    "prompt",
    "after",
];
const KINDS: &[&str] = &["schedule", "push", "task_done", "issue"];
/// The fields of an `issue` trigger's object.
const ISSUE_FIELDS: &[&str] = &["labels"];

/// The cron fields of a five-field pattern, with their ranges; a six-field one has
/// `second` (0–59) first.
const CRON: &[(&str, u32, u32)] = &[
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day of month", 1, 31),
    ("month", 1, 12),
    ("day of week", 0, 7),
];

const CRON_SHAPE: &str = "five fields (minute hour day-of-month month day-of-week), or six with seconds first, like \"0 3 * * *\"";

/// Reports the problems of `triggers` (at `/triggers`).
pub(crate) fn check(ctx: &mut Ctx, triggers: &[Value]) {
    for (i, raw) in triggers.iter().enumerate() {
        let ptr = format!("/triggers/{i}");
        let at = format!("trigger {}", i + 1);
        let Some(obj) = raw.as_object() else {
            ctx.error(
                &ptr,
                format!("{at}: a trigger is an object like {{\"schedule\": \"0 3 * * *\"}}"),
            );
            continue;
        };
        for key in obj.keys().filter(|k| !k.starts_with(['_', '$'])) {
            if FIELDS.contains(&key.as_str()) {
                continue;
            }
            let message = match did_you_mean(key, FIELDS) {
                Some(near) => format!("{at}: unknown field `{key}` — did you mean `{near}`?"),
                None => format!(
                    "{at}: unknown field `{key}` (a trigger has one of schedule, push, task_done, issue, plus title, prompt and after)"
                ),
            };
            ctx.error_key(&join(&ptr, key), message);
        }
        let kinds = KINDS.iter().filter(|k| obj.contains_key(**k)).count();
        if kinds != 1 {
            ctx.error(
                &ptr,
                format!("{at}: a trigger has exactly one of schedule, push, task_done or issue"),
            );
        }
        if let Some(a) = obj.get("after")
            && a.as_str() != Some("previous")
        {
            let why = trigger_after_problem(a);
            ctx.error(&join(&ptr, "after"), format!("{at}: {why}"));
        }
        if let Some(spec) = obj.get("issue") {
            check_issue(ctx, &join(&ptr, "issue"), &at, spec);
        }
        if let Some(spec) = obj.get("schedule") {
            let at_value = join(&ptr, "schedule");
            match spec.as_str() {
                Some(s) => {
                    if let Some(why) = cron_problem(s) {
                        ctx.error(&at_value, format!("{at}: schedule `{s}`: {why}"));
                    }
                }
                None => ctx.error(
                    &at_value,
                    format!("{at}: schedule must be a cron string like \"0 3 * * *\""),
                ),
            }
        }
    }
}

/// What is wrong with a trigger's `after` value `v` (anything but `"previous"`).
pub fn trigger_after_problem(v: &Value) -> String {
    format!("after takes \"previous\" (wait for the task this trigger made last), not {v}")
}

/// An `issue` trigger: `{"labels": ["baton"]}`, at least one label, each a name.
fn check_issue(ctx: &mut Ctx, ptr: &str, at: &str, spec: &Value) {
    const SHAPE: &str = "{\"labels\": [\"baton\"]}";
    let Some(obj) = spec.as_object() else {
        ctx.error(ptr, format!("{at}: issue is an object like {SHAPE}"));
        return;
    };
    for key in obj.keys().filter(|k| !ISSUE_FIELDS.contains(&k.as_str())) {
        let message = match did_you_mean(key, ISSUE_FIELDS) {
            Some(near) => format!("{at}: issue has no field `{key}` — did you mean `{near}`?"),
            None => format!("{at}: issue has no field `{key}` (it takes labels: {SHAPE})"),
        };
        ctx.error_key(&join(ptr, key), message);
    }
    let labels_at = join(ptr, "labels");
    match obj.get("labels") {
        None => ctx.error(
            ptr,
            format!("{at}: issue needs the labels that make an issue a task, like {SHAPE}"),
        ),
        Some(Value::Array(list)) if !list.is_empty() => {
            for (i, l) in list.iter().enumerate() {
                if l.as_str().is_none_or(|l| l.trim().is_empty()) {
                    ctx.error(
                        &join(&labels_at, &i.to_string()),
                        format!(
                            "{at}: issue label {} must be a label's name, not {l}",
                            i + 1
                        ),
                    );
                }
            }
        }
        Some(v) => ctx.error(
            &labels_at,
            format!(
                "{at}: issue labels must be a list of one or more names like [\"baton\"], not {v}"
            ),
        ),
    }
}

/// What is wrong with the cron pattern `spec`, naming the field; `None` when it is good.
pub fn cron_problem(spec: &str) -> Option<String> {
    let fields: Vec<&str> = spec.split_whitespace().collect();
    let named: Vec<(&str, u32, u32)> = match fields.len() {
        5 => CRON.to_vec(),
        6 => std::iter::once(("second", 0, 59))
            .chain(CRON.iter().copied())
            .collect(),
        n => return Some(format!("it has {n} fields; a schedule has {CRON_SHAPE}")),
    };
    for (text, (name, lo, hi)) in fields.iter().zip(named) {
        // Every number in the field: list items, range ends and steps' bases.
        for item in text.split(',') {
            let (range, step) = match item.split_once('/') {
                Some((r, s)) => (r, Some(s)),
                None => (item, None),
            };
            if let Some(step) = step
                && step.parse::<u32>().map_or(true, |n| n == 0)
            {
                return Some(format!(
                    "{name}: the step in `{item}` must be a whole number above 0"
                ));
            }
            for end in range.split('-') {
                if let Ok(n) = end.parse::<u32>()
                    && !(lo..=hi).contains(&n)
                {
                    return Some(format!("{name} {n} is out of range {lo}–{hi}"));
                }
            }
        }
    }
    // Names (MON, JAN) and special characters are left to the cron parser itself.
    croner::parser::CronParser::new()
        .parse(spec)
        .err()
        .map(|e| format!("not a valid cron pattern ({e}); a schedule has {CRON_SHAPE}"))
}

#[cfg(test)]
mod tests {
    use super::cron_problem;

    #[test]
    fn cron_problems_name_the_field() {
        for (spec, want) in [
            ("61 * * * *", "minute 61 is out of range 0–59"),
            ("0 24 * * *", "hour 24 is out of range 0–23"),
            ("0 3 0 * *", "day of month 0 is out of range 1–31"),
            ("0 3 * 13 *", "month 13 is out of range 1–12"),
            ("0 3 * * 1-9", "day of week 9 is out of range 0–7"),
            ("75 0 3 * * *", "second 75 is out of range 0–59"),
            (
                "*/0 * * * *",
                "minute: the step in `*/0` must be a whole number above 0",
            ),
            (
                "every tuesday",
                "it has 2 fields; a schedule has five fields",
            ),
        ] {
            let got = cron_problem(spec).unwrap_or_default();
            assert!(got.starts_with(want), "{spec}: {got}");
        }
        for good in [
            "0 3 * * *",
            "*/5 9-17 * * MON-FRI",
            "30 0 3 * * *",
            "0 0 1,15 * *",
        ] {
            assert_eq!(cron_problem(good), None, "{good}");
        }
    }
}
