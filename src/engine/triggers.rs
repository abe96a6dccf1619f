//! Pipeline triggers: tasks created and started on their own — on a cron
//! schedule, on a new commit to a matching branch, or when another task reaches done.
//! Every firing has a dedupe key recorded in the store, so a restart never fires twice.
//! With `"after": "previous"` each task waits for the one its trigger made before it.

use super::actions::{Action, Outside, Request, apply, create_and_start, create_task_by};
use super::request::NewTask;
use crate::pipeline::{Pipeline, StatusKind};
use crate::store::{Db, NewEvent, StoreError, Task};
use chrono::{DateTime, Local};
use serde_json::{Value, json};

/// One trigger of one pipeline.
#[derive(Debug, Clone)]
pub enum Kind {
    /// A cron schedule (5 fields, or 6 with seconds), in local time.
    Schedule(Box<croner::Cron>),
    /// A new commit on a branch matching one of these globs (`*` matches anything).
    Push(Vec<String>),
    /// A task of this pipeline reached done.
    TaskDone(String),
    /// An open issue on the forge carrying one of these labels.
    Issue(Vec<String>),
}

/// A parsed trigger.
#[derive(Debug, Clone)]
pub struct Trigger {
    pub pipeline: String,
    pub index: usize,
    pub kind: Kind,
    /// Title template: `{{date}}`, `{{branch}}`, `{{sha}}`, `{{title}}`, `{{id}}`.
    pub title: String,
    pub prompt: String,
    /// `"after": "previous"`: each task waits for the one this trigger made before it.
    pub after_previous: bool,
}

/// Parses a pipeline's `triggers`; problems are plain sentences naming the trigger.
pub fn parse(p: &Pipeline) -> (Vec<Trigger>, Vec<String>) {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for (index, raw) in p.triggers.iter().enumerate() {
        let at = format!("pipeline {} trigger {}", p.id, index + 1);
        let text = |key: &str, default: &str| {
            raw.get(key)
                .and_then(Value::as_str)
                .unwrap_or(default)
                .to_string()
        };
        let kind = if let Some(spec) = raw.get("schedule") {
            match spec
                .as_str()
                .map(|s| croner::parser::CronParser::new().parse(s))
            {
                Some(Ok(cron)) => Kind::Schedule(Box::new(cron)),
                Some(Err(e)) => {
                    errors.push(format!("{at}: schedule is not a valid cron pattern ({e})"));
                    continue;
                }
                None => {
                    errors.push(format!(
                        "{at}: schedule must be a cron string like \"0 3 * * *\""
                    ));
                    continue;
                }
            }
        } else if let Some(spec) = raw.get("push") {
            let branches: Vec<String> = spec
                .get("branches")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|b| b.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            if branches.is_empty() {
                errors.push(format!(
                    "{at}: push needs \"branches\": [\"main\", \"release/*\"]"
                ));
                continue;
            }
            Kind::Push(branches)
        } else if let Some(spec) = raw.get("task_done") {
            match spec.get("pipeline").and_then(Value::as_str) {
                Some(src) => Kind::TaskDone(src.to_string()),
                None => {
                    errors.push(format!("{at}: task_done needs {{\"pipeline\": \"<id>\"}}"));
                    continue;
                }
            }
        } else if let Some(spec) = raw.get("issue") {
            let labels: Vec<String> = spec
                .get("labels")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|l| l.as_str().filter(|l| !l.trim().is_empty()))
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default();
            if labels.is_empty() {
                errors.push(format!("{at}: issue needs \"labels\": [\"baton\"]"));
                continue;
            }
            Kind::Issue(labels)
        } else {
            errors.push(format!(
                "{at}: unknown trigger (use schedule, push, task_done or issue)"
            ));
            continue;
        };
        let after_previous = match raw.get("after") {
            None => false,
            Some(Value::String(s)) if s == "previous" => true,
            Some(v) => {
                errors.push(format!(
                    "{at}: {}",
                    crate::pipeline::trigger_after_problem(v)
                ));
                continue;
            }
        };
        let default_title = match kind {
            Kind::Schedule(_) => "{{date}}",
            Kind::Push(_) => "{{branch}} {{sha}}",
            Kind::TaskDone(_) => "after {{title}}",
            Kind::Issue(_) => "{{title}}",
        };
        let default_prompt = match kind {
            Kind::Issue(_) => "{{body}}\n\n(issue #{{number}}: {{url}})",
            _ => "",
        };
        out.push(Trigger {
            pipeline: p.id.clone(),
            index,
            kind,
            title: text("title", default_title),
            prompt: text("prompt", default_prompt),
            after_previous,
        });
    }
    (out, errors)
}

/// `*` matches any run of characters; everything else matches itself.
pub fn glob(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, rest)) => {
            let Some(tail) = text.strip_prefix(head) else {
                return false;
            };
            (0..=tail.len())
                .filter(|&i| tail.is_char_boundary(i))
                .any(|i| glob(rest, &tail[i..]))
        }
    }
}

/// Fills `{{name}}` placeholders in one pass: a value containing `{{…}}` stays as it is.
fn render(template: &str, vars: &[(&str, &str)]) -> String {
    crate::agents::fill(template, |name| {
        vars.iter().find(|(k, _)| *k == name).map(|(_, v)| *v)
    })
}

/// The next time a schedule fires after `after`.
/// Slots are whole seconds: the search keeps the sub-second part of `after`, which would
/// give one slot a different dedupe key at each start.
pub fn next_fire(cron: &croner::Cron, after: DateTime<Local>) -> Option<DateTime<Local>> {
    use chrono::Timelike;
    cron.find_next_occurrence(&after, false)
        .ok()
        .and_then(|t| t.with_nanosecond(0))
}

/// Where the store remembers that the firing `key` was handled (the id of the task it made,
/// or `refused`), so it never fires twice.
pub fn handled_key(key: &str) -> String {
    format!("trigger:{key}")
}

/// Creates and starts a task for a firing unless its key already fired. Returns the id.
pub fn fire(
    db: &Db,
    pipeline: &Pipeline,
    trigger: &Trigger,
    key: &str,
    vars: &[(&str, &str)],
) -> super::Result<Option<i64>> {
    let meta_key = handled_key(key);
    if db.meta(&meta_key)?.is_some() {
        return Ok(None);
    }
    // A template may be filled with text of any shape (an issue's body, say).
    let title = super::actions::card_title(&render(&trigger.title, vars));
    let prompt = render(&trigger.prompt, vars);
    let first_is_queue = pipeline.statuses.first().map(|s| s.kind) == Some(StatusKind::Queue);
    let last_key = format!("trigger-last:{}:{}", trigger.pipeline, trigger.index);
    let after = if trigger.after_previous {
        previous(db, &last_key)?
    } else {
        Vec::new()
    };
    let id = if after.is_empty() {
        let id = create_task_by(db, pipeline, &title, &prompt, "trigger")?;
        if first_is_queue {
            apply(
                db,
                &Request {
                    task_id: id,
                    action: Action::Start,
                    expected_status: None,
                    actor: "trigger".into(),
                },
                &Outside::NONE,
            )?;
        }
        id
    } else {
        // Held (and marked) until the one before is done, then started like any waiting task.
        let new = NewTask {
            title,
            prompt,
            start: first_is_queue,
            actor: "trigger".into(),
            after,
            ..Default::default()
        };
        create_and_start(db, pipeline, &new)?.id
    };
    db.set_meta(&last_key, &id.to_string())?;
    db.set_meta(&meta_key, &id.to_string())?;
    db.insert_event(&NewEvent {
        task_id: Some(id),
        category: "lifecycle",
        kind: "trigger.fired",
        summary: format!(
            "created by trigger {} of {} ({key})",
            trigger.index + 1,
            trigger.pipeline
        ),
        data: json!({ "key": key }),
        actor: "trigger",
        level: "info",
    })?;
    Ok(Some(id))
}

/// The task a trigger made last (remembered under `key`), while it is still on the board.
fn previous(db: &Db, key: &str) -> super::Result<Vec<i64>> {
    let Some(id) = db.meta(key)?.and_then(|v| v.parse::<i64>().ok()) else {
        return Ok(Vec::new());
    };
    match db.task(id) {
        Err(StoreError::NoTask(_)) => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
        Ok(_) => {}
    }
    if db.is_archived(id)? {
        return Ok(Vec::new());
    }
    Ok(vec![id])
}

#[cfg(test)]
#[path = "triggers_tests.rs"]
mod tests;

/// A firing ready to be recorded.
#[derive(Debug, Clone)]
pub struct Firing {
    pub trigger: usize,
    pub key: String,
    pub vars: Vec<(String, String)>,
    /// The slot of a schedule firing, remembered so a restart knows what it missed.
    pub slot: Option<DateTime<Local>>,
    /// The issue a firing of an `issue` trigger came from: the task remembers it.
    pub issue: Option<u64>,
    /// What fired it, which decides whose child the new task is.
    pub origin: Origin,
}

/// What a firing came from. A task made because of another task is that task's child, and
/// a chain of them stops as one of `start_task` hooks does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A schedule or an issue: the new task begins a chain of its own.
    Outside,
    /// The task whose end fired a `task_done` trigger.
    Done(i64),
    /// A commit on this branch: when it is a task's own branch, that task is the parent.
    Push(String),
}

/// The firing of schedule trigger `i` (`t`) for its slot `at`.
pub fn schedule_firing(i: usize, t: &Trigger, at: DateTime<Local>) -> Firing {
    Firing {
        trigger: i,
        key: format!("schedule:{}:{}:{}", t.pipeline, t.index, at.to_rfc3339()),
        vars: vec![("date".into(), at.format("%Y-%m-%d %H:%M").to_string())],
        slot: Some(at),
        issue: None,
        origin: Origin::Outside,
    }
}

impl Trigger {
    /// Where the engine remembers the last head of `branch` it saw for this trigger.
    pub fn push_memo(&self, branch: &str) -> String {
        format!("push-seen:{}:{}:{branch}", self.pipeline, self.index)
    }

    /// The key a push of `sha` to `branch` fires this trigger under, by watcher or webhook.
    pub fn push_key(&self, branch: &str, sha: &str) -> String {
        format!("push:{}:{}:{branch}:{sha}", self.pipeline, self.index)
    }
}

/// The triggers an engine watches, with their schedule state.
#[derive(Default)]
pub struct TriggerSet {
    pub triggers: Vec<Trigger>,
    pub pipelines: std::collections::HashMap<String, Pipeline>,
    next: std::collections::HashMap<usize, DateTime<Local>>,
    last_push_poll: Option<std::time::Instant>,
}

/// How often branch heads are compared for `push` triggers.
const PUSH_POLL: std::time::Duration = std::time::Duration::from_secs(5);

/// How often branch heads are compared: `BATON_PUSH_POLL_MS` when set (tests), else
/// [`PUSH_POLL`].
fn push_poll() -> std::time::Duration {
    std::env::var("BATON_PUSH_POLL_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|ms| *ms > 0)
        .map_or(PUSH_POLL, std::time::Duration::from_millis)
}

impl TriggerSet {
    /// Collects the triggers of every pipeline; returns the problems found.
    pub fn new(pipelines: &[Pipeline]) -> (Self, Vec<String>) {
        let mut set = Self::default();
        let mut errors = Vec::new();
        for p in pipelines {
            let (t, e) = parse(p);
            errors.extend(e);
            if !t.is_empty() {
                set.pipelines.insert(p.id.clone(), p.clone());
            }
            set.triggers.extend(t);
        }
        let now = Local::now();
        for (i, t) in set.triggers.iter().enumerate() {
            if let Kind::Schedule(cron) = &t.kind
                && let Some(next) = next_fire(cron, now)
            {
                set.next.insert(i, next);
            }
        }
        (set, errors)
    }

    /// True when there is nothing to watch.
    pub fn is_empty(&self) -> bool {
        self.triggers.is_empty()
    }

    /// Schedules that came due by `now` (each advances to its next time).
    pub fn due_schedules(&mut self, now: DateTime<Local>) -> Vec<Firing> {
        let mut out = Vec::new();
        for (i, t) in self.triggers.iter().enumerate() {
            let Kind::Schedule(cron) = &t.kind else {
                continue;
            };
            let Some(at) = self.next.get(&i).copied() else {
                continue;
            };
            if at > now {
                continue;
            }
            out.push(schedule_firing(i, t, at));
            if let Some(n) = next_fire(cron, now) {
                self.next.insert(i, n);
            }
        }
        out
    }

    /// New commits on watched branches since the last look (`heads`: branch → sha). The first
    /// sight of a branch only records it. `seen`/`see` read and write the store's memory.
    pub fn pushes(
        &mut self,
        heads: &[(String, String)],
        seen: impl Fn(&str) -> Option<String>,
        mut see: impl FnMut(&str, &str),
    ) -> Vec<Firing> {
        let mut out = Vec::new();
        for (i, t) in self.triggers.iter().enumerate() {
            let Kind::Push(globs) = &t.kind else { continue };
            for (branch, sha) in heads {
                if !globs.iter().any(|g| glob(g, branch)) {
                    continue;
                }
                let memo = t.push_memo(branch);
                match seen(&memo) {
                    Some(old) if old == *sha => continue,
                    Some(_) => out.push(Firing {
                        trigger: i,
                        key: t.push_key(branch, sha),
                        vars: vec![
                            ("branch".into(), branch.clone()),
                            ("sha".into(), sha.chars().take(12).collect()),
                        ],
                        slot: None,
                        issue: None,
                        origin: Origin::Push(branch.clone()),
                    }),
                    None => {}
                }
                see(&memo, sha);
            }
        }
        out
    }

    /// True when branch heads should be looked at again.
    pub fn push_poll_due(&mut self) -> bool {
        let has_push = self
            .triggers
            .iter()
            .any(|t| matches!(t.kind, Kind::Push(_)));
        let due = has_push
            && self
                .last_push_poll
                .is_none_or(|t| t.elapsed() >= push_poll());
        if due {
            self.last_push_poll = Some(std::time::Instant::now());
        }
        due
    }

    /// The trigger and pipeline of a firing, to record it with [`fire`].
    pub fn parts(&self, firing: &Firing) -> Option<(Trigger, Pipeline)> {
        let trigger = self.triggers.get(firing.trigger)?;
        let pipeline = self.pipelines.get(&trigger.pipeline)?;
        Some((trigger.clone(), pipeline.clone()))
    }

    /// The memory keys [`TriggerSet::pushes`] will ask about for these heads.
    pub fn push_memo_keys(&self, heads: &[(String, String)]) -> Vec<String> {
        let mut out = Vec::new();
        for t in &self.triggers {
            let Kind::Push(globs) = &t.kind else { continue };
            for (branch, _) in heads {
                if globs.iter().any(|g| glob(g, branch)) {
                    out.push(t.push_memo(branch));
                }
            }
        }
        out
    }

    /// When the engine must next look at its triggers (a schedule's time, the next look at
    /// branch heads); None when it has none.
    pub fn next_wake(&self) -> Option<std::time::Instant> {
        let now = std::time::Instant::now();
        let local = Local::now();
        let schedule = self.next.values().map(|at| {
            let wait = (*at - local).to_std().unwrap_or_default();
            now + wait
        });
        let has_push = self
            .triggers
            .iter()
            .any(|t| matches!(t.kind, Kind::Push(_)));
        let push = has_push.then(|| match self.last_push_poll {
            Some(t) => t + push_poll(),
            None => now,
        });
        schedule.chain(push).min()
    }

    /// Firings for a task that reached done.
    pub fn done(&self, task: &Task) -> Vec<Firing> {
        self.triggers
            .iter()
            .enumerate()
            .filter(|(_, t)| matches!(&t.kind, Kind::TaskDone(src) if *src == task.pipeline_id))
            .map(|(i, t)| Firing {
                trigger: i,
                key: format!("task_done:{}:{}:{}", t.pipeline, t.index, task.id),
                vars: vec![
                    ("title".into(), task.title.clone()),
                    ("id".into(), task.id.to_string()),
                ],
                slot: None,
                issue: None,
                origin: Origin::Done(task.id),
            })
            .collect()
    }
}
