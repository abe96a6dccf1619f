//! One way into the engine: every front end creates tasks through the engine, which checks
//! them the same way, and a running engine makes the tasks other processes ask for.

mod api_common;
mod common;
mod infra;

use baton::engine::client::{Client, changes};
use baton::engine::{Answer, NewTask, Order};
use baton::store::Store;
use baton::workspace::Workspace;
use common::Ws;
use std::time::Duration;

const PIPELINE: &str = r#"{
  "id": "p",
  "statuses": [
    {"id": "backlog", "kind": "queue"},
    {"id": "work", "step": {"run": "true"}},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"}
  ]
}"#;

fn new_task(title: &str) -> NewTask {
    NewTask {
        title: title.to_string(),
        pipeline: Some("p".into()),
        actor: "tui".into(),
        ..NewTask::default()
    }
}

/// The board's `n` goes through the same engine checks as `baton new`: a title too long
/// for a card, or one with nothing to read, makes no task.
#[test]
fn a_board_cannot_make_a_task_the_cli_would_refuse() {
    let ws = Ws::new();
    ws.pipeline("p.json", PIPELINE);
    let at = Workspace::at(ws.root());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let (engine, gone) = Client::connect(&at, &changes()).await.unwrap();
        assert!(engine.embedded() && gone.is_some());
        let long = engine.create(new_task(&"x".repeat(501))).await.unwrap_err();
        assert!(long.contains("the title is 501 characters long"), "{long}");
        let blank = engine.create(new_task("\x1b[31m\x07")).await.unwrap_err();
        assert!(blank.contains("a task needs a title"), "{blank}");
        let made = engine.create(new_task("fine")).await.unwrap();
        assert!(!made.existed && made.started.is_none());
        engine.shutdown(Duration::from_secs(10)).await;
    });
    let list = ws.ok(&["list", "--json"]);
    let tasks: serde_json::Value = serde_json::from_str(&list).unwrap();
    let titles: Vec<&str> = tasks
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["fine"]);
}

/// With an engine running in another process, `baton new --start` hands the creation to
/// it through the commands table, and the engine's answer carries the new task's id.
#[test]
fn a_task_asked_for_while_an_engine_runs_is_made_by_that_engine() {
    let ws = Ws::new();
    ws.pipeline("p.json", PIPELINE);
    let engine = common::spawn_engine(&ws);
    let sock = ws.root().join(".baton/engine.sock");
    common::wait_for("the engine to listen", || {
        baton::engine::wake::listening(&ws.root().join(".baton")) && sock.exists()
    });
    let id: i64 = ws
        .ok(&["new", "made by the engine", "-p", "p", "--start"])
        .trim()
        .parse()
        .unwrap();
    // A title the engine refuses comes back as its sentence, and makes nothing.
    let out = ws
        .baton(&["new", &"y".repeat(501), "-p", "p"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the title is 501 characters long"), "{err}");
    let store = Store::open_read_only(&ws.root().join(".baton/baton.db")).unwrap();
    let first = store
        .read()
        .command(1)
        .unwrap()
        .expect("the creation was queued");
    assert_eq!(first.body["create"]["title"], "made by the engine");
    let made: serde_json::Value = serde_json::from_str(first.result.as_deref().unwrap()).unwrap();
    assert_eq!(made["id"], id);
    common::wait_for("the engine to run the step", || {
        ws.show(id)["state"] == "done"
    });
    common::stop(engine);
    assert_eq!(ws.show(id)["title"], "made by the engine");
}

/// With no engine running, a command applies its order through the engine's own code and
/// says so: the creation is made here and its queued step waits.
#[test]
fn with_no_engine_an_order_is_applied_here_by_the_engine_code() {
    let ws = Ws::new();
    ws.pipeline("p.json", PIPELINE);
    let at = Workspace::at(ws.root());
    let mut new = new_task("here");
    new.start = true;
    let sent = Client::for_command(&at)
        .submit_blocking(Order::Create { create: new })
        .unwrap();
    assert!(sent.here);
    let Answer::Made(made) = sent.answer else {
        panic!("a creation answered {:?}", sent.answer)
    };
    assert!(made.queued, "{made:?}");
    assert_eq!(
        made.started.as_deref(),
        Some(&*format!("task {}: backlog → work (start)", made.id))
    );
    assert_eq!(ws.show(made.id)["status"], "work");
}

/// `baton serve` running the engine writes through the engine's store: the process holds
/// one handle on the database (a writer, a reader and, once it has had a checkpoint to
/// make, a checkpointer), not two.
#[test]
fn serve_has_one_writer_shared_with_its_engine() {
    let ws = api_common::workspace();
    let s = api_common::Server::start(ws.path(), &[]);
    assert!(s.banner.contains("runs the engine"), "{}", s.banner);
    let db = ws.path().join(".baton/baton.db").canonicalize().unwrap();
    let open = std::fs::read_dir(format!("/proc/{}/fd", s.pid()))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|p| *p == db)
        .count();
    assert!(
        (2..=3).contains(&open),
        "{open} connections to {}",
        db.display()
    );
}

/// `run --wait` and `logs --follow` in another process wake on the engine's changes: a
/// follower whose fallback is an hour returns as soon as the engine reports the task.
#[test]
fn a_follower_wakes_on_the_engines_change_not_on_a_timer() {
    let ws = Ws::new();
    ws.pipeline("p.json", PIPELINE);
    let engine = common::spawn_engine(&ws);
    let baton_dir = ws.root().join(".baton");
    common::wait_for("the engine to listen", || {
        baton::engine::wake::listening(&baton_dir)
    });
    let at = Workspace::at(ws.root());
    let mut follower = baton::engine::client::Follower::new(&at);
    let (done_tx, done) = std::sync::mpsc::channel();
    let waiting = std::thread::spawn(move || {
        follower.wait(&at, Duration::from_secs(3600), |c| {
            matches!(c, baton::engine::client::Change::Task(_))
        });
        let _ = done_tx.send(());
    });
    ws.ok(&["new", "wake up", "-p", "p"]);
    done.recv_timeout(Duration::from_secs(30))
        .expect("the follower woke on the new task's change");
    waiting.join().unwrap();
    common::stop(engine);
}

/// The read views come from the client, in the shapes the CLI prints: `show --json` and a
/// client's task view are one value, and a log asked for wrongly is told so.
#[test]
fn a_client_reads_the_board_in_the_clis_shapes() {
    let ws = Ws::new();
    ws.pipeline("p.json", PIPELINE);
    let id = ws.new_task("p", "seen twice");
    let at = Workspace::at(ws.root());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (task, board, logs) = rt.block_on(async {
        let c = Client::for_command(&at);
        (
            c.task(id).await.unwrap(),
            c.board(None, Some("p".into())).await.unwrap(),
            c.logs(id, None, None, Some(0)).await.unwrap_err(),
        )
    });
    assert_eq!(task, ws.show(id));
    let listed: serde_json::Value = serde_json::from_str(&ws.ok(&["list", "--json"])).unwrap();
    assert_eq!(board, listed);
    assert_eq!(
        logs.kind,
        baton::engine::views::Kind::Invalid,
        "{}",
        logs.message
    );
}

/// The board and the command line read through the engine's reader: neither opens the
/// database (whole-file administration, `baton db`, is the one command that does).
#[test]
fn no_front_end_opens_the_database() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    for dir in ["tui", "cli"] {
        for entry in std::fs::read_dir(src.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "rs") || path.ends_with("db_cmd.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for needle in [
                "Store::open",
                "StoreHandle::open",
                "rusqlite",
                "Connection::open",
            ] {
                if text.contains(needle) {
                    found.push(format!("{} uses {needle}", path.display()));
                }
            }
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}

/// A command leaves SQLite's write-ahead log for the next one (copying it into `baton.db`
/// at every exit cost four `fsync`s a command), but never much of it: once it passes a
/// megabyte, the command that wrote copies it in as it closes. What it holds is the
/// board's: a fresh connection sees the last command's change, and a read leaves it as is.
#[test]
fn commands_leave_at_most_a_small_write_ahead_log() {
    let ws = Ws::new();
    ws.pipeline("p.json", PIPELINE);
    let wal = ws.root().join(".baton/baton.db-wal");
    let size = || std::fs::metadata(&wal).map_or(0, |m| m.len());
    let (mut cut, mut last) = (0, 0);
    let mut ids = Vec::new();
    for n in 0..40 {
        ids.push(ws.new_task("p", &format!("task {n}")).to_string());
        let now = size();
        assert!(now <= 1 << 20, "after `new` {n}: the log is {now} bytes");
        cut += usize::from(now < last);
        last = now;
    }
    assert!(cut > 0, "40 commands never cut the log back");
    // Even just cut, the log file stays for the next command.
    assert!(wal.exists(), "the last `new` removed the log");
    let id = &ids[0];
    for args in [vec!["list"], vec!["show", id], vec!["list", "--json"]] {
        ws.ok(&args);
        assert_eq!(size(), last, "`{}` changed the log", args.join(" "));
    }
    ws.ok(&["edit", id, "--title", "two"]);
    let db = rusqlite::Connection::open(ws.root().join(".baton/baton.db")).unwrap();
    let title: String = db
        .query_row("SELECT title FROM tasks WHERE id = ?1", [id], |r| r.get(0))
        .unwrap();
    assert_eq!(title, "two");
}

/// A board beside the engine it runs shows the engine's pipelines: one catalog in the
/// process, reloaded by the engine's watcher, not read a second time by the board.
#[test]
fn a_board_with_its_engine_shows_the_engines_catalog() {
    use baton::tui::event::AppEvent;
    use baton::tui::loader::{LoadReq, Loader};
    let ws = Ws::new();
    ws.pipeline("p.json", PIPELINE);
    let at = Workspace::at(ws.root());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let (client, _gone) = Client::connect(&at, &changes()).await.unwrap();
        let mut catalog = client
            .catalog()
            .expect("an embedded client shares its catalog");
        assert!(catalog.borrow().get("p").is_some());
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let loader = Loader::spawn_on(at.clone(), tx, Some(catalog.clone()));
        // The engine sees the new file and reloads; the board's next load has it.
        ws.pipeline("q.json", &PIPELINE.replace(r#""id": "p""#, r#""id": "q""#));
        tokio::time::timeout(Duration::from_secs(30), async {
            while catalog.borrow_and_update().get("q").is_none() {
                catalog.changed().await.unwrap();
            }
        })
        .await
        .expect("the engine reloads the new pipeline");
        loader.request(LoadReq::Board);
        let board = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                match rx.recv().await.expect("the loader runs") {
                    AppEvent::Board(b) => return b,
                    _ => continue,
                }
            }
        })
        .await
        .expect("the loader answers");
        let ids: Vec<&str> = board.pipelines.iter().map(|p| p.id.as_str()).collect();
        assert!(ids.contains(&"q"), "{ids:?}");
        client.shutdown(Duration::from_secs(10)).await;
    });
    // A client attached to another process's engine has no catalog of its own to share.
    let engine = common::spawn_engine(&ws);
    common::wait_for("the engine to listen", || {
        baton::engine::wake::listening(&ws.root().join(".baton"))
    });
    rt.block_on(async {
        let (client, _gone) = Client::connect(&at, &changes()).await.unwrap();
        assert!(client.catalog().is_none());
    });
    common::stop(engine);
}
