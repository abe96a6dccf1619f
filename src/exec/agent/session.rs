//! Telling a session the agent CLI could no longer find from any other failure, so that a
//! continued step can start a fresh one instead. Pure.

use super::AgentFinish;

/// What the CLIs say when the session to resume does not exist (any more): claude's
/// `--resume`, codex's `exec resume`, and baton's own line for OpenCode.
const LOST: &[&str] = &[
    "no conversation found with session id",
    "no rollout found for thread id",
    "opencode session not found",
];

/// True when `text` says the session to continue was not found.
pub(super) fn says_lost(text: &str) -> bool {
    let text = text.to_lowercase();
    LOST.iter().any(|m| text.contains(m))
}

/// True when a continued run ended because its session was not found.
pub(super) fn lost(finish: &AgentFinish) -> bool {
    match finish {
        AgentFinish::Failed { error, .. } | AgentFinish::Error { error, .. } => says_lost(error),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cli_s_lost_session_line_is_recognised_and_other_failures_are_not() {
        for said in [
            "agent `coder` (command `claude`): claude reported an error: error_during_execution: No conversation found with session ID: 123e4567-e89b-12d3-a456-426614174000",
            "Error: thread/resume: thread/resume failed: no rollout found for thread id 123e (code -32600)",
            "agent `coder`: OpenCode session not found: ses_1 (HTTP 404)",
        ] {
            assert!(says_lost(said), "{said}");
            let f = AgentFinish::Failed {
                error: said.into(),
                exit_code: Some(1),
                run: Default::default(),
            };
            assert!(lost(&f));
        }
        for other in ["HTTP 401: Invalid API key", "exited with code 1", ""] {
            assert!(!says_lost(other), "{other}");
        }
        assert!(!lost(&AgentFinish::TimedOut));
    }
}
