//! REST for replays: `POST /api/replays` runs a trace again without a model in the background
//! (a trace of one of the caller's sessions, or one sent inline), `GET /api/replays/{id}` says
//! how far it is, and `GET /api/replays/{id}/events` streams it (SSE: `status`, a `step` per
//! finished step, then `done` with the report).

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Json, Router};
use data_encoding::BASE64;
use serde::Deserialize;

use super::auth::CallerTenant;
use super::reply::{broadcast_events, event, parse_body_as};
use crate::app::App;
use crate::error::{ErrorBody, ToolError};
use crate::ids::SessionName;
use crate::replay::{Expectations, HandoffMode, Options, RunEvent, RunView};
use crate::tools::Caller;

/// The tool whose rate the replay routes take (a replay is a run of browser calls, each of
/// which takes its own rate too).
const RATE_TOOL: &str = "browser_navigate";

pub(super) fn routes(app: App) -> Router {
    Router::new()
        // An inline trace carries its pictures: room as for a tool call's inline file.
        .route(
            "/api/replays",
            post(create).layer(DefaultBodyLimit::max(super::rest::tool_body_limit(&app))),
        )
        .route("/api/replays/{id}", get(status))
        .route("/api/replays/{id}/events", get(events))
        .with_state(app)
}

/// What to replay, and how.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct NewReplay {
    /// The trace of one of your sessions, as you name it (`GET /api/sessions/{session}/trace`).
    session: Option<String>,
    /// Or the trace itself: an exported zip or its trace.jsonl, in base64.
    trace: Option<String>,
    /// Where the recorded site lives now (replaces the origin of its first navigation).
    base_url: Option<String>,
    /// The trace's secrets by name (`{"password": "…"}`).
    #[serde(default)]
    secrets: HashMap<String, String>,
    /// At the end, the page must show each of these texts (frames included).
    #[serde(default)]
    expect_text: Vec<String>,
    /// At the end, the URL must contain this (or match it, with `*`).
    expect_url: Option<String>,
    /// No console error or page error in the replay.
    #[serde(default)]
    expect_no_console_errors: bool,
    /// No request of the replay answered 4xx/5xx or failed.
    #[serde(default)]
    expect_no_failed_requests: bool,
    /// What a person did during the recording: `replay` (default) does it again, `skip` leaves
    /// it out, `fail` fails there.
    #[serde(default)]
    handoff: HandoffMode,
}

/// Starts a replay; it runs in a fresh session of the caller's, closed at its end.
#[utoipa::path(post, path = "/api/replays", tag = "replays",
    request_body(content = NewReplay),
    responses(
        (status = 202, description = "The run as it starts: `id`, `status` running, `steps_total`.", body = RunView),
        (status = 400, description = "INVALID_ARGUMENT: no trace, or not one", body = ErrorBody),
        (status = 404, description = "NO_SUCH_SESSION: that session has no trace", body = ErrorBody),
        (status = 429, description = "LIMIT", body = ErrorBody),
    ))]
async fn create(
    State(app): State<App>,
    CallerTenant(tenant): CallerTenant,
    headers: axum::http::HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<(axum::http::StatusCode, Json<RunView>), ToolError> {
    app.registry
        .admit(RATE_TOOL, &Caller::new(tenant.clone()))?;
    let asked: NewReplay = parse_body_as(body, "replay")?;
    let bytes = match (&asked.session, &asked.trace) {
        (Some(session), None) => {
            let name = SessionName::parse(session)?;
            app.traces.export(&tenant, &name).await?
        }
        (None, Some(trace)) => BASE64
            .decode(trace.trim().as_bytes())
            .map_err(|_| ToolError::invalid("`trace` is not base64"))?,
        _ => {
            return Err(
                ToolError::invalid("give either `session` or `trace`").with_hint(
                    "session: one of your sessions with a trace; trace: an exported zip in base64",
                ),
            );
        }
    };
    let steps = crate::trace::read_steps(&bytes).map_err(ToolError::invalid)?;
    let options = Options {
        base_url: asked.base_url,
        secrets: asked.secrets,
        // The service's environment is the operator's, not a tenant's to read.
        secrets_from_env: false,
        handoff: asked.handoff,
        // The run tells its watchers (`handoff` events).
        handoff_progress: None,
        origin: super::origin_of(&headers),
        expect: Expectations {
            text: asked.expect_text,
            url: asked.expect_url,
            no_console_errors: asked.expect_no_console_errors,
            no_failed_requests: asked.expect_no_failed_requests,
        },
    };
    let run = app
        .replays
        .start(app.registry.clone(), tenant, steps, options)?;
    Ok((axum::http::StatusCode::ACCEPTED, Json(run)))
}

/// A replay as it is now: its steps so far, and its status.
#[utoipa::path(get, path = "/api/replays/{id}", tag = "replays",
    params(("id" = String, Path, description = "The id POST /api/replays returned.")),
    responses(
        (status = 200, description = "Status (running, passed, failed) and the finished steps.", body = RunView),
        (status = 404, description = "NO_SUCH_TASK", body = ErrorBody),
    ))]
async fn status(
    State(app): State<App>,
    CallerTenant(tenant): CallerTenant,
    Path(id): Path<String>,
) -> Result<Json<RunView>, ToolError> {
    Ok(Json(app.replays.view(&tenant, &id)?))
}

/// A replay as server-sent events: `status` (or `done` at once for a finished run), a `step`
/// per finished step or end check, `handoff` while a step waits for a person (its live link),
/// then `done` with the report.
#[utoipa::path(get, path = "/api/replays/{id}/events", tag = "replays",
    params(("id" = String, Path, description = "The id POST /api/replays returned.")),
    responses(
        (status = 200, description = "Server-sent events.",
            body = super::openapi::SseEvent, content_type = "text/event-stream"),
        (status = 404, description = "NO_SUCH_TASK", body = ErrorBody),
    ))]
async fn events(
    State(app): State<App>,
    CallerTenant(tenant): CallerTenant,
    Path(id): Path<String>,
) -> Result<Response, ToolError> {
    let (view, receiver) = app.replays.subscribe(&tenant, &id)?;
    let finished = view.status != "running";
    let first = event(if finished { "done" } else { "status" }, &view);
    Ok(broadcast_events(
        first,
        finished,
        receiver,
        |message| match message {
            RunEvent::Step(outcome) => (event("step", &outcome), false),
            RunEvent::Handoff(progress) => (event("handoff", &progress), false),
            RunEvent::Done(report) => (event("done", &report), true),
        },
    ))
}
