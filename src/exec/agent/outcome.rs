//! From how an agent ended to the step's state, trigger, result and events. Pure.

use super::AgentFinish;
use crate::agents::Profile;
use crate::handoff;
use crate::pipeline::Trigger;
use crate::store::{StepResult, StepState};
use serde_json::{Value, json};
use std::time::Duration;

/// A task event the engine records with the step's result.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentEvent {
    /// `handoff` or `agent`.
    pub category: &'static str,
    /// `handoff_created`, `handoff_extraction_failed`, `outcome_undeclared`,
    /// `permission_denied`.
    pub kind: &'static str,
    pub summary: String,
    pub data: Value,
    /// `info`, `warn` or `error`.
    pub level: &'static str,
}

/// What an agent step reports to the engine.
#[derive(Debug, Clone)]
pub struct AgentReport {
    pub state: StepState,
    /// success, failure, error, abort or outcome:<name>.
    pub trigger: Trigger,
    pub result: StepResult,
    pub events: Vec<AgentEvent>,
    /// For `error`: whether trying again could help (connection refused, 5xx, timeout).
    pub retryable: bool,
}

impl AgentReport {
    /// A step that could not run at all.
    pub fn error(error: String, retryable: bool) -> Self {
        Self {
            state: StepState::Failed,
            trigger: Trigger::Error,
            result: StepResult {
                error: Some(error),
                ..Default::default()
            },
            events: Vec::new(),
            retryable,
        }
    }
}

/// Maps an agent's end to the step's report. A finished answer is parsed into a handoff;
/// its named outcome routes the task (`success` → success, `failure` → failure, any other
/// declared name → `outcome:<name>`); a name the profile does not declare fails the step.
pub fn report(finish: &AgentFinish, profile: &Profile, timeout: Duration) -> AgentReport {
    let mut rep = AgentReport {
        state: StepState::Failed,
        trigger: Trigger::Error,
        result: StepResult::default(),
        events: Vec::new(),
        retryable: false,
    };
    if let AgentFinish::Done(run) | AgentFinish::Failed { run, .. } = finish {
        rep.events.extend(run.events.iter().cloned());
    }
    match finish {
        AgentFinish::Done(run) => {
            let h = handoff::extract(&run.text);
            rep.events.push(AgentEvent {
                category: "handoff",
                kind: "handoff_created",
                summary: if h.structured {
                    format!("handoff with {}", h.fields.names_present().join(", "))
                } else {
                    "handoff without structured sections".into()
                },
                data: json!({
                    "has_structured_data": h.structured,
                    "fields": h.fields.names_present(),
                    "outcome": h.outcome,
                    "length": run.text.chars().count(),
                }),
                level: "info",
            });
            if !h.structured {
                rep.events.push(AgentEvent {
                    category: "handoff",
                    kind: "handoff_extraction_failed",
                    summary: "no `What Was Done`, `Decisions Made`, `Open Questions` or `Next Agent Context` heading; the next step gets the raw output".into(),
                    data: json!({ "length": run.text.chars().count() }),
                    level: "warn",
                });
            }
            rep.result = StepResult {
                outcome: Some(h.outcome.clone().unwrap_or_else(|| "success".into())),
                usage: run.usage.clone(),
                cost: run.cost,
                handoff_content: Some(run.text.clone()),
                handoff_metadata: Some(handoff::metadata(&h)),
                ..Default::default()
            };
            match h.outcome.as_deref() {
                None | Some("success") => {
                    rep.state = StepState::Succeeded;
                    rep.trigger = Trigger::Success;
                }
                Some(o) if !profile.declares(o) => {
                    let error = format!(
                        "agent `{}` named the outcome `{o}`, which its profile does not declare (declared: {}) — add it to `outcomes` in {} or fix the prompt",
                        profile.id,
                        profile.outcomes.join(", "),
                        profile.file
                    );
                    rep.events.push(AgentEvent {
                        category: "agent",
                        kind: "outcome_undeclared",
                        summary: error.clone(),
                        data: json!({ "outcome": o, "declared": profile.outcomes }),
                        level: "error",
                    });
                    rep.result.error = Some(error);
                }
                Some("failure") => {
                    rep.trigger = Trigger::Failure;
                    rep.result.error = Some(format!("agent `{}` reported failure", profile.id));
                }
                Some(o) => {
                    rep.state = StepState::Succeeded;
                    rep.trigger = Trigger::Outcome(o.to_string());
                }
            }
        }
        AgentFinish::Failed {
            error,
            exit_code,
            run,
        } => {
            rep.trigger = Trigger::Failure;
            rep.result = StepResult {
                exit_code: *exit_code,
                outcome: Some("failure".into()),
                error: Some(error.clone()),
                usage: run.usage.clone(),
                cost: run.cost,
                ..Default::default()
            };
        }
        AgentFinish::Error { error, retryable } => {
            rep.result.error = Some(error.clone());
            rep.retryable = *retryable;
        }
        AgentFinish::TimedOut => {
            rep.state = StepState::TimedOut;
            rep.retryable = true;
            rep.result.error = Some(format!(
                "agent `{}` timed out after {} and was stopped",
                profile.id,
                humantime::format_duration(timeout)
            ));
        }
        AgentFinish::Cancelled => {
            rep.state = StepState::Cancelled;
            rep.trigger = Trigger::Abort;
            rep.result.error = Some("stopped".into());
        }
    }
    rep
}

#[cfg(test)]
mod tests {
    use super::super::AgentRun;
    use super::*;
    use crate::agents::parse_profile;

    fn profile() -> Profile {
        parse_profile(
            "pipelines/agents/p.json",
            r#"{"id": "p", "backend": "command", "argv": ["x"], "outcomes": ["success", "failure", "needs_info"]}"#,
        )
        .0
        .unwrap()
    }

    fn done(text: &str) -> AgentReport {
        let run = AgentRun {
            text: text.into(),
            usage: Some(json!({"input_tokens": 3})),
            cost: Some(0.25),
            session: None,
            events: Vec::new(),
        };
        report(&AgentFinish::Done(run), &profile(), Duration::from_secs(60))
    }

    #[test]
    fn outcome_routing_table() {
        let structured = "## What Was Done\nx\n";
        let cases: &[(&str, StepState, Trigger)] = &[
            ("plain answer", StepState::Succeeded, Trigger::Success),
            (
                "x\nOUTCOME: success",
                StepState::Succeeded,
                Trigger::Success,
            ),
            (
                "x\nOUTCOME: needs_info",
                StepState::Succeeded,
                Trigger::Outcome("needs_info".into()),
            ),
            (
                "## Outcome\nNeeds Info\n",
                StepState::Succeeded,
                Trigger::Outcome("needs_info".into()),
            ),
            ("x\nOUTCOME: failure", StepState::Failed, Trigger::Failure),
            ("x\nOUTCOME: shipped", StepState::Failed, Trigger::Error),
        ];
        for (text, state, trigger) in cases {
            let r = done(&format!("{structured}{text}"));
            assert_eq!((&r.state, &r.trigger), (state, trigger), "{text}");
            assert!(!r.retryable, "{text}");
        }
    }

    /// A profile, a pipeline and an agent that each spell the outcome their own way still
    /// agree on it, and the task takes the pipeline's transition.
    #[test]
    fn outcome_spellings_agree_across_profile_pipeline_and_answer() {
        let (profile, diags) = parse_profile(
            "pipelines/agents/h.json",
            r#"{"id": "h", "backend": "command", "argv": ["x"], "outcomes": ["success", "Needs-Info"]}"#,
        );
        assert!(diags.is_empty(), "{diags:?}");
        let profile = profile.unwrap();
        let pipeline = r#"{"id": "p", "statuses": [
            {"id": "todo", "kind": "queue"},
            {"id": "ask", "step": {"agent": "h"}},
            {"id": "done", "kind": "done"},
            {"id": "failed", "kind": "failed"}],
          "transitions": [{"from": "ask", "to": "todo", "on": "outcome:needs-info"}]}"#;
        let (pipeline, diags) = crate::pipeline::parse_pipeline("p.json", pipeline, None);
        let pipeline = pipeline.unwrap_or_else(|| panic!("{diags:?}"));
        let visits = std::collections::HashMap::new();
        let facts = crate::pipeline::Facts {
            visits: &visits,
            step_running: false,
            handoff_fields: &[],
            worktree_clean: None,
            run_cost: 0.0,
            forge: false,
        };
        for answer in [
            "OUTCOME: needs-info",
            "OUTCOME: needs_info",
            "## Outcome\nNeeds info.",
        ] {
            let run = AgentRun {
                text: format!("Asked.\n{answer}\n"),
                ..AgentRun::default()
            };
            let r = report(&AgentFinish::Done(run), &profile, Duration::from_secs(60));
            assert_eq!(
                r.state,
                StepState::Succeeded,
                "{answer}: {:?}",
                r.result.error
            );
            assert_eq!(r.trigger, Trigger::Outcome("needs_info".into()), "{answer}");
            let decision = crate::pipeline::decide(&pipeline, "ask", &r.trigger, &facts).unwrap();
            assert_eq!(decision.to, "todo", "{answer}");
        }
    }

    #[test]
    fn undeclared_outcome_is_an_error_event() {
        let r = done("x\nOUTCOME: shipped");
        let err = r.result.error.unwrap();
        assert!(err.contains("`shipped`") && err.contains("p.json"), "{err}");
        assert!(
            r.events
                .iter()
                .any(|e| e.kind == "outcome_undeclared" && e.level == "error")
        );
    }

    #[test]
    fn handoff_events_and_result_fields() {
        let r = done("preamble\n## What Was Done\nBuilt it.\n## Next Agent Context\nTest it.");
        let kinds: Vec<&str> = r.events.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, ["handoff_created"]);
        assert_eq!(r.events[0].data["has_structured_data"], true);
        assert_eq!(
            r.result.handoff_metadata.as_ref().unwrap()["what_was_done"],
            "Built it."
        );
        assert!(
            r.result
                .handoff_content
                .as_ref()
                .unwrap()
                .starts_with("preamble")
        );
        assert_eq!(r.result.cost, Some(0.25));
        assert_eq!(r.result.outcome.as_deref(), Some("success"));

        let r = done("just prose");
        let kinds: Vec<&str> = r.events.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, ["handoff_created", "handoff_extraction_failed"]);
        assert_eq!(r.events[0].data["has_structured_data"], false);
    }

    #[test]
    fn failures_errors_timeouts_and_aborts() {
        let p = profile();
        let t = Duration::from_secs(90);
        let r = report(
            &AgentFinish::Failed {
                error: "boom".into(),
                exit_code: Some(2),
                run: AgentRun::default(),
            },
            &p,
            t,
        );
        assert_eq!(
            (r.state, r.trigger, r.result.exit_code),
            (StepState::Failed, Trigger::Failure, Some(2))
        );
        let r = report(
            &AgentFinish::Error {
                error: "refused".into(),
                retryable: true,
            },
            &p,
            t,
        );
        assert_eq!(
            (r.state, r.trigger, r.retryable),
            (StepState::Failed, Trigger::Error, true)
        );
        let r = report(&AgentFinish::TimedOut, &p, t);
        assert_eq!((r.state, r.trigger), (StepState::TimedOut, Trigger::Error));
        assert!(r.result.error.unwrap().contains("1m 30s"));
        let r = report(&AgentFinish::Cancelled, &p, t);
        assert_eq!((r.state, r.trigger), (StepState::Cancelled, Trigger::Abort));
    }

    #[test]
    fn events_a_backend_noticed_are_recorded_whether_it_succeeded_or_failed() {
        let warning = AgentEvent {
            category: "agent",
            kind: "permission_denied",
            summary: "claude was not allowed 1 tool call: Bash git commit".into(),
            data: json!({}),
            level: "warn",
        };
        let run = AgentRun {
            text: "## What Was Done\nx\n".into(),
            events: vec![warning.clone()],
            ..AgentRun::default()
        };
        let t = Duration::from_secs(60);
        let r = report(&AgentFinish::Done(run.clone()), &profile(), t);
        assert!(r.events.contains(&warning), "{:?}", r.events);
        let failed = AgentFinish::Failed {
            error: "x".into(),
            exit_code: Some(1),
            run,
        };
        assert!(report(&failed, &profile(), t).events.contains(&warning));
    }
}
