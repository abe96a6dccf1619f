//! Git working trees per task (DESIGN §5). Shells out to `git`; never libgit2.

use crate::store::Task;
use std::path::Path;

/// The diff a reviewer sees for a task: its branch against the base plus uncommitted
/// changes in its worktree, with ANSI colours. `Ok(None)` when the task has no worktree
/// (not a git workspace, or no step has started yet).
pub fn task_diff(_root: &Path, task: &Task) -> Result<Option<String>, String> {
    if task.worktree.is_none() {
        return Ok(None);
    }
    Err("diffs are not available in this build yet".into())
}
