//! Private sessions: `POST /api/sessions` creates one under an unguessable name (`s-` and 128
//! random bits) that only its creator knows, `GET /api/sessions` lists the live sessions,
//! `DELETE /api/sessions/{id}` closes one (its tabs, cookies and staged files), and
//! `GET /api/sessions/{id}/trace` gives a session's trace as a zip.

use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{delete, get};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::auth::CallerTenant;
use super::reply::parse_body_as;
use crate::app::App;
use crate::browser::{Identity, SessionExtras, SessionSummary};
use crate::error::{ErrorBody, ErrorCode, ToolError};
use crate::ids::{SessionId, SessionName};

/// Shortest and longest idle limit a private session may ask for, in seconds.
const IDLE_SECS: (u64, u64) = (10, 86_400);

pub(super) fn routes(app: App) -> Router {
    Router::new()
        .route("/api/sessions", get(list).post(create))
        .route("/api/sessions/{id}", delete(close))
        .route("/api/sessions/{id}/trace", get(trace))
        .route("/api/sessions/{id}/trace/steps", get(trace_steps))
        .route(
            "/api/sessions/{id}/trace/shots/{picture}",
            get(trace_picture),
        )
        .with_state(app)
}

/// What a new private session may be given: a label, an idle limit, and how it presents
/// itself to sites.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
struct NewSession {
    #[serde(flatten)]
    own: SessionLabel,
    #[serde(flatten)]
    identity: Identity,
}

/// A new session's own fields, beside its identity.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct SessionLabel {
    /// A label of the caller's, listed with the session (not its name).
    name: Option<String>,
    /// Close it after this many seconds without calls (10–86400; default the service's).
    idle_secs: Option<u64>,
}

impl NewSession {
    /// The body's own fields, then the rest as an identity. Parsed in two steps because serde's
    /// `deny_unknown_fields` does not reach through `flatten`, and an unknown field must be
    /// refused, not ignored.
    fn parse(body: Result<Bytes, BytesRejection>) -> Result<Self, ToolError> {
        let mut fields = parse_body_as::<Map<String, Value>>(body, "session options")?;
        let own: Map<String, Value> = ["name", "idle_secs"]
            .into_iter()
            .filter_map(|key| fields.remove_entry(key))
            .collect();
        let invalid = |e: serde_path_to_error::Error<serde_json::Error>| {
            ToolError::invalid(format!("bad session options: {e}"))
        };
        Ok(Self {
            own: serde_path_to_error::deserialize(Value::Object(own)).map_err(invalid)?,
            identity: serde_path_to_error::deserialize(Value::Object(fields)).map_err(invalid)?,
        })
    }
}

/// Creates a private session; pass its name as `session` (or `X-Webpilot-Session`).
#[utoipa::path(post, path = "/api/sessions", tag = "sessions",
    request_body(content = Option<NewSession>, description = "Optional label, idle limit and identity (user_agent, locale, timezone, geolocation, viewport, extra_headers, color_scheme); no body is fine."),
    responses(
        (status = 200, description = "`{\"session\": \"s-…\"}`", body = Object),
        (status = 400, description = "INVALID_ARGUMENT", body = ErrorBody),
        (status = 429, description = "LIMIT: max_sessions are live", body = ErrorBody),
    ))]
async fn create(
    State(app): State<App>,
    CallerTenant(tenant): CallerTenant,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ToolError> {
    let options = NewSession::parse(body)?;
    let extras = SessionExtras {
        idle: options.own.idle_secs.map(checked_idle).transpose()?,
        label: options.own.name.map(checked_label).transpose()?,
        identity: options.identity,
    };
    let session = app.browser.create_private(&tenant, extras).await?;
    if let Some(cluster) = &app.cluster
        && let Err(error) = cluster
            .hold(&SessionId::new(tenant.name().clone(), session.clone()))
            .await
    {
        // Still usable through this instance.
        tracing::warn!(%error, "cannot record a new session in the cluster");
    }
    Ok(Json(json!({ "session": session })))
}

fn checked_idle(secs: u64) -> Result<Duration, ToolError> {
    if (IDLE_SECS.0..=IDLE_SECS.1).contains(&secs) {
        Ok(Duration::from_secs(secs))
    } else {
        Err(ToolError::invalid(format!(
            "field `idle_secs` must be between {} and {}",
            IDLE_SECS.0, IDLE_SECS.1
        )))
    }
}

fn checked_label(label: String) -> Result<String, ToolError> {
    if (1..=64).contains(&label.chars().count()) && !label.chars().any(char::is_control) {
        Ok(label)
    } else {
        Err(ToolError::invalid(
            "field `name` must be 1-64 characters without control characters",
        ))
    }
}

/// The caller's live sessions (its tenant's): name, label, tabs, idle time; with instances
/// sharing a database, also the names of those other instances hold (calls for them are routed
/// there).
#[utoipa::path(get, path = "/api/sessions", tag = "sessions",
    responses((status = 200, description = "`{\"sessions\": [...]}`, and with several instances `\"elsewhere\": [{\"session\", \"instance\"}]`", body = Object)))]
async fn list(State(app): State<App>, CallerTenant(tenant): CallerTenant) -> Json<Value> {
    let sessions: Vec<SessionSummary> = app.browser.sessions(tenant.name());
    let mut listed = json!({ "sessions": sessions });
    if let Some(cluster) = &app.cluster {
        match cluster.held_elsewhere(tenant.name()).await {
            Ok(elsewhere) => {
                listed["elsewhere"] = elsewhere
                    .into_iter()
                    .map(|(session, instance)| json!({ "session": session, "instance": instance }))
                    .collect();
            }
            Err(error) => {
                tracing::warn!(%error, "session records unavailable; listing this instance's")
            }
        }
    }
    Json(listed)
}

/// Closes a session: its browser context, tabs, cookies and staged uploads.
#[utoipa::path(delete, path = "/api/sessions/{id}", tag = "sessions",
    params(("id" = String, Path, description = "The session's name.")),
    responses(
        (status = 204, description = "Closed."),
        (status = 404, description = "NO_SUCH_SESSION", body = ErrorBody),
    ))]
async fn close(
    State(app): State<App>,
    CallerTenant(tenant): CallerTenant,
    Path(id): Path<String>,
) -> Result<StatusCode, ToolError> {
    let closed = match SessionName::parse(&id) {
        Ok(name) => {
            let session = SessionId::new(tenant.name().clone(), name);
            app.browser.close_session(&session).await
        }
        Err(_) => false,
    };
    if closed {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ToolError::new(
            ErrorCode::NoSuchSession,
            format!("no live session {id:?}"),
        ))
    }
}

/// The session's trace as a zip holding `trace.jsonl`: every browser tool call in order, with
/// the elements the actions acted on and secrets as named placeholders. A closed session's
/// trace stays until `[trace] max_age_hours`.
#[utoipa::path(get, path = "/api/sessions/{id}/trace", tag = "sessions",
    params(("id" = String, Path, description = "The session's name, as the caller names it.")),
    responses(
        (status = 200, description = "A zip holding trace.jsonl and the steps' pictures (shots/).", content_type = "application/zip"),
        (status = 400, description = "INVALID_ARGUMENT: not a session name", body = ErrorBody),
        (status = 404, description = "NO_SUCH_SESSION: the session has no trace", body = ErrorBody),
    ))]
async fn trace(
    State(app): State<App>,
    CallerTenant(tenant): CallerTenant,
    Path(id): Path<String>,
) -> Result<axum::response::Response, ToolError> {
    use axum::response::IntoResponse;
    let name = SessionName::parse(&id)?;
    let zip = app.traces.export(&tenant, &name).await?;
    let disposition = format!("attachment; filename=\"{}-trace.zip\"", name.folder());
    Ok((
        [
            (
                axum::http::header::CONTENT_TYPE,
                "application/zip".to_string(),
            ),
            (axum::http::header::CONTENT_DISPOSITION, disposition),
        ],
        zip,
    )
        .into_response())
}

/// The session's trace as JSON: its steps in order (the lines of trace.jsonl).
#[utoipa::path(get, path = "/api/sessions/{id}/trace/steps", tag = "sessions",
    params(("id" = String, Path, description = "The session's name, as the caller names it.")),
    responses(
        (status = 200, description = "`steps`: the trace's steps.", body = Object),
        (status = 400, description = "INVALID_ARGUMENT: not a session name", body = ErrorBody),
        (status = 404, description = "NO_SUCH_SESSION: the session has no trace", body = ErrorBody),
    ))]
async fn trace_steps(
    State(app): State<App>,
    CallerTenant(tenant): CallerTenant,
    Path(id): Path<String>,
) -> Result<Json<Value>, ToolError> {
    let name = SessionName::parse(&id)?;
    let steps = app.traces.steps(&tenant, &name).await?;
    Ok(Json(json!({ "steps": steps })))
}

/// One picture of the session's trace (a step's `screenshot`, e.g. shots/0004.jpg).
#[utoipa::path(get, path = "/api/sessions/{id}/trace/shots/{picture}", tag = "sessions",
    params(
        ("id" = String, Path, description = "The session's name, as the caller names it."),
        ("picture" = String, Path, description = "The picture's file, e.g. 0004.jpg."),
    ),
    responses(
        (status = 200, description = "The JPEG.", content_type = "image/jpeg"),
        (status = 400, description = "INVALID_ARGUMENT: not a session name or a picture's", body = ErrorBody),
        (status = 404, description = "NO_SUCH_SESSION: no such trace or picture", body = ErrorBody),
    ))]
async fn trace_picture(
    State(app): State<App>,
    CallerTenant(tenant): CallerTenant,
    Path((id, picture)): Path<(String, String)>,
) -> Result<axum::response::Response, ToolError> {
    use axum::response::IntoResponse;
    let name = SessionName::parse(&id)?;
    let bytes = app
        .traces
        .picture(&tenant, &name, &format!("shots/{picture}"))
        .await?;
    Ok(([(axum::http::header::CONTENT_TYPE, "image/jpeg")], bytes).into_response())
}
