//! Which agent profiles fail `baton agents check` on this machine, so the board can mark
//! the tabs whose steps use them (⚠, the reason in the detail pane) and the playground can
//! mark them in its list and preselect one that works. Checked once when the board opens.

use super::app::App;
use crate::pipeline::Pipeline;
use std::collections::HashMap;
use std::path::PathBuf;

/// Agent id → why it cannot run here (only the failing ones).
pub type Problems = HashMap<String, String>;

/// Checks every profile under `agents_dir` (and the built-ins) at once; answers the
/// failing ones with their one-sentence reason.
pub async fn check_all(agents_dir: PathBuf) -> Problems {
    let catalog =
        match tokio::task::spawn_blocking(move || crate::agents::load_agents(Some(&agents_dir)))
            .await
        {
            Ok(c) => c,
            Err(_) => return Problems::new(),
        };
    let checks = catalog.profiles.iter().map(|p| async move {
        let h = crate::exec::agent::check(p).await;
        (p.id.clone(), h)
    });
    futures_util::future::join_all(checks)
        .await
        .into_iter()
        .filter(|(_, h)| !h.ok)
        .map(|(id, h)| (id, h.detail))
        .collect()
}

/// The agents `pipeline`'s steps use that fail here, with their reasons, in step order.
pub fn pipeline_problems<'a>(
    pipeline: &Pipeline,
    problems: &'a Problems,
) -> Vec<(String, &'a str)> {
    let mut out: Vec<(String, &str)> = Vec::new();
    for agent in pipeline.step_agents() {
        if let Some(why) = problems.get(agent)
            && !out.iter().any(|(a, _)| a == agent)
        {
            out.push((agent.to_string(), why.as_str()));
        }
    }
    out
}

impl App {
    /// The failing agents of the pipeline with id `pipeline_id`.
    pub fn agent_problems(&self, pipeline_id: &str) -> Vec<(String, &str)> {
        self.board
            .pipelines
            .iter()
            .find(|p| p.id == pipeline_id)
            .map(|p| pipeline_problems(p, &self.agent_problems))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::StepAction;

    #[test]
    fn a_pipeline_lists_each_failing_agent_once_in_step_order() {
        let catalog = crate::pipeline::load_catalog(None, None);
        let feature = catalog.get("feature").expect("feature");
        let agents: Vec<String> = feature
            .statuses
            .iter()
            .filter_map(|s| match s.step.as_ref().map(|st| &st.action) {
                Some(StepAction::Agent(a)) => Some(a.clone()),
                _ => None,
            })
            .collect();
        assert!(!agents.is_empty());
        let mut problems = Problems::new();
        problems.insert(agents[0].clone(), "not on PATH".into());
        problems.insert("unrelated".into(), "x".into());
        let got = pipeline_problems(feature, &problems);
        assert_eq!(got, vec![(agents[0].clone(), "not on PATH")]);
        assert!(pipeline_problems(catalog.get("demo").expect("demo"), &Problems::new()).is_empty());
    }
}
