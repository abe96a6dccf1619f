//! The docker executor's container settings and error sentences, without a daemon.

use super::super::docker_step::ended;
use super::*;
use crate::exec::StepEnv;
use std::time::Duration;

fn launch(dir: &Path, program: Program) -> Launch {
    Launch {
        program,
        env: StepEnv {
            vars: vec![
                ("BATON_TASK_TITLE".into(), "it's \"$(x)\"\nnext".into()),
                ("HOME".into(), "/root".into()),
            ],
            workdir: dir.join("wt/sub"),
            timeout: Duration::from_secs(5),
            kill_grace: Duration::from_secs(1),
        },
        worktree: dir.join("wt"),
        context_dir: dir.join("ctx"),
        labels: Labels {
            task_id: 7,
            step_run_id: 9,
            execution_key: "3:build:1".into(),
            workspace: "/ws".into(),
        },
        stdin: None,
    }
}

#[test]
fn the_container_runs_the_pipelines_command_with_task_text_only_in_env() {
    let dir = tempfile::tempdir().unwrap();
    let spec = DockerSpec {
        image: "img:1".into(),
        network: Some("none".into()),
        memory: Some(1 << 30),
        cpus: Some(1.5),
        pull: PullPolicy::Never,
    };
    let l = launch(dir.path(), Program::Shell("make test".into()));
    let mounts = host_mounts(&l.worktree, &l.context_dir, &l.worktree).unwrap();
    let body = container_body(&l, &spec, mounts.clone()).unwrap();
    assert_eq!(
        body.entrypoint.unwrap(),
        vec!["/bin/sh", "-c", "make test"],
        "the command is the pipeline's"
    );
    let env = body.env.unwrap();
    assert!(env.contains(&"BATON_TASK_TITLE=it's \"$(x)\"\nnext".to_string()));
    let home = format!("HOME={}", dir.path().join("ctx/home").display());
    assert_eq!(
        env.iter()
            .filter(|e| e.starts_with("HOME="))
            .collect::<Vec<_>>(),
        vec![&home],
        "HOME is the task's, under its context folder"
    );
    assert!(dir.path().join("ctx/home").is_dir());
    assert_eq!(body.working_dir.unwrap(), "/workspace/sub");
    let user = body.user.unwrap();
    assert_eq!(
        user,
        format!("{}:{}", nix::unistd::getuid(), nix::unistd::getgid())
    );
    let labels = body.labels.unwrap();
    assert_eq!(labels[LABEL_STEP_RUN], "9");
    assert_eq!(labels[LABEL_EXECUTION_KEY], "3:build:1");
    assert_eq!(labels[LABEL_WORKSPACE], "/ws");
    let host = body.host_config.unwrap();
    let ctx = dir.path().join("ctx").display().to_string();
    assert_eq!(
        host.binds.unwrap(),
        vec![
            format!("{}:/workspace", dir.path().join("wt").display()),
            format!("{ctx}:{ctx}"),
        ]
    );
    assert_eq!(host.network_mode.as_deref(), Some("none"));
    assert_eq!(host.memory, Some(1 << 30));
    assert_eq!(host.nano_cpus, Some(1_500_000_000));
    let argv = Program::Argv(vec!["agent".into(), "$(prompt)".into()]);
    let body = container_body(&launch(dir.path(), argv), &spec, mounts).unwrap();
    assert_eq!(body.entrypoint.unwrap(), vec!["agent", "$(prompt)"]);
}

#[test]
fn daemon_errors_say_what_to_do() {
    let denied = DockerError::IOError {
        err: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
    };
    let msg = api_error(&denied, "connecting").0;
    assert!(
        msg.contains("permission denied on the Docker socket") && msg.contains("docker` group"),
        "{msg}"
    );
    let missing = DockerError::SocketNotFoundError("/x.sock".into());
    let msg = api_error(&missing, "connecting").0;
    assert!(
        msg.contains("cannot reach the Docker daemon") && msg.contains("DOCKER_HOST"),
        "{msg}"
    );
    let refused = DockerError::DockerResponseServerError {
        status_code: 400,
        message: "invalid mount config".into(),
    };
    let msg = api_error(&refused, "creating a container").0;
    assert_eq!(
        msg,
        "the Docker daemon refused creating a container: invalid mount config"
    );
}

fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

#[test]
fn the_git_folder_is_mounted_read_only_as_a_whole() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(
        &repo,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "first",
        ],
    );
    let wt = dir.path().join("wt");
    git(
        &repo,
        &["worktree", "add", "-q", wt.to_str().unwrap(), "-b", "t1"],
    );
    let ctx = dir.path().join("ctx");
    let common = std::fs::canonicalize(repo.join(".git")).unwrap();
    let binds = host_mounts(&wt, &ctx, &repo).unwrap().binds;
    let c = common.display();
    let expected = [
        format!("{c}:{c}:ro"),
        format!("{}:/workspace/.git:ro", wt.join(".git").display()),
    ];
    for b in &expected {
        assert!(binds.contains(b), "{b} in {binds:?}");
    }
    assert!(
        !binds
            .iter()
            .any(|b| b.starts_with(&format!("{c}:")) && !b.ends_with(":ro")),
        "nothing of the git folder is writable: {binds:?}"
    );

    // A step in the repository's own checkout: its git folder is under /workspace.
    let binds = host_mounts(&repo, &ctx, &repo).unwrap().binds;
    let g = repo.join(".git");
    assert!(binds.contains(&format!("{}:/workspace/.git:ro", g.display())));
}

/// A `.git` file naming a git folder whose `commondir` is `target`, as a step could write.
fn plant_git_file(worktree: &Path, fake: &Path, target: &Path) {
    std::fs::create_dir_all(fake).unwrap();
    std::fs::write(fake.join("commondir"), target.display().to_string()).unwrap();
    std::fs::write(
        worktree.join(".git"),
        format!("gitdir: {}\n", fake.display()),
    )
    .unwrap();
}

#[test]
fn a_git_file_naming_a_folder_not_the_workspaces_repository_mounts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("ssh");
    std::fs::create_dir(&secret).unwrap();
    let ctx = dir.path().join("ctx");
    let mounted = |binds: &[String]| binds.iter().any(|b| b.contains("ssh"));
    // No git: the step runs in the workspace root and wrote `.git` there.
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    plant_git_file(&ws, &dir.path().join("fake1"), &secret);
    let binds = host_mounts(&ws, &ctx, &ws).unwrap().binds;
    assert!(!mounted(&binds), "{binds:?}");
    // Even when the named folder is some other repository's git folder.
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    git(&other, &["init", "-q"]);
    plant_git_file(&ws, &dir.path().join("fake2"), &other.join(".git"));
    let binds = host_mounts(&ws, &ctx, &ws).unwrap().binds;
    assert!(!binds.iter().any(|b| b.contains("other")), "{binds:?}");
    // A git workspace's task worktree whose `.git` names a folder not the repository's.
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    let wt = dir.path().join("wt");
    std::fs::create_dir(&wt).unwrap();
    plant_git_file(&wt, &dir.path().join("fake3"), &secret);
    let binds = host_mounts(&wt, &ctx, &repo).unwrap().binds;
    assert!(!mounted(&binds), "{binds:?}");
}

#[test]
fn the_workspaces_baton_folder_is_covered_only_where_the_worktree_holds_it() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let ctx = ws.join(".baton/context/1");
    std::fs::create_dir_all(&ctx).unwrap();
    // No git: the step runs in the workspace root.
    let m = host_mounts(&ws, &ctx, &ws).unwrap();
    assert_eq!(m.covers, vec!["/workspace/.baton".to_string()]);
    let c = ctx.display();
    assert!(m.binds.contains(&format!("{c}:{c}")), "{:?}", m.binds);
    // A workspace in a sub-folder of the tree the step runs in.
    let m = host_mounts(dir.path(), &ctx, &ws).unwrap();
    assert_eq!(m.covers, vec!["/workspace/ws/.baton".to_string()]);
    // A task worktree elsewhere holds no live `.baton`: its committed copy stays visible.
    let wt = dir.path().join("worktrees/1");
    std::fs::create_dir_all(wt.join(".baton/pipelines")).unwrap();
    assert!(host_mounts(&wt, &ctx, &ws).unwrap().covers.is_empty());
}

#[test]
fn only_an_ended_container_has_an_exit_status() {
    use crate::exec::Finish;
    use bollard::models::{ContainerState, ContainerStateStatusEnum as S};
    let state = |status, code| ContainerState {
        status: Some(status),
        exit_code: Some(code),
        ..Default::default()
    };
    // The daemon reports exit code 0 for a container still running.
    assert_eq!(ended(&state(S::RUNNING, 0)), None);
    assert_eq!(ended(&state(S::RESTARTING, 0)), None);
    assert_eq!(ended(&state(S::PAUSED, 0)), None);
    assert_eq!(ended(&state(S::EXITED, 3)), Some(Finish::Exited(3)));
    assert_eq!(ended(&state(S::DEAD, 137)), Some(Finish::Exited(137)));
    let oom = ContainerState {
        oom_killed: Some(true),
        ..state(S::EXITED, 137)
    };
    assert!(matches!(ended(&oom), Some(Finish::SpawnFailed(e)) if e.contains("memory")));
}
