//! A board kept in PostgreSQL for tests that run several engines on it: workspaces set up
//! for it, `baton` commands and `baton engine` processes on it, and reads of its rows.
#![allow(dead_code)]

use crate::common::{Ws, wait_within};
use crate::pg_support::{PASSWORD, Pg};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A board in database `board` of its own server.
pub struct Board {
    pub pg: Pg,
}

impl Board {
    pub fn start() -> Option<Self> {
        let pg = Pg::start()?;
        pg.create_db("board");
        Some(Self { pg })
    }

    pub fn client(&self) -> postgres::Client {
        self.pg.client("board")
    }

    /// A workspace on the board, with `pipelines` in it (see [`Board::configure`]).
    pub fn workspace(&self, pipelines: &[(&str, &str)]) -> Ws {
        let ws = Ws::new();
        self.configure(&ws, pipelines);
        ws
    }

    /// Sets `ws` up for the board: its engine beats every second (a lease of three), resumes
    /// what it finds interrupted, and takes a task over as soon as the task's home engine
    /// is gone; with `pipelines` added.
    pub fn configure(&self, ws: &Ws, pipelines: &[(&str, &str)]) {
        ws.config(
            "auto_resume = true\nmax_parallel = 4\n[engine]\nheartbeat = \"1s\"\ntakeover_after = \"0s\"\n",
        );
        for (file, json) in pipelines {
            ws.pipeline(file, json);
        }
    }

    /// `baton ARGS` in `ws` on this board.
    pub fn baton(&self, ws: &Ws, args: &[&str]) -> std::process::Output {
        ws.baton(args)
            .env("BATON_DATABASE_URL", self.pg.url("board"))
            .env("PGPASSWORD", PASSWORD)
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap()
    }

    pub fn ok(&self, ws: &Ws, args: &[&str]) -> String {
        let out = self.baton(ws, args);
        assert!(out.status.success(), "baton {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    /// `baton engine --name NAME` in `ws`, its output in `.baton/engine.out`.
    pub fn engine(&self, ws: &Ws, name: &str) -> Child {
        let out = std::fs::File::create(ws.root().join(".baton/engine.out")).unwrap();
        Command::new(assert_cmd::cargo::cargo_bin("baton"))
            .current_dir(ws.root())
            .env_remove("BATON_DIR")
            .env("XDG_CONFIG_HOME", ws.dir.path().join("xdg"))
            .env("BATON_DATABASE_URL", self.pg.url("board"))
            .env("PGPASSWORD", PASSWORD)
            .args(["engine", "--name", name])
            .stdout(Stdio::null())
            .stderr(out)
            .spawn()
            .unwrap()
    }

    /// Waits until engine `name` is registered and live.
    pub fn wait_live(&self, name: &str) {
        let mut c = self.client();
        wait_within(
            &format!("engine {name} to register"),
            Duration::from_secs(60),
            || {
                c.query_one(
                    "SELECT COUNT(*) FROM engines WHERE name = $1 AND stopped_at IS NULL",
                    &[&name],
                )
                .map(|r| r.get::<_, i64>(0) == 1)
                .unwrap_or(false)
            },
        );
    }

    pub fn count(&self, sql: &str) -> i64 {
        self.client().query_one(sql, &[]).unwrap().get(0)
    }

    /// (attempt, state, engine) of a task's step runs, in order.
    pub fn steps(&self, task: i64) -> Vec<(i64, String, Option<String>)> {
        self.client()
            .query(
                "SELECT attempt, state, engine FROM step_runs WHERE task_id = $1 ORDER BY id",
                &[&task],
            )
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect()
    }

    /// The summaries of a task's events of `kind`.
    pub fn events(&self, task: i64, kind: &str) -> Vec<String> {
        self.client()
            .query(
                "SELECT summary FROM events WHERE task_id = $1 AND type = $2 ORDER BY id",
                &[&task, &kind],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
    }
}

/// Stops an engine (SIGTERM) and reaps it.
pub fn stop(mut engine: Child) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(engine.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = engine.wait();
}
