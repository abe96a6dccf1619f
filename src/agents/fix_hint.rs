//! Where to fix a profile, in words: its file, or, for a built-in profile (whose file is in
//! baton's own repository, not the user's), the workspace file that would override it.

use super::profile::Profile;

impl Profile {
    /// True for a profile compiled into baton (`pipelines/agents/`).
    pub fn is_builtin(&self) -> bool {
        crate::pipeline::builtin_agent_sources()
            .iter()
            .any(|(f, _)| *f == self.file)
    }

    /// `in .baton/agents/x.json`, or for a built-in profile: how to override it.
    pub fn fix_in(&self) -> String {
        if self.is_builtin() {
            format!(
                "in your own .baton/agents/{}.json, which overrides the built-in profile (`baton init --agent claude|codex|opencode|openai` writes one)",
                self.id
            )
        } else {
            format!("in {}", self.file)
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::agents::{load_agents, parse_profile};

    #[test]
    fn builtin_profiles_point_at_an_override() {
        let coder = load_agents(None).get("coder").unwrap().clone();
        assert!(coder.is_builtin());
        assert!(
            coder.fix_in().contains(".baton/agents/coder.json"),
            "{}",
            coder.fix_in()
        );
        let (p, _) = parse_profile(
            "/ws/.baton/agents/c.json",
            r#"{"id": "c", "backend": "command", "argv": ["x"]}"#,
        );
        assert_eq!(p.unwrap().fix_in(), "in /ws/.baton/agents/c.json");
    }
}
