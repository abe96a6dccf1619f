//! The raw floors: the least a program could spend doing the same work as baton.

use crate::proc;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// A tokio program spawning `sh -c true` `n` times, one after the other; the time each.
pub fn sequential_spawns(n: usize) -> Result<Duration, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a tokio runtime: {e}"))?;
    rt.block_on(async {
        let start = Instant::now();
        for _ in 0..n {
            let status = tokio::process::Command::new("sh")
                .args(["-c", "true"])
                .status()
                .await
                .map_err(|e| format!("cannot spawn sh: {e}"))?;
            if !status.success() {
                return Err(format!("`sh -c true` exited with {status}"));
            }
        }
        Ok(start.elapsed() / n as u32)
    })
}

/// A shell command line (run by `sh -c` in `cwd`) and its wall time; fails unless it
/// exits 0.
pub fn shell(script: &str, cwd: &Path, limit: Duration, what: &str) -> Result<proc::Done, String> {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", script]).current_dir(cwd);
    proc::run(&mut cmd, limit, what)?.ok(what)
}

/// `jobs` × `steps` `sh -c true` at `parallel` at once through `xargs -P`.
pub fn xargs(
    jobs: usize,
    steps: usize,
    parallel: usize,
    limit: Duration,
) -> Result<Duration, String> {
    let script = format!("seq {} | xargs -P {parallel} -n1 sh -c true", jobs * steps);
    Ok(shell(&script, Path::new("/"), limit, "the xargs floor")?.elapsed)
}

/// The raw floor of log ingest: `sh -c CMD`'s stdout read line by line, each line sent
/// through a channel to a thread that inserts them in transactions of up to 1,000 lines
/// into a table shaped like baton's `log_lines` (the same columns and index). What any
/// program that keeps a step's log in SQLite must do; baton adds redaction, test counting,
/// the context file and its engine around it.
pub fn sqlite_ingest(cmd: &str, db: &Path) -> Result<Duration, String> {
    use tokio::io::AsyncBufReadExt;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a tokio runtime: {e}"))?;
    let conn = rusqlite::Connection::open(db).map_err(|e| e.to_string())?;
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
         CREATE TABLE log_lines (id INTEGER PRIMARY KEY AUTOINCREMENT, step_run_id INTEGER NOT NULL,
             stream TEXT NOT NULL, ts INTEGER NOT NULL, line TEXT NOT NULL);
         CREATE INDEX log_lines_step ON log_lines(step_run_id, id);",
    )
    .map_err(|e| e.to_string())?;
    let start = Instant::now();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<String>(8192);
    let writer = std::thread::spawn(move || -> Result<(), String> {
        let mut conn = conn;
        let mut batch = Vec::with_capacity(1000);
        while let Some(first) = rx.blocking_recv() {
            batch.push(first);
            while batch.len() < 1000 {
                match rx.try_recv() {
                    Ok(l) => batch.push(l),
                    Err(_) => break,
                }
            }
            let t = conn.transaction().map_err(|e| e.to_string())?;
            {
                let mut stmt = t
                    .prepare_cached(
                        "INSERT INTO log_lines (step_run_id, stream, ts, line) VALUES (1, 'stdout', ?1, ?2)",
                    )
                    .map_err(|e| e.to_string())?;
                for line in batch.drain(..) {
                    stmt.execute(rusqlite::params![0i64, line])
                        .map_err(|e| e.to_string())?;
                }
            }
            t.commit().map_err(|e| e.to_string())?;
        }
        Ok(())
    });
    rt.block_on(async {
        let mut child = tokio::process::Command::new("sh")
            .args(["-c", cmd])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot spawn sh: {e}"))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        while let Some(line) = lines.next_line().await.map_err(|e| e.to_string())? {
            if tx.send(line).await.is_err() {
                break;
            }
        }
        drop(tx);
        child.wait().await.map_err(|e| e.to_string())?;
        Ok::<_, String>(())
    })?;
    writer
        .join()
        .map_err(|_| "the floor's writer panicked".to_string())??;
    Ok(start.elapsed())
}
