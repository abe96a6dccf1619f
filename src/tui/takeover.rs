//! `T`: take a task over in the agent's own UI. The board runs `baton attach ID --here`
//! (one code path with the CLI: the plan, the agent, and recording its end): in a new tmux
//! window inside tmux, which wakes the board through `tmux wait-for` once the takeover is
//! recorded; otherwise in the foreground with the board suspended. Then the move menu opens
//! on the task, for its next move.

use super::app::App;
use super::event::{AppEvent, Effect};
use super::modal::{Modal, MoveMenu, Target};
use super::suspend::{InputGate, suspended};
use super::terminal::Screen;
use crate::store::TaskState;
use crate::workspace::Workspace;
use std::path::{Path, PathBuf};
use std::process::Command;
use tokio::sync::mpsc::UnboundedSender;

impl App {
    /// `T` on the selected task: refused plainly while its step runs or when it has no
    /// worktree.
    pub(super) fn take_over(&mut self) {
        let Some(card) = self.board.selected_card() else {
            self.say("no task selected", true);
            return;
        };
        let id = card.id;
        let Some(task) = self.detail.as_ref().map(|d| &d.task).filter(|t| t.id == id) else {
            self.say(format!("task {id} is still loading — try again"), true);
            return;
        };
        // Whether the folder still exists is the driver's to find out.
        if let Some(why) = crate::engine::takeover::refusal_given(task, true) {
            self.say(why, true);
            return;
        }
        let cwd = PathBuf::from(task.worktree.clone().unwrap_or_default());
        self.effect(Effect::TakeOver { task_id: id, cwd });
    }

    /// The takeover of `task_id` ended: its next move is offered (the move menu).
    pub(super) fn taken_over(&mut self, task_id: i64, result: Result<(), String>) {
        self.effect(Effect::LoadBoard);
        self.effect(Effect::LoadTask(task_id));
        if let Err(e) = result {
            self.say(e, true);
            return;
        }
        let Some(card) = self.board.cards.iter().find(|c| c.id == task_id) else {
            self.say(format!("task {task_id}: the takeover ended"), false);
            return;
        };
        // A failed or interrupted task moves on by resume or retry, a finished one not at
        // all: the move menu would only say "no moves from here".
        let state = card.state;
        match state {
            TaskState::Failed | TaskState::Interrupted => {
                self.say(
                    format!("task {task_id}: the takeover ended — R resumes its step, F retries from scratch"),
                    false,
                );
                return;
            }
            TaskState::Done | TaskState::Cancelled => {
                self.say(format!("task {task_id}: the takeover ended"), false);
                return;
            }
            _ => {}
        }
        let target = Target {
            task_id,
            status: card.status.clone(),
            title: card.title.clone(),
        };
        self.say(
            format!("task {task_id}: the takeover ended — choose its next move (Esc leaves it where it is)"),
            false,
        );
        self.effect(Effect::LoadMoves(task_id));
        self.modals.retain(|m| !matches!(m, Modal::Move(_)));
        self.modals.push(Modal::Move(MoveMenu {
            target,
            options: None,
            cursor: 0,
        }));
    }
}

/// `baton attach ID --here --board` for this workspace, run by the board.
fn attach_argv(ws: &Workspace, task_id: i64) -> Result<Vec<String>, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the baton program: {e}"))?;
    Ok(vec![
        exe.display().to_string(),
        "--dir".into(),
        ws.root().display().to_string(),
        "attach".into(),
        task_id.to_string(),
        "--here".into(),
        "--board".into(),
    ])
}

/// Runs the takeover of `task_id`; the sentence for the status line. Its end arrives as
/// [`AppEvent::TakenOver`] on `tx`.
pub fn run(
    screen: &mut Screen,
    gate: &InputGate,
    ws: &Workspace,
    task_id: i64,
    cwd: &Path,
    tmux: bool,
    tx: &UnboundedSender<AppEvent>,
) -> Result<String, String> {
    if !cwd.is_dir() {
        return Err(format!(
            "task {task_id}'s worktree {} is gone",
            cwd.display()
        ));
    }
    let mut argv = attach_argv(ws, task_id)?;
    if tmux {
        // One channel per takeover: the window wakes it once the end is recorded.
        let channel = format!(
            "baton-takeover-{}-{task_id}-{}",
            std::process::id(),
            crate::store::now_ms()
        );
        argv.extend(["--signal".to_string(), channel.clone()]);
        super::launch::tmux_window(cwd, &super::launch::tmux_user_env(), &argv)?;
        let tx = tx.clone();
        let spawned = std::thread::Builder::new()
            .name("baton-takeover".into())
            .spawn(move || {
                let waited = Command::new("tmux").args(["wait-for", &channel]).status();
                let result = match waited {
                    Ok(s) if s.success() => Ok(()),
                    Ok(s) => Err(format!(
                        "waiting for task {task_id}'s takeover window failed ({s})"
                    )),
                    Err(e) => Err(format!(
                        "cannot wait for task {task_id}'s takeover window: {e}"
                    )),
                };
                let _ = tx.send(AppEvent::TakenOver { task_id, result });
            });
        if let Err(e) = spawned {
            tracing::warn!("cannot wait for the takeover window: {e}");
        }
        return Ok(format!(
            "task {task_id}: taken over in a new tmux window; when it ends, its changes are committed and the board offers the next move"
        ));
    }
    let (program, args) = argv.split_first().ok_or("nothing to run")?;
    let status = suspended(screen, gate, || {
        Command::new(program).args(args).current_dir(cwd).status()
    });
    let result = match status {
        Ok(s) if s.success() => Ok(()),
        Ok(_) => Err(format!(
            "task {task_id}: the takeover did not end cleanly — `baton show {task_id}` says what was recorded"
        )),
        Err(e) => Err(format!("cannot run baton attach: {e}")),
    };
    let said = match &result {
        Ok(()) => Ok(format!("task {task_id}: back from the takeover")),
        Err(e) => Err(e.clone()),
    };
    let _ = tx.send(AppEvent::TakenOver { task_id, result });
    said
}
