//! Letting a finished step's output readers reach the end of what it wrote, up to a
//! deadline: shared by the executors that read a step's output in background tasks.

use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Waits for `readers` to end, up to a deadline `after` from the first call (kept in
/// `until`, so a caller that drops this and calls it again cannot extend it). Readers still
/// going at the deadline are aborted; returns whether that happened.
pub(super) async fn drain_readers(
    readers: &mut Vec<JoinHandle<()>>,
    until: &mut Option<Instant>,
    after: Duration,
) -> bool {
    let deadline = *until.get_or_insert_with(|| Instant::now() + after);
    let mut cut = false;
    while let Some(reader) = readers.last_mut() {
        if tokio::time::timeout_at(deadline, reader).await.is_err() {
            cut = true;
            for r in readers.iter() {
                r.abort();
            }
        }
        readers.pop();
    }
    cut
}
