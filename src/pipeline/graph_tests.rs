//! Cases for the pipeline drawing.

use super::Pipeline;
use super::graph::*;

fn feature() -> Pipeline {
    let text = r#"{"id": "f", "name": "Feature", "statuses": [
      {"id": "todo", "kind": "queue"},
      {"id": "build", "step": {"run": "make"}},
      {"id": "review", "kind": "gate"},
      {"id": "done", "kind": "done"},
      {"id": "failed", "kind": "failed"},
      {"id": "cancelled", "kind": "cancelled"}],
      "transitions": [
      {"from": "review", "to": "done", "on": "approve", "hooks": [{"merge": {}}]},
      {"from": "review", "to": "build", "on": "reject", "guards": [{"max_visits": 3}]},
      {"from": "*", "to": "todo", "on": "manual", "label": "Back"}]}"#;
    let (p, d) = crate::pipeline::parse_pipeline("f.json", text, None);
    p.unwrap_or_else(|| panic!("{d:?}"))
}

#[test]
fn a_pipeline_on_its_own() {
    let got = text(&feature(), &TaskPath::default());
    let want = "\
Feature (f)
  ○ todo      queue
    └─ start ─▶ build (default)
  ■ build     run: make
    ├─ success        ─▶ review (default)
    └─ failure, error ─▶ failed (default)
  ◆ review    gate
    ├─ approve ─▶ done ⚑ merge
    └─ reject  ─▶ build [max_visits: 3]
  ✓ done      done
  ✗ failed    failed
  ⊘ cancelled cancelled
  * from any status that has not ended
    └─ manual ─▶ todo “Back”
  abort ─▶ cancelled from any status (default)
  ○ queue ◆ gate ■ step ✓ done ✗ failed ⊘ cancelled · ×n visits ✓n taken
";
    assert_eq!(got, want);
}

#[test]
fn the_path_of_a_task_is_marked_with_counts() {
    let moves = [
        (None, "todo", "create"),
        (Some("todo"), "build", "start"),
        (Some("build"), "review", "success"),
        (Some("review"), "build", "reject"),
        (Some("build"), "review", "success"),
    ];
    let path = TaskPath {
        current: Some("review".into()),
        moves: moves
            .iter()
            .map(|(f, t, tr)| (f.map(String::from), t.to_string(), tr.to_string()))
            .collect(),
    };
    let lines = draw(&feature(), &path);
    let find = |needle: &str| {
        lines
            .iter()
            .find(|l| l.text().contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle}"))
    };
    let review = find("◆ review");
    assert!(review.text().starts_with("▶ "), "{}", review.text());
    assert!(review.text().ends_with("×2"));
    assert_eq!(review.0[0].1, Mark::Here);
    let build = find("■ build");
    assert_eq!(build.0[1].1, Mark::Visited);
    assert!(find("reject  ─▶ build").text().ends_with("✓1"));
    assert!(find("success        ─▶ review").text().ends_with("✓2"));
    assert_eq!(find("✓ done").0[1].1, Mark::Plain);
    assert!(!find("approve").text().contains('✓'));
}

#[test]
fn hostile_names_stay_on_their_line() {
    let mut p = feature();
    p.name = "x\n\x1b[2Jy".into();
    p.statuses[0].label = "a\rb".into();
    for line in draw(&p, &TaskPath::default()) {
        assert!(
            !line.text().chars().any(char::is_control),
            "{:?}",
            line.text()
        );
    }
}
