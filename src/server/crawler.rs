//! REST for batch crawls: `POST /api/crawler/tasks` (crawl_batch arguments), `GET
//! /api/crawler/tasks?status=&limit=`, `GET /api/crawler/tasks/{id}` (crawl_status) and `GET
//! /api/crawler/tasks/{id}/events` (SSE: one `progress` event per finished URL, then `done`).

use std::convert::Infallible;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use super::rest::error_response;
use crate::app::App;
use crate::error::ToolError;

/// Default and largest `limit` of the task list.
const LIST_LIMIT: (usize, usize) = (50, 1000);

pub(super) fn routes(app: App) -> Router {
    Router::new()
        .route("/api/crawler/tasks", get(list).post(create))
        .route("/api/crawler/tasks/{id}", get(status))
        .route("/api/crawler/tasks/{id}/events", get(events))
        .with_state(app)
}

fn respond(result: Result<Value, ToolError>) -> Response {
    match result {
        Ok(value) => Json(value).into_response(),
        Err(error) => error_response(&error),
    }
}

async fn create(State(app): State<App>, body: Bytes) -> Response {
    let args = match serde_json::from_slice::<Value>(&body) {
        Ok(args) => args,
        Err(e) => {
            return error_response(&ToolError::invalid(format!(
                "the body is not valid JSON: {e}"
            )));
        }
    };
    respond(
        app.registry
            .call("crawl_batch", args)
            .await
            .map(|output| output.json),
    )
}

async fn status(State(app): State<App>, Path(id): Path<String>) -> Response {
    respond(app.crawler.status(&id))
}

#[derive(Deserialize)]
struct ListQuery {
    status: Option<String>,
    limit: Option<usize>,
}

async fn list(State(app): State<App>, Query(query): Query<ListQuery>) -> Response {
    let limit = query.limit.unwrap_or(LIST_LIMIT.0).clamp(1, LIST_LIMIT.1);
    respond(app.crawler.list(query.status.as_deref(), limit))
}

async fn events(State(app): State<App>, Path(id): Path<String>) -> Response {
    let (summary, receiver) = match app.crawler.subscribe(&id) {
        Ok(subscription) => subscription,
        Err(error) => return error_response(&error),
    };
    let finished = matches!(summary["status"].as_str(), Some("completed" | "failed"));
    // A finished task answers with `done` at once; a running one streams until its `done`.
    let first = Event::default()
        .event(if finished { "done" } else { "status" })
        .data(summary.to_string());
    let stream = futures::stream::unfold(
        (Some(first), receiver, finished),
        |(first, mut receiver, ended)| async move {
            if let Some(first) = first {
                return Some((Ok::<_, Infallible>(first), (None, receiver, ended)));
            }
            if ended {
                return None;
            }
            match receiver.recv().await {
                Ok(event) => {
                    let done = event.name == "done";
                    let sse = Event::default()
                        .event(event.name)
                        .data(event.data.to_string());
                    Some((Ok(sse), (None, receiver, done)))
                }
                Err(RecvError::Lagged(missed)) => {
                    let sse = Event::default()
                        .event("lagged")
                        .data(json!({"missed": missed}).to_string());
                    Some((Ok(sse), (None, receiver, false)))
                }
                Err(RecvError::Closed) => None,
            }
        },
    );
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}
