//! The MCP server (the official Rust SDK, rmcp): the tools of `mcp_tools`, resources for the
//! board, each task and each pipeline, and resource-updated notifications for subscribed
//! URIs, driven by the engine's changes. Served on stdio by `baton mcp` and over Streamable
//! HTTP at `/mcp` by `baton serve`.

use super::mcp_tools;
use super::ops::{Kind, OpError, Ops};
use crate::engine::wake::Change;
#[allow(deprecated)] // logging/setLevel: still in the protocol versions clients speak today
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest,
    CustomResult, ErrorCode, Implementation, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, LoggingLevel, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
    ServerCapabilities, ServerConfig, SetLevelRequestParams, SubscribeRequestParams,
    SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServerHandler};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

const BOARD: &str = "baton://board";
const TASK: &str = "baton://task/";
const PIPELINES: &str = "baton://pipelines";
const PIPELINE: &str = "baton://pipeline/";

const INSTRUCTIONS: &str = "baton runs software tasks through pipelines of agents and scripts on a kanban board. \
Create a task with create_task (start: true runs it), watch it with show_task and task_logs, and \
move it on at gates with approve or reject (a note says what to change). Results are the JSON of \
`baton show --json` and `baton list --json`.";

/// One MCP session's server: shares the operations, keeps its own subscriptions.
#[derive(Clone)]
pub struct BatonMcp {
    ops: Arc<Ops>,
    subscribed: Arc<Mutex<HashSet<String>>>,
    /// Set once the change forwarder runs for this session.
    forwarding: Arc<Mutex<bool>>,
}

impl BatonMcp {
    /// A server over these operations.
    pub fn new(ops: Arc<Ops>) -> Self {
        Self {
            ops,
            subscribed: Arc::default(),
            forwarding: Arc::default(),
        }
    }

    /// Starts sending `notifications/resources/updated` to this peer for subscribed URIs.
    fn forward(&self, peer: Peer<RoleServer>) {
        let mut started = self.forwarding.lock().unwrap_or_else(|e| e.into_inner());
        if *started {
            return;
        }
        *started = true;
        let mut changes = self.ops.changes();
        let subscribed = self.subscribed.clone();
        let ops = self.ops.clone();
        tokio::spawn(async move {
            use tokio::sync::broadcast::error::RecvError;
            loop {
                let change = match changes.recv().await {
                    Ok(c) => c,
                    Err(RecvError::Lagged(_)) => Change::All,
                    Err(RecvError::Closed) => return,
                };
                let uris: Vec<String> = {
                    let subs = subscribed.lock().unwrap_or_else(|e| e.into_inner());
                    if subs.is_empty() {
                        continue;
                    }
                    subs.iter().cloned().collect()
                };
                for uri in touched(&ops, change, uris).await {
                    if peer.notify_resource_updated(updated(&uri)).await.is_err() {
                        return;
                    }
                }
            }
        });
    }

    async fn read(&self, uri: &str) -> Result<String, OpError> {
        let value = if uri == BOARD {
            self.ops.list_tasks(None, None).await?
        } else if uri == PIPELINES {
            self.ops.list_pipelines().await?
        } else if let Some(id) = uri.strip_prefix(TASK) {
            let id: i64 = id.parse().map_err(|_| {
                OpError::new(
                    Kind::NotFound,
                    format!("{uri} names no task — task URIs are baton://task/<number>"),
                )
            })?;
            self.ops.show_task(id).await?
        } else if let Some(id) = uri.strip_prefix(PIPELINE) {
            self.ops.show_pipeline(id).await?
        } else {
            return Err(OpError::new(
                Kind::NotFound,
                format!(
                    "no resource {uri} — baton offers {BOARD}, {PIPELINES}, {TASK}<id> and {PIPELINE}<id>"
                ),
            ));
        };
        Ok(value.to_string())
    }
}

/// The URIs among `uris` that a change touches: a task's own, and the board for any task.
async fn touched(ops: &Ops, change: Change, uris: Vec<String>) -> Vec<String> {
    let task = match change {
        Change::Task(id) => Some(id),
        Change::Log(step) => ops.client().await.task_of_step(step).await.ok(),
        Change::All => None,
        // A message for people; no resource changed.
        Change::Notify { .. } | Change::Notice(_) => return Vec::new(),
    };
    uris.into_iter()
        .filter(|uri| match task {
            None => true,
            Some(id) => uri == BOARD || *uri == format!("{TASK}{id}"),
        })
        .collect()
}

fn updated(uri: &str) -> rmcp::model::ResourceUpdatedNotificationParam {
    rmcp::model::ResourceUpdatedNotificationParam::new(uri)
}

fn json_resource(uri: &str, name: &str, description: &str) -> Resource {
    Resource::new(uri, name)
        .with_description(description)
        .with_mime_type("application/json")
}

#[allow(deprecated)] // resources/subscribe and logging/setLevel, as today's clients use them
impl ServerHandler for BatonMcp {
    fn get_info(&self) -> ServerConfig {
        let caps = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_logging()
            .build();
        let mut info = ServerConfig::new(caps);
        info.server_info = Implementation::new("baton", env!("CARGO_PKG_VERSION"));
        info.instructions = Some(INSTRUCTIONS.into());
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(mcp_tools::tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if !mcp_tools::tools().iter().any(|t| t.name == request.name) {
            return Err(McpError::invalid_params(
                format!(
                    "no tool `{}` — list the tools to see the ones baton offers",
                    request.name
                ),
                None,
            ));
        }
        // A failure is a tool error carrying the sentence the CLI prints, so the model reads it.
        // Over HTTP, a named token's request acts as its name.
        let person = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|p| p.extensions.get::<super::who::Person>())
            .map(|p| p.0.clone());
        let call = mcp_tools::call(&self.ops, &request.name, request.arguments);
        let result = match super::who::scoped(person, call).await {
            Ok(v) => CallToolResult::success(vec![ContentBlock::text(v.to_string())]),
            Err(e) => CallToolResult::error(vec![ContentBlock::text(e.message)]),
        };
        Ok(result.into())
    }

    /// A method rmcp could not match: an unknown one, or a known one whose params are
    /// missing or of the wrong shape (rmcp's own answer is the bare method name).
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        Err(unmatched_method(&request.method))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let mut items = vec![
            json_resource(
                BOARD,
                "board",
                "Every task on the board, as `baton list --json`.",
            ),
            json_resource(PIPELINES, "pipelines", "Every pipeline with its statuses."),
        ];
        if let Ok(catalog) = self.ops.catalog().await {
            for p in &catalog.pipelines {
                items.push(json_resource(
                    &format!("{PIPELINE}{}", p.id),
                    &format!("pipeline {}", p.id),
                    "The pipeline's statuses, transitions and triggers.",
                ));
            }
        }
        Ok(ListResourcesResult::with_all_items(items))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new(format!("{TASK}{{id}}"), "task")
                .with_description("One task as `baton show --json`: steps, handoffs, history.")
                .with_mime_type("application/json"),
            ResourceTemplate::new(format!("{PIPELINE}{{id}}"), "pipeline")
                .with_description("One pipeline definition.")
                .with_mime_type("application/json"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        match self.read(&request.uri).await {
            Ok(text) => Ok(ReadResourceResult::new(vec![
                ResourceContents::text(text, request.uri).with_mime_type("application/json"),
            ])
            .into()),
            Err(e) if e.kind == Kind::NotFound => {
                Err(McpError::resource_not_found(e.message, None))
            }
            Err(e) => Err(McpError::internal_error(e.message, None)),
        }
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.subscribed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(request.uri);
        self.forward(context.peer);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.subscribed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&request.uri);
        Ok(())
    }

    /// `subscriptions/listen` (protocol 2026-07-28): resource subscriptions are honoured.
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let uris = requested.resource_subscriptions.clone().unwrap_or_default();
        Some(
            SubscriptionFilter::builder()
                .resource_subscriptions(uris)
                .build(),
        )
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        use tokio::sync::broadcast::error::RecvError;
        let uris = context
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default();
        let mut changes = self.ops.changes();
        loop {
            let change = tokio::select! {
                _ = context.cancelled() => return Ok(()),
                c = changes.recv() => match c {
                    Ok(c) => c,
                    Err(RecvError::Lagged(_)) => Change::All,
                    Err(RecvError::Closed) => return Ok(()),
                },
            };
            for uri in touched(&self.ops, change, uris.clone()).await {
                if context.sink().notify_resource_updated(uri).await.is_err() {
                    return Ok(());
                }
            }
        }
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        // baton sends no log messages of its own over MCP; any level is accepted.
        let _: LoggingLevel = request.level;
        Ok(())
    }
}

/// The methods baton's MCP server answers.
const METHODS: &str = "initialize, ping, tools/list, tools/call, resources/list, resources/templates/list, resources/read, resources/subscribe, resources/unsubscribe and logging/setLevel";

/// The sentence for a request no handler took.
fn unmatched_method(method: &str) -> McpError {
    if METHODS.split([',', ' ']).any(|m| m == method) {
        return McpError::invalid_params(
            format!(
                "the `{method}` request's params are missing or of the wrong shape — send them as the MCP specification gives them, e.g. tools/call takes {{\"name\": \"list_tasks\", \"arguments\": {{}}}}"
            ),
            None,
        );
    }
    McpError::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!("baton's MCP server has no method `{method}` — it answers {METHODS}"),
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unmatched_methods_get_a_sentence() {
        let unknown = unmatched_method("bogus/method");
        assert_eq!(unknown.code, ErrorCode::METHOD_NOT_FOUND);
        assert!(
            unknown.message.contains("no method `bogus/method`"),
            "{unknown:?}"
        );
        let shapeless = unmatched_method("tools/call");
        assert_eq!(shapeless.code, ErrorCode::INVALID_PARAMS);
        assert!(
            shapeless.message.contains("params are missing"),
            "{shapeless:?}"
        );
    }
}
