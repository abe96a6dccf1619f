//! One queue per repository for the git commands that write to it. Concurrent `git worktree
//! add`s in one repository race (one reads a sibling's half-written admin files, another finds
//! a lock taken) and fail a few times in a hundred; a queue runs them one at a time, in the
//! order they were asked for, on a thread of its own, so no git call blocks a tokio worker.
//! Read-only queries (`status`, `diff`, `rev-parse`) need no queue.

use super::git::{self, GitError};
use std::collections::HashMap;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, SendError};
use std::sync::{Arc, LazyLock, Mutex, PoisonError, Weak};
use std::thread::ThreadId;

type Job = Box<dyn FnOnce(&Path) + Send>;

/// The git queue of one repository: cheap to clone, shared by everyone in the process who asks
/// for the same repository. Its thread ends when the last clone is dropped.
#[derive(Clone)]
pub struct GitQueue {
    inner: Arc<Inner>,
}

struct Inner {
    repo: PathBuf,
    jobs: mpsc::Sender<Job>,
    /// The queue's thread; None when it could not be started (jobs then run on the caller).
    worker: Option<ThreadId>,
}

/// Live queues by canonical repository path. Weak, so an unused queue's thread can end.
static QUEUES: LazyLock<Mutex<HashMap<PathBuf, Weak<Inner>>>> = LazyLock::new(Default::default);

impl std::fmt::Debug for GitQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitQueue")
            .field("repo", &self.inner.repo)
            .finish()
    }
}

impl GitQueue {
    /// The queue of the repository whose top folder is `repo`; every caller naming the same
    /// folder (by any path that resolves to it) gets the same queue.
    pub fn for_repo(repo: &Path) -> Self {
        let key = repo.canonicalize().unwrap_or_else(|_| repo.to_path_buf());
        let mut queues = QUEUES.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(inner) = queues.get(&key).and_then(Weak::upgrade) {
            return Self { inner };
        }
        queues.retain(|_, q| q.strong_count() > 0);
        let queue = Self::start(key.clone());
        queues.insert(key, Arc::downgrade(&queue.inner));
        queue
    }

    fn start(repo: PathBuf) -> Self {
        let (jobs, rx) = mpsc::channel::<Job>();
        let folder = repo.clone();
        let name = repo.file_name().map(|n| n.to_string_lossy().into_owned());
        let worker = std::thread::Builder::new()
            .name(format!("git {}", name.unwrap_or_default()))
            .spawn(move || {
                for job in rx {
                    job(&folder);
                }
            });
        let worker = match worker {
            Ok(handle) => Some(handle.thread().id()),
            Err(e) => {
                tracing::warn!("no git queue thread for {}: {e}", repo.display());
                None
            }
        };
        Self {
            inner: Arc::new(Inner { repo, jobs, worker }),
        }
    }

    /// The repository this queue serves.
    pub fn repo(&self) -> &Path {
        &self.inner.repo
    }

    /// True when both handles are the same queue.
    pub fn same_queue(&self, other: &GitQueue) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    fn submit(&self, job: Job) {
        if let Err(SendError(job)) = self.inner.jobs.send(job) {
            // The thread never started: run here rather than not at all.
            job(&self.inner.repo);
        }
    }

    /// Runs `op` with the repository's folder after every operation queued before it, and
    /// waits for its result. For synchronous callers; async code uses [`Self::run_async`].
    /// Called from inside a queued operation, it runs `op` at once (no deadlock).
    pub fn run<T, F>(&self, op: F) -> T
    where
        F: FnOnce(&Path) -> T + Send + 'static,
        T: Send + 'static,
    {
        if Some(std::thread::current().id()) == self.inner.worker {
            return op(&self.inner.repo);
        }
        let (tx, rx) = mpsc::sync_channel(1);
        self.submit(Box::new(move |repo| {
            let _ = tx.send(catch_unwind(AssertUnwindSafe(|| op(repo))));
        }));
        match rx.recv() {
            Ok(Ok(value)) => value,
            Ok(Err(panic)) => resume_unwind(panic),
            Err(_) => unreachable!("a queued git operation is always run"),
        }
    }

    /// Queues `op` now (so operations run in the order they were asked for, not awaited) and
    /// returns a future of its result. Dropping the future does not cancel `op`: a git
    /// command is never cut off half-way.
    pub fn run_async<T, F>(&self, op: F) -> impl Future<Output = T> + Send + 'static
    where
        F: FnOnce(&Path) -> T + Send + 'static,
        T: Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.submit(Box::new(move |repo| {
            let _ = tx.send(catch_unwind(AssertUnwindSafe(|| op(repo))));
        }));
        async move {
            match rx.await {
                Ok(Ok(value)) => value,
                Ok(Err(panic)) => resume_unwind(panic),
                Err(_) => unreachable!("a queued git operation is always run"),
            }
        }
    }

    /// [`git::ensure_worktree`] through the queue.
    pub fn ensure_worktree(
        &self,
        root: &Path,
        base: &str,
        id: i64,
        title: &str,
    ) -> Result<(String, PathBuf), GitError> {
        self.run(ensure_op(root, base, id, title))
    }

    /// [`git::ensure_worktree`] through the queue, awaited.
    pub fn ensure_worktree_async(
        &self,
        root: &Path,
        base: &str,
        id: i64,
        title: &str,
    ) -> impl Future<Output = Result<(String, PathBuf), GitError>> + Send + 'static {
        self.run_async(ensure_op(root, base, id, title))
    }

    /// [`git::remove_worktree`] (then `git worktree prune`) through the queue.
    pub fn remove_worktree(&self, path: &Path) -> Result<(), GitError> {
        let path = path.to_path_buf();
        self.run(move |repo| git::remove_worktree(repo, &path))
    }

    /// [`git::remove_worktree`] through the queue, awaited.
    pub fn remove_worktree_async(
        &self,
        path: &Path,
    ) -> impl Future<Output = Result<(), GitError>> + Send + 'static {
        let path = path.to_path_buf();
        self.run_async(move |repo| git::remove_worktree(repo, &path))
    }

    /// [`git::commit_all`] in a task worktree of this repository, through the queue.
    pub fn commit_all(&self, worktree: &Path, message: &str) -> Result<bool, GitError> {
        let (worktree, message) = (worktree.to_path_buf(), message.to_string());
        self.run(move |_| git::commit_all(&worktree, &message))
    }

    /// The `merge` hook as one queued operation: commits what `worktree` holds to the task
    /// branch ([`git::commit_all`]), then merges `branch` into `base` ([`git::merge`]).
    pub fn merge_task(
        &self,
        worktree: &Path,
        branch: &str,
        base: &str,
        commit_message: &str,
        merge_message: &str,
    ) -> Result<(), GitError> {
        self.run(merge_op(
            worktree,
            branch,
            base,
            commit_message,
            merge_message,
        ))
    }

    /// [`Self::merge_task`], awaited.
    pub fn merge_task_async(
        &self,
        worktree: &Path,
        branch: &str,
        base: &str,
        commit_message: &str,
        merge_message: &str,
    ) -> impl Future<Output = Result<(), GitError>> + Send + 'static {
        self.run_async(merge_op(
            worktree,
            branch,
            base,
            commit_message,
            merge_message,
        ))
    }

    /// [`git::delete_merged_branch`] through the queue.
    pub fn delete_merged_branch(&self, branch: &str, base: &str) -> Result<(), GitError> {
        let (branch, base) = (branch.to_string(), base.to_string());
        self.run(move |repo| git::delete_merged_branch(repo, &branch, &base))
    }

    /// [`git::delete_merged_branch`] through the queue, awaited.
    pub fn delete_merged_branch_async(
        &self,
        branch: &str,
        base: &str,
    ) -> impl Future<Output = Result<(), GitError>> + Send + 'static {
        let (branch, base) = (branch.to_string(), base.to_string());
        self.run_async(move |repo| git::delete_merged_branch(repo, &branch, &base))
    }
}

fn ensure_op(
    root: &Path,
    base: &str,
    id: i64,
    title: &str,
) -> impl FnOnce(&Path) -> Result<(String, PathBuf), GitError> + Send + 'static {
    let (root, base, title) = (root.to_path_buf(), base.to_string(), title.to_string());
    move |repo| git::ensure_worktree(repo, &root, &base, id, &title)
}

fn merge_op(
    worktree: &Path,
    branch: &str,
    base: &str,
    commit_message: &str,
    merge_message: &str,
) -> impl FnOnce(&Path) -> Result<(), GitError> + Send + 'static {
    let worktree = worktree.to_path_buf();
    let [branch, base, commit_message, merge_message] =
        [branch, base, commit_message, merge_message].map(str::to_string);
    move |repo| {
        git::commit_all(&worktree, &commit_message)?;
        git::merge(repo, &branch, &base, &merge_message)
    }
}
