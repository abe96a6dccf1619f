//! The driver: owns the terminal, the loader and the engine client; feeds events to the
//! reducer, performs its effects, and draws only when something changed (at most ~30 times
//! a second).

use super::app::{App, Mode};
use super::event::{AppEvent, Effect, NewTask};
use super::loader::{LoadReq, Loader};
use super::notify;
use super::suspend::{INPUT_POLL, InputGate};
use super::terminal::Screen;
use super::theme::Theme;
use super::ui;
use crate::engine::client::{self, Change, Client, Ended};
use crate::store::now_ms;
use crate::workspace::Workspace;
use crossterm::event::{Event, KeyEventKind, MouseEventKind};
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::broadcast;
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};
use tokio::time::{Instant, MissedTickBehavior};

/// Shortest time between two frames.
const FRAME: Duration = Duration::from_millis(33);
/// The spinner's pace (the clock only runs while a task runs).
const TICK: Duration = Duration::from_millis(200);
/// How long quitting waits for the embedded engine to stop its steps.
const SHUTDOWN_PATIENCE: Duration = Duration::from_secs(20);

/// Runs the TUI on `ws` until the user quits.
pub fn run(ws: &Workspace) -> Result<(), String> {
    // Who the board's changes are recorded under, decided before the terminal is taken.
    crate::workspace::person::current(ws.root())?;
    let _log = super::logging::init(ws);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let out = rt.block_on(main_loop(ws));
    // The input thread may still sit in a blocking read; do not wait for it.
    rt.shutdown_timeout(Duration::from_millis(100));
    tracing::info!("runtime stopped");
    out
}

/// Reads terminal input on its own thread. It waits for input a short while at a time and
/// passes `gate` between waits, so the board can hand the terminal to a shell or an editor
/// without this thread taking their keys.
fn spawn_input(tx: UnboundedSender<AppEvent>, gate: Arc<InputGate>) {
    let _ = std::thread::Builder::new()
        .name("baton-input".into())
        .spawn(move || {
            loop {
                gate.pass();
                match crossterm::event::poll(INPUT_POLL) {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(e) => {
                        tracing::error!("reading the terminal failed: {e}");
                        return;
                    }
                }
                let ev = match crossterm::event::read() {
                    Ok(Event::Key(k)) if k.kind != KeyEventKind::Release => AppEvent::Key(k),
                    Ok(Event::Resize(w, h)) => AppEvent::Resize(w, h),
                    // Only sent while `[board] mouse = true` turned mouse reporting on.
                    Ok(Event::Mouse(m)) => match m.kind {
                        MouseEventKind::ScrollUp => AppEvent::Wheel(-1),
                        MouseEventKind::ScrollDown => AppEvent::Wheel(1),
                        _ => continue,
                    },
                    Ok(_) => continue,
                    Err(e) => {
                        tracing::error!("reading the terminal failed: {e}");
                        return;
                    }
                };
                if tx.send(ev).is_err() {
                    return;
                }
            }
        });
}

async fn main_loop(ws: &Workspace) -> Result<(), String> {
    let (tx, mut rx) = unbounded_channel();
    let changes = client::changes();
    forward(changes.subscribe(), tx.clone());
    // Before the screen is taken over, so an engine that cannot start is a plain error.
    let mut engine = connect(ws, &changes, &tx, None).await?;
    // With the engine here, the board shows its catalog (one per process, one watcher);
    // attached, the board reads and watches the pipelines itself.
    let shared = engine.catalog();
    let watch_here = shared.is_none();
    let loader = Loader::spawn_on(ws.clone(), tx.clone(), shared);
    let mut defs = watch_here.then(|| watch_definitions(ws, &loader)).flatten();
    let mut screen = Screen::enter().map_err(|e| format!("cannot set up the terminal: {e}"))?;
    let gate = Arc::new(InputGate::default());
    spawn_input(tx.clone(), gate.clone());
    let size = screen
        .terminal
        .size()
        .map_err(|e| format!("cannot read the terminal size: {e}"))?;
    let mut app = App::new(Theme::from_env(), mode(&engine), (size.width, size.height));
    app.owner = engine.owner();
    app.now_ms = now_ms();
    let (keys, mut settings, key_warnings) = super::keys_file::load_all(Some(&ws.dir()));
    super::keymap::install(keys);
    settings.pager = super::settings::git_pager(ws.root());
    screen.mouse = settings.mouse;
    if settings.mouse
        && let Err(e) = screen.capture_mouse()
    {
        tracing::warn!("mouse reporting could not be turned on: {e}");
    }
    app.settings = settings;
    if !key_warnings.is_empty() {
        app.say(key_warnings.join("; "), true);
    }
    let tmux = notify::in_tmux();
    let health = tx.clone();
    let agents_dir = ws.agents_dir();
    tokio::spawn(async move {
        let problems = super::agent_health::check_all(agents_dir).await;
        let _ = health.send(AppEvent::AgentProblems(problems));
    });
    // Ctrl+C reaches this process too while a shell or editor has the terminal: it is the
    // program's to handle, not a reason to drop the board.
    let _interrupt = signal(SignalKind::interrupt());
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut dirty = true;
    let mut last_draw = Instant::now() - FRAME;
    // A closed SSH session (SIGHUP) or a kill (SIGTERM) ends the TUI as `q` would, so the
    // embedded engine interrupts its steps cleanly and a demo workspace is removed.
    let mut hangup = signal(SignalKind::hangup());
    let mut terminate = signal(SignalKind::terminate());
    loop {
        for effect in app.take_effects() {
            match effect {
                Effect::Launch(launch) => {
                    let said = super::suspend::launch(&mut screen, &gate, &launch, tmux);
                    say(&mut app, said);
                    dirty = true;
                }
                Effect::TakeOver { task_id, cwd } => {
                    let said =
                        super::takeover::run(&mut screen, &gate, ws, task_id, &cwd, tmux, &tx);
                    say(&mut app, said);
                    dirty = true;
                }
                Effect::Page(text) => {
                    if let Some(pager) = app.settings.pager.clone() {
                        let said = super::suspend::suspended(&mut screen, &gate, || {
                            super::pager::page(&pager, &text)
                        });
                        if let Err(e) = said {
                            app.say(e, true);
                        }
                    }
                    dirty = true;
                }
                other => perform(other, ws, &engine, &loader, &tx, tmux),
            }
        }
        if app.quit {
            break;
        }
        let ticking = app.wants_tick();
        tokio::select! {
            ev = rx.recv() => {
                let Some(ev) = ev else { break };
                app.now_ms = now_ms();
                dirty |= handle(ev, &mut app, &mut engine, ws, &changes, &tx).await;
                // Drain what is already queued before drawing.
                while let Ok(ev) = rx.try_recv() {
                    dirty |= handle(ev, &mut app, &mut engine, ws, &changes, &tx).await;
                }
                // Attached now to an engine elsewhere (its engine handed over): the board
                // reads and watches the pipelines itself from here on.
                if defs.is_none() && !engine.embedded() {
                    loader.requester()(super::loader::LoadReq::ReadOwn);
                    defs = watch_definitions(ws, &loader);
                }
            }
            _ = tick.tick(), if ticking => {
                app.now_ms = now_ms();
                dirty |= app.update(AppEvent::Tick);
            }
            _ = recv(&mut hangup) => break,
            _ = recv(&mut terminate) => break,
            _ = tokio::time::sleep_until(last_draw + FRAME), if dirty => {
                if let Err(e) = draw(&mut screen, &app) {
                    // The terminal is gone (a hung-up SSH session): stop as if asked to.
                    tracing::warn!("{e}; stopping");
                    break;
                }
                last_draw = Instant::now();
                dirty = false;
            }
        }
    }
    tracing::info!("leaving the TUI");
    if engine.embedded() {
        app.say("stopping the engine…", false);
        let _ = draw(&mut screen, &app);
    }
    engine.shutdown(SHUTDOWN_PATIENCE).await;
    tracing::info!("engine stopped");
    drop(screen);
    tracing::info!("terminal restored");
    Ok(())
}

/// Shows a launch's result in the status line.
fn say(app: &mut App, said: Result<String, String>) {
    match said {
        Ok(text) => app.say(text, false),
        Err(text) => app.say(text, true),
    }
}

/// Waits for a signal; never resolves when the handler could not be installed.
async fn recv(sig: &mut std::io::Result<Signal>) {
    match sig {
        Ok(s) => {
            s.recv().await;
        }
        Err(_) => std::future::pending().await,
    }
}

fn draw(screen: &mut Screen, app: &App) -> Result<(), String> {
    screen
        .terminal
        .draw(|f| ui::render(f, app))
        .map(|_| ())
        .map_err(|e| format!("drawing failed: {e}"))
}

fn perform(
    effect: Effect,
    ws: &Workspace,
    engine: &Arc<Client>,
    loader: &Loader,
    tx: &UnboundedSender<AppEvent>,
    tmux: bool,
) {
    match effect {
        Effect::LoadBoard => loader.request(LoadReq::Board),
        Effect::LoadCard(id) => loader.request(LoadReq::Card(id)),
        Effect::LoadTask(id) => loader.request(LoadReq::Task(id)),
        Effect::LoadLog(q) => loader.request(LoadReq::Log(q)),
        Effect::LoadMoves(id) => loader.request(LoadReq::Moves(id)),
        Effect::LoadDiff(id) => loader.request(LoadReq::Diff(id)),
        Effect::LoadGraph(id) => loader.request(LoadReq::Graph(id)),
        Effect::Send(req) => {
            let (engine, tx) = (engine.clone(), tx.clone());
            tokio::spawn(async move {
                let _ = tx.send(AppEvent::Replied(engine.send(req).await));
            });
        }
        Effect::Create(new) => create(engine.clone(), new, tx.clone()),
        Effect::Playground(p) => super::playground_run::perform(p, ws, tx),
        // Handled by the loop, which owns the screen.
        Effect::Launch(_) | Effect::Page(_) | Effect::TakeOver { .. } => {}
        Effect::Copy(text) => {
            let mut out = std::io::stdout();
            let _ = out.write_all(super::launch::osc52(&text, tmux).as_bytes());
            let _ = out.flush();
        }
        Effect::Notify { title, body } => {
            let mut out = std::io::stdout();
            let _ = out.write_all(notify::sequence(&title, &body, tmux).as_bytes());
            let _ = out.flush();
        }
    }
}

/// Watches the workspace's pipelines and agents, reloading the board's copy on a change.
fn watch_definitions(
    ws: &Workspace,
    loader: &Loader,
) -> Option<crate::workspace::watch::DefinitionWatcher> {
    let reload = loader.requester();
    crate::workspace::watch::watch(&ws.dir(), move |paths| {
        // config.toml is the engine's to read; pipelines and agents are the board's too.
        if paths.iter().any(|p| !p.ends_with("config.toml")) {
            reload(super::loader::LoadReq::Reload)
        }
    })
    .map_err(|e| tracing::warn!("{e}; edits to pipelines apply when baton starts again"))
    .ok()
}

/// Feeds an event to the reducer; the engine this board used going away is handled here,
/// by connecting again: to the engine it handed over to, else running one here (with the
/// recovery any engine start does).
async fn handle(
    ev: AppEvent,
    app: &mut App,
    engine: &mut Arc<Client>,
    ws: &Workspace,
    changes: &broadcast::Sender<Change>,
    tx: &UnboundedSender<AppEvent>,
) -> bool {
    let AppEvent::EngineGone(ended) = ev else {
        return app.update(ev);
    };
    tracing::info!(?ended, "the engine this board used has stopped");
    match connect(ws, changes, tx, Some(ended)).await {
        Ok(next) => {
            *engine = next;
            let owner = engine.owner();
            let text = match &owner {
                _ if engine.embedded() => {
                    "the engine this board followed stopped; this board runs the engine now"
                        .to_string()
                }
                Some(o) => format!("attached to the engine {o} runs"),
                None => "attached to the engine that took over".to_string(),
            };
            app.update(AppEvent::EngineNow {
                mode: mode(engine),
                owner,
                took_over: engine.embedded(),
            });
            app.say(text, false);
            true
        }
        Err(e) => {
            app.say(
                format!("the engine stopped and a new one could not start: {e}"),
                true,
            );
            app.update(AppEvent::StoreChanged)
        }
    }
}

/// Connects to the engine (running it here when none runs; after one that `ended`); its
/// start-up notices, and the end of the engine used ([`AppEvent::EngineGone`]), go to the
/// board.
async fn connect(
    ws: &Workspace,
    changes: &broadcast::Sender<Change>,
    tx: &UnboundedSender<AppEvent>,
    ended: Option<Ended>,
) -> Result<Arc<Client>, String> {
    let (engine, gone) = match ended {
        Some(ended) => Client::reconnect(ws, changes, None, ended).await?,
        None => Client::connect(ws, changes).await?,
    };
    for text in engine.start_notices() {
        let _ = tx.send(AppEvent::Notice(text));
    }
    if let Some(gone) = gone {
        let tx = tx.clone();
        tokio::spawn(async move {
            if let Ok(ended) = gone.await {
                let _ = tx.send(AppEvent::EngineGone(ended));
            }
        });
    }
    Ok(Arc::new(engine))
}

/// Which kind of board this is.
fn mode(engine: &Client) -> Mode {
    if engine.embedded() {
        Mode::Embedded
    } else {
        Mode::Attached
    }
}

/// Hands the engine's changes to the board as events.
fn forward(mut changes: broadcast::Receiver<Change>, tx: UnboundedSender<AppEvent>) {
    tokio::spawn(async move {
        use broadcast::error::RecvError;
        loop {
            let ev = match changes.recv().await {
                Ok(Change::Task(id)) => AppEvent::TaskChanged(id),
                Ok(Change::Log(id)) => AppEvent::LogAppended { step_run_id: id },
                Ok(Change::Notify { title, body, .. }) => AppEvent::Notified { title, body },
                Ok(Change::Notice(text)) => AppEvent::Notice(text),
                // Missed changes: reload everything instead.
                Ok(Change::All) | Err(RecvError::Lagged(_)) => AppEvent::StoreChanged,
                Err(RecvError::Closed) => return,
            };
            if tx.send(ev).is_err() {
                return;
            }
        }
    });
}

/// Creates a task (and starts it if asked) through the engine; the id arrives as
/// [`AppEvent::Created`], a start's summary as [`AppEvent::Replied`].
fn create(engine: Arc<Client>, new: NewTask, tx: UnboundedSender<AppEvent>) {
    tokio::spawn(async move {
        let order = crate::engine::NewTask {
            title: new.title,
            prompt: new.prompt,
            pipeline: Some(new.pipeline.id),
            start: new.start,
            branch: None,
            actor: super::person(),
            idempotency_key: None,
            after: new.after,
        };
        match engine.create(order).await {
            Ok(made) => {
                let _ = tx.send(AppEvent::Created(Ok(made.id)));
                if let Some(summary) = made.started {
                    let _ = tx.send(AppEvent::Replied(Ok(summary)));
                }
            }
            Err(e) => {
                let _ = tx.send(AppEvent::Created(Err(e)));
            }
        }
    });
}
