//! The board's own settings, read from `keys.toml` beside the key bindings: `[board]`
//! options and `[[command]]` entries (programs a key runs in the selected task's worktree,
//! like lazygit's custom commands or k9s plugins).
//!
//! ```toml
//! [board]
//! mouse = true        # the wheel scrolls logs and lists
//! diff = "popup"      # keep `D` in the board even when git has a pager
//!
//! [[command]]
//! key = "G"
//! run = ["lazygit"]
//! description = "lazygit in the worktree"
//! ```

use super::intent::Intent;
use super::keymap::{Binding, Ctx, key_name};
use super::keys_file::parse_key;
use super::launch::CustomCommand;

/// What the board reads from `keys.toml` besides key bindings, plus the pager it found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BoardSettings {
    /// The mouse wheel scrolls the log and the lists.
    pub mouse: bool,
    /// `D` shows its popup even when a pager is set.
    pub diff_popup: bool,
    /// The user's git pager (`GIT_PAGER`, `core.pager`), when one is set.
    pub pager: Option<String>,
    /// `[[command]]` entries, in file order (`Intent::Custom(i)` runs the i-th).
    pub commands: Vec<CustomCommand>,
}

impl BoardSettings {
    /// The pager `D` goes through: none when `diff = "popup"`.
    pub fn diff_pager(&self) -> Option<&str> {
        self.pager.as_deref().filter(|_| !self.diff_popup)
    }
}

/// Reads `[board]` and `[[command]]` of one parsed `keys.toml` (`file` names it in
/// warnings) into `settings`, adding a binding per command to `table`.
pub fn apply(
    table: &mut Vec<Binding>,
    settings: &mut BoardSettings,
    file: &str,
    doc: &toml::Table,
) -> Vec<String> {
    let mut warnings = Vec::new();
    if let Some(board) = doc.get("board") {
        let Some(board) = board.as_table() else {
            warnings.push(format!("{file}: `board` must be a table: [board]"));
            return warnings;
        };
        for (k, v) in board {
            match (k.as_str(), v) {
                ("mouse", toml::Value::Boolean(b)) => settings.mouse = *b,
                ("diff", toml::Value::String(s)) if s == "popup" || s == "pager" => {
                    settings.diff_popup = s == "popup";
                }
                ("mouse", _) => warnings.push(format!("{file}: [board] mouse is true or false")),
                ("diff", _) => {
                    warnings.push(format!("{file}: [board] diff is \"pager\" or \"popup\""))
                }
                (other, _) => warnings.push(format!(
                    "{file}: [board] has no setting `{other}` (it has mouse and diff)"
                )),
            }
        }
    }
    let Some(commands) = doc.get("command") else {
        return warnings;
    };
    let Some(commands) = commands.as_array() else {
        warnings.push(format!(
            "{file}: commands are written [[command]], one table each"
        ));
        return warnings;
    };
    for (n, entry) in commands.iter().enumerate() {
        let at = format!("{file}: [[command]] number {}", n + 1);
        match command(entry) {
            Ok((key, cmd)) => {
                let Ok(index) = u8::try_from(settings.commands.len()) else {
                    warnings.push(format!(
                        "{at}: more than 256 commands; the rest are ignored"
                    ));
                    break;
                };
                let (code, mods) = key;
                // Descriptions live as long as the bindings table: for the whole process.
                let desc: &'static str = Box::leak(cmd.description.clone().into_boxed_str());
                let new = Binding {
                    ctx: Ctx::Task,
                    code,
                    mods,
                    action: Intent::Custom(index),
                    desc,
                };
                if let Some(i) = table
                    .iter()
                    .position(|b| b.ctx == Ctx::Task && b.code == code && b.mods == mods)
                {
                    let old = table.remove(i);
                    warnings.push(format!(
                        "{at}: `{}` was `{}`; it now runs the command",
                        key_name(&new),
                        old.desc
                    ));
                }
                table.push(new);
                settings.commands.push(cmd);
            }
            Err(why) => warnings.push(format!("{at}: {why} — it is ignored")),
        }
    }
    warnings
}

type Key = (crossterm::event::KeyCode, crossterm::event::KeyModifiers);

/// One `[[command]]` table: its key and what it runs.
fn command(entry: &toml::Value) -> Result<(Key, CustomCommand), String> {
    let t = entry
        .as_table()
        .ok_or("each [[command]] is a table with key and run")?;
    let key_text = t
        .get("key")
        .and_then(|v| v.as_str())
        .ok_or("it needs key = \"…\" (like \"G\" or \"ctrl+g\")")?;
    let key = parse_key(key_text).ok_or_else(|| format!("`{key_text}` is not a key"))?;
    let run: Vec<String> = match t.get("run") {
        Some(toml::Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(String::from))
            .collect::<Option<_>>()
            .ok_or("run is a list of strings: [\"lazygit\"]")?,
        // A plain string is split on spaces; quotes are not read (write a list for those).
        Some(toml::Value::String(s)) => s.split_whitespace().map(String::from).collect(),
        _ => return Err("it needs run = [\"program\", \"arg\", …]".into()),
    };
    if run.is_empty() {
        return Err("run is empty".into());
    }
    if let Some(other) = t
        .keys()
        .find(|k| !["key", "run", "description"].contains(&k.as_str()))
    {
        return Err(format!(
            "it has no field `{other}` (it has key, run, description)"
        ));
    }
    let description = t
        .get("description")
        .and_then(|v| v.as_str())
        .map(String::from)
        .unwrap_or_else(|| format!("run {} in the worktree", run.join(" ")));
    Ok((key, CustomCommand { run, description }))
}

/// The pager git would use for a diff here: `GIT_PAGER`, else `core.pager`; none when
/// unset, empty or `cat`. (`PAGER` alone is not taken: it is set on most systems without
/// anyone choosing it for diffs.)
pub fn git_pager(repo: &std::path::Path) -> Option<String> {
    let from_env = std::env::var("GIT_PAGER").ok();
    let pager = from_env.or_else(|| {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(["config", "--get", "core.pager"])
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    })?;
    let pager = pager.trim().to_string();
    (!pager.is_empty() && pager != "cat").then_some(pager)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::keymap::{BINDINGS, lookup};
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    fn read(text: &str) -> (Vec<Binding>, BoardSettings, Vec<String>) {
        let mut table = BINDINGS.to_vec();
        let mut settings = BoardSettings::default();
        let doc: toml::Table = toml::from_str(text).expect("toml");
        let w = apply(&mut table, &mut settings, "keys.toml", &doc);
        (table, settings, w)
    }

    #[test]
    fn a_command_gets_its_key_and_the_help_line() {
        let (table, settings, w) = read(
            "[[command]]\nkey = \"G\"\nrun = [\"lazygit\"]\n\n\
             [[command]]\nkey = \"ctrl+o\"\nrun = \"code .\"\ndescription = \"VS Code\"\n",
        );
        assert!(w.is_empty(), "{w:?}");
        let ctxs = [Ctx::Board, Ctx::Task, Ctx::Global];
        let g = KeyEvent::new(KeyCode::Char('G'), KeyModifiers::NONE);
        assert_eq!(lookup(&table, &ctxs, &g), Some(Intent::Custom(0)));
        let o = KeyEvent::new(KeyCode::Char('o'), KeyModifiers::CONTROL);
        assert_eq!(lookup(&table, &ctxs, &o), Some(Intent::Custom(1)));
        assert_eq!(settings.commands[1].run, ["code", "."]);
        assert_eq!(
            settings.commands[0].description,
            "run lazygit in the worktree"
        );
        let help = crate::tui::keymap::help_sections_for(&table);
        let task = &help.iter().find(|(c, _)| *c == Ctx::Task).expect("task").1;
        assert!(task.contains(&("ctrl+o".into(), "VS Code")), "{task:?}");
    }

    #[test]
    fn a_command_taking_a_default_key_warns_and_bad_entries_are_named() {
        let (table, settings, w) = read(
            "[[command]]\nkey = \"D\"\nrun = [\"tig\"]\n\n\
             [[command]]\nrun = [\"x\"]\n\n\
             [[command]]\nkey = \"Q\"\nrun = [\"x\"]\nrun_in = \"y\"\n\n\
             [board]\nmouse = true\ndiff = \"popup\"\nmose = 1\n",
        );
        let ctxs = [Ctx::Task];
        let d = KeyEvent::new(KeyCode::Char('D'), KeyModifiers::NONE);
        assert_eq!(lookup(&table, &ctxs, &d), Some(Intent::Custom(0)));
        assert_eq!(settings.commands.len(), 1);
        assert!(settings.mouse && settings.diff_popup);
        assert_eq!(w.len(), 4, "{w:?}");
        for want in [
            "`D` was `diff of the task's worktree`",
            "number 2: it needs key",
            "number 3: it has no field `run_in`",
            "no setting `mose`",
        ] {
            assert!(w.iter().any(|w| w.contains(want)), "{want}: {w:?}");
        }
    }

    #[test]
    fn the_popup_setting_wins_over_a_pager() {
        let mut s = BoardSettings {
            pager: Some("delta".into()),
            ..Default::default()
        };
        assert_eq!(s.diff_pager(), Some("delta"));
        s.diff_popup = true;
        assert_eq!(s.diff_pager(), None);
    }
}
