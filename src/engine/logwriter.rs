//! The log writer: batches step output into one transaction per ~100 ms or 1,000 lines, and
//! fans each batch out to subscribers (the TUI's live pane).

use super::EngineEvent;
use crate::store::{NewLogLine, Store};
use std::sync::{Arc, Mutex};
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
    Line {
        task_id: i64,
        line: NewLogLine,
    },
    /// Acknowledged once everything sent before it is committed.
    Flush(oneshot::Sender<()>),
}

/// Runs the writer until every sender is dropped.
pub async fn run(
    store: Arc<Mutex<Store>>,
    mut rx: mpsc::Receiver<LogMsg>,
    events: broadcast::Sender<EngineEvent>,
) {
    let mut batch: Vec<(i64, NewLogLine)> = Vec::with_capacity(BATCH_LINES);
    let mut acks: Vec<oneshot::Sender<()>> = Vec::new();
    loop {
        // Wait for the first message, then gather until the batch is full or old enough.
        let Some(first) = rx.recv().await else { break };
        let deadline = tokio::time::Instant::now() + BATCH_DELAY;
        let mut msg = Some(first);
        while let Some(m) = msg.take() {
            match m {
                LogMsg::Line { task_id, line } => batch.push((task_id, line)),
                LogMsg::Flush(ack) => {
                    acks.push(ack);
                    break;
                }
            }
            if batch.len() >= BATCH_LINES {
                break;
            }
            msg = tokio::time::timeout_at(deadline, rx.recv())
                .await
                .ok()
                .flatten();
        }
        write(&store, &mut batch, &events).await;
        for ack in acks.drain(..) {
            let _ = ack.send(());
        }
    }
    write(&store, &mut batch, &events).await;
}

async fn write(
    store: &Arc<Mutex<Store>>,
    batch: &mut Vec<(i64, NewLogLine)>,
    events: &broadcast::Sender<EngineEvent>,
) {
    if batch.is_empty() {
        return;
    }
    let lines: Vec<(i64, NewLogLine)> = std::mem::take(batch);
    let store = store.clone();
    let lines = tokio::task::spawn_blocking(move || {
        let only: Vec<NewLogLine> = lines.iter().map(|(_, l)| l.clone()).collect();
        let mut guard = store.lock().unwrap_or_else(|p| p.into_inner());
        // The database may be busy for longer than its timeout (a long merge holds the write
        // lock): try again a few times before giving the batch up.
        for attempt in 1..=WRITE_ATTEMPTS {
            match guard.write(|db| db.insert_log_lines(&only)) {
                Ok(()) => break,
                Err(e) if attempt == WRITE_ATTEMPTS => {
                    tracing::error!("writing {} log lines failed, dropped: {e}", only.len());
                }
                Err(e) => {
                    tracing::warn!("writing {} log lines failed, retrying: {e}", only.len());
                    std::thread::sleep(Duration::from_millis(250));
                }
            }
        }
        lines
    })
    .await
    .unwrap_or_default();
    // Group by step run for subscribers.
    let mut start = 0;
    while start < lines.len() {
        let (task_id, ref first) = lines[start];
        let end = lines[start..]
            .iter()
            .position(|(_, l)| l.step_run_id != first.step_run_id)
            .map_or(lines.len(), |n| start + n);
        let _ = events.send(EngineEvent::LogLines {
            task_id,
            step_run_id: first.step_run_id,
            lines: lines[start..end].iter().map(|(_, l)| l.clone()).collect(),
        });
        start = end;
    }
}
