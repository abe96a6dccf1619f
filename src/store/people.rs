//! Who created each task and who last moved it: the people behind its rows, kept on the
//! task so the board and `list --mine` need not read its history.

use super::sql::params;
use super::{Db, Result};

impl Db<'_> {
    /// Records that `name` created the task (and so is the last person to have moved it).
    pub fn set_created_by(&self, task_id: i64, name: &str) -> Result<()> {
        self.exec(
            "UPDATE tasks SET created_by = ?1, moved_by = ?1 WHERE id = ?2",
            params![name, task_id],
        )?;
        Ok(())
    }

    /// Records that `name` is the last person to have moved the task.
    pub fn set_moved_by(&self, task_id: i64, name: &str) -> Result<()> {
        self.exec(
            "UPDATE tasks SET moved_by = ?1 WHERE id = ?2",
            params![name, task_id],
        )?;
        Ok(())
    }
}
