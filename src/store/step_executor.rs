//! The executor a step run was started on, recorded before it starts so that recovery
//! looks for it where it ran, whatever the configuration says by then.

use super::sql::{Optional, params};
use super::{Db, Result};

/// How the executor of a step on this machine is recorded.
const LOCAL: &str = "\"local\"";

impl Db<'_> {
    /// Records the resolved executor (as JSON) a step run is starting on.
    pub fn set_step_executor(&self, id: i64, executor_json: &str) -> Result<()> {
        self.exec(
            "UPDATE step_runs SET executor_json = ?1 WHERE id = ?2",
            params![executor_json, id],
        )?;
        Ok(())
    }

    /// The executor recorded for a step run; `None` when none was (a step started by a
    /// version that did not record executors). A step on another machine's executor is
    /// recorded before it starts; one on this machine only with its process group, once it
    /// has run a while: a step claimed by a named engine (every version that records
    /// executors names it) with no record ran on this machine.
    pub fn step_executor(&self, id: i64) -> Result<Option<String>> {
        let (recorded, engine) = match self
            .one(
                "SELECT executor_json, engine FROM step_runs WHERE id = ?1",
                [id],
                |r| Ok((r.get::<Option<String>>(0)?, r.get::<Option<String>>(1)?)),
            )
            .optional()?
        {
            Some(row) => row,
            None => return Ok(None),
        };
        Ok(recorded.or_else(|| engine.map(|_| LOCAL.to_string())))
    }
}
