//! `cargo bench --bench engine [-- ROW… --quick --markdown --no-build]`: baton measured
//! as a black box (the release binary, plus the library for the TUI's first frame) against
//! raw floors doing the same work in the same run. Each row prints both figures, their
//! ratio and the target. See README.md, "Benchmarks".

mod binary;
mod board;
mod floors;
mod pg;
mod proc;
mod report;
mod rows;
mod workspace;

use report::Line;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What a row gets to work with.
pub struct Ctx {
    /// The release `baton` binary.
    pub bin: PathBuf,
    /// Smaller N for a 2-core laptop.
    pub quick: bool,
    deadline: Instant,
}

impl Ctx {
    /// `full` normally, `quick` in quick mode.
    pub fn n(&self, full: usize, quick: usize) -> usize {
        if self.quick { quick } else { full }
    }

    /// Time left before this row's limit: every process a row starts gets at most this.
    pub fn left(&self) -> Duration {
        self.deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_secs(1))
    }
}

struct Options {
    quick: bool,
    markdown: bool,
    no_build: bool,
    rows: Vec<String>,
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        quick: false,
        markdown: false,
        no_build: false,
        rows: Vec::new(),
    };
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "--quick" => o.quick = true,
            "--markdown" => o.markdown = true,
            "--no-build" => o.no_build = true,
            // Cargo passes `--bench` to every bench target.
            "--bench" => {}
            "-h" | "--help" => return Err(usage()),
            name if rows::ROWS.iter().any(|r| r.name == name) => o.rows.push(a),
            other => return Err(format!("unknown argument {other:?}\n{}", usage())),
        }
    }
    Ok(o)
}

fn usage() -> String {
    let names: Vec<&str> = rows::ROWS.iter().map(|r| r.name).collect();
    format!(
        "usage: cargo bench --bench engine -- [ROW…] [--quick] [--markdown] [--no-build]\nrows: {}",
        names.join(" ")
    )
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "__rss") {
        std::process::exit(proc::rss_helper(&args[1..]));
    }
    let opts = match options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let bin = match binary::baton(opts.no_build) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("baton bench: {e}");
            std::process::exit(1);
        }
    };
    let mode = if opts.quick { "quick" } else { "full" };
    let header = format!(
        "baton {} ({}), {mode} mode, on {}",
        binary::revision(),
        bin.display(),
        binary::machine()
    );
    eprintln!("{header}");
    let mut lines = Vec::new();
    let started = Instant::now();
    for row in rows::ROWS {
        if !opts.rows.is_empty() && !opts.rows.iter().any(|r| r == row.name) {
            continue;
        }
        let limit = Duration::from_secs(if opts.quick { row.quick_s } else { row.full_s });
        let ctx = Ctx {
            bin: bin.clone(),
            quick: opts.quick,
            deadline: Instant::now() + limit,
        };
        eprintln!("— {} ({})", row.name, row.title);
        let t = Instant::now();
        let mut got = Vec::new();
        if let Err(e) = (row.run)(&ctx, &mut got) {
            got.push(Line::failed(row.name, &e));
        }
        for l in &got {
            eprintln!("  {}", l.summary());
        }
        eprintln!("  ({:.1} s)", t.elapsed().as_secs_f64());
        lines.extend(got);
    }
    println!(
        "{header}; {:.0} s in all\n",
        started.elapsed().as_secs_f64()
    );
    if opts.markdown {
        print!("{}", report::markdown(&lines));
    } else {
        print!("{}", report::plain(&lines));
    }
    if lines.iter().any(|l| l.row.ends_with("FAILED")) {
        std::process::exit(1);
    }
}
