//! Versioned migrations, tracked in `PRAGMA user_version`.

use super::{Result, StoreError};
use rusqlite::{Connection, TransactionBehavior};
use std::path::Path;

/// Each entry moves the schema one version up. Never edit a released entry; append.
pub(super) const MIGRATIONS: &[&str] = &[
    // 1: the initial schema.
    r#"
    CREATE TABLE tasks (
        id            INTEGER PRIMARY KEY AUTOINCREMENT,
        title         TEXT NOT NULL,
        prompt        TEXT NOT NULL DEFAULT '',
        pipeline_id   TEXT NOT NULL,
        pipeline_json TEXT NOT NULL,
        status        TEXT NOT NULL,
        state         TEXT NOT NULL,
        run_id        INTEGER,
        branch        TEXT,
        worktree      TEXT,
        breakpoint    TEXT,
        created_at    INTEGER NOT NULL,
        updated_at    INTEGER NOT NULL
    );
    CREATE INDEX tasks_updated ON tasks(updated_at);

    CREATE TABLE runs (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        task_id     INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        number      INTEGER NOT NULL,
        state       TEXT NOT NULL,
        started_at  INTEGER NOT NULL,
        finished_at INTEGER,
        UNIQUE (task_id, number)
    );

    CREATE TABLE step_runs (
        id               INTEGER PRIMARY KEY AUTOINCREMENT,
        task_id          INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        run_id           INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        status           TEXT NOT NULL,
        attempt          INTEGER NOT NULL,
        execution_key    TEXT NOT NULL UNIQUE,
        state            TEXT NOT NULL,
        exit_code        INTEGER,
        outcome          TEXT,
        error            TEXT,
        note             TEXT,
        not_before       INTEGER NOT NULL DEFAULT 0,
        created_at       INTEGER NOT NULL,
        started_at       INTEGER,
        finished_at      INTEGER,
        pid              INTEGER,
        pgid             INTEGER,
        proc_start       INTEGER,
        session_id       TEXT,
        usage_json       TEXT,
        cost             REAL,
        tests_json       TEXT,
        handoff_content  TEXT,
        handoff_metadata TEXT
    );
    CREATE INDEX step_runs_task ON step_runs(task_id, id);
    CREATE INDEX step_runs_state ON step_runs(state);

    CREATE TABLE log_lines (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        step_run_id INTEGER NOT NULL REFERENCES step_runs(id) ON DELETE CASCADE,
        stream      TEXT NOT NULL,
        ts          INTEGER NOT NULL,
        line        TEXT NOT NULL
    );
    CREATE INDEX log_lines_step ON log_lines(step_run_id, id);

    CREATE TABLE history (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        task_id     INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        run_id      INTEGER,
        from_status TEXT,
        to_status   TEXT NOT NULL,
        trigger     TEXT NOT NULL,
        actor       TEXT NOT NULL,
        reason      TEXT,
        guards_json TEXT NOT NULL DEFAULT '[]',
        hooks_json  TEXT NOT NULL DEFAULT '[]',
        at          INTEGER NOT NULL
    );
    CREATE INDEX history_task ON history(task_id, id);

    CREATE TABLE events (
        id        INTEGER PRIMARY KEY AUTOINCREMENT,
        task_id   INTEGER REFERENCES tasks(id) ON DELETE CASCADE,
        category  TEXT NOT NULL,
        type      TEXT NOT NULL,
        summary   TEXT NOT NULL,
        data_json TEXT NOT NULL DEFAULT '{}',
        actor     TEXT NOT NULL,
        level     TEXT NOT NULL,
        at        INTEGER NOT NULL
    );
    CREATE INDEX events_task ON events(task_id, id);

    CREATE TABLE commands (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        task_id    INTEGER,
        body_json  TEXT NOT NULL,
        state      TEXT NOT NULL DEFAULT 'pending',
        result     TEXT,
        created_at INTEGER NOT NULL,
        handled_at INTEGER
    );
    CREATE INDEX commands_pending ON commands(state, id);
    "#,
    // 2: the base branch a task's worktree was made from; workspace facts.
    r#"
    ALTER TABLE tasks ADD COLUMN base_branch TEXT;
    CREATE TABLE meta (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    "#,
    // 3: indexes that keep per-step queries independent of the board's size and a task's
    // history; a step run's position in its task; durable follow-ups of transitions.
    r#"
    ALTER TABLE step_runs ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
    UPDATE step_runs SET seq = (SELECT COUNT(*) FROM step_runs s
                                WHERE s.task_id = step_runs.task_id AND s.id <= step_runs.id);
    CREATE INDEX step_runs_run ON step_runs(run_id, status, attempt);
    CREATE INDEX step_runs_open ON step_runs(task_id) WHERE state IN ('pending', 'running');
    -- Only pending rows are looked up by state: a partial index leaves the finished ones
    -- (nearly all of them) out, and a step's state changes cost less index upkeep.
    DROP INDEX step_runs_state;
    CREATE INDEX step_runs_pending ON step_runs(id) WHERE state = 'pending';
    CREATE INDEX step_runs_handoff ON step_runs(run_id, id)
        WHERE handoff_content IS NOT NULL AND state = 'succeeded';
    CREATE INDEX history_run ON history(run_id, to_status);
    CREATE INDEX events_errors ON events(task_id, id) WHERE level = 'error';
    DROP INDEX commands_pending;
    CREATE INDEX commands_pending ON commands(id) WHERE state = 'pending';

    CREATE TABLE followups (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        task_id     INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        history_id  INTEGER NOT NULL,
        position    INTEGER NOT NULL,
        body_json   TEXT NOT NULL,
        key         TEXT NOT NULL UNIQUE,
        state       TEXT NOT NULL DEFAULT 'pending',
        attempts    INTEGER NOT NULL DEFAULT 0,
        result      TEXT,
        created_at  INTEGER NOT NULL,
        finished_at INTEGER
    );
    CREATE INDEX followups_open ON followups(id) WHERE state IN ('pending', 'running');

    -- Pipeline snapshots live apart from the task rows, shared by tasks created from the same
    -- definition: a task row is updated several times a step, and SQLite rewrites a whole row
    -- (a long pipeline's JSON included) on every update.
    CREATE TABLE snapshots (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        fingerprint TEXT NOT NULL,
        json        TEXT NOT NULL
    );
    CREATE INDEX snapshots_fingerprint ON snapshots(fingerprint);
    INSERT INTO snapshots (id, fingerprint, json)
        SELECT id, 'task:' || id, pipeline_json FROM tasks;
    ALTER TABLE tasks ADD COLUMN snapshot_id INTEGER REFERENCES snapshots(id);
    UPDATE tasks SET snapshot_id = id;
    ALTER TABLE tasks DROP COLUMN pipeline_json;

    ALTER TABLE tasks ADD COLUMN parent_id INTEGER;
    ALTER TABLE tasks ADD COLUMN depth INTEGER NOT NULL DEFAULT 0;
    "#,
    // 4: archived tasks are kept but left off the board and `list`.
    r#"
    ALTER TABLE tasks ADD COLUMN archived_at INTEGER;
    "#,
    // The executor a step run was started on, so recovery looks for it there.
    r#"
    ALTER TABLE step_runs ADD COLUMN executor_json TEXT;
    "#,
    // A change sequence: every insert or update of a task takes the next number in its own
    // transaction, so readers can resume "after change N" without missing a change (times
    // are taken before commit and can arrive out of order). An idempotency key per task, so
    // a client's retried create returns the task the first try made. Recent webhook
    // deliveries.
    r#"
    CREATE TABLE change_counter (
        id  INTEGER PRIMARY KEY CHECK (id = 1),
        seq INTEGER NOT NULL
    );
    ALTER TABLE tasks ADD COLUMN change_seq INTEGER NOT NULL DEFAULT 0;
    UPDATE tasks SET change_seq = id;
    INSERT INTO change_counter (id, seq) VALUES (1, COALESCE((SELECT MAX(id) FROM tasks), 0));
    CREATE INDEX tasks_change_seq ON tasks(change_seq);
    CREATE TRIGGER tasks_change_insert AFTER INSERT ON tasks BEGIN
        UPDATE change_counter SET seq = seq + 1 WHERE id = 1;
        UPDATE tasks SET change_seq = (SELECT seq FROM change_counter WHERE id = 1)
            WHERE id = NEW.id;
    END;
    CREATE TRIGGER tasks_change_update AFTER UPDATE ON tasks
        WHEN NEW.change_seq = OLD.change_seq BEGIN
        UPDATE change_counter SET seq = seq + 1 WHERE id = 1;
        UPDATE tasks SET change_seq = (SELECT seq FROM change_counter WHERE id = 1)
            WHERE id = NEW.id;
    END;
    ALTER TABLE tasks ADD COLUMN idempotency_key TEXT;
    CREATE UNIQUE INDEX tasks_idempotency_key ON tasks(idempotency_key)
        WHERE idempotency_key IS NOT NULL;

    -- Webhook delivery ids seen lately, a bounded window (they were meta rows, one per
    -- delivery for ever). Push triggers are also keyed by commit, so a replay older than
    -- the window fires nothing either.
    CREATE TABLE webhook_deliveries (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id  TEXT NOT NULL UNIQUE,
        at  INTEGER NOT NULL
    );
    DELETE FROM meta WHERE key LIKE 'github-delivery:%';
    "#,
    // How many log lines each step run has, kept by the writer as it inserts them: a
    // viewer asks for it on every page of a log, and counting a million-line log's rows
    // each time read the whole log.
    r#"
    ALTER TABLE step_runs ADD COLUMN log_count INTEGER NOT NULL DEFAULT 0;
    UPDATE step_runs SET log_count = (SELECT COUNT(*) FROM log_lines l WHERE l.step_run_id = step_runs.id)
        WHERE id IN (SELECT DISTINCT step_run_id FROM log_lines);
    "#,
    // The agent session a step run continued (null: it started a fresh one).
    r#"
    ALTER TABLE step_runs ADD COLUMN continued_from TEXT;
    "#,
    // The task's pull request on the forge: one row per task, written by the `pr` hook and
    // by what comes back (webhooks, polling).
    r#"
    CREATE TABLE task_prs (
        task_id     INTEGER PRIMARY KEY REFERENCES tasks(id) ON DELETE CASCADE,
        url         TEXT NOT NULL,
        number      INTEGER NOT NULL,
        state       TEXT NOT NULL,
        checks      TEXT NOT NULL DEFAULT 'none',
        checks_summary TEXT NOT NULL DEFAULT '',
        updated_at  INTEGER NOT NULL
    );
    CREATE INDEX task_prs_number ON task_prs(number);
    "#,
    // Tasks that wait for other tasks: a row per blocker. `start_waits` is set while the
    // task's start waits for its blockers to be done; the engine clears it when it starts
    // the task.
    r#"
    CREATE TABLE task_deps (
        task_id  INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        after_id INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        PRIMARY KEY (task_id, after_id)
    );
    CREATE INDEX task_deps_after ON task_deps(after_id);
    ALTER TABLE tasks ADD COLUMN start_waits INTEGER NOT NULL DEFAULT 0;
    -- The task a `start_task` hook made, so a later hook of the same move can wait for it.
    ALTER TABLE followups ADD COLUMN made_task INTEGER;
    "#,
    // Messages said to a task's agent (`baton say`, answers to its questions): queued until
    // a step takes them, then delivered to it (live, in the next step, or a new attempt).
    r#"
    CREATE TABLE messages (
        id            INTEGER PRIMARY KEY AUTOINCREMENT,
        task_id       INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        text          TEXT NOT NULL,
        actor         TEXT NOT NULL,
        created_at    INTEGER NOT NULL,
        state         TEXT NOT NULL DEFAULT 'queued',
        delivered_to  INTEGER,
        via           TEXT NOT NULL DEFAULT 'next step',
        delivered_at  INTEGER
    );
    CREATE INDEX messages_task ON messages(task_id, state);
    "#,
    // Who created each task and who last moved it (a person, never the engine): for the
    // board's cards and `list --mine` / `--by`.
    r#"
    ALTER TABLE tasks ADD COLUMN created_by TEXT;
    ALTER TABLE tasks ADD COLUMN moved_by TEXT;
    "#,
    // The engines that run the board's steps, one row per name: where each runs, its
    // labels, and when it was last seen (a heartbeat, renewed while it runs). Each step
    // run names the engine that started it.
    r#"
    CREATE TABLE engines (
        name         TEXT PRIMARY KEY,
        host         TEXT NOT NULL,
        pid          INTEGER NOT NULL,
        labels       TEXT NOT NULL DEFAULT '',
        version      TEXT NOT NULL,
        started_at   INTEGER NOT NULL,
        heartbeat_at INTEGER NOT NULL,
        lease_ms     INTEGER NOT NULL,
        stopped_at   INTEGER
    );
    ALTER TABLE step_runs ADD COLUMN engine TEXT;
    "#,
    // Several engines on one board: a claim gives its step run a lease (renewed by its
    // engine's heartbeats, timed by the database's clock) and a fence number, unique per
    // claim, that its engine's later writes must match. A follow-up names the engine that
    // runs it, so no other live engine starts it again. A task names its home engine, the
    // one whose machine holds its worktree.
    r#"
    ALTER TABLE step_runs ADD COLUMN lease_until INTEGER;
    ALTER TABLE step_runs ADD COLUMN fence INTEGER;
    ALTER TABLE followups ADD COLUMN engine TEXT;
    ALTER TABLE tasks ADD COLUMN home_engine TEXT;
    "#,
    // The tasks whose start waits for blockers, found by an engine as it comes up without
    // reading the whole board.
    r#"
    CREATE INDEX tasks_start_waits ON tasks(id) WHERE start_waits = 1;
    "#,
    // The warnings and errors recorded after a given event (what a headless engine prints
    // as problems), found without reading every event since: a long-running engine with
    // nothing to report read all the events of its run again at every step.
    r#"
    CREATE INDEX events_problems ON events(id) WHERE level IN ('warn', 'error');
    "#,
];

/// Migrations whose SQLite text has no faithful PostgreSQL rendering, by position in
/// [`MIGRATIONS`] (0-based): their PostgreSQL text, used instead of rendering. Every other
/// migration is rendered by `pg::ddl`.
pub(super) const POSTGRES_VARIANTS: &[(usize, &str)] = &[
    // The change sequence's triggers, as one PL/pgSQL trigger function: it numbers every
    // insert, and every update that leaves the number alone, from the counter.
    (
        5,
        r#"
    CREATE TABLE change_counter (
        id  BIGINT PRIMARY KEY CHECK (id = 1),
        seq BIGINT NOT NULL
    );
    ALTER TABLE tasks ADD COLUMN change_seq BIGINT NOT NULL DEFAULT 0;
    UPDATE tasks SET change_seq = id;
    INSERT INTO change_counter (id, seq) VALUES (1, COALESCE((SELECT MAX(id) FROM tasks), 0));
    CREATE INDEX tasks_change_seq ON tasks(change_seq);
    CREATE FUNCTION tasks_change_seq() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'UPDATE' AND NEW.change_seq IS DISTINCT FROM OLD.change_seq THEN
            RETURN NEW;
        END IF;
        UPDATE change_counter SET seq = seq + 1 WHERE id = 1 RETURNING seq INTO NEW.change_seq;
        RETURN NEW;
    END
    $$;
    CREATE TRIGGER tasks_change BEFORE INSERT OR UPDATE ON tasks
        FOR EACH ROW EXECUTE FUNCTION tasks_change_seq();
    ALTER TABLE tasks ADD COLUMN idempotency_key TEXT;
    CREATE UNIQUE INDEX tasks_idempotency_key ON tasks(idempotency_key)
        WHERE idempotency_key IS NOT NULL;
    CREATE TABLE webhook_deliveries (
        seq BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        id  TEXT NOT NULL UNIQUE,
        at  BIGINT NOT NULL
    );
    DELETE FROM meta WHERE key LIKE 'github-delivery:%';
    "#,
    ),
];

/// Migration `i` (0-based) for PostgreSQL: its variant, else its SQLite text rendered.
pub(super) fn for_postgres(i: usize) -> std::result::Result<String, String> {
    if let Some((_, sql)) = POSTGRES_VARIANTS.iter().find(|(n, _)| *n == i) {
        return Ok((*sql).to_string());
    }
    super::pg::ddl::render(MIGRATIONS[i]).map_err(|e| format!("migration {}: {e}", i + 1))
}

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Applies the missing migrations, each in its own immediate transaction.
pub(super) fn migrate(conn: &mut Connection, path: &Path) -> Result<()> {
    let current: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if current > SCHEMA_VERSION {
        return Err(StoreError::TooNew {
            path: path.to_path_buf(),
            found: current,
            known: SCHEMA_VERSION,
        });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        // Another process may have migrated while we waited for the write lock.
        let now: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if now > i as i64 {
            continue;
        }
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", i as i64 + 1)?;
        tx.commit()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// Every migration renders for PostgreSQL (a new one that cannot says why here).
    #[test]
    fn every_migration_has_a_postgres_text() {
        for i in 0..super::MIGRATIONS.len() {
            if let Err(e) = super::for_postgres(i) {
                panic!("{e}");
            }
        }
    }
}
