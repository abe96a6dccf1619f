//! What a step's run says about it: the engine's opening and closing lines in its log, and
//! the report a finished process makes.

use super::results::StepReport;
use crate::exec::{Finish, StepEnv};
use crate::pipeline::{StepSpec, Trigger};
use crate::store::{StepResult, StepRun, StepState};
use std::time::Duration;

/// The engine's first line in a step's log.
pub fn opening_line(step: &StepRun, spec: &StepSpec) -> String {
    format!(
        "▶ {} · attempt {} · {}",
        step.status,
        step.attempt,
        spec.action.describe()
    )
}

/// The engine's last line in a step's log: how it ended, after how long.
pub fn closing_line(ended: &str, took: Duration) -> String {
    format!("■ {ended} after {:.1} s", took.as_secs_f64())
}

pub(super) fn describe(finish: &Finish) -> String {
    match finish {
        Finish::Exited(0) => "exited 0".into(),
        Finish::Exited(c) => format!("exited {c}"),
        Finish::Signalled(s) => format!("killed by signal {s}"),
        Finish::TimedOut => "timed out".into(),
        Finish::Cancelled => "stopped".into(),
        // Most say so themselves (`could not start `sh`: …`).
        Finish::SpawnFailed(e) if e.starts_with("could not start") => e.clone(),
        Finish::SpawnFailed(e) => format!("could not start: {e}"),
    }
}

/// Maps how a process ended to a step state and the trigger it fires.
pub fn report_for(finish: &Finish, env: &StepEnv) -> StepReport {
    let (state, trigger, exit_code, error) = match finish {
        Finish::Exited(0) => (StepState::Succeeded, Trigger::Success, Some(0), None),
        Finish::Exited(c) => (
            StepState::Failed,
            Trigger::Failure,
            Some(*c as i64),
            Some(format!("exited with code {c}")),
        ),
        Finish::Signalled(s) => (
            StepState::Failed,
            Trigger::Error,
            None,
            Some(format!("killed by signal {s}")),
        ),
        Finish::TimedOut => (
            StepState::TimedOut,
            Trigger::Error,
            None,
            Some(format!(
                "timed out after {}",
                humantime::format_duration(env.timeout)
            )),
        ),
        Finish::Cancelled => (
            StepState::Cancelled,
            Trigger::Abort,
            None,
            Some("stopped".into()),
        ),
        Finish::SpawnFailed(e) => (StepState::Failed, Trigger::Error, None, Some(e.clone())),
    };
    StepReport {
        state,
        trigger,
        result: StepResult {
            exit_code,
            error,
            ..Default::default()
        },
        events: Vec::new(),
        retryable: true,
        closing: None,
    }
}
