//! Getting a person's attention: the terminal bell plus OSC 777 and OSC 9 desktop
//! notifications, wrapped for tmux passthrough when running inside tmux.

/// The bytes that ring the bell and post a notification with `title` and `body`.
pub fn sequence(title: &str, body: &str, tmux: bool) -> String {
    // Task titles land inside an OSC here: sanitised, on one line, and without the `;`
    // that separates the notification's fields.
    let clean = |s: &str| -> String {
        crate::ansi::strip(s)
            .chars()
            .filter(|c| !c.is_control())
            .map(|c| if c == ';' { ',' } else { c })
            .collect()
    };
    let (title, body) = (clean(title), clean(body));
    // Inside tmux the OSCs end with ST, not BEL: tmux 3.3a's server crashes on a
    // passthrough OSC 777 that ends with BEL (seen here; it takes every session with it).
    let end = if tmux { "\x1b\\" } else { "\x07" };
    let osc777 = format!("\x1b]777;notify;{title};{body}{end}");
    let osc9 = format!("\x1b]9;{title}: {body}{end}");
    let wrap = |seq: String| {
        if tmux {
            // tmux passes a DCS payload through with every ESC doubled.
            format!("\x1bPtmux;{}\x1b\\", seq.replace('\x1b', "\x1b\x1b"))
        } else {
            seq
        }
    };
    format!("\x07{}{}", wrap(osc777), wrap(osc9))
}

/// True inside tmux.
pub fn in_tmux() -> bool {
    std::env::var_os("TMUX").is_some_and(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_terminal_gets_bell_and_both_oscs() {
        let s = sequence("baton: task 3 failed", "Fix; the bug\n", false);
        assert_eq!(
            s,
            "\x07\x1b]777;notify;baton: task 3 failed;Fix, the bug\x07\x1b]9;baton: task 3 failed: Fix, the bug\x07"
        );
    }

    #[test]
    fn task_text_cannot_end_the_notification_or_smuggle_sequences() {
        let s = sequence("t", "a\x1b]0;PWNED\x07b\u{9b}2Jc\x1b\\d", false);
        assert_eq!(s, "\x07\x1b]777;notify;t;abcd\x07\x1b]9;t: abcd\x07");
    }

    #[test]
    fn tmux_wraps_each_osc_for_passthrough() {
        let s = sequence("t", "b", true);
        assert_eq!(
            s,
            "\x07\x1bPtmux;\x1b\x1b]777;notify;t;b\x1b\x1b\\\x1b\\\x1bPtmux;\x1b\x1b]9;t: b\x1b\x1b\\\x1b\\"
        );
    }
}
