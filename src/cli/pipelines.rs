//! `baton pipelines …` and `baton agents …`.

use super::{AgentsCmd, Failure, Outcome, PipelinesCmd, exit, tasks::catalog, workspace};
use crate::ansi::strip;
use crate::pipeline::{Pipeline, Severity, StatusKind, parse_pipeline};
use std::path::PathBuf;

/// `baton pipelines …`. `validate FILE…` works outside a workspace too.
pub fn run(dir: Option<&PathBuf>, cmd: PipelinesCmd) -> Outcome {
    match cmd {
        PipelinesCmd::Validate { files } => validate(dir, files),
        PipelinesCmd::List => {
            let ws = workspace(dir)?;
            let cat = catalog(&ws);
            for p in &cat.pipelines {
                let steps = p
                    .statuses
                    .iter()
                    .filter(|s| s.kind == StatusKind::Step)
                    .count();
                outln!(
                    "{:<14} {:<20} {} statuses, {} step{}  {}",
                    p.id,
                    strip(&p.name),
                    p.statuses.len(),
                    steps,
                    if steps == 1 { "" } else { "s" },
                    strip(&p.description)
                );
            }
            Ok(exit::OK)
        }
        PipelinesCmd::Show { id } => {
            let p = find(dir, &id)?;
            show(&p);
            Ok(exit::OK)
        }
        PipelinesCmd::Graph { id, text } => {
            let p = find(dir, &id)?;
            if text {
                let drawn = crate::pipeline::graph::text(&p, &Default::default());
                print!("{}", strip(&drawn));
            } else {
                print!("{}", graph(&p));
            }
            Ok(exit::OK)
        }
    }
}

fn find(dir: Option<&PathBuf>, id: &str) -> Result<Pipeline, Failure> {
    let ws = workspace(dir)?;
    let catalog = catalog(&ws);
    catalog
        .get(id)
        .cloned()
        .ok_or_else(|| Failure::new(catalog.not_found(id)))
}

fn show(p: &Pipeline) {
    outln!("{} — {}", p.id, strip(&p.name));
    if !p.description.is_empty() {
        outln!("{}", strip(&p.description));
    }
    outln!("\nstatuses:");
    for s in &p.statuses {
        let what = match &s.step {
            Some(step) => step.action.describe(),
            None => s.kind.as_str().to_string(),
        };
        outln!("  {:<14} {:<18} {}", s.id, strip(&s.label), strip(&what));
    }
    outln!("\ntransitions:");
    for t in &p.transitions {
        let guards: Vec<String> = t.guards.iter().map(|g| g.name()).collect();
        let hooks: Vec<&str> = t.hooks.iter().map(|h| h.name()).collect();
        let mut line = format!("  {:<14} → {:<14} on {}", t.from, t.to, t.on);
        if !guards.is_empty() {
            line.push_str(&format!("  guards [{}]", guards.join(", ")));
        }
        if !hooks.is_empty() {
            line.push_str(&format!("  hooks [{}]", hooks.join(", ")));
        }
        outln!("{}", strip(&line));
    }
    outln!(
        "\n(defaults: success → next status, failure/error → first failed, abort → first cancelled)"
    );
}

/// The pipeline as a Graphviz digraph.
pub fn graph(p: &Pipeline) -> String {
    let mut out = format!("digraph {} {{\n  rankdir=LR;\n", dot(&p.id));
    for s in &p.statuses {
        let shape = match s.kind {
            StatusKind::Gate => "diamond",
            StatusKind::Step => "box",
            k if k.is_terminal() => "doublecircle",
            _ => "ellipse",
        };
        out.push_str(&format!(
            "  {} [label={}, shape={shape}];\n",
            dot(&s.id),
            dot(&s.label)
        ));
    }
    for t in &p.transitions {
        let froms: Vec<&str> = if t.from == "*" {
            p.statuses
                .iter()
                .filter(|s| !s.kind.is_terminal())
                .map(|s| s.id.as_str())
                .collect()
        } else {
            vec![t.from.as_str()]
        };
        for f in froms.into_iter().filter(|f| *f != t.to) {
            out.push_str(&format!(
                "  {} -> {} [label={}];\n",
                dot(f),
                dot(&t.to),
                dot(&t.on.to_string())
            ));
        }
    }
    // The defaults a status falls back on when it has no explicit transition (dashed).
    let has = |from: &str, on: &str| {
        p.transitions
            .iter()
            .any(|t| t.from == from && t.on.to_string() == on)
    };
    let failed = p.first_of_kind(StatusKind::Failed).map(|s| s.id.clone());
    for s in &p.statuses {
        let next = p.next_after(&s.id).map(|n| n.id.clone());
        let mut defaults: Vec<(&str, Option<String>)> = Vec::new();
        match s.kind {
            StatusKind::Step => {
                defaults.push(("success", next));
                defaults.push(("failure", failed.clone()));
            }
            StatusKind::Queue => defaults.push(("start", next)),
            StatusKind::Gate => defaults.push(("approve", next)),
            _ => {}
        }
        for (on, to) in defaults {
            if let Some(to) = to.filter(|_| !has(&s.id, on)) {
                out.push_str(&format!(
                    "  {} -> {} [label={}, style=dashed];\n",
                    dot(&s.id),
                    dot(&to),
                    dot(on)
                ));
            }
        }
    }
    out.push_str("}\n");
    out
}

/// `s` as a DOT quoted string: sanitised, with quotes, backslashes and line breaks escaped,
/// so no id or label can end the string and inject statements.
fn dot(s: &str) -> String {
    let mut out = String::from("\"");
    for c in crate::ansi::strip(s).chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn validate(dir: Option<&PathBuf>, files: Vec<PathBuf>) -> Outcome {
    let ws = workspace(dir).ok();
    let agents = crate::pipeline::agent_ids(ws.as_ref().map(|w| w.agents_dir()).as_deref());
    let files = if files.is_empty() {
        let Some(ws) = &ws else {
            return Err(Failure::new(
                "no files given and no workspace found — name the files, or run inside a workspace",
            ));
        };
        let mut found: Vec<PathBuf> = std::fs::read_dir(ws.pipelines_dir())
            .map(|d| {
                d.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "json"))
                    .collect()
            })
            .unwrap_or_default();
        found.sort();
        if found.is_empty() {
            outln!(
                "{} holds no pipeline files; the built-in ones are valid",
                ws.pipelines_dir().display()
            );
            return Ok(exit::OK);
        }
        found
    } else {
        files
    };
    let mut errors = 0;
    let mut warnings = 0;
    // Which file defined each id: two files with one id would leave one of them out.
    let mut defined: Vec<(String, String)> = Vec::new();
    for f in &files {
        let name = f.display().to_string();
        let text = match std::fs::read_to_string(f) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("{}: error: cannot read it: {e}", strip(&name));
                errors += 1;
                continue;
            }
        };
        let (pipeline, diags) = parse_pipeline(&name, &text, Some(&agents));
        for d in &diags {
            match d.severity {
                Severity::Error => errors += 1,
                Severity::Warning => warnings += 1,
            }
            eprintln!("{d}");
        }
        if let Some(p) = pipeline
            && diags.iter().all(|d| d.severity != Severity::Error)
        {
            let (_, trigger_errors) = crate::engine::triggers::parse(&p);
            for e in &trigger_errors {
                eprintln!("{name}: error: {}", strip(&e.to_string()));
            }
            errors += trigger_errors.len();
            if let Some((_, other)) = defined.iter().find(|(id, _)| *id == p.id) {
                eprintln!(
                    "{}: error: pipeline id `{}` is already defined by {}; ids must be unique, so rename one of them",
                    strip(&name),
                    p.id,
                    strip(other)
                );
                errors += 1;
                continue;
            }
            defined.push((p.id.clone(), name.clone()));
            let unlabelled = labels_no_engine_has(ws.as_ref(), &p);
            for (status, label) in &unlabelled {
                eprintln!(
                    "{}: warning: status `{status}` requires label `{label}`, which no engine of this board has had yet — `baton engine --labels {label}` starts one",
                    strip(&name)
                );
            }
            warnings += unlabelled.len();
            if trigger_errors.is_empty() {
                outln!("{name}: ok ({}, {} statuses)", p.id, p.statuses.len());
            }
        }
    }
    if errors > 0 {
        return Err(Failure::new(format!(
            "{errors} error(s), {warnings} warning(s) in {} file(s) — fix them and run `baton pipelines validate` again",
            files.len()
        )));
    }
    Ok(exit::OK)
}

/// The labels `p`'s steps require that no engine registered on the workspace's board has
/// (a board not made yet has none, and is not made here), as (status, label).
fn labels_no_engine_has(
    ws: Option<&crate::workspace::Workspace>,
    p: &crate::pipeline::Pipeline,
) -> Vec<(String, String)> {
    let required: Vec<(String, String)> = p
        .statuses
        .iter()
        .filter_map(|s| Some((s.id.clone(), s.step.as_ref()?.requires.clone())))
        .flat_map(|(id, labels)| labels.into_iter().map(move |l| (id.clone(), l)))
        .collect();
    let Some(ws) = ws.filter(|w| !required.is_empty() && w.db_path().exists()) else {
        return Vec::new();
    };
    let Ok(engines) = crate::engine::Reader::open(ws).and_then(|r| r.engines()) else {
        return Vec::new();
    };
    required
        .into_iter()
        .filter(|(_, l)| !engines.iter().any(|e| e.row.labels.contains(l)))
        .collect()
}

/// `baton agents …`: every profile (built-in and the workspace's), and with `check`
/// whether its backend answers. Profile errors go to stderr; `check` exits 1 on any problem.
pub fn agents(dir: Option<&PathBuf>, cmd: AgentsCmd) -> Outcome {
    let ws = workspace(dir).ok();
    let cat = crate::agents::load_agents(ws.as_ref().map(|w| w.agents_dir()).as_deref());
    for d in &cat.diagnostics {
        eprintln!("{d}");
    }
    let width = cat.profiles.iter().map(|p| p.id.len()).max().unwrap_or(0);
    match cmd {
        AgentsCmd::List => {
            for p in &cat.profiles {
                outln!(
                    "{:<width$}  {:<8}  {:<32}  {}",
                    p.id,
                    p.backend.as_str(),
                    strip(&p.target()),
                    strip(&p.file)
                );
            }
            Ok(exit::OK)
        }
        AgentsCmd::Check => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| Failure::new(format!("cannot start the async runtime: {e}")))?;
            let checks = rt.block_on(futures_util::future::join_all(
                cat.profiles.iter().map(crate::exec::agent::check),
            ));
            let mut bad = 0;
            for (p, h) in cat.profiles.iter().zip(&checks) {
                if !h.ok {
                    bad += 1;
                }
                outln!(
                    "{} {:<width$}  {:<8}  {}",
                    if h.ok { "ok  " } else { "FAIL" },
                    p.id,
                    p.backend.as_str(),
                    strip(&h.detail)
                );
            }
            let errors = cat.diagnostics.iter().filter(|d| d.is_error()).count();
            let executors = super::executors_check::check(ws.as_ref(), &cat.profiles, &rt);
            if bad > 0 || errors > 0 || executors > 0 {
                return Err(Failure::new(format!(
                    "{bad} of {} agent backend(s) did not answer, {executors} cluster check(s) failed and {errors} profile file(s) have errors — see above",
                    checks.len()
                )));
            }
            Ok(exit::OK)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graph_escapes_ids_and_labels_as_dot_strings() {
        let text = r#"{"id": "p", "statuses": [
            {"id": "a", "label": "A", "kind": "queue"},
            {"id": "b", "kind": "done"}]}"#;
        let (p, diags) = crate::pipeline::parse_pipeline("p.json", text, None);
        let mut p = p.unwrap_or_else(|| panic!("{diags:?}"));
        // Ids that validation refuses, as an older snapshot could still hold them.
        p.id = "g\"{".into();
        p.statuses[0].id = "\"];evil[".into();
        p.statuses[0].label = "tail\\".into();
        p.statuses[1].label = "two\nlines".into();
        let dot = graph(&p);
        assert!(dot.starts_with("digraph \"g\\\"{\" {\n"), "{dot}");
        assert!(
            dot.contains("  \"\\\"];evil[\" [label=\"tail\\\\\", shape=ellipse];\n"),
            "{dot}"
        );
        assert!(dot.contains("[label=\"two\\nlines\""), "{dot}");
        assert!(
            dot.contains("  \"\\\"];evil[\" -> \"b\" [label=\"start\", style=dashed];\n"),
            "{dot}"
        );
    }
}
