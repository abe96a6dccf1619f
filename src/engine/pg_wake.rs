//! Wake-ups from other machines on a PostgreSQL board: the board's LISTEN connection
//! (see [`crate::store::pg::listen`]) turned into what the local socket gives. For an
//! engine, a poke on its wake channel (commands, new work); for a client that runs no
//! engine, a change for its board or stream. Losing the database and getting it back is
//! said once each, in the log and to boards.

use super::EngineEvent;
use super::wake::{Change, Wake};
use crate::store::PgTarget;
use crate::store::pg::listen::{self, Heard};
use tokio::sync::{broadcast, mpsc};

pub use listen::Listener;

/// The sentence boards show while the database cannot be reached.
fn lost_text(why: &str) -> String {
    format!(
        "the board's database cannot be reached ({why}); the engine keeps trying and goes on once it is back"
    )
}

/// What boards show once it is back.
const BACK: &str = "the board's database can be reached again";

/// For an engine: other processes' commits poke `wake`; losing and regaining the
/// database goes to the log and, as a notice, to boards.
/// `up` follows whether the database can be reached.
pub fn for_engine(
    target: PgTarget,
    wake: mpsc::UnboundedSender<Wake>,
    events: broadcast::Sender<EngineEvent>,
    up: tokio::sync::watch::Sender<bool>,
) -> Option<Listener> {
    let heard = move |h: Heard| {
        match h {
            Heard::Changed | Heard::Poll => return wake.send(Wake::Poke).is_ok(),
            Heard::Quiet => {}
            Heard::Lost(why) => {
                up.send_replace(false);
                tracing::error!("{why} — connecting again with backoff");
                let text = lost_text(&why);
                let _ = events.send(EngineEvent::Database { text: text.clone() });
                let _ = events.send(EngineEvent::Notice {
                    task_id: None,
                    text,
                });
            }
            Heard::Back => {
                up.send_replace(true);
                tracing::info!("{BACK}");
                let _ = events.send(EngineEvent::Database { text: BACK.into() });
                let _ = events.send(EngineEvent::Notice {
                    task_id: None,
                    text: BACK.into(),
                });
            }
        }
        !wake.is_closed()
    };
    match listen::listen(target, false, heard) {
        Ok(l) => Some(l),
        Err(e) => {
            tracing::warn!(
                "cannot start listening to the board's database: {e}; other machines' commands wait for the next look"
            );
            None
        }
    }
}

/// For a client following a board whose engine runs on another machine: every commit
/// there (and the slow fallback) reloads the board.
pub fn for_client(target: PgTarget, tx: broadcast::Sender<Change>) -> Option<Listener> {
    let heard = move |h: Heard| {
        let change = match h {
            // A board following another machine's engine shows its log lines too.
            Heard::Changed | Heard::Poll | Heard::Quiet => Change::All,
            Heard::Lost(why) => Change::Notice(lost_text(&why)),
            Heard::Back => Change::Notice(BACK.into()),
        };
        // A board that is gone has no receivers; the listener ends with it.
        tx.send(change).is_ok() || tx.receiver_count() > 0
    };
    listen::listen(target, true, heard).ok()
}

/// How long a failed write waits to learn whether the database was lost, which the
/// listener hears at once when the server goes away.
const LOST_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);

impl super::Engine {
    /// After a write failed: true once the database, lost meanwhile (or within a second),
    /// can be reached again, so the write is made again; false when it was not lost, or
    /// the engine is shutting down. A step's result waits here in memory while the
    /// database is away, and is written once it is back.
    pub(super) async fn database_back(&self) -> bool {
        let Some(up) = &self.db_up else { return false };
        let mut up = up.clone();
        if tokio::time::timeout(LOST_WITHIN, up.wait_for(|u| !*u))
            .await
            .is_err()
        {
            return false;
        }
        let text =
            "a step ended while the board's database is away: its result waits for the database";
        tracing::warn!("{text}");
        let _ = self.events.send(EngineEvent::Notice {
            task_id: None,
            text: text.into(),
        });
        tokio::select! {
            back = up.wait_for(|u| *u) => back.is_ok(),
            _ = self.shutdown.cancelled() => false,
        }
    }
}
