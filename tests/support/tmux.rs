//! A tmux server of the test's own, driving the real binary: start a command in window 0
//! of session `t`, send keys, read the screen and the windows, and wait (with a deadline)
//! for what can be observed. Shared by the end-to-end tests that run the board in tmux.
#![allow(dead_code)]

use std::process::Command;
use std::time::{Duration, Instant};

/// How long a wait gives the other process.
const PATIENCE: Duration = Duration::from_secs(30);

/// A tmux server on a socket of its own (`-L`), killed when dropped.
pub struct Tmux(String);

impl Tmux {
    /// A server named after `name` and this process running `cmd` in a 120×36 window 0 of
    /// session `t`. Panes stay when their program ends (`remain-on-exit`), so the last
    /// screen of a program that ended can still be read.
    pub fn start(name: &str, cmd: &str) -> Self {
        let me = Self(format!("baton-{name}-{}", std::process::id()));
        me.run(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            "120",
            "-y",
            "36",
            cmd,
            ";",
            "set-option",
            "-g",
            "remain-on-exit",
            "on",
        ]);
        me
    }

    /// Runs a tmux command on this server; its stdout (the test fails if tmux does).
    pub fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.0])
            .args(args)
            .output()
            .expect("tmux is installed");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Sends keys (tmux key names) to window 0.
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "t:0"];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    /// Types `text` literally into window 0.
    pub fn text(&self, text: &str) {
        self.run(&["send-keys", "-t", "t:0", "-l", text]);
    }

    /// Window 0's screen as text.
    pub fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "t:0"])
    }

    /// `window_index pane_current_path` of every window, one per line.
    pub fn windows(&self) -> String {
        self.run(&[
            "list-windows",
            "-t",
            "t",
            "-F",
            "#{window_index} #{pane_current_path}",
        ])
    }

    /// A format (`#{pane_current_path}`, …) of window `index`'s pane.
    pub fn display(&self, index: usize, format: &str) -> String {
        let target = format!("t:{index}");
        self.run(&["display", "-p", "-t", &target, format])
            .trim()
            .to_string()
    }

    /// [`Tmux::display`], or "" while window `index` does not exist yet.
    pub fn display_or_empty(&self, index: usize, format: &str) -> String {
        let target = format!("t:{index}");
        Command::new("tmux")
            .args(["-L", &self.0, "display", "-p", "-t", &target, format])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    }

    /// Polls window 0's screen until `ok` holds; returns the screen that satisfied it.
    pub fn wait_screen(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        self.wait(what, || self.screen(), ok)
    }

    /// Polls `probe` until `ok` holds; returns what satisfied it.
    pub fn wait(
        &self,
        what: &str,
        probe: impl Fn() -> String,
        ok: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let seen = probe();
            if ok(&seen) {
                return seen;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; saw:\n{seen}\nscreen:\n{}",
                self.screen()
            );
            // Polling another process's screen: there is no event to wait on.
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
