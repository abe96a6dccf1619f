//! Every query of the store, run on SQLite and on PostgreSQL alike: what is written reads
//! back the same from both, and writes keep their transactions' promises on both.

use super::testdb::both;
use super::*;
use serde_json::json;

/// A task with its run, moved once.
fn task(db: &Db, title: &str) -> Result<(i64, i64)> {
    let id = db.insert_task(title, "do it", "pipe", "{\"p\":1}", "todo", TaskState::Idle)?;
    let run = db.task(id)?.run_id.expect("a run");
    Ok((id, run))
}

both!(fn tasks_runs_and_history_read_back(board) {
    let mut store = board.open();
    let before = store.read().last_change().unwrap();
    let (a, run) = store.write(|db| task(db, "a")).unwrap();
    let (b, _) = store.write(|db| task(db, "b")).unwrap();
    store
        .write(|db| {
            db.set_task_status(a, "build", TaskState::Queued)?;
            db.set_task_state(a, TaskState::Running)?;
            db.set_breakpoint(a, Some("review"))?;
            db.set_worktree(a, Some("br"), Some("/w"), Some("main"))?;
            db.set_meta("k", "v1")?;
            db.set_meta("k", "v2")?;
            db.set_idempotency_key(b, "key-b")?;
            db.set_task_parent(b, a, 1)?;
            db.set_run_state(run, RunState::Running)?;
            let h = db.insert_history(
                a,
                Some(run),
                Some("todo"),
                "build",
                "start",
                "ann",
                None,
                &json!([]),
                &json!([{"hook": "x"}]),
            )?;
            db.set_history_hooks(h, &json!([{"hook": "x", "state": "ok"}]))?;
            db.insert_history(a, Some(run), Some("build"), "build", "retry", "ann", Some("again"), &json!([]), &json!([]))?;
            Ok::<_, StoreError>(())
        })
        .unwrap();
    let db = store.read();
    let t = db.task(a).unwrap();
    assert_eq!(
        (t.title.as_str(), t.status.as_str(), t.state, t.breakpoint.as_deref()),
        ("a", "build", TaskState::Running, Some("review"))
    );
    assert_eq!(
        (t.branch.as_deref(), t.worktree.as_deref(), t.base_branch.as_deref()),
        (Some("br"), Some("/w"), Some("main"))
    );
    assert!(matches!(db.task(a + b + 100), Err(StoreError::NoTask(_))));
    assert_eq!(db.meta("k").unwrap().as_deref(), Some("v2"));
    assert_eq!(db.meta("none").unwrap(), None);
    assert_eq!(db.task_by_idempotency_key("key-b").unwrap(), Some(b));
    assert_eq!(db.task_by_idempotency_key("nope").unwrap(), None);
    assert_eq!(db.task_depth(b).unwrap(), 1);
    assert_eq!(db.run(run).unwrap().state, RunState::Running);
    assert_eq!(db.pipeline_json(a).unwrap(), "{\"p\":1}");
    let all: Vec<i64> = db.list_tasks(&TaskFilter::default()).unwrap().iter().map(|t| t.id).collect();
    assert_eq!(all.len(), 2);
    let todo = TaskFilter { status: Some("todo"), pipeline: None };
    assert_eq!(db.list_tasks(&todo).unwrap().iter().map(|t| t.id).collect::<Vec<_>>(), [b]);
    let other = TaskFilter { status: None, pipeline: Some("other") };
    assert!(db.list_tasks(&other).unwrap().is_empty());
    // Every change of a task took a new number.
    let last = db.last_change().unwrap();
    assert!(last > before, "{last} > {before}");
    let changed = db.tasks_changed_after(before, 10).unwrap();
    assert_eq!(changed.last().map(|(n, _)| *n), Some(last));
    let history = db.history(a).unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[0].hooks, json!([{"hook": "x", "state": "ok"}]));
    assert_eq!(db.history_hooks(history[0].id).unwrap(), history[0].hooks);
    assert_eq!(history[1].reason.as_deref(), Some("again"));
    assert_eq!(db.last_history_id().unwrap(), history[1].id);
    assert_eq!(db.history_after(history[0].id, 5).unwrap().len(), 1);
    // Entering `build` once; re-entering from itself does not count.
    assert_eq!(db.visits(run).unwrap().get("build"), Some(&1));
    assert_eq!(db.visits_of(run, "build").unwrap(), 1);
    assert!(db.data_version().is_ok());
    store.write(|db| db.clear_worktree(a)).unwrap();
    assert_eq!(store.read().task(a).unwrap().worktree, None);
    let next = store.write(|db| db.insert_run(a, RunState::Waiting)).unwrap();
    assert_eq!(store.read().run(next).unwrap().number, 2);
    assert_eq!(store.read().task(a).unwrap().run_id, Some(next));
});

both!(fn step_runs_read_back(board) {
    let mut store = board.open();
    let (t, run) = store.write(|db| task(db, "t")).unwrap();
    let (first, second) = store
        .write(|db| {
            let first = db.insert_step_run(t, run, "build", Some("a note"), 0)?;
            let second = db.insert_step_run(t, run, "build", None, 5_000)?;
            Ok::<_, StoreError>((first, second))
        })
        .unwrap();
    assert_eq!((first.attempt, second.attempt), (1, 2));
    assert_eq!(first.execution_key, format!("{run}:build:1"));
    assert_eq!((first.seq, second.seq), (1, 2));
    assert_ne!(first.id, second.id);
    let db = store.read();
    let stored = db.step_run(first.id).unwrap();
    assert_eq!(
        (stored.state, stored.note.as_deref(), stored.execution_key.as_str()),
        (StepState::Pending, Some("a note"), first.execution_key.as_str())
    );
    assert_eq!(db.due_step_runs(1_000, 10).unwrap().iter().map(|s| s.id).collect::<Vec<_>>(), [first.id]);
    assert_eq!(db.next_due_after(1_000).unwrap(), Some(5_000));
    assert!(db.any_open_step_runs().unwrap());
    assert_eq!(db.open_step_runs(t).unwrap().len(), 2);
    assert!(store.write(|db| db.claim_step_run(first.id, 7)).unwrap());
    assert!(!store.write(|db| db.claim_step_run(first.id, 8)).unwrap(), "claimed once");
    store
        .write(|db| {
            db.set_step_process(first.id, 4242, Some(99))?;
            db.set_step_session(first.id, "sess")?;
            db.set_step_continued(first.id, Some("old"))?;
            db.set_step_executor(first.id, "{\"kind\":\"local\"}")?;
            Ok::<_, StoreError>(())
        })
        .unwrap();
    let db = store.read();
    let running = db.running_step_runs().unwrap();
    assert_eq!(running.len(), 1);
    let s = &running[0];
    assert_eq!(
        (s.started_at, s.pid, s.pgid, s.proc_start, s.session_id.as_deref(), s.continued_from.as_deref()),
        (Some(7), Some(4242), Some(4242), Some(99), Some("sess"), Some("old"))
    );
    assert_eq!(db.step_executor(first.id).unwrap().as_deref(), Some("{\"kind\":\"local\"}"));
    assert_eq!(db.step_executor(second.id).unwrap(), None);
    let result = StepResult {
        exit_code: Some(0),
        outcome: Some("ok".into()),
        usage: Some(json!({"tokens": 3})),
        cost: Some(0.25),
        tests: Some(json!({"passed": 12})),
        handoff_content: Some("notes".into()),
        handoff_metadata: Some(json!({"fields": ["a"]})),
        ..Default::default()
    };
    assert!(store.write(|db| db.finish_step_run(first.id, StepState::Succeeded, &result)).unwrap());
    assert!(!store.write(|db| db.finish_step_run(first.id, StepState::Failed, &result)).unwrap(), "final once");
    let db = store.read();
    let done = db.step_run(first.id).unwrap();
    assert_eq!((done.state, done.cost, done.exit_code), (StepState::Succeeded, Some(0.25), Some(0)));
    assert_eq!(done.usage, Some(json!({"tokens": 3})));
    assert!(db.key_succeeded(&first.execution_key).unwrap());
    assert!(!db.key_succeeded(&second.execution_key).unwrap());
    assert_eq!(db.run_cost(run).unwrap(), 0.25);
    assert_eq!(db.last_handoff(run).unwrap().map(|s| s.id), Some(first.id));
    assert_eq!(db.last_step_run(t).unwrap().map(|s| s.id), Some(second.id));
    assert_eq!(db.step_runs(t).unwrap().len(), 2);
    assert_eq!(db.attempts_since_entry(t, run, "build").unwrap(), 2);
    // The card sums the run and shows the last test counts.
    let card = db.task_card(t).unwrap().expect("a card");
    assert_eq!((card.steps_done, card.cost), (0, Some(0.25)), "build is being redone");
    assert_eq!(db.task_cards().unwrap().len(), 1);
    let stopped = store
        .write(|db| db.end_open_step_runs(t, StepState::Cancelled, "moved on"))
        .unwrap();
    assert!(stopped.is_empty(), "the open one was pending, not running");
    let db = store.read();
    assert_eq!(db.step_run(second.id).unwrap().state, StepState::Cancelled);
    assert!(!db.any_open_step_runs().unwrap());
    assert_eq!(db.next_due_after(0).unwrap(), None);
    // Carried into a new run of the task, with the next position.
    let next = store.write(|db| db.insert_run(t, RunState::Running)).unwrap();
    store.write(|db| db.carry_step_run(first.id, next, "kept")).unwrap();
    let carried = store.read().last_step_run(t).unwrap().unwrap();
    assert_eq!(
        (carried.run_id, carried.execution_key, carried.seq, carried.state),
        (next, format!("{next}:build:1"), 3, StepState::Succeeded)
    );
    let card = store.read().task_card(t).unwrap().unwrap();
    assert_eq!(card.steps_done, 1);
    assert_eq!(card.tests, Some(json!({"passed": 12})));
});

both!(fn a_look_at_a_tasks_step_runs_starts_where_the_last_left_off(board) {
    let mut store = board.open();
    let (t, run) = store.write(|db| task(db, "t")).unwrap();
    let (other, other_run) = store.write(|db| task(db, "other")).unwrap();
    let done = StepResult::default();
    // Three step runs that ended, one of another task, one running and one pending.
    let ids = store
        .write(|db| {
            let mut ids = Vec::new();
            for _ in 0..3 {
                let s = db.insert_step_run(t, run, "build", None, 0)?;
                db.claim_step_run(s.id, 5)?;
                db.finish_step_run(s.id, StepState::Succeeded, &done)?;
                ids.push(s.id);
            }
            db.insert_step_run(other, other_run, "build", None, 0)?;
            let running = db.insert_step_run(t, run, "test", None, 0)?;
            db.claim_step_run(running.id, now_ms())?;
            ids.push(running.id);
            ids.push(db.insert_step_run(t, run, "lint", None, 0)?.id);
            Ok::<_, StoreError>(ids)
        })
        .unwrap();
    let db = store.read();
    assert_eq!(db.step_run_ids(t).unwrap(), ids);
    // A first look since the beginning of time starts at the first.
    assert_eq!(db.steps_from_since(t, 0).unwrap(), ids[0]);
    // From a moment to come, only the open ones are new.
    let later = now_ms() + 60_000;
    assert_eq!(db.steps_from_since(t, later).unwrap(), ids[3]);
    let steps = db.step_runs_from(t, ids[0]).unwrap();
    assert_eq!(steps.iter().map(|s| s.id).collect::<Vec<_>>(), ids, "not the other task's");
    assert_eq!(steps.iter().map(|s| s.seq).collect::<Vec<_>>(), [1, 2, 3, 4, 5], "their places");
    assert_eq!(db.step_runs_from(t, ids[3]).unwrap().len(), 2);
    // A task with nothing open or recent: past its last run.
    store.write(|db| db.end_open_step_runs(other, StepState::Cancelled, "gone")).unwrap();
    let db = store.read();
    let past = db.steps_from_since(other, later).unwrap();
    assert!(past > db.step_run_ids(other).unwrap()[0]);
    assert!(db.step_runs_from(other, past).unwrap().is_empty());
    // A task with no step run yet: its first will be past 0.
    let (empty, _) = store.write(|db| task(db, "empty")).unwrap();
    assert_eq!(store.read().steps_from_since(empty, 0).unwrap(), 1);
});

both!(fn events_commands_logs_and_messages_read_back(board) {
    let mut store = board.open();
    let (t, run) = store.write(|db| task(db, "t")).unwrap();
    let step = store.write(|db| db.insert_step_run(t, run, "build", None, 0)).unwrap().id;
    let (e1, e2) = store
        .write(|db| {
            let event = |task_id, level| NewEvent {
                task_id,
                category: "c",
                kind: "k",
                summary: format!("said {level}"),
                data: json!({"n": 1}),
                actor: "ann",
                level,
            };
            let e1 = db.insert_event(&event(Some(t), "info"))?;
            let e2 = db.insert_event(&event(None, "error"))?;
            Ok::<_, StoreError>((e1, e2))
        })
        .unwrap();
    let db = store.read();
    assert_eq!(db.events(t).unwrap().iter().map(|e| e.id).collect::<Vec<_>>(), [e1]);
    assert_eq!(db.events(t).unwrap()[0].data, json!({"n": 1}));
    assert_eq!(db.workspace_events(10).unwrap().iter().map(|e| e.id).collect::<Vec<_>>(), [e2]);
    assert_eq!(db.problems_after(0).unwrap().iter().map(|e| e.id).collect::<Vec<_>>(), [e2]);
    assert_eq!(db.last_event_id().unwrap(), e2);
    assert!(store.write(|db| db.note_delivery("d1", 2, 60_000)).unwrap());
    assert!(!store.write(|db| db.note_delivery("d1", 2, 60_000)).unwrap(), "seen before");
    for d in ["d2", "d3", "d4"] {
        assert!(store.write(|db| db.note_delivery(d, 2, 60_000)).unwrap());
    }
    assert_eq!(store.read().deliveries_kept().unwrap(), 2);
    // Commands.
    let c = store.write(|db| db.insert_command(Some(t), &json!({"op": "go"}))).unwrap();
    assert_eq!(store.read().pending_commands().unwrap()[0].body, json!({"op": "go"}));
    store.write(|db| db.finish_command(c, CommandState::Done, "went")).unwrap();
    let row = store.read().command(c).unwrap().unwrap();
    assert_eq!((row.state, row.result.as_deref()), (CommandState::Done, Some("went")));
    assert!(store.read().pending_commands().unwrap().is_empty());
    assert!(store.read().command(c + 100).unwrap().is_none());
    // Log lines, both insert paths.
    let lines: Vec<NewLogLine> = (0..40)
        .map(|i| NewLogLine { step_run_id: step, stream: if i % 2 == 0 { Stream::Stdout } else { Stream::Stderr }, ts: i, text: format!("l{i}") })
        .collect();
    store.write(|db| db.insert_log_lines(&lines)).unwrap();
    let db = store.read();
    assert_eq!(db.log_count(step).unwrap(), 40);
    let first = db.log_lines(step, 0, 3).unwrap();
    assert_eq!(first.iter().map(|l| l.text.as_str()).collect::<Vec<_>>(), ["l0", "l1", "l2"]);
    assert_eq!(first[1].stream, Stream::Stderr);
    let tail = db.log_tail(step, 2).unwrap();
    assert_eq!(tail.iter().map(|l| l.text.as_str()).collect::<Vec<_>>(), ["l38", "l39"]);
    let back = db.log_lines_before(step, tail[0].id, 2).unwrap();
    assert_eq!(back.iter().map(|l| l.text.as_str()).collect::<Vec<_>>(), ["l36", "l37"]);
    // Messages.
    let m = store.write(|db| db.insert_message(t, "hi", "ann", "next step")).unwrap();
    assert_eq!(store.read().queued_messages(t).unwrap().len(), 1);
    store.write(|db| db.deliver_messages(&[m], step, Some("live"))).unwrap();
    let said = store.read().messages(t).unwrap();
    assert_eq!((said[0].state.as_str(), said[0].via.as_str(), said[0].delivered_to), ("delivered", "live", Some(step)));
    assert!(store.read().queued_messages(t).unwrap().is_empty());
});

both!(fn a_tasks_notices_are_its_newest_warnings_and_errors(board) {
    let mut store = board.open();
    let (t, _) = store.write(|db| task(db, "t")).unwrap();
    let (other, _) = store.write(|db| task(db, "other")).unwrap();
    let ids = store
        .write(|db| {
            let mut ids = Vec::new();
            for (n, level) in ["warn", "info", "error", "warn", "info", "warn", "error", "warn"]
                .into_iter()
                .enumerate()
            {
                ids.push((level, db.insert_event(&NewEvent {
                    task_id: Some(t),
                    category: "c",
                    kind: "k",
                    summary: format!("{n}"),
                    data: json!({}),
                    actor: "engine",
                    level,
                })?));
                db.insert_event(&NewEvent {
                    task_id: Some(other),
                    category: "c",
                    kind: "k",
                    summary: "elsewhere".into(),
                    data: json!({}),
                    actor: "engine",
                    level: "error",
                })?;
            }
            Ok::<_, StoreError>(ids)
        })
        .unwrap();
    let want: Vec<i64> = ids.iter().filter(|(l, _)| *l != "info").map(|(_, id)| *id).collect();
    let got: Vec<i64> = store.read().notices(t, 5).unwrap().iter().map(|e| e.id).collect();
    assert_eq!(got, want[want.len() - 5..]);
    assert_eq!(store.read().notices(t, 50).unwrap().len(), 6);
});

both!(fn follow_ups_prs_dependencies_and_edits_read_back(board) {
    let mut store = board.open();
    let (a, run) = store.write(|db| task(db, "a")).unwrap();
    let (b, _) = store.write(|db| task(db, "b")).unwrap();
    let (c, _) = store.write(|db| task(db, "c")).unwrap();
    // Follow-ups.
    let (f1, f2) = store
        .write(|db| {
            let h = db.insert_history(a, Some(run), None, "todo", "create", "ann", None, &json!([]), &json!([]))?;
            let f1 = db.insert_followup(a, h, 0, &json!({"hook": 1}))?;
            let f2 = db.insert_followup(a, h, 1, &json!({"hook": 2}))?;
            Ok::<_, StoreError>((f1, f2))
        })
        .unwrap();
    assert_eq!((f1.key.as_str(), f1.state.as_str(), f1.attempts), (format!("hook:{}:0", f1.history_id).as_str(), "pending", 0));
    assert_eq!(store.read().open_followups().unwrap().len(), 2);
    assert_eq!(store.write(|db| db.start_followup(f1.id, "e")).unwrap(), Some(1));
    store.write(|db| db.finish_followup(f1.id, true, "ok")).unwrap();
    assert_eq!(store.write(|db| db.start_followup(f1.id, "e")).unwrap(), None, "finished");
    store.write(|db| db.set_followup_task(f1.id, b)).unwrap();
    assert_eq!(store.read().sibling_tasks(f2.id).unwrap(), [b]);
    assert!(store.read().any_open_followups().unwrap());
    // Dependencies: c waits for b, b for a.
    store
        .write(|db| {
            db.insert_deps(c, &[b])?;
            db.insert_deps(c, &[b])?;
            db.insert_deps(b, &[a])?;
            db.set_start_waits(c, true)?;
            Ok::<_, StoreError>(())
        })
        .unwrap();
    let db = store.read();
    assert_eq!(db.blockers(c).unwrap().iter().map(|x| x.id).collect::<Vec<_>>(), [b]);
    assert_eq!(db.dependents(b).unwrap(), [c]);
    assert!(db.start_waits(c).unwrap());
    assert!(db.waits_for(c, a).unwrap());
    assert!(!db.waits_for(a, c).unwrap());
    assert!(db.released_waiting().unwrap().is_empty());
    assert_eq!(db.task_card(c).unwrap().unwrap().after.as_deref(), Some(b.to_string().as_str()));
    store.write(|db| db.set_task_status(b, "done", TaskState::Done)).unwrap();
    assert_eq!(store.read().released_waiting().unwrap(), [c]);
    store.write(|db| db.touch_task(c)).unwrap();
    // Pull requests.
    let pr = TaskPr {
        task_id: a,
        url: "https://forge/pr/7".into(),
        number: 7,
        state: "open".into(),
        checks: "passed".into(),
        checks_summary: "1/1 passed".into(),
    };
    store.write(|db| db.set_task_pr(&pr)).unwrap();
    store.write(|db| db.set_task_pr(&TaskPr { state: "draft".into(), ..pr.clone() })).unwrap();
    let db = store.read();
    assert_eq!(db.task_pr(a).unwrap().map(|p| p.state), Some("draft".into()));
    assert_eq!(db.task_pr_by_number(7).unwrap().map(|p| p.task_id), Some(a));
    assert_eq!(db.open_task_prs().unwrap().len(), 1);
    assert_eq!(db.task_card(a).unwrap().unwrap().pr.as_deref(), Some("PR#7 draft ✓"));
    store.write(|db| db.set_worktree(a, Some("feat"), None, None)).unwrap();
    assert_eq!(store.read().task_by_branch("feat").unwrap(), Some(a));
    // Edits.
    store
        .write(|db| {
            db.set_task_text(a, Some("A"), None)?;
            db.set_base_branch(a, "dev")?;
            db.set_archived(c, true)?;
            Ok::<_, StoreError>(())
        })
        .unwrap();
    let db = store.read();
    assert_eq!(db.task(a).unwrap().title, "A");
    assert_eq!(db.task(a).unwrap().prompt, "do it");
    assert_eq!(db.task(a).unwrap().base_branch.as_deref(), Some("dev"));
    assert!(db.is_archived(c).unwrap());
    assert_eq!(db.archived_tasks().unwrap().iter().map(|t| t.id).collect::<Vec<_>>(), [c]);
    assert_eq!(db.task_card(c).unwrap(), None, "archived: off the board");
    store.write(|db| db.delete_task(c)).unwrap();
    assert!(matches!(store.read().task(c), Err(StoreError::NoTask(_))));
});

both!(async fn a_failed_write_in_a_group_is_undone_alone(board) {
    let h = board.handle();
    // The writer is held up by a first write while the others queue, so they are taken
    // together: one transaction, each write in a savepoint of its own.
    let (go, wait) = std::sync::mpsc::channel::<()>();
    h.write_detached("gate", move |_| {
        let _ = wait.recv();
        Ok(())
    });
    let a = h.write_queued(|db| db.set_meta("a", "1"));
    let bad = h.write_queued(|db| {
        db.set_meta("b", "1")?;
        // A statement the database refuses (a task that does not exist for a run).
        db.insert_run(-1, RunState::Running)?;
        Ok::<_, StoreError>(())
    });
    let c = h.write_queued(|db| db.set_meta("c", "1"));
    go.send(()).unwrap();
    a.await.unwrap();
    assert!(bad.await.is_err());
    c.await.unwrap();
    let read = h
        .read(|db| Ok((db.meta("a")?, db.meta("b")?, db.meta("c")?)))
        .await
        .unwrap();
    assert_eq!(read, (Some("1".into()), None, Some("1".into())));
});

/// Two writers on their own connections race to move one task out of `review`, each
/// reading the task and moving it only if it is still there (what `transition()` does):
/// exactly one wins. The first reads, then waits until the second is waiting for its turn
/// to write (or, were writers not to take turns, has finished), then moves the task and
/// commits; the second then reads the moved task.
#[test]
fn racing_approvals_on_postgres_move_a_task_once() {
    let Some(board) = super::testdb::Board::postgres() else {
        return;
    };
    let mut setup = board.open();
    let (t, _) = setup.write(|db| task(db, "t")).unwrap();
    setup
        .write(|db| db.set_task_status(t, "review", TaskState::Waiting))
        .unwrap();
    // As `transition()`'s callers do: the task is read once, and the move is decided on
    // what was read.
    let approve = |db: &Db, seen: &str, who: &str| -> Result<bool> {
        if seen != "review" {
            return Ok(false);
        }
        db.set_task_status(t, "done", TaskState::Done)?;
        db.set_meta("approved_by", who)?;
        Ok(true)
    };
    let mut watcher = board.pg_client().unwrap();
    let (read_tx, read_rx) = std::sync::mpsc::channel();
    let second_done = std::sync::atomic::AtomicBool::new(false);
    let (first, second) = std::thread::scope(|s| {
        let first = s.spawn(|| {
            let mut store = board.open();
            store.write(|db| {
                let status = db.task(t)?.status;
                read_tx.send(status.clone()).unwrap();
                // Until the second writer waits for the write lock.
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
                loop {
                    let waiting: i64 = watcher
                        .query_one(
                            "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted",
                            &[],
                        )
                        .unwrap()
                        .get(0);
                    if waiting > 0 || second_done.load(std::sync::atomic::Ordering::Acquire) {
                        break;
                    }
                    assert!(std::time::Instant::now() < deadline, "the second writer never waited");
                    std::thread::yield_now();
                }
                approve(db, &status, "first")
            })
        });
        assert_eq!(read_rx.recv().unwrap(), "review");
        let second = s.spawn(|| {
            let out = board
                .open()
                .write(|db| approve(db, &db.task(t)?.status, "second"));
            second_done.store(true, std::sync::atomic::Ordering::Release);
            out
        });
        (first.join().unwrap(), second.join().unwrap())
    });
    assert_eq!((first.unwrap(), second.unwrap()), (true, false));
    let db = setup.read();
    assert_eq!(db.task(t).unwrap().status, "done");
    assert_eq!(db.meta("approved_by").unwrap().as_deref(), Some("first"));
    assert_eq!(db.history(t).unwrap().len(), 0);
}
