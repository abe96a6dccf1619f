//! git through one queue per repository: the queue itself, retries of lost lock races against
//! real repositories, leftovers of earlier attempts, and a burst of parallel worktrees.

use baton::workspace::GitQueue;
use baton::workspace::git::{self, GitError, with_retry_observer};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex};
use std::thread::ThreadId;

fn sh(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A fresh repository on `main` with one commit, and a folder for task worktrees.
struct Repo {
    _dir: tempfile::TempDir,
    path: PathBuf,
    worktrees: PathBuf,
}

fn repo() -> Repo {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().canonicalize().unwrap().join("repo");
    std::fs::create_dir(&path).unwrap();
    sh(&path, &["init", "-q", "-b", "main"]);
    sh(&path, &["config", "user.name", "Test"]);
    sh(&path, &["config", "user.email", "test@example.com"]);
    std::fs::write(path.join("README"), "hello\n").unwrap();
    sh(&path, &["add", "."]);
    sh(&path, &["commit", "-qm", "init"]);
    let worktrees = path.parent().unwrap().join("worktrees");
    Repo {
        _dir: dir,
        path,
        worktrees,
    }
}

/// The folders `git worktree list` knows, the main checkout first.
fn worktree_list(repo: &Path) -> Vec<String> {
    sh(repo, &["worktree", "list", "--porcelain"])
        .lines()
        .filter_map(|l| l.strip_prefix("worktree "))
        .map(String::from)
        .collect()
}

#[test]
fn every_caller_gets_the_same_queue_and_its_own_thread() {
    let (a, b) = (repo(), repo());
    let q1 = GitQueue::for_repo(&a.path);
    let q2 = GitQueue::for_repo(&a.path.join("."));
    assert!(q1.same_queue(&q2));
    assert!(!q1.same_queue(&GitQueue::for_repo(&b.path)));

    let here = std::thread::current().id();
    let on_q1 = q1.run(|_| std::thread::current().id());
    let on_q2 = q2.run(|_| std::thread::current().id());
    let on_b = GitQueue::for_repo(&b.path).run(|_| std::thread::current().id());
    assert_eq!(on_q1, on_q2, "one thread per repository");
    assert_ne!(on_q1, here, "not the caller's thread");
    assert_ne!(on_q1, on_b, "another repository, another thread");
    assert_eq!(q1.run(|repo| repo.to_path_buf()), a.path);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_operations_run_in_order_off_the_runtime() {
    let r = repo();
    let q = GitQueue::for_repo(&r.path);
    let order = Arc::new(Mutex::new(Vec::new()));
    // Queued when asked for, before any is awaited: the order of the calls is the order run.
    let pending: Vec<_> = (0..50)
        .map(|i| {
            let order = order.clone();
            q.run_async(move |_| {
                order.lock().unwrap().push(i);
                (
                    std::thread::current().id(),
                    tokio::runtime::Handle::try_current().is_ok(),
                )
            })
        })
        .collect();
    let mut threads: Vec<ThreadId> = Vec::new();
    for p in pending.into_iter().rev() {
        let (thread, in_runtime) = p.await;
        assert!(!in_runtime, "git work must not run on a tokio worker");
        threads.push(thread);
    }
    assert_eq!(*order.lock().unwrap(), (0..50).collect::<Vec<_>>());
    threads.dedup();
    assert_eq!(threads.len(), 1, "all on the queue's one thread");
}

#[test]
fn a_panicking_operation_reaches_its_caller_and_the_queue_goes_on() {
    let r = repo();
    let q = GitQueue::for_repo(&r.path);
    let q2 = q.clone();
    let panicked = std::thread::spawn(move || q2.run(|_| -> () { panic!("boom") })).join();
    assert!(panicked.is_err());
    assert_eq!(q.run(|_| 7), 7);
}

#[test]
fn an_operation_may_use_its_own_queue_without_deadlock() {
    let r = repo();
    let q = GitQueue::for_repo(&r.path);
    let inner = q.clone();
    assert_eq!(q.run(move |_| inner.run(|_| 1) + 1), 2);
}

/// Runs `op` through the queue with a retry observer that reports the first retry and then
/// waits for the test's go-ahead; returns the retry count seen and the operation's result.
fn with_held_lock<T: Send + 'static>(
    q: &GitQueue,
    lock: &Path,
    op: impl FnOnce(&Path) -> T + Send + 'static,
) -> (Vec<(u32, String)>, T) {
    std::fs::create_dir_all(lock.parent().unwrap()).unwrap();
    std::fs::write(lock, "").unwrap();
    let (failed_tx, failed_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let q = q.clone();
    let worker = std::thread::spawn(move || {
        q.run(move |repo| {
            let seen = Arc::new(Mutex::new(Vec::new()));
            let log = seen.clone();
            let out = with_retry_observer(
                move |n, e: &GitError| {
                    log.lock().unwrap().push((n, e.to_string()));
                    let _ = failed_tx.send(());
                    let _ = go_rx.recv();
                },
                || op(repo),
            );
            let seen = seen.lock().unwrap().clone();
            (seen, out)
        })
    });
    // The first attempt has failed on the lock: release it, then let the retry go.
    failed_rx.recv().expect("the operation was retried");
    std::fs::remove_file(lock).unwrap();
    go_tx.send(()).unwrap();
    drop(go_tx); // any later retry goes on without waiting
    worker.join().unwrap()
}

#[test]
fn a_held_index_lock_is_waited_out() {
    let r = repo();
    std::fs::write(r.path.join("new.txt"), "x\n").unwrap();
    let q = GitQueue::for_repo(&r.path);
    let (seen, out) = with_held_lock(&q, &r.path.join(".git/index.lock"), |repo| {
        git::commit_all(repo, "saved")
    });
    assert_eq!(out, Ok(true));
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].1.contains("index.lock': File exists"), "{seen:?}");
    assert!(!seen[0].1.contains("Another git process"), "{seen:?}");
    assert_eq!(sh(&r.path, &["log", "-1", "--format=%s"]), "saved");
}

#[test]
fn a_held_branch_lock_is_waited_out_when_preparing_a_worktree() {
    let r = repo();
    let q = GitQueue::for_repo(&r.path);
    let root = r.worktrees.clone();
    let (seen, out) = with_held_lock(
        &q,
        &r.path.join(".git/refs/heads/baton/1-fix.lock"),
        move |repo| git::ensure_worktree(repo, &root, "main", 1, "fix"),
    );
    let (branch, path) = out.unwrap();
    assert_eq!(branch, "baton/1-fix");
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].1.contains("cannot lock ref"), "{seen:?}");
    assert_eq!(git::current_branch(&path).as_deref(), Some("baton/1-fix"));
}

#[test]
fn lasting_failures_are_not_retried_and_say_gits_reason() {
    let r = repo();
    let q = GitQueue::for_repo(&r.path);
    let (root, other) = (r.worktrees.clone(), r.path.parent().unwrap().join("other"));
    let (out, retries) = q.run(move |repo| {
        let retries = Arc::new(Mutex::new(0));
        let count = retries.clone();
        let out = with_retry_observer(
            move |_, _| *count.lock().unwrap() += 1,
            || {
                let no_base = git::ensure_worktree(repo, &root, "nope", 1, "a");
                git::ensure_worktree(repo, &root, "main", 2, "b").unwrap();
                // Its branch is checked out in the first folder already.
                let elsewhere = git::ensure_worktree(repo, &other, "main", 2, "b");
                (no_base, elsewhere)
            },
        );
        let n = *retries.lock().unwrap();
        (out, n)
    });
    assert_eq!(out.0, Err(GitError::NoBase("nope".into())));
    let msg = out.1.unwrap_err().to_string();
    assert!(
        msg.contains("baton/2-b") && msg.contains("worktree"),
        "{msg}"
    );
    assert!(!msg.contains("Preparing worktree"), "{msg}");
    assert_eq!(retries, 0);
}

#[test]
fn leftovers_of_earlier_attempts_are_picked_up() {
    let r = repo();
    let q = GitQueue::for_repo(&r.path);

    // A branch without its worktree (a failed add): reused, its commits kept.
    sh(&r.path, &["branch", "baton/1-left", "main"]);
    sh(&r.path, &["checkout", "-q", "baton/1-left"]);
    sh(
        &r.path,
        &["commit", "-q", "--allow-empty", "-m", "earlier work"],
    );
    sh(&r.path, &["checkout", "-q", "main"]);
    let (_, path) = q.ensure_worktree(&r.worktrees, "main", 1, "left").unwrap();
    assert_eq!(sh(&path, &["log", "-1", "--format=%s"]), "earlier work");

    // A worktree git still lists whose folder was deleted by hand: recreated.
    std::fs::remove_dir_all(&path).unwrap();
    let (_, again) = q.ensure_worktree(&r.worktrees, "main", 1, "left").unwrap();
    assert_eq!(again, path);
    assert_eq!(git::current_branch(&path).as_deref(), Some("baton/1-left"));

    // An empty folder at the path: used; a folder with files in it: refused.
    std::fs::create_dir_all(r.worktrees.join("2-empty")).unwrap();
    let (_, empty) = q.ensure_worktree(&r.worktrees, "main", 2, "empty").unwrap();
    assert_eq!(
        git::current_branch(&empty).as_deref(),
        Some("baton/2-empty")
    );
    std::fs::create_dir_all(r.worktrees.join("3-full")).unwrap();
    std::fs::write(r.worktrees.join("3-full/notes"), "mine").unwrap();
    assert_eq!(
        q.ensure_worktree(&r.worktrees, "main", 3, "full"),
        Err(GitError::PathTaken(r.worktrees.join("3-full")))
    );
}

#[test]
fn merge_task_commits_the_worktree_then_merges_and_the_branch_goes() {
    let r = repo();
    let q = GitQueue::for_repo(&r.path);
    let (branch, path) = q.ensure_worktree(&r.worktrees, "main", 1, "m").unwrap();
    std::fs::write(path.join("work.txt"), "done\n").unwrap();
    q.merge_task(&path, &branch, "main", "uncommitted work", "Merge task 1")
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(r.path.join("work.txt")).unwrap(),
        "done\n"
    );
    q.remove_worktree(&path).unwrap();
    q.delete_merged_branch(&branch, "main").unwrap();
    assert_eq!(sh(&r.path, &["branch", "--list", "baton/*"]), "");
    assert_eq!(worktree_list(&r.path), vec![r.path.display().to_string()]);
}

/// Many tasks starting at once in one repository: without the queue, a quarter of 64
/// simultaneous `git worktree add`s can fail on two cores (one reads another's half-written
/// `commondir`); through it, none does.
#[test]
fn a_burst_of_64_worktrees_through_the_queue_all_succeed_and_all_go() {
    const N: i64 = 64;
    let r = repo();
    let gate = Arc::new(Barrier::new(N as usize));
    let threads: Vec<_> = (0..N)
        .map(|i| {
            let (gate, repo, root) = (gate.clone(), r.path.clone(), r.worktrees.clone());
            std::thread::spawn(move || {
                let q = GitQueue::for_repo(&repo);
                gate.wait();
                q.ensure_worktree(&root, "main", i, &format!("task {i}"))
            })
        })
        .collect();
    let paths: Vec<PathBuf> = threads
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            t.join()
                .unwrap()
                .unwrap_or_else(|e| panic!("task {i}: {e}"))
                .1
        })
        .collect();
    assert_eq!(worktree_list(&r.path).len(), 1 + N as usize);

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let repo_path = r.path.clone();
    rt.block_on(async move {
        let removals: Vec<_> = paths
            .into_iter()
            .map(|p| {
                let q = GitQueue::for_repo(&repo_path);
                tokio::spawn(async move { q.remove_worktree_async(&p).await })
            })
            .collect();
        for removal in removals {
            removal.await.unwrap().unwrap();
        }
    });
    assert_eq!(worktree_list(&r.path), vec![r.path.display().to_string()]);
}
