//! One warden per engine: a small process, started once, that starts the engine's local
//! steps as its own children, so that a step costs one process start (its program) and
//! not two (a guard of its own, then the program).
//!
//! The warden holds what a guard per step held: it is the subreaper of every step (their
//! orphans come to it, in whatever session), it tells the engine when a step ended and
//! whether anything of it is left (so the step's end need not read `/proc`), and when the
//! engine's end of its socket closes (`kill -9`, a crash) it ends every step and whatever
//! carries their marks. The engine keeps the step's pipes and signals its process group
//! itself, as before; only the start and the exit status go through the warden.
//!
//! Where no warden can run (no `baton-guard` of this build, a test harness), or a step's
//! command line and environment are too large for one message, [`spawn`] answers None and
//! the step starts under a guard of its own (`exec::guard`).

pub mod serve;
mod sock;
pub mod wire;

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::sync::oneshot;
use wire::{Msg, Start, Status};

/// The argument that makes `baton-guard` (or `baton __guard`) a warden.
pub const ARG: &str = "--warden";

/// How long a new warden has to say hello before the engine does without one.
const HELLO: Duration = Duration::from_secs(5);

/// How long the warden has to say a step started.
const ANSWER: Duration = Duration::from_secs(10);

/// How a step the warden started ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ended {
    pub status: Status,
    /// Nothing of the step is left: no process of its group, no orphan anywhere.
    pub clean: bool,
}

/// A step started by the warden: the leader of its own process group.
pub struct Child {
    pub pid: u32,
    /// Its start time, as [`crate::exec::process::start_time`] reads it; None when the
    /// warden could not read it.
    pub start_time: Option<u64>,
    ended: Option<oneshot::Receiver<Ended>>,
    seen: Option<Ended>,
}

impl Child {
    /// Waits for the step's program to end; None when the warden itself is gone (then
    /// nothing tells how it ended; the warden ended it with its group). Cancel-safe: a
    /// wait dropped half-way loses nothing.
    pub async fn wait(&mut self) -> Option<Ended> {
        if self.seen.is_none()
            && let Some(rx) = self.ended.as_mut()
        {
            self.seen = rx.await.ok();
            self.ended = None;
        }
        self.seen
    }
}

/// The warden's answer to a start: the step's pid and start time, or why it did not start.
type StartAnswer = std::io::Result<(u32, Option<u64>)>;

/// What the engine is told about one started step, as it comes.
struct Waiting {
    started: Option<oneshot::Sender<StartAnswer>>,
    ended: Option<oneshot::Sender<Ended>>,
}

/// A running warden, as the engine holds it.
struct Warden {
    sock: AsyncFd<OwnedFd>,
    waiting: Mutex<HashMap<u64, Waiting>>,
    next: AtomicU64,
    gone: AtomicBool,
    /// The runtime its reader runs on: another runtime (a test's) starts its own.
    runtime: tokio::runtime::Id,
}

/// The process's warden: Some(None) once one could not be started, so that no step waits
/// for a second try.
static WARDEN: tokio::sync::Mutex<Option<Option<Arc<Warden>>>> =
    tokio::sync::Mutex::const_new(None);

/// A step the warden can start: there is a warden, and the step fits in one message to it.
pub struct Ready {
    warden: Arc<Warden>,
    /// The start request, encoded once; numbered as it is sent.
    packet: Vec<u8>,
}

/// Whether the warden can start `program` (already found on the step's `PATH`) with
/// `argv`, the whole environment `env`, in `cwd`: None when there is no warden to ask or
/// the request does not fit in one message (start it some other way). Asked before the
/// step's pipes are made and written to.
pub async fn ready(
    program: &Path,
    argv: &[String],
    env: Vec<OsString>,
    cwd: &Path,
    grace: Duration,
) -> Option<Ready> {
    let packet = Msg::Start(Start {
        id: 0,
        grace_ms: grace.as_millis() as u64,
        program: program.into(),
        argv: argv.iter().map(OsString::from).collect(),
        env,
        cwd: cwd.into(),
    })
    .encode();
    if packet.len() > wire::MAX {
        return None;
    }
    let warden = current().await?;
    Some(Ready { warden, packet })
}

impl Ready {
    /// Starts the step with standard input, output and error `stdio`, as the leader of
    /// its own process group.
    pub async fn spawn(self, stdio: [OwnedFd; 3]) -> std::io::Result<Child> {
        let Ready { warden, mut packet } = self;
        let id = warden.next.fetch_add(1, Ordering::Relaxed);
        wire::number_start(&mut packet, id);
        let (started_tx, started_rx) = oneshot::channel();
        let (ended_tx, ended_rx) = oneshot::channel();
        lock(&warden.waiting).insert(
            id,
            Waiting {
                started: Some(started_tx),
                ended: Some(ended_tx),
            },
        );
        let raw: Vec<RawFd> = stdio.iter().map(|f| f.as_raw_fd()).collect();
        if let Err(e) = warden.send(&packet, &raw).await {
            lock(&warden.waiting).remove(&id);
            return Err(e);
        }
        // The child's ends are the warden's now: ours close, so the pipes end with the step.
        drop(stdio);
        let (pid, start_time) = match tokio::time::timeout(ANSWER, started_rx).await {
            Ok(Ok(Ok(started))) => started,
            Ok(Ok(Err(e))) => return Err(e),
            Ok(Err(_)) => return Err(gone()),
            Err(_) => {
                // A warden that does not answer (stopped, stuck) is let go: the next step
                // starts a new one.
                warden.gone.store(true, Ordering::Relaxed);
                return Err(std::io::Error::other(format!(
                    "the engine's warden did not answer within {} s",
                    ANSWER.as_secs()
                )));
            }
        };
        Ok(Child {
            pid,
            start_time,
            ended: Some(ended_rx),
            seen: None,
        })
    }
}

fn gone() -> std::io::Error {
    std::io::Error::other("the step guard (the engine's warden) stopped unexpectedly")
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts this runtime's warden in the background, so that the first step does not wait
/// for it (an engine that will run local steps calls this as it opens).
pub fn start_early() {
    if tokio::runtime::Handle::try_current().is_ok() {
        tokio::spawn(async {
            let _ = current().await;
        });
    }
}

/// This runtime's warden, started on first use.
async fn current() -> Option<Arc<Warden>> {
    let here = tokio::runtime::Handle::try_current().ok()?.id();
    let mut slot = WARDEN.lock().await;
    if let Some(Some(w)) = slot.as_ref()
        && (w.gone.load(Ordering::Relaxed) || w.runtime != here)
    {
        *slot = None;
    }
    if slot.is_none() {
        let started = start(here).await;
        if let Err(why) = &started {
            tracing::info!("steps start under a guard each: no warden ({why})");
        }
        *slot = Some(started.ok());
    }
    slot.clone().flatten()
}

/// Starts a warden: `baton-guard --warden`, else `baton __guard --warden`, whichever says
/// hello in this build's words first.
async fn start(runtime: tokio::runtime::Id) -> Result<Arc<Warden>, String> {
    let mut why = String::from("this program is not `baton`");
    for (program, via_baton) in crate::exec::guard::warden_programs() {
        match start_one(&program, via_baton, runtime).await {
            Ok(w) => return Ok(w),
            Err(e) => why = format!("`{}`: {e}", program.display()),
        }
    }
    Err(why)
}

async fn start_one(
    program: &Path,
    via_baton: bool,
    runtime: tokio::runtime::Id,
) -> Result<Arc<Warden>, String> {
    let (ours, theirs) = sock::pair().map_err(|e| e.to_string())?;
    let mut command = tokio::process::Command::new(program);
    if via_baton {
        use std::os::unix::process::CommandExt;
        command.as_std_mut().arg0("baton");
        command.arg(crate::exec::guard::ARG);
    }
    command
        .arg(ARG)
        // The engine's environment (its secrets among it) is none of the warden's: a step
        // could read it in /proc/$PPID/environ. Each step's own comes with its start.
        .env_clear()
        .stdin(std::process::Stdio::from(theirs))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        // Out of the terminal's foreground group: a ctrl+c is for the engine, which
        // stops its steps itself.
        .process_group(0)
        .kill_on_drop(false);
    let mut process = command.spawn().map_err(|e| e.to_string())?;
    // Our copy of the warden's end goes with the command: a candidate that exits at once
    // is then seen to, rather than waited for.
    drop(command);
    // SAFETY: `ours` is an owned descriptor, neither replaced nor closed while the
    // AsyncFd holds it.
    let sock = unsafe { AsyncFd::register(ours) }.map_err(|e| e.to_string())?;
    let warden = Warden {
        sock,
        waiting: Mutex::new(HashMap::new()),
        next: AtomicU64::new(1),
        gone: AtomicBool::new(false),
        runtime,
    };
    let mut buf = [0u8; 256];
    let hello = tokio::time::timeout(HELLO, warden.recv(&mut buf)).await;
    let said = match hello {
        Ok(Ok(n)) => Msg::decode(&buf[..n]),
        _ => None,
    };
    if said != Some(Msg::Hello(wire::PROTOCOL.into())) {
        let _ = process.start_kill();
        tokio::spawn(async move { process.wait().await });
        return Err("it is not a warden of this build".into());
    }
    let warden = Arc::new(warden);
    tokio::spawn(read(warden.clone(), process));
    Ok(warden)
}

impl Warden {
    /// One packet from the warden: its length, 0 when it is gone.
    async fn recv(&self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let mut ready = self.sock.readable().await?;
            match ready.try_io(|fd| {
                sock::recv(fd.as_raw_fd(), buf, false)
                    .map(|(n, _)| n)
                    .map_err(std::io::Error::from)
            }) {
                Ok(got) => return got,
                Err(_would_block) => continue,
            }
        }
    }

    async fn send(&self, packet: &[u8], fds: &[RawFd]) -> std::io::Result<()> {
        loop {
            let mut ready = self.sock.writable().await?;
            match ready.try_io(|fd| {
                sock::send(fd.as_raw_fd(), packet, fds, false).map_err(std::io::Error::from)
            }) {
                Ok(sent) => return sent,
                Err(_would_block) => continue,
            }
        }
    }
}

/// Hands each answer of the warden to the step waiting for it, until the warden is gone;
/// then every step still waiting hears so, and the warden's process is reaped.
async fn read(warden: Arc<Warden>, mut process: tokio::process::Child) {
    let mut buf = [0u8; 4096];
    loop {
        let n = match warden.recv(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut waiting = lock(&warden.waiting);
        match Msg::decode(&buf[..n]) {
            Some(Msg::Started { id, pid, start }) => {
                let start = (start != 0).then_some(start);
                if let Some(tx) = waiting.get_mut(&id).and_then(|w| w.started.take())
                    && tx.send(Ok((pid, start))).is_err()
                {
                    // Nobody waits for it any more (the step was stopped while it started):
                    // nothing would read or end it.
                    waiting.remove(&id);
                    crate::exec::process::signal_group(pid, nix::sys::signal::Signal::SIGKILL);
                }
            }
            Some(Msg::Failed { id, errno, why }) => {
                if let Some(w) = waiting.remove(&id)
                    && let Some(tx) = w.started
                {
                    // The warden's sentence, with the error's kind when it has one.
                    let e = match errno {
                        0 => std::io::Error::other(why),
                        n => std::io::Error::new(std::io::Error::from_raw_os_error(n).kind(), why),
                    };
                    let _ = tx.send(Err(e));
                }
            }
            Some(Msg::Ended { id, status, clean }) => {
                if let Some(tx) = waiting.remove(&id).and_then(|w| w.ended) {
                    let _ = tx.send(Ended { status, clean });
                }
            }
            _ => {}
        }
    }
    warden.gone.store(true, Ordering::Relaxed);
    // Dropping the senders tells every step still waiting that the warden is gone.
    lock(&warden.waiting).clear();
    tracing::warn!("the engine's warden stopped; the next local step starts a new one");
    let _ = process.wait().await;
}
