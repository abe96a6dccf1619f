//! A big board made fast: two template tasks made by the real CLI (one finished, with its
//! run, steps, history and events; one idle in the queue), then copied with SQL straight
//! into `.baton/baton.db` — `baton new` 10,000 times would take minutes.
//!
//! This depends on the store's schema: the tables `tasks`, `runs`, `step_runs`, `history`
//! and `events`, their `id`/`task_id`/`run_id` columns and `step_runs.execution_key` of the
//! form `run:status:attempt`, and `step_runs.log_count` (set to 0). Every other column is copied as it is, by name, so columns
//! added later come along. Log lines are not copied (no board query reads them).

use crate::workspace::{Ws, pipeline};
use rusqlite::{Connection, Transaction};
use serde_json::json;

/// The pipeline the filler tasks belong to.
pub const FILLER: &str = "filler";

/// Puts `n` tasks (at least the two templates) on an empty board: three in four finished
/// (done), one in four idle in the queue, titled "Task 1", "Task 2", …
pub fn fill(ws: &Ws, n: usize) -> Result<(), String> {
    ws.pipeline(&pipeline(
        FILLER,
        &[
            json!({"run": "echo planning the change"}),
            json!({"run": "echo building it"}),
            json!({"run": "echo 12 passed, 0 failed"}),
        ],
    ))?;
    let ran = ws.cli(&[
        "run",
        FILLER,
        "--title",
        "template done",
        "--prompt",
        "A finished task",
        "--wait",
    ])?;
    // It prints "ID STATUS (STATE)".
    let done: i64 = match ran.stdout.split_whitespace().collect::<Vec<_>>()[..] {
        [id, "done", "(done)"] => id.parse().map_err(|_| "`baton run` printed no task id")?,
        _ => {
            return Err(format!(
                "the template task did not end done: {}",
                ran.stdout.trim()
            ));
        }
    };
    let idle: i64 = ws
        .cli(&[
            "new",
            "template idle",
            "--pipeline",
            FILLER,
            "--prompt",
            "Waiting",
        ])?
        .stdout
        .trim()
        .parse()
        .map_err(|_| "`baton new` did not print the task id")?;
    let mut conn = ws.db()?;
    copy_tasks(&mut conn, done, idle, n.saturating_sub(2))
        .map_err(|e| format!("filling the board: {e}"))
}

fn copy_tasks(conn: &mut Connection, done: i64, idle: i64, n: usize) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    let run = |table| Copier::new(&tx, table);
    let (tasks, runs, steps) = (run("tasks")?, run("runs")?, run("step_runs")?);
    let (history, events) = (run("history")?, run("events")?);
    // ?1 is the template row's key; ?2 the new task, ?3 its new run.
    let key = "?3 || substr(execution_key, instr(execution_key, ':'))";
    for k in 1..=n as i64 {
        let template = if k % 4 == 0 { idle } else { done };
        let t = tasks.copy(
            &tx,
            "id",
            &[
                ("title", "'Task ' || ?2"),
                ("updated_at", "updated_at + ?2"),
            ],
            (template, k),
        )?;
        let old_run: Option<i64> =
            tx.query_row("SELECT run_id FROM tasks WHERE id = ?1", [t], |r| r.get(0))?;
        let Some(old_run) = old_run else { continue };
        let r = runs.copy(&tx, "id", &[("task_id", "?2")], (old_run, t))?;
        tx.execute("UPDATE tasks SET run_id = ?1 WHERE id = ?2", [r, t])?;
        let ids = [("task_id", "?2"), ("run_id", "?3"), ("execution_key", key)];
        // Log lines are not copied: neither is their count.
        let step_cols = [ids[0], ids[1], ids[2], ("log_count", "0")];
        steps.copy(&tx, "run_id", &step_cols, (old_run, t, r))?;
        history.copy(&tx, "task_id", &ids[..2], (template, t, r))?;
        events.copy(&tx, "task_id", &[("task_id", "?2")], (template, t))?;
    }
    drop((tasks, runs, steps, history, events));
    tx.commit()
}

/// Copies rows of one table, every column but `id` as it is unless overridden.
struct Copier {
    table: &'static str,
    columns: Vec<String>,
}

impl Copier {
    fn new(tx: &Transaction, table: &'static str) -> rusqlite::Result<Self> {
        let mut stmt = tx.prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))?;
        let columns = stmt
            .query_map([], |r| r.get::<_, String>(0))?
            .filter(|c| !matches!(c, Ok(name) if name == "id"))
            .collect::<rusqlite::Result<_>>()?;
        Ok(Self { table, columns })
    }

    /// `INSERT … SELECT` of the rows where `key = ?1`, with SQL expressions in place of
    /// some columns (they may use the later parameters); returns the last inserted id.
    fn copy(
        &self,
        tx: &Transaction,
        key: &str,
        set: &[(&str, &str)],
        params: impl rusqlite::Params,
    ) -> rusqlite::Result<i64> {
        let exprs: Vec<&str> = self
            .columns
            .iter()
            .map(|c| {
                set.iter()
                    .find(|(name, _)| name == c)
                    .map_or(c.as_str(), |(_, e)| *e)
            })
            .collect();
        let sql = format!(
            "INSERT INTO {t} ({cols}) SELECT {exprs} FROM {t} WHERE {key} = ?1 ORDER BY id",
            t = self.table,
            cols = self.columns.join(", "),
            exprs = exprs.join(", "),
        );
        tx.prepare_cached(&sql)?.execute(params)?;
        Ok(tx.last_insert_rowid())
    }
}
