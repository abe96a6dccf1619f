//! `D` and `baton diff` through the user's git pager (`GIT_PAGER`, `core.pager`, e.g.
//! delta) when one is set; `[board] diff = "popup"` in `keys.toml` keeps the popup.

use super::app::App;
use super::event::Diff;
use super::modal::Modal;
use std::io::Write;
use std::process::{Command, Stdio};

/// When the board pages diffs and the `D` popup waiting for task `task_id` got a diff: the
/// popup closes and the text goes to the pager. A reason for no diff stays in the popup.
pub(super) fn takes(app: &mut App, task_id: i64, result: &Result<Diff, String>) -> Option<String> {
    app.settings.diff_pager()?;
    let Ok(Diff::Text(text)) = result else {
        return None;
    };
    let waiting = matches!(app.modals.last(), Some(Modal::Diff(d)) if d.target.task_id == task_id);
    if !waiting {
        return None;
    }
    app.modals.pop();
    Some(text.clone())
}

/// Runs `pager` (a command line from the user's own git config, read by `sh` as git does)
/// with `text` on its standard input, and waits for it. The text is sanitised first: file
/// contents written by steps may hold escape sequences of their own.
pub fn page(pager: &str, text: &str) -> Result<(), String> {
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(pager).stdin(Stdio::piped());
    // Without `F`, a diff shorter than the screen stays until `q` rather than flashing by
    // before the board draws over it.
    if std::env::var_os("LESS").is_none() {
        cmd.env("LESS", "R");
    }
    if std::env::var_os("DELTA_PAGER").is_none() {
        cmd.env("DELTA_PAGER", "less -R");
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start the pager `{pager}`: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A pager quit before reading everything closes the pipe: not an error.
        let text = crate::ansi::sanitize(text, true);
        let _ = crate::exec::sigpipe::blocked(|| stdin.write_all(text.as_bytes()));
    }
    let status = child
        .wait()
        .map_err(|e| format!("the pager `{pager}` was lost: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "the pager `{pager}` failed ({status}) — set [board] diff = \"popup\" in keys.toml to keep the popup"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pager_reads_the_sanitised_diff() {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("paged");
        let pager = format!("cat > '{}'", out.display());
        page(&pager, "+added\n\x1b]0;title\x07-removed\n").expect("pager ran");
        let got = std::fs::read_to_string(&out).expect("paged text");
        assert!(
            got.contains("+added") && got.contains("-removed"),
            "{got:?}"
        );
        assert!(
            !got.contains("\x1b]0;"),
            "escape reached the pager: {got:?}"
        );
    }

    #[test]
    fn a_failing_pager_says_how_to_keep_the_popup() {
        let err = page("exit 3", "x").expect_err("fails");
        assert!(err.contains("diff = \"popup\""), "{err}");
    }
}
