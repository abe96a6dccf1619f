//! The OpenCode server baton runs itself for profiles with `"serve": true`: one per
//! workspace (the engine owns it), `opencode serve` on a free 127.0.0.1 port in the
//! workspace root, started when the first step needs it, started again at the next step
//! when it died, and ended with its whole process group when the engine stops.

use crate::exec::process::{find_group_by_env, signal_group, stop_child};
use nix::sys::signal::Signal;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;
use tokio::sync::Mutex;

/// The program baton starts (looked up on PATH).
pub const PROGRAM: &str = "opencode";

/// Marks a server's process with the workspace it serves, so the next engine finds one a
/// killed engine left behind.
const MARK: &str = "BATON_OPENCODE_SERVE";

/// How long a start may take: the first one sets up OpenCode's database.
const START: Duration = Duration::from_secs(90);

/// How long a server gets to end after SIGTERM before SIGKILL.
const GRACE: Duration = Duration::from_secs(3);

/// The workspace's own OpenCode configuration, used when it exists (`init --agent openai`
/// writes it).
pub fn config_file(root: &Path) -> PathBuf {
    root.join(".baton/opencode.json")
}

/// Where a started server listens, and the password it wants (HTTP Basic, user
/// `opencode`): other users of this machine can reach 127.0.0.1 too.
#[derive(Clone)]
pub struct Served {
    /// The base URL, `http://127.0.0.1:PORT`.
    pub url: String,
    /// The password, never logged.
    pub password: String,
}

struct Running {
    child: Child,
    pgid: u32,
    served: Served,
    /// The engine's end of the guard's pipe: while it is open, the server runs on.
    _engine_end: Option<std::os::fd::OwnedFd>,
}

/// The OpenCode server of one workspace, started on demand.
pub struct OpencodeServer {
    root: PathBuf,
    /// The value of [`MARK`]: the workspace, and who in it owns the server.
    mark: String,
    running: Mutex<Option<Running>>,
}

impl OpencodeServer {
    /// The engine's server for the workspace at `root`; nothing starts yet.
    pub fn new(root: &Path) -> Self {
        Self::owned_by(root, "engine")
    }

    /// A server for the workspace at `root` owned by `owner` (`engine`, `try`), which is
    /// told apart from the others' when a stale one is cleared away.
    pub fn owned_by(root: &Path, owner: &str) -> Self {
        Self {
            root: root.to_path_buf(),
            mark: mark(root, owner),
            running: Mutex::new(None),
        }
    }

    /// The running server, started first if it is not running (or has died). The `Ok` side
    /// carries a line for the step's log when something was started.
    pub async fn get(&self) -> Result<(Served, Option<String>), String> {
        let mut running = self.running.lock().await;
        let mut said = None;
        if let Some(r) = running.as_mut() {
            match r.child.try_wait() {
                Ok(None) => return Ok((r.served.clone(), None)),
                Ok(Some(status)) => {
                    said = Some(format!("the OpenCode server had stopped ({status})"));
                    // What is left of its group goes too.
                    signal_group(r.pgid, Signal::SIGKILL);
                }
                Err(e) => said = Some(format!("the OpenCode server cannot be watched ({e})")),
            }
            *running = None;
        }
        let r = self.start_checked().await?;
        let started = format!(
            "started `opencode serve` at {} (pid {}) in {}",
            r.served.url,
            r.pgid,
            self.root.display()
        );
        let line = match said {
            Some(s) => format!("{s}; {started}"),
            None => started,
        };
        let served = r.served.clone();
        *running = Some(r);
        Ok((served, Some(line)))
    }

    /// Ends the server's process group (SIGTERM, then SIGKILL after a grace period).
    pub async fn stop(&self) {
        if let Some(mut r) = self.running.lock().await.take() {
            stop_child(&mut r.child, r.pgid, GRACE).await;
        }
    }

    /// Starts a server and makes sure the port it names answers as that server (with its
    /// password): a port picked as free can be taken by another process before OpenCode
    /// binds it. Tries three ports.
    async fn start_checked(&self) -> Result<Running, String> {
        let mut last = String::new();
        for _ in 0..3 {
            let mut r = self.start().await?;
            match healthy(&r.served).await {
                Ok(()) => return Ok(r),
                Err(e) => {
                    last = e;
                    stop_child(&mut r.child, r.pgid, GRACE).await;
                }
            }
        }
        Err(format!(
            "`opencode serve` started but its port did not answer as it: {last}"
        ))
    }

    async fn start(&self) -> Result<Running, String> {
        // A server a killed engine left behind holds a port and a database lock. Reading
        // /proc blocks: off the async threads.
        let mark = self.mark.clone();
        if let Ok(Some(said)) = tokio::task::spawn_blocking(move || end_marked(&mark)).await {
            tracing::warn!("{said}");
        }
        let Some(program) = super::find_program(PROGRAM, &self.root, None) else {
            return Err(format!(
                "`{PROGRAM}` is not on PATH, so baton cannot start the OpenCode server — install it (`npm install -g opencode-ai`)"
            ));
        };
        // `--port 0` makes OpenCode 1.18 try 4096 first, the default of servers people run
        // themselves: ask the system for a free port instead.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .map_err(|e| format!("cannot find a free port for the OpenCode server: {e}"))?;
        let password = password()?;
        let argv: Vec<String> = [
            program.display().to_string(),
            "serve".into(),
            "--hostname".into(),
            "127.0.0.1".into(),
            "--port".into(),
            port.to_string(),
        ]
        .into();
        // Under a guard, as steps are: if the engine dies, the server and whatever its
        // sessions started (all carrying this key) end with it, instead of working on in a
        // worktree with no one reading.
        let (mut cmd, engine_end) = crate::exec::guard::command(&argv, GRACE)
            .map_err(|e| format!("could not make the OpenCode server's guard pipe: {e}"))?;
        cmd.current_dir(&self.root)
            .env(MARK, &self.mark)
            .env(
                crate::exec::process::KEY_VAR,
                format!("opencode-serve:{}", self.mark),
            )
            .env(crate::exec::process::WORKSPACE_VAR, &self.root)
            .env("OPENCODE_SERVER_USERNAME", "opencode")
            .env("OPENCODE_SERVER_PASSWORD", &password)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0)
            .kill_on_drop(engine_end.is_none());
        // The engine's own secrets are none of the server's business, as for steps.
        for name in crate::exec::process::engine_secret_names() {
            cmd.env_remove(name);
        }
        let config = config_file(&self.root);
        if config.is_file() && std::env::var_os("OPENCODE_CONFIG").is_none() {
            cmd.env("OPENCODE_CONFIG", &config);
        }
        let mut child = cmd.spawn().map_err(|e| {
            format!(
                "cannot start `{} serve`: {e} — check that OpenCode runs (`opencode --version`)",
                program.display()
            )
        })?;
        let pgid = child.id().unwrap_or_default();
        let (Some(out), Some(err)) = (child.stdout.take(), child.stderr.take()) else {
            return Err("`opencode serve` started without its output pipes".into());
        };
        // Errors go to the engine's log; draining keeps the server from blocking on a pipe.
        tokio::spawn(async move {
            let mut lines = BufReader::new(err).lines();
            while let Ok(Some(l)) = lines.next_line().await {
                tracing::info!("opencode serve: {l}");
            }
        });
        let mut lines = BufReader::new(out).lines();
        let found = tokio::time::timeout(START, async {
            while let Ok(Some(l)) = lines.next_line().await {
                if let Some(url) = listening_url(&l) {
                    return Some(url);
                }
                tracing::info!("opencode serve: {l}");
            }
            None
        })
        .await;
        let url = match found {
            Ok(Some(url)) => url,
            other => {
                let why = match other {
                    Ok(_) => match child.try_wait() {
                        Ok(Some(status)) => format!("it exited ({status})"),
                        _ => "it closed its output".into(),
                    },
                    Err(_) => format!(
                        "it did not say where it listens within {} s",
                        START.as_secs()
                    ),
                };
                stop_child(&mut child, pgid, GRACE).await;
                return Err(format!(
                    "`opencode serve` did not start: {why} — run `opencode serve` in {} to see why",
                    self.root.display()
                ));
            }
        };
        tokio::spawn(async move {
            while let Ok(Some(l)) = lines.next_line().await {
                tracing::info!("opencode serve: {l}");
            }
        });
        Ok(Running {
            child,
            pgid,
            served: Served { url, password },
            _engine_end: engine_end,
        })
    }
}

/// `GET /global/health` with the server's password, until it answers (10 s at most).
async fn healthy(served: &Served) -> Result<(), String> {
    let url = format!("{}/global/health", served.url);
    let http = super::http::client(&served.url);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let res = http
            .get(&url)
            .basic_auth("opencode", Some(&served.password))
            .timeout(Duration::from_secs(3))
            .send()
            .await;
        let why = match res {
            Ok(r) if r.status().is_success() => return Ok(()),
            // Another server on that port, with another password (or none).
            Ok(r) => return Err(format!("{url} answered HTTP {}", r.status())),
            Err(e) => super::http::chain(&e),
        };
        if tokio::time::Instant::now() > deadline {
            return Err(format!("{url}: {why}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The value of [`MARK`] for `owner`'s server in the workspace at `root`.
fn mark(root: &Path, owner: &str) -> String {
    format!("{owner}:{}", root.display())
}

/// 32 random hex digits.
fn password() -> Result<String, String> {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| format!("cannot read /dev/urandom for the OpenCode server's password: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Ends the engine's server a stopped engine left behind in the workspace at `root` (its
/// sessions would go on editing worktrees); says so when there was one. Blocking.
pub fn end_left_behind(root: &Path) -> Option<String> {
    end_marked(&mark(root, "engine"))
}

/// Ends every server group carrying `mark`; says so when there was one. Blocking.
fn end_marked(mark: &str) -> Option<String> {
    let mut ended = Vec::new();
    while let Some((pgid, _)) = find_group_by_env(MARK, mark) {
        if !signal_group(pgid, Signal::SIGKILL) {
            break;
        }
        ended.push(pgid.to_string());
    }
    (!ended.is_empty()).then(|| {
        format!(
            "ended the OpenCode server (pid {}) a stopped engine left, with its sessions",
            ended.join(", ")
        )
    })
}

impl Drop for OpencodeServer {
    /// An engine that ends without [`OpencodeServer::stop`] (an error, a panic) still
    /// leaves no server behind.
    fn drop(&mut self) {
        if let Some(r) = self.running.get_mut().take() {
            signal_group(r.pgid, Signal::SIGKILL);
        }
    }
}

/// The URL in `opencode server listening on http://127.0.0.1:PORT`.
fn listening_url(line: &str) -> Option<String> {
    let at = line.find("listening on ")? + "listening on ".len();
    let url = line[at..].split_whitespace().next()?;
    url.starts_with("http://")
        .then(|| url.trim_end_matches('/').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listening_line_gives_the_url() {
        assert_eq!(
            listening_url("opencode server listening on http://127.0.0.1:40123").as_deref(),
            Some("http://127.0.0.1:40123")
        );
        assert_eq!(listening_url("Warning: something"), None);
        assert_eq!(listening_url("listening on nothing"), None);
    }

    #[test]
    fn serve_is_for_opencode_profiles_and_replaces_the_url() {
        use crate::agents::parse_profile;
        use crate::pipeline::Severity;
        let (p, d) = parse_profile(
            "oc.json",
            r#"{"id": "oc", "backend": "opencode", "serve": true}"#,
        );
        assert!(d.is_empty(), "{d:?}");
        let p = p.unwrap();
        assert!(p.serve);
        assert_eq!(p.target(), "opencode serve (started by baton)");
        let (p, d) = parse_profile(
            "oc.json",
            r#"{"id": "oc", "backend": "opencode", "serve": true, "url": "http://127.0.0.1:1"}"#,
        );
        assert!(p.is_some());
        assert_eq!(d[0].severity, Severity::Warning);
        assert!(d[0].message.contains("`url` is not used"), "{d:?}");
        let (p, d) = parse_profile(
            "c.json",
            r#"{"id": "c", "backend": "command", "argv": ["x"], "serve": true}"#,
        );
        assert!(p.is_none());
        assert!(
            d[0].message.contains("for the opencode backend only"),
            "{d:?}"
        );
        let (p, d) = parse_profile(
            "oc.json",
            r#"{"id": "oc", "backend": "opencode", "serve": "yes"}"#,
        );
        assert!(p.is_none());
        assert!(d[0].message.contains("must be true or false"), "{d:?}");
    }
}
