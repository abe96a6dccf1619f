//! Line/column lookup for elements of an already-parsed JSON document.
//!
//! `serde_json::Value` keeps no positions, so once a file has a problem to place, its text
//! is scanned once more for where every value and every object key starts, keyed by JSON
//! pointer (`/transitions/3/to`). Every file is scanned for keys given twice in one object,
//! which JSON readers keep silently, by the same scanner keeping no positions. It trusts
//! that the text is valid JSON (serde_json said so) but never panics or loops on text that
//! is not.

use std::collections::HashMap;

/// A 1-based line and column (columns count characters, not bytes).
pub(crate) type Pos = (usize, usize);

/// Where each value and key of a JSON document starts.
#[derive(Debug, Default)]
pub(crate) struct Locator {
    values: HashMap<String, Pos>,
    keys: HashMap<String, Pos>,
    /// Keys met twice in one object: the key and where the later one starts.
    duplicates: Vec<(String, Pos)>,
}

impl Locator {
    /// Scans `text` (expected to be valid JSON) and records every position.
    pub(crate) fn new(text: &str) -> Self {
        Scan::run(text, true)
    }

    /// Only the keys met twice in one object, with where each later one starts: not the
    /// positions of everything else, which only a file with a problem needs.
    pub(crate) fn duplicates_in(text: &str) -> Vec<(String, Pos)> {
        Scan::run(text, false).duplicates
    }

    /// The start of the value at `ptr`, or of its nearest located ancestor.
    pub(crate) fn value(&self, ptr: &str) -> Option<Pos> {
        let mut p = ptr;
        loop {
            if let Some(pos) = self.values.get(p) {
                return Some(*pos);
            }
            p = &p[..p.rfind('/')?];
        }
    }

    /// The start of the key that names the member at `ptr` (falls back to `value`).
    pub(crate) fn key(&self, ptr: &str) -> Option<Pos> {
        self.keys.get(ptr).copied().or_else(|| self.value(ptr))
    }
}

/// Where serde_json says `text` stopped being JSON, as people count it: serde_json counts the
/// column in bytes, and as 0 right after a newline; this is the 1-based column in
/// characters of the character holding that byte. `None` when serde_json gave no line.
pub(crate) fn json_error_position(text: &str, e: &serde_json::Error) -> Option<Pos> {
    let line = e.line().checked_sub(1)?;
    let line_text = text.split('\n').nth(line).unwrap_or_default();
    let mut end = e.column().min(line_text.len());
    while !line_text.is_char_boundary(end) {
        end += 1;
    }
    Some((line + 1, line_text[..end].chars().count().max(1)))
}

/// Appends one segment to a JSON pointer, escaping `~` and `/` as RFC 6901 says.
pub(crate) fn join(base: &str, segment: &str) -> String {
    format!("{base}/{}", segment.replace('~', "~0").replace('/', "~1"))
}

struct Scan {
    chars: Vec<char>,
    i: usize,
    line: usize,
    col: usize,
    /// Whether every position is kept, or only duplicate keys are looked for.
    record: bool,
    out: Locator,
}

impl Scan {
    fn run(text: &str, record: bool) -> Locator {
        let mut scan = Scan {
            chars: text.chars().collect(),
            i: 0,
            line: 1,
            col: 1,
            record,
            out: Locator::default(),
        };
        scan.value(String::new());
        scan.out
    }

    /// `base` with one more segment, when positions are kept.
    fn child(&self, base: &str, segment: &str) -> String {
        if self.record {
            join(base, segment)
        } else {
            String::new()
        }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.i).copied()
    }

    fn bump(&mut self) {
        if let Some(c) = self.peek() {
            if c == '\n' {
                self.line += 1;
                self.col = 1;
            } else {
                self.col += 1;
            }
            self.i += 1;
        }
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.bump();
        }
    }

    fn value(&mut self, ptr: String) {
        self.skip_ws();
        if self.record {
            self.out.values.insert(ptr.clone(), (self.line, self.col));
        }
        match self.peek() {
            Some('{') => self.object(&ptr),
            Some('[') => self.array(&ptr),
            Some('"') => {
                self.string();
            }
            _ => {
                while self
                    .peek()
                    .is_some_and(|c| !c.is_whitespace() && !matches!(c, ',' | ']' | '}'))
                {
                    self.bump();
                }
            }
        }
    }

    fn object(&mut self, ptr: &str) {
        self.bump();
        let mut seen = std::collections::HashSet::new();
        loop {
            self.skip_ws();
            match self.peek() {
                None => return,
                Some('}') => return self.bump(),
                Some(',') => self.bump(),
                Some('"') => {
                    let pos = (self.line, self.col);
                    let key = self.string();
                    let child = self.child(ptr, &key);
                    if self.record {
                        self.out.keys.insert(child.clone(), pos);
                    }
                    if seen.contains(&key) {
                        self.out.duplicates.push((key, pos));
                    } else {
                        seen.insert(key);
                    }
                    self.skip_ws();
                    if self.peek() == Some(':') {
                        self.bump();
                    }
                    self.value(child);
                }
                Some(_) => self.bump(),
            }
        }
    }

    fn array(&mut self, ptr: &str) {
        self.bump();
        let mut index = 0usize;
        loop {
            self.skip_ws();
            match self.peek() {
                None => return,
                Some(']') => return self.bump(),
                Some(',') => self.bump(),
                Some(_) => {
                    let before = self.i;
                    self.value(self.child(ptr, &index.to_string()));
                    index += 1;
                    if self.i == before {
                        self.bump();
                    }
                }
            }
        }
    }

    /// Reads a string literal starting at the opening quote and returns its decoded text.
    fn string(&mut self) -> String {
        let mut out = String::new();
        self.bump();
        while let Some(c) = self.peek() {
            self.bump();
            match c {
                '"' => break,
                '\\' => {
                    let Some(esc) = self.peek() else { break };
                    self.bump();
                    match esc {
                        'n' => out.push('\n'),
                        't' => out.push('\t'),
                        'r' => out.push('\r'),
                        'b' => out.push('\u{8}'),
                        'f' => out.push('\u{c}'),
                        'u' => {
                            let mut code = 0u32;
                            for _ in 0..4 {
                                let digit = self.peek().and_then(|d| d.to_digit(16)).unwrap_or(0);
                                code = code * 16 + digit;
                                self.bump();
                            }
                            out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                        }
                        other => out.push(other),
                    }
                }
                other => out.push(other),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locates_values_and_keys() {
        let text = "{\n  \"a\": [1, {\"b\": \"x\"}],\n  \"c/d\": true\n}";
        let loc = Locator::new(text);
        assert_eq!(loc.value(""), Some((1, 1)));
        assert_eq!(loc.value("/a"), Some((2, 8)));
        assert_eq!(loc.value("/a/1/b"), Some((2, 18)));
        assert_eq!(loc.key("/a/1/b"), Some((2, 13)));
        assert_eq!(loc.value(&join("", "c/d")), Some((3, 10)));
        // Unknown members fall back to their nearest ancestor.
        assert_eq!(loc.value("/a/1/zzz"), Some((2, 12)));
    }

    #[test]
    fn json_errors_are_placed_in_characters() {
        for (text, pos) in [
            ("", (1, 1)),
            ("{\n", (2, 1)),
            ("\"abc", (1, 4)),
            // serde_json says column 5 (bytes); the string's one character is column 2.
            ("\"\u{13000}", (1, 2)),
            // The `x` after a two-byte `é`: byte column 8, character column 7.
            ("{\"é\": x}", (1, 7)),
        ] {
            let e = serde_json::from_str::<serde_json::Value>(text).unwrap_err();
            assert_eq!(json_error_position(text, &e), Some(pos), "{text:?}: {e}");
        }
    }

    #[test]
    fn survives_garbage() {
        for text in ["", "{", "[1,", "{\"a\"", "\"\\u12", "}}}", "{\"a\":[}"] {
            let _ = Locator::new(text);
            let _ = Locator::duplicates_in(text);
        }
    }
}
