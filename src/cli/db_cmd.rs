//! `baton db …`: the board's database as a whole — its schema, a copy, an export and an
//! import, and a check.
//!
//! The one front end that opens the database itself, on purpose: these are administration
//! commands on the file (or a PostgreSQL copy), not on the board, and some of them (an
//! upgrade, an import) must work where no engine could start. Every other command goes
//! through the engine's client.

use super::{Failure, Outcome, exit};
use crate::store::pg::UrlSource;
use crate::store::{
    Carried, Location, PgStore, PgTarget, SCHEMA_VERSION, Store, StoreError, schema_of,
};
use crate::workspace::{EngineLock, Workspace};
use clap::Subcommand;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `baton db …`.
#[derive(Debug, Subcommand)]
pub enum DbCmd {
    /// The database's file and schema version, and this baton's.
    Status,
    /// Bring the database's schema up to this baton's version.
    Migrate,
    /// Every table as JSON lines (a header line, then one line a row), to stdout or FILE.
    Export {
        /// Write here instead of stdout (refused when it exists).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Fill an empty board from an export (`-` reads stdin); refuses a board with tasks.
    Import {
        file: PathBuf,
        /// Import into this database file (made if missing), or this postgres://… database
        /// (password from PGPASSWORD or ~/.pgpass), instead of the workspace's board.
        #[arg(long, value_name = "DB")]
        to: Option<PathBuf>,
    },
    /// Copy the database to a new file while it is in use (SQLite's online backup).
    Backup { to: PathBuf },
    /// Check the file's integrity, rows that point at nothing, and execution keys; exits 1
    /// on any finding.
    Verify,
}

/// Runs a `baton db` subcommand.
pub fn run(ws: &Workspace, cmd: DbCmd) -> Outcome {
    if let DbCmd::Import { file, to: Some(to) } = &cmd
        && let Some(url) = to
            .to_str()
            .filter(|u| crate::store::pg::target::is_postgres_url(u))
    {
        let target = PgTarget::parse(url, UrlSource::Arg("--to")).map_err(Failure::new)?;
        return pg_import(&target, file);
    }
    if let Location::Postgres(target) = super::store_location(ws)? {
        return postgres(&target, cmd);
    }
    match cmd {
        DbCmd::Status => status(ws),
        DbCmd::Migrate => {
            let before = existing_schema(&ws.db_path())?;
            open_store(ws)?;
            match before {
                Some(v) if v == SCHEMA_VERSION => outln!("schema {v}: already current"),
                Some(v) => outln!("schema {v} → {SCHEMA_VERSION}"),
                None => outln!("made a new database at schema {SCHEMA_VERSION}"),
            }
            Ok(exit::OK)
        }
        DbCmd::Export { out } => export(ws, out.as_deref()),
        DbCmd::Import { file, to } => import(ws, &file, to.as_deref()),
        DbCmd::Backup { to } => {
            if let Some(dir) = to
                .parent()
                .filter(|d| !d.as_os_str().is_empty() && !d.is_dir())
            {
                return Err(Failure::new(format!(
                    "{} is not a folder — make it, or give a file in a folder that exists",
                    dir.display()
                )));
            }
            let store = open_store_to_read(ws)?;
            store.backup_to(&to)?;
            outln!("backed up {} to {}", ws.db_path().display(), to.display());
            Ok(exit::OK)
        }
        DbCmd::Verify => {
            let store = open_store_to_read(ws)?;
            let found = store.verify()?;
            for f in &found {
                outln!("{f}");
            }
            if found.is_empty() {
                outln!("{}: sound", ws.db_path().display());
                Ok(exit::OK)
            } else {
                Ok(exit::ERROR)
            }
        }
    }
}

fn existing_schema(path: &Path) -> Result<Option<i64>, Failure> {
    if !path.exists() {
        return Ok(None);
    }
    Ok(Some(schema_of(path)?))
}

fn status(ws: &Workspace) -> Outcome {
    let path = ws.db_path();
    match existing_schema(&path)? {
        None => outln!(
            "{}: no database yet (this baton writes schema {SCHEMA_VERSION})",
            path.display()
        ),
        Some(v) => outln!(
            "{}: schema {v}, this baton writes {SCHEMA_VERSION} ({})",
            path.display(),
            note(v)
        ),
    }
    Ok(exit::OK)
}

fn export(ws: &Workspace, out: Option<&Path>) -> Outcome {
    let mut store = open_store_to_read(ws)?;
    export_with(out, |w| store.export(w))
}

/// Writes an export to stdout or to a new file `out`, then says what it carried.
fn export_with(
    out: Option<&Path>,
    mut export: impl FnMut(&mut dyn Write) -> Result<Carried, StoreError>,
) -> Outcome {
    let carried = match out {
        None => {
            let stdout = std::io::stdout();
            let mut w = BufWriter::new(stdout.lock());
            export(&mut w)?
        }
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)
                .map_err(|e| {
                    let why = if e.kind() == std::io::ErrorKind::AlreadyExists {
                        "it exists".to_string()
                    } else {
                        e.to_string()
                    };
                    Failure::new(format!(
                        "cannot write {}: {why} — give a new file",
                        path.display()
                    ))
                })?;
            let mut w = BufWriter::new(file);
            let carried = export(&mut w)?;
            w.into_inner()
                .map_err(|e| Failure::new(format!("cannot write {}: {e}", path.display())))?
                .sync_all()
                .map_err(|e| Failure::new(format!("cannot write {}: {e}", path.display())))?;
            carried
        }
    };
    eprintln!(
        "exported {} task(s), {} row(s) in all",
        carried.tasks(),
        carried.rows()
    );
    Ok(exit::OK)
}

/// The export to read: a file, or stdin for `-`.
fn open_input(file: &Path) -> Result<Box<dyn BufRead>, Failure> {
    Ok(if file == Path::new("-") {
        Box::new(BufReader::new(std::io::stdin()))
    } else {
        if file.is_dir() {
            return Err(Failure::new(format!(
                "{} is a folder — give a file `baton db export` wrote",
                file.display()
            )));
        }
        let f = std::fs::File::open(file).map_err(|e| {
            Failure::new(format!(
                "cannot read {}: {e} — give a file `baton db export` wrote",
                file.display()
            ))
        })?;
        Box::new(BufReader::new(f))
    })
}

fn import(ws: &Workspace, file: &Path, to: Option<&Path>) -> Outcome {
    let mut input = open_input(file)?;
    // The workspace's own board: no engine may run on it while it is filled.
    // `--to` naming the board's own file is the board itself.
    let own = ws.db_path();
    let same = |db: &Path| match (db.canonicalize(), own.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    let (_lock, mut store) = match to {
        Some(db) if !same(db) => (None, Store::open(db)?),
        _ => {
            let lock = EngineLock::acquire(ws, Duration::from_millis(200)).map_err(|_| {
                Failure::new(
                    "an engine runs on this board — stop it (quit the board or `baton engine`) before importing",
                )
            })?;
            (Some(lock), open_store(ws)?)
        }
    };
    imported(&store.import(&mut input)?)
}

fn imported(carried: &Carried) -> Outcome {
    let mut err = std::io::stderr();
    let _ = writeln!(
        err,
        "imported {} task(s), {} row(s) in all",
        carried.tasks(),
        carried.rows()
    );
    Ok(exit::OK)
}

/// Opens the workspace's store (whole-file administration is the one command that does;
/// SQLite here, a board in PostgreSQL is refused).
fn open_store(ws: &Workspace) -> Result<Store, Failure> {
    sqlite_only(ws)?;
    Ok(Store::open(&ws.db_path())?)
}

/// Opens the workspace's store for a command that only reads: read-only when this process
/// may not write there (a read-only checkout or mount), so reading never needs to write.
fn open_store_to_read(ws: &Workspace) -> Result<Store, Failure> {
    sqlite_only(ws)?;
    let path = ws.db_path();
    if Store::writable(&path) {
        open_store(ws)
    } else {
        Ok(Store::open_read_only(&path)?)
    }
}

/// Refuses a board kept in PostgreSQL for the commands that work on the SQLite file, so
/// nothing quietly uses `.baton/baton.db` instead.
fn sqlite_only(ws: &Workspace) -> Result<(), Failure> {
    match super::store_location(ws)? {
        Location::Sqlite(_) => Ok(()),
        Location::Postgres(t) => Err(Failure::new(format!(
            "this board is kept in PostgreSQL ({}), and this command works on the SQLite file .baton/baton.db — use PostgreSQL's own tools there",
            t.shown()
        ))),
    }
}

/// Fills the PostgreSQL board at `target` from an export.
fn pg_import(target: &PgTarget, file: &Path) -> Outcome {
    let mut input = open_input(file)?;
    let mut store = PgStore::connect(target)?;
    // A database with no baton tables yet is an empty board: make them first.
    store.migrate()?;
    imported(&store.import(&mut input)?)
}

/// `baton db …` on a board kept in PostgreSQL.
fn postgres(target: &PgTarget, cmd: DbCmd) -> Outcome {
    let shown = target.shown();
    match cmd {
        DbCmd::Status => {
            let mut store = PgStore::connect(target)?;
            match store.schema_version()? {
                None => outln!(
                    "{shown}: no baton schema yet (this baton writes schema {SCHEMA_VERSION}) — `baton db migrate` makes it"
                ),
                Some(v) => outln!(
                    "{shown}: schema {v}, this baton writes {SCHEMA_VERSION} ({})",
                    note(v)
                ),
            }
            Ok(exit::OK)
        }
        DbCmd::Migrate => {
            let mut store = PgStore::connect(target)?;
            match store.migrate()? {
                Some(v) if v == SCHEMA_VERSION => outln!("schema {v}: already current"),
                Some(v) => outln!("schema {v} → {SCHEMA_VERSION}"),
                None => outln!("made the schema in {shown} at schema {SCHEMA_VERSION}"),
            }
            Ok(exit::OK)
        }
        DbCmd::Export { out } => {
            let mut store = PgStore::connect(target)?;
            export_with(out.as_deref(), |w| store.export(w))
        }
        // `--to FILE`: out of PostgreSQL into a SQLite file.
        DbCmd::Import { file, to: Some(db) } => {
            let mut input = open_input(&file)?;
            imported(&Store::open(&db)?.import(&mut input)?)
        }
        DbCmd::Import { file, to: None } => pg_import(target, &file),
        DbCmd::Backup { .. } => Err(Failure::new(format!(
            "`baton db backup` copies a SQLite file, and this board is kept in PostgreSQL ({shown}) — use pg_dump, or `baton db export`"
        ))),
        DbCmd::Verify => {
            let mut store = PgStore::connect(target)?;
            let found = store.verify()?;
            for f in &found {
                outln!("{f}");
            }
            if found.is_empty() {
                outln!("{shown}: sound");
                Ok(exit::OK)
            } else {
                Ok(exit::ERROR)
            }
        }
    }
}

/// How a found schema version compares with this baton's.
fn note(v: i64) -> &'static str {
    match v.cmp(&SCHEMA_VERSION) {
        std::cmp::Ordering::Equal => "current",
        std::cmp::Ordering::Less => "older — `baton db migrate` upgrades it",
        std::cmp::Ordering::Greater => "newer than this baton — upgrade baton",
    }
}
