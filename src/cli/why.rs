//! Why a task moved, in words: the guards a history row checked and the hooks it ran.

use crate::store::{HistoryEntry, Task, TaskState};
use serde_json::Value;

/// One line per guard checked and per hook, for `show` (empty when there were none).
pub fn history_lines(h: &HistoryEntry) -> Vec<String> {
    let mut out = Vec::new();
    for g in super::json::guard_list(&h.guards)
        .as_array()
        .into_iter()
        .flatten()
    {
        let name = g["guard"].as_str().unwrap_or("guard");
        let detail = g["detail"].as_str().unwrap_or("");
        let mark = if g["passed"].as_bool() == Some(false) {
            "blocked"
        } else {
            "passed"
        };
        if detail.is_empty() {
            out.push(format!("guard {name}: {mark}"));
        } else {
            out.push(format!("guard {name}: {mark} — {detail}"));
        }
    }
    for hook in h.hooks.as_array().into_iter().flatten() {
        out.push(hook_line(hook));
    }
    out
}

/// `hook run: ok — deployed (attempt 1)`; older rows held only the hook's name.
fn hook_line(hook: &Value) -> String {
    if let Some(name) = hook.as_str() {
        return format!("hook {name}");
    }
    let name = hook["hook"].as_str().unwrap_or("hook");
    let state = hook["state"]
        .as_str()
        .or_else(|| hook["status"].as_str())
        .unwrap_or("?");
    let mut line = format!("hook {name}: {state}");
    if let Some(d) = hook["detail"].as_str().filter(|d| !d.is_empty()) {
        line.push_str(&format!(" — {d}"));
    }
    if let Some(n) = hook["attempts"].as_i64().filter(|n| *n > 1) {
        line.push_str(&format!(" (attempt {n})"));
    }
    line
}

/// True when the task waits at its breakpoint, before its status's step.
pub fn paused(t: &Task) -> bool {
    t.state == TaskState::Waiting && t.breakpoint.as_deref() == Some(t.status.as_str())
}
