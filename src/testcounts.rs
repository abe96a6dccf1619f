//! Test result counts scraped from a script step's output, line by line as it streams.
//!
//! Recognised summaries: cargo test, cargo nextest, pytest, go test, jest, vitest, node's
//! test runner (TAP and spec reporters) and a plain `N passed, N failed[, N skipped]` line.
//! Counts from several summaries (cargo's one per test binary, or several runners in one
//! script) are added up. Pure: no I/O.
//!
//! go test: the top-level per-test lines (`--- PASS:`, `--- FAIL:`, `--- SKIP:` at column 0)
//! are counted; indented subtest lines are not, so a table test counts once. A package
//! summary line (`ok  \tpkg\t0.01s`, `FAIL\tpkg\t…`) counts as one passed / failed entry only
//! when its package listed no such test lines (non-verbose runs, build failures), so a
//! `go test ./...` without `-v` reports packages, and a failing package is never silent.

use serde::{Deserialize, Serialize};

/// Lines longer than this are not summaries; skipping them bounds the work per line.
const MAX_LINE: usize = 4096;

/// Numbers of passed, failed and skipped tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TestCounts {
    /// Tests that passed.
    pub passed: u64,
    /// Tests that failed, errored, timed out or were cancelled.
    pub failed: u64,
    /// Tests skipped, ignored, marked todo or expected to fail.
    pub skipped: u64,
}

impl TestCounts {
    fn add(&mut self, other: TestCounts) {
        self.passed = self.passed.saturating_add(other.passed);
        self.failed = self.failed.saturating_add(other.failed);
        self.skipped = self.skipped.saturating_add(other.skipped);
    }
}

/// Feed lines as they stream (ANSI escape codes may be present — they are stripped); keeps
/// only a few counters, so memory stays bounded however long the output.
#[derive(Debug, Default)]
pub struct TestScanner {
    /// Sum of every summary line recognised.
    summaries: TestCounts,
    /// go test's top-level per-test lines.
    go_tests: TestCounts,
    /// go packages that listed no per-test lines of their kind.
    go_packages: TestCounts,
    /// A `--- PASS`/`--- SKIP` line was seen since the last go package line.
    go_listed: bool,
    /// A `--- FAIL` line was seen since the last go package line.
    go_listed_failure: bool,
    /// Whether any line was recognised.
    seen: bool,
}

impl TestScanner {
    /// Reads one line of output (with or without its line ending).
    pub fn feed(&mut self, line: &str) {
        if line.len() > MAX_LINE {
            return;
        }
        let clean = crate::ansi::strip(line);
        // A progress bar redrawn with `\r` leaves its last state at the end.
        let clean = clean
            .split('\r')
            .rfind(|s| !s.trim().is_empty())
            .unwrap_or_default()
            .trim_end();
        if let Some(counts) = go_test_line(clean) {
            self.go_tests.add(counts);
            self.go_listed |= counts.failed == 0;
            self.go_listed_failure |= counts.failed > 0;
        } else if let Some(ok) = go_package_line(clean) {
            if ok && !self.go_listed && !self.go_listed_failure {
                self.go_packages.passed += 1;
            } else if !ok && !self.go_listed_failure {
                self.go_packages.failed += 1;
            }
            self.go_listed = false;
            self.go_listed_failure = false;
        } else if let Some(counts) = summary_line(clean.trim()) {
            self.summaries.add(counts);
        } else {
            return;
        }
        self.seen = true;
    }

    /// The counts so far, or `None` when no line was recognised.
    pub fn counts(&self) -> Option<TestCounts> {
        self.seen.then(|| {
            let mut total = self.summaries;
            total.add(self.go_tests);
            total.add(self.go_packages);
            total
        })
    }
}

/// What a result word counts as.
#[derive(Clone, Copy)]
enum Kind {
    Passed,
    Failed,
    Skipped,
    /// Known but not counted (`total`, `warnings`, `slow`…).
    Ignored,
}

fn counts_of(items: &[(u64, Kind)]) -> TestCounts {
    let mut c = TestCounts::default();
    for (n, kind) in items {
        let slot = match kind {
            Kind::Passed => &mut c.passed,
            Kind::Failed => &mut c.failed,
            Kind::Skipped => &mut c.skipped,
            Kind::Ignored => continue,
        };
        *slot = slot.saturating_add(*n);
    }
    c
}

/// A summary line from any runner but go, already trimmed.
fn summary_line(t: &str) -> Option<TestCounts> {
    cargo(t)
        .or_else(|| nextest(t))
        .or_else(|| jest_or_vitest(t))
        .or_else(|| node(t))
        .or_else(|| pytest(t))
        .or_else(|| plain(t))
}

/// `test result: ok. 12 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished…`
fn cargo(t: &str) -> Option<TestCounts> {
    let rest = t.strip_prefix("test result:")?;
    let (_, rest) = rest.split_once('.')?;
    let items: Vec<_> = rest
        .split(';')
        .filter_map(|part| count_item(part, cargo_kind))
        .collect();
    (!items.is_empty()).then(|| counts_of(&items))
}

fn cargo_kind(label: &str) -> Option<Kind> {
    Some(match label {
        "passed" => Kind::Passed,
        "failed" => Kind::Failed,
        "ignored" => Kind::Skipped,
        _ => Kind::Ignored,
    })
}

/// `Summary [   0.5s] 10 tests run: 9 passed (2 slow), 1 failed, 1 timed out, 2 skipped`
fn nextest(t: &str) -> Option<TestCounts> {
    let rest = t.strip_prefix("Summary")?.trim_start().strip_prefix('[')?;
    let (_, rest) = rest.split_once(']')?;
    let (run, list) = rest.split_once(':')?;
    let mut run = run.split_whitespace();
    let total = run.next()?;
    if !total.split('/').all(is_number) || !matches!(run.next(), Some("test" | "tests")) {
        return None;
    }
    if run.next() != Some("run") || run.next().is_some() {
        return None;
    }
    let items = list_items(list, ',', |label| {
        Some(match label {
            "passed" => Kind::Passed,
            "failed" | "exec failed" | "timed out" => Kind::Failed,
            "skipped" => Kind::Skipped,
            _ => Kind::Ignored,
        })
    })?;
    Some(counts_of(&items))
}

/// jest `Tests:       1 failed, 2 skipped, 5 passed, 8 total`;
/// vitest `Tests  5 passed | 1 failed | 2 skipped (8)`.
fn jest_or_vitest(t: &str) -> Option<TestCounts> {
    let (list, sep) = if let Some(rest) = t.strip_prefix("Tests:") {
        (rest, ',')
    } else {
        let rest = t.strip_prefix("Tests")?;
        if !rest.starts_with(char::is_whitespace) {
            return None;
        }
        (strip_paren_total(rest), '|')
    };
    let items = list_items(list, sep, |label| {
        Some(match label {
            "passed" => Kind::Passed,
            "failed" => Kind::Failed,
            "skipped" | "todo" | "pending" => Kind::Skipped,
            "total" => Kind::Ignored,
            _ => return None,
        })
    })?;
    Some(counts_of(&items))
}

/// vitest's trailing `(8)`.
fn strip_paren_total(s: &str) -> &str {
    let s = s.trim_end();
    s.strip_suffix(')')
        .and_then(|r| r.rsplit_once('('))
        .filter(|(_, n)| is_number(n.trim()))
        .map_or(s, |(head, _)| head)
}

/// node --test: TAP `# pass 5` or spec `ℹ pass 5`, one counter per line.
fn node(t: &str) -> Option<TestCounts> {
    let rest = t
        .strip_prefix('#')
        .or_else(|| t.strip_prefix('ℹ'))?
        .trim_start();
    let (label, n) = rest.split_once(char::is_whitespace)?;
    let n: u64 = n.trim().parse().ok()?;
    let kind = match label {
        "pass" => Kind::Passed,
        "fail" | "cancelled" => Kind::Failed,
        "skipped" | "skip" | "todo" => Kind::Skipped,
        _ => return None,
    };
    Some(counts_of(&[(n, kind)]))
}

/// `==== 3 passed, 1 failed, 2 skipped in 0.12s ====`, `5 passed in 0.01s`,
/// `== no tests ran in 0.01s ==`.
fn pytest(t: &str) -> Option<TestCounts> {
    let t = t.trim_matches(|c: char| c == '=' || c.is_whitespace());
    let (list, duration) = t.rsplit_once(" in ")?;
    // `0.12s` or `65.00s (0:01:05)`
    let secs = duration.split_whitespace().next()?.strip_suffix('s')?;
    if secs.parse::<f64>().is_err() {
        return None;
    }
    if list == "no tests ran" {
        return Some(TestCounts::default());
    }
    let items = list_items(list, ',', |label| {
        Some(match label {
            "passed" | "xpassed" => Kind::Passed,
            "failed" | "error" | "errors" => Kind::Failed,
            "skipped" | "xfailed" => Kind::Skipped,
            "deselected" | "warning" | "warnings" | "rerun" => Kind::Ignored,
            _ => return None,
        })
    })?;
    Some(counts_of(&items))
}

/// `3 passed, 0 failed`, `tests: 3 passed, 0 failed, 1 skipped.`
fn plain(t: &str) -> Option<TestCounts> {
    let t = t.strip_suffix('.').unwrap_or(t);
    let list = match t.split_once(':') {
        Some((word, rest)) if is_word(word) => rest,
        _ => t,
    };
    let items: Vec<_> = list.split(',').map(|p| split_item(p.trim())).collect();
    let wanted = ["passed", "failed", "skipped"];
    if !(2..=3).contains(&items.len()) {
        return None;
    }
    let mut c = TestCounts::default();
    let slots = [&mut c.passed, &mut c.failed, &mut c.skipped];
    for ((item, want), slot) in items.into_iter().zip(wanted).zip(slots) {
        match item {
            Some((n, label)) if label == want => *slot = n,
            _ => return None,
        }
    }
    Some(c)
}

/// `--- PASS: TestName (0.00s)` at column 0 (subtests are indented and not counted).
fn go_test_line(line: &str) -> Option<TestCounts> {
    let rest = line.strip_prefix("--- ")?;
    let mut c = TestCounts::default();
    if rest.starts_with("PASS:") {
        c.passed = 1;
    } else if rest.starts_with("FAIL:") {
        c.failed = 1;
    } else if rest.starts_with("SKIP:") {
        c.skipped = 1;
    } else {
        return None;
    }
    Some(c)
}

/// `ok  \tpkg\t0.01s` → `Some(true)`, `FAIL\tpkg\t0.01s` → `Some(false)`. Go separates
/// with tabs, which keeps jest's `FAIL src/x.test.js` out.
fn go_package_line(line: &str) -> Option<bool> {
    let (ok, rest) = if let Some(rest) = line.strip_prefix("ok") {
        (true, rest.trim_start_matches(' '))
    } else {
        (false, line.strip_prefix("FAIL")?)
    };
    let pkg = rest.strip_prefix('\t')?;
    let pkg = pkg.split(['\t', ' ']).next().unwrap_or_default();
    (!pkg.is_empty()).then_some(ok)
}

/// Items `N label` separated by `sep`; every item must parse and have a known label.
fn list_items(
    list: &str,
    sep: char,
    kind: impl Fn(&str) -> Option<Kind>,
) -> Option<Vec<(u64, Kind)>> {
    let items = list
        .split(sep)
        .map(|part| count_item(part, &kind))
        .collect::<Option<Vec<_>>>()?;
    (!items.is_empty()).then_some(items)
}

/// `9 passed (2 slow)` → `(9, kind("passed"))`.
fn count_item(part: &str, kind: impl Fn(&str) -> Option<Kind>) -> Option<(u64, Kind)> {
    let part = part.split('(').next().unwrap_or_default().trim();
    let (n, label) = split_item(part)?;
    Some((n, kind(&label)?))
}

/// `12 timed  out` → `(12, "timed out")`, lowercased.
fn split_item(part: &str) -> Option<(u64, String)> {
    let (n, label) = part.split_once(char::is_whitespace)?;
    let label = label.split_whitespace().collect::<Vec<_>>().join(" ");
    Some((n.parse().ok()?, label.to_lowercase()))
}

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

fn is_word(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(lines: &[&str]) -> Option<TestCounts> {
        let mut s = TestScanner::default();
        for line in lines {
            s.feed(line);
        }
        s.counts()
    }

    fn c(passed: u64, failed: u64, skipped: u64) -> Option<TestCounts> {
        Some(TestCounts {
            passed,
            failed,
            skipped,
        })
    }

    #[test]
    fn recognises_recorded_summaries() {
        let cases: &[(&str, &[&str], Option<TestCounts>)] = &[
            // cargo test: one summary per binary, summed; doc-tests included.
            (
                "cargo test, three binaries",
                &[
                    "     Running unittests src/lib.rs (target/debug/deps/baton-3f2a)",
                    "running 13 tests",
                    "test handoff::tests::outcome_absent ... ok",
                    "test result: ok. 12 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s",
                    "test result: FAILED. 3 passed; 2 failed; 0 ignored; 0 measured; 4 filtered out; finished in 0.31s",
                    "   Doc-tests baton",
                    "test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s",
                ],
                c(15, 2, 1),
            ),
            (
                "cargo test, coloured",
                &[
                    "test result: \x1b[32mok\x1b[0m. 4 passed; 0 failed; 2 ignored; 0 measured; 0 filtered out; finished in 0.01s",
                ],
                c(4, 0, 2),
            ),
            (
                "nextest, failures and skips",
                &[
                    "    Starting 10 tests across 2 binaries (2 tests skipped)",
                    "        PASS [   0.004s] baton handoff::tests::outcome_absent",
                    "        FAIL [   0.012s] baton store::tests::migrate",
                    "------------",
                    "     Summary [   0.513s] 10 tests run: 9 passed, 1 failed, 2 skipped",
                ],
                c(9, 1, 2),
            ),
            (
                "nextest, slow and timed out, coloured",
                &[
                    "\x1b[32;1m     Summary\x1b[0m [  62.010s] \x1b[1m12\x1b[0m tests run: \x1b[1m10\x1b[0m \x1b[32;1mpassed\x1b[0m (\x1b[1m2\x1b[0m \x1b[33;1mslow\x1b[0m), \x1b[1m1\x1b[0m \x1b[31;1mfailed\x1b[0m, \x1b[1m1\x1b[0m \x1b[35;1mtimed out\x1b[0m, \x1b[1m0\x1b[0m \x1b[33;1mskipped\x1b[0m",
                ],
                c(10, 2, 0),
            ),
            (
                "nextest, single test, cancelled run",
                &[
                    "     Summary [   0.002s] 1 test run: 1 passed (1 slow), 0 skipped",
                    "     Summary [   0.100s] 3/10 tests run: 2 passed, 1 failed, 7 skipped",
                ],
                c(3, 1, 7),
            ),
            (
                "pytest, bars",
                &[
                    "tests/test_api.py ..F.ss                                      [100%]",
                    "=================== 3 passed, 1 failed, 2 skipped in 0.12s ===================",
                ],
                c(3, 1, 2),
            ),
            (
                "pytest, errors and xfails, coloured",
                &[
                    "\x1b[31m===== \x1b[31m\x1b[1m1 failed\x1b[0m, \x1b[32m7 passed\x1b[0m, \x1b[33m1 skipped\x1b[0m, \x1b[33m2 xfailed\x1b[0m, \x1b[33m1 xpassed\x1b[0m, \x1b[33m3 warnings\x1b[0m, \x1b[31m\x1b[1m2 errors\x1b[0m\x1b[31m in 65.02s (0:01:05)\x1b[0m\x1b[31m =====\x1b[0m",
                ],
                c(8, 3, 3),
            ),
            ("pytest -q", &["5 passed in 0.01s"], c(5, 0, 0)),
            (
                "pytest, nothing ran",
                &[
                    "============================ no tests ran in 0.01s =============================",
                ],
                c(0, 0, 0),
            ),
            (
                "go test -v, subtests not counted",
                &[
                    "=== RUN   TestParse",
                    "=== RUN   TestParse/empty",
                    "    --- PASS: TestParse/empty (0.00s)",
                    "--- PASS: TestParse (0.00s)",
                    "--- FAIL: TestLoad (0.01s)",
                    "    load_test.go:17: want 3, got 2",
                    "--- SKIP: TestNet (0.00s)",
                    "FAIL",
                    "FAIL\texample.com/app/config\t0.015s",
                    "=== RUN   TestUtil",
                    "--- PASS: TestUtil (0.00s)",
                    "PASS",
                    "ok  \texample.com/app/util\t0.004s",
                ],
                c(2, 1, 1),
            ),
            (
                "go test, non-verbose: packages count",
                &[
                    "ok  \texample.com/app/util\t(cached)",
                    "ok  \texample.com/app/store\t0.210s\tcoverage: 81.2% of statements",
                    "?   \texample.com/app/cmd\t[no test files]",
                    "--- FAIL: TestLoad (0.01s)",
                    "    load_test.go:17: want 3, got 2",
                    "FAIL",
                    "FAIL\texample.com/app/config\t0.015s",
                    "FAIL\texample.com/app/broken [build failed]",
                ],
                c(2, 2, 0),
            ),
            (
                "jest",
                &[
                    "FAIL src/board.test.js",
                    "PASS src/lane.test.js (5.2 s)",
                    "Test Suites: 1 failed, 1 passed, 2 total",
                    "Tests:       1 failed, 2 skipped, 5 passed, 8 total",
                    "Snapshots:   0 total",
                    "Time:        1.234 s",
                ],
                c(5, 1, 2),
            ),
            (
                "jest, coloured, todo",
                &[
                    "\x1b[1mTests:       \x1b[22m\x1b[1m\x1b[32m4 passed\x1b[39m\x1b[22m, 1 todo, 5 total",
                ],
                c(4, 0, 1),
            ),
            (
                "vitest, plain",
                &[
                    " Test Files  1 failed | 2 passed (3)",
                    "      Tests  5 passed | 1 failed | 2 skipped (8)",
                    "   Start at  10:12:01",
                ],
                c(5, 1, 2),
            ),
            (
                "vitest, coloured",
                &[
                    "\x1b[2m Test Files \x1b[22m \x1b[1m\x1b[32m2 passed\x1b[39m\x1b[22m\x1b[90m (2)\x1b[39m",
                    "\x1b[2m      Tests \x1b[22m \x1b[1m\x1b[31m1 failed\x1b[39m\x1b[22m\x1b[2m | \x1b[22m\x1b[1m\x1b[32m6 passed\x1b[39m\x1b[22m\x1b[90m (7)\x1b[39m",
                ],
                c(6, 1, 0),
            ),
            (
                "node --test, TAP",
                &[
                    "ok 1 - adds",
                    "not ok 2 - subtracts",
                    "1..8",
                    "# tests 8",
                    "# suites 0",
                    "# pass 5",
                    "# fail 1",
                    "# cancelled 0",
                    "# skipped 2",
                    "# todo 0",
                    "# duration_ms 41.2",
                ],
                c(5, 1, 2),
            ),
            (
                "node --test, spec reporter, coloured",
                &[
                    "\x1b[34mℹ tests 6\x1b[39m",
                    "\x1b[34mℹ pass 4\x1b[39m",
                    "\x1b[34mℹ fail 1\x1b[39m",
                    "\x1b[34mℹ cancelled 1\x1b[39m",
                    "\x1b[34mℹ skipped 0\x1b[39m",
                    "\x1b[34mℹ todo 0\x1b[39m",
                ],
                c(4, 2, 0),
            ),
            ("plain", &["3 passed, 1 failed"], c(3, 1, 0)),
            (
                "plain with a label and skips",
                &["tests: 3 passed, 0 failed, 2 skipped."],
                c(3, 0, 2),
            ),
            (
                "plain, coloured",
                &["\x1b[1mResults:\x1b[0m \x1b[32m7 passed\x1b[0m, \x1b[31m0 failed\x1b[0m"],
                c(7, 0, 0),
            ),
            (
                "progress bar redrawn with carriage returns",
                &[
                    "running...\r\x1b[Ktest result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\r\n",
                ],
                c(2, 0, 0),
            ),
            (
                "two runners in one script are added",
                &[
                    "test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s",
                    "==== 3 passed, 1 failed in 0.50s ====",
                ],
                c(5, 1, 0),
            ),
        ];
        for (name, lines, want) in cases {
            assert_eq!(scan(lines), *want, "{name}");
        }
    }

    #[test]
    fn prose_and_unrelated_lines_are_not_counted() {
        let lines: &[&str] = &[
            "The build passed, so I moved on; 3 checks passed earlier.",
            "Yesterday 3 passed, 2 failed on CI",
            "All 12 tests passed!",
            "3 passed, 1 failed, 2 skipped, 4 flaky",
            "2 failed, 3 passed",
            "note this: 3 passed, 0 failed in total",
            "Test Suites: 1 failed, 1 passed, 2 total",
            " Test Files  2 passed (2)",
            "Tests run: 24",
            "FAIL src/board.test.js",
            "PASS",
            "# Subtest: adds",
            "# pass five",
            "Summary: everything passed",
            "    --- PASS: TestParse/empty (0.00s)",
            "we went in 3s",
            "test result: great",
            "",
        ];
        for line in lines {
            assert_eq!(scan(&[line]), None, "{line:?}");
        }
        assert_eq!(scan(lines), None);
    }

    #[test]
    fn nothing_fed_is_none_and_zero_counts_are_some() {
        assert_eq!(TestScanner::default().counts(), None);
        assert_eq!(scan(&["# fail 0"]), c(0, 0, 0));
    }

    #[test]
    fn over_long_lines_are_skipped() {
        let long = format!("5 passed in 0.01s{}", " ".repeat(MAX_LINE));
        assert_eq!(scan(&[&long]), None);
    }

    #[test]
    fn counts_round_trip_through_json() {
        let counts = TestCounts {
            passed: 1,
            failed: 2,
            skipped: 3,
        };
        let json = serde_json::to_string(&counts).unwrap();
        assert_eq!(json, r#"{"passed":1,"failed":2,"skipped":3}"#);
        assert_eq!(serde_json::from_str::<TestCounts>(&json).unwrap(), counts);
    }
}
