//! The one sanitiser for text that reaches a terminal: step output, task titles, prompts,
//! notes, errors. Steps and whoever can create a task may print anything, so only SGR colour
//! sequences pass (and only where colour is on); every other escape sequence and control
//! character is dropped.

use std::borrow::Cow;

/// `s` made safe for a terminal.
///
/// - With `colour`, SGR sequences (`ESC [ 1;32 m`) are kept; without, they are dropped too.
/// - Every other escape sequence is dropped whole: other CSI (cursor moves, clear screen),
///   OSC (window title, clipboard, hyperlinks), DCS, SOS, PM, APC and two-character escapes,
///   in their 7-bit (`ESC ]`) and 8-bit (U+009D) forms.
/// - C0 controls other than tab and newline, DEL and the C1 controls (U+0080–U+009F) are
///   dropped.
/// - A carriage return redraws its line on a terminal, so of each line only the text after
///   the last carriage return that is followed by text is kept: a progress bar shows its last
///   state.
pub fn sanitize(s: &str, colour: bool) -> Cow<'_, str> {
    if !s.chars().any(needs_work) {
        return Cow::Borrowed(s);
    }
    let tokens = tokenize(s, colour);
    let mut out = String::with_capacity(s.len());
    // Per line: the segments between carriage returns, and the colours set in dropped ones.
    let mut line: Vec<Vec<Token>> = vec![Vec::new()];
    for (_, token) in tokens {
        match token {
            Token::Char('\n') => {
                flush_line(&mut out, std::mem::replace(&mut line, vec![Vec::new()]));
                out.push('\n');
            }
            Token::Char('\r') => line.push(Vec::new()),
            t => line.last_mut().expect("never empty").push(t),
        }
    }
    flush_line(&mut out, line);
    Cow::Owned(out)
}

/// The sanitiser without colour: plain text for pipes, parsers and files.
pub fn strip(s: &str) -> Cow<'_, str> {
    sanitize(s, false)
}

/// True for a character the fast path cannot pass through as it is.
fn needs_work(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

/// The Unicode characters that change a line's layout without being control characters:
/// the line and paragraph separators (U+2028, U+2029), which a terminal draws at a width
/// its cells were not laid out for, and the bidirectional embeddings, overrides and
/// isolates (U+202A–U+202E, U+2066–U+2069), which reorder what follows them. A one-line
/// title may not hold them; logs and diffs keep them, as the text they belong to.
pub fn is_layout_format(c: char) -> bool {
    matches!(c, '\u{2028}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

#[derive(Debug)]
enum Token<'a> {
    Char(char),
    Sgr(&'a str),
}

/// Writes the visible state of one line: the text of its last segment that has any, and the
/// colours of every segment (so a colour set in an overwritten state still applies).
fn flush_line(out: &mut String, segments: Vec<Vec<Token>>) {
    let last = segments
        .iter()
        .rposition(|seg| seg.iter().any(|t| matches!(t, Token::Char(_))))
        .unwrap_or(0);
    for (i, seg) in segments.iter().enumerate() {
        for t in seg {
            match t {
                Token::Sgr(sgr) => out.push_str(sgr),
                Token::Char(c) if i == last => out.push(*c),
                Token::Char(_) => {}
            }
        }
    }
}

/// The characters of `s` that a terminal would show, each with its byte offset in `s`:
/// every escape sequence and control character (but `\t`, `\n` and `\r`) left out.
pub fn visible_chars(s: &str) -> Vec<(usize, char)> {
    tokenize(s, false)
        .into_iter()
        .filter_map(|(at, t)| match t {
            Token::Char(c) => Some((at, c)),
            Token::Sgr(_) => None,
        })
        .collect()
}

/// Splits `s` into the characters and SGR sequences that survive, each with its byte
/// offset; `\r` and `\n` are kept for [`sanitize`] to lay out.
fn tokenize(s: &str, colour: bool) -> Vec<(usize, Token<'_>)> {
    let mut out = Vec::new();
    let mut it = s.char_indices().peekable();
    while let Some((start, c)) = it.next() {
        match c {
            '\x1b' => match it.peek().map(|&(_, c)| c) {
                Some('[') => {
                    it.next();
                    if let Some(end) = csi(&mut it)
                        && colour
                        && is_sgr(&s[start + 2..=end])
                    {
                        out.push((start, Token::Sgr(&s[start..=end])));
                    }
                }
                Some(']' | 'P' | 'X' | '^' | '_') => {
                    it.next();
                    control_string(&mut it);
                }
                // `ESC ( B` and friends: intermediates, then one final character.
                Some(' '..='/') => {
                    while it.next_if(|&(_, c)| (' '..='/').contains(&c)).is_some() {}
                    it.next_if(|&(_, c)| ('0'..='~').contains(&c));
                }
                // Two-character escapes (`ESC c` resets the terminal).
                Some('0'..='~') => {
                    it.next();
                }
                _ => {}
            },
            '\u{9b}' => {
                csi(&mut it);
            }
            '\u{90}' | '\u{98}' | '\u{9d}' | '\u{9e}' | '\u{9f}' => control_string(&mut it),
            '\n' | '\r' | '\t' => out.push((start, Token::Char(c))),
            c if c.is_control() => {}
            c => out.push((start, Token::Char(c))),
        }
    }
    out
}

/// Consumes a CSI sequence after its introducer; returns the byte index of its final
/// character, or `None` when it was cut short (the partial sequence is dropped).
fn csi(it: &mut std::iter::Peekable<std::str::CharIndices<'_>>) -> Option<usize> {
    while let Some(&(i, c)) = it.peek() {
        match c {
            '0'..='?' | ' '..='/' => {
                it.next();
            }
            '@'..='~' => {
                it.next();
                return Some(i);
            }
            // Anything else ends the sequence without consuming it.
            _ => return None,
        }
    }
    None
}

/// SGR: only digits, `;` and `:` between `ESC [` and `m` (no private markers or
/// intermediates, which make other sequences that also end in `m`).
fn is_sgr(body: &str) -> bool {
    body.strip_suffix('m').is_some_and(|p| {
        p.chars()
            .all(|c| c.is_ascii_digit() || c == ';' || c == ':')
    })
}

/// Consumes an OSC, DCS, SOS, PM or APC body up to its terminator: BEL, `ESC \` or U+009C.
/// An unterminated one runs to the end of the text, as on a terminal.
fn control_string(it: &mut std::iter::Peekable<std::str::CharIndices<'_>>) {
    while let Some((_, c)) = it.next() {
        match c {
            '\x07' | '\u{9c}' => return,
            '\x1b' => {
                it.next_if(|&(_, c)| c == '\\');
                return;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_characters_are_text_and_kept() {
        // Logs and diffs of right-to-left text hold them; only a title refuses them.
        let s = "a\u{202E}b\u{2028}c\u{200F}";
        assert!(matches!(strip(s), Cow::Borrowed(_)));
        assert!(is_layout_format('\u{2028}') && is_layout_format('\u{2067}'));
        assert!(!is_layout_format('\u{200F}') && !is_layout_format('\u{202F}'));
    }

    #[test]
    fn strip_removes_csi_osc_and_short_escapes() {
        let s = "\x1b[1;32mok\x1b[0m \x1b]8;;http://x\x07link\x1b]8;;\x1b\\ \x1b(Bend";
        assert_eq!(strip(s), "ok link end");
        assert!(matches!(strip("plain"), Cow::Borrowed("plain")));
    }

    #[test]
    fn colour_keeps_sgr_and_nothing_else() {
        let s = "\x1b[1;32mgreen\x1b[0m \x1b[38:2:1:2:3mrgb\x1b[m";
        assert_eq!(sanitize(s, true), s);
        assert_eq!(sanitize(s, false), "green rgb");
        // Not SGR though they end in `m`: private marker, intermediate.
        assert_eq!(sanitize("a\x1b[>4;2mb\x1b[1 mc", true), "abc");
    }

    #[test]
    fn hostile_sequences_are_dropped_whole() {
        let cases = [
            ("x\x1b]52;c;ZXZpbA==\x07y", "xy"),        // OSC 52: clipboard
            ("x\x1b]0;PWNED\x1b\\y", "xy"),            // OSC 0: window title, ST-terminated
            ("x\x1b[2Jy\x1b[Hz", "xyz"),               // clear screen, cursor home
            ("x\x1bPq#0;2;0;0;0\x1b\\y", "xy"),        // DCS (sixel)
            ("x\x1b]8;;http://evil\x07y", "xy"),       // OSC 8 hyperlink
            ("x\x1b_apc\x1b\\y\x1b^pm\x07z", "xyz"),   // APC, PM
            ("x\u{9b}2Jy", "xy"),                      // 8-bit CSI
            ("x\u{9d}0;title\u{9c}y", "xy"),           // 8-bit OSC and ST
            ("x\u{90}dcs\u{9c}y\u{85}z", "xyz"),       // 8-bit DCS, NEL
            ("a\x07b\x08c\x00d\x7fe\x1bcf", "abcdef"), // BEL, BS, NUL, DEL, RIS
            ("tab\tkept", "tab\tkept"),
            ("x\x1b]0;never ends", "x"),
        ];
        for (input, want) in cases {
            assert_eq!(sanitize(input, true), want, "{input:?} with colour");
            assert_eq!(sanitize(input, false), want, "{input:?} without colour");
        }
    }

    #[test]
    fn carriage_returns_show_the_last_state_of_the_line() {
        assert_eq!(sanitize("10%\r50%\r100%\r", false), "100%");
        assert_eq!(sanitize("a\r\nb\rc\n", false), "a\nc\n");
        assert_eq!(sanitize("done\r\x1b[K", false), "done");
        // The colour set by an overwritten state still applies.
        assert_eq!(
            sanitize("\x1b[32m10%\r100%\x1b[0m", true),
            "\x1b[32m100%\x1b[0m"
        );
    }
}
