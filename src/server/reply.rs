//! How the HTTP fronts answer, in one place: an error is `{ "error": { "code", "message",
//! "hint" } }` with the status its code maps to and `Retry-After` when it says how long to wait
//! (`impl IntoResponse for ToolError`, so handlers return `Result<_, ToolError>` and use `?`);
//! request bodies and query strings become typed values or `INVALID_ARGUMENT` naming what was
//! wrong; streams of server-sent events. The MCP front and the accept loop render errors their
//! own way (MCP results, raw HTTP before a request exists).

use std::convert::Infallible;

use axum::Json;
use axum::body::Bytes;
use axum::extract::Query;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::http::{StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::error::{ErrorCode, ToolError};

/// The error shape with the HTTP status its code maps to, and `Retry-After` when it has a wait.
impl IntoResponse for ToolError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.code.http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        error_with_status(status, &self)
    }
}

/// `error` in its shape under `status`, which may differ from its code's (405 for a method an
/// endpoint does not take).
pub(super) fn error_with_status(status: StatusCode, error: &ToolError) -> Response {
    let mut response = (status, Json(error.to_json())).into_response();
    if let Some(secs) = error.retry_after_secs {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from(secs));
    }
    response
}

/// A request body as a `T` (nothing is `{}`); errors name the field, after `what`.
pub(super) fn parse_body_as<T: DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
    what: &str,
) -> Result<T, ToolError> {
    parse_body(body).and_then(|args| {
        serde_path_to_error::deserialize::<_, T>(args)
            .map_err(|e| ToolError::invalid(format!("bad {what}: {e}")))
    })
}

/// A query string as a `T`, or what was wrong with it.
pub(super) fn parse_query<T>(query: Result<Query<T>, QueryRejection>) -> Result<T, ToolError> {
    query
        .map(|Query(query)| query)
        .map_err(|rejection| ToolError::invalid(format!("bad query: {}", rejection.body_text())))
}

/// A request body as tool arguments: a JSON object, or nothing (no arguments).
pub(super) fn parse_body(body: Result<Bytes, BytesRejection>) -> Result<Value, ToolError> {
    let body = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ToolError::new(ErrorCode::TooLarge, "the request body is too large").with_hint(
                "tool calls take up to files.max_bytes of inline file content (base64) plus \
                 1 MiB; other endpoints 2 MiB. Put larger files under the files root",
            )
        } else {
            ToolError::invalid(format!("cannot read the request body: {rejection}"))
        }
    })?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    let hint =
        "send the tool's arguments as a JSON object, e.g. {\"target\": \"https://example.com\"}";
    match serde_json::from_slice(&body) {
        Ok(Value::Object(arguments)) => Ok(Value::Object(arguments)),
        Ok(other) => Err(ToolError::invalid(format!(
            "the body must be a JSON object of arguments, not {}",
            json_kind(&other)
        ))
        .with_hint(hint)),
        Err(e) => {
            Err(ToolError::invalid(format!("the body is not valid JSON: {e}")).with_hint(hint))
        }
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A server-sent event: its name, and its data as one line of JSON.
pub(super) fn event(name: &str, data: &impl Serialize) -> Event {
    Event::default()
        .event(name)
        .data(serde_json::to_string(data).unwrap_or_default())
}

/// `events` as a `text/event-stream` answer, with keep-alive comments while none come; the
/// stream is dropped when the client goes away.
pub(super) fn event_stream(events: impl Stream<Item = Event> + Send + 'static) -> Response {
    Sse::new(events.map(Ok::<_, Infallible>))
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// A task's progress as a `text/event-stream` answer: `first`, then each message the task
/// broadcasts as `to_event` makes it (and says whether it is the last), until that last one —
/// at once when the task had `ended`. A listener that fell behind hears `lagged`.
pub(super) fn broadcast_events<T: Clone + Send + 'static>(
    first: Event,
    ended: bool,
    receiver: tokio::sync::broadcast::Receiver<T>,
    to_event: fn(T) -> (Event, bool),
) -> Response {
    use tokio::sync::broadcast::error::RecvError;
    let stream = futures::stream::unfold(
        (Some(first), receiver, ended),
        move |(first, mut receiver, ended)| async move {
            if let Some(first) = first {
                return Some((first, (None, receiver, ended)));
            }
            if ended {
                return None;
            }
            match receiver.recv().await {
                Ok(message) => {
                    let (sse, last) = to_event(message);
                    Some((sse, (None, receiver, last)))
                }
                Err(RecvError::Lagged(missed)) => {
                    let sse = event("lagged", &serde_json::json!({ "missed": missed }));
                    Some((sse, (None, receiver, false)))
                }
                Err(RecvError::Closed) => None,
            }
        },
    );
    event_stream(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body_of(response: Response) -> Value {
        let body = axum::body::to_bytes(response.into_body(), 10_000)
            .await
            .unwrap();
        serde_json::from_slice(&body).unwrap()
    }

    #[tokio::test]
    async fn an_error_answers_with_its_status_shape_and_wait() {
        let error = ToolError::new(ErrorCode::Limit, "2 calls per minute").retry_after(30);
        let response = error.into_response();
        assert_eq!(response.status(), 429);
        assert_eq!(response.headers()[header::RETRY_AFTER], "30");
        let body = body_of(response).await;
        assert_eq!(body["error"]["code"], "LIMIT");
        assert_eq!(body["error"]["message"], "2 calls per minute");
        assert_eq!(body["error"]["hint"], ErrorCode::Limit.default_hint());

        let response = ToolError::new(ErrorCode::NoSuchTask, "no task").into_response();
        assert_eq!(response.status(), 404);
        assert!(!response.headers().contains_key(header::RETRY_AFTER));
    }

    #[test]
    fn bodies_are_objects_or_nothing() {
        let parse = |text: &'static str| parse_body(Ok(Bytes::from(text)));
        assert_eq!(parse(" \n").unwrap(), json!({}));
        assert_eq!(parse(r#"{"a": 1}"#).unwrap(), json!({"a": 1}));
        let error = parse("[1]").unwrap_err();
        assert_eq!(error.code, ErrorCode::InvalidArgument);
        assert!(error.message.contains("not an array"), "{error:?}");
        assert!(parse("{").unwrap_err().message.contains("not valid JSON"));

        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Typed {
            limit: usize,
        }
        let error =
            parse_body_as::<Typed>(Ok(Bytes::from(r#"{"limit": "x"}"#)), "list").unwrap_err();
        assert!(error.message.starts_with("bad list: limit:"), "{error:?}");
    }
}
