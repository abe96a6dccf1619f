//! Table tests for `decide`, `decide_move` and `move_options`.

use super::*;
use std::collections::HashMap;

/// Statuses 0..8; transition indexes are noted because the tests assert them.
const MAIN: &str = r#"{
  "id": "main", "name": "Main",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "plan", "step": {"agent": "planner"}},
    {"id": "plan_review", "kind": "gate"},
    {"id": "build", "step": {"run": "make"}},
    {"id": "test", "step": {"run": "make test"}},
    {"id": "review", "kind": "gate"},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"},
    {"id": "cancelled", "kind": "cancelled"}
  ],
  "transitions": [
    {"from": "todo", "to": "plan", "on": "start"},
    {"from": "plan_review", "to": "build", "on": "approve"},
    {"from": "plan_review", "to": "plan", "on": "reject"},
    {"from": "test", "to": "build", "on": "failure", "guards": [{"max_visits": 3}]},
    {"from": "review", "to": "done", "on": "approve", "hooks": [{"merge": {}}], "guards": [{"clean_worktree": true}]},
    {"from": "review", "to": "build", "on": "reject", "label": "Changes requested", "guards": [{"max_visits": 3}]},
    {"from": "build", "to": "todo", "on": "outcome:needs_info"},
    {"from": "build", "to": "review", "on": "outcome:quick", "guards": [{"budget": 2.5}]},
    {"from": "build", "to": "test", "on": "outcome:quick"},
    {"from": "plan", "to": "plan_review", "on": "success", "guards": [{"has_handoff_field": "next_agent_context"}]},
    {"from": "*", "to": "todo", "on": "manual", "label": "Back to to-do"},
    {"from": "*", "to": "review", "on": "manual", "label": "Jump to review", "guards": [{"no_running_step": true}]},
    {"from": "review", "to": "plan", "on": "manual", "label": "Re-plan"},
    {"from": "done", "to": "todo", "on": "manual"}
  ]
}"#;

/// No own transitions, no `cancelled`: exercises the defaults and `*`.
const MINI: &str = r#"{
  "id": "mini", "name": "Mini",
  "statuses": [
    {"id": "inbox", "kind": "queue"},
    {"id": "check", "kind": "gate"},
    {"id": "work", "step": {"run": "true"}},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"}
  ],
  "transitions": [
    {"from": "*", "to": "done", "on": "approve", "label": "Fast track", "guards": [{"budget": 1}]}
  ]
}"#;

/// No `failed` and no `cancelled`; a trailing gate with no next status.
const BARE: &str = r#"{
  "id": "bare", "name": "Bare",
  "statuses": [
    {"id": "a", "kind": "queue"},
    {"id": "s", "step": {"run": "true"}},
    {"id": "d", "kind": "done"},
    {"id": "g", "kind": "gate"}
  ],
  "transitions": [{"from": "s", "to": "g", "on": "outcome:later"}]
}"#;

/// Move preference: own before `*`, `manual` before other human triggers.
const PREF: &str = r#"{
  "id": "pref", "name": "Pref",
  "statuses": [
    {"id": "g", "kind": "gate"},
    {"id": "x", "kind": "gate"},
    {"id": "done", "kind": "done"}
  ],
  "transitions": [
    {"from": "*", "to": "x", "on": "manual", "label": "star"},
    {"from": "g", "to": "x", "on": "approve", "label": "own approve"},
    {"from": "g", "to": "x", "on": "manual", "label": "own manual"},
    {"from": "x", "to": "done", "on": "approve", "guards": [{"budget": 1}]},
    {"from": "x", "to": "done", "on": "manual", "guards": [{"no_running_step": true}]}
  ]
}"#;

fn pipeline(key: &str) -> Pipeline {
    let text = match key {
        "main" => MAIN,
        "mini" => MINI,
        "bare" => BARE,
        _ => PREF,
    };
    let (p, diags) = parse_pipeline(key, text, None);
    let errors: Vec<_> = diags.iter().filter(|d| d.is_error()).collect();
    assert!(errors.is_empty(), "{key}: {errors:?}");
    p.expect("test pipeline parses")
}

/// Owned facts, tweaked per case.
#[derive(Default)]
struct F {
    visits: HashMap<String, u32>,
    running: bool,
    fields: Vec<String>,
    clean: Option<bool>,
    cost: f64,
    forge: bool,
}

impl F {
    fn facts(&self) -> Facts<'_> {
        Facts {
            visits: &self.visits,
            step_running: self.running,
            handoff_fields: &self.fields,
            worktree_clean: self.clean,
            run_cost: self.cost,
            forge: self.forge,
        }
    }
}

fn none(_: &mut F) {}
fn build3(f: &mut F) {
    f.visits.insert("build".into(), 3);
}
fn build1(f: &mut F) {
    f.visits.insert("build".into(), 1);
}
fn dirty(f: &mut F) {
    f.clean = Some(false);
}
fn clean(f: &mut F) {
    f.clean = Some(true);
}
fn running(f: &mut F) {
    f.running = true;
}
fn handoff(f: &mut F) {
    f.fields = vec!["what_was_done".into(), "next_agent_context".into()];
}
fn cheap(f: &mut F) {
    f.cost = 0.5;
}
fn pricey(f: &mut F) {
    f.cost = 3.0;
}

/// Expected outcome of one case.
#[derive(Debug)]
enum Want {
    /// Target, explicit transition index (None = default), blocked_by.
    To(&'static str, Option<usize>, &'static [&'static str]),
    Unknown,
    Terminal,
    NoTransition,
    Blocked(&'static [&'static str]),
    NotAllowed,
}

fn check(name: &str, got: Result<Decision, DecideError>, want: &Want) {
    match (want, &got) {
        (Want::To(to, index, blocked), Ok(d)) => {
            assert_eq!(d.to, *to, "{name}: target");
            assert_eq!(d.transition, *index, "{name}: transition index");
            assert_eq!(d.blocked_by, *blocked, "{name}: blocked_by");
            for b in *blocked {
                assert!(
                    d.guards.iter().any(|g| g.guard == *b && !g.passed),
                    "{name}: {b} in guards"
                );
            }
        }
        (Want::Blocked(blocked), Err(DecideError::Blocked { blocked_by, .. })) => {
            assert_eq!(blocked_by, blocked, "{name}: blocked_by");
        }
        (Want::Unknown, Err(DecideError::UnknownStatus { .. }))
        | (Want::Terminal, Err(DecideError::Terminal { .. }))
        | (Want::NoTransition, Err(DecideError::NoTransition { .. }))
        | (Want::NotAllowed, Err(DecideError::NotAllowed { .. })) => {}
        _ => panic!("{name}: wanted {want:?}, got {got:?}"),
    }
}

fn t(s: &str) -> Trigger {
    match s {
        "resume" => Trigger::Resume,
        "retry" => Trigger::Retry,
        _ => Trigger::parse(s).expect("test trigger"),
    }
}

type Case = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    fn(&mut F),
    Want,
);

#[test]
fn decide_table() {
    use Want::*;
    #[rustfmt::skip]
    let cases: Vec<Case> = vec![
        // start
        ("start explicit", "main", "todo", "start", none, To("plan", Some(0), &[])),
        ("start default from queue", "mini", "inbox", "start", none, To("check", None, &[])),
        ("start not from a step", "main", "plan", "start", none, NoTransition),
        ("start not from a gate", "mini", "check", "start", none, NoTransition),
        // approve
        ("approve own", "main", "plan_review", "approve", none, To("build", Some(1), &[])),
        ("approve guard passes", "main", "review", "approve", clean, To("done", Some(4), &[])),
        ("approve no worktree passes", "main", "review", "approve", none, To("done", Some(4), &[])),
        ("approve blocked then default", "main", "review", "approve", dirty, To("done", None, &["clean_worktree"])),
        ("approve star", "mini", "check", "approve", cheap, To("done", Some(0), &[])),
        ("approve star blocked then default", "mini", "check", "approve", pricey, To("work", None, &["budget: 1"])),
        ("approve star at queue", "mini", "inbox", "approve", cheap, To("done", Some(0), &[])),
        ("approve blocked no default", "mini", "inbox", "approve", pricey, Blocked(&["budget: 1"])),
        ("approve last gate", "bare", "g", "approve", none, NoTransition),
        // reject
        ("reject own", "main", "plan_review", "reject", none, To("plan", Some(2), &[])),
        ("reject guard passes", "main", "review", "reject", build1, To("build", Some(5), &[])),
        ("reject blocked", "main", "review", "reject", build3, Blocked(&["max_visits: 3"])),
        ("reject none", "main", "todo", "reject", none, NoTransition),
        ("reject no default", "mini", "check", "reject", none, NoTransition),
        // manual and `*`
        ("manual own before star", "main", "review", "manual", none, To("plan", Some(12), &[])),
        ("manual star file order", "main", "build", "manual", none, To("todo", Some(10), &[])),
        ("manual star skips own target", "main", "todo", "manual", none, To("review", Some(11), &[])),
        ("manual star blocked", "main", "todo", "manual", running, Blocked(&["no_running_step"])),
        ("manual at terminal", "main", "done", "manual", none, Terminal),
        ("manual none", "bare", "s", "manual", none, NoTransition),
        // success
        ("success guard passes", "main", "plan", "success", handoff, To("plan_review", Some(9), &[])),
        ("success blocked then default", "main", "plan", "success", none, To("plan_review", None, &["has_handoff_field: next_agent_context"])),
        ("success default next", "main", "build", "success", none, To("test", None, &[])),
        ("success default next gate", "main", "test", "success", none, To("review", None, &[])),
        ("success mini", "mini", "work", "success", none, To("done", None, &[])),
        ("success bare", "bare", "s", "success", none, To("d", None, &[])),
        // failure / error
        ("failure loop", "main", "test", "failure", build1, To("build", Some(3), &[])),
        ("failure loop blocked ends failed", "main", "test", "failure", build3, To("failed", None, &["max_visits: 3"])),
        ("failure default", "main", "build", "failure", none, To("failed", None, &[])),
        ("error skips failure loop", "main", "test", "error", none, To("failed", None, &[])),
        ("error default", "mini", "work", "error", none, To("failed", None, &[])),
        ("failure without failed", "bare", "s", "failure", none, NoTransition),
        ("error without failed", "bare", "s", "error", none, NoTransition),
        // abort
        ("abort to cancelled", "main", "build", "abort", none, To("cancelled", None, &[])),
        ("abort from gate", "main", "review", "abort", none, To("cancelled", None, &[])),
        ("abort from queue", "main", "todo", "abort", none, To("cancelled", None, &[])),
        ("abort to failed", "mini", "work", "abort", none, To("failed", None, &[])),
        ("abort nowhere", "bare", "s", "abort", none, NoTransition),
        ("abort at done", "main", "done", "abort", none, Terminal),
        ("abort at failed", "main", "failed", "abort", none, Terminal),
        ("abort at cancelled", "main", "cancelled", "abort", none, Terminal),
        // outcomes
        ("outcome routed", "main", "build", "outcome:needs_info", none, To("todo", Some(6), &[])),
        ("outcome first in file order", "main", "build", "outcome:quick", cheap, To("review", Some(7), &[])),
        ("outcome second in file order", "main", "build", "outcome:quick", pricey, To("test", Some(8), &["budget: 2.5"])),
        ("outcome unknown waits", "main", "build", "outcome:other", none, NoTransition),
        ("outcome elsewhere waits", "main", "plan", "outcome:needs_info", none, NoTransition),
        ("outcome:success default", "main", "build", "outcome:success", none, To("test", None, &[])),
        ("outcome:success explicit success", "main", "plan", "outcome:success", handoff, To("plan_review", Some(9), &[])),
        ("outcome:failure default", "main", "build", "outcome:failure", none, To("failed", None, &[])),
        ("outcome:failure explicit failure", "main", "test", "outcome:failure", none, To("build", Some(3), &[])),
        ("outcome explicit", "bare", "s", "outcome:later", none, To("g", Some(0), &[])),
        // engine actions and bad input
        ("resume", "main", "build", "resume", none, NoTransition),
        ("retry", "main", "build", "retry", none, NoTransition),
        ("retry at failed", "main", "failed", "retry", none, Terminal),
        ("unknown status", "main", "nope", "start", none, Unknown),
    ];
    for (name, key, from, trigger, tweak, want) in &cases {
        let p = pipeline(key);
        let mut f = F::default();
        tweak(&mut f);
        check(name, decide(&p, from, &t(trigger), &f.facts()), want);
    }
}

#[test]
fn decision_details() {
    let p = pipeline("main");
    let mut f = F::default();
    build3(&mut f);
    let d = decide(&p, "test", &Trigger::Failure, &f.facts()).expect("decides");
    assert_eq!(d.trigger, Trigger::Failure);
    assert_eq!(
        d.guards,
        vec![GuardCheck {
            guard: "max_visits: 3".into(),
            passed: false,
            detail: "max_visits 3 reached".into(),
        }]
    );
    assert!(d.hooks.is_empty());

    let f = F::default();
    let d = decide(&p, "review", &Trigger::Approve, &f.facts()).expect("decides");
    assert_eq!(d.hooks, vec![Hook::Merge(serde_json::json!({}))]);
    let d = decide(&p, "review", &Trigger::Reject, &f.facts()).expect("decides");
    assert_eq!(d.label.as_deref(), Some("Changes requested"));
    // outcome:success reports the trigger actually used.
    let d = decide(&p, "build", &t("outcome:success"), &f.facts()).expect("decides");
    assert_eq!(d.trigger, Trigger::Success);
    let d = decide(&p, "build", &t("outcome:needs_info"), &f.facts()).expect("decides");
    assert_eq!(d.trigger, t("outcome:needs_info"));
}

#[test]
fn error_messages_are_plain() {
    let p = pipeline("main");
    let f = F::default();
    let msg = |r: Result<Decision, DecideError>| r.expect_err("fails").to_string();
    assert_eq!(
        msg(decide(&p, "done", &Trigger::Abort, &f.facts())),
        "task is at terminal status `done`"
    );
    assert_eq!(
        msg(decide(&p, "todo", &Trigger::Reject, &f.facts())),
        "no transition from `todo` on `reject`"
    );
    let mut f = F::default();
    build3(&mut f);
    assert_eq!(
        msg(decide(&p, "review", &Trigger::Reject, &f.facts())),
        "the move from `review` on `reject` is blocked by max_visits: 3"
    );
    assert_eq!(
        msg(decide_move(&p, "build", "test", &f.facts())),
        "the pipeline has no move from `build` to `test`"
    );
}

type MoveCase = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    fn(&mut F),
    Want,
    Option<&'static str>,
);

#[test]
fn decide_move_table() {
    use Want::*;
    #[rustfmt::skip]
    let cases: Vec<MoveCase> = vec![
        ("start explicit", "main", "todo", "plan", none, To("plan", Some(0), &[]), Some("start")),
        ("reject as move", "main", "review", "build", none, To("build", Some(5), &[]), Some("reject")),
        ("own manual", "main", "review", "plan", none, To("plan", Some(12), &[]), Some("manual")),
        ("star manual", "main", "review", "todo", none, To("todo", Some(10), &[]), Some("manual")),
        ("approve as move", "main", "review", "done", clean, To("done", Some(4), &[]), Some("approve")),
        ("approve move blocked", "main", "review", "done", dirty, Blocked(&["clean_worktree"]), None),
        ("star blocked", "main", "build", "review", running, Blocked(&["no_running_step"]), None),
        ("star allowed", "main", "build", "review", none, To("review", Some(11), &[]), Some("manual")),
        ("no such move", "main", "build", "test", none, NotAllowed, None),
        ("to itself", "main", "review", "review", none, NotAllowed, None),
        ("step result is not a move", "main", "test", "failed", none, NotAllowed, None),
        ("from terminal", "main", "done", "todo", none, Terminal, None),
        ("unknown from", "main", "nope", "todo", none, Unknown, None),
        ("unknown to", "main", "todo", "nope", none, Unknown, None),
        ("default start", "mini", "inbox", "check", none, To("check", None, &[]), Some("start")),
        ("default approve", "mini", "check", "work", none, To("work", None, &[]), Some("approve")),
        ("star approve", "mini", "check", "done", cheap, To("done", Some(0), &[]), Some("approve")),
        ("star approve blocked", "mini", "check", "done", pricey, Blocked(&["budget: 1"]), None),
        ("skip ahead", "mini", "inbox", "work", none, NotAllowed, None),
        ("own manual preferred", "pref", "g", "x", none, To("x", Some(2), &[]), Some("manual")),
        ("manual blocked, approve next", "pref", "x", "done", running, To("done", Some(3), &["no_running_step"]), Some("approve")),
        ("all blocked", "pref", "x", "done", |f| { f.running = true; f.cost = 5.0 }, Blocked(&["no_running_step", "budget: 1"]), None),
    ];
    for (name, key, from, to, tweak, want, trigger) in &cases {
        let p = pipeline(key);
        let mut f = F::default();
        tweak(&mut f);
        let got = decide_move(&p, from, to, &f.facts());
        if let (Some(trigger), Ok(d)) = (trigger, &got) {
            assert_eq!(d.trigger, t(trigger), "{name}: trigger");
        }
        check(name, got, want);
    }
}

#[test]
fn move_options_table() {
    // (pipeline, from, tweak, expected [(to, trigger, allowed)])
    type Row = (&'static str, &'static str, bool);
    type OptionsCase = (&'static str, &'static str, fn(&mut F), Vec<Row>);
    let cases: Vec<OptionsCase> = vec![
        (
            "main",
            "review",
            dirty,
            vec![
                ("todo", "manual", true),
                ("plan", "manual", true),
                ("build", "reject", true),
                ("done", "approve", false),
            ],
        ),
        (
            "main",
            "build",
            running,
            vec![("todo", "manual", true), ("review", "manual", false)],
        ),
        (
            "mini",
            "inbox",
            pricey,
            vec![("check", "start", true), ("done", "approve", false)],
        ),
        (
            "mini",
            "check",
            cheap,
            vec![("work", "approve", true), ("done", "approve", true)],
        ),
        ("main", "done", none, vec![]),
        ("main", "nope", none, vec![]),
        ("bare", "s", none, vec![]),
    ];
    for (key, from, tweak, want) in cases {
        let p = pipeline(key);
        let mut f = F::default();
        tweak(&mut f);
        let got: Vec<(String, String, bool)> = move_options(&p, from, &f.facts())
            .into_iter()
            .map(|o| {
                assert_eq!(o.allowed, o.blocked_by.is_empty(), "{key}/{from}: {o:?}");
                (o.to, o.trigger.to_string(), o.allowed)
            })
            .collect();
        let want: Vec<(String, String, bool)> = want
            .into_iter()
            .map(|(to, trigger, allowed)| (to.to_string(), trigger.to_string(), allowed))
            .collect();
        assert_eq!(got, want, "{key}/{from}");
    }
    let p = pipeline("main");
    let f = F::default();
    let options = move_options(&p, "review", &f.facts());
    assert_eq!(options[0].label.as_deref(), Some("Back to to-do"));
}

/// Each guard checked says what it found, in words a history can show.
#[test]
fn guard_details_say_what_they_found() {
    let p = pipeline("main");
    let details = |d: &Decision| -> Vec<(bool, String)> {
        d.guards
            .iter()
            .map(|g| (g.passed, g.detail.clone()))
            .collect()
    };
    let f = F::default();
    let d = decide(&p, "test", &Trigger::Failure, &f.facts()).expect("decides");
    assert_eq!(
        details(&d),
        vec![(true, "build entered 0 of 3 times".into())]
    );
    let mut f = F::default();
    pricey(&mut f);
    let d = decide(&p, "build", &t("outcome:quick"), &f.facts()).expect("decides");
    assert_eq!(
        details(&d),
        vec![(false, "budget $2.50 reached ($3.00 spent)".into())]
    );
    let f = F {
        cost: 1.0,
        ..F::default()
    };
    let d = decide(&p, "build", &t("outcome:quick"), &f.facts()).expect("decides");
    assert_eq!(details(&d), vec![(true, "$1.00 spent of $2.50".into())]);
}

#[test]
fn dollars_keep_the_digits_that_matter() {
    for (amount, shown) in [
        (0.0, "$0.00"),
        (1.0, "$1.00"),
        (2.5, "$2.50"),
        (0.002, "$0.002"),
        (0.0123, "$0.0123"),
        (0.000_15, "$0.00015"),
        (12.345_678_9, "$12.345679"),
    ] {
        assert_eq!(super::usd(amount), shown, "{amount}");
    }
}
