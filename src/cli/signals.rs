//! SIGINT and SIGTERM for a headless engine (`baton engine`, `run --wait`): the first stops
//! it, a second one interrupts what a draining stop waits for.

use std::time::{Duration, Instant};

/// How long after the first stop signal another one is still the same keypress. Under a
/// wrapper (an npm script, `tini -g`) one ctrl+c reaches baton twice within microseconds:
/// from the terminal, which signals the whole foreground process group, and forwarded by
/// the wrapper. A `kill` to a process group or systemd's stop does the same with SIGTERM,
/// so this holds for both. A person's second press comes well after this.
const SAME_PRESS: Duration = Duration::from_millis(300);

/// What a stop signal asks of the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Press {
    /// The first: stop (drain or interrupt, per `shutdown`).
    Stop,
    /// Too soon after the first to be another: the same keypress, delivered twice.
    Again,
    /// A second one: interrupt what the stop waits for.
    Force,
}

/// The stop signals seen so far: when the first came.
#[derive(Debug, Default)]
struct Presses {
    first: Option<Instant>,
}

impl Presses {
    /// What a signal received at `now` asks.
    fn press(&mut self, now: Instant) -> Press {
        match self.first {
            None => {
                self.first = Some(now);
                Press::Stop
            }
            Some(at) if now.saturating_duration_since(at) < SAME_PRESS => Press::Again,
            Some(_) => Press::Force,
        }
    }
}

/// Stops `engine` on SIGINT or SIGTERM (`first` runs then), and on a second one (not the
/// same press: see [`SAME_PRESS`]) interrupts the steps a draining stop waits for.
pub(super) fn stop_on_signals(
    engine: &crate::engine::Engine,
    first: impl FnOnce() + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let (shutdown, force) = (engine.shutdown_token(), engine.force_token());
    // Listened for from here on, not from the task's first turn: a signal in between would
    // end the process as if baton did not handle it, and one kept here stops the engine
    // before its first look (which then starts nothing).
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return tokio::spawn(async {});
    };
    tokio::spawn(async move {
        let mut first = Some(first);
        let mut presses = Presses::default();
        loop {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            match presses.press(Instant::now()) {
                Press::Stop => {
                    if let Some(first) = first.take() {
                        first();
                    }
                    shutdown.cancel();
                }
                Press::Again => {
                    tracing::info!(
                        "a stop signal within {SAME_PRESS:?} of the first: the same one, forwarded"
                    );
                }
                Press::Force => force.cancel(),
            }
        }
    })
}

/// Returns on the first SIGINT or SIGTERM.
pub(super) async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_soon_after_the_first_is_the_same_press() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        // (after the first, what each later signal asks), in order.
        let cases: &[(&[u64], &[Press])] = &[
            (&[], &[]),
            (&[0], &[Press::Again]),
            (&[1], &[Press::Again]),
            (&[299], &[Press::Again]),
            (&[300], &[Press::Force]),
            (&[2000], &[Press::Force]),
            (&[0, 0, 50], &[Press::Again, Press::Again, Press::Again]),
            (&[0, 400], &[Press::Again, Press::Force]),
            (&[400, 401], &[Press::Force, Press::Force]),
        ];
        for (later, want) in cases {
            let mut p = Presses::default();
            assert_eq!(p.press(t0), Press::Stop);
            let got: Vec<Press> = later.iter().map(|&d| p.press(t0 + ms(d))).collect();
            assert_eq!(&got, want, "signals {later:?} ms after the first");
        }
    }
}
