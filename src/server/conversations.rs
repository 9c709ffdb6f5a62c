//! Conversations: `POST/GET /api/conversations`, `GET/DELETE /api/conversations/{id}`,
//! `POST /api/conversations/{id}/messages` (runs the agent loop on the stored history and
//! streams the same SSE events as `/api/chat`, storing each complete turn as it ends), and
//! `GET /api/conversations/{id}/files/{name}` (a tool result's screenshot). One message at a
//! time per conversation: a second one while it answers is `LIMIT`.

use crate::sync::Locked;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use utoipa::IntoParams;

use super::auth::CallerTenant;
use super::reply::{parse_body_as, parse_query};
use crate::agent::ChatRequest;
use crate::agent::conversations::{Conversation, NewConversation, Record, Recorder};
use crate::app::App;
use crate::error::{ErrorBody, ErrorCode, ToolError};

/// Default and largest page of the conversation list.
const LIST_LIMIT: (usize, usize) = (20, 200);

#[derive(Clone)]
struct Front {
    app: App,
    /// Conversations answering a message now.
    busy: Arc<Mutex<HashSet<String>>>,
}

pub(super) fn routes(app: App) -> Router {
    let front = Front {
        app,
        busy: Arc::default(),
    };
    Router::new()
        .route("/api/conversations", get(list).post(create))
        .route("/api/conversations/{id}", get(show).delete(remove))
        .route(
            "/api/conversations/{id}/messages",
            axum::routing::post(message),
        )
        .route("/api/conversations/{id}/files/{name}", get(file))
        .with_state(front)
}

/// Starts a conversation.
#[utoipa::path(post, path = "/api/conversations", tag = "agent",
    request_body(content = Option<NewConversation>, description = "Title, model, tools, session; all optional."),
    responses(
        (status = 200, description = "The conversation: `id`, `title`, `model`, `tools`, `session`.", body = Object),
        (status = 400, description = "INVALID_ARGUMENT", body = ErrorBody),
    ))]
async fn create(
    State(front): State<Front>,
    CallerTenant(tenant): CallerTenant,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Conversation>, ToolError> {
    let new = checked(parse_body_as::<NewConversation>(body, "conversation")?)?;
    Ok(Json(
        front.app.conversations.create(tenant.name(), new).await?,
    ))
}

/// A new conversation's settings, checked as a chat request would be.
fn checked(new: NewConversation) -> Result<NewConversation, ToolError> {
    if let Some(session) = &new.session {
        crate::ids::SessionName::parse_callers(session)?;
    }
    if new.title.as_ref().is_some_and(|t| t.chars().count() > 200) {
        return Err(ToolError::invalid(
            "field `title` is longer than 200 characters",
        ));
    }
    Ok(new)
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// At most this many, newest first (default 20, at most 200).
    limit: Option<usize>,
    /// `next_cursor` of the previous page.
    cursor: Option<String>,
}

/// The caller's conversations, newest first, paged.
#[utoipa::path(get, path = "/api/conversations", tag = "agent", params(ListQuery),
    responses(
        (status = 200, description = "`conversations` and, when there are more, `next_cursor`.", body = Object),
        (status = 400, description = "INVALID_ARGUMENT", body = ErrorBody),
    ))]
async fn list(
    State(front): State<Front>,
    CallerTenant(tenant): CallerTenant,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<Value>, ToolError> {
    let query = parse_query(query)?;
    let limit = query.limit.unwrap_or(LIST_LIMIT.0).clamp(1, LIST_LIMIT.1);
    let (conversations, next) = front
        .app
        .conversations
        .list(tenant.name(), limit, query.cursor.as_deref())
        .await?;
    Ok(Json(
        json!({ "conversations": conversations, "next_cursor": next }),
    ))
}

/// A conversation with its messages (tool calls and results as the model saw them, each
/// result with its one-line summary and its images as files).
#[utoipa::path(get, path = "/api/conversations/{id}", tag = "agent",
    params(("id" = String, Path, description = "The conversation's id.")),
    responses(
        (status = 200, description = "The conversation and its `messages`.", body = Object),
        (status = 404, description = "NO_SUCH_CONVERSATION", body = ErrorBody),
    ))]
async fn show(
    State(front): State<Front>,
    CallerTenant(tenant): CallerTenant,
    Path(id): Path<String>,
) -> Result<Json<Value>, ToolError> {
    let store = &front.app.conversations;
    let conversation = store.get(tenant.name(), &id).await?;
    let mut value = json!(conversation);
    value["messages"] = json!(store.messages(&id).await?);
    value["answering"] = json!(front.is_busy(&id));
    Ok(Json(value))
}

/// Deletes a conversation and its files.
#[utoipa::path(delete, path = "/api/conversations/{id}", tag = "agent",
    params(("id" = String, Path, description = "The conversation's id.")),
    responses(
        (status = 204, description = "Deleted."),
        (status = 404, description = "NO_SUCH_CONVERSATION", body = ErrorBody),
    ))]
async fn remove(
    State(front): State<Front>,
    CallerTenant(tenant): CallerTenant,
    Path(id): Path<String>,
) -> Result<StatusCode, ToolError> {
    if front.app.conversations.delete(tenant.name(), &id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(crate::agent::conversations::no_such_conversation(&id))
    }
}

/// An image a tool returned in the conversation.
#[utoipa::path(get, path = "/api/conversations/{id}/files/{name}", tag = "agent",
    params(
        ("id" = String, Path, description = "The conversation's id."),
        ("name" = String, Path, description = "A name from a message's `files`."),
    ),
    responses(
        (status = 200, description = "The image.", content_type = "image/png"),
        (status = 404, description = "NO_SUCH_CONVERSATION", body = ErrorBody),
    ))]
async fn file(
    State(front): State<Front>,
    CallerTenant(tenant): CallerTenant,
    Path((id, name)): Path<(String, String)>,
) -> Result<Response, ToolError> {
    let (bytes, mime) = front
        .app
        .conversations
        .file(tenant.name(), &id, &name)
        .await?;
    Ok(([(header::CONTENT_TYPE, mime)], bytes).into_response())
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct NewMessage {
    /// The user's message.
    content: String,
}

/// Sends a message: the agent answers with the conversation's history, streaming the events
/// of `/api/chat`; every complete turn is stored as it ends.
#[utoipa::path(post, path = "/api/conversations/{id}/messages", tag = "agent",
    params(("id" = String, Path, description = "The conversation's id.")),
    request_body = NewMessage,
    responses(
        (status = 200, description = "Server-sent events, as `/api/chat` streams them.",
            content((super::openapi::SseEvent = "text/event-stream"))),
        (status = 400, description = "INVALID_ARGUMENT", body = ErrorBody),
        (status = 404, description = "NO_SUCH_CONVERSATION", body = ErrorBody),
        (status = 429, description = "LIMIT: the conversation is answering another message", body = ErrorBody),
        (status = 501, description = "NOT_CONFIGURED: no model configured", body = ErrorBody),
    ))]
async fn message(
    State(front): State<Front>,
    CallerTenant(tenant): CallerTenant,
    Path(id): Path<String>,
    headers: axum::http::HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ToolError> {
    let app = &front.app;
    let store = app.conversations.clone();
    let conversation = store.get(tenant.name(), &id).await?;
    let NewMessage { content } = parse_body_as(body, "message")?;
    if content.trim().is_empty() {
        return Err(ToolError::invalid("field `content` is empty"));
    }
    let request = |messages: Vec<Value>| ChatRequest {
        messages,
        model: conversation.model.clone(),
        tools: conversation.tools.clone(),
        max_iterations: None,
        stream: Some(true),
        session: Some(conversation.session.clone()),
    };
    let question = json!({ "role": "user", "content": content });
    app.agent.check(&request(vec![question.clone()]), &tenant)?;
    let answering = front.answering(&id).ok_or_else(|| {
        ToolError::new(
            ErrorCode::Limit,
            format!("conversation {id:?} is answering another message"),
        )
        .with_hint("wait for that answer's done event, then send again")
    })?;
    store.append(&id, vec![Record::of(question)]).await?;
    let history = store.history(&id).await?;
    let recorder: Recorder = {
        let (store, id) = (store.clone(), id.clone());
        Arc::new(move |records| {
            let (store, id) = (store.clone(), id.clone());
            Box::pin(async move {
                if let Err(error) = store.append(&id, records).await {
                    tracing::error!(conversation = %id, message = %error.message, "a turn was not stored");
                }
            })
        })
    };
    let (events, received) = mpsc::unbounded_channel();
    let (agent, origin) = (app.agent.clone(), super::origin_of(&headers));
    let request = request(history);
    app.tasks.spawn(async move {
        let _answering = answering;
        agent
            .run_recorded(request, tenant, origin, events, Some(recorder))
            .await
    });
    Ok(super::chat::stream(received))
}

/// Marks a conversation as answering until the returned guard drops; None if it already is.
struct Answering {
    busy: Arc<Mutex<HashSet<String>>>,
    id: String,
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.busy.locked().remove(&self.id);
    }
}

impl Front {
    fn answering(&self, id: &str) -> Option<Answering> {
        let mut busy = self.busy.locked();
        busy.insert(id.to_string()).then(|| Answering {
            busy: self.busy.clone(),
            id: id.to_string(),
        })
    }

    fn is_busy(&self, id: &str) -> bool {
        self.busy.locked().contains(id)
    }
}
