//! Agents that fail `agents check` are marked before a step fails on them: ⚠ on the tab, the
//! reason in the detail pane, and in the playground's list, which preselects one that
//! works. Snapshots at 80×24 and 120×36.

mod tui_support;

use baton::tui::event::AppEvent;
use baton::tui::playground::{AgentChoice, PlaygroundEvent};
use crossterm::event::KeyCode;
use insta::assert_snapshot;
use tui_support::*;

const WHY: &str = "`claude` is not on PATH — install it (npm i -g @anthropic-ai/claude-code)";

/// What `agents check` says of a built-in profile whose CLI is missing, in full.
const MISSING: &str = "`claude` is not on PATH — install it (`npm install -g @anthropic-ai/claude-code`) or put its full path in `argv` in your own .baton/agents/demo-coder.json, which overrides the built-in profile (`baton init --agent claude|codex|opencode|openai` writes one)";

fn marked(w: u16, h: u16) -> Harness {
    marked_with(w, h, WHY)
}

fn marked_with(w: u16, h: u16, why: &str) -> Harness {
    let mut h = Harness::new(w, h);
    let mut problems = std::collections::HashMap::new();
    problems.insert("demo-coder".to_string(), why.to_string());
    h.event(AppEvent::AgentProblems(problems));
    let (detail, log) = running_detail();
    h.select(2);
    h.serve(&detail, &log);
    h
}

#[test]
fn the_tab_and_the_detail_pane_name_the_failing_agent_120x36() {
    let mut h = marked(120, 36);
    let screen = h.screen();
    assert!(screen.contains("⚠ Demo"), "{screen}");
    assert!(
        screen.contains("⚠ agent demo-coder cannot run here"),
        "{screen}"
    );
    assert_snapshot!(screen);
}

#[test]
fn the_tab_and_the_detail_pane_name_the_failing_agent_80x24() {
    let mut h = marked(80, 24);
    assert_snapshot!(h.screen());
}

#[test]
fn agents_failing_for_one_reason_share_one_warning() {
    let mut h = Harness::new(120, 36);
    let mut problems = std::collections::HashMap::new();
    for agent in ["demo-planner", "demo-coder", "demo-reviewer"] {
        problems.insert(agent.to_string(), WHY.to_string());
    }
    h.event(AppEvent::AgentProblems(problems));
    let (detail, log) = running_detail();
    h.select(2);
    h.serve(&detail, &log);
    let screen = h.screen();
    assert_eq!(
        screen.matches("cannot run here").count(),
        1,
        "one warning for the three agents:\n{screen}"
    );
    assert!(
        screen.contains("⚠ agents demo-planner, demo-coder,")
            && screen.contains("demo-reviewer cannot run here"),
        "{screen}"
    );
}

fn choice(id: &str, problem: Option<&str>) -> AgentChoice {
    AgentChoice {
        id: id.into(),
        backend: "claude".into(),
        name: format!("{id} profile"),
        problem: problem.map(String::from),
    }
}

#[test]
fn the_playground_marks_failing_agents_and_preselects_one_that_works() {
    let mut h = marked(120, 36);
    // Task 2 runs `build`, whose agent (demo-coder) is the failing one.
    h.key(KeyCode::Char('p'));
    let list = vec![
        choice("coder", None),
        choice("demo-coder", None),
        choice("reviewer", None),
    ];
    h.event(AppEvent::Playground(PlaygroundEvent::Agents(Ok(list))));
    let view = h
        .app
        .modals
        .iter()
        .find_map(|m| match m {
            baton::tui::modal::Modal::Playground(v) => Some(v),
            _ => None,
        })
        .expect("playground");
    assert_eq!(view.choices()[1].problem.as_deref(), Some(WHY));
    assert_eq!(view.cursor, 0, "the first agent that works, not demo-coder");
    assert_snapshot!(h.screen());
}

#[test]
fn the_playground_at_80x24() {
    let mut h = marked(80, 24);
    h.key(KeyCode::Char('p'));
    let list = vec![choice("demo-coder", None), choice("coder", None)];
    h.event(AppEvent::Playground(PlaygroundEvent::Agents(Ok(list))));
    assert_snapshot!(h.screen());
}

/// The screen's rows, without the borders and panes around the words.
fn rows(screen: &str) -> Vec<String> {
    screen.lines().map(|l| l.replace(['│', '"'], " ")).collect()
}

#[test]
fn the_detail_pane_wraps_the_reason_between_words_so_the_install_command_reads_whole_at_80x24() {
    let mut h = marked_with(80, 24, MISSING);
    let screen = h.screen();
    let rows = rows(&screen);
    // The command spans rows, each broken at a space, its package name on one row.
    assert!(rows.iter().any(|r| r.contains("(`npm ")), "{screen}");
    assert!(rows.iter().any(|r| r.contains(" install -g ")), "{screen}");
    assert!(
        rows.iter()
            .any(|r| r.contains(" @anthropic-ai/claude-code`) ")),
        "{screen}"
    );
    assert_snapshot!(screen);
}

#[test]
fn the_playground_says_a_long_reason_in_full_under_the_form_at_80x24() {
    let mut h = marked_with(80, 24, MISSING);
    h.key(KeyCode::Char('p'));
    let list = vec![choice("demo-coder", None), choice("coder", None)];
    h.event(AppEvent::Playground(PlaygroundEvent::Agents(Ok(list))));
    let screen = h.screen();
    assert!(
        screen.contains("(`npm install -g @anthropic-ai/claude-code`)"),
        "{screen}"
    );
    assert!(
        screen.contains("(`baton init --agent claude|codex|opencode|openai` writes"),
        "the reason to its end, each command on one row:\n{screen}"
    );
    assert_snapshot!(screen);
}
