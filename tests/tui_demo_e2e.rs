//! End to end in tmux: the demo's agents at work. A planner's structured handoff reaches the
//! coder (its log shows the context header it was given), the handoff fields show in the
//! detail pane, and the review loop ran twice. Waits poll the pane with a deadline.

use std::process::Command;
use std::time::{Duration, Instant};

struct Tmux(String);

impl Tmux {
    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.0])
            .args(args)
            .output()
            .expect("tmux is installed");
        assert!(out.status.success(), "tmux {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "demo"];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    /// Polls the pane until `ok` holds (at most 60 s: the demo's tasks take seconds each).
    fn wait(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let screen = self.run(&["capture-pane", "-p", "-t", "demo"]);
            if ok(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}:\n{screen}"
            );
            // Polling an external process's screen: there is no event to wait on.
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.0, "kill-server"])
            .output();
    }
}

#[test]
fn the_demo_shows_a_planners_handoff_reaching_the_coder() {
    let bin = env!("CARGO_BIN_EXE_baton");
    let tmux = Tmux(format!("baton-demo-e2e-{}", std::process::id()));
    let dir = tempfile::tempdir().unwrap();
    tmux.run(&[
        "-f",
        "/dev/null",
        "new-session",
        "-d",
        "-s",
        "demo",
        "-x",
        "120",
        "-y",
        "40",
        &format!(
            "env NO_COLOR=1 XDG_CONFIG_HOME={} {bin} --demo",
            dir.path().display()
        ),
    ]);
    // The first demo task went plan → build → test → review (changes requested) → build →
    // test → review (success) and waits for approval.
    tmux.wait("a demo task at the approval gate", |s| {
        s.contains("need approval")
    });
    tmux.keys(&["l", "l", "l", "l", "l"]);
    let detail = tmux.wait("an approval card in the detail pane", |s| {
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
    tmux.wait("the first build selected", |s| s.contains("Log · build #1"));
    // Its oldest lines: the prompt.
    tmux.keys(&["g"]);
    let coder = tmux.wait("the first build's log", |s| {
        s.contains("build #1") && s.contains("Handoff from previous step (plan)")
    });
    assert!(
        coder.contains("Your task**: 1. Add a `dark_mode` field"),
        "{coder}"
    );
    tmux.keys(&["k"]);
    let plan = tmux.wait("the plan step", |s| {
        s.contains("claude session demo-5f1c2b7e")
    });
    assert!(
        plan.contains("Next: 1. Add a"),
        "the planner's handoff fields:\n{plan}"
    );

    // Quit properly, so the demo removes its throwaway workspace.
    // Quitting ends the demo's running steps (a grace period each): the same 60 s as `wait`.
    tmux.keys(&["Escape", "q"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let alive = Command::new("tmux")
            .args(["-L", &tmux.0, "has-session", "-t", "demo"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !alive {
            break;
        }
        let screen = Command::new("tmux")
            .args(["-L", &tmux.0, "capture-pane", "-p", "-t", "demo"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        if screen.contains("Quit?") {
            // The session may end at any moment now: a failed send is fine.
            let _ = Command::new("tmux")
                .args(["-L", &tmux.0, "send-keys", "-t", "demo", "y"])
                .output();
        }
        assert!(Instant::now() < deadline, "baton did not quit:\n{screen}");
        // Polling an external process: there is no event to wait on.
        std::thread::sleep(Duration::from_millis(50));
    }
}
