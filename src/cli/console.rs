//! Lines a headless engine prints as it runs (moves, problems, notices), written by a
//! thread of their own: a terminal that stops taking them (ctrl+s, a paused pager) holds up
//! that thread, never the engine, whose one thread also reads every step's output.

use std::io::Write;
use std::sync::mpsc::{SyncSender, sync_channel};

/// How many lines may wait for the terminal before more are dropped.
const WAITING: usize = 4096;

enum Line {
    Out(String),
    Err(String),
    /// Answered once every line before it is written.
    Flush(SyncSender<()>),
}

/// Where the engine's lines go: standard output or error, in the order they were given.
#[derive(Clone)]
pub struct Console(SyncSender<Line>);

impl Console {
    /// Starts the writing thread (without one, lines are written at once, as before).
    pub fn start() -> Self {
        let (tx, rx) = sync_channel::<Line>(WAITING);
        let started = std::thread::Builder::new()
            .name("baton-console".into())
            .spawn(move || {
                for line in rx {
                    match line {
                        Line::Out(l) => {
                            let _ = writeln!(std::io::stdout(), "{l}");
                        }
                        Line::Err(l) => {
                            let _ = writeln!(std::io::stderr(), "{l}");
                        }
                        Line::Flush(done) => {
                            let _ = done.send(());
                        }
                    }
                }
            });
        if let Err(e) = started {
            tracing::warn!("no thread for the engine's lines ({e}); they are dropped");
        }
        Self(tx)
    }

    /// A line for standard output; dropped while the terminal holds up [`WAITING`] others.
    pub fn out(&self, line: String) {
        let _ = self.0.try_send(Line::Out(line));
    }

    /// A line for standard error, likewise.
    pub fn err(&self, line: String) {
        let _ = self.0.try_send(Line::Err(line));
    }

    /// Waits until every line given so far is written (before the process exits).
    pub fn flush(&self) {
        let (done, written) = sync_channel(1);
        if self.0.send(Line::Flush(done)).is_ok() {
            let _ = written.recv();
        }
    }
}
