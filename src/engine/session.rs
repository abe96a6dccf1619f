//! What an agent step carries over from its task's earlier steps: the session it may
//! continue (the last one of the same agent in the same run) with what is new since, and,
//! when a failure led here, what failed. Read from the store as the step starts; whether the
//! session is continued is the profile's call (`exec::agent::run_step`).

use crate::exec::agent::Earlier;
use crate::exec::redact::{Redactor, env_vars};
use crate::pipeline::{Pipeline, StepAction};
use crate::store::{Db, HistoryEntry, Result, StepRun, StepState, StoreHandle};

/// The most log lines of a failed step quoted in `{{failure}}`.
const FAILURE_LINES: i64 = 200;
/// The most bytes of them (the end is kept).
const FAILURE_BYTES: usize = 16 * 1024;

/// What an agent step carries over.
#[derive(Debug, Default)]
pub struct Carried {
    /// The session it may continue, with what is new since.
    pub earlier: Option<Earlier>,
    /// `{{failure}}`: empty unless a failure led into the step.
    pub failure: String,
    /// The messages said to the task's agent that no step has taken yet; the step takes
    /// them all (the one its new attempt was made for is its note, not `{{messages}}`).
    pub messages: Vec<crate::store::Message>,
}

impl Carried {
    /// The messages the step takes, split: the one a new attempt was made for, which is
    /// this step's own note, and those its prompt carries as `{{messages}}` (kept for the
    /// next step, and a new attempt's message whose attempt never ran).
    pub fn split(&self, note: Option<&str>) -> (Vec<i64>, Vec<crate::store::Message>) {
        use super::say::via;
        let own = self
            .messages
            .iter()
            .rev()
            .find(|m| m.via == via::NEW_ATTEMPT && Some(m.text.as_str()) == note)
            .map(|m| m.id);
        let kept = self
            .messages
            .iter()
            .filter(|m| Some(m.id) != own)
            .cloned()
            .collect();
        (own.into_iter().collect(), kept)
    }
}

/// [`carried`] read off the async threads; a store that cannot answer leaves the step
/// fresh, with no failure (it still runs).
pub async fn carry(store: &StoreHandle, step: &StepRun) -> Carried {
    let step = step.clone();
    match store.read(move |db| carried(db, &step)).await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("reading what an agent step carries over failed: {e}");
            Carried::default()
        }
    }
}

/// What `step` carries over from its task's earlier step runs.
pub fn carried(db: &Db, step: &StepRun) -> Result<Carried> {
    let runs = db.step_runs(step.task_id)?;
    let before: Vec<&StepRun> = runs.iter().filter(|r| r.id < step.id).collect();
    let history = db.history(step.task_id)?;
    let failed = failed_step(&history, &before, &step.status);
    let ci = ci_failure(&history, &step.status);
    let failure = match (failed, &ci) {
        (Some(f), _) => describe_failure(db, f)?,
        (None, Some(text)) => text.clone(),
        (None, None) => String::new(),
    };
    let pipeline = db.pipeline(step.task_id).ok();
    let agent = pipeline.as_deref().and_then(|p| agent_of(p, &step.status));
    let same_agent = |r: &StepRun| match (&pipeline, agent) {
        (Some(p), Some(a)) => agent_of(p, &r.status) == Some(a),
        _ => r.status == step.status,
    };
    let earlier = continued_from(&before, step, same_agent).map(|from| {
        let handoff = newer_handoff(&before, step, from)
            .and_then(|h| {
                let raw = h.handoff_content.as_deref()?;
                Some(crate::handoff::context_header(
                    &crate::handoff::extract(raw),
                    &h.status,
                ))
            })
            .unwrap_or_default();
        // Only what came after the continued step is new to its session; failed checks on
        // the forge always came after the work they checked.
        let new_failure = failed.is_some_and(|f| f.id > from.id) || ci.is_some();
        Earlier {
            session: from.session_id.clone().unwrap_or_default(),
            step_run: from.id,
            handoff,
            failure: if new_failure {
                failure.clone()
            } else {
                String::new()
            },
        }
    });
    let messages = db.queued_messages(step.task_id)?;
    Ok(Carried {
        earlier,
        failure,
        messages,
    })
}

/// The step run whose session `step` may continue: the latest one before it, in the same run
/// (a retry from scratch starts a new run, and fresh), of the same agent, with a session.
fn continued_from<'a>(
    before: &[&'a StepRun],
    step: &StepRun,
    same_agent: impl Fn(&StepRun) -> bool,
) -> Option<&'a StepRun> {
    before
        .iter()
        .rev()
        .find(|r| r.run_id == step.run_id && same_agent(r) && r.session_id.is_some())
        .copied()
}

/// The latest handoff made after `from` in `step`'s run (a reviewer's), if any.
fn newer_handoff<'a>(
    before: &[&'a StepRun],
    step: &StepRun,
    from: &StepRun,
) -> Option<&'a StepRun> {
    before
        .iter()
        .rev()
        .filter(|r| r.run_id == step.run_id && r.id > from.id)
        .find(|r| r.state == StepState::Succeeded && r.handoff_content.is_some())
        .copied()
}

/// The agent profile a status's step names.
pub(super) fn agent_of<'a>(p: &'a Pipeline, status: &str) -> Option<&'a str> {
    match &p.status(status)?.step.as_ref()?.action {
        StepAction::Agent(a) => Some(a),
        _ => None,
    }
}

/// The step whose failure moved the task into `status`: the last move into it, when its
/// trigger was `failure`, `error` or `ci_failed`, names the status that failed; its last run
/// before now is the one.
fn failed_step<'a>(
    history: &[HistoryEntry],
    before: &[&'a StepRun],
    status: &str,
) -> Option<&'a StepRun> {
    let entry = history
        .iter()
        .rev()
        .find(|h| h.to == status && !matches!(h.trigger.as_str(), "resume" | "takeover"))?;
    if !matches!(entry.trigger.as_str(), "failure" | "error" | "ci_failed") {
        return None;
    }
    let from = entry.from.as_deref()?;
    before.iter().rev().find(|r| r.status == from).copied()
}

/// `{{failure}}` after the forge's checks failed: the last move into `status` was
/// `ci_failed`, and its note names the failing checks with the forge's summaries.
fn ci_failure(history: &[HistoryEntry], status: &str) -> Option<String> {
    let entry = history
        .iter()
        .rev()
        .find(|h| h.to == status && h.trigger != "resume")?;
    if entry.trigger != "ci_failed" {
        return None;
    }
    let what = entry
        .reason
        .as_deref()
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .unwrap_or("the checks failed");
    Some(Redactor::from_vars(env_vars()).apply(format!(
        "## What failed\n\nThe pull request's checks failed on the forge:\n\n{}",
        plain_lines(what)
    )))
}

/// [`plain`] for each line of a text.
fn plain_lines(text: &str) -> String {
    text.lines().map(plain).collect::<Vec<_>>().join("\n")
}

/// `{{failure}}` for `step`: which step failed, its error, and the tail of its log (capped,
/// secrets masked).
fn describe_failure(db: &Db, step: &StepRun) -> Result<String> {
    let lines = db.log_tail(step.id, FAILURE_LINES)?;
    let mut tail = lines
        .iter()
        .map(|l| plain(&l.text))
        .collect::<Vec<_>>()
        .join("\n");
    if tail.len() > FAILURE_BYTES {
        let mut cut = tail.len() - FAILURE_BYTES;
        while !tail.is_char_boundary(cut) {
            cut += 1;
        }
        tail.drain(..cut);
    }
    let mut how = match (step.state, step.exit_code, &step.outcome) {
        (_, _, Some(o)) if o != "success" => format!("ended with the outcome `{o}`"),
        (StepState::TimedOut, _, _) => "timed out".to_string(),
        (_, Some(code), _) => format!("failed (exit code {code})"),
        _ => "failed".to_string(),
    };
    if let Some(e) = step.error.as_deref().filter(|e| !e.trim().is_empty()) {
        how.push_str(&format!(": {}", plain(e)));
    }
    let mut text = format!(
        "## What failed\n\nThe step `{}` (attempt {}) {how}.",
        step.status, step.attempt
    );
    if !tail.trim().is_empty() {
        text.push_str(&format!(
            "\n\nThe last {} lines of its log:\n\n```\n{tail}\n```",
            lines.len()
        ));
    }
    Ok(Redactor::from_vars(env_vars()).apply(text))
}

/// A log line as an agent's prompt can hold it: escape sequences dropped, and control
/// characters (a NUL would keep the agent from starting at all) but tabs removed.
fn plain(text: &str) -> String {
    crate::ansi::strip(text)
        .chars()
        .filter(|c| !c.is_control() || *c == '\t')
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_reaches_the_prompt_without_escapes_or_nul() {
        assert_eq!(
            plain("\u{1b}[31merror\u{1b}[0m: bad\0 byte\tthere"),
            "error: bad byte\tthere"
        );
    }

    /// A step run `id` of `status` in run `run`, with a session when `session` is given.
    fn step(id: i64, run: i64, status: &str, session: Option<&str>) -> StepRun {
        StepRun {
            id,
            task_id: 1,
            run_id: run,
            status: status.into(),
            attempt: 1,
            execution_key: format!("{run}:{status}:{id}"),
            state: StepState::Succeeded,
            exit_code: Some(0),
            outcome: None,
            error: None,
            note: None,
            not_before: 0,
            created_at: 0,
            started_at: None,
            finished_at: None,
            pid: None,
            pgid: None,
            proc_start: None,
            session_id: session.map(String::from),
            usage: None,
            cost: None,
            tests: None,
            handoff_content: None,
            handoff_metadata: None,
            seq: id,
            continued_from: None,
        }
    }

    fn moved(from: &str, to: &str, trigger: &str) -> HistoryEntry {
        HistoryEntry {
            id: 0,
            task_id: 1,
            run_id: Some(1),
            from: Some(from.into()),
            to: to.into(),
            trigger: trigger.into(),
            actor: "engine".into(),
            reason: None,
            guards: serde_json::Value::Null,
            hooks: serde_json::Value::Null,
            at: 0,
        }
    }

    /// `build` and `fix` are the coder, `review` is the reviewer.
    fn coder(r: &StepRun) -> bool {
        r.status == "build" || r.status == "fix"
    }

    #[test]
    fn the_latest_session_of_the_same_agent_in_the_same_run_is_continued() {
        let runs = [
            step(1, 1, "build", Some("s1")),
            step(2, 1, "fix", Some("s2")),
            step(3, 1, "review", Some("r1")),
            step(4, 1, "test", None),
        ];
        let before: Vec<&StepRun> = runs.iter().collect();
        let now = step(5, 1, "build", None);
        let from = continued_from(&before, &now, coder).unwrap();
        assert_eq!(from.session_id.as_deref(), Some("s2"));
    }

    #[test]
    fn a_new_run_another_agent_or_no_session_starts_fresh() {
        let cases: [(&[StepRun], StepRun); 3] = [
            // `retry` started run 2: run 1's session is not continued.
            (
                &[step(1, 1, "build", Some("s1"))],
                step(2, 2, "build", None),
            ),
            // The reviewer's session is not the coder's.
            (
                &[step(1, 1, "review", Some("r1"))],
                step(2, 1, "build", None),
            ),
            // The earlier run never got a session (it could not start).
            (&[step(1, 1, "build", None)], step(2, 1, "build", None)),
        ];
        for (earlier, now) in &cases {
            let before: Vec<&StepRun> = earlier.iter().collect();
            assert!(continued_from(&before, now, coder).is_none(), "{earlier:?}");
        }
    }

    #[test]
    fn only_a_handoff_made_after_the_continued_step_is_new() {
        let mut own = step(1, 1, "build", Some("s1"));
        own.handoff_content = Some("the coder's own answer".into());
        let mut review = step(2, 1, "review", Some("r1"));
        review.handoff_content = Some("the reviewer's answer".into());
        let now = step(3, 1, "build", None);
        let runs = [own.clone(), review];
        let before: Vec<&StepRun> = runs.iter().collect();
        assert_eq!(newer_handoff(&before, &now, &own).map(|h| h.id), Some(2));
        let runs = [own.clone()];
        let before: Vec<&StepRun> = runs.iter().collect();
        assert!(newer_handoff(&before, &now, &own).is_none());
    }

    #[test]
    fn a_failure_or_error_move_names_the_failed_step_and_other_moves_do_not() {
        let runs = [step(1, 1, "build", Some("s1")), step(2, 1, "test", None)];
        let before: Vec<&StepRun> = runs.iter().collect();
        for (history, want) in [
            (vec![moved("test", "build", "failure")], Some(2)),
            (vec![moved("test", "build", "error")], Some(2)),
            (vec![moved("test", "build", "ci_failed")], Some(2)),
            (vec![moved("review", "build", "reject")], None),
            // A resume re-runs the step the failure led to: it still carries the failure.
            (
                vec![
                    moved("test", "build", "failure"),
                    moved("build", "build", "resume"),
                ],
                Some(2),
            ),
            (vec![moved("test", "fix", "failure")], None),
        ] {
            let got = failed_step(&history, &before, "build").map(|r| r.id);
            assert_eq!(got, want, "{history:?}");
        }
    }
}
