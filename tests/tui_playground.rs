//! `p`: the agent playground popup. The popup's own keys and events on the TestBackend, with
//! the background work (`playground_run`) running a real try of the demo's replay coder (no
//! network) and a command agent; the test waits on the events it delivers, never on time.

mod tui_support;

use baton::tui::event::{AppEvent, Effect};
use baton::tui::modal::Modal;
use baton::tui::playground::PlaygroundEvent;
use baton::tui::playground_run::perform;
use baton::workspace::Workspace;
use crossterm::event::KeyCode;
use insta::assert_snapshot;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use tui_support::*;

/// Paths that change from run to run, made fixed for snapshots.
fn fixed(text: &str, root: &str) -> String {
    let tmp = std::env::temp_dir().display().to_string();
    let mut s = text
        .replace(root, "<ws>")
        .replace(tmp.trim_end_matches('/'), "<tmp>");
    while let Some(i) = s.find("/baton-try-") {
        let end = s[i + 1..].find('/').map_or(s.len(), |j| i + 1 + j);
        s.replace_range(i..end, "/<scratch>");
    }
    s
}

/// Performs the app's playground effects in the background; returns how many.
fn drive(
    h: &mut Harness,
    ws: &Workspace,
    tx: &tokio::sync::mpsc::UnboundedSender<AppEvent>,
) -> usize {
    let mut n = 0;
    for e in h.app.take_effects() {
        match e {
            Effect::Playground(p) => {
                perform(p, ws, tx);
                n += 1;
            }
            Effect::Send(_) | Effect::Create(_) => {
                panic!("the playground touched the board: {e:?}")
            }
            _ => {}
        }
    }
    n
}

/// The next playground event, its paths fixed.
async fn next(rx: &mut UnboundedReceiver<AppEvent>, root: &str) -> PlaygroundEvent {
    match rx
        .recv()
        .await
        .expect("the background work ended without a result")
    {
        AppEvent::Playground(PlaygroundEvent::Line { run, stream, text }) => {
            PlaygroundEvent::Line {
                run,
                stream,
                text: fixed(&text, root),
            }
        }
        AppEvent::Playground(PlaygroundEvent::Done { run, result }) => {
            let result = result.map(|mut r| {
                r.ran_in = fixed(&r.ran_in, root);
                r
            });
            PlaygroundEvent::Done { run, result }
        }
        AppEvent::Playground(ev) => ev,
        other => panic!("unexpected event {other:?}"),
    }
}

fn workspace() -> (tempfile::TempDir, Workspace, String) {
    let dir = tempfile::tempdir().unwrap();
    let (ws, _) = Workspace::init(dir.path()).unwrap();
    let root = ws.root().display().to_string();
    (dir, ws, root)
}

#[test]
fn p_tries_the_selected_tasks_agent_streams_its_log_and_shows_the_handoff() {
    let (_dir, ws, root) = workspace();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _guard = rt.enter();
    let (tx, mut rx) = unbounded_channel();
    let mut h = Harness::new(100, 30);
    // Task 2 is in `build`, the demo coder's status.
    h.select(2);
    let (detail, log) = running_detail();
    h.serve(&detail, &log);
    h.key(KeyCode::Char('p'));
    assert_eq!(drive(&mut h, &ws, &tx), 1, "p loads the agents");
    let agents = rt.block_on(next(&mut rx, &root));
    assert!(h.event(AppEvent::Playground(agents)));
    h.chars("Add a dark mode toggle");
    assert_snapshot!("playground_picking", h.screen());

    h.key(KeyCode::Enter);
    assert_eq!(drive(&mut h, &ws, &tx), 1, "enter runs the try");
    let done = loop {
        match rt.block_on(next(&mut rx, &root)) {
            PlaygroundEvent::Done { run, result } => break PlaygroundEvent::Done { run, result },
            line => assert!(h.event(AppEvent::Playground(line))),
        }
    };
    // Every line is in before the result.
    let screen = h.screen();
    assert!(screen.contains("running…"), "{screen}");
    assert!(screen.contains("Next Agent Context"), "{screen}");
    assert_snapshot!("playground_running", screen);

    assert!(h.event(AppEvent::Playground(done)));
    let screen = h.screen();
    assert!(
        screen.contains("succeeded · would fire `success` in a pipeline"),
        "{screen}"
    );
    assert!(
        screen.contains("**Your task**: The change is in `src/settings.rs`"),
        "{screen}"
    );
    assert!(
        screen.contains("(not a git repository: no diff)"),
        "{screen}"
    );
    assert_snapshot!("playground_done", screen);
    // j scrolls the result; esc closes the popup; nothing reached the board.
    h.key(KeyCode::Char('j'));
    assert!(!h.screen().contains("✓ succeeded"));
    h.key(KeyCode::Esc);
    assert!(h.app.modals.is_empty());
    assert_eq!(drive(&mut h, &ws, &tx), 0);
}

#[test]
fn esc_stops_a_running_agent_and_the_popup_says_so() {
    let (_dir, ws, root) = workspace();
    std::fs::write(
        ws.agents_dir().join("sleeper.json"),
        r#"{"id": "sleeper", "backend": "command", "argv": ["sh", "-c", "echo started; sleep 60"]}"#,
    )
    .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _guard = rt.enter();
    let (tx, mut rx) = unbounded_channel();
    let mut h = Harness::new(100, 30);
    h.key(KeyCode::Char('p'));
    drive(&mut h, &ws, &tx);
    let agents = rt.block_on(next(&mut rx, &root));
    h.event(AppEvent::Playground(agents));
    // No task's agent to preselect: the first is; pick the sleeper with ↓.
    let Some(Modal::Playground(view)) = h.app.modals.last() else {
        panic!("no playground")
    };
    let at = view
        .choices()
        .iter()
        .position(|a| a.id == "sleeper")
        .unwrap();
    assert_eq!(view.cursor, 0);
    for _ in 0..at {
        h.key(KeyCode::Down);
    }
    h.key(KeyCode::Enter);
    let Some(Modal::Playground(view)) = h.app.modals.last() else {
        panic!("no playground")
    };
    assert!(view.run.is_none(), "an empty prompt does not run");
    assert!(h.screen().contains("type a prompt for the agent first"));
    h.chars("wait");
    h.key(KeyCode::Enter);
    drive(&mut h, &ws, &tx);
    // Wait for the agent's own line, then stop it.
    loop {
        let ev = rt.block_on(next(&mut rx, &root));
        let started = matches!(&ev, PlaygroundEvent::Line { text, .. } if text == "started");
        h.event(AppEvent::Playground(ev));
        if started {
            break;
        }
    }
    h.key(KeyCode::Esc);
    assert!(h.screen().contains("stopping the agent…"));
    let t0 = std::time::Instant::now();
    loop {
        let ev = rt.block_on(next(&mut rx, &root));
        let done = matches!(ev, PlaygroundEvent::Done { .. });
        h.event(AppEvent::Playground(ev));
        if done {
            break;
        }
    }
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(30),
        "the agent was stopped, not waited for"
    );
    let screen = h.screen();
    assert!(screen.contains("✗ cancelled"), "{screen}");
    // Enter offers another try with the prompt kept.
    h.key(KeyCode::Enter);
    assert!(h.screen().contains("wait"));
}

#[test]
fn a_board_that_goes_away_stops_the_agent_it_started() {
    let (_dir, ws, root) = workspace();
    std::fs::write(
        ws.agents_dir().join("sleeper.json"),
        r#"{"id": "sleeper", "backend": "command", "argv": ["sh", "-c", "echo started; sleep 60"]}"#,
    )
    .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _guard = rt.enter();
    let (tx, mut rx) = unbounded_channel();
    let mut h = Harness::new(100, 30);
    h.key(KeyCode::Char('p'));
    drive(&mut h, &ws, &tx);
    let PlaygroundEvent::Agents(Ok(list)) = rt.block_on(next(&mut rx, &root)) else {
        panic!("no agents")
    };
    let at = list.iter().position(|a| a.id == "sleeper").unwrap();
    h.event(AppEvent::Playground(PlaygroundEvent::Agents(Ok(list))));
    // Tab to the list, where j moves too.
    h.key(KeyCode::Tab);
    for _ in 0..at {
        h.key(KeyCode::Char('j'));
    }
    h.key(KeyCode::Tab);
    h.chars("wait");
    h.key(KeyCode::Enter);
    drive(&mut h, &ws, &tx);
    loop {
        let ev = rt.block_on(next(&mut rx, &root));
        let started = matches!(&ev, PlaygroundEvent::Line { text, .. } if text == "started");
        h.event(AppEvent::Playground(ev));
        if started {
            break;
        }
    }
    drop(h);
    let t0 = std::time::Instant::now();
    let result = loop {
        if let PlaygroundEvent::Done { result, .. } = rt.block_on(next(&mut rx, &root)) {
            break result.unwrap();
        }
    };
    assert_eq!(result.state, baton::store::StepState::Cancelled);
    assert!(t0.elapsed() < std::time::Duration::from_secs(30));
}

#[test]
fn lines_of_another_try_are_ignored_and_log_lines_are_sanitised() {
    let mut h = Harness::new(100, 30);
    h.key(KeyCode::Char('p'));
    let agents = vec![baton::tui::playground::AgentChoice {
        id: "a".into(),
        backend: "replay".into(),
        name: "A".into(),
        problem: None,
    }];
    h.event(AppEvent::Playground(PlaygroundEvent::Agents(Ok(agents))));
    h.chars("go");
    h.key(KeyCode::Enter);
    let run = match h.app.take_effects().pop() {
        Some(Effect::Playground(baton::tui::playground::PlaygroundEffect::Run { run, .. })) => run,
        other => panic!("no run: {other:?}"),
    };
    let line = |run: u64, text: &str| {
        AppEvent::Playground(PlaygroundEvent::Line {
            run,
            stream: baton::store::Stream::Stdout,
            text: text.into(),
        })
    };
    assert!(!h.event(line(run + 1000, "from an older try")));
    assert!(h.event(line(run, "\x1b]0;evil title\x07\x1b[2Jplain")));
    let screen = h.screen();
    assert!(!screen.contains("older try"));
    assert!(
        screen.contains("plain") && !screen.contains("evil"),
        "{screen}"
    );
}
