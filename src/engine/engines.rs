//! The engine's name on the board: it registers in the `engines` table when it starts
//! running, renews a heartbeat while it runs, and marks its clean stop. Its labels decide
//! which steps it may start: a step that `requires` labels runs only on an engine with
//! every one of them, and otherwise stays queued, saying what it waits for.

use super::Engine;
use crate::store::{EngineView, NewEngine, Registered, TakeOver};
use crate::workspace::Config;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// A heartbeat older than this many heartbeats means the engine is gone.
pub const LEASE_HEARTBEATS: u32 = 3;

/// Who an engine is on the board.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub name: String,
    pub labels: Vec<String>,
    /// How often it renews its heartbeat.
    pub heartbeat: Duration,
    /// How long a task waits for its home engine, once gone, before this one takes it.
    pub takeover_after: Duration,
}

impl Identity {
    /// The workspace's `[engine]` settings: its name there, else the host name.
    pub fn from_config(cfg: &Config) -> Self {
        Self {
            name: cfg.engine.name.clone().unwrap_or_else(default_name),
            labels: cfg.engine.labels.clone(),
            heartbeat: cfg.engine.heartbeat,
            takeover_after: cfg.engine.takeover_after,
        }
    }

    /// `baton engine --name N --labels a,b` over the workspace's settings; one sentence when
    /// a name or label is not usable.
    pub fn with_flags(
        cfg: &Config,
        name: Option<&str>,
        labels: Option<&str>,
    ) -> Result<Self, String> {
        let mut me = Self::from_config(cfg);
        if let Some(n) = name {
            if let Some(p) = crate::pipeline::engine_name_problem(n) {
                return Err(format!("--name: {p}"));
            }
            me.name = n.to_string();
        }
        if let Some(list) = labels {
            me.labels = parse_labels(list)?;
        }
        Ok(me)
    }

    /// How long after its last heartbeat the engine counts as gone.
    pub fn lease(&self) -> Duration {
        self.heartbeat * LEASE_HEARTBEATS
    }

    /// What its claims on steps name: itself, and its lease.
    pub fn claim_by(&self) -> crate::store::ClaimBy<'_> {
        crate::store::ClaimBy {
            engine: &self.name,
            lease_ms: self.lease().as_millis() as i64,
        }
    }

    /// True when this engine has every label in `required`.
    pub fn may_run(&self, required: &[String]) -> bool {
        required.iter().all(|l| self.labels.contains(l))
    }
}

/// `--labels gpu,big-disk`: comma-separated lowercase words, each once.
pub fn parse_labels(list: &str) -> Result<Vec<String>, String> {
    let mut labels: Vec<String> = Vec::new();
    for l in list.split(',').map(str::trim) {
        if l.is_empty() && list.trim().is_empty() {
            break;
        }
        if let Some(p) = crate::pipeline::label_problem(l) {
            return Err(format!("--labels: label {p}"));
        }
        if !labels.iter().any(|x| x == l) {
            labels.push(l.to_string());
        }
    }
    Ok(labels)
}

/// This machine's name: the kernel's host name, else `$HOSTNAME`, else `localhost`; cut
/// to what an engine name may hold.
pub fn host_name() -> String {
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HOST.get_or_init(read_host_name).clone()
}

/// [`host_name`], read once per process (a heartbeat does not ask again).
fn read_host_name() -> String {
    let raw = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| {
            let out = std::process::Command::new("uname")
                .arg("-n")
                .output()
                .ok()?;
            String::from_utf8(out.stdout).ok()
        })
        .unwrap_or_default();
    let name: String = raw
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        .take(64)
        .collect();
    if name.is_empty() {
        "localhost".into()
    } else {
        name
    }
}

/// True when `row`'s engine ran on this machine and its process no longer exists: killed
/// before it could say it stopped, while its heartbeat may still look fresh. A process of
/// another user counts as existing, and so does a pid taken since by another program (the
/// board then waits out the lease).
pub fn gone_from_here(row: &crate::store::EngineRow) -> bool {
    use nix::errno::Errno;
    // A machine with no name of its own is not known to be this one.
    if row.host != host_name() || row.host == "localhost" {
        return false;
    }
    let Ok(pid) = i32::try_from(row.pid) else {
        return true;
    };
    matches!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
        Err(Errno::ESRCH)
    )
}

/// The name an engine gets when none is given: the host name.
pub fn default_name() -> String {
    host_name()
}

/// The refusal for a name a live engine holds, in one sentence.
pub fn held_sentence(name: &str, host: &str, pid: i64, seen_ago_ms: i64) -> String {
    format!(
        "an engine named {name} is already running on {host} (pid {pid}), last seen {} s ago — pick another --name or stop it",
        (seen_ago_ms.max(0) + 500) / 1000
    )
}

/// Why a queued step with these `requires` waits, when no live engine has them all:
/// `waits for an engine labelled gpu`.
pub fn label_wait(requires: &[String], engines: &[EngineView]) -> Option<String> {
    if requires.is_empty() || engines.iter().any(|e| e.live && e.row.has_labels(requires)) {
        return None;
    }
    Some(format!(
        "waits for an engine labelled {}",
        requires.join(" and ")
    ))
}

/// What the claims of one engine need: its name and labels.
pub(super) type Claimant = Arc<Identity>;

/// The engine's registration and its next heartbeat.
pub(super) struct Me {
    pub(super) ident: Claimant,
    /// Registered under its name (false until `run`, or `run --wait` on a shared board,
    /// registers it).
    pub(super) registered: bool,
    pub(super) next_beat: Option<Instant>,
    /// The board is shared with other engines (kept in PostgreSQL): steps' leases are
    /// renewed and checked, expired ones reaped, and recovery touches only its own steps.
    pub(super) shared: bool,
}

impl Me {
    pub(super) fn new(ident: Identity) -> Self {
        Self {
            ident: Arc::new(ident),
            registered: false,
            next_beat: None,
            shared: false,
        }
    }
}

impl Engine {
    /// Names this engine (before [`Engine::run`]): `baton engine --name`.
    pub fn set_identity(&mut self, ident: Identity) {
        let shared = self.me.shared;
        self.me = Me::new(ident);
        self.me.shared = shared;
    }

    /// Who this engine is on the board.
    pub fn identity(&self) -> &Identity {
        &self.me.ident
    }

    /// Registers this engine under its name unless it has already: [`Engine::run`] does it
    /// first.
    pub(super) async fn take_name(&mut self) -> super::Result<()> {
        if self.me.registered {
            return Ok(());
        }
        self.register().await
    }

    /// On a shared board, registers this engine now rather than when it runs: `run --wait`
    /// does, so that a name another engine holds is refused before its task is made. (On
    /// SQLite no other live engine can hold it: the workspace's lock is this engine's.)
    pub async fn take_name_early(&mut self) -> super::Result<()> {
        if !self.me.shared {
            return Ok(());
        }
        self.take_name().await
    }

    /// Registers this engine under its name. An engine holds its workspace's lock, and an
    /// SQLite board has one workspace, so a row that still looks live is a dead engine's
    /// (killed before its lease ran out) and is taken over; the refusal of a live name is
    /// made before the lock is asked for (`baton engine`). On a shared board a holder on
    /// this machine whose process is gone is taken over once it misses a heartbeat (this
    /// waits for that): the steps it left running are this engine's to recover, as when it
    /// comes back after its lease.
    pub(super) async fn register(&mut self) -> super::Result<()> {
        let ident = self.me.ident.clone();
        let host = host_name();
        let pid = i64::from(std::process::id());
        let lease_ms = ident.lease().as_millis() as i64;
        // Only an SQLite board's engine is sure to be the only one.
        let sole = !self.me.shared;
        // A holder whose process is gone here is waited for until it misses a heartbeat, once.
        let mut waited = false;
        let out = loop {
            let (ident, host) = (ident.clone(), host.clone());
            let out = self
                .store
                .write(move |db| {
                    let over = if sole {
                        TakeOver::Any
                    } else {
                        // Looked at in the registration's transaction, so the row found gone
                        // is the one replaced.
                        // Its process is gone and it has missed a heartbeat too: a host name
                        // can be shared by machines (containers on one node's network) whose
                        // processes cannot see each other, and a live engine keeps beating.
                        let now = db.engine_clock()?;
                        match db.engine(&ident.name)? {
                            Some(p)
                                if gone_from_here(&p)
                                    && now - p.heartbeat_at
                                        > p.lease_ms / LEASE_HEARTBEATS as i64 =>
                            {
                                TakeOver::Gone(p.pid)
                            }
                            _ => TakeOver::None,
                        }
                    };
                    db.register_engine(
                        &NewEngine {
                            name: &ident.name,
                            host: &host,
                            pid,
                            labels: &ident.labels,
                            version: env!("CARGO_PKG_VERSION"),
                            lease_ms,
                        },
                        over,
                    )
                })
                .await?;
            match out {
                Registered::Held {
                    holder,
                    seen_ago_ms,
                } if !waited && gone_from_here(&holder) => {
                    let beat = holder.lease_ms / LEASE_HEARTBEATS as i64;
                    let wait = (beat - seen_ago_ms).max(0) + 250;
                    tracing::info!(
                        "the engine named {} (pid {}) is gone from this machine: its name is taken once its heartbeat lapses, in {wait} ms",
                        holder.name,
                        holder.pid
                    );
                    tokio::time::sleep(Duration::from_millis(wait as u64)).await;
                    waited = true;
                }
                other => break other,
            }
        };
        match out {
            Registered::Taken { previous } => {
                if let Some(p) = previous.filter(|p| p.stopped_at.is_none()) {
                    tracing::info!(
                        "took the name {} over from pid {} on {}, which did not stop cleanly",
                        p.name,
                        p.pid,
                        p.host
                    );
                }
            }
            Registered::Held {
                holder,
                seen_ago_ms,
            } => {
                return Err(super::EngineError::Other(held_sentence(
                    &holder.name,
                    &holder.host,
                    holder.pid,
                    seen_ago_ms,
                )));
            }
        }
        self.me.registered = true;
        self.me.next_beat = Some(Instant::now() + self.me.ident.heartbeat);
        Ok(())
    }

    /// Renews the heartbeat when it is due (and, on a shared board, the leases of the
    /// steps this engine runs, then reaps the steps whose lease ran out). True when it beat.
    pub(super) async fn beat_if_due(&mut self) -> bool {
        let Some(at) = self.me.next_beat else {
            return false;
        };
        if Instant::now() < at {
            return false;
        }
        self.me.next_beat = Some(Instant::now() + self.me.ident.heartbeat);
        let name = self.me.ident.name.clone();
        let (host, pid) = (host_name(), i64::from(std::process::id()));
        match self
            .store
            .write_quiet(move |db| db.engine_heartbeat(&name, &host, pid))
            .await
        {
            Ok(true) => {}
            Ok(false) => tracing::warn!(
                "the engine name {} was taken over by another engine",
                self.me.ident.name
            ),
            Err(e) => tracing::warn!("renewing the engine's heartbeat failed: {e}"),
        }
        if self.me.shared {
            self.renew_leases().await;
            self.reap().await;
        }
        true
    }

    /// Marks the clean stop of a registered engine.
    pub async fn mark_stopped(&mut self) {
        if !std::mem::take(&mut self.me.registered) {
            return;
        }
        self.me.next_beat = None;
        let name = self.me.ident.name.clone();
        let (host, pid) = (host_name(), i64::from(std::process::id()));
        if let Err(e) = self
            .store
            .write(move |db| db.engine_stopped(&name, &host, pid))
            .await
        {
            tracing::warn!("recording the engine's stop failed: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_lowercase_words_named_once() {
        assert_eq!(
            parse_labels("gpu, big-disk,gpu").unwrap(),
            ["gpu", "big-disk"]
        );
        assert_eq!(parse_labels("").unwrap(), Vec::<String>::new());
        for (bad, want) in [
            ("GPU", "`GPU` is not a lowercase word"),
            ("gpu,,x", "is empty"),
            ("-x", "`-x` is not a lowercase word"),
        ] {
            let err = parse_labels(bad).unwrap_err();
            assert!(
                err.starts_with("--labels: label ") && err.contains(want),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn an_engine_is_gone_from_here_only_when_its_process_on_this_host_is() {
        let row = |host: String, pid: i64| crate::store::EngineRow {
            name: "e".into(),
            host,
            pid,
            labels: Vec::new(),
            version: "0".into(),
            started_at: 0,
            heartbeat_at: 0,
            lease_ms: 1,
            stopped_at: None,
        };
        // A child spawned and reaped: its pid names no process.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        child.wait().unwrap();
        let dead = i64::from(child.id());
        assert!(gone_from_here(&row(host_name(), dead)));
        assert!(!gone_from_here(&row(
            host_name(),
            i64::from(std::process::id())
        )));
        // On another machine the pid says nothing.
        assert!(!gone_from_here(&row(
            format!("{}-elsewhere", host_name()),
            dead
        )));
    }

    #[test]
    fn a_queued_step_says_which_labels_no_live_engine_has() {
        let row = |labels: &[&str], live: bool| EngineView {
            row: crate::store::EngineRow {
                name: "e".into(),
                host: "h".into(),
                pid: 1,
                labels: labels.iter().map(|l| l.to_string()).collect(),
                version: "0".into(),
                started_at: 0,
                heartbeat_at: 0,
                lease_ms: 1,
                stopped_at: None,
            },
            live,
            running: 0,
            seen_ago_ms: 0,
        };
        let gpu = vec!["gpu".to_string()];
        assert_eq!(
            label_wait(&gpu, &[row(&[], true)]).as_deref(),
            Some("waits for an engine labelled gpu")
        );
        // An engine with the label that is gone does not count.
        assert!(label_wait(&gpu, &[row(&["gpu"], false)]).is_some());
        assert_eq!(label_wait(&gpu, &[row(&["gpu", "x"], true)]), None);
        assert_eq!(label_wait(&[], &[]), None);
        assert_eq!(
            label_wait(&["gpu".into(), "ssd".into()], &[]).as_deref(),
            Some("waits for an engine labelled gpu and ssd")
        );
    }
}
