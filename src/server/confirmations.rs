//! Actions the operator's rules hold for a person (`[actions] confirm`): a session's open
//! questions (`GET /api/sessions/{id}/confirmations`), and a person's answer to one
//! (`POST /api/sessions/{id}/confirmations/{question}`, `{"allow": true}`). The live view
//! answers them too, through its own socket.

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::CallerTenant;
use super::reply::parse_body_as;
use crate::app::App;
use crate::browser::live::LiveHub;
use crate::error::{ErrorBody, ErrorCode, ToolError};
use crate::ids::{SessionId, SessionName};
use crate::tenancy::Tenant;

pub(super) fn routes(app: App) -> Router {
    Router::new()
        .route("/api/sessions/{id}/confirmations", get(list))
        .route("/api/sessions/{id}/confirmations/{question}", post(answer))
        .with_state(app)
}

/// A person's answer.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct Answer {
    /// true allows the action once; false refuses it.
    allow: bool,
}

fn hub_of(app: &App, tenant: &Tenant, id: &str) -> Result<std::sync::Arc<LiveHub>, ToolError> {
    let name = SessionName::parse(id)?;
    app.browser
        .live(&SessionId::new(tenant.name().clone(), name))
        .ok_or_else(|| ToolError::new(ErrorCode::NoSuchSession, format!("no live session {id:?}")))
}

/// The session's actions waiting for a person: id, what it would do, the rule holding it.
#[utoipa::path(get, path = "/api/sessions/{id}/confirmations", tag = "sessions",
    params(("id" = String, Path, description = "The session's name.")),
    responses(
        (status = 200, description = "`{\"questions\": [{\"id\", \"what\", \"rule\"}]}`", body = Object),
        (status = 400, description = "INVALID_ARGUMENT: not a session name", body = ErrorBody),
        (status = 404, description = "NO_SUCH_SESSION", body = ErrorBody),
    ))]
async fn list(
    State(app): State<App>,
    CallerTenant(tenant): CallerTenant,
    Path(id): Path<String>,
) -> Result<Json<Value>, ToolError> {
    let hub = hub_of(&app, &tenant, &id)?;
    Ok(Json(json!({ "questions": hub.confirmations().open() })))
}

/// Allows (once) or refuses an action held for a person; the agent's call waiting for it goes
/// on, or its repeated call does.
#[utoipa::path(post, path = "/api/sessions/{id}/confirmations/{question}", tag = "sessions",
    params(
        ("id" = String, Path, description = "The session's name."),
        ("question" = String, Path, description = "The question's id (c-…)."),
    ),
    request_body = Answer,
    responses(
        (status = 200, description = "`{\"answered\": \"allowed\"|\"refused\"}`", body = Object),
        (status = 400, description = "INVALID_ARGUMENT", body = ErrorBody),
        (status = 404, description = "NO_SUCH_SESSION: no such session or open question", body = ErrorBody),
    ))]
async fn answer(
    State(app): State<App>,
    CallerTenant(tenant): CallerTenant,
    Path((id, question)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ToolError> {
    let answer: Answer = parse_body_as(body, "answer")?;
    let hub = hub_of(&app, &tenant, &id)?;
    if !hub.confirmations().answer(&question, answer.allow) {
        return Err(ToolError::new(
            ErrorCode::NoSuchSession,
            format!("session {id:?} has no open question {question:?}"),
        )
        .with_hint(
            "it was answered already or has lapsed: GET …/confirmations lists the open ones",
        ));
    }
    let answered = if answer.allow { "allowed" } else { "refused" };
    tracing::info!(session = %id, %question, answered, "a person answered a confirmation");
    Ok(Json(json!({ "answered": answered })))
}
