//! A tmux server of the test's own, driving the real binary: start a command in window 0
//! of session `t`, send keys, read the screen and the windows, and wait (with a deadline)
//! for what can be observed. Shared by the end-to-end tests that run the board in tmux.
#![allow(dead_code)]

use std::process::Command;
use std::time::{Duration, Instant};

/// How long a wait gives the other process, unless [`Tmux::patience`] says otherwise.
const PATIENCE: Duration = Duration::from_secs(30);

/// A tmux server on a socket of its own (`-L`), killed when dropped.
pub struct Tmux(String, Duration);

impl Tmux {
    /// A server named after `name` and this process running `cmd` in a 120×36 window 0 of
    /// session `t`. Panes stay when their program ends (`remain-on-exit`), so the last
    /// screen of a program that ended can still be read.
    pub fn start(name: &str, cmd: &str) -> Self {
        Self::open(
            name,
            cmd,
            36,
            &[";", "set-option", "-g", "remain-on-exit", "on"],
        )
    }

    /// Like [`Tmux::start`], `rows` tall, and the session ends when `cmd` does (nothing
    /// remains on exit), so [`Tmux::alive`] tells whether the program still runs.
    pub fn start_with(name: &str, cmd: &str, rows: u16) -> Self {
        Self::open(name, cmd, rows, &[])
    }

    /// The server, window 0 `rows` tall running `cmd`, then the tmux commands of `then`.
    fn open(name: &str, cmd: &str, rows: u16, then: &[&str]) -> Self {
        let me = Self(format!("baton-{name}-{}", std::process::id()), PATIENCE);
        let rows = rows.to_string();
        let mut args = vec![
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            "120",
            "-y",
            &rows,
            cmd,
        ];
        args.extend_from_slice(then);
        me.run(&args);
        me
    }

    /// The same server, its waits giving the other process `patience` instead.
    pub fn patience(mut self, patience: Duration) -> Self {
        self.1 = patience;
        self
    }

    /// Whether session `t` still exists (its program still runs, without `remain-on-exit`).
    pub fn alive(&self) -> bool {
        self.try_run(&["has-session", "-t", "t"]).is_some()
    }

    /// Runs a tmux command on this server; its stdout, or None where tmux failed (the
    /// session may have ended).
    pub fn try_run(&self, args: &[&str]) -> Option<String> {
        Command::new("tmux")
            .args(["-L", &self.0])
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
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
        self.try_run(&["display", "-p", "-t", &target, format])
            .map(|s| s.trim().to_string())
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
        let deadline = Instant::now() + self.1;
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
