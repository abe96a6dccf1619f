//! End to end, the real binary in tmux: who runs the engine. A board attached to
//! `baton engine` notices at once, with no key pressed, when that engine stops or is killed,
//! and takes the engine over (recovery offers Resume for the step it interrupted); a
//! `baton engine` started while a board runs the engine takes over at the next step
//! boundary and the board attaches to it. Waits poll the pane or a file for an observable
//! condition, with a deadline.

mod common;
#[path = "support/tmux.rs"]
mod tmux;

use common::Ws;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use tmux::Tmux;

/// `build` waits for the file `go` in the workspace; `test` and `wait` then run in turn
/// (`wait` until the file `never` appears, so an engine dies under it).
const HAND: &str = r#"{
  "id": "hand",
  "name": "Hand",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "build", "step": {"script": "while [ ! -e go ]; do sleep 0.05; done"}},
    {"id": "test", "step": {"script": "echo tested"}},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"},
    {"id": "cancelled", "kind": "cancelled"}
  ]
}"#;

const STUCK: &str = r#"{
  "id": "stuck",
  "name": "Stuck",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "wait", "step": {"script": "while [ ! -e never ]; do sleep 0.05; done"}},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"},
    {"id": "cancelled", "kind": "cancelled"}
  ]
}"#;

/// The board in the workspace, in tmux.
fn board(ws: &Ws, name: &str) -> Tmux {
    let bin = env!("CARGO_BIN_EXE_baton");
    let xdg = ws.dir.path().join("xdg");
    Tmux::start(
        name,
        &format!(
            "cd '{}' && XDG_CONFIG_HOME='{}' {bin}",
            ws.root().display(),
            xdg.display()
        ),
    )
}

/// `baton engine` in the workspace, its stdout and stderr in files of the temp dir.
struct Headless {
    child: Option<Child>,
    out: PathBuf,
    err: PathBuf,
}

impl Headless {
    fn spawn(ws: &Ws, name: &str) -> Self {
        let out = ws.dir.path().join(format!("{name}.out"));
        let err = ws.dir.path().join(format!("{name}.err"));
        let child = Command::new(env!("CARGO_BIN_EXE_baton"))
            .current_dir(ws.root())
            .env_remove("BATON_DIR")
            .env("XDG_CONFIG_HOME", ws.dir.path().join("xdg"))
            .arg("engine")
            .stdout(std::fs::File::create(&out).expect("out file"))
            .stderr(std::fs::File::create(&err).expect("err file"))
            .spawn()
            .expect("baton engine starts");
        Self {
            child: Some(child),
            out,
            err,
        }
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    fn stdout(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    /// Sends `signal` and reaps the process.
    fn signal(&mut self, signal: nix::sys::signal::Signal) {
        let mut child = self.child.take().expect("running");
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal)
            .expect("signal the engine");
        child.wait().expect("reap the engine");
    }
}

impl Drop for Headless {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn listening(root: &Path) -> bool {
    baton::engine::wake::listening(&root.join(".baton"))
}

fn status_of(ws: &Ws, id: i64) -> (String, String) {
    let v = ws.show(id);
    let task = if v.get("task").is_some() {
        &v["task"]
    } else {
        &v
    };
    (
        task["status"].as_str().unwrap_or_default().to_string(),
        task["state"].as_str().unwrap_or_default().to_string(),
    )
}

/// A clean stop of `baton engine` under an attached board: the board takes over with no
/// key pressed, and says so in the header and a banner.
#[test]
fn an_engine_stopped_under_an_attached_board_is_noticed_at_once() {
    let ws = Ws::new();
    ws.pipeline("hand.json", HAND);
    let mut engine = Headless::spawn(&ws, "engine");
    common::wait_for("the headless engine to listen", || listening(ws.root()));
    let pid = engine.pid();
    let tmux = board(&ws, "stop");
    tmux.wait_screen("the board attached to the headless engine", |s| {
        header(s).contains(&format!("baton engine (pid {pid})"))
    });

    engine.signal(nix::sys::signal::Signal::SIGTERM);
    let screen = tmux.wait_screen("the board to take over, no key pressed", |s| {
        s.contains("this board now runs the engine") && runs_here(s)
    });
    assert!(
        screen.contains("quitting stops it (nothing runs now)"),
        "{screen}"
    );
    assert!(!screen.contains("attached"), "{screen}");
    // The board runs the engine now: a task started from the CLI runs to its gate.
    std::fs::write(ws.root().join("go"), "").unwrap();
    let id: i64 = ws
        .ok(&["new", "after the takeover", "-p", "hand", "--start"])
        .trim()
        .parse()
        .unwrap();
    common::wait_for("the board's engine to run the task", || {
        status_of(&ws, id).0 == "done"
    });
}

/// `baton engine` started while the board runs the engine: the board's running step
/// finishes there, the next step runs in `baton engine`, and the board attaches to it.
/// Then `kill -9` of that engine: the board takes over and offers Resume for the step
/// the dead engine ran.
#[test]
fn baton_engine_takes_over_from_a_board_at_the_next_step_boundary() {
    let ws = Ws::new();
    ws.pipeline("hand.json", HAND);
    ws.pipeline("stuck.json", STUCK);
    let tmux = board(&ws, "hand");
    tmux.wait_screen("the board running the engine", runs_here);
    common::wait_for("the board's engine to listen", || listening(ws.root()));
    let id: i64 = ws
        .ok(&["new", "handed over", "-p", "hand", "--start"])
        .trim()
        .parse()
        .unwrap();
    common::wait_for("the build step to run in the board", || {
        status_of(&ws, id) == ("build".into(), "running".into())
    });

    let mut engine = Headless::spawn(&ws, "engine");
    let pid = engine.pid();
    common::wait_for("baton engine to ask for the handover", || {
        engine
            .stderr()
            .contains("hands over once its 1 running step(s) finish")
    });
    tmux.wait_screen("the board to say it hands over", |s| {
        s.contains(&format!("hands over to baton engine (pid {pid})"))
    });
    // The board's engine still runs the build step, and starts nothing else.
    assert_eq!(status_of(&ws, id), ("build".into(), "running".into()));

    std::fs::write(ws.root().join("go"), "").unwrap();
    let screen = tmux.wait_screen("the board attached to baton engine", |s| {
        header(s).contains(&format!("baton engine (pid {pid})"))
    });
    assert!(!runs_here(&screen), "{screen}");
    // Attached now, the board watches the pipelines itself: a new file brings its tab.
    ws.pipeline(
        "extra.json",
        r#"{"id": "extra", "name": "Extraordinary", "statuses": [
            {"id": "todo", "kind": "queue"}, {"id": "done", "kind": "done"}]}"#,
    );
    tmux.wait_screen("the new pipeline's tab on the attached board", |s| {
        s.contains("Extraordinary")
    });
    common::wait_for("the test step to run in baton engine", || {
        status_of(&ws, id).0 == "done"
    });
    common::wait_for("baton engine to print the test step's move", || {
        engine.stdout().contains("test → done (success)")
    });
    let out = engine.stdout();
    assert!(
        !out.contains("build → test"),
        "the build step ended in the board's engine, before the takeover:\n{out}"
    );
    let err = engine.stderr();
    assert!(
        err.contains("took over the engine from baton (pid"),
        "{err}"
    );

    // A second headless engine is refused with a sentence, and changes nothing.
    let second = ws.baton(&["engine"]).output().expect("second engine");
    assert_eq!(second.status.code(), Some(1));
    let said = String::from_utf8_lossy(&second.stderr);
    assert!(
        said.contains(&format!(
            "another baton engine is running in this workspace (baton engine (pid {pid}))"
        )) && said.contains("one engine runs per workspace"),
        "{said}"
    );

    // kill -9 of the headless engine while it runs a step.
    let stuck: i64 = ws
        .ok(&["new", "stuck", "-p", "stuck", "--start"])
        .trim()
        .parse()
        .unwrap();
    common::wait_for("the stuck step to run in baton engine", || {
        status_of(&ws, stuck) == ("wait".into(), "running".into())
    });
    engine.signal(nix::sys::signal::Signal::SIGKILL);
    let screen = tmux.wait_screen("the board to take over from the killed engine", |s| {
        s.contains("this board now runs the engine") && runs_here(s)
    });
    assert!(!screen.contains("baton engine (pid"), "{screen}");
    tmux.wait_screen("Resume offered for the interrupted step", |s| {
        s.contains(&format!(
            "#{stuck} interrupted when the last engine stopped"
        )) && s.contains("press R to resume")
    });
    assert_eq!(status_of(&ws, stuck).1, "interrupted");
}

/// The board quits while it hands over, its step still running: the step is interrupted as
/// any quit interrupts it, and `baton engine` takes the engine over with the task offered
/// for Resume — nothing is lost.
#[test]
fn a_board_quitting_while_it_hands_over_leaves_its_step_to_resume() {
    let ws = Ws::new();
    ws.pipeline("hand.json", HAND);
    let tmux = board(&ws, "quit");
    tmux.wait_screen("the board running the engine", runs_here);
    common::wait_for("the board's engine to listen", || listening(ws.root()));
    let id: i64 = ws
        .ok(&["new", "cut short", "-p", "hand", "--start"])
        .trim()
        .parse()
        .unwrap();
    common::wait_for("the build step to run in the board", || {
        status_of(&ws, id) == ("build".into(), "running".into())
    });
    let engine = Headless::spawn(&ws, "engine");
    common::wait_for("baton engine to ask for the handover", || {
        engine
            .stderr()
            .contains("hands over once its 1 running step(s) finish")
    });
    tmux.run(&["send-keys", "-t", "t", "q"]);
    tmux.wait_screen("the quit question", |s| s.contains("Quit?"));
    tmux.run(&["send-keys", "-t", "t", "y"]);
    common::wait_for("baton engine to take over", || {
        engine
            .stderr()
            .contains("took over the engine from baton (pid")
    });
    assert_eq!(status_of(&ws, id), ("build".into(), "interrupted".into()));
    // Resumed, the step runs in baton engine and the task goes on.
    std::fs::write(ws.root().join("go"), "").unwrap();
    ws.ok(&["resume", &id.to_string()]);
    common::wait_for("the resumed task to finish in baton engine", || {
        status_of(&ws, id).0 == "done"
    });
    common::wait_for("baton engine to print the moves", || {
        engine.stdout().contains("build → test (success)")
    });
}

/// The board's top line.
fn header(screen: &str) -> &str {
    screen.lines().next().unwrap_or_default()
}

/// The header says this board runs the engine (`engine: here`, or `engine: NAME · here`
/// once the engines on the board are read).
fn runs_here(screen: &str) -> bool {
    header(screen).trim_end().ends_with("here")
}
