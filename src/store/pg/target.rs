//! Where a PostgreSQL board lives: a `postgres://…` URL from `[store] store` in config.toml
//! or `BATON_DATABASE_URL`, with its password taken from `PGPASSWORD` or `~/.pgpass` (or
//! `PGPASSFILE`), as libpq does. A URL read from a file that may be committed must not carry
//! a password, and no message shows one.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// A PostgreSQL board's connection settings, password included when one was found.
#[derive(Clone)]
pub struct PgTarget {
    config: postgres::Config,
    shown: String,
}

impl std::fmt::Debug for PgTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PgTarget({})", self.shown)
    }
}

/// Where a URL came from, which decides whether it may carry a password.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UrlSource<'a> {
    /// The environment (`BATON_DATABASE_URL`): not a file, so a password is taken.
    Env,
    /// A config file, which may be committed: a password is refused.
    File(&'a Path),
    /// A command-line argument (named), which others may read: a password is refused.
    Arg(&'a str),
}

impl PgTarget {
    /// Parses `url` and finds its password. `Err` is one sentence for people.
    pub fn parse(url: &str, from: UrlSource<'_>) -> Result<Self, String> {
        let shown = redact(url);
        let whence = match from {
            UrlSource::Env => "BATON_DATABASE_URL".to_string(),
            UrlSource::File(p) => {
                check_setting(url, p)?;
                format!("[store] store in {}", p.display())
            }
            UrlSource::Arg(name) => name.to_string(),
        };
        if !is_postgres_url(url) {
            return Err(format!(
                "{whence} is `{shown}`, which is not a postgres://… URL — write it as postgres://USER@HOST:PORT/DATABASE, or leave it out for SQLite in .baton/baton.db"
            ));
        }
        let mut config: postgres::Config = url
            .parse()
            .map_err(|e| format!("{whence} (`{shown}`) is not a URL PostgreSQL takes: {e}"))?;
        if config.get_password().is_some() {
            if let UrlSource::Arg(_) = from {
                return Err(format!(
                    "{whence} carries a password, which others can read in the process list — give the URL without it ({shown}) and put the password in PGPASSWORD or ~/.pgpass"
                ));
            }
        } else if let Some(pw) = std::env::var_os("PGPASSWORD").filter(|p| !p.is_empty()) {
            config.password(pw.as_encoded_bytes());
        } else if let Some(pw) = from_pgpass(&config)? {
            config.password(pw);
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        // A cut network shows as a broken connection within about half a minute, not
        // the system's two hours, so the store and its listener connect again.
        config
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(15))
            .keepalives_interval(Duration::from_secs(5))
            .keepalives_retries(3);
        Ok(Self { config, shown })
    }

    /// The URL as messages show it: the password, if any, replaced by `***`.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// Connects (plain TCP or a Unix socket; TLS is not offered yet).
    pub(crate) fn connect(&self) -> Result<postgres::Client, String> {
        self.config.connect(postgres::NoTls).map_err(|e| {
            let code = e.as_db_error().map(|d| d.code().code());
            // The error and its causes ("invalid configuration: password missing").
            let mut said = e.to_string();
            let mut cause = std::error::Error::source(&e);
            while let Some(c) = cause {
                let c_said = c.to_string();
                if !said.contains(&c_said) {
                    said = format!("{said}: {c_said}");
                }
                cause = c.source();
            }
            let hint = match code {
                _ if said.contains("password missing") => {
                    " — set PGPASSWORD or add the password to ~/.pgpass (HOST:PORT:DATABASE:USER:PASSWORD, mode 600)"
                }
                // A role the server does not know is not a password problem.
                Some("28000") if said.contains("does not exist") => {
                    " — the user in the URL is not a role of this server: create it (createuser) or put the right user in the URL"
                }
                Some("28P01") | Some("28000") => {
                    " — set PGPASSWORD or add the password to ~/.pgpass (HOST:PORT:DATABASE:USER:PASSWORD, mode 600)"
                }
                Some("3D000") => " — create the database (createdb) and run `baton db migrate`",
                _ => " — check that the server runs and the URL names it",
            };
            format!("cannot connect to PostgreSQL at {}: {said}{hint}", self.shown)
        })
    }
}

/// Checks `[store] store` as a config file gives it: a postgres URL without a password.
pub fn check_setting(url: &str, file: &Path) -> Result<(), String> {
    let shown = redact(url);
    if !is_postgres_url(url) {
        return Err(format!(
            "[store] store is `{shown}`, which is not a postgres://… URL — write it as postgres://USER@HOST:PORT/DATABASE, or leave it out for SQLite in .baton/baton.db"
        ));
    }
    let config: postgres::Config = url
        .parse()
        .map_err(|e| format!("[store] store (`{shown}`) is not a URL PostgreSQL takes: {e}"))?;
    if config.get_password().is_some() {
        return Err(format!(
            "[store] store in {} carries a password, and config files may be committed — write the URL without it ({shown}) and put the password in PGPASSWORD or ~/.pgpass",
            file.display()
        ));
    }
    Ok(())
}

/// True for `postgres://` and `postgresql://` URLs.
pub fn is_postgres_url(url: &str) -> bool {
    let lower = url.trim_start().to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

/// `url` with any password (in the user part or a `password=` parameter) as `***`.
pub fn redact(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_string();
    };
    let (head, rest) = url.split_at(scheme_end);
    let auth_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (auth, tail) = rest.split_at(auth_end);
    let auth = match auth.rfind('@') {
        Some(at) => {
            let (user, host) = auth.split_at(at);
            match user.split_once(':') {
                Some((name, _)) => format!("{name}:***{host}"),
                None => auth.to_string(),
            }
        }
        None => auth.to_string(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let params: Vec<String> = query
                .split('&')
                .map(|p| match p.split_once('=') {
                    Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                    _ => p.to_string(),
                })
                .collect();
            format!("{path}?{}", params.join("&"))
        }
        None => tail.to_string(),
    };
    format!("{head}{auth}{tail}")
}

/// The password file: `PGPASSFILE`, else `~/.pgpass`.
fn pgpass_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PGPASSFILE").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    Some(PathBuf::from(std::env::var_os("HOME").filter(|h| !h.is_empty())?).join(".pgpass"))
}

/// The password `~/.pgpass` gives for this host, port, database and user, as libpq reads
/// it; a file others may read is refused, as libpq ignores it.
fn from_pgpass(config: &postgres::Config) -> Result<Option<String>, String> {
    let Some(path) = pgpass_path() else {
        return Ok(None);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(_) => return Ok(None),
    };
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).map_or(0, |m| m.permissions().mode());
        if mode & 0o077 != 0 {
            return Err(format!(
                "{} may be read by others (mode {:o}) — run `chmod 600 {}`",
                path.display(),
                mode & 0o777,
                path.display()
            ));
        }
    }
    let host = match config.get_hosts().first() {
        Some(postgres::config::Host::Tcp(h)) => h.clone(),
        _ => "localhost".to_string(),
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    let user = config
        .get_user()
        .map(str::to_string)
        .unwrap_or_else(|| std::env::var("USER").unwrap_or_default());
    let db = config.get_dbname().unwrap_or(&user).to_string();
    Ok(pgpass_lookup(&text, [&host, &port, &db, &user]))
}

/// The first line of a `.pgpass` text matching the four fields (`*` matches anything).
fn pgpass_lookup(text: &str, want: [&str; 4]) -> Option<String> {
    for line in text.lines() {
        if line.trim_start().starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let fields = split_pgpass(line);
        if fields.len() < 5 {
            continue;
        }
        if want.iter().zip(&fields).all(|(w, f)| f == "*" || f == w) {
            return Some(fields[4].clone());
        }
    }
    None
}

/// A `.pgpass` line's fields: `:` separates, `\:` and `\\` escape.
fn split_pgpass(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let (Some(n), Some(f)) = (chars.next(), fields.last_mut()) {
                    f.push(n);
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => {
                if let Some(f) = fields.last_mut() {
                    f.push(c);
                }
            }
        }
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted_wherever_they_are() {
        assert_eq!(
            redact("postgres://ann:s3cret@db.example:5432/board"),
            "postgres://ann:***@db.example:5432/board"
        );
        assert_eq!(
            redact("postgresql://db/board?user=ann&password=s3cret&sslmode=disable"),
            "postgresql://db/board?user=ann&password=***&sslmode=disable"
        );
        assert_eq!(redact("postgres://ann@db/board"), "postgres://ann@db/board");
    }

    #[test]
    fn a_password_in_a_config_file_is_refused_and_not_shown() {
        let file = Path::new("/w/.baton/config.toml");
        for url in [
            "postgres://ann:s3cret@db/board",
            "postgres://ann@db/board?password=s3cret",
        ] {
            let err = PgTarget::parse(url, UrlSource::File(file)).unwrap_err();
            assert!(err.contains("carries a password"), "{err}");
            assert!(err.contains("PGPASSWORD or ~/.pgpass"), "{err}");
            assert!(!err.contains("s3cret"), "{err}");
        }
        let ok = PgTarget::parse("postgres://ann:s3cret@db/board", UrlSource::Env).unwrap();
        assert_eq!(ok.shown(), "postgres://ann:***@db/board");
        assert!(!format!("{ok:?}").contains("s3cret"));
    }

    #[test]
    fn other_urls_are_refused_in_a_sentence() {
        let err = PgTarget::parse("mysql://db/board", UrlSource::Env).unwrap_err();
        assert!(err.contains("not a postgres://"), "{err}");
    }

    #[test]
    fn pgpass_lines_match_field_by_field() {
        let text = "# comment\nother:5432:board:ann:nope\ndb:5432:*:ann:pa\\:ss\n*:*:*:*:any\n";
        assert_eq!(
            pgpass_lookup(text, ["db", "5432", "board", "ann"]).as_deref(),
            Some("pa:ss")
        );
        assert_eq!(
            pgpass_lookup(text, ["x", "1", "y", "z"]).as_deref(),
            Some("any")
        );
        assert_eq!(
            pgpass_lookup("db:5432:board:ann\n", ["db", "5432", "board", "ann"]),
            None
        );
    }
}
