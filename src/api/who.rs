//! Who an API request acts for: the person whose named token it bears, else the `serve` or
//! `mcp` process's own person (the old `.baton/token`, MCP on stdio). The token check scopes
//! the request's handling with the name, so the engine records it on every row the request
//! makes.

use std::future::Future;

tokio::task_local! {
    static ACTOR: String;
}

/// The name a named token gave its request, kept in the request's extensions (MCP over
/// HTTP reads it there: its tools run on the session's own task).
#[derive(Debug, Clone, PartialEq)]
pub struct Person(pub String);

/// Runs `f` acting for `name` (or for the process's person when None).
pub async fn scoped<F: Future>(name: Option<String>, f: F) -> F::Output {
    match name {
        Some(n) => ACTOR.scope(n, f).await,
        None => f.await,
    }
}

/// Who the request being handled acts for.
pub fn actor() -> String {
    ACTOR
        .try_with(Clone::clone)
        .ok()
        .or_else(|| crate::workspace::person::known().map(str::to_string))
        .unwrap_or_else(|| "api".into())
}

/// The name the request being handled filters by with `mine`.
pub fn mine_or(mine: bool, by: Option<String>) -> Option<String> {
    if mine { Some(actor()) } else { by }
}
