//! End to end: the real binary in tmux. `baton --demo` draws its board, `?` shows help,
//! `n` + a title + ctrl+s creates a card that appears, `q` (and its confirmation) quits and
//! the process exits 0. Waits poll the pane for an observable condition, with a deadline.

#[path = "support/tmux.rs"]
mod tmux;
use std::process::Command;
use std::time::{Duration, Instant};
use tmux::Tmux;

#[test]
fn demo_board_help_new_card_and_quit_in_tmux() {
    let bin = env!("CARGO_BIN_EXE_baton");
    // The exit status lands in a file: a pane's own status is not reliable (tmux can leave
    // the dead process unreaped for a while).
    let dir = tempfile::tempdir().expect("tempdir");
    let status_file = dir.path().join("status");
    let tmux = Tmux::start(
        "e2e",
        &format!("{bin} --demo; echo $? > {}", status_file.display()),
    );

    let board = tmux.wait_screen("the demo board", |s| {
        s.contains("Backlog") && s.contains("Planning") && s.contains("#1 ")
    });
    assert!(board.contains("Demo"), "{board}");

    tmux.keys(&["?"]);
    tmux.wait_screen("the help screen", |s| {
        s.contains("Keys") && s.contains("help (this screen)")
    });
    tmux.keys(&["Escape"]);
    tmux.wait_screen("help to close", |s| !s.contains("help (this screen)"));

    tmux.keys(&["n"]);
    tmux.wait_screen("the new-task form", |s| s.contains("New task"));
    tmux.text("E2E card");
    tmux.wait_screen("the typed title", |s| s.contains("E2E card"));
    tmux.keys(&["C-s"]);
    let after = tmux.wait_screen("the new card on the board", |s| {
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

/// Runs git in `dir`, failing the test if it fails.
fn git(dir: &std::path::Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

#[test]
fn the_first_task_of_a_fresh_init_agent_workspace_lands_on_its_pipeline_selected() {
    let bin = env!("CARGO_BIN_EXE_baton");
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).expect("repo");
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README"), "hello\n").expect("readme");
    git(&repo, &["add", "."]);
    git(
        &repo,
        &[
            "-c",
            "user.name=T",
            "-c",
            "user.email=t@x",
            "commit",
            "-qm",
            "init",
        ],
    );
    let xdg = dir.path().join("xdg");
    // The agents' check may fail here (no claude installed); the files are written anyway.
    let init = Command::new(bin)
        .current_dir(&repo)
        .args(["init", "--agent", "claude"])
        .env("XDG_CONFIG_HOME", &xdg)
        .env_remove("BATON_DIR")
        .output()
        .expect("baton init --agent claude");
    assert!(
        repo.join(".baton/pipelines/feature.json").is_file(),
        "{init:?}"
    );

    let tmux = Tmux::start(
        "first",
        &format!(
            "cd '{}' && env -u BATON_DIR XDG_CONFIG_HOME='{}' {bin}",
            repo.display(),
            xdg.display()
        ),
    );
    // The board opens on the workspace's own pipeline: Feature's columns (cut short at
    // 120 columns).
    tmux.wait_screen("the Feature board", |s| {
        s.contains("To do") && s.contains("Planning") && s.contains("Pull re")
    });
    tmux.keys(&["n"]);
    tmux.wait_screen("the new-task form", |s| s.contains("New task"));
    tmux.text("My first task");
    // Tab goes from the title to the prompt, not to the pipeline picker.
    tmux.keys(&["Tab"]);
    tmux.text("Describe the thing to do");
    tmux.wait_screen("the typed prompt", |s| {
        s.contains("Describe the thing to do")
    });
    tmux.keys(&["C-s"]);
    // The card lands on Feature, selected: the detail pane shows it.
    let after = tmux.wait_screen("the new card, selected", |s| {
        !s.contains("New task") && s.contains("┌ #1 My first task · To do · idle")
    });
    assert!(after.contains("Pull re"), "still on Feature:\n{after}");
    let shown = Command::new(bin)
        .current_dir(&repo)
        .args(["show", "1", "--json"])
        .output()
        .expect("show");
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("json");
    assert_eq!(shown["pipeline"], "feature");
    assert_eq!(shown["state"], "idle", "created, not started");
    let prompt = Command::new(bin)
        .current_dir(&repo)
        .args(["show", "1"])
        .output()
        .expect("show");
    assert!(
        String::from_utf8_lossy(&prompt.stdout).contains("Describe the thing to do"),
        "the prompt field got the prompt: {prompt:?}"
    );
}
