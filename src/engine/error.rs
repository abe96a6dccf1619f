//! Engine errors: each one sentence saying what is wrong and what to do next.

use crate::pipeline::DecideError;
use crate::store::StoreError;
use crate::workspace::WorkspaceError;

/// What an engine action can fail with.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    #[error(
        "task {task} is no longer at {expected}{} (it is at {actual}) — `baton show {task}` has its history",
        by.as_ref().map(|w| format!(" — {w}")).unwrap_or_default()
    )]
    NoLongerAt {
        task: i64,
        expected: String,
        actual: String,
        /// Who moved it away and when (`alice approved it 2 s ago`), from its history.
        by: Option<String>,
    },
    #[error("task {task}: {source}")]
    Decide {
        task: i64,
        #[source]
        source: DecideError,
    },
    #[error("task {task}: {message}")]
    Refused { task: i64, message: String },
    #[error(
        "task {task}'s pipeline snapshot is unreadable ({source}) — the database may be damaged"
    )]
    Snapshot {
        task: i64,
        #[source]
        source: serde_json::Error,
    },
    #[error("task {task} stays at {from}: {message} — its branch and worktree are kept")]
    Merge {
        task: i64,
        from: String,
        message: String,
    },
    /// The decision carries a `merge` hook that has not run yet (the engine runs it outside
    /// the transaction and applies again); never shown to people.
    #[error("task {task} waits for its merge")]
    MergePending { task: i64 },
    /// A request that can never succeed as given (a blank title, an unknown branch).
    #[error("{0}")]
    Invalid(String),
    /// A request naming something that does not exist (a pipeline).
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Other(String),
}

/// Result alias for engine operations.
pub type Result<T, E = EngineError> = std::result::Result<T, E>;

impl EngineError {
    /// True when the database can no longer be written at all (read-only, damaged): going
    /// on would only pile up errors, so the engine stops with the reason.
    pub fn is_fatal(&self) -> bool {
        use rusqlite::ErrorCode::{DatabaseCorrupt, NotADatabase, ReadOnly};
        match self {
            EngineError::Store(StoreError::Damaged { .. }) => true,
            EngineError::Store(StoreError::Sql(e)) => matches!(
                e.sqlite_error_code(),
                Some(ReadOnly | DatabaseCorrupt | NotADatabase)
            ),
            _ => false,
        }
    }
}
