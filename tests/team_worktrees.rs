//! A task's worktree moves between machines on a shared board: two clones of one repository
//! with one bare remote in common, and one PostgreSQL board. An engine in clone A runs the
//! task's first step, whose work is committed and pushed to the remote as the step ends;
//! with A stopped, an engine in clone B runs the next step in a worktree made again from the
//! pushed branch, sees A's work, and pushes its own; back on A, A's old worktree catches up.
//! A branch never pushed fails the step that needs it, saying so. On SQLite nothing is
//! pushed. And the git underneath never moves a shared branch backwards or across.

mod common;
mod infra;
mod pg_support;

use common::{Ws, bare_remote, git};
use pg_support::{PASSWORD, Pg};
use std::path::Path;
use std::time::Duration;

/// Step `one` writes a file; the gate stops engine A; step `two` needs that file; step
/// `three` (back on A) needs step two's. Gates between them let one engine stop before the
/// other starts, and the last keeps the worktree to be looked at.
const MOVING: &str = r#"{
  "id": "moving",
  "name": "Moving",
  "statuses": [
    {"id": "todo", "kind": "queue"},
    {"id": "one", "step": {"script": "echo from-a > one.txt"}},
    {"id": "review", "kind": "gate"},
    {"id": "two", "step": {"script": "test -f one.txt || { echo 'one.txt is missing' >&2; exit 3; }\ncat one.txt > two.txt\necho from-b >> two.txt"}},
    {"id": "check", "kind": "gate"},
    {"id": "three", "step": {"script": "grep -q from-b two.txt || { echo 'step two is missing' >&2; exit 3; }\necho again-a >> two.txt"}},
    {"id": "last", "kind": "gate"},
    {"id": "done", "kind": "done"},
    {"id": "failed", "kind": "failed"},
    {"id": "cancelled", "kind": "cancelled"}
  ]
}"#;

/// A clone of `bare` (its `origin`) in a fresh temporary folder, with `.baton/` made and the
/// pipeline added.
fn clone_of(bare: &Path, name: &str) -> Ws {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", bare.display());
    git(dir.path(), &["clone", "-q", &url, name]);
    let ws = Ws::at(dir, name);
    git(ws.root(), &["config", "user.name", "Test"]);
    git(ws.root(), &["config", "user.email", "test@example.com"]);
    ws.ok(&["init"]);
    // One engine runs at a time here: the next takes a task over as soon as the last stops.
    ws.config("[engine]\ntakeover_after = \"0s\"\n");
    ws.pipeline("moving.json", MOVING);
    ws
}

/// `baton ARGS` on the PostgreSQL board, the password in the environment.
fn on_pg(ws: &Ws, pg: &Pg, args: &[&str]) -> String {
    let out = ws
        .baton(args)
        .env("BATON_DATABASE_URL", pg.url("board"))
        .env("PGPASSWORD", PASSWORD)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(out.status.success(), "baton {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// The task branches the remote holds.
fn remote_branches(bare: &Path) -> Vec<String> {
    git(
        bare,
        &[
            "for-each-ref",
            "--format=%(refname:short)",
            "refs/heads/baton/",
        ],
    )
    .lines()
    .map(String::from)
    .collect()
}

/// A file as the remote's branch holds it.
fn on_remote(bare: &Path, branch: &str, file: &str) -> String {
    git(bare, &["show", &format!("{branch}:{file}")])
}

fn step_states(pg: &Pg, id: i64) -> Vec<(String, String)> {
    pg.client("board")
        .query(
            "SELECT status, state FROM step_runs WHERE task_id = $1 ORDER BY id",
            &[&id],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

#[test]
fn a_task_moves_to_another_machine_through_its_pushed_branch() {
    let Some(pg) = Pg::start() else { return };
    pg.create_db("board");
    let remote_dir = tempfile::tempdir().unwrap();
    let bare = bare_remote(remote_dir.path());
    let (a, b) = (clone_of(&bare, "a"), clone_of(&bare, "b"));

    let id: i64 = on_pg(&a, &pg, &["new", "moving task", "--pipeline", "moving"])
        .trim()
        .parse()
        .unwrap();
    on_pg(&a, &pg, &["start", &id.to_string()]);
    // Engine A runs step one; the task then waits at the gate and the engine stops.
    on_pg(&a, &pg, &["engine", "--exit-when-idle", "--name", "a"]);
    assert_eq!(step_states(&pg, id), [("one".into(), "succeeded".into())]);
    let branch = format!("baton/{id}-moving-task");
    assert_eq!(
        remote_branches(&bare),
        std::slice::from_ref(&branch),
        "step one's end pushed"
    );
    assert_eq!(on_remote(&bare, &branch, "one.txt"), "from-a\n");
    let a_worktree: String = pg
        .client("board")
        .query_one("SELECT worktree FROM tasks WHERE id = $1", &[&id])
        .unwrap()
        .get(0);

    // A is stopped; the next step runs on engine B, in clone B.
    on_pg(&b, &pg, &["approve", &id.to_string()]);
    on_pg(&b, &pg, &["engine", "--exit-when-idle", "--name", "b"]);
    assert_eq!(
        step_states(&pg, id),
        [
            ("one".into(), "succeeded".into()),
            ("two".into(), "succeeded".into())
        ],
        "step two ran on B and found step one's file"
    );
    let row = pg
        .client("board")
        .query_one("SELECT worktree, status FROM tasks WHERE id = $1", &[&id])
        .unwrap();
    let (b_worktree, status): (String, String) = (row.get(0), row.get(1));
    assert_eq!(status, "check");
    assert_ne!(b_worktree, a_worktree, "B made a worktree of its own");
    let b_worktree = Path::new(&b_worktree);
    assert!(
        common::git(b_worktree, &["rev-parse", "--git-common-dir"])
            .trim()
            .starts_with(b.root().join(".git").to_str().unwrap()),
        "the worktree is clone B's: {}",
        b_worktree.display()
    );
    assert_eq!(
        std::fs::read_to_string(b_worktree.join("one.txt")).unwrap(),
        "from-a\n"
    );
    // Its own change went to the remote too, on top of A's.
    assert_eq!(on_remote(&bare, &branch, "two.txt"), "from-a\nfrom-b\n");
    assert_eq!(on_remote(&bare, &branch, "one.txt"), "from-a\n");
    // Step two's log says where its worktree came from.
    let lines: Vec<String> = pg
        .client("board")
        .query(
            "SELECT l.line FROM log_lines l JOIN step_runs s ON s.id = l.step_run_id \
             WHERE s.task_id = $1 AND s.status = 'two' AND l.stream = 'system' ORDER BY l.id",
            &[&id],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let remade = format!("made the worktree again from origin/{branch}");
    assert!(lines.contains(&remade), "{lines:?}");
    assert!(
        lines.contains(&format!("pushed {branch} to origin")),
        "{lines:?}"
    );

    // Back on A, whose worktree of the task is still there but behind: it catches up.
    on_pg(&a, &pg, &["approve", &id.to_string()]);
    on_pg(&a, &pg, &["engine", "--exit-when-idle", "--name", "a"]);
    let back: Option<String> = pg
        .client("board")
        .query_one("SELECT worktree FROM tasks WHERE id = $1", &[&id])
        .unwrap()
        .get(0);
    assert_eq!(
        back,
        Some(a_worktree),
        "A's own worktree is the task's again"
    );
    assert_eq!(
        step_states(&pg, id).last(),
        Some(&("three".into(), "succeeded".into())),
        "step three on A saw step two's work"
    );
    assert_eq!(
        on_remote(&bare, &branch, "two.txt"),
        "from-a\nfrom-b\nagain-a\n"
    );
}

#[test]
fn a_step_whose_branch_was_never_pushed_fails_saying_so() {
    let Some(pg) = Pg::start() else { return };
    pg.create_db("board");
    let remote_dir = tempfile::tempdir().unwrap();
    let bare = bare_remote(remote_dir.path());
    let (a, b) = (clone_of(&bare, "a"), clone_of(&bare, "b"));
    // Clone A's pushes go nowhere: its `origin` is a folder that is not a repository.
    let nowhere = remote_dir.path().join("nowhere");
    git(
        a.root(),
        &["remote", "set-url", "origin", nowhere.to_str().unwrap()],
    );

    let id: i64 = on_pg(&a, &pg, &["new", "moving task", "--pipeline", "moving"])
        .trim()
        .parse()
        .unwrap();
    on_pg(&a, &pg, &["start", &id.to_string()]);
    on_pg(&a, &pg, &["engine", "--exit-when-idle", "--name", "a"]);
    // The failed push is a warning on the task; the step itself succeeded.
    assert_eq!(step_states(&pg, id), [("one".into(), "succeeded".into())]);
    let warned: i64 = pg
        .client("board")
        .query_one(
            "SELECT COUNT(*) FROM events WHERE task_id = $1 AND type = 'branch.push_failed' \
             AND level = 'warn'",
            &[&id],
        )
        .unwrap()
        .get(0);
    assert_eq!(warned, 1);
    assert!(remote_branches(&bare).is_empty());

    on_pg(&b, &pg, &["approve", &id.to_string()]);
    on_pg(&b, &pg, &["engine", "--exit-when-idle", "--name", "b"]);
    let row = pg
        .client("board")
        .query_one(
            "SELECT state, error FROM step_runs WHERE task_id = $1 AND status = 'two'",
            &[&id],
        )
        .unwrap();
    let (state, error): (String, Option<String>) = (row.get(0), row.get(1));
    assert_eq!(state, "failed");
    let error = error.unwrap_or_default();
    assert!(
        error.contains(&format!(
            "baton/{id}-moving-task is not on the shared remote origin"
        )) && error.contains("git push origin"),
        "{error}"
    );
}

#[test]
fn on_sqlite_nothing_is_pushed() {
    let remote_dir = tempfile::tempdir().unwrap();
    let bare = bare_remote(remote_dir.path());
    let ws = clone_of(&bare, "solo");
    let id = ws.new_task("moving", "solo task");
    ws.ok(&["start", &id.to_string()]);
    ws.drain();
    assert_eq!(ws.show(id)["status"], "review", "step one ran");
    let branch = format!("baton/{id}-solo-task");
    assert!(
        git(ws.root(), &["branch", "--list", &branch]).contains(&branch),
        "the task branch exists here"
    );
    assert!(
        remote_branches(&bare).is_empty(),
        "{:?}",
        remote_branches(&bare)
    );
}

/// A commit on `branch` in `dir` (a clone or a worktree) adding `file`.
fn commit_file(dir: &Path, file: &str) {
    std::fs::write(dir.join(file), file).unwrap();
    git(dir, &["add", file]);
    git(dir, &["commit", "-qm", file]);
}

#[test]
fn a_shared_branch_is_never_moved_backwards_or_across() {
    use baton::workspace::git_shared::{
        Adopted, adopt_fetched, belongs_to, fetch_branch, push_would_drop,
    };
    let remote_dir = tempfile::tempdir().unwrap();
    let bare = bare_remote(remote_dir.path());
    let (a, b) = (clone_of(&bare, "a"), clone_of(&bare, "b"));
    let (a, b) = (a.root(), b.root());
    let branch = "baton/1-x";
    git(a, &["switch", "-qc", branch]);
    commit_file(a, "one");
    git(a, &["push", "-q", "origin", branch]);

    // B has no such branch: it is made from the remote's.
    assert!(!fetch_branch(b, "origin", "baton/9-nothing").unwrap());
    assert!(fetch_branch(b, "origin", branch).unwrap());
    assert_eq!(
        adopt_fetched(b, "origin", branch).unwrap(),
        Adopted::FromRemote
    );
    // B goes on and pushes; A, behind, moves forward to it.
    git(b, &["switch", "-q", branch]);
    commit_file(b, "two");
    assert!(!push_would_drop(b, "origin", branch));
    git(b, &["push", "-q", "origin", branch]);
    git(a, &["switch", "-q", "main"]);
    assert!(fetch_branch(a, "origin", branch).unwrap());
    assert!(push_would_drop(a, "origin", branch), "A lacks B's commit");
    assert_eq!(
        adopt_fetched(a, "origin", branch).unwrap(),
        Adopted::FromRemote
    );
    assert!(!push_would_drop(a, "origin", branch));

    // Both move on apart: neither side is picked.
    git(a, &["switch", "-q", branch]);
    commit_file(a, "three-a");
    commit_file(b, "three-b");
    git(b, &["push", "-q", "origin", branch]);
    git(a, &["switch", "-q", "main"]);
    assert!(fetch_branch(a, "origin", branch).unwrap());
    assert!(push_would_drop(a, "origin", branch));
    let err = adopt_fetched(a, "origin", branch).unwrap_err().to_string();
    assert!(err.contains("have both moved on"), "{err}");

    // A worktree is its own clone's only.
    let wt = remote_dir.path().join("wt-a");
    git(a, &["worktree", "add", "-q", wt.to_str().unwrap(), branch]);
    assert!(belongs_to(a, &wt));
    assert!(!belongs_to(b, &wt));
    assert!(!belongs_to(a, b), "a clone is no worktree");
}
