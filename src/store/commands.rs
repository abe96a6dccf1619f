//! The command queue clients write and the engine drains.

use super::sql::{Optional, params};
use super::{CommandRow, CommandState, Db, Result, now_ms};

impl Db<'_> {
    /// Queues a command for the engine; returns its id.
    pub fn insert_command(&self, task_id: Option<i64>, body: &serde_json::Value) -> Result<i64> {
        Ok(self.insert(
            "INSERT INTO commands (task_id, body_json, created_at) VALUES (?1, ?2, ?3)",
            params![task_id, body.to_string(), now_ms()],
        )?)
    }

    /// Takes back command `id` if no engine has taken it yet; true when it was (the caller
    /// then applies it itself).
    pub fn withdraw_command(&self, id: i64) -> Result<bool> {
        Ok(self.exec(
            "DELETE FROM commands WHERE id = ?1 AND state = 'pending'",
            [id],
        )? == 1)
    }

    /// Pending commands, oldest first.
    pub fn pending_commands(&self) -> Result<Vec<CommandRow>> {
        let rows = self.all(
            "SELECT id, task_id, body_json, state, result FROM commands \
             WHERE state = 'pending' ORDER BY id",
            [],
            |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get::<String>(2)?,
                    r.get(3)?,
                    r.get(4)?,
                ))
            },
        )?;
        let mut out = Vec::new();
        for (id, task_id, body, state, result) in rows {
            out.push(CommandRow {
                id,
                task_id,
                body: serde_json::from_str(&body)?,
                state,
                result,
            });
        }
        Ok(out)
    }

    /// Marks a command handled with its result text (a summary, or the error sentence).
    pub fn finish_command(&self, id: i64, state: CommandState, result: &str) -> Result<()> {
        // Taking a command is a compare-and-set inside the transaction that applies it:
        // several engines drain one board's commands, and only the first to finish one
        // commits; the others' transactions roll back with this error.
        let n = self.exec(
            "UPDATE commands SET state = ?1, result = ?2, handled_at = ?3 \
             WHERE id = ?4 AND state = 'pending'",
            params![state, result, now_ms(), id],
        )?;
        if n == 0 {
            return Err(super::StoreError::Conflict(format!(
                "command {id} was already taken by another engine"
            )));
        }
        Ok(())
    }

    /// Finishes a command that waited for a running step's word (`answering`).
    pub fn finish_answered_command(&self, id: i64, result: &str) -> Result<()> {
        self.exec(
            "UPDATE commands SET state = 'done', result = ?1, handled_at = ?2 \
             WHERE id = ?3 AND state = 'answering'",
            params![result, now_ms(), id],
        )?;
        Ok(())
    }

    /// Finishes the commands left waiting for a running step's word by an engine that
    /// stopped before it came: they were applied, so they get `result` and are done.
    pub fn settle_answering_commands(&self, result: &str) -> Result<usize> {
        Ok(self.exec(
            "UPDATE commands SET state = 'done', result = ?1, handled_at = ?2 \
             WHERE state = 'answering'",
            params![result, now_ms()],
        )?)
    }

    /// A command's current state and result.
    pub fn command(&self, id: i64) -> Result<Option<CommandRow>> {
        Ok(self
            .one(
                "SELECT id, task_id, body_json, state, result FROM commands WHERE id = ?1",
                [id],
                |r| {
                    Ok((
                        r.get(0)?,
                        r.get(1)?,
                        r.get::<String>(2)?,
                        r.get(3)?,
                        r.get(4)?,
                    ))
                },
            )
            .optional()?
            .map(|(id, task_id, body, state, result)| CommandRow {
                id,
                task_id,
                body: serde_json::from_str(&body).unwrap_or_default(),
                state,
                result,
            }))
    }
}
