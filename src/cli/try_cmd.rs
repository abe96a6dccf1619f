//! `baton try AGENT --prompt P [--branch B] [--keep BRANCH]`: the agent playground on the
//! command line. The log streams as it happens; then the handoff and the diff.

use super::{Failure, Outcome, exit, workspace};
use crate::engine::playground::{TryRequest, try_agent};
use crate::store::{StepState, Stream};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

/// The arguments of `baton try`.
#[derive(Debug, clap::Args)]
pub struct TryArgs {
    /// The agent profile id (`baton agents list`).
    pub agent: String,
    /// What to ask it (`-` reads stdin).
    #[arg(long)]
    pub prompt: String,
    /// The branch (or commit) to start from (default: the one checked out).
    #[arg(long, value_name = "B")]
    pub branch: Option<String>,
    /// Save the result as this new branch (only when the agent succeeds).
    #[arg(long, value_name = "BRANCH")]
    pub keep: Option<String>,
}

fn section(title: &str, color: bool) {
    if color {
        outln!("\n\x1b[1m── {title} ──\x1b[0m");
    } else {
        outln!("\n── {title} ──");
    }
}

/// Runs `baton try`.
pub fn run(dir: Option<&PathBuf>, args: TryArgs) -> Outcome {
    let ws = workspace(dir)?;
    let prompt = if args.prompt == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
            .map_err(|e| Failure::new(format!("cannot read the prompt from stdin: {e}")))?;
        s
    } else {
        args.prompt.clone()
    };
    let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let req = TryRequest {
        agent: args.agent.clone(),
        prompt,
        base: args.branch.clone(),
        keep: args.keep.clone(),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::new(format!("cannot start the async runtime: {e}")))?;
    let result = rt.block_on(async {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<(Stream, String)>(256);
        let printer = tokio::spawn(async move {
            while let Some((stream, line)) = rx.recv().await {
                let text = crate::ansi::sanitize(&line, color);
                let shown = match (stream, color) {
                    (Stream::Stderr, true) => format!("\x1b[31m│\x1b[0m {text}"),
                    (Stream::System, true) => format!("\x1b[2m{text}\x1b[0m"),
                    _ => text.into_owned(),
                };
                let _ = writeln!(std::io::stdout().lock(), "{shown}");
            }
        });
        let cancel = CancellationToken::new();
        let on_ctrl_c = cancel.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                on_ctrl_c.cancel();
            }
        });
        let result = try_agent(&ws, req, tx, cancel).await;
        let _ = printer.await;
        result
    });
    let result = result.map_err(Failure::new)?;
    section("ran in", color);
    outln!("{}", crate::ansi::sanitize(&result.ran_in, color));
    section("handoff (what the next agent would receive)", color);
    match &result.handoff {
        Some(h) => outln!("{}", crate::ansi::sanitize(h.trim_end(), color)),
        None => outln!("(none)"),
    }
    section("diff", color);
    match result.diff.as_deref() {
        Some("") => outln!("(no changes)"),
        Some(d) => outln!("{}", crate::ansi::sanitize(d, color)),
        None => outln!("(not a git repository: no diff)"),
    }
    section("result", color);
    outln!(
        "{} · would fire `{}` in a pipeline",
        result.state.as_str(),
        result.trigger
    );
    if let Some(e) = &result.error {
        outln!("{}", crate::ansi::sanitize(e, color));
    }
    match (&args.keep, result.state == StepState::Succeeded) {
        (Some(b), true) => outln!("kept the result as branch {b}"),
        (Some(b), false) => outln!("did not keep branch {b}: the agent did not succeed"),
        (None, _) => outln!("nothing was kept (add --keep BRANCH to save the result)"),
    }
    Ok(if result.state == StepState::Succeeded {
        exit::OK
    } else {
        exit::ERROR
    })
}
