//! Whether a pipeline's agents can start where its steps would run: said when a task is
//! started on it (and by `init`), before its first agent step fails for the same reason.

use crate::agents::AgentCatalog;
use crate::pipeline::Pipeline;

/// The first agent of `pipeline`'s steps, in step order, that cannot start on this machine,
/// as a sentence saying why and what to do; None when they all can (or it has none).
pub fn cannot_start(pipeline: &Pipeline, agents: &AgentCatalog) -> Option<String> {
    pipeline.step_agents().find_map(|id| {
        let why = crate::exec::agent::not_on_path(agents.get(id).ok()?)?;
        Some(format!(
            "agent `{id}` of pipeline `{}` cannot start here: {why}",
            pipeline.id
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_whose_program_is_not_on_path_is_named_with_its_pipeline() {
        let profile = |argv0: &str| {
            let text = format!(
                r#"{{"id": "coder", "backend": "command", "argv": ["{argv0}", "{{{{prompt}}}}"]}}"#
            );
            let (p, diags) = crate::agents::parse_profile("coder.json", &text);
            assert!(diags.iter().all(|d| !d.is_error()), "{diags:?}");
            AgentCatalog {
                profiles: vec![p.expect("parsed")],
                diagnostics: vec![],
            }
        };
        let pipeline = crate::pipeline::parse_pipeline(
            "p.json",
            r#"{"id": "p", "name": "P", "statuses": [
                {"id": "q", "label": "Q", "kind": "queue"},
                {"id": "fix", "label": "Fix", "step": {"agent": "coder"}},
                {"id": "done", "label": "Done", "kind": "done"}],
              "transitions": [{"from": "q", "to": "fix", "on": "start"},
                              {"from": "fix", "to": "done", "on": "success"}]}"#,
            None,
        )
        .0
        .expect("pipeline");
        let said = cannot_start(&pipeline, &profile("no-such-agent-cli")).expect("said");
        assert!(
            said.starts_with("agent `coder` of pipeline `p` cannot start here: `no-such-agent-cli` is not on PATH"),
            "{said}"
        );
        assert_eq!(cannot_start(&pipeline, &profile("sh")), None);
    }
}
