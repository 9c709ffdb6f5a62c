//! REST for batch crawls: `POST /api/crawler/tasks` (crawl_batch arguments), `GET
//! /api/crawler/tasks?status=&limit=`, `GET /api/crawler/tasks/{id}` (crawl_status) and `GET
//! /api/crawler/tasks/{id}/events` (SSE: one `progress` event per finished URL, then `done`),
//! `DELETE /api/crawler/tasks/{id}` (cancels it).
//!
//! Creating a task and reading one are calls of crawl_batch and crawl_status through the
//! registry, as on every front (rates, spans, metrics, errors). The list and the event stream
//! have no tool of their own: they take a call of crawl_status from the tenant's rate first.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::response::Response;
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::IntoParams;

use super::auth::CallerTenant;
use super::reply::{broadcast_events, event, parse_body, parse_query};
use crate::app::App;
use crate::crawl::{TaskList, TaskStatus, TaskSummary};
use crate::error::{ErrorBody, ToolError};
use crate::ids::TaskId;
use crate::tools::Caller;

/// Default and largest `limit` of the task list.
const LIST_LIMIT: (usize, usize) = (50, 1000);

/// The tool whose rate the crawl routes take.
const STATUS_TOOL: &str = "crawl_status";

pub(super) fn routes(app: App) -> Router {
    Router::new()
        .route("/api/crawler/tasks", get(list).post(create))
        .route("/api/crawler/tasks/{id}", get(status).delete(cancel))
        .route("/api/crawler/tasks/{id}/events", get(events))
        .with_state(app)
}

/// Starts a crawl task (the arguments of crawl_batch).
#[utoipa::path(post, path = "/api/crawler/tasks", tag = "crawler",
    request_body(content = Object, description = "The arguments of crawl_batch."),
    responses(
        (status = 200, description = "The new task: `task_id`, `status`, `total`.", body = Object),
        (status = 400, description = "INVALID_ARGUMENT or BLOCKED_URL", body = ErrorBody),
        (status = 429, description = "LIMIT", body = ErrorBody),
    ))]
async fn create(
    State(app): State<App>,
    CallerTenant(tenant): CallerTenant,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ToolError> {
    let args = parse_body(body)?;
    let output = app
        .registry
        .call("crawl_batch", args, &Caller::new(tenant))
        .await?;
    Ok(Json(output.json))
}

/// A task's progress and all its results (crawl_status, in one page).
#[utoipa::path(get, path = "/api/crawler/tasks/{id}", tag = "crawler",
    params(("id" = String, Path, description = "The task_id crawl_batch returned.")),
    responses(
        (status = 200, description = "Status, counts and results, in URL order.", body = Object),
        (status = 404, description = "NO_SUCH_TASK", body = ErrorBody),
        (status = 429, description = "LIMIT: the tenant's rate of crawl_status", body = ErrorBody),
    ))]
async fn status(
    State(app): State<App>,
    CallerTenant(tenant): CallerTenant,
    Path(id): Path<String>,
) -> Result<Json<Value>, ToolError> {
    // The whole report, as this route always answered: no page budget.
    let args = json!({ "task_id": id, "max_tokens": usize::MAX });
    let output = app
        .registry
        .call(STATUS_TOOL, args, &Caller::new(tenant))
        .await?;
    Ok(Json(output.json))
}

/// Cancels a pending or running task: URLs not read yet are skipped as `cancelled`, no further
/// page is fetched. Answers the task's summary.
#[utoipa::path(delete, path = "/api/crawler/tasks/{id}", tag = "crawler",
    params(("id" = String, Path, description = "The task_id crawl_batch returned.")),
    responses(
        (status = 200, description = "The cancelled task's status and counts.", body = Object),
        (status = 400, description = "INVALID_ARGUMENT: the task had already finished", body = ErrorBody),
        (status = 404, description = "NO_SUCH_TASK", body = ErrorBody),
        (status = 429, description = "LIMIT: the tenant's rate of crawl_status", body = ErrorBody),
    ))]
async fn cancel(
    State(app): State<App>,
    CallerTenant(tenant): CallerTenant,
    Path(id): Path<String>,
) -> Result<Json<TaskSummary>, ToolError> {
    app.registry
        .admit(STATUS_TOOL, &Caller::new(tenant.clone()))?;
    Ok(Json(
        app.crawler.cancel(&tenant, &TaskId::parse(&id)?).await?,
    ))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// Only tasks in this state (pending, running, completed, failed, cancelled).
    #[param(value_type = Option<String>)]
    status: Option<TaskStatus>,
    /// At most this many, newest first (default 50, at most 1000).
    limit: Option<usize>,
}

/// Recent tasks.
#[utoipa::path(get, path = "/api/crawler/tasks", tag = "crawler", params(ListQuery),
    responses(
        (status = 200, description = "Task summaries.", body = Object),
        (status = 400, description = "INVALID_ARGUMENT", body = ErrorBody),
        (status = 429, description = "LIMIT: the tenant's rate of crawl_status", body = ErrorBody),
    ))]
async fn list(
    State(app): State<App>,
    CallerTenant(tenant): CallerTenant,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<TaskList>, ToolError> {
    app.registry
        .admit(STATUS_TOOL, &Caller::new(tenant.clone()))?;
    let query = parse_query(query)?;
    let limit = query.limit.unwrap_or(LIST_LIMIT.0).clamp(1, LIST_LIMIT.1);
    Ok(Json(app.crawler.list(&tenant, query.status, limit).await?))
}

/// Progress as server-sent events: `status` (or `done` at once for a finished task), a
/// `progress` per finished URL, then `done`.
#[utoipa::path(get, path = "/api/crawler/tasks/{id}/events", tag = "crawler",
    params(("id" = String, Path, description = "The task_id crawl_batch returned.")),
    responses(
        (status = 200, description = "Server-sent events.",
            body = super::openapi::SseEvent, content_type = "text/event-stream"),
        (status = 404, description = "NO_SUCH_TASK", body = ErrorBody),
        (status = 429, description = "LIMIT: the tenant's rate of crawl_status", body = ErrorBody),
    ))]
async fn events(
    State(app): State<App>,
    CallerTenant(tenant): CallerTenant,
    Path(id): Path<String>,
) -> Result<Response, ToolError> {
    app.registry
        .admit(STATUS_TOOL, &Caller::new(tenant.clone()))?;
    let (summary, receiver) = app.crawler.subscribe(&tenant, &TaskId::parse(&id)?).await?;
    let finished = summary.status.is_finished();
    // A finished task answers with `done` at once; a running one streams until its `done`.
    let first = event(if finished { "done" } else { "status" }, &summary);
    Ok(broadcast_events(first, finished, receiver, |progress| {
        let done = progress.name() == "done";
        (event(progress.name(), &progress), done)
    }))
}
