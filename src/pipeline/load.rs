//! Loading pipelines: JSON text to [`Pipeline`] with located, human-readable diagnostics, and
//! the catalog of built-in plus workspace pipelines.

use super::locate::json_error_position;
use super::model::Pipeline;
use super::parse::{Ctx, parse_root};
use super::validate::check;
use serde::Serialize;
use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;
use std::sync::OnceLock;

/// How bad a [`Diagnostic`] is: errors keep a pipeline out of the catalog, warnings do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// The file cannot be used as it is.
    Error,
    /// Worth fixing, but the pipeline still loads.
    Warning,
}

/// One problem found in a pipeline file, located as precisely as the loader could.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// The file as the user knows it (`pipelines/demo.json`, `.baton/pipelines/x.json`).
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column, when known.
    pub column: Option<usize>,
    /// Error or warning.
    pub severity: Severity,
    /// A plain reason, saying what to do where that is not obvious.
    pub message: String,
}

impl Diagnostic {
    /// True for [`Severity::Error`].
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    /// `file:line:col: error: message`, leaving out the parts that are unknown. Sanitised:
    /// messages quote the file's own text.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::ansi::strip(&self.file))?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(col) = self.column {
                write!(f, ":{col}")?;
            }
        }
        let label = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, ": {label}: {}", crate::ansi::strip(&self.message))
    }
}

/// Parses and validates one pipeline file.
///
/// Returns the pipeline only when there are no errors; the diagnostics hold every error and
/// warning found (not just the first). With `known_agents`, agent steps must name one of them.
pub fn parse_pipeline(
    file: &str,
    text: &str,
    known_agents: Option<&BTreeSet<String>>,
) -> (Option<Pipeline>, Vec<Diagnostic>) {
    let text = super::strip_bom(text);
    let root: serde_json::Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => return (None, vec![json_error(file, text, &e)]),
    };
    let mut ctx = Ctx::new(file, text);
    for (key, pos) in super::duplicate_keys(text) {
        ctx.diags.push(duplicate_key(file, &key, pos));
    }
    let parsed = parse_root(&mut ctx, &root, known_agents);
    if let Some(parsed) = &parsed {
        check(&mut ctx, parsed);
    }
    let ok = !ctx.has_errors();
    (parsed.filter(|_| ok).map(|p| p.pipeline), ctx.diags)
}

/// A key given twice in one object: JSON readers keep one silently, so it is an error.
pub(crate) fn duplicate_key(file: &str, key: &str, pos: (usize, usize)) -> Diagnostic {
    Diagnostic {
        file: file.to_string(),
        line: Some(pos.0),
        column: Some(pos.1),
        severity: Severity::Error,
        message: format!(
            "duplicate key `{key}`: this object already has one; keep only one of them"
        ),
    }
}

/// The one diagnostic for text that is not JSON at all.
fn json_error(file: &str, text: &str, e: &serde_json::Error) -> Diagnostic {
    let full = e.to_string();
    let pos = json_error_position(text, e);
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    let reason = full.strip_suffix(&suffix).unwrap_or(&full);
    Diagnostic {
        file: file.to_string(),
        line: pos.map(|p| p.0),
        column: pos.map(|p| p.1),
        severity: Severity::Error,
        message: format!("{reason} — fix the JSON and run `baton pipelines validate`"),
    }
}

const BUILTIN_PIPELINES: &[(&str, &str)] = &[
    (
        "pipelines/demo.json",
        include_str!("../../pipelines/demo.json"),
    ),
    (
        "pipelines/quick_fix.json",
        include_str!("../../pipelines/quick_fix.json"),
    ),
    (
        "pipelines/feature.json",
        include_str!("../../pipelines/feature.json"),
    ),
];

const BUILTIN_AGENTS: &[(&str, &str)] = &[
    (
        "pipelines/agents/planner.json",
        include_str!("../../pipelines/agents/planner.json"),
    ),
    (
        "pipelines/agents/coder.json",
        include_str!("../../pipelines/agents/coder.json"),
    ),
    (
        "pipelines/agents/reviewer.json",
        include_str!("../../pipelines/agents/reviewer.json"),
    ),
    (
        "pipelines/agents/demo-planner.json",
        include_str!("../../pipelines/agents/demo-planner.json"),
    ),
    (
        "pipelines/agents/demo-coder.json",
        include_str!("../../pipelines/agents/demo-coder.json"),
    ),
    (
        "pipelines/agents/demo-reviewer.json",
        include_str!("../../pipelines/agents/demo-reviewer.json"),
    ),
];

/// The built-in pipeline files compiled into the binary: `(file name, JSON text)`.
pub fn builtin_sources() -> &'static [(&'static str, &'static str)] {
    BUILTIN_PIPELINES
}

/// The built-in agent profile files compiled into the binary: `(file name, JSON text)`.
pub fn builtin_agent_sources() -> &'static [(&'static str, &'static str)] {
    BUILTIN_AGENTS
}

/// Every pipeline available to a workspace, plus what went wrong loading the rest.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    /// Built-ins first (a workspace file with the same id takes the built-in's place), then
    /// the workspace's own pipelines in file-name order.
    pub pipelines: Vec<Pipeline>,
    /// Errors and warnings of every file read, including the files left out.
    pub diagnostics: Vec<Diagnostic>,
    /// The ids the workspace's own files define (overrides of built-ins included), in
    /// file-name order.
    pub own: Vec<String>,
    /// The file the first of them came from: the default pipeline's.
    pub first_own_file: Option<String>,
}

/// The pipeline new tasks go to when none is named and the workspace has none of its own.
pub const FALLBACK_PIPELINE: &str = "quick_fix";

impl Catalog {
    /// Where a task goes when no pipeline is named: the workspace's first own pipeline (by
    /// file name; a file that overrides a built-in counts), else `quick_fix`.
    pub fn default_pipeline(&self) -> Option<&Pipeline> {
        self.own
            .iter()
            .find_map(|id| self.get(id))
            .or_else(|| self.get(FALLBACK_PIPELINE))
    }

    /// The sentence for a pipeline id that is not in the catalog. When a pipeline file
    /// failed to load, that may be why, so the sentence names the file and its error (the
    /// file named after `id` when there is one, else the first broken file).
    pub fn not_found(&self, id: &str) -> String {
        let errors: Vec<&Diagnostic> = self.diagnostics.iter().filter(|d| d.is_error()).collect();
        let named = |d: &&&Diagnostic| {
            std::path::Path::new(&d.file)
                .file_stem()
                .and_then(|s| s.to_str())
                == Some(id)
        };
        if let Some(d) = errors.iter().find(named) {
            return format!("no pipeline `{id}` could be loaded: {}", Self::fix_hint(d));
        }
        match errors.first() {
            Some(d) => format!(
                "no pipeline `{id}` — `baton pipelines list` shows the ones available, and a pipeline file did not load ({d}); if `{id}` is in it, fix the file"
            ),
            None => format!("no pipeline `{id}` — `baton pipelines list` shows the ones available"),
        }
    }

    /// A file that did not load and that, by its name, comes before the default pipeline's
    /// file (or there is none): the default may have been meant to come from it.
    pub fn default_in_doubt(&self) -> Option<&Diagnostic> {
        self.diagnostics.iter().filter(|d| d.is_error()).find(|d| {
            self.first_own_file
                .as_deref()
                .is_none_or(|first| d.file.as_str() < first)
        })
    }

    /// The sentence for a diagnostic that ends a refusal: the file's own words, and where
    /// they do not say so already, to fix the file and validate it.
    pub fn fix_hint(d: &Diagnostic) -> String {
        let said = d.to_string();
        match said.contains("baton pipelines validate") {
            true => said,
            false => {
                format!("{said} — fix the file (`baton pipelines validate` lists every problem)")
            }
        }
    }

    /// The pipeline with this id.
    pub fn get(&self, id: &str) -> Option<&Pipeline> {
        self.pipelines.iter().find(|p| p.id == id)
    }

    /// True when some file had an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// Loads the built-in pipelines, then `*.json` in `workspace_pipelines_dir` (a missing
/// directory is fine). A file with errors is left out; its diagnostics are kept.
pub fn load_catalog(
    workspace_pipelines_dir: Option<&Path>,
    known_agents: Option<&BTreeSet<String>>,
) -> Catalog {
    let mut catalog = Catalog::default();
    let (builtins, diags) = builtins(known_agents);
    catalog.pipelines = builtins;
    catalog.diagnostics = diags;
    let builtin_count = catalog.pipelines.len();
    let Some(dir) = workspace_pipelines_dir else {
        return catalog;
    };
    // Which workspace file claimed each id, to report two files fighting over one id.
    let mut claimed: Vec<(String, String)> = Vec::new();
    for (file, read) in json_files(dir, &mut catalog.diagnostics) {
        let text = match read {
            Ok(text) => text,
            Err(e) => {
                catalog
                    .diagnostics
                    .push(file_error(&file, format!("cannot read: {e}")));
                continue;
            }
        };
        let (pipeline, diags) = parse_pipeline(&file, &text, known_agents);
        catalog.diagnostics.extend(diags);
        let Some(pipeline) = pipeline else { continue };
        if let Some((_, other)) = claimed.iter().find(|(id, _)| *id == pipeline.id) {
            let message = format!(
                "pipeline id `{}` is already defined by {other}; this file is ignored",
                pipeline.id
            );
            catalog.diagnostics.push(file_error(&file, message));
            continue;
        }
        if catalog.own.is_empty() {
            catalog.first_own_file = Some(file.clone());
        }
        claimed.push((pipeline.id.clone(), file));
        catalog.own.push(pipeline.id.clone());
        match catalog.pipelines[..builtin_count]
            .iter()
            .position(|p| p.id == pipeline.id)
        {
            Some(i) => catalog.pipelines[i] = pipeline,
            None => catalog.pipelines.push(pipeline),
        }
    }
    catalog
}

/// The built-in pipelines and what their parse found. They are compiled in and name only
/// built-in agents, which every workspace has, so one clean parse serves the whole process
/// (a catalog is read at each engine start and again for each new task); one with other
/// agents in mind, or none, parses them again.
fn builtins(known_agents: Option<&BTreeSet<String>>) -> (Vec<Pipeline>, Vec<Diagnostic>) {
    static CLEAN: OnceLock<Option<Vec<Pipeline>>> = OnceLock::new();
    static AGENTS: OnceLock<BTreeSet<String>> = OnceLock::new();
    let parse = |known| {
        let (mut pipelines, mut diagnostics) = (Vec::new(), Vec::new());
        for (file, text) in builtin_sources() {
            let (pipeline, diags) = parse_pipeline(file, text, known);
            diagnostics.extend(diags);
            pipelines.extend(pipeline);
        }
        (pipelines, diagnostics)
    };
    let ours = AGENTS.get_or_init(|| agent_ids(None));
    let clean = match known_agents {
        Some(known) if ours.is_subset(known) => CLEAN.get_or_init(|| {
            let (pipelines, diagnostics) = parse(Some(ours));
            diagnostics.is_empty().then_some(pipelines)
        }),
        _ => &None,
    };
    match clean {
        Some(pipelines) => (pipelines.clone(), Vec::new()),
        None => parse(known_agents),
    }
}

/// Ids of the built-in agent profiles plus those in `workspace_agents_dir/*.json`.
/// Files that are not JSON objects with a string `id` are skipped (the agent loader reports them).
pub fn agent_ids(workspace_agents_dir: Option<&Path>) -> BTreeSet<String> {
    let mut ids: BTreeSet<String> = builtin_agent_sources()
        .iter()
        .filter_map(|(_, text)| id_of(text))
        .collect();
    if let Some(dir) = workspace_agents_dir {
        let mut ignored = Vec::new();
        for (_, read) in json_files(dir, &mut ignored) {
            ids.extend(read.ok().as_deref().and_then(id_of));
        }
    }
    ids
}

fn id_of(text: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(super::strip_bom(text)).ok()?;
    let id = value.get("id")?.as_str()?.trim();
    (!id.is_empty()).then(|| id.to_string())
}

/// `*.json` files of a directory sorted by name, each with its display path and contents.
/// A missing directory yields nothing; any other listing failure becomes a diagnostic.
fn json_files(dir: &Path, diags: &mut Vec<Diagnostic>) -> Vec<(String, std::io::Result<String>)> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            diags.push(file_error(
                &dir.display().to_string(),
                format!("cannot list: {e}"),
            ));
            return Vec::new();
        }
    };
    let mut paths: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|ext| ext == "json") && p.is_file())
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| (p.display().to_string(), std::fs::read_to_string(&p)))
        .collect()
}

fn file_error(file: &str, message: String) -> Diagnostic {
    Diagnostic {
        file: file.to_string(),
        line: None,
        column: None,
        severity: Severity::Error,
        message,
    }
}
