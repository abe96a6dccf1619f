//! `baton serve`: the HTTP server. Everything but the GitHub webhook needs the bearer token
//! and passes the `Host`/`Origin` check (against DNS rebinding); the GitHub webhook is signed
//! instead, and takes any `Host`, since deliveries through a tunnel carry the tunnel's.
//! Bodies are capped, slow requests time out.

use super::mcp::BatonMcp;
use super::ops::Ops;
use super::{routes, token, webhooks};
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// How long a request may take to arrive and be answered (event streams excepted).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// What `baton serve` was asked for.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where to listen.
    pub listen: SocketAddr,
    /// The bearer token.
    pub token: String,
    /// The file holding it, read again on each request (None: `token` stays).
    pub token_file: Option<std::path::PathBuf>,
    /// The largest request body, in bytes.
    pub max_body: usize,
    /// The environment variable holding the GitHub webhook secret.
    pub github_secret_env: String,
}

/// What handlers share.
#[derive(Clone)]
pub struct AppState {
    pub ops: Arc<Ops>,
    token: Arc<String>,
    token_file: Option<Arc<std::path::PathBuf>>,
    /// `Host` values accepted (`127.0.0.1:7077`, `localhost:7077`, …).
    hosts: Arc<Vec<String>>,
    pub github_secret_env: Arc<String>,
    max_body: usize,
    /// Cancelled when the server stops: event streams end, so shutdown need not wait.
    pub stopping: tokio_util::sync::CancellationToken,
    /// The token as it is now: event streams opened with another end.
    token_now: Arc<token::Follow>,
}

impl AppState {
    /// Says each new token (after `baton token rotate`).
    pub fn token_changes(&self) -> tokio::sync::watch::Receiver<String> {
        self.token_now.now.subscribe()
    }
}

/// The `Host` values a request may carry for this address.
fn allowed_hosts(addr: SocketAddr) -> Vec<String> {
    let port = addr.port();
    let mut hosts = vec![
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
    ];
    if !addr.ip().is_loopback() && !addr.ip().is_unspecified() {
        hosts.push(addr.to_string());
    }
    hosts
}

/// A JSON error body with the sentence.
pub fn error(status: StatusCode, message: impl Into<String>) -> Response {
    let body = serde_json::json!({ "error": message.into() });
    (status, axum::Json(body)).into_response()
}

/// Refuses requests whose `Host` is not this server's, or whose `Origin` (a browser's) is
/// another site's: a web page must not reach the board through DNS rebinding.
async fn guard_host(State(s): State<AppState>, req: Request, next: Next) -> Response {
    let headers = req.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_ascii_lowercase)
        .or_else(|| {
            req.uri()
                .authority()
                .map(|a| a.as_str().to_ascii_lowercase())
        });
    let Some(host) = host.filter(|h| s.hosts.iter().any(|a| a == h)) else {
        return error(
            StatusCode::FORBIDDEN,
            "this Host is not baton's address — connect to 127.0.0.1 or localhost with the port baton serve listens on",
        );
    };
    if let Some(origin) = headers.get(header::ORIGIN) {
        let ok = origin.to_str().ok().is_some_and(|o| {
            let o = o.to_ascii_lowercase();
            o.strip_prefix("http://")
                .or_else(|| o.strip_prefix("https://"))
                .is_some_and(|rest| rest == host)
        });
        if !ok {
            return error(
                StatusCode::FORBIDDEN,
                "requests from other web sites are refused (Origin does not match baton's address)",
            );
        }
    }
    next.run(req).await
}

/// Refuses a body larger than the limit up front (by its `Content-Length`); a body that
/// grows past it while streaming is cut off by the extractors' limit, also with 413.
async fn guard_size(State(s): State<AppState>, req: Request, next: Next) -> Response {
    let len = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(len) = len.filter(|l| *l > s.max_body as u64) {
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the request body is {len} bytes; baton takes at most {} — send less, or raise max_body_bytes under [serve] in config.toml",
                s.max_body
            ),
        );
    }
    next.run(req).await
}

/// Requires `Authorization: Bearer <token>`: the workspace's token (the request acts as
/// this process's person) or a named one (it acts as that name).
async fn guard_token(State(s): State<AppState>, mut req: Request, next: Next) -> Response {
    // The file is read again on each request, so `baton token rotate` applies at once.
    let current = match s.token_file.as_deref() {
        Some(path) => tokio::fs::read_to_string(path).await.ok(),
        None => Some(s.token.to_string()),
    };
    // What the file says now also reaches the event streams (should a file event be missed).
    let seen = current.as_deref().map_or("", str::trim);
    s.token_now.now.send_if_modified(|t| {
        let changed = t != seen;
        if changed {
            *t = seen.to_string();
        }
        changed
    });
    if current.is_some_and(|t| authorized(t.trim(), req.headers())) {
        return next.run(req).await;
    }
    if let Some(name) = named_owner(&s, req.headers()).await {
        req.extensions_mut()
            .insert(super::who::Person(name.clone()));
        return super::who::scoped(Some(name), next.run(req)).await;
    }
    let mut res = error(
        StatusCode::UNAUTHORIZED,
        "missing or wrong token — send `Authorization: Bearer <token>` with the token in .baton/token, or your own from `baton token add NAME`",
    );
    res.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    res
}

/// The name of the named token the request bears, read from `.baton/tokens` now (so a
/// revoked token is refused at once).
async fn named_owner(s: &AppState, headers: &HeaderMap) -> Option<String> {
    named_owner_of(s, bearer(headers)?).await
}

/// The name whose named token `given` is, as `.baton/tokens` says now.
pub async fn named_owner_of(s: &AppState, given: &str) -> Option<String> {
    let file = super::tokens::path(s.token_file.as_deref()?.parent()?);
    let text = tokio::fs::read_to_string(&file).await.ok()?;
    match super::tokens::parse(&text, &file) {
        Ok(tokens) => super::tokens::owner(&tokens, given),
        Err(e) => {
            tracing::warn!("{e}");
            None
        }
    }
}

fn authorized(token: &str, headers: &HeaderMap) -> bool {
    bearer(headers).is_some_and(|given| !token.is_empty() && token::matches(token, given))
}

/// The token a request carries in `Authorization: Bearer <token>`.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
}

/// The whole application.
pub fn router(
    ops: Arc<Ops>,
    opts: &Options,
    stopping: tokio_util::sync::CancellationToken,
) -> Router {
    let token_now = match &opts.token_file {
        Some(file) => token::Follow::start(file, opts.token.clone()),
        None => token::Follow::fixed(opts.token.clone()),
    };
    let state = AppState {
        token_now: Arc::new(token_now),
        stopping: stopping.clone(),
        ops: ops.clone(),
        token: Arc::new(opts.token.clone()),
        token_file: opts.token_file.clone().map(Arc::new),
        hosts: Arc::new(allowed_hosts(opts.listen)),
        github_secret_env: Arc::new(opts.github_secret_env.clone()),
        max_body: opts.max_body,
    };
    // rmcp checks Host and Origin too; the guard in front already did, with the same list.
    let mcp_config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(state.hosts.iter().cloned())
        .with_max_request_body_bytes(opts.max_body)
        .with_cancellation_token(stopping.child_token());
    let mcp_ops = ops.clone();
    let mcp = StreamableHttpService::new(
        move || Ok(BatonMcp::new(mcp_ops.clone())),
        Arc::new(LocalSessionManager::default()),
        mcp_config,
    );
    let timeout = tower_http::timeout::TimeoutLayer::with_status_code(
        StatusCode::REQUEST_TIMEOUT,
        REQUEST_TIMEOUT,
    );
    let with_token = routes::api()
        .route("/hooks/trigger/{pipeline}", post(webhooks::trigger))
        .layer(timeout)
        .route("/api/events", get(super::sse::events))
        .merge(
            Router::new()
                .route_service("/mcp", mcp)
                .layer(middleware::from_fn(super::mcp_http_errors::rewrite)),
        )
        .layer(middleware::from_fn_with_state(state.clone(), guard_token))
        .layer(middleware::from_fn_with_state(state.clone(), guard_host));
    let signed = Router::new()
        .route("/hooks/github", post(webhooks::github))
        .route("/hooks/gitlab", post(super::forge_in::gitlab))
        .route("/hooks/gitea", post(super::forge_in::gitea))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            REQUEST_TIMEOUT,
        ));
    with_token
        .merge(signed)
        .fallback(|| async {
            error(
                StatusCode::NOT_FOUND,
                "no such endpoint — GET /api/openapi.json lists them",
            )
        })
        .method_not_allowed_fallback(|| async {
            error(
                StatusCode::METHOD_NOT_ALLOWED,
                "this endpoint does not take that method — GET /api/openapi.json lists each endpoint's methods",
            )
        })
        .layer(axum::extract::DefaultBodyLimit::max(opts.max_body))
        .layer(middleware::from_fn_with_state(state.clone(), guard_size))
        .with_state(state)
}

/// Binds, calls `ready` with the address bound (a port 0 becomes a real one), and serves
/// until `stop` resolves.
pub async fn serve(
    ops: Arc<Ops>,
    mut opts: Options,
    ready: impl FnOnce(SocketAddr),
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    let listener = tokio::net::TcpListener::bind(opts.listen)
        .await
        .map_err(|e| {
            format!(
                "cannot listen on {}: {e} — pick another with --listen",
                opts.listen
            )
        })?;
    opts.listen = listener.local_addr().map_err(|e| e.to_string())?;
    ready(opts.listen);
    let stopping = tokio_util::sync::CancellationToken::new();
    let app = router(ops, &opts, stopping.clone());
    let limit = super::conns::Limits::for_this_process();
    super::conns::accept(listener, app, limit, async move {
        stop.await;
        stopping.cancel();
    })
    .await;
    Ok(())
}
