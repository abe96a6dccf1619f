//! The executor a step run was started on, recorded before it starts so that recovery
//! looks for it where it ran, whatever the configuration says by then.

use super::sql::{Optional, params};
use super::{Db, Result};

impl Db<'_> {
    /// Records the resolved executor (as JSON) a step run is starting on.
    pub fn set_step_executor(&self, id: i64, executor_json: &str) -> Result<()> {
        self.exec(
            "UPDATE step_runs SET executor_json = ?1 WHERE id = ?2",
            params![executor_json, id],
        )?;
        Ok(())
    }

    /// The executor recorded for a step run; `None` when none was (a step started by an
    /// older version, or one whose engine died before recording it).
    pub fn step_executor(&self, id: i64) -> Result<Option<String>> {
        Ok(self
            .one(
                "SELECT executor_json FROM step_runs WHERE id = ?1",
                [id],
                |r| r.get::<Option<String>>(0),
            )
            .optional()?
            .flatten())
    }
}
