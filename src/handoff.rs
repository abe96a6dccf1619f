//! Structured handoffs between pipeline steps: the sections an agent's answer is split into.
//!
//! An agent's Markdown output is split on its headings; the sections `What Was Done`,
//! `Decisions Made`, `Open Questions` and `Next Agent Context` become a [`Handoff`], and the
//! next agent receives the compact [`context_header`] instead of the whole output. An
//! `Outcome` heading or a last line `OUTCOME: name` names the step's outcome. Pure: no I/O.

use crate::pipeline::normalize_outcome;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// Largest raw output, in bytes, passed on as `{{handoff}}` when extraction failed; beyond
/// it the tail is kept, because agents put their conclusions at the end.
pub const RAW_CONTEXT_LIMIT: usize = 16 * 1024;

/// The four structured fields of a handoff; a section that was absent or empty is `None`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HandoffFields {
    /// What the agent accomplished.
    pub what_was_done: Option<String>,
    /// Key choices the agent made, with their rationale.
    pub decisions_made: Option<String>,
    /// Unresolved questions the next agent should know about.
    pub open_questions: Option<String>,
    /// Instructions or context for the next agent.
    pub next_agent_context: Option<String>,
}

/// One step's output, parsed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Handoff {
    /// The agent's output exactly as received.
    pub raw: String,
    /// The sections found in `raw`.
    pub fields: HandoffFields,
    /// The outcome the agent named, normalised by [`normalize_outcome`] (`needs_info`), if any.
    pub outcome: Option<String>,
    /// Whether at least one field was found; `false` means extraction failed.
    pub structured: bool,
}

/// Field names in declaration order, as stored in metadata.
const FIELD_NAMES: [&str; 4] = [
    "what_was_done",
    "decisions_made",
    "open_questions",
    "next_agent_context",
];

impl HandoffFields {
    /// The snake_case names of the fields that are present, in declaration order.
    pub fn names_present(&self) -> Vec<String> {
        FIELD_NAMES
            .iter()
            .zip(self.as_array())
            .filter(|(_, v)| v.is_some())
            .map(|(n, _)| (*n).to_string())
            .collect()
    }

    /// Whether no field is present.
    pub fn is_empty(&self) -> bool {
        self.as_array().iter().all(|v| v.is_none())
    }

    fn as_array(&self) -> [&Option<String>; 4] {
        [
            &self.what_was_done,
            &self.decisions_made,
            &self.open_questions,
            &self.next_agent_context,
        ]
    }
}

/// What a heading line introduces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    /// One of the four fields, by index into [`FIELD_NAMES`].
    Field(usize),
    /// The `Outcome` section.
    Outcome,
    /// Any other heading: it ends the current section.
    Other,
}

/// Sections found in a text; the first occurrence of each heading wins, even if empty.
#[derive(Default)]
struct Sections {
    fields: [Option<String>; 4],
    outcome: Option<String>,
}

/// Parses an agent's output into a [`Handoff`]. Never fails: an output without any of the
/// four sections yields `structured: false` and empty fields.
pub fn extract(raw: &str) -> Handoff {
    // A closing `OUTCOME: x` line is not part of the last section's text.
    let body = match last_line_outcome(raw) {
        Some((_, start)) => &raw[..start],
        None => raw,
    };
    let sections = split_sections(body);
    let [
        what_was_done,
        decisions_made,
        open_questions,
        next_agent_context,
    ] = sections.fields;
    let fields = HandoffFields {
        what_was_done,
        decisions_made,
        open_questions,
        next_agent_context,
    };
    let outcome = sections
        .outcome
        .as_deref()
        .and_then(first_line_outcome)
        .or_else(|| last_line_outcome(raw).map(|(o, _)| o));
    Handoff {
        raw: raw.to_string(),
        structured: !fields.is_empty(),
        fields,
        outcome,
    }
}

/// The outcome named in `raw`: the first non-empty line under an `Outcome` heading, else a
/// last non-empty line `OUTCOME: name`. Normalised by [`normalize_outcome`].
pub fn parse_outcome(raw: &str) -> Option<String> {
    extract(raw).outcome
}

/// The compact context header the next agent receives as `{{handoff}}` (a fixed format,
/// with `from_status` in place of the agent name); when extraction failed, the raw output
/// (trimmed, and capped at [`RAW_CONTEXT_LIMIT`] with a note).
pub fn context_header(h: &Handoff, from_status: &str) -> String {
    if !h.structured {
        return raw_context(&h.raw);
    }
    let from = from_status.trim();
    let mut parts = vec![if from.is_empty() {
        "## Handoff from previous step".to_string()
    } else {
        format!("## Handoff from previous step ({from})")
    }];
    let f = &h.fields;
    if let Some(v) = &f.what_was_done {
        parts.push(format!("**What was done**: {v}"));
    }
    if let Some(v) = &f.decisions_made {
        parts.push(format!("**Decisions made**:\n{v}"));
    }
    if let Some(v) = &f.open_questions {
        parts.push(format!("**Open questions**:\n{v}"));
    }
    if let Some(v) = &f.next_agent_context {
        parts.push(format!("**Your task**: {v}"));
    }
    parts.join("\n\n")
}

/// JSON metadata stored with a handoff: `has_structured_data`, `fields` (names present),
/// `outcome`, `lengths` (characters of `raw` and of each present field) and, as in the handoff format's
/// `metadata_json`, each present field's text under its own name.
pub fn metadata(h: &Handoff) -> Value {
    let mut lengths = Map::new();
    lengths.insert("raw".into(), json!(h.raw.chars().count()));
    let mut meta = Map::new();
    meta.insert("has_structured_data".into(), json!(h.structured));
    meta.insert("fields".into(), json!(h.fields.names_present()));
    meta.insert("outcome".into(), json!(h.outcome));
    for (name, value) in FIELD_NAMES.iter().zip(h.fields.as_array()) {
        if let Some(v) = value {
            lengths.insert((*name).into(), json!(v.chars().count()));
            meta.insert((*name).into(), json!(v));
        }
    }
    meta.insert("lengths".into(), Value::Object(lengths));
    Value::Object(meta)
}

/// Splits `text` on headings outside fenced code blocks; text before the first recognised
/// heading is ignored and every heading ends the section before it.
fn split_sections(text: &str) -> Sections {
    let mut out = Sections::default();
    let mut seen = [false; 5]; // four fields, then Outcome
    let mut current: Option<(usize, Vec<&str>)> = None;
    let mut fence: Option<(char, usize)> = None;
    for line in text.lines() {
        if let Some(open) = fence {
            if closes_fence(line, open) {
                fence = None;
            }
        } else if let Some(open) = opens_fence(line) {
            fence = Some(open);
        } else if let Some(section) = heading(line) {
            if let Some((slot, lines)) = current.take() {
                store(&mut out, slot, &lines);
            }
            let slot = match section {
                Section::Field(i) => Some(i),
                Section::Outcome => Some(4),
                Section::Other => None,
            };
            if let Some(slot) = slot.filter(|s| !seen[*s]) {
                seen[slot] = true;
                current = Some((slot, Vec::new()));
            }
            continue;
        }
        if let Some((_, lines)) = current.as_mut() {
            lines.push(line);
        }
    }
    if let Some((slot, lines)) = current {
        store(&mut out, slot, &lines);
    }
    out
}

fn store(out: &mut Sections, slot: usize, lines: &[&str]) {
    let text = lines.join("\n").trim().to_string();
    let value = (!text.is_empty()).then_some(text);
    match out.fields.get_mut(slot) {
        Some(field) => *field = value,
        None => out.outcome = value,
    }
}

/// The section a Markdown ATX heading (`#`..`######`, up to three spaces of indent) names.
fn heading(line: &str) -> Option<Section> {
    let rest = line.trim_start_matches(' ');
    if line.len() - rest.len() > 3 {
        return None;
    }
    let text = rest.trim_start_matches('#');
    if !(1..=6).contains(&(rest.len() - text.len())) {
        return None;
    }
    let section = section_named(text);
    // Without a space (`##What Was Done`) only a known name counts, as the format is lenient
    // there, while `#include` or `#[derive]` outside a fence must not end a section.
    let spaced = text.is_empty() || text.starts_with([' ', '\t']);
    (spaced || section != Section::Other).then_some(section)
}

fn section_named(text: &str) -> Section {
    let key: String = text
        .chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect();
    match key.as_str() {
        "whatwasdone" => Section::Field(0),
        "decisionsmade" => Section::Field(1),
        "openquestions" => Section::Field(2),
        "nextagentcontext" => Section::Field(3),
        "outcome" => Section::Outcome,
        _ => Section::Other,
    }
}

fn opens_fence(line: &str) -> Option<(char, usize)> {
    let t = line.trim_start();
    let c = t.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let n = t.len() - t.trim_start_matches(c).len();
    (n >= 3).then_some((c, n))
}

fn closes_fence(line: &str, (c, n): (char, usize)) -> bool {
    let t = line.trim();
    let rest = t.trim_start_matches(c);
    t.len() - rest.len() >= n && rest.is_empty()
}

/// The outcome from an `Outcome` section's first non-empty line.
fn first_line_outcome(body: &str) -> Option<String> {
    body.lines()
        .find(|l| !l.trim().is_empty())
        .and_then(outcome_name)
}

/// The outcome named by a last non-empty line `OUTCOME: name`, with that line's byte offset.
fn last_line_outcome(raw: &str) -> Option<(String, usize)> {
    let trimmed = raw.trim_end();
    let start = trimmed.rfind('\n').map_or(0, |i| i + 1);
    let line: String = trimmed[start..]
        .chars()
        .filter(|c| *c != '*' && *c != '`')
        .collect();
    let (key, value) = line.split_once(':')?;
    if !key.trim().eq_ignore_ascii_case("outcome") {
        return None;
    }
    Some((outcome_name(value)?, start))
}

/// The outcome a line names: `" **Needs info**."` → `needs_info`; also accepts `- success`
/// and `OUTCOME: success`. The name is normalised as everywhere else ([`normalize_outcome`]).
fn outcome_name(text: &str) -> Option<String> {
    let decor: &[char] = &['*', '`', '"', '\'', '.', ' ', '\t'];
    let mut t = text.trim();
    for bullet in ["- ", "* ", "+ "] {
        t = t.strip_prefix(bullet).unwrap_or(t);
    }
    t = t.trim_matches(decor);
    if let Some((key, value)) = t.split_once(':')
        && key.trim_matches(decor).eq_ignore_ascii_case("outcome")
    {
        t = value.trim_matches(decor);
    }
    let name = normalize_outcome(t);
    (!name.is_empty()).then_some(name)
}

/// The raw output as context: trimmed, and only its tail if longer than the limit.
fn raw_context(raw: &str) -> String {
    let text = raw.trim();
    if text.len() <= RAW_CONTEXT_LIMIT {
        return text.to_string();
    }
    let mut start = text.len() - RAW_CONTEXT_LIMIT;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    // Start on a whole line when one begins soon enough.
    if let Some(nl) = text[start..].find('\n').filter(|nl| *nl < 1024) {
        start += nl + 1;
    }
    format!(
        "[earlier output truncated: {start} of {} bytes omitted]\n{}",
        text.len(),
        &text[start..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: &str = "## What Was Done\nImplemented the login endpoint and wrote 5 tests.\n\n\
        ## Decisions Made\n- Used JWT over session cookies for statelessness.\n\n\
        ## Open Questions\n- Should we rate-limit the endpoint?\n\n\
        ## Next Agent Context\nThe endpoint is at POST /auth/login. Next: add refresh tokens.\n";

    fn some(s: &str) -> Option<String> {
        Some(s.to_string())
    }

    fn fields(w: Option<&str>, d: Option<&str>, o: Option<&str>, n: Option<&str>) -> Handoff {
        let f = HandoffFields {
            what_was_done: w.map(String::from),
            decisions_made: d.map(String::from),
            open_questions: o.map(String::from),
            next_agent_context: n.map(String::from),
        };
        Handoff {
            raw: String::new(),
            structured: !f.is_empty(),
            fields: f,
            outcome: None,
        }
    }

    // Seed 003, cases 1-8: the extractor.

    #[test]
    fn extract_all_four_sections() {
        let h = extract(FULL);
        assert!(h.structured);
        assert_eq!(
            h.fields.what_was_done,
            some("Implemented the login endpoint and wrote 5 tests.")
        );
        assert_eq!(
            h.fields.decisions_made,
            some("- Used JWT over session cookies for statelessness.")
        );
        assert_eq!(
            h.fields.open_questions,
            some("- Should we rate-limit the endpoint?")
        );
        assert_eq!(
            h.fields.next_agent_context,
            some("The endpoint is at POST /auth/login. Next: add refresh tokens.")
        );
    }

    #[test]
    fn extract_partial_sections() {
        let h = extract("## What Was Done\nFixed it.\n\n## Next Agent Context\nReview it.");
        assert_eq!(h.fields.what_was_done, some("Fixed it."));
        assert_eq!(h.fields.decisions_made, None);
        assert_eq!(h.fields.open_questions, None);
        assert_eq!(h.fields.next_agent_context, some("Review it."));
        assert_eq!(
            h.fields.names_present(),
            ["what_was_done", "next_agent_context"]
        );
    }

    #[test]
    fn extract_returns_none_when_no_sections() {
        let raw = "I looked at the code.\n\n## Summary\nAll good.\n";
        let h = extract(raw);
        assert!(!h.structured);
        assert_eq!(h.fields, HandoffFields::default());
        assert_eq!(h.raw, raw);
    }

    #[test]
    fn extract_returns_none_for_empty_input() {
        for raw in ["", "   \n\t\n  "] {
            let h = extract(raw);
            assert!(!h.structured, "{raw:?}");
            assert!(h.fields.is_empty());
            assert_eq!(h.outcome, None);
        }
    }

    #[test]
    fn extract_case_insensitive_headings() {
        let raw = "## WHAT WAS DONE\na\n## decisions made\nb\n## OpEn QuEsTiOnS\nc\n\
            ## NEXT AGENT CONTEXT\nd";
        let h = extract(raw);
        assert_eq!(h.fields, extract(&raw.to_lowercase()).fields);
        assert_eq!(h.fields.names_present().len(), 4);
        assert_eq!(h.fields.open_questions, some("c"));
    }

    #[test]
    fn extract_strips_whitespace() {
        let h = extract(
            "## What Was Done\n\n\n    Indented line.\n  second line  \n\n\n## Open Questions\n\n",
        );
        assert_eq!(
            h.fields.what_was_done,
            some("Indented line.\n  second line")
        );
        // A heading with nothing under it counts as absent.
        assert_eq!(h.fields.open_questions, None);
    }

    #[test]
    fn extract_ignores_preamble() {
        let h = extract("Sure! Here is my report.\n\nPREAMBLE\n## What Was Done\nWork.");
        assert_eq!(h.fields.what_was_done, some("Work."));
        assert!(!format!("{:?}", h.fields).contains("PREAMBLE"));
    }

    #[test]
    fn extract_duplicate_heading_first_wins() {
        let h = extract("## What Was Done\nfirst\n## What Was Done\nsecond\n");
        assert_eq!(h.fields.what_was_done, some("first"));
    }

    // Seed 003, cases 9-11: the context header.

    #[test]
    fn to_context_header_all_fields() {
        let h = extract(FULL);
        assert_eq!(
            context_header(&h, "planning"),
            "## Handoff from previous step (planning)\n\n\
             **What was done**: Implemented the login endpoint and wrote 5 tests.\n\n\
             **Decisions made**:\n- Used JWT over session cookies for statelessness.\n\n\
             **Open questions**:\n- Should we rate-limit the endpoint?\n\n\
             **Your task**: The endpoint is at POST /auth/login. Next: add refresh tokens."
        );
    }

    #[test]
    fn to_context_header_omits_empty_fields() {
        let h = fields(Some("Did it."), None, None, Some("Test it."));
        let header = context_header(&h, "coding");
        assert_eq!(
            header,
            "## Handoff from previous step (coding)\n\n\
             **What was done**: Did it.\n\n**Your task**: Test it."
        );
        assert!(!header.contains("Decisions") && !header.contains("Open questions"));
    }

    #[test]
    fn to_context_header_without_agent_name() {
        let h = fields(None, Some("- x"), None, None);
        assert_eq!(
            context_header(&h, " "),
            "## Handoff from previous step\n\n**Decisions made**:\n- x"
        );
    }

    // Seed 003, cases 12-13.

    #[test]
    fn is_empty_true_when_all_none() {
        assert!(HandoffFields::default().is_empty());
        assert!(HandoffFields::default().names_present().is_empty());
    }

    #[test]
    fn is_empty_false_when_any_field_set() {
        let f = HandoffFields {
            open_questions: some("why?"),
            ..HandoffFields::default()
        };
        assert!(!f.is_empty());
        assert_eq!(f.names_present(), ["open_questions"]);
    }

    // Beyond the seed: lenient headings, fences, fallback, metadata.

    #[test]
    fn headings_match_any_level_and_punctuation() {
        let raw = "# what-was done:\na\n###### Decisions_Made\nb\n   ### open questions ###\nc\n\
            ##NextAgentContext\nd";
        let h = extract(raw);
        assert_eq!(h.fields.what_was_done, some("a"));
        assert_eq!(h.fields.decisions_made, some("b"));
        assert_eq!(h.fields.open_questions, some("c"));
        assert_eq!(h.fields.next_agent_context, some("d"));
    }

    #[test]
    fn non_headings_do_not_start_sections() {
        let h = extract("####### What Was Done\na\n    ## What Was Done\nb\n#WhatWasDone\nc");
        assert_eq!(h.fields.what_was_done, some("c"));
        let h = extract("Text: ## What Was Done\nb");
        assert!(!h.structured);
    }

    #[test]
    fn any_other_heading_ends_a_section() {
        let h = extract("## What Was Done\ndone\n### Details\nnot part of it\n");
        assert_eq!(h.fields.what_was_done, some("done"));
    }

    #[test]
    fn fenced_code_and_hash_lines_stay_in_the_section() {
        let raw = "## What Was Done\nWrote:\n```python\n# What Was Done\nx = 1\n```\n\
            #include <stdio.h>\n#[derive(Debug)]\n~~~~\n## Next Agent Context\n~~~~\n";
        let h = extract(raw);
        assert_eq!(
            h.fields.what_was_done.as_deref(),
            Some(
                "Wrote:\n```python\n# What Was Done\nx = 1\n```\n#include <stdio.h>\n\
                 #[derive(Debug)]\n~~~~\n## Next Agent Context\n~~~~"
            )
        );
        assert_eq!(h.fields.next_agent_context, None);
    }

    #[test]
    fn context_header_falls_back_to_trimmed_raw() {
        let h = extract("\n  Just prose, no headings.  \n\n");
        assert_eq!(context_header(&h, "plan"), "Just prose, no headings.");
    }

    #[test]
    fn context_header_caps_long_raw_output_keeping_the_tail() {
        let line = "é".repeat(99) + "\n";
        let raw = line.repeat(200) + "THE END";
        let header = context_header(&extract(&raw), "plan");
        assert!(header.starts_with("[earlier output truncated: "));
        assert!(header.ends_with("THE END"));
        let body = header.split_once('\n').map(|(_, b)| b).unwrap_or_default();
        assert!(body.len() <= RAW_CONTEXT_LIMIT);
        assert!(body.starts_with('é'), "starts on a whole line");
        assert!(header.contains(&format!("of {} bytes omitted]", raw.len())));
    }

    #[test]
    fn metadata_of_structured_handoff() {
        let h = extract("## What Was Done\nabc\n## Open Questions\nnone\n\nOUTCOME: success");
        assert_eq!(
            metadata(&h),
            json!({
                "has_structured_data": true,
                "fields": ["what_was_done", "open_questions"],
                "outcome": "success",
                "what_was_done": "abc",
                "open_questions": "none",
                "lengths": {"raw": h.raw.chars().count(), "what_was_done": 3, "open_questions": 4},
            })
        );
    }

    #[test]
    fn metadata_of_failed_extraction() {
        let h = extract("prose");
        assert_eq!(
            metadata(&h),
            json!({"has_structured_data": false, "fields": [], "outcome": null,
                   "lengths": {"raw": 5}})
        );
    }

    #[test]
    fn handoff_round_trips_through_json() {
        let h = extract(FULL);
        let back: Handoff = serde_json::from_str(&serde_json::to_string(&h).unwrap()).unwrap();
        assert_eq!(back, h);
    }

    // Outcomes.

    #[test]
    fn outcome_from_heading() {
        assert_eq!(
            parse_outcome("## What Was Done\nx\n## Outcome\n\n  Needs Info \nmore text"),
            some("needs_info")
        );
        assert_eq!(parse_outcome("### OUTCOME\n**failure**."), some("failure"));
        assert_eq!(parse_outcome("## Outcome\n- success"), some("success"));
        assert_eq!(
            parse_outcome("## Outcome\nOutcome: needs_info"),
            some("needs_info")
        );
        // The Outcome section is not a handoff field.
        let h = extract("## Outcome\nsuccess");
        assert!(!h.structured);
        assert_eq!(h.outcome, some("success"));
    }

    #[test]
    fn outcome_from_last_line() {
        assert_eq!(
            parse_outcome("Done.\nOUTCOME: needs info"),
            some("needs_info")
        );
        assert_eq!(parse_outcome("Done.\noutcome:failure"), some("failure"));
        assert_eq!(parse_outcome("**Outcome:** `success`"), some("success"));
        assert_eq!(
            parse_outcome("Done.\nOUTCOME: needs-info"),
            some("needs_info")
        );
        assert_eq!(
            parse_outcome("## Outcome\n- **Needs-Info**."),
            some("needs_info")
        );
    }

    #[test]
    fn outcome_last_line_ignores_trailing_blank_lines() {
        assert_eq!(
            parse_outcome("Done.\nOUTCOME: success\n\n  \n"),
            some("success")
        );
    }

    #[test]
    fn outcome_absent() {
        for raw in [
            "",
            "All done.",
            "## Outcome\n\n",
            "OUTCOME:   ",
            "## What Was Done\nx",
        ] {
            assert_eq!(parse_outcome(raw), None, "{raw:?}");
        }
    }

    #[test]
    fn outcome_mention_before_the_last_line_is_ignored() {
        assert_eq!(parse_outcome("OUTCOME: failure\nThen I fixed it."), None);
        assert_eq!(parse_outcome("The outcome: unclear\nbye"), None);
    }

    #[test]
    fn outcome_heading_wins_over_last_line() {
        assert_eq!(
            parse_outcome("## Outcome\nsuccess\n\nOUTCOME: failure"),
            some("success")
        );
    }

    #[test]
    fn outcome_line_is_not_part_of_the_last_section() {
        let h = extract("## Next Agent Context\nShip it.\n\nOUTCOME: success\n");
        assert_eq!(h.fields.next_agent_context, some("Ship it."));
        assert_eq!(h.outcome, some("success"));
    }
}
