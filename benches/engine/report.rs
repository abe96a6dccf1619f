//! The result table: one line per measured figure, printed plain or as Markdown.

use std::fmt::Write as _;
use std::time::Duration;

/// One line of the table.
#[derive(Debug, Clone)]
pub struct Line {
    pub row: String,
    pub floor: String,
    pub baton: String,
    /// baton against the floor, as "how many times the floor" (higher is worse).
    pub ratio: Option<f64>,
    pub target: String,
    /// `None` when the line has no target (information only).
    pub ok: Option<bool>,
}

impl Line {
    /// A line with figures and no target yet.
    pub fn new(row: impl Into<String>, floor: impl Into<String>, baton: impl Into<String>) -> Self {
        Self {
            row: row.into(),
            floor: floor.into(),
            baton: baton.into(),
            ratio: None,
            target: "—".into(),
            ok: None,
        }
    }

    /// Sets the ratio.
    pub fn ratio(mut self, r: f64) -> Self {
        self.ratio = Some(r);
        self
    }

    /// Sets the target text and whether it is met.
    pub fn target(mut self, text: impl Into<String>, ok: bool) -> Self {
        self.target = text.into();
        self.ok = Some(ok);
        self
    }

    /// A line saying a row could not be measured.
    pub fn failed(row: &str, why: &str) -> Self {
        Self {
            row: format!("{row}: FAILED"),
            floor: "—".into(),
            baton: why.into(),
            ratio: None,
            target: "—".into(),
            ok: Some(false),
        }
    }

    /// The line's cells joined by `|`, for progress output.
    pub fn summary(&self) -> String {
        self.cells().join(" | ")
    }

    fn cells(&self) -> [String; 6] {
        [
            self.row.clone(),
            self.floor.clone(),
            self.baton.clone(),
            self.ratio.map_or("—".into(), |r| format!("{r:.2}×")),
            self.target.clone(),
            match self.ok {
                Some(true) => "ok".into(),
                Some(false) => "NO".into(),
                None => "—".into(),
            },
        ]
    }
}

const HEADER: [&str; 6] = ["row", "floor", "baton", "ratio", "target", "ok?"];

/// The lines as an aligned plain-text table.
pub fn plain(lines: &[Line]) -> String {
    let rows: Vec<[String; 6]> = lines.iter().map(Line::cells).collect();
    let mut width = HEADER.map(|h| h.chars().count());
    for r in &rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let mut put = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(width)
            .map(|(c, w)| format!("{c}{}", " ".repeat(w - c.chars().count())))
            .collect();
        let _ = writeln!(out, "{}", padded.join(" | ").trim_end());
    };
    put(&HEADER.map(String::from));
    put(&width.map(|w| "-".repeat(w)));
    for r in &rows {
        put(r);
    }
    out
}

/// The lines as a Markdown table.
pub fn markdown(lines: &[Line]) -> String {
    let mut out = format!("| {} |\n", HEADER.join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(HEADER.len()));
    for l in lines {
        let cells = l.cells().map(|c| c.replace('|', "\\|"));
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    out
}

/// Milliseconds with a sensible number of digits.
pub fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0} ms")
    } else if v >= 10.0 {
        format!("{v:.1} ms")
    } else {
        format!("{v:.2} ms")
    }
}

/// A duration in milliseconds.
pub fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// `a` over `b`.
pub fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-9)
}

/// A count with thousands separators: 10000 → "10,000".
pub fn count(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
