//! A real OpenSSH server on 127.0.0.1 for tests: host key, client key and configs made in a
//! temp dir, and an ssh config file for `ssh -F` so the user's own config is never read.
//! `Sshd::start()` is None (with a visible message) only where sshd cannot be started.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

/// The host alias the client config defines.
pub const HOST: &str = "baton-test";

/// A running sshd; stopped on drop.
pub struct Sshd {
    pub dir: tempfile::TempDir,
    child: Child,
    pub port: u16,
    /// The ssh client config (`ssh -F`), whose `baton-test` host points at this server (or
    /// at the cuttable proxy in front of it).
    pub client_config: PathBuf,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

fn keygen(path: &Path) -> bool {
    Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

impl Sshd {
    /// Starts sshd, or says why it cannot and gives None.
    pub fn start() -> Option<Self> {
        let sshd = ["/usr/sbin/sshd", "/usr/bin/sshd"]
            .into_iter()
            .find(|p| Path::new(p).exists());
        let Some(sshd) = sshd else {
            crate::infra::missing("sshd", "install openssh-server; .ci/run does");
            return None;
        };
        let dir = tempfile::tempdir().ok()?;
        let d = dir.path();
        if !keygen(&d.join("host_key")) || !keygen(&d.join("client_key")) {
            crate::infra::missing("ssh-keygen", "it could not make test keys");
            return None;
        }
        std::fs::copy(d.join("client_key.pub"), d.join("authorized_keys")).ok()?;
        // sshd refuses to start without its privilege separation folder.
        let _ = std::fs::create_dir_all("/run/sshd");
        let port = free_port();
        let user = std::env::var("USER").unwrap_or_else(|_| "root".into());
        let cfg = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nPidFile {d}/sshd.pid\n\
             AuthorizedKeysFile {d}/authorized_keys\nStrictModes no\nPasswordAuthentication no\n\
             KbdInteractiveAuthentication no\nPubkeyAuthentication yes\nUsePAM no\n\
             PermitRootLogin prohibit-password\nLogLevel INFO\nMaxStartups 100\nMaxSessions 100\n",
            d = d.display()
        );
        std::fs::write(d.join("sshd_config"), cfg).ok()?;
        let mut child = match Command::new(sshd)
            .args(["-D", "-e", "-f"])
            .arg(d.join("sshd_config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
        {
            Ok(c) => c,
            Err(e) => {
                crate::infra::missing("a working sshd", &format!("could not start it: {e}"));
                return None;
            }
        };
        // Wait for its "Server listening" line (an event, not a sleep); then keep draining.
        let mut err = BufReader::new(child.stderr.take()?);
        let mut said = String::new();
        loop {
            let mut line = String::new();
            match err.read_line(&mut line) {
                Ok(0) | Err(_) => {
                    let _ = child.wait();
                    crate::infra::missing("a working sshd", &format!("it did not start: {said}"));
                    return None;
                }
                Ok(_) if line.contains("Server listening") => break,
                Ok(_) => said.push_str(&line),
            }
        }
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = err.read_to_end(&mut sink);
        });
        let host_pub = std::fs::read_to_string(d.join("host_key.pub")).ok()?;
        std::fs::write(
            d.join("known_hosts"),
            format!("[127.0.0.1]:{port} {host_pub}"),
        )
        .ok()?;
        let client_config = d.join("ssh_config");
        let me = Self {
            dir,
            child,
            port,
            client_config,
        };
        me.write_client_config(port, &user);
        Some(me)
    }

    /// Points the `baton-test` alias at `port` (the server's own, or a proxy's).
    pub fn write_client_config(&self, port: u16, user: &str) {
        let d = self.dir.path();
        let cfg = format!(
            "Host {HOST}\n  HostName 127.0.0.1\n  Port {port}\n  User {user}\n  IdentityFile {d}/client_key\n  IdentitiesOnly yes\n  UserKnownHostsFile {d}/known_hosts\n  HostKeyAlias [127.0.0.1]:{sp}\n  StrictHostKeyChecking yes\n  LogLevel ERROR\n",
            d = d.display(),
            sp = self.port,
        );
        std::fs::write(&self.client_config, cfg).expect("write the ssh client config");
    }

    /// A folder for the host side's mirrors and step folders.
    pub fn remote_dir(&self) -> PathBuf {
        self.dir.path().join("remote")
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A TCP forwarder in front of sshd whose live connections can be cut, as a network that
/// drops would.
pub struct Proxy {
    pub port: u16,
    live: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    pub fn start(to: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let live: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let conns = live.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { break };
                let Ok(server) = TcpStream::connect(("127.0.0.1", to)) else {
                    continue;
                };
                let mut list = conns.lock().unwrap();
                list.push(client.try_clone().unwrap());
                list.push(server.try_clone().unwrap());
                drop(list);
                pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
                pipe(server, client);
            }
        });
        Self { port, live }
    }

    /// Cuts every connection made so far; new ones go through.
    pub fn cut(&self) {
        for s in self.live.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

fn pipe(mut from: TcpStream, mut to: TcpStream) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to.shutdown(Shutdown::Both);
    });
}
