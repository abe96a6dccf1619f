//! How other processes reach a running engine without polling: a Unix socket at
//! `.baton/engine.sock`. A client connects and writes one line:
//!
//! - `poke`: something changed in the database (a queued command, a new task): look now.
//! - `wait`: like `poke`, and the engine answers `ok` once it has applied the queued
//!   commands, so the client can read its command's result at once.
//! - `abort <request as JSON>`: an abort the client could not queue (the database cannot
//!   be written, a full disk): the engine stops the task's step at once and records the
//!   abort as soon as it can, answering `ok <summary>` or `error <reason>`.
//! - `subscribe`: the connection stays open and receives a line per change (`task N`,
//!   `log N`, `all`, `handover PID N`, `stopping TEXT`, `database TEXT`); it ends when
//!   the engine stops, so an attached board also learns that.
//! - `who`: the engine answers `PID ROLE` (`engine` for `baton engine`, `front` for one a
//!   board or a server runs, `command` for `run --wait`'s).
//! - `handover PID TOKEN`: `baton engine` (process PID) asks an engine a front end runs to
//!   hand over: it starts no more steps, lets the running ones finish and stops, answering
//!   `ok N` (N steps still to finish) or `no <sentence>`. TOKEN is the workspace's API
//!   token (`.baton/token`, readable by its owner only): waking the engine is anyone's who
//!   can reach the socket, stopping it only its owner's.
//!
//! The socket only wakes; commands and their results travel through the database, so a
//! lost wake-up delays work but never loses it.

use super::EngineEvent;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{broadcast, mpsc};

/// The socket's file in a workspace's `.baton/`.
pub fn socket_path(baton_dir: &Path) -> PathBuf {
    baton_dir.join("engine.sock")
}

/// A wake-up for the engine loop.
pub enum Wake {
    /// Look for queued commands and new work.
    Poke,
    /// Look, then answer `ok` on this connection.
    Wait(UnixStream),
    /// Apply this abort, then answer with its result on this connection.
    Abort(Box<super::Request>, UnixStream),
    /// `baton engine` (this process id) asks to take over; answer on this connection.
    Handover(u32, UnixStream),
}

/// Who runs an engine, as `who` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Role {
    /// A board or `baton serve`: it hands over to a `baton engine` that asks.
    #[default]
    Front,
    /// `baton engine`.
    Headless,
    /// `baton run --wait`, until its task settles.
    Command,
}

impl Role {
    fn word(self) -> &'static str {
        match self {
            Role::Front => "front",
            Role::Headless => "engine",
            Role::Command => "command",
        }
    }

    fn from_word(w: &str) -> Self {
        match w {
            "engine" => Role::Headless,
            "command" => Role::Command,
            _ => Role::Front,
        }
    }
}

/// The process running a workspace's engine, as it says on its socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub pid: u32,
    pub role: Role,
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.role {
            Role::Front => "baton",
            Role::Headless => "baton engine",
            Role::Command => "baton run --wait",
        };
        write!(f, "{what} (pid {})", self.pid)
    }
}

/// The engine's end: the listening socket, removed when dropped.
pub struct Listener {
    path: PathBuf,
    task: tokio::task::JoinHandle<()>,
    /// Ends every subscription when the engine stops, so attached boards learn of it.
    closed: tokio_util::sync::CancellationToken,
    /// What `who` answers.
    role: std::sync::Arc<std::sync::Mutex<Role>>,
}

impl Listener {
    /// Binds the socket (replacing a stale one: the caller holds the engine lock, so no
    /// other engine uses it) and serves it until dropped. Must run inside a tokio runtime.
    pub fn bind(
        baton_dir: &Path,
        wake: mpsc::UnboundedSender<Wake>,
        events: broadcast::Sender<EngineEvent>,
    ) -> std::io::Result<Self> {
        let path = socket_path(baton_dir);
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path)?;
        let closed = tokio_util::sync::CancellationToken::new();
        let ended = closed.clone();
        let role = std::sync::Arc::new(std::sync::Mutex::new(Role::default()));
        let who = role.clone();
        let dir = baton_dir.to_path_buf();
        let task = tokio::spawn(async move {
            loop {
                let stream = match listener.accept().await {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        // Out of file descriptors, say: wait a little rather than spin.
                        tracing::warn!("accepting on the engine socket failed: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let (wake, rx, ended) = (wake.clone(), events.subscribe(), ended.clone());
                tokio::spawn(serve(stream, wake, rx, ended, (who.clone(), dir.clone())));
            }
        });
        Ok(Self {
            path,
            task,
            closed,
            role,
        })
    }

    /// Says who runs this engine, for `who`.
    pub fn set_role(&self, role: Role) {
        *self.role.lock().unwrap_or_else(|p| p.into_inner()) = role;
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.closed.cancel();
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Reads a client's one request line and acts on it. Holds a receiver, never a sender, of
/// the engine's events: a subscription ends when the engine does.
async fn serve(
    stream: UnixStream,
    wake: mpsc::UnboundedSender<Wake>,
    events: broadcast::Receiver<EngineEvent>,
    closed: tokio_util::sync::CancellationToken,
    (role, dir): (std::sync::Arc<std::sync::Mutex<Role>>, PathBuf),
) {
    let mut reader = tokio::io::BufReader::new(stream);
    let mut line = String::new();
    let read = tokio::time::timeout(Duration::from_secs(5), reader.read_line(&mut line)).await;
    if !matches!(read, Ok(Ok(n)) if n > 0) {
        return;
    }
    let stream = reader.into_inner();
    match line.trim() {
        "wait" => {
            let _ = wake.send(Wake::Wait(stream));
        }
        l if l.starts_with("abort ") => match serde_json::from_str(&l["abort ".len()..]) {
            Ok(req) => {
                let _ = wake.send(Wake::Abort(Box::new(req), stream));
            }
            Err(e) => {
                let mut stream = stream;
                let _ = stream
                    .write_all(format!("error the abort request is malformed ({e})\n").as_bytes())
                    .await;
            }
        },
        "who" => {
            let mut stream = stream;
            let role = *role.lock().unwrap_or_else(|p| p.into_inner());
            let line = format!("{} {}\n", std::process::id(), role.word());
            let _ = stream.write_all(line.as_bytes()).await;
        }
        l if l.starts_with("handover ") => {
            let mut words = l["handover ".len()..].split_whitespace();
            let pid = words.next().and_then(|p| p.parse().ok());
            let token = tokio::fs::read_to_string(dir.join("token"))
                .await
                .unwrap_or_default();
            let given = words.next().unwrap_or("");
            let refusal = match pid {
                None => "the handover request names no process id",
                Some(_) if token.trim().is_empty() || !same(token.trim(), given) => {
                    "the handover request does not carry this workspace's token (.baton/token) — run `baton engine` as the workspace's owner"
                }
                Some(pid) => {
                    let _ = wake.send(Wake::Handover(pid, stream));
                    return;
                }
            };
            let mut stream = stream;
            let _ = stream.write_all(format!("no {refusal}\n").as_bytes()).await;
        }
        "subscribe" => {
            tokio::select! {
                _ = subscribe(stream, events) => {}
                _ = closed.cancelled() => {}
            }
        }
        _ => {
            let _ = wake.send(Wake::Poke);
        }
    }
}

/// Streams change lines to a subscriber until it goes away or the engine stops. Log lines
/// arrive in batches already (one event per ~100 ms of output), so no further coalescing.
async fn subscribe(mut stream: UnixStream, mut rx: broadcast::Receiver<EngineEvent>) {
    loop {
        let line = match rx.recv().await {
            Ok(EngineEvent::TaskChanged { task_id }) => format!("task {task_id}\n"),
            Ok(EngineEvent::LogLines { step_run_id, .. }) => format!("log {step_run_id}\n"),
            Ok(EngineEvent::Changed) => "all\n".to_string(),
            Ok(EngineEvent::HandingOver { pid, running }) => format!("handover {pid} {running}\n"),
            Ok(EngineEvent::Stopping { text }) => format!("stopping {}\n", text.replace('\n', " ")),
            Ok(EngineEvent::Database { text }) => format!("database {}\n", text.replace('\n', " ")),
            Ok(EngineEvent::Notify {
                task_id,
                title,
                body,
            }) => {
                let msg = serde_json::json!({"task": task_id, "title": title, "body": body});
                format!("notify {msg}\n")
            }
            Ok(EngineEvent::Notice { .. } | EngineEvent::Reloaded { .. }) => continue,
            Err(broadcast::error::RecvError::Lagged(_)) => "all\n".to_string(),
            Err(broadcast::error::RecvError::Closed) => return,
        };
        if stream.write_all(line.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// Tells a running engine to look at the database now. Quiet when none listens.
pub fn poke(baton_dir: &Path) {
    if let Ok(mut s) = std::os::unix::net::UnixStream::connect(socket_path(baton_dir)) {
        let _ = s.write_all(b"poke\n");
    }
}

/// True when an engine listens on the workspace's socket.
pub fn listening(baton_dir: &Path) -> bool {
    std::os::unix::net::UnixStream::connect(socket_path(baton_dir))
        .and_then(|mut s| s.write_all(b"poke\n"))
        .is_ok()
}

/// Hands an abort straight to the running engine, for when it cannot be queued in the
/// database. None when no engine listens or it did not answer within `timeout`; else the
/// engine's summary, or its reason for refusing.
pub fn abort(
    baton_dir: &Path,
    req: &super::Request,
    timeout: Duration,
) -> Option<Result<String, String>> {
    let body = serde_json::to_string(req).ok()?;
    let mut s = std::os::unix::net::UnixStream::connect(socket_path(baton_dir)).ok()?;
    s.write_all(format!("abort {body}\n").as_bytes()).ok()?;
    s.set_read_timeout(Some(timeout)).ok()?;
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).ok()?;
    let line = line.trim_end();
    if let Some(summary) = line.strip_prefix("ok ") {
        Some(Ok(summary.to_string()))
    } else {
        line.strip_prefix("error ").map(|e| Err(e.to_string()))
    }
}

/// Who runs the workspace's engine; None when none answers within `timeout`.
pub fn who(baton_dir: &Path, timeout: Duration) -> Option<Owner> {
    let line = ask(baton_dir, "who", timeout)?;
    let mut words = line.split_whitespace();
    let pid = words.next()?.parse().ok()?;
    let role = Role::from_word(words.next().unwrap_or(""));
    Some(Owner { pid, role })
}

/// True when `given` is `token`, compared in constant time.
fn same(token: &str, given: &str) -> bool {
    use subtle::ConstantTimeEq;
    token.len() == given.len() && bool::from(token.as_bytes().ct_eq(given.as_bytes()))
}

/// Asks the running engine to hand over to this process, showing the workspace's `token`.
/// None when none answers within `timeout`; else the number of its steps still to finish,
/// or its reason for refusing.
pub fn hand_over(
    baton_dir: &Path,
    token: &str,
    timeout: Duration,
) -> Option<Result<usize, String>> {
    let line = ask(
        baton_dir,
        &format!("handover {} {token}", std::process::id()),
        timeout,
    )?;
    if let Some(n) = line.strip_prefix("ok ") {
        return Some(Ok(n.trim().parse().unwrap_or(0)));
    }
    line.strip_prefix("no ").map(|e| Err(e.to_string()))
}

/// Sends one request line and reads the one answer line.
fn ask(baton_dir: &Path, request: &str, timeout: Duration) -> Option<String> {
    let mut s = std::os::unix::net::UnixStream::connect(socket_path(baton_dir)).ok()?;
    s.write_all(format!("{request}\n").as_bytes()).ok()?;
    s.set_read_timeout(Some(timeout)).ok()?;
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).ok()?;
    let line = line.trim_end();
    (!line.is_empty()).then(|| line.to_string())
}

/// A connection on which the engine will say `ok` once it has applied queued commands.
pub struct Waiter(BufReader<std::os::unix::net::UnixStream>);

impl Waiter {
    /// Connects and asks for an answer; None when no engine listens.
    pub fn connect(baton_dir: &Path) -> Option<Self> {
        let mut s = std::os::unix::net::UnixStream::connect(socket_path(baton_dir)).ok()?;
        s.write_all(b"wait\n").ok()?;
        Some(Self(BufReader::new(s)))
    }

    /// Blocks until the engine answers, the connection ends, or `timeout` passes. True
    /// when it answered.
    pub fn wait(mut self, timeout: Duration) -> bool {
        let _ = self.0.get_ref().set_read_timeout(Some(timeout));
        let mut line = String::new();
        matches!(self.0.read_line(&mut line), Ok(n) if n > 0)
    }
}

/// A subscription to a running engine's changes, for a board in another process.
pub struct Subscription(
    BufReader<std::os::unix::net::UnixStream>,
    /// The `baton engine` the engine said it hands over to.
    Option<u32>,
);

/// One change a subscription reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Task(i64),
    Log(i64),
    All,
    /// A `notify` hook's message for people.
    Notify {
        task_id: i64,
        title: String,
        body: String,
    },
    /// A sentence for people from the engine this process runs (a shutdown under way, a
    /// broken config.toml); never sent over the socket.
    Notice(String),
}

impl Subscription {
    /// Subscribes; None when no engine listens.
    pub fn connect(baton_dir: &Path) -> Option<Self> {
        let mut s = std::os::unix::net::UnixStream::connect(socket_path(baton_dir)).ok()?;
        s.write_all(b"subscribe\n").ok()?;
        Some(Self(BufReader::new(s), None))
    }

    /// The process the engine said it hands over to, if it did.
    pub fn handed_to(&self) -> Option<u32> {
        self.1
    }

    /// A handle on the socket, to end a blocked [`Subscription::next`] from another thread.
    pub fn socket(&self) -> Option<std::os::unix::net::UnixStream> {
        self.0.get_ref().try_clone().ok()
    }

    /// Blocks for the next change; None once the engine has gone.
    pub fn next_change(&mut self) -> Option<Change> {
        let mut line = String::new();
        match self.0.read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => {
                if let Some(json) = line.strip_prefix("notify ") {
                    return Some(notify_change(json));
                }
                if let Some(text) = line.strip_prefix("stopping ") {
                    return Some(Change::Notice(format!(
                        "the engine is stopping ({}); this board runs it once it has",
                        crate::ansi::strip(text.trim_end())
                    )));
                }
                if let Some(text) = line.strip_prefix("database ") {
                    return Some(Change::Notice(
                        crate::ansi::strip(text.trim_end()).into_owned(),
                    ));
                }
                if let Some(rest) = line.strip_prefix("handover ") {
                    let mut w = rest.split_whitespace().map(|n| n.parse::<u32>().ok());
                    if let (Some(Some(pid)), Some(Some(n))) = (w.next(), w.next()) {
                        self.1 = Some(pid);
                        return Some(Change::Notice(handover_text(pid, n as usize)));
                    }
                }
                let mut words = line.split_whitespace();
                let change = match (words.next(), words.next().and_then(|n| n.parse().ok())) {
                    (Some("task"), Some(id)) => Change::Task(id),
                    (Some("log"), Some(id)) => Change::Log(id),
                    _ => Change::All,
                };
                Some(change)
            }
        }
    }
}

/// A `notify` line's change (a malformed one still says that something changed).
fn notify_change(json: &str) -> Change {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(json) else {
        return Change::All;
    };
    let text = |k: &str| v.get(k).and_then(|t| t.as_str()).unwrap_or("").to_string();
    match v.get("task").and_then(|t| t.as_i64()) {
        Some(task_id) => Change::Notify {
            task_id,
            title: text("title"),
            body: text("body"),
        },
        None => Change::All,
    }
}

/// What a board says while its engine hands over to `baton engine` (process `pid`).
pub fn handover_text(pid: u32, running: usize) -> String {
    match running {
        0 => format!("the engine hands over to baton engine (pid {pid}) now"),
        n => format!(
            "the engine hands over to baton engine (pid {pid}) once {n} running step(s) finish; it starts no new ones"
        ),
    }
}
