//! A real PostgreSQL server for one test: `initdb` in a temporary folder and `pg_ctl` on a
//! free port of 127.0.0.1, with password (SCRAM) logins over TCP. PostgreSQL refuses to run
//! as root, so under root the server runs as `nobody`. The binaries come from
//! `BATON_PG_BIN`, else the newest `/usr/lib/postgresql/*/bin` (Debian's `postgresql`),
//! else `PATH`; where there are none, the test skips, or fails under
//! `BATON_REQUIRE_INFRA=1`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The login the server is made with.
pub const USER: &str = "baton";
/// Its password (only ever handed to baton through PGPASSWORD or a .pgpass file).
pub const PASSWORD: &str = "pg-test-s3cret";

/// A running server, stopped when dropped.
pub struct Pg {
    dir: tempfile::TempDir,
    bin: PathBuf,
    pub port: u16,
}

mod server;
use server::{as_owner, bin_dir};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

impl Pg {
    /// Makes and starts a server; `None` (after saying so) when PostgreSQL is missing.
    pub fn start() -> Option<Self> {
        let Some(bin) = bin_dir() else {
            super::infra::missing(
                "PostgreSQL (initdb, pg_ctl)",
                "install Debian's postgresql (.ci/run does), or set BATON_PG_BIN to the folder holding initdb",
            );
            return None;
        };
        let dir = tempfile::tempdir().expect("tempdir");
        if nix::unistd::geteuid().is_root() {
            let nobody = Some(nix::unistd::Uid::from_raw(65534));
            nix::unistd::chown(dir.path(), nobody, Some(nix::unistd::Gid::from_raw(65534)))
                .expect("chown the server's folder to nobody");
        }
        let pwfile = dir.path().join("pw");
        std::fs::write(&pwfile, PASSWORD).unwrap();
        let out = as_owner(Command::new(bin.join("initdb")).args([
            "-D",
            dir.path().join("data").to_str().unwrap(),
            "-U",
            USER,
            "--pwfile",
            pwfile.to_str().unwrap(),
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        ]))
        .output()
        .expect("run initdb");
        assert!(out.status.success(), "initdb: {out:?}");
        // Another process may take the port between asking and starting: try again.
        for _ in 0..5 {
            let port = free_port();
            let out = as_owner(Command::new(bin.join("pg_ctl")).args([
                "-D",
                dir.path().join("data").to_str().unwrap(),
                "-l",
                dir.path().join("log").to_str().unwrap(),
                "-w",
                "-t",
                "60",
                "-o",
                &format!(
                    "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
                    dir.path().display()
                ),
                "start",
            ]))
            .output()
            .expect("run pg_ctl");
            if out.status.success() {
                return Some(Self { dir, bin, port });
            }
            let log = std::fs::read_to_string(dir.path().join("log")).unwrap_or_default();
            assert!(
                log.contains("could not bind"),
                "pg_ctl start: {out:?}\n{log}"
            );
        }
        panic!("no free port for PostgreSQL after five tries");
    }

    /// The URL of database `db`, without the password.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://{USER}@127.0.0.1:{}/{db}", self.port)
    }

    /// A client of database `db`, for a test's own looks and changes.
    pub fn client(&self, db: &str) -> postgres::Client {
        let mut c = postgres::Config::new();
        c.host("127.0.0.1")
            .port(self.port)
            .user(USER)
            .password(PASSWORD)
            .dbname(db);
        c.connect(postgres::NoTls)
            .expect("connect to the test server")
    }

    /// Makes an empty database `db`.
    pub fn create_db(&self, db: &str) {
        self.client("postgres")
            .batch_execute(&format!("CREATE DATABASE \"{db}\""))
            .expect("create database");
    }

    /// Stops the server at once (`pg_ctl stop -m fast`): every connection breaks.
    pub fn stop_server(&self) {
        self.ctl(&["-m", "fast", "-w", "stop"]);
    }

    /// Starts it again on the same port after [`Pg::stop_server`].
    pub fn start_server(&self) {
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("log");
        self.ctl(&[
            "-l",
            log.to_str().unwrap(),
            "-w",
            "-t",
            "60",
            "-o",
            &opts,
            "start",
        ]);
    }

    /// `pg_ctl restart`: the server stops (breaking every connection) and starts again.
    pub fn restart(&self) {
        let log = self.dir.path().join("log");
        self.ctl(&[
            "-l",
            log.to_str().unwrap(),
            "-m",
            "fast",
            "-w",
            "-t",
            "60",
            "restart",
        ]);
    }

    fn ctl(&self, args: &[&str]) {
        let data = self.dir.path().join("data");
        let out = as_owner(
            Command::new(self.bin.join("pg_ctl"))
                .arg("-D")
                .arg(&data)
                .args(args),
        )
        .output()
        .expect("run pg_ctl");
        assert!(out.status.success(), "pg_ctl {args:?}: {out:?}");
    }

    /// The server's folder (its log is `log` there).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Pg {
    fn drop(&mut self) {
        let _ = as_owner(Command::new(self.bin.join("pg_ctl")).args([
            "-D",
            self.dir.path().join("data").to_str().unwrap_or("."),
            "-m",
            "immediate",
            "-w",
            "stop",
        ]))
        .output();
    }
}
