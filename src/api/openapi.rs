//! The OpenAPI document at `/api/openapi.json`, generated from the handlers' annotations
//! and the types in `schema.rs` (utoipa).

use super::ops::NewTask;
use super::schema::{
    ActionBody, ActionName, AnswerBody, AnswerText, BlockerItem, ErrorBody, HistoryItem, ListItem,
    LogLineItem, LogsPage, MessageItem, MoveBody, PrItem, SayBody, ShowTask, StepItem, TriggerBody,
    ValidateBody,
};
use super::{forge_in, routes, sse, talk_routes, webhooks};
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

/// The answers any operation may give besides its own: refused by a guard, cut off, or
/// failed inside. Each is an `ErrorBody` sentence.
struct CommonAnswers;

/// The statuses and what each means, for operations behind the token.
const COMMON: &[(&str, &str)] = &[
    (
        "400",
        "the address, query string or body is not what the operation takes",
    ),
    ("401", "missing or wrong token"),
    (
        "403",
        "the Host is not baton's address, or the Origin is another site's",
    ),
    ("408", "the request took too long to arrive or to answer"),
    ("413", "the body is larger than max_body_bytes"),
    ("500", "baton failed inside (the sentence says what)"),
];

impl utoipa::Modify for CommonAnswers {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
        for (path, item) in doc.paths.paths.iter_mut() {
            let signed = matches!(
                path.as_str(),
                "/hooks/github" | "/hooks/gitlab" | "/hooks/gitea"
            );
            for op in [&mut item.get, &mut item.post].into_iter().flatten() {
                for (code, why) in COMMON {
                    // The GitHub webhook is signed instead: no token, any Host.
                    if signed && matches!(*code, "403") {
                        continue;
                    }
                    let answer = ResponseBuilder::new()
                        .description(*why)
                        .content(
                            "application/json",
                            ContentBuilder::new()
                                .schema(Some(Ref::from_schema_name("ErrorBody")))
                                .build(),
                        )
                        .build();
                    op.responses
                        .responses
                        .entry(code.to_string())
                        .or_insert(answer.into());
                }
            }
        }
    }
}

/// The whole API.
#[derive(OpenApi)]
#[openapi(
    info(title = "baton", description = "The HTTP API of `baton serve` (docs/api.md)."),
    paths(
        routes::list_tasks, routes::create_task, routes::show_task, routes::act, routes::move_task,
        routes::task_logs, routes::task_diff, routes::list_pipelines, routes::show_pipeline,
        routes::validate_pipeline, routes::list_agents, sse::events, webhooks::github, forge_in::gitlab, forge_in::gitea,
        webhooks::trigger, talk_routes::say_task, talk_routes::answer_task,
    ),
    components(schemas(
        NewTask, ActionBody, ActionName, MoveBody, ValidateBody, TriggerBody, ErrorBody, ListItem, ShowTask, StepItem, PrItem,
        HistoryItem, BlockerItem, LogsPage, LogLineItem, MessageItem, SayBody, AnswerBody, AnswerText,
    )),
    modifiers(&Bearer, &CommonAnswers),
)]
pub struct ApiDoc;

/// `GET /api/openapi.json`.
pub async fn document() -> Response {
    axum::Json(ApiDoc::openapi()).into_response()
}
