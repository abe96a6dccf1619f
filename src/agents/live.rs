//! The agent profiles of a running engine, reloaded when their files change. A profile file
//! that was good and is now broken keeps its last good version in force, so a half-saved
//! edit never fails the steps that use it.

use super::{AgentCatalog, Profile, load_agents};
use std::collections::BTreeMap;
use std::path::Path;

/// A catalog that remembers, per workspace file, the last profile that loaded cleanly.
#[derive(Debug, Clone, Default)]
pub struct LiveAgents {
    /// The profiles in force.
    pub catalog: AgentCatalog,
    /// Workspace file → its last good profile.
    good: BTreeMap<String, Profile>,
}

impl LiveAgents {
    /// Loads the built-ins and the workspace's profiles.
    pub fn load(agents_dir: &Path) -> Self {
        let mut live = Self::default();
        live.reload(agents_dir);
        live
    }

    /// Loads the files again. Returns one sentence per error, saying whether the last good
    /// version stays in force.
    pub fn reload(&mut self, agents_dir: &Path) -> Vec<String> {
        let mut catalog = load_agents(Some(agents_dir));
        let broken = |file: &str| {
            catalog
                .diagnostics
                .iter()
                .any(|d| d.is_error() && d.file == file)
        };
        let mut kept: BTreeMap<String, String> = BTreeMap::new();
        for (file, prev) in &self.good {
            let replaced = catalog.profiles.iter().any(|p| p.file == *file);
            if broken(file) && !replaced {
                kept.insert(file.clone(), prev.id.clone());
            }
        }
        for file in kept.keys() {
            let prev = self.good[file].clone();
            match catalog.profiles.iter().position(|p| p.id == prev.id) {
                Some(i) => catalog.profiles[i] = prev,
                None => catalog.profiles.push(prev),
            }
        }
        let dir = agents_dir.display().to_string();
        self.good = catalog
            .profiles
            .iter()
            .filter(|p| p.file.starts_with(&dir))
            .map(|p| (p.file.clone(), p.clone()))
            .collect();
        let problems = catalog
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(|d| match kept.get(&d.file) {
                Some(id) => format!("{d} — the last good version of agent `{id}` stays in force"),
                None => format!("{d} — steps using this agent fail until the file is fixed"),
            })
            .collect();
        self.catalog = catalog;
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_profile_keeps_its_last_good_version() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mine.json");
        std::fs::write(
            &file,
            r#"{"id": "mine", "backend": "command", "argv": ["echo", "{{message}}"]}"#,
        )
        .unwrap();
        let mut live = LiveAgents::load(dir.path());
        assert!(live.catalog.get("mine").is_ok());
        std::fs::write(&file, r#"{"id": "mine", "backend": "#).unwrap();
        let problems = live.reload(dir.path());
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("last good version of agent `mine`"));
        let kept = live.catalog.get("mine").expect("still in force");
        assert_eq!(kept.argv, ["echo", "{{message}}"]);
        std::fs::remove_file(&file).unwrap();
        live.reload(dir.path());
        assert!(
            live.catalog.get("mine").is_err(),
            "a removed file's profile goes"
        );
    }
}
