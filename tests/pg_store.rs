//! The board in a real PostgreSQL: every migration makes the same tables and columns as in
//! SQLite; `baton db status|migrate|export|import|verify` work there; a board moves from
//! SQLite to PostgreSQL by export then import and reads back line for line the same; the
//! password comes only from PGPASSWORD or ~/.pgpass and is never printed; the engine and
//! task commands run a board kept there, several engines side by side (one per name); and
//! `serve` and `mcp` go to the PostgreSQL board, never to `.baton/baton.db`.

mod common;
mod infra;
mod pg_support;

use common::{GATE, Ws};
use pg_support::{PASSWORD, Pg};
use std::collections::BTreeMap;

/// `baton ARGS` on the board in database `db` of `pg`, the URL and password in the
/// environment.
fn on_pg(ws: &Ws, pg: &Pg, db: &str, args: &[&str]) -> std::process::Output {
    ws.baton(args)
        .env("BATON_DATABASE_URL", pg.url(db))
        .env("PGPASSWORD", PASSWORD)
        .output()
        .unwrap()
}

fn ok(out: std::process::Output) -> String {
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// Column: (name, type as PostgreSQL names it, not null).
type Columns = BTreeMap<String, Vec<(String, String, bool)>>;

fn sqlite_schema(db: &std::path::Path) -> (Columns, Vec<String>) {
    let conn = rusqlite::Connection::open(db).unwrap();
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut columns = Columns::new();
    for t in tables {
        let cols = conn
            .prepare(&format!("PRAGMA table_info(\"{t}\")"))
            .unwrap()
            .query_map([], |r| {
                let ty: String = r.get(2)?;
                let pg = match ty.as_str() {
                    "INTEGER" => "bigint",
                    "TEXT" => "text",
                    "REAL" => "double precision",
                    other => panic!("a column type the comparison does not know: {other}"),
                };
                let not_null = r.get::<_, bool>(3)? || r.get::<_, i64>(5)? > 0;
                Ok((r.get(1)?, pg.to_string(), not_null))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        columns.insert(t, cols);
    }
    let mut indexes: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    indexes.sort();
    (columns, indexes)
}

fn pg_schema(client: &mut postgres::Client) -> (Columns, Vec<String>) {
    let mut columns = Columns::new();
    for r in client
        .query(
            "SELECT table_name::text, column_name::text, data_type::text, is_nullable = 'NO' \
             FROM information_schema.columns WHERE table_schema = 'public' \
             AND table_name <> 'baton_schema' ORDER BY table_name, ordinal_position",
            &[],
        )
        .unwrap()
    {
        columns
            .entry(r.get(0))
            .or_default()
            .push((r.get(1), r.get(2), r.get(3)));
    }
    // Indexes made by CREATE INDEX, not those behind a primary key or UNIQUE constraint.
    let mut indexes: Vec<String> = client
        .query(
            "SELECT indexname::text FROM pg_indexes WHERE schemaname = 'public' \
             AND indexname NOT IN (SELECT conname FROM pg_constraint)",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    indexes.sort();
    (columns, indexes)
}

#[test]
fn every_migration_makes_the_same_tables_in_both_stores() {
    let Some(pg) = Pg::start() else { return };
    pg.create_db("board");
    let ws = Ws::new();
    let said = ok(on_pg(&ws, &pg, "board", &["db", "status"]));
    assert!(said.contains("no baton schema yet"), "{said}");
    let said = ok(on_pg(&ws, &pg, "board", &["db", "migrate"]));
    assert!(said.contains("made the schema"), "{said}");
    let said = ok(on_pg(&ws, &pg, "board", &["db", "status"]));
    assert!(
        said.contains("(current)") && said.contains(&pg.url("board")),
        "{said}"
    );
    assert!(ok(on_pg(&ws, &pg, "board", &["db", "migrate"])).contains("already current"));
    ws.ok(&["db", "migrate"]);
    let (sqlite_cols, sqlite_idx) = sqlite_schema(&ws.root().join(".baton/baton.db"));
    let (pg_cols, pg_idx) = pg_schema(&mut pg.client("board"));
    assert!(sqlite_cols.contains_key("tasks") && sqlite_cols.len() > 10);
    assert_eq!(pg_cols, sqlite_cols);
    assert_eq!(pg_idx, sqlite_idx);
    // The change numbers the SQLite triggers keep are kept by PostgreSQL's trigger alike.
    let mut c = pg.client("board");
    c.batch_execute(
        "INSERT INTO snapshots (fingerprint, json) VALUES ('f', '{}');
         INSERT INTO tasks (title, pipeline_id, status, state, created_at, updated_at, snapshot_id)
             VALUES ('a', 'p', 'todo', 'idle', 0, 0, 1), ('b', 'p', 'todo', 'idle', 0, 0, 1);
         UPDATE tasks SET title = 'a2' WHERE title = 'a';",
    )
    .unwrap();
    let seqs: Vec<(String, i64)> = c
        .query("SELECT title, change_seq FROM tasks ORDER BY id", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(seqs, [("a2".to_string(), 3), ("b".to_string(), 2)]);
}

#[test]
fn a_board_moves_from_sqlite_to_postgres_and_reads_back_the_same() {
    let Some(pg) = Pg::start() else { return };
    // A SQLite board with tasks, steps, their logs, history and events.
    let from = Ws::new();
    from.pipeline("gate.json", GATE);
    for n in 1..=3 {
        from.new_task("gate", &format!("task {n}"));
    }
    from.ok(&["start", "1"]);
    from.ok(&["start", "2"]);
    from.drain();
    from.ok(&["approve", "1"]);
    from.ok(&["reject", "2", "--note", "once more"]);
    from.drain();
    let text = from.ok(&["db", "export"]);
    for table in ["tasks", "step_runs", "log_lines", "history", "events"] {
        assert!(
            text.contains(&format!("\"table\":\"{table}\"}}")),
            "no {table} rows: {text}"
        );
    }
    let file = from.root().join("board.jsonl");
    std::fs::write(&file, &text).unwrap();

    // The team's board: the URL in config.toml, the password in ~/.pgpass.
    pg.create_db("team");
    let to = Ws::new();
    to.config(&format!("[store]\nstore = \"{}\"\n", pg.url("team")));
    let home = to.dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let pgpass = home.join(".pgpass");
    std::fs::write(
        &pgpass,
        format!("127.0.0.1:{}:*:baton:{PASSWORD}\n", pg.port),
    )
    .unwrap();
    let run = |args: &[&str]| to.baton(args).env("HOME", &home).output().unwrap();
    // libpq's rule: a password file others may read is not used.
    let out = run(&["db", "migrate"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("chmod 600"),
        "{out:?}"
    );
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    ok(run(&["db", "migrate"]));
    let out = run(&["db", "import", file.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("imported 3 task(s)"),
        "{out:?}"
    );
    // Every row, ids, counters and change numbers included, reads back as it went in.
    assert_eq!(ok(run(&["db", "export"])), text);
    assert!(ok(run(&["db", "verify"])).contains("sound"));
    // Ids go on after the imported ones.
    let mut c = pg.client("team");
    let next: i64 = c
        .query_one(
            "INSERT INTO snapshots (fingerprint, json) VALUES ('x', '{}') RETURNING id",
            &[],
        )
        .unwrap()
        .get(0);
    let most: i64 = c
        .query_one(
            "SELECT MAX(id) FROM snapshots WHERE fingerprint <> 'x'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(next, most + 1);
    c.batch_execute("DELETE FROM snapshots WHERE fingerprint = 'x'")
        .unwrap();

    // A second import is refused and changes nothing.
    let out = run(&["db", "import", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not empty"),
        "{out:?}"
    );
    assert_eq!(ok(run(&["db", "export"])), text);

    // And back out into a SQLite file, the same board.
    let back = to.dir.path().join("back.db");
    let pg_file = to.dir.path().join("pg.jsonl");
    ok(run(&["db", "export", "--out", pg_file.to_str().unwrap()]));
    ok(run(&[
        "db",
        "import",
        pg_file.to_str().unwrap(),
        "--to",
        back.to_str().unwrap(),
    ]));
    let again = Ws::new();
    std::fs::copy(&back, again.root().join(".baton/baton.db")).unwrap();
    assert_eq!(again.ok(&["db", "export"]), text);

    // verify names an execution key that is not its step's.
    c.batch_execute("UPDATE step_runs SET execution_key = '77:build:1' WHERE id = 1")
        .unwrap();
    let out = run(&["db", "verify"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("step run 1 carries an execution key"),
        "{out:?}"
    );
    // backup is SQLite's, and says what to use instead.
    let out = run(&["db", "backup", to.dir.path().join("b.db").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("pg_dump"),
        "{out:?}"
    );
}

#[test]
fn the_password_comes_from_the_environment_and_is_never_printed() {
    let Some(pg) = Pg::start() else { return };
    pg.create_db("board");
    let ws = Ws::new();
    // Without it, the server refuses and baton says where a password goes.
    let out = ws
        .baton(&["db", "status"])
        .env("BATON_DATABASE_URL", pg.url("board"))
        .env("HOME", ws.dir.path())
        .env_remove("PGPASSWORD")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("PGPASSWORD") && err.contains(".pgpass"),
        "{err}"
    );
    // A wrong one in the URL from the environment: refused, and not shown.
    let url = pg.url("board").replace("baton@", "baton:wr0ng-pw@");
    let out = ws
        .baton(&["db", "status"])
        .env("BATON_DATABASE_URL", &url)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("baton:***@127.0.0.1") && !err.contains("wr0ng-pw"),
        "{err}"
    );
    // The environment's URL wins over config.toml's.
    ws.config("[store]\nstore = \"postgres://nobody@127.0.0.1:1/nothing\"\n");
    let said = ok(on_pg(&ws, &pg, "board", &["db", "status"]));
    assert!(said.contains(&pg.url("board")), "{said}");
}

#[test]
fn a_password_in_config_toml_is_refused_without_showing_it() {
    let ws = Ws::new();
    ws.config("[store]\nstore = \"postgres://ann:hunter2@db.example/board\"\n");
    for args in [&["db", "status"][..], &["list"], &["config", "show"]] {
        let out = ws.baton(args).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "baton {args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("carries a password") && err.contains("PGPASSWORD or ~/.pgpass"),
            "baton {args:?}: {err}"
        );
        assert!(!err.contains("hunter2"), "baton {args:?}: {err}");
    }
}

#[test]
fn serve_and_mcp_no_longer_refuse_a_postgres_board() {
    let ws = Ws::new();
    ws.pipeline("gate.json", GATE);
    // No server there: each says it cannot reach it, not that it needs SQLite, and none
    // falls back to the SQLite file.
    let url = "postgres://ann@127.0.0.1:1/board";
    for args in [&["serve", "--listen", "127.0.0.1:0"][..], &["mcp"]] {
        let out = ws
            .baton(args)
            .env("BATON_DATABASE_URL", url)
            .write_stdin("")
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "baton {args:?}: {out:?}");
        assert!(
            !err.contains("still need SQLite") && err.contains("127.0.0.1:1"),
            "baton {args:?}: {err}"
        );
    }
    let db = ws.root().join(".baton/baton.db");
    if db.exists() {
        assert_eq!(ws.ok(&["list", "--json"]).trim(), "[]");
    }
}

#[test]
fn the_engine_and_task_commands_run_a_board_kept_in_postgres() {
    let Some(pg) = Pg::start() else { return };
    pg.create_db("board");
    let ws = Ws::new();
    ws.pipeline("gate.json", GATE);
    // No `db migrate` first: the first command brings the schema up.
    let id: i64 = ok(on_pg(
        &ws,
        &pg,
        "board",
        &["new", "first", "--pipeline", "gate"],
    ))
    .trim()
    .parse()
    .unwrap();
    ok(on_pg(&ws, &pg, "board", &["start", &id.to_string()]));
    // The engine runs the script step; the task waits at the review gate.
    let out = ws
        .baton(&["engine", "--exit-when-idle"])
        .env("BATON_DATABASE_URL", pg.url("board"))
        .env("PGPASSWORD", PASSWORD)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(ws.root().join("title.txt")).unwrap(),
        "first",
        "the step ran with the task's title"
    );
    ok(on_pg(&ws, &pg, "board", &["approve", &id.to_string()]));
    let listed: serde_json::Value =
        serde_json::from_str(&ok(on_pg(&ws, &pg, "board", &["list", "--json"]))).unwrap();
    let task = &listed.as_array().unwrap()[0];
    assert_eq!(
        (task["id"].as_i64(), task["status"].as_str()),
        (Some(id), Some("done"))
    );
    // It all went to PostgreSQL, none of it to the SQLite file `baton init` made.
    let sqlite = rusqlite::Connection::open(ws.root().join(".baton/baton.db")).unwrap();
    let rows: i64 = sqlite
        .query_row("SELECT COUNT(*) FROM tasks", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 0);
    let mut c = pg.client("board");
    let steps: Vec<(String, String)> = c
        .query(
            "SELECT status, state FROM step_runs WHERE task_id = $1",
            &[&id],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(steps, [("build".to_string(), "succeeded".to_string())]);
    let triggers: Vec<String> = c
        .query(
            "SELECT trigger FROM history WHERE task_id = $1 ORDER BY id",
            &[&id],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(triggers, ["create", "start", "success", "approve"]);
}

#[test]
fn a_second_engine_runs_beside_the_first_and_one_under_its_name_is_refused() {
    let Some(pg) = Pg::start() else { return };
    pg.create_db("board");
    let first = Ws::new();
    first.pipeline("gate.json", GATE);
    ok(on_pg(&first, &pg, "board", &["db", "migrate"]));
    let engine = |ws: &Ws, name: &str| {
        std::process::Command::new(assert_cmd::cargo::cargo_bin("baton"))
            .current_dir(ws.root())
            .env_remove("BATON_DIR")
            .env("XDG_CONFIG_HOME", ws.dir.path().join("xdg"))
            .env("BATON_DATABASE_URL", pg.url("board"))
            .env("PGPASSWORD", PASSWORD)
            .args(["engine", "--name", name])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let a = engine(&first, "a");
    let mut c = pg.client("board");
    let live = |c: &mut postgres::Client, name: &str| -> bool {
        c.query_one(
            "SELECT COUNT(*) FROM engines WHERE name = $1 AND stopped_at IS NULL",
            &[&name],
        )
        .map(|r| r.get::<_, i64>(0) == 1)
        .unwrap_or(false)
    };
    common::wait_for("engine a to register", || live(&mut c, "a"));
    // Another workspace's engine under another name runs the board beside it: it runs a
    // task's step while `a` runs.
    let second = Ws::new();
    second.pipeline("gate.json", GATE);
    let id = on_pg(
        &second,
        &pg,
        "board",
        &["new", "beside", "--pipeline", "gate", "--start"],
    );
    let id = ok(id).trim().to_string();
    let out = second
        .baton(&["engine", "--name", "b", "--exit-when-idle"])
        .env("BATON_DATABASE_URL", pg.url("board"))
        .env("PGPASSWORD", PASSWORD)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let shown: serde_json::Value =
        serde_json::from_str(&ok(on_pg(&second, &pg, "board", &["show", &id, "--json"]))).unwrap();
    assert_eq!(shown["status"], "review");
    // One under the live engine's name is refused, in one sentence naming it.
    let out = second
        .baton(&["engine", "--name", "a", "--exit-when-idle"])
        .env("BATON_DATABASE_URL", pg.url("board"))
        .env("PGPASSWORD", PASSWORD)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("an engine named a is already running"),
        "{err}"
    );
    assert!(live(&mut c, "a"), "the first engine still runs");
    common::stop(a);
}
