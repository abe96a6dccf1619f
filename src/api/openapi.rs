//! The OpenAPI document at `/api/openapi.json`, generated from the handlers' annotations
//! and the types in `schema.rs` (utoipa).

use super::ops::NewTask;
use super::schema::{
    ActionBody, ErrorBody, HistoryItem, ListItem, LogLineItem, LogsPage, ShowTask, StepItem,
    TriggerBody, ValidateBody,
};
use super::{routes, sse, webhooks};
use axum::response::{IntoResponse, Response};
use utoipa::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};

/// The bearer token as a security scheme.
struct Bearer;

impl utoipa::Modify for Bearer {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The whole API.
#[derive(OpenApi)]
#[openapi(
    info(title = "baton", description = "The HTTP API of `baton serve` (docs/api.md)."),
    paths(
        routes::list_tasks, routes::create_task, routes::show_task, routes::act,
        routes::task_logs, routes::task_diff, routes::list_pipelines, routes::show_pipeline,
        routes::validate_pipeline, routes::list_agents, sse::events, webhooks::github,
        webhooks::trigger,
    ),
    components(schemas(
        NewTask, ActionBody, ValidateBody, TriggerBody, ErrorBody, ListItem, ShowTask, StepItem,
        HistoryItem, LogsPage, LogLineItem,
    )),
    modifiers(&Bearer),
)]
pub struct ApiDoc;

/// `GET /api/openapi.json`.
pub async fn document() -> Response {
    axum::Json(ApiDoc::openapi()).into_response()
}
