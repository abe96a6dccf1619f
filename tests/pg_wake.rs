//! A board kept in PostgreSQL, shared by folders as by machines: a task started from a
//! folder where no engine runs is picked up by the engine of another at once (NOTIFY and
//! LISTEN, not the slow fallback poll); the engine lives through the server restarting,
//! even with a step ending while it is away; `baton serve` and the board (the TUI) run on
//! it; and `--demo` never writes there.

mod api_common;
mod common;
mod infra;
mod pg_support;
#[path = "support/tmux.rs"]
mod tmux;

use common::{GATE, Ws, wait_within};
use pg_support::{PASSWORD, Pg};
use std::io::BufRead;
use std::time::Duration;

/// Well under the fallback poll (ten seconds): only a notification meets it.
const PROMPT: Duration = Duration::from_secs(2);
/// How long anything slower may take (a bound, not a pause).
const PATIENCE: Duration = Duration::from_secs(60);

/// A script step that waits for `go` in the workspace root, then a review gate.
const HOLD: &str = r#"{
  "id": "hold",
  "name": "Hold",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "build", "step": {"script": "while [ ! -f go ]; do sleep 0.05; done; echo held-line; : > ended"}},
    {"id": "review", "kind": "gate"},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"},
    {"id": "cancelled", "kind": "cancelled"}
  ]
}"#;

fn on_pg(cmd: &mut assert_cmd::Command, pg: &Pg) {
    cmd.env("BATON_DATABASE_URL", pg.url("board"))
        .env("PGPASSWORD", PASSWORD);
}

/// `baton ARGS` in `ws` on the board; its stdout, asserting success.
fn ok(ws: &Ws, pg: &Pg, args: &[&str]) -> String {
    let mut cmd = ws.baton(args);
    on_pg(&mut cmd, pg);
    let out = cmd.timeout(PATIENCE).output().unwrap();
    assert!(out.status.success(), "baton {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// A workspace with the test pipelines.
fn folder() -> Ws {
    let ws = Ws::new();
    ws.pipeline("gate.json", GATE);
    ws.pipeline("hold.json", HOLD);
    ws
}

/// `baton engine` in `ws` on the board, once it says it runs; its stderr lines go to
/// `lines`. Stopped when dropped.
struct Engine(std::process::Child);

impl Engine {
    fn start(ws: &Ws, pg: &Pg) -> (Self, std::sync::mpsc::Receiver<String>) {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
            .current_dir(ws.root())
            .env_remove("BATON_DIR")
            .env("XDG_CONFIG_HOME", ws.dir.path().join("xdg"))
            .env("BATON_DATABASE_URL", pg.url("board"))
            .env("PGPASSWORD", PASSWORD)
            // Only NOTIFY can wake it within a test's patience: the fallback look is a minute off.
            .env("BATON_PG_POLL_MS", "60000")
            .arg("engine")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let me = Self(child);
        let started = std::time::Instant::now();
        loop {
            let left = PATIENCE.saturating_sub(started.elapsed());
            let line = rx.recv_timeout(left).expect("the engine says it runs");
            if line.contains("baton engine running in") {
                return (me, rx);
            }
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let _ = self.0.wait();
    }
}

/// The state of task `id`'s step runs, as the database has them.
fn step_states(pg: &Pg, id: i64) -> Vec<String> {
    pg.client("board")
        .query(
            "SELECT state FROM step_runs WHERE task_id = $1 ORDER BY id",
            &[&id],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// `baton new TITLE --pipeline P --start` in `ws`: the id.
fn start_task(ws: &Ws, pg: &Pg, pipeline: &str, title: &str) -> i64 {
    ok(ws, pg, &["new", title, "--pipeline", pipeline, "--start"])
        .trim()
        .parse()
        .unwrap()
}

/// True when tmux runs here; else says so (a failure under BATON_REQUIRE_INFRA=1).
fn has_tmux() -> bool {
    let found = std::process::Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        infra::missing("tmux", "install tmux");
    }
    found
}

fn board() -> Option<Pg> {
    let pg = Pg::start()?;
    pg.create_db("board");
    Some(pg)
}

#[test]
fn a_task_started_where_no_engine_runs_is_picked_up_at_once_by_another_folders_engine() {
    let Some(pg) = board() else { return };
    let (here, there) = (folder(), folder());
    // No heartbeat (each of which also looks at the board) within the test's patience.
    here.config("[engine]\nheartbeat = \"60s\"\n");
    ok(&there, &pg, &["db", "migrate"]);
    let (_engine, _log) = Engine::start(&here, &pg);
    let id = start_task(&there, &pg, "gate", "from afar");
    // Applied by the CLI itself (no engine runs there): the step waits, queued, until the
    // other folder's engine hears of it.
    wait_within("the engine to run the step", PROMPT, || {
        step_states(&pg, id) == ["succeeded"]
    });
    assert_eq!(
        std::fs::read_to_string(here.root().join("title.txt")).unwrap(),
        "from afar",
        "the step ran in the engine's folder"
    );
}

#[test]
fn the_engine_lives_through_the_database_restarting() {
    let Some(pg) = board() else { return };
    let (here, there) = (folder(), folder());
    // No heartbeat (each of which also looks at the board) within the test's patience.
    here.config("[engine]\nheartbeat = \"60s\"\n");
    ok(&there, &pg, &["db", "migrate"]);
    let (_engine, log) = Engine::start(&here, &pg);
    // A step runs while the server goes away, and ends while it is away.
    let held = start_task(&there, &pg, "hold", "held");
    wait_within("the held step to run", PATIENCE, || {
        step_states(&pg, held) == ["running"]
    });
    pg.stop_server();
    std::fs::write(here.root().join("go"), "").unwrap();
    // The step ends while the server is away; its result waits for it.
    wait_within("the held step to end", PATIENCE, || {
        here.root().join("ended").exists()
    });
    let said = |what: &str| {
        let started = std::time::Instant::now();
        let mut seen = String::new();
        loop {
            let left = PATIENCE.saturating_sub(started.elapsed());
            let line = log
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("the engine says {what}; it said:\n{seen}"));
            if line.contains(what) {
                break;
            }
            seen.push_str(&line);
            seen.push('\n');
        }
    };
    said("its result waits for the database");
    pg.start_server();
    // Its result waited, and was written once the database was back.
    wait_within("the held step's result", PATIENCE, || {
        step_states(&pg, held) == ["succeeded"]
    });
    // And the engine goes on: a restart (`pg_ctl restart`), then a new task from afar.
    pg.restart();
    let id = start_task(&there, &pg, "gate", "after the restart");
    wait_within("the engine to run the next step", PATIENCE, || {
        step_states(&pg, id) == ["succeeded"]
    });
}

#[test]
fn serve_answers_on_a_postgres_board() {
    let Some(pg) = board() else { return };
    let ws = folder();
    let id = ok(&ws, &pg, &["new", "served", "--pipeline", "gate"]);
    let url = pg.url("board");
    let s = api_common::Server::start(
        ws.root(),
        &[
            ("BATON_DATABASE_URL", url.as_str()),
            ("PGPASSWORD", PASSWORD),
            (
                "XDG_CONFIG_HOME",
                ws.dir.path().join("xdg").to_str().unwrap(),
            ),
        ],
    );
    let tasks: serde_json::Value = reqwest::blocking::Client::new()
        .get(s.url("/api/tasks"))
        .bearer_auth(s.token())
        .send()
        .unwrap()
        .error_for_status()
        .unwrap()
        .json()
        .unwrap();
    let text = tasks.to_string();
    assert!(
        text.contains("\"served\"") && text.contains(&format!("\"id\":{}", id.trim())),
        "{text}"
    );
}

#[test]
fn the_board_draws_a_postgres_board_in_tmux() {
    let Some(pg) = board() else { return };
    if !has_tmux() {
        return;
    }
    let ws = folder();
    ok(&ws, &pg, &["new", "kept in postgres", "--pipeline", "gate"]);
    // The board's engine runs in another folder (as on another machine).
    let there = folder();
    let (_engine, _log) = Engine::start(&there, &pg);
    let tmux = tmux::Tmux::start(
        "pgboard",
        &format!(
            "cd '{}' && env -u BATON_DIR XDG_CONFIG_HOME='{}' BATON_DATABASE_URL='{}' PGPASSWORD='{PASSWORD}' {}",
            ws.root().display(),
            ws.dir.path().join("xdg").display(),
            pg.url("board"),
            env!("CARGO_BIN_EXE_baton"),
        ),
    );
    tmux.wait_screen("the board with the task kept in PostgreSQL", |s| {
        s.contains("kept in postgres")
    });
    // A task made from another folder reaches the board through the database.
    let there = folder();
    ok(
        &there,
        &pg,
        &["new", "made elsewhere", "--pipeline", "gate"],
    );
    tmux.wait_screen("the task made elsewhere", |s| s.contains("made elsewhere"));
}

#[test]
fn the_demo_leaves_a_postgres_board_alone() {
    let Some(pg) = board() else { return };
    if !has_tmux() {
        return;
    }
    let ws = folder();
    ok(&ws, &pg, &["db", "migrate"]);
    let tmux = tmux::Tmux::start(
        "pgdemo",
        &format!(
            "cd '{}' && env XDG_CONFIG_HOME='{}' BATON_DATABASE_URL='{}' PGPASSWORD='{PASSWORD}' {} --demo",
            ws.root().display(),
            ws.dir.path().join("xdg").display(),
            pg.url("board"),
            env!("CARGO_BIN_EXE_baton"),
        ),
    );
    tmux.wait_screen("the demo board", |s| {
        s.contains("Backlog") && s.contains("#1 ")
    });
    let tasks: i64 = pg
        .client("board")
        .query_one("SELECT COUNT(*) FROM tasks", &[])
        .unwrap()
        .get(0);
    assert_eq!(
        tasks, 0,
        "the demo wrote its tasks into the PostgreSQL board"
    );
}
