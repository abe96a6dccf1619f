//! `baton-guard`: the process the engine puts between itself and a local step, so that the
//! step ends when the engine dies (`baton::exec::guard`). It uses nothing of baton but the
//! guard, so it stays small and starts fast.

fn main() {
    baton::exec::guard::main(std::env::args_os().skip(1).collect());
}
