//! `baton --demo`: a throwaway workspace with a few tasks on the built-in `demo` pipeline
//! (agents replaying recorded output, a real script step and an approval gate), most of them
//! started, removed again on exit. The workspace is a git repository (when git is there),
//! so tasks get worktrees and `D`, `o` and `y` have something to show.

use crate::engine::{Client, NewTask, Order};
use crate::workspace::Workspace;
use std::path::PathBuf;

const TASKS: [(&str, bool); 6] = [
    ("Add a dark mode toggle", true),
    ("Fix the flaky login test", true),
    ("Speed up the search index", true),
    ("Write the onboarding guide", true),
    ("Upgrade the HTTP client", true),
    ("Tidy up the settings page", false),
];

/// The demo workspace; its folder is removed when this is dropped.
pub struct Demo {
    pub ws: Workspace,
    dir: PathBuf,
}

impl Drop for Demo {
    fn drop(&mut self) {
        // A step's last files may still be landing as the engine winds down: try again
        // briefly rather than leave the folder behind.
        for _ in 0..5 {
            if std::fs::remove_dir_all(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

/// Creates the workspace and its tasks; the started ones wait, queued, for the engine
/// the TUI embeds.
pub fn create() -> Result<Demo, String> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir = std::env::temp_dir().join(format!("baton-demo-{}-{nanos}", std::process::id()));
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).map_err(|e| format!("cannot create {}: {e}", repo.display()))?;
    // From here on the folder is cleaned up whatever happens.
    let demo = Demo {
        ws: Workspace::at(&repo),
        dir,
    };
    let in_git = git_repo(&repo);
    Workspace::init(demo.ws.root()).map_err(|e| e.to_string())?;
    if in_git {
        // Worktrees beside the repository, inside the folder removed on exit.
        let config = demo.ws.dir().join("config.toml");
        let mut text = std::fs::read_to_string(&config).unwrap_or_default();
        text.push_str(&format!(
            "\nworktree_root = {:?}\n",
            demo.dir.join("worktrees").display().to_string()
        ));
        std::fs::write(&config, text)
            .map_err(|e| format!("cannot write {}: {e}", config.display()))?;
    }
    // Created through the engine's own code, applied here: no engine runs yet.
    let engine = Client::for_command(&demo.ws);
    for (title, start) in TASKS {
        let prompt = format!(
            "A demo task: {title}. Its agents replay a recorded run (about a dark mode toggle) \
             and its test script writes a report, the change `D` shows."
        );
        let new = NewTask {
            title: title.to_string(),
            prompt,
            pipeline: Some("demo".into()),
            start,
            actor: "demo".into(),
            ..NewTask::default()
        };
        engine.submit_blocking(Order::Create { create: new })?;
    }
    Ok(demo)
}

/// Makes `root` a git repository on `main` with one commit; false when git is missing or
/// fails (the demo then runs without worktrees).
fn git_repo(root: &std::path::Path) -> bool {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(root)
            .args([
                "-c",
                "user.name=baton demo",
                "-c",
                "user.email=demo@baton.invalid",
            ])
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .is_ok_and(|o| o.status.success())
    };
    std::fs::write(
        root.join("README.md"),
        "# A demo project\n\nbaton's demo tasks change this repository in their worktrees.\n",
    )
    .is_ok()
        && git(&["init", "-q", "-b", "main"])
        && git(&["add", "README.md"])
        && git(&["commit", "-qm", "A demo project"])
}
