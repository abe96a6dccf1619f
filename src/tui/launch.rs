//! From a card to its code: a shell, the editor or a `keys.toml` command in the task's
//! worktree, and the task's branch or path on the clipboard. The reducer decides what to
//! run (a [`Launch`]); the driver runs it with the board suspended (`suspend`).

use super::app::App;
use super::event::Effect;
use super::intent::Intent;
use std::path::PathBuf;

/// A `[[command]]` of `keys.toml`: a program run in the selected task's worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomCommand {
    /// The program and its arguments; `{{worktree}}`, `{{branch}}` and `{{id}}` are
    /// replaced inside each element, which stays one argument (no shell reads it).
    pub run: Vec<String>,
    /// What the `?` screen says it does.
    pub description: String,
}

/// A program to run for the selected task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    pub argv: Vec<String>,
    /// The task's worktree.
    pub cwd: PathBuf,
    /// Inside tmux, open it in a new window there instead of suspending the board.
    pub window: bool,
}

/// What a task offers to the launch keys: its id, worktree and branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub id: i64,
    pub worktree: String,
    pub branch: String,
}

impl Place {
    /// `{{worktree}}`, `{{branch}}` and `{{id}}` replaced in each element of `argv`; each
    /// element stays one argument whatever the values hold.
    pub fn fill(&self, argv: &[String]) -> Vec<String> {
        argv.iter()
            .map(|a| {
                a.replace("{{worktree}}", &self.worktree)
                    .replace("{{branch}}", &self.branch)
                    .replace("{{id}}", &self.id.to_string())
            })
            .collect()
    }
}

/// The user's shell (`$SHELL`, else `/bin/sh`).
pub fn shell_argv() -> Vec<String> {
    let shell = std::env::var("SHELL")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "/bin/sh".into());
    vec![shell]
}

/// `-e BATON_USER=…` when it is set: a tmux window gets the server's environment, not this
/// process's, and the history should name the same person. Nothing else is passed on the
/// command line (it is visible to other users of the machine).
pub fn tmux_user_env() -> Vec<String> {
    match std::env::var("BATON_USER") {
        Ok(u) if !u.trim().is_empty() => vec!["-e".into(), format!("BATON_USER={u}")],
        _ => Vec::new(),
    }
}

/// Opens a tmux window running `argv` in `cwd`, with `env` (`-e NAME=VALUE` pairs) set in
/// it. Arguments only: tmux runs them without a shell.
pub fn tmux_window(cwd: &std::path::Path, env: &[String], argv: &[String]) -> Result<(), String> {
    let out = std::process::Command::new("tmux")
        .arg("new-window")
        .arg("-c")
        .arg(cwd)
        .args(env)
        .arg("--")
        .args(argv)
        .output()
        .map_err(|e| format!("cannot run tmux: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "tmux new-window failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The user's editor on the current folder: `$VISUAL`, else `$EDITOR`, else `vi`. The
/// variable may carry flags (`code -w`), split on spaces as git does for simple values.
pub fn editor_argv() -> Vec<String> {
    let editor = ["VISUAL", "EDITOR"]
        .iter()
        .filter_map(|v| std::env::var(v).ok())
        .find(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "vi".into());
    let mut argv: Vec<String> = editor.split_whitespace().map(String::from).collect();
    argv.push(".".into());
    argv
}

/// The bytes that put `text` on the clipboard of the terminal (OSC 52), wrapped for tmux
/// passthrough inside tmux. Only baton's own text (a branch, a path) is ever copied.
pub fn osc52(text: &str, tmux: bool) -> String {
    let seq = format!("\x1b]52;c;{}\x07", base64(text.as_bytes()));
    if tmux {
        format!("\x1bPtmux;{}\x1b\\", seq.replace('\x1b', "\x1b\x1b"))
    } else {
        seq
    }
}

/// Standard base64 with padding (the alphabet OSC 52 expects).
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

impl App {
    /// The selected task's worktree and branch, or why there is none (said in the status
    /// line).
    fn place(&mut self) -> Option<Place> {
        let Some(card) = self.board.selected_card() else {
            self.say("no task selected", true);
            return None;
        };
        let id = card.id;
        let task = self.detail.as_ref().map(|d| &d.task).filter(|t| t.id == id);
        let Some(task) = task else {
            self.say(format!("task {id} is still loading — try again"), true);
            return None;
        };
        match (&task.worktree, &task.branch) {
            (Some(w), branch) => Some(Place {
                id,
                worktree: w.clone(),
                branch: branch.clone().unwrap_or_default(),
            }),
            (None, Some(b)) => {
                self.say(
                    format!(
                        "task {id} has no worktree now (removed when it ended); its branch is {b}"
                    ),
                    true,
                );
                None
            }
            (None, None) => {
                self.say(
                    format!("task {id} has no worktree yet — one is made when a step runs"),
                    true,
                );
                None
            }
        }
    }

    /// `o`, `E`, `y`, `Y` and the `keys.toml` commands.
    pub(super) fn launch_action(&mut self, action: Intent) {
        let Some(place) = self.place() else { return };
        let cwd = PathBuf::from(&place.worktree);
        let launch = |argv: Vec<String>, window: bool| {
            Effect::Launch(Launch {
                argv,
                cwd: cwd.clone(),
                window,
            })
        };
        match action {
            Intent::Shell => self.effect(launch(shell_argv(), true)),
            Intent::Editor => self.effect(launch(editor_argv(), false)),
            Intent::Custom(i) => match self.settings.commands.get(usize::from(i)) {
                Some(c) if !c.run.is_empty() => {
                    let argv = place.fill(&c.run);
                    self.effect(launch(argv, false));
                }
                _ => self.say("that command is not defined in keys.toml", true),
            },
            Intent::CopyBranch if place.branch.is_empty() => {
                self.say(format!("task {} has no branch", place.id), true)
            }
            Intent::CopyBranch => {
                self.say(format!("copied {}", place.branch), false);
                self.effect(Effect::Copy(place.branch));
            }
            Intent::CopyPath => {
                self.say(format!("copied {}", place.worktree), false);
                self.effect(Effect::Copy(place.worktree));
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_fill_each_argument_and_never_split_it() {
        let place = Place {
            id: 7,
            worktree: "/w/x y; rm -rf ~".into(),
            branch: "baton/7-fix".into(),
        };
        let argv = place.fill(&[
            "tool".into(),
            "--dir={{worktree}}".into(),
            "{{branch}}@{{id}}".into(),
        ]);
        assert_eq!(
            argv,
            ["tool", "--dir=/w/x y; rm -rf ~", "baton/7-fix@7"].map(String::from)
        );
    }

    #[test]
    fn osc52_carries_base64_of_the_text() {
        assert_eq!(
            osc52("baton/3-fix", false),
            "\x1b]52;c;YmF0b24vMy1maXg=\x07"
        );
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(base64(b"abc"), "YWJj");
        assert_eq!(base64(b""), "");
        assert_eq!(
            osc52("a", true),
            "\x1bPtmux;\x1b\x1b]52;c;YQ==\x07\x1b\\",
            "doubled ESC inside a tmux passthrough"
        );
    }
}
