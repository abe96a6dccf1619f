//! ANSI escape sequences: logs keep them (the TUI renders colours); plain-text copies,
//! parsers and pipes get them removed.

use std::borrow::Cow;

/// Removes ANSI escape sequences: CSI `ESC [ … final`, OSC `ESC ] … BEL|ESC \`, `ESC ( B`
/// style designations and two-character escapes.
pub fn strip(s: &str) -> Cow<'_, str> {
    if !s.contains('\x1b') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\x1b' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('[') => {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            Some(']') => {
                while let Some(c) = chars.next() {
                    if c == '\x07' {
                        break;
                    }
                    if c == '\x1b' {
                        chars.next();
                        break;
                    }
                }
            }
            // `ESC ( B`: intermediates, then one final character.
            Some(' '..='/') => {
                for c in chars.by_ref() {
                    if !(' '..='/').contains(&c) {
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strip_removes_csi_osc_and_short_escapes() {
        let s = "\x1b[1;32mok\x1b[0m \x1b]8;;http://x\x07link\x1b]8;;\x1b\\ \x1b(Bend";
        assert_eq!(strip(s), "ok link end");
        assert!(matches!(strip("plain"), Cow::Borrowed("plain")));
    }
}
