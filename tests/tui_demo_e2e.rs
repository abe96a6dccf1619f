//! End to end in tmux: the demo's agents at work. A planner's structured handoff reaches the
//! coder (its log shows the context header it was given), the handoff fields show in the
//! detail pane, and the review loop ran twice. Waits poll the pane with a deadline.

use std::time::{Duration, Instant};

#[path = "support/tmux.rs"]
mod tmux;

use tmux::Tmux;

#[test]
fn the_demo_shows_a_planners_handoff_reaching_the_coder() {
    let bin = env!("CARGO_BIN_EXE_baton");
    let dir = tempfile::tempdir().unwrap();
    // The demo's tasks take seconds each.
    let tmux = Tmux::start_with(
        "demo-e2e",
        &format!(
            "env NO_COLOR=1 XDG_CONFIG_HOME={} {bin} --demo",
            dir.path().display()
        ),
        40,
    )
    .patience(Duration::from_secs(60));
    // The first demo task went plan → build → test → review (changes requested) → build →
    // test → review (success) and waits for approval.
    tmux.wait_screen("a demo task at the approval gate", |s| {
        s.contains("need approval")
    });
    tmux.keys(&["l", "l", "l", "l", "l"]);
    let detail = tmux.wait_screen("an approval card in the detail pane", |s| {
        s.contains("· Review · waiting") && s.contains("Handoff")
    });
    assert!(
        detail.contains("review #2"),
        "the review ran twice:\n{detail}"
    );
    assert!(
        detail.contains("Done: Reviewed"),
        "the reviewer's handoff:\n{detail}"
    );

    // Into the detail pane, up to the first build: its log starts with the prompt the coder
    // got, which carries the planner's handoff as a context header.
    tmux.keys(&["Enter"]);
    tmux.keys(&["k", "k", "k", "k", "k"]);
    tmux.wait_screen("the first build selected", |s| s.contains("Log · build #1"));
    // Its oldest lines: the prompt.
    tmux.keys(&["g"]);
    // Waited for whole: on a loaded box the log's first lines can show before the rest.
    tmux.wait_screen("the first build's log", |s| {
        s.contains("build #1")
            && s.contains("Handoff from previous step (plan)")
            && s.contains("Your task**: 1. Add a `dark_mode` field")
    });
    tmux.keys(&["k"]);
    // Waited for whole too: the step's log and its handoff fields load apart, and a frame
    // can show the plan's log beside the build's handoff for a moment.
    tmux.wait_screen("the plan step with the planner's handoff fields", |s| {
        s.contains("claude session demo-5f1c2b7e") && s.contains("Next: 1. Add a")
    });

    // Quit properly, so the demo removes its throwaway workspace.
    // Quitting ends the demo's running steps (a grace period each): the same 60 s as `wait`.
    tmux.keys(&["Escape", "q"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if !tmux.alive() {
            break;
        }
        let screen = tmux
            .try_run(&["capture-pane", "-p", "-t", "t:0"])
            .unwrap_or_default();
        if screen.contains("Quit?") {
            // The session may end at any moment now: a failed send is fine.
            let _ = tmux.try_run(&["send-keys", "-t", "t:0", "y"]);
        }
        assert!(Instant::now() < deadline, "baton did not quit:\n{screen}");
        // Polling an external process: there is no event to wait on.
        std::thread::sleep(Duration::from_millis(50));
    }
}
