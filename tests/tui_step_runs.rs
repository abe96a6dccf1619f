//! The board tells what to press at a gate, and the step list separates runs and shows
//! where a breakpoint waits. Snapshots at 80×24 and 120×36.

mod tui_support;

use baton::store::StepState;
use baton::tui::event::TaskDetail;
use crossterm::event::KeyCode;
use insta::assert_snapshot;
use tui_support::*;

fn at_gate(w: u16, h: u16) -> Harness {
    let mut h = Harness::new(w, h);
    h.select(4);
    h.serve(&gate_detail(), &[]);
    h
}

#[test]
fn a_card_at_review_says_what_to_press_120x36() {
    let mut h = at_gate(120, 36);
    let screen = h.screen();
    let footer = screen.lines().last().expect("footer");
    assert!(
        footer.contains("a approve") && footer.contains("r reject with a note"),
        "{footer}"
    );
    assert_snapshot!(screen);
}

#[test]
fn a_card_at_review_says_what_to_press_80x24() {
    let mut h = at_gate(80, 24);
    assert_snapshot!(h.screen());
}

/// Task 2 on its second run (a retry), with a breakpoint before `test`.
fn two_runs() -> TaskDetail {
    let (mut d, _) = running_detail();
    let mut old_plan = step(9, 2, "plan", StepState::Succeeded, 2);
    old_plan.run_id = 0;
    let mut old_build = step(10, 2, "build", StepState::Failed, 5);
    old_build.run_id = 0;
    d.steps.insert(0, old_build);
    d.steps.insert(0, old_plan);
    d.task.breakpoint = Some("test".into());
    d
}

#[test]
fn the_step_list_separates_runs_and_marks_the_breakpoint_120x36() {
    let mut h = Harness::new(120, 36);
    let (_, log) = running_detail();
    h.select(2);
    h.key(KeyCode::Enter);
    h.serve(&two_runs(), &log);
    let screen = h.screen();
    assert!(screen.contains("── run 2 "), "{screen}");
    assert!(screen.contains("⏸ test · breakpoint"), "{screen}");
    assert_snapshot!(screen);
}

#[test]
fn the_step_list_separates_runs_and_marks_the_breakpoint_80x24() {
    let mut h = Harness::new(80, 24);
    let (_, log) = running_detail();
    h.select(2);
    h.key(KeyCode::Enter);
    h.serve(&two_runs(), &log);
    assert_snapshot!(h.screen());
}
