//! The pipelines of a running board or engine, reloaded when their files change. A file
//! that was good and is now broken keeps its last good version in force, so a half-saved
//! edit never takes a pipeline (and the tasks its triggers start) away.

use super::{Catalog, Pipeline, agent_ids, load_catalog};
use std::collections::BTreeMap;
use std::path::Path;

/// A catalog that remembers, per workspace file, the last version that loaded cleanly.
#[derive(Debug, Clone, Default)]
pub struct LiveCatalog {
    /// The pipelines in force.
    pub catalog: Catalog,
    /// Workspace file → its last good pipeline.
    good: BTreeMap<String, Pipeline>,
}

impl LiveCatalog {
    /// Loads the built-ins and the workspace's files.
    pub fn load(pipelines_dir: &Path, agents_dir: &Path) -> Self {
        let mut live = Self::default();
        live.reload(pipelines_dir, agents_dir);
        live
    }

    /// Loads the files again. Returns one sentence per error, saying whether the last good
    /// version stays in force or the pipeline is left out.
    pub fn reload(&mut self, pipelines_dir: &Path, agents_dir: &Path) -> Vec<String> {
        let agents = agent_ids(Some(agents_dir));
        let mut catalog = load_catalog(Some(pipelines_dir), Some(&agents));
        let mut good = BTreeMap::new();
        let mut kept: BTreeMap<String, String> = BTreeMap::new();
        for file in json_files(pipelines_dir) {
            let broken = catalog
                .diagnostics
                .iter()
                .any(|d| d.is_error() && d.file == file);
            if broken {
                if let Some(prev) = self.good.get(&file) {
                    put(&mut catalog, prev.clone());
                    kept.insert(file.clone(), prev.id.clone());
                    good.insert(file, prev.clone());
                }
                continue;
            }
            let id = std::fs::read_to_string(&file)
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(super::strip_bom(&t)).ok())
                .and_then(|v| v.get("id")?.as_str().map(|s| s.trim().to_string()));
            if let Some(p) = id.and_then(|id| catalog.get(&id).cloned()) {
                good.insert(file, p);
            }
        }
        let problems = catalog
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(|d| match kept.get(&d.file) {
                Some(id) => {
                    format!("{d} — the last good version of pipeline `{id}` stays in force")
                }
                None => format!("{d} — this file is left out until it is fixed"),
            })
            .collect();
        self.catalog = catalog;
        self.good = good;
        problems
    }
}

/// Puts `p` in place of the pipeline with its id, or adds it.
fn put(catalog: &mut Catalog, p: Pipeline) {
    if !catalog.own.contains(&p.id) {
        catalog.own.push(p.id.clone());
    }
    match catalog.pipelines.iter().position(|q| q.id == p.id) {
        Some(i) => catalog.pipelines[i] = p,
        None => catalog.pipelines.push(p),
    }
}

/// The `*.json` files of a folder as the loader names them, sorted.
fn json_files(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json") && p.is_file())
        .collect();
    files.sort();
    files.into_iter().map(|p| p.display().to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str = r#"{"id": "p", "name": "P", "statuses": [
      {"id": "todo", "kind": "queue"}, {"id": "done", "kind": "done"}]}"#;
    const V2: &str = r#"{"id": "p", "name": "P", "statuses": [
      {"id": "todo", "kind": "queue"}, {"id": "check", "kind": "gate"},
      {"id": "done", "kind": "done"}]}"#;

    fn statuses(live: &LiveCatalog) -> Vec<String> {
        live.catalog.get("p").map_or(Vec::new(), |p| {
            p.statuses.iter().map(|s| s.id.clone()).collect()
        })
    }

    #[test]
    fn a_broken_edit_keeps_the_last_good_version() {
        let dir = tempfile::tempdir().unwrap();
        let (pipes, agents) = (dir.path().join("pipelines"), dir.path().join("agents"));
        std::fs::create_dir(&pipes).unwrap();
        let file = pipes.join("p.json");
        std::fs::write(&file, V1).unwrap();
        let mut live = LiveCatalog::load(&pipes, &agents);
        assert_eq!(statuses(&live), ["todo", "done"]);

        std::fs::write(&file, V2).unwrap();
        assert!(live.reload(&pipes, &agents).is_empty());
        assert_eq!(statuses(&live), ["todo", "check", "done"]);

        std::fs::write(&file, "{\"id\": \"p\", ").unwrap();
        let problems = live.reload(&pipes, &agents);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("p.json"), "{}", problems[0]);
        assert!(problems[0].contains("last good version of pipeline `p`"));
        assert_eq!(statuses(&live), ["todo", "check", "done"]);

        // Still broken on the next reload: still the last good one.
        live.reload(&pipes, &agents);
        assert_eq!(statuses(&live), ["todo", "check", "done"]);

        // A file that was never good is left out, and says so.
        std::fs::write(pipes.join("q.json"), "[").unwrap();
        let problems = live.reload(&pipes, &agents);
        assert!(
            problems
                .iter()
                .any(|p| p.contains("q.json") && p.contains("left out"))
        );

        std::fs::remove_file(&file).unwrap();
        live.reload(&pipes, &agents);
        assert!(
            live.catalog.get("p").is_none(),
            "a removed file's pipeline goes"
        );
    }
}
