//! `POST /api/chat`: the agent loop over HTTP — server-sent events (`message`, `thinking`,
//! `tool_call`, `tool_started`, `handoff`, `tool_result`, `done`, `error`) by default, or one JSON answer with
//! `stream: false`. A client that disconnects stops the loop.

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::json;
use tokio::sync::mpsc;

use super::auth::CallerTenant;
use super::reply::{event, event_stream, parse_body_as};
use crate::agent::{AgentEvent, ChatRequest};
use crate::app::App;
use crate::error::{ErrorBody, ToolError};

pub(super) fn routes(app: App) -> Router {
    Router::new().route("/api/chat", post(chat)).with_state(app)
}

/// The agent loop's events as server-sent events; the loop stops when the client goes away.
pub(super) fn stream(received: mpsc::UnboundedReceiver<AgentEvent>) -> Response {
    event_stream(futures::stream::unfold(
        received,
        |mut received| async move {
            let next = received.recv().await?;
            Some((event(next.name(), &next), received))
        },
    ))
}

/// Runs the agent loop on a conversation.
#[utoipa::path(post, path = "/api/chat", tag = "agent", request_body = ChatRequest,
    responses(
        (status = 200, description = "Server-sent events (`message`, `thinking`, `tool_call`, \
            `tool_started`, `handoff`, `tool_result`, `done`, `error`), or with `stream: false` one JSON answer.",
            content((super::openapi::SseEvent = "text/event-stream"), (Object = "application/json"))),
        (status = 400, description = "INVALID_ARGUMENT", body = ErrorBody),
        (status = 501, description = "NOT_CONFIGURED: no model configured", body = ErrorBody),
        (status = 502, description = "The model failed (`stream: false`).", body = Object),
    ))]
async fn chat(
    State(app): State<App>,
    CallerTenant(tenant): CallerTenant,
    headers: axum::http::HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ToolError> {
    let origin = super::origin_of(&headers);
    // Any content type: `curl -d` sends JSON as application/x-www-form-urlencoded.
    let request = parse_body_as::<ChatRequest>(body, "chat request").map_err(|e| {
        e.with_hint("send {\"messages\": [{\"role\": \"user\", \"content\": \"…\"}]}")
    })?;
    app.agent.check(&request, &tenant)?;
    let (events, mut received) = mpsc::unbounded_channel();
    if request.stream.unwrap_or(true) {
        let agent = app.agent.clone();
        app.tasks
            .spawn(async move { agent.run(request, tenant, origin, events).await });
        return Ok(stream(received));
    }
    let transcript = app.agent.run(request, tenant, origin, events).await;
    let mut tool_calls = 0;
    while let Ok(event) = received.try_recv() {
        match event {
            AgentEvent::ToolCall { .. } => tool_calls += 1,
            AgentEvent::Done(mut done) => {
                done.tool_calls = Some(tool_calls);
                done.messages = Some(transcript);
                return Ok(Json(done).into_response());
            }
            AgentEvent::Error { .. } => {
                let body = json!({"error": event, "messages": transcript});
                return Ok((StatusCode::BAD_GATEWAY, Json(body)).into_response());
            }
            _ => {}
        }
    }
    Err(ToolError::internal("the loop ended without an answer").with_hint("call again"))
}
