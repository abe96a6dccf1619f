//! The log writer: batches step output into one transaction per ~100 ms or 1,000 lines, and
//! fans each batch out to subscribers (the TUI's live pane).

use super::EngineEvent;
use crate::store::{NewLogLine, StoreHandle};
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, oneshot};

/// Lines per transaction at most.
const BATCH_LINES: usize = 1_000;
/// Tries at writing one batch before it is dropped.
const WRITE_ATTEMPTS: u32 = 5;

/// Longest a line waits before it is written.
const BATCH_DELAY: Duration = Duration::from_millis(100);

/// A message to the writer.
#[derive(Debug)]
pub enum LogMsg {
    /// Lines of one task's steps, in order.
    Lines {
        task_id: i64,
        lines: Vec<NewLogLine>,
    },
    /// Acknowledged once everything sent before it is queued to the store: a write the
    /// sender makes after the acknowledgement commits after those lines (or with them).
    Flush(oneshot::Sender<()>),
    /// Acknowledged once everything sent before it is committed, or given up.
    #[cfg_attr(not(test), allow(dead_code))]
    Sync(oneshot::Sender<()>),
}

/// Runs the writer until every sender is dropped.
pub async fn run(
    store: StoreHandle,
    mut rx: mpsc::Receiver<LogMsg>,
    events: broadcast::Sender<EngineEvent>,
) {
    let mut batch = Batch::default();
    let mut acks: Vec<oneshot::Sender<()>> = Vec::new();
    let mut syncs: Vec<oneshot::Sender<()>> = Vec::new();
    let mut lost = Lost::default();
    loop {
        // Wait for the first message, then gather until the batch is full or old enough.
        let Some(first) = rx.recv().await else { break };
        let deadline = tokio::time::Instant::now() + BATCH_DELAY;
        let mut msg = Some(first);
        while let Some(m) = msg.take() {
            match m {
                LogMsg::Lines { task_id, lines } => batch.push(task_id, lines),
                LogMsg::Flush(ack) => {
                    acks.push(ack);
                    break;
                }
                LogMsg::Sync(ack) => {
                    syncs.push(ack);
                    break;
                }
            }
            if batch.lines.len() >= BATCH_LINES {
                break;
            }
            // Take what is already queued without waiting; wait only for a partial batch.
            msg = match rx.try_recv() {
                Ok(m) => Some(m),
                Err(_) => tokio::time::timeout_at(deadline, rx.recv())
                    .await
                    .ok()
                    .flatten(),
            };
        }
        write(
            &store,
            std::mem::take(&mut batch),
            &events,
            &mut lost,
            &mut acks,
        )
        .await;
        for ack in syncs.drain(..) {
            let _ = ack.send(());
        }
    }
    write(&store, batch, &events, &mut lost, &mut acks).await;
    if !lost.0.is_empty() {
        // One last try at saying what was lost.
        write(&store, Batch::default(), &events, &mut lost, &mut acks).await;
    }
}

/// Lines gathered for one transaction, and the task of each step run in it.
#[derive(Default)]
struct Batch {
    lines: Vec<NewLogLine>,
    tasks: Vec<(i64, i64)>,
}

impl Batch {
    fn push(&mut self, task_id: i64, lines: Vec<NewLogLine>) {
        for l in &lines {
            if !self.tasks.iter().any(|(s, _)| *s == l.step_run_id) {
                self.tasks.push((l.step_run_id, task_id));
            }
        }
        if self.lines.is_empty() {
            self.lines = lines;
        } else {
            self.lines.extend(lines);
        }
    }
}

/// Lines that could not be stored, by step run, with the last reason: a marker line says
/// so as soon as the store takes writes again (a full disk freed, say).
#[derive(Default)]
struct Lost(std::collections::BTreeMap<i64, (usize, String)>);

async fn write(
    store: &StoreHandle,
    batch: Batch,
    events: &broadcast::Sender<EngineEvent>,
    lost: &mut Lost,
    acks: &mut Vec<oneshot::Sender<()>>,
) {
    let ack_all = |acks: &mut Vec<oneshot::Sender<()>>| {
        for ack in acks.drain(..) {
            let _ = ack.send(());
        }
    };
    if batch.lines.is_empty() && lost.0.is_empty() {
        ack_all(acks);
        return;
    }
    let Batch { lines, tasks } = batch;
    let markers: Vec<NewLogLine> = lost
        .0
        .iter()
        .map(|(step, (n, why))| NewLogLine {
            step_run_id: *step,
            stream: crate::store::Stream::System,
            ts: crate::store::now_ms(),
            text: format!("[baton] {n} log line(s) of this step were lost: {why}"),
        })
        .collect();
    let lines = std::sync::Arc::new(lines);
    let markers = std::sync::Arc::new(markers);
    // The database may be busy for longer than its timeout (another process's long write):
    // try again a few times before giving the batch up.
    let mut failed = None;
    for attempt in 1..=WRITE_ATTEMPTS {
        let (rows, marks) = (lines.clone(), markers.clone());
        let written = store.write_queued(move |db| {
            db.insert_log_lines(&marks)?;
            db.insert_log_lines(&rows)
        });
        // Queued: whoever waits for a flush may go on (their next write comes after this).
        ack_all(acks);
        match written.await {
            Ok(()) => {
                failed = None;
                break;
            }
            Err(e) => {
                tracing::warn!(
                    "writing {} log lines failed (try {attempt}): {e}",
                    lines.len()
                );
                failed = Some(e.to_string());
                if attempt < WRITE_ATTEMPTS {
                    tokio::time::sleep(Duration::from_millis(100 * u64::from(attempt))).await;
                }
            }
        }
    }
    if let Some(why) = failed {
        tracing::error!("{} log lines dropped: {why}", lines.len());
        for l in lines.iter() {
            let e = lost.0.entry(l.step_run_id).or_insert((0, String::new()));
            e.0 += 1;
            e.1 = why.clone();
        }
        return;
    }
    lost.0.clear();
    // Subscribers (a board's live pane) are told which step runs have new lines; they read
    // the lines themselves, so none is copied for them.
    if events.receiver_count() == 0 {
        return;
    }
    let mut start = 0;
    while start < lines.len() {
        let step = lines[start].step_run_id;
        let end = lines[start..]
            .iter()
            .position(|l| l.step_run_id != step)
            .map_or(lines.len(), |n| start + n);
        let task_id = tasks
            .iter()
            .find(|(s, _)| *s == step)
            .map_or(0, |(_, t)| *t);
        let _ = events.send(EngineEvent::LogLines {
            task_id,
            step_run_id: step,
        });
        start = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Stream, TaskState};

    fn line(step_run_id: i64, text: &str) -> LogMsg {
        LogMsg::Lines {
            task_id: 1,
            lines: vec![NewLogLine {
                step_run_id,
                stream: Stream::Stdout,
                ts: 0,
                text: text.into(),
            }],
        }
    }

    async fn flush(tx: &mpsc::Sender<LogMsg>) {
        let (ack, done) = oneshot::channel();
        tx.send(LogMsg::Sync(ack)).await.unwrap();
        done.await.unwrap();
    }

    /// A full disk is simulated by a trigger that refuses log rows while a flag is set.
    #[tokio::test]
    async fn lines_that_could_not_be_stored_are_counted_in_a_marker_once_writes_work_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let store = StoreHandle::open(&path).unwrap();
        let step = store
            .write(|db| {
                let id = db.insert_task("t", "", "p", "{}", "s", TaskState::Running)?;
                let run = db.task(id)?.run_id.unwrap_or_default();
                db.insert_step_run(id, run, "s", None, 0)
            })
            .await
            .unwrap()
            .id;
        let raw = rusqlite::Connection::open(&path).unwrap();
        raw.execute_batch(
            "CREATE TRIGGER full BEFORE INSERT ON log_lines \
             WHEN EXISTS (SELECT 1 FROM meta WHERE key = 'full') \
             BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;
             INSERT INTO meta (key, value) VALUES ('full', '1');",
        )
        .unwrap();
        let (tx, rx) = mpsc::channel(16);
        let (events, _) = broadcast::channel(16);
        let writer = tokio::spawn(run(store.clone(), rx, events));
        for text in ["a", "b", "c"] {
            tx.send(line(step, text)).await.unwrap();
        }
        flush(&tx).await;
        let stored = store
            .read(move |db| db.log_lines(step, 0, 100))
            .await
            .unwrap();
        assert!(stored.is_empty(), "nothing could be stored: {stored:?}");
        raw.execute("DELETE FROM meta WHERE key = 'full'", [])
            .unwrap();
        tx.send(line(step, "d")).await.unwrap();
        flush(&tx).await;
        drop(tx);
        writer.await.unwrap();
        let stored: Vec<String> = store
            .read(move |db| db.log_lines(step, 0, 100))
            .await
            .unwrap()
            .into_iter()
            .map(|l| l.text)
            .collect();
        assert_eq!(stored.len(), 2, "{stored:?}");
        assert!(
            stored[0].starts_with("[baton] 3 log line(s) of this step were lost")
                && stored[0].contains("full"),
            "{stored:?}"
        );
        assert_eq!(stored[1], "d");
    }
}
