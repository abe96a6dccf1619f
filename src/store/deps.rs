//! Tasks that wait for other tasks: the blockers of a task, the tasks waiting on one, and
//! whether a task's start is held until its blockers are done.

use super::sql::params;
use super::{Db, Result, TaskState};

/// One task another one waits for, as it is now.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Blocker {
    /// The blocker's id.
    pub id: i64,
    /// Its state (`done` releases the waiting task).
    pub state: TaskState,
    /// Its status.
    pub status: String,
}

/// The held tasks whose blockers are all done, through the partial index of held tasks
/// (an engine runs it as it comes up; the rest of the board is not read).
pub(super) const RELEASED_WAITING: &str = "SELECT t.id FROM tasks t WHERE t.start_waits = 1 AND NOT EXISTS \
     (SELECT 1 FROM task_deps d JOIN tasks b ON b.id = d.after_id \
      WHERE d.task_id = t.id AND b.state != 'done') ORDER BY t.id";

impl Db<'_> {
    /// Records that `task` waits for each of `after`.
    pub fn insert_deps(&self, task: i64, after: &[i64]) -> Result<()> {
        for a in after {
            self.exec(
                "INSERT INTO task_deps (task_id, after_id) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                params![task, a],
            )?;
        }
        Ok(())
    }

    /// The tasks `task` waits for, by id, with their state now.
    pub fn blockers(&self, task: i64) -> Result<Vec<Blocker>> {
        Ok(self.all(
            "SELECT b.id, b.state, b.status FROM task_deps d JOIN tasks b ON b.id = d.after_id \
             WHERE d.task_id = ?1 ORDER BY b.id",
            [task],
            |r| {
                Ok(Blocker {
                    id: r.get(0)?,
                    state: r.get(1)?,
                    status: r.get(2)?,
                })
            },
        )?)
    }

    /// The tasks that wait for `task` (whether or not their start is still held).
    pub fn dependents(&self, task: i64) -> Result<Vec<i64>> {
        Ok(self.all(
            "SELECT task_id FROM task_deps WHERE after_id = ?1 ORDER BY task_id",
            [task],
            |r| r.get(0),
        )?)
    }

    /// True when `task`'s start is held until its blockers are done.
    pub fn start_waits(&self, task: i64) -> Result<bool> {
        let n: i64 = self.one("SELECT start_waits FROM tasks WHERE id = ?1", [task], |r| {
            r.get(0)
        })?;
        Ok(n != 0)
    }

    /// Holds (or releases) `task`'s start.
    pub fn set_start_waits(&self, task: i64, waits: bool) -> Result<()> {
        self.exec(
            "UPDATE tasks SET start_waits = ?1 WHERE id = ?2 AND start_waits != ?1",
            params![i64::from(waits), task],
        )?;
        Ok(())
    }

    /// Marks `task` changed (its card shows its blockers' states), so boards and streams
    /// following the board read it again.
    pub fn touch_task(&self, task: i64) -> Result<()> {
        self.exec(
            "UPDATE tasks SET updated_at = ?1 WHERE id = ?2",
            params![super::now_ms(), task],
        )?;
        Ok(())
    }

    /// Tasks whose start is held although every blocker is done: what an engine starts
    /// when it comes up (a blocker may have finished through a path that did not).
    pub fn released_waiting(&self) -> Result<Vec<i64>> {
        Ok(self.all(RELEASED_WAITING, [], |r| r.get(0))?)
    }

    /// True when `from` waits, through any chain of blockers, for `to`.
    pub fn waits_for(&self, from: i64, to: i64) -> Result<bool> {
        Ok(self.one(
            "WITH RECURSIVE chain(id) AS (SELECT CAST(?1 AS BIGINT) UNION \
             SELECT d.after_id FROM task_deps d JOIN chain c ON d.task_id = c.id) \
             SELECT EXISTS (SELECT 1 FROM chain WHERE id = ?2)",
            params![from, to],
            |r| r.get(0),
        )?)
    }

    /// Records the task a `start_task` follow-up made.
    pub fn set_followup_task(&self, followup: i64, task: i64) -> Result<()> {
        self.exec(
            "UPDATE followups SET made_task = ?1 WHERE id = ?2",
            params![task, followup],
        )?;
        Ok(())
    }

    /// The tasks made by the follow-ups recorded before `followup` with the same move:
    /// the siblings a `start_task` hook with `"after": "siblings"` waits for.
    pub fn sibling_tasks(&self, followup: i64) -> Result<Vec<i64>> {
        Ok(self.all(
            "SELECT s.made_task FROM followups s JOIN followups f ON f.id = ?1 \
             WHERE s.history_id = f.history_id AND s.position < f.position \
             AND s.made_task IS NOT NULL ORDER BY s.position",
            [followup],
            |r| r.get(0),
        )?)
    }
}
