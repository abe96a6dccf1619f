//! `baton attach ID`: take a task over in the agent's own UI. The agent CLI opens
//! interactively on the task's last session (the profile's `attach_argv`), in the folder its
//! step ran in, with its step's `BATON_*` environment; `$SHELL` opens instead when the agent
//! has no interactive resume. When the person quits it, the engine commits what the session
//! changed and records the takeover, and the task's next moves are printed.
//!
//! Inside tmux it opens a new window running `baton attach ID --here` there, so the process
//! that waits for the agent and records its end is the window's own: closing the window
//! (the agent gets SIGHUP) still records it. With `--signal CHANNEL` (the board's `T`) the
//! window wakes `tmux wait-for CHANNEL` once the takeover is recorded.

use super::{Failure, Outcome, exit};
use crate::engine::attach::Plan;
use crate::engine::{Action, Client, Order, Request};
use crate::workspace::Workspace;
use std::process::Command;

/// How `baton attach` runs.
#[derive(Debug, Clone, Default)]
pub struct AttachArgs {
    pub id: i64,
    /// Run in this terminal even inside tmux.
    pub here: bool,
    /// Wake `tmux wait-for CHANNEL` when done.
    pub signal: Option<String>,
    /// Started by the board: wait for Enter after a failure, so it can be read.
    pub board: bool,
    /// Wait for Enter before ending (a tmux window would close at once).
    pub hold: bool,
}

/// Reads the task's takeover plan from the store.
fn plan(ws: &Workspace, id: i64) -> Result<Plan, Failure> {
    let reader = crate::engine::Reader::open(ws).map_err(|e| Failure::new(e.to_string()))?;
    let agents = crate::agents::load_agents(Some(&ws.agents_dir()));
    let shell = crate::tui::launch::shell_argv();
    reader
        .attach_plan(ws, &agents, id, shell)
        .map_err(Failure::new)
}

/// `baton attach ID [--here]`.
pub fn run(ws: &Workspace, args: AttachArgs) -> Outcome {
    let id = args.id;
    // Who takes it over is decided first: a bad BATON_USER stops it before the agent opens.
    let planned = super::people::me(ws).and_then(|me| plan(ws, id).map(|p| (me, p)));
    let (me, plan) = match planned {
        Ok(p) => p,
        Err(f) => {
            // A window the board opened would close before the sentence could be read.
            if args.board || args.hold {
                eprintln!("baton: {}", f.message);
                hold();
            }
            wake(args.signal.as_deref());
            return Err(f);
        }
    };
    if !args.here && crate::tui::notify::in_tmux() {
        let mut argv = self_argv(ws, id)?;
        argv.push("--hold".into());
        open_window(&plan, &argv).map_err(Failure::new)?;
        outln!(
            "task {id}: opened a tmux window running {} in {}; when it ends, baton commits what it changed",
            what(&plan),
            plan.cwd.display()
        );
        return Ok(exit::OK);
    }
    let code = take_over(ws, id, &plan, me);
    wake(args.signal.as_deref());
    if args.hold || (args.board && code != exit::OK) {
        hold();
    }
    Ok(code)
}

/// Runs the plan here, records its end and prints the next moves; the exit code.
fn take_over(ws: &Workspace, id: i64, plan: &Plan, me: String) -> i32 {
    match &plan.instead {
        Some(why) => outln!("{why}"),
        None => outln!(
            "task {id}: opening {} in {}; quit it to hand the task back to baton",
            what(plan),
            plan.cwd.display()
        ),
    }
    let ran = foreground(plan);
    if let Err(e) = &ran {
        eprintln!("{e}");
    }
    let req = Request {
        task_id: id,
        action: Action::TakenOver {
            by: me.clone(),
            committed: None,
        },
        expected_status: None,
        actor: me,
    };
    match Client::for_command(ws).submit_blocking(Order::Act(req)) {
        Ok(s) => outln!("{}", s.answer.summary()),
        Err(e) => {
            eprintln!("task {id}: the takeover could not be recorded: {e}");
            return exit::ERROR;
        }
    }
    next_moves(ws, id);
    if ran.is_ok() { exit::OK } else { exit::ERROR }
}

/// "claude's session 1234" or the shell.
fn what(plan: &Plan) -> String {
    match &plan.session {
        Some((agent, session)) => format!("agent `{agent}` on session {session}"),
        None => plan.argv.first().cloned().unwrap_or_default(),
    }
}

/// This baton with `--dir` and `attach ID --here`, for a tmux window.
fn self_argv(ws: &Workspace, id: i64) -> Result<Vec<String>, Failure> {
    let exe = std::env::current_exe()
        .map_err(|e| Failure::new(format!("cannot find the baton program: {e}")))?;
    Ok(vec![
        exe.display().to_string(),
        "--dir".into(),
        ws.root().display().to_string(),
        "attach".into(),
        id.to_string(),
        "--here".into(),
    ])
}

/// The tmux window for a takeover: `argv` (baton itself) in the step's folder. Arguments
/// only; tmux runs them without a shell.
pub fn open_window(plan: &Plan, argv: &[String]) -> Result<(), String> {
    let env = crate::tui::launch::tmux_user_env();
    crate::tui::launch::tmux_window(&plan.cwd, &env, argv)
}

/// Runs the plan in this terminal until it ends. The agent has the terminal: Ctrl+C and a
/// closed window (SIGHUP) are its to handle, while this process waits to record the end.
fn foreground(plan: &Plan) -> Result<(), String> {
    let (program, args) = plan
        .argv
        .split_first()
        .ok_or_else(|| "nothing to run".to_string())?;
    let mut cmd = Command::new(program);
    cmd.args(args).current_dir(&plan.cwd).envs(plan.env.clone());
    for (k, _) in std::env::vars_os() {
        if k.to_str()
            .is_some_and(crate::exec::redact::is_engine_secret)
        {
            cmd.env_remove(k);
        }
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run {program}: {e} — is it installed and on PATH?"))?;
    ignore_terminal_signals();
    let status = child
        .wait()
        .map_err(|e| format!("waiting for {program} failed: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{program} ended with {status}"))
    }
}

/// From now on this process outlives Ctrl+C, Ctrl+\ and a closed terminal: set after the
/// child started, so the child keeps the default handling.
fn ignore_terminal_signals() {
    use nix::sys::signal::{SigHandler, Signal, signal};
    for s in [Signal::SIGINT, Signal::SIGQUIT, Signal::SIGHUP] {
        // SAFETY: installs no handler, only SIG_IGN, which touches no program state.
        if let Err(e) = unsafe { signal(s, SigHandler::SigIgn) } {
            tracing::warn!("cannot ignore {s}: {e}");
        }
    }
}

/// Prints the commands that move the task on from where it is now.
fn next_moves(ws: &Workspace, id: i64) {
    let Ok(reader) = crate::engine::Reader::open(ws) else {
        return;
    };
    let Ok(options) = reader.moves(id) else {
        return;
    };
    let mut lines: Vec<String> = Vec::new();
    for o in options.iter().filter(|o| o.allowed) {
        use crate::pipeline::Trigger;
        let line = match o.trigger {
            Trigger::Approve => format!("baton approve {id}"),
            Trigger::Reject => format!("baton reject {id} --note \"…\""),
            _ => format!("baton move {id} {}", o.to),
        };
        let label = o.label.as_deref().unwrap_or(&o.to);
        let line = format!("  {line:<32} {label}");
        if !lines.contains(&line) {
            lines.push(line);
        }
    }
    if let Ok(t) = reader.task(id)
        && matches!(
            t.state,
            crate::store::TaskState::Interrupted | crate::store::TaskState::Failed
        )
    {
        lines.push(format!("  baton resume {id:<25} run the step again"));
    }
    if lines.is_empty() {
        outln!("task {id} has no move to make from here; `baton show {id}` says where it is");
    } else {
        outln!("next:");
        for l in lines {
            outln!("{l}");
        }
    }
}

/// Wakes the board waiting on `tmux wait-for CHANNEL`.
fn wake(channel: Option<&str>) {
    if let Some(ch) = channel {
        let _ = Command::new("tmux").args(["wait-for", "-S", ch]).status();
    }
}

/// Keeps the terminal (a tmux window, the suspended board's screen) until Enter, so its
/// last lines can be read.
fn hold() {
    outln!("press Enter to close");
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
}
