//! End to end: the real binary in tmux. `baton --demo` draws its board, `?` shows help,
//! `n` + a title + ctrl+s creates a card that appears, `q` (and its confirmation) quits and
//! the process exits 0. Waits poll the pane for an observable condition, with a deadline.

use std::process::Command;
use std::time::{Duration, Instant};

struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(cmd: &str) -> Self {
        let me = Self {
            socket: format!("baton-e2e-{}", std::process::id()),
        };
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

    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
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

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "t"];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    fn text(&self, text: &str) {
        self.run(&["send-keys", "-t", "t", "-l", text]);
    }

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "t"])
    }

    /// Polls the pane until `ok` holds (at most 20 s); returns the screen that satisfied it.
    fn wait(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let screen = self.screen();
            if ok(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; the screen was:\n{screen}"
            );
            // Polling an external process's screen: there is no event to wait on.
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

#[test]
fn demo_board_help_new_card_and_quit_in_tmux() {
    let bin = env!("CARGO_BIN_EXE_baton");
    // The exit status lands in a file: a pane's own status is not reliable (tmux can leave
    // the dead process unreaped for a while).
    let dir = tempfile::tempdir().expect("tempdir");
    let status_file = dir.path().join("status");
    let tmux = Tmux::start(&format!(
        "{bin} --demo; echo $? > {}",
        status_file.display()
    ));

    let board = tmux.wait("the demo board", |s| {
        s.contains("Backlog") && s.contains("Planning") && s.contains("#1 ")
    });
    assert!(board.contains("Demo"), "{board}");

    tmux.keys(&["?"]);
    tmux.wait("the help screen", |s| {
        s.contains("Keys") && s.contains("help (this screen)")
    });
    tmux.keys(&["Escape"]);
    tmux.wait("help to close", |s| !s.contains("help (this screen)"));

    tmux.keys(&["n"]);
    tmux.wait("the new-task form", |s| s.contains("New task"));
    tmux.text("E2E card");
    tmux.wait("the typed title", |s| s.contains("E2E card"));
    tmux.keys(&["C-s"]);
    let after = tmux.wait("the new card on the board", |s| {
        !s.contains("New task") && s.contains("#7 E2E card")
    });
    assert!(
        after.contains("created task 7") || after.contains("task 7:"),
        "{after}"
    );

    tmux.keys(&["q"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut confirmed = false;
    let status = loop {
        if let Ok(text) = std::fs::read_to_string(&status_file)
            && text.ends_with('\n')
        {
            break text.trim().to_string();
        }
        if !confirmed && tmux.screen().contains("Quit?") {
            tmux.keys(&["y"]);
            confirmed = true;
        }
        assert!(
            Instant::now() < deadline,
            "baton did not exit; the screen was:\n{}",
            tmux.screen()
        );
        // Polling an external process: there is no event to wait on.
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status, "0", "baton's exit status");
    let screen = tmux.screen();
    assert!(!screen.contains("panicked"), "{screen}");
}

#[test]
fn an_engine_that_cannot_start_is_an_error_before_the_screen_is_taken() {
    let bin = env!("CARGO_BIN_EXE_baton");
    let dir = tempfile::tempdir().expect("tempdir");
    let init = Command::new(bin)
        .args(["--dir"])
        .arg(dir.path())
        .arg("init")
        .output()
        .expect("baton init");
    assert!(init.status.success());
    let config = dir.path().join(".baton/config.toml");
    let mut text = std::fs::read_to_string(&config).expect("config");
    text.push_str("\nmax_parallel = 0\n");
    std::fs::write(&config, text).expect("write config");
    // No terminal needed: the error comes before the alternate screen.
    let out = Command::new(bin)
        .arg("--dir")
        .arg(dir.path())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("baton");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("baton: ") && stderr.contains("max_parallel must be at least 1"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        !stdout.contains("\x1b[?1049h"),
        "entered the alternate screen"
    );
}
