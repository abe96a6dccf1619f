//! End to end in tmux: a task made with `--after 1,2` waits on the board, marked `⛓ 1, 2`,
//! and starts by itself when both blockers are done (approved from the command line while
//! the board runs the engine). Script steps only. Waits poll the pane with a deadline.

use std::path::Path;
use std::process::Command;

#[path = "support/tmux.rs"]
mod tmux;

use tmux::Tmux;

/// A backlog, a script step, a review gate.
const GATED: &str = r#"{"id": "gated", "name": "Gated", "statuses": [
    {"id": "todo", "label": "To do", "kind": "queue"},
    {"id": "build", "label": "Build", "step": {"run": "echo built"}},
    {"id": "review", "label": "Review", "kind": "gate"},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"},
    {"id": "cancelled", "kind": "cancelled"}]}"#;

fn baton(dir: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .arg("--dir")
        .arg(dir)
        .args(args)
        .env("XDG_CONFIG_HOME", dir.join("xdg"))
        .output()
        .expect("baton");
    assert!(
        out.status.success(),
        "baton {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The line of the card of task `id` and the badge line under it.
fn card(screen: &str, id: i64) -> String {
    let lines: Vec<&str> = screen.lines().collect();
    let mark = format!("#{id} ");
    lines
        .iter()
        .position(|l| l.contains(&mark))
        .map(|i| {
            // Only the card's own column: from the mark to the column's end, counted in
            // characters (a line's multi-byte marks and `…` shift byte offsets).
            let b = lines[i].find(&mark).unwrap_or(0);
            let col = lines[i][..b].chars().count();
            let cell = |l: &str| {
                l.chars()
                    .skip(col)
                    .take_while(|c| *c != '│')
                    .collect::<String>()
            };
            let below = lines.get(i + 1).map_or(String::new(), |l| cell(l));
            format!("{} / {}", cell(lines[i]), below)
        })
        .unwrap_or_default()
}

#[test]
fn a_task_after_two_others_starts_on_the_board_when_both_are_done() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    baton(root, &["init"]);
    std::fs::write(root.join(".baton/pipelines/gated.json"), GATED).unwrap();
    baton(
        root,
        &["new", "Blocker one", "--pipeline", "gated", "--start"],
    );
    baton(
        root,
        &["new", "Blocker two", "--pipeline", "gated", "--start"],
    );
    let made = baton(
        root,
        &[
            "new",
            "Waits",
            "--pipeline",
            "gated",
            "--after",
            "1,2",
            "--start",
        ],
    );
    assert_eq!(made.trim(), "3");

    let bin = env!("CARGO_BIN_EXE_baton");
    let tmux = Tmux::start(
        "after-e2e",
        &format!(
            "cd '{}' && XDG_CONFIG_HOME='{}' {bin}",
            root.display(),
            root.join("xdg").display()
        ),
    );
    let screen = tmux.wait_screen("both blockers at review and #3 waiting for them", |s| {
        card(s, 1).contains("⚑") && card(s, 2).contains("⚑") && card(s, 3).contains("⛓ 1, 2")
    });
    assert!(screen.contains("Gated"), "{screen}");

    baton(root, &["approve", "1"]);
    tmux.wait_screen("#3 waiting for #2 only", |s| card(s, 3).contains("⛓ 2"));
    let json = baton(root, &["show", "3", "--json"]);
    assert!(json.contains("\"status\":\"todo\""), "{json}");

    baton(root, &["approve", "2"]);
    let screen = tmux.wait_screen("#3 built and waiting at review", |s| {
        card(s, 3).contains("⚑") && !card(s, 3).contains("⛓")
    });
    assert!(!screen.contains("panicked"), "{screen}");
    let shown: serde_json::Value =
        serde_json::from_str(&baton(root, &["show", "3", "--json"])).unwrap();
    assert_eq!(shown["status"], "review", "{shown:#}");
    assert_eq!(shown["steps"][0]["status"], "build");
    assert_eq!(shown["steps"][0]["state"], "succeeded");
}
