//! Where the tasks layer (`tasks.rs`) meets the two MCP transports, at the JSON-RPC message:
//! over streamable HTTP an axum middleware in front of rmcp's service, over stdio two pumps
//! between the process's stdin/stdout and rmcp's ends of two pipes. Tasks requests are
//! answered without rmcp; `initialize` and `tools/list` answers are marked on their way out
//! (over stdio found by their request's id, so no other answer is parsed: a screenshot's
//! base64 passes as it came); every other message passes untouched.

use std::collections::HashSet;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::Mutex;

use super::tasks::{self, Route};
use crate::app::App;
use crate::sync::Locked;
use crate::tenancy::Tenant;

/// The ids (as JSON text) of the `initialize` and `tools/list` requests whose answers are still
/// to be marked.
type Awaited = Arc<std::sync::Mutex<HashSet<String>>>;

/// The largest MCP request body read here (a tool call may carry a file inline, in base64).
const MAX_BODY: usize = 96 << 20;
/// Bodies larger than this are not looked into: tasks requests and the requests whose answers
/// are marked are small (a crawl of a thousand URLs is some 60 KB).
const LOOKED_INTO: usize = 1 << 20;
/// Room in each stdio pipe between the pumps and rmcp.
const PIPE_BYTES: usize = 1 << 16;

/// What the HTTP middleware needs: the service, and rmcp's sessions, since only a request of a
/// session rmcp opened (Host and Origin checked at its `initialize`) is answered here.
#[derive(Clone)]
pub struct TaskDoor {
    pub app: App,
    pub sessions: Arc<LocalSessionManager>,
}

/// The `/mcp` middleware: a tasks request of a known session is answered here as JSON; an
/// `initialize` or `tools/list` goes to rmcp and its answer is marked; the rest passes.
pub async fn intercept(State(door): State<TaskDoor>, request: Request, next: Next) -> Response {
    if request.method() != axum::http::Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(bytes) => bytes,
        Err(_) => return axum::http::StatusCode::PAYLOAD_TOO_LARGE.into_response(),
    };
    let message: Option<Value> = (bytes.len() <= LOOKED_INTO)
        .then(|| serde_json::from_slice(&bytes).ok())
        .flatten();
    let route = message.as_ref().map_or(Route::Pass, tasks::route);
    let tenant = parts.extensions.get::<Arc<Tenant>>().cloned();
    if route == Route::Answer
        && known_session(&door, &parts.headers).await
        && let (Some(message), Some(tenant)) = (message, tenant)
    {
        let answer = tasks::answer(&door.app, &tenant, &message).await;
        return axum::Json(answer).into_response();
    }
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    if route == Route::Mark {
        return marked(response);
    }
    response
}

/// Whether the request names a session rmcp holds.
async fn known_session(door: &TaskDoor, headers: &HeaderMap) -> bool {
    let Some(id) = headers
        .get("mcp-session-id")
        .and_then(|value| value.to_str().ok())
    else {
        return false;
    };
    door.sessions
        .has_session(&Arc::from(id))
        .await
        .unwrap_or(false)
}

/// rmcp's answer with its JSON-RPC messages marked, whether it came as JSON or as events.
fn marked(response: Response) -> Response {
    let (mut parts, body) = response.into_parts();
    let events = parts
        .headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(b"text/event-stream"));
    parts.headers.remove(header::CONTENT_LENGTH);
    let body = if events {
        marked_events(body)
    } else {
        marked_json(body)
    };
    Response::from_parts(parts, body)
}

/// A JSON body, read whole (an answer to `initialize` or `tools/list` is small), marked.
fn marked_json(body: Body) -> Body {
    Body::from_stream(futures::stream::once(async move {
        let bytes = axum::body::to_bytes(body, MAX_BODY).await?;
        Ok::<_, axum::Error>(mark_line(&bytes).map_or(bytes, Bytes::from))
    }))
}

/// An event stream marked event by event, each `data:` line holding a JSON-RPC answer; an
/// event goes out as soon as it is whole.
fn marked_events(body: Body) -> Body {
    let state = (body.into_data_stream(), Vec::<u8>::new(), false);
    let events = futures::stream::unfold(state, |(mut chunks, mut pending, ended)| async move {
        if ended {
            return None;
        }
        loop {
            if let Some(end) = pending.windows(2).position(|w| w == b"\n\n") {
                let event: Vec<u8> = pending.drain(..end + 2).collect();
                let marked = Ok(Bytes::from(mark_event(&event)));
                return Some((marked, (chunks, pending, false)));
            }
            match chunks.next().await {
                Some(Ok(chunk)) => pending.extend_from_slice(&chunk),
                Some(Err(error)) => return Some((Err(error), (chunks, pending, true))),
                None if pending.is_empty() => return None,
                None => {
                    let marked = Ok(Bytes::from(mark_event(&pending)));
                    return Some((marked, (chunks, Vec::new(), true)));
                }
            }
        }
    });
    Body::from_stream(events)
}

/// One server-sent event with its `data:` lines marked.
fn mark_event(event: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(event.len() + 64);
    for line in event.split_inclusive(|&b| b == b'\n') {
        match line.strip_prefix(b"data:") {
            Some(data) => match mark_line(data.trim_ascii()) {
                Some(marked) => {
                    out.extend_from_slice(b"data: ");
                    out.extend_from_slice(marked.as_bytes());
                    out.push(b'\n');
                }
                None => out.extend_from_slice(line),
            },
            None => out.extend_from_slice(line),
        }
    }
    out
}

/// A JSON-RPC message marked, when it is one and marking changed it.
fn mark_line(line: &[u8]) -> Option<String> {
    let mut message: Value = serde_json::from_slice(line).ok()?;
    let before = message.clone();
    tasks::mark(&mut message);
    (message != before).then(|| message.to_string())
}

/// The stdio transport with the tasks layer in it: rmcp serves the returned pipe ends; tasks
/// requests from stdin are answered on stdout directly (each in its own task: a
/// `tasks/result` may wait for a long crawl), everything else goes through rmcp, and its
/// answers about offers are marked on their way to stdout.
pub fn stdio(app: App, tenant: Arc<Tenant>) -> (DuplexStream, DuplexStream) {
    let (rmcp_reads, to_rmcp) = tokio::io::duplex(PIPE_BYTES);
    let (rmcp_writes, from_rmcp) = tokio::io::duplex(PIPE_BYTES);
    let stdout = Arc::new(Mutex::new(tokio::io::stdout()));
    let awaited = Awaited::default();
    tokio::spawn(inbound(
        app,
        tenant,
        to_rmcp,
        stdout.clone(),
        awaited.clone(),
    ));
    tokio::spawn(outbound(from_rmcp, stdout, awaited));
    (rmcp_reads, rmcp_writes)
}

/// stdin → rmcp, answering tasks requests on the way. Ends (closing rmcp's input) with stdin.
async fn inbound(
    app: App,
    tenant: Arc<Tenant>,
    mut to_rmcp: DuplexStream,
    stdout: Arc<Mutex<tokio::io::Stdout>>,
    awaited: Awaited,
) {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let message: Option<Value> = serde_json::from_str(&line).ok();
        if let Some(message) = &message
            && matches!(
                message["method"].as_str(),
                Some("initialize" | "tools/list")
            )
        {
            awaited.locked().insert(message["id"].to_string());
        }
        if let Some(message) = message.filter(|m| tasks::route(m) == Route::Answer) {
            let (app, tenant, stdout) = (app.clone(), tenant.clone(), stdout.clone());
            tokio::spawn(async move {
                let answer = tasks::answer(&app, &tenant, &message).await;
                write_line(&stdout, &answer.to_string()).await;
            });
            continue;
        }
        let forwarded = async {
            to_rmcp.write_all(line.as_bytes()).await?;
            to_rmcp.write_all(b"\n").await
        };
        if forwarded.await.is_err() {
            break;
        }
    }
}

/// rmcp → stdout, marking the answers to the requests `awaited` holds; every other line goes
/// out as rmcp wrote it, not parsed at all while no such answer is due.
async fn outbound(
    from_rmcp: DuplexStream,
    stdout: Arc<Mutex<tokio::io::Stdout>>,
    awaited: Awaited,
) {
    let mut lines = BufReader::new(from_rmcp).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let line = match awaited_answer(&awaited, &line) {
            true => mark_line(line.as_bytes()).unwrap_or(line),
            false => line,
        };
        write_line(&stdout, &line).await;
    }
}

/// Whether `line` answers a request in `awaited` (which then no longer waits for it). Only its
/// `id` is read, and only while some answer is awaited.
fn awaited_answer(awaited: &Awaited, line: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct Answer {
        #[serde(default)]
        id: Option<Value>,
        /// A request of the server's own (its ids are counted apart): not an answer.
        #[serde(default)]
        method: Option<serde::de::IgnoredAny>,
    }
    let mut awaited = awaited.locked();
    if awaited.is_empty() {
        return false;
    }
    let Ok(Answer {
        id: Some(id),
        method: None,
    }) = serde_json::from_str::<Answer>(line)
    else {
        return false;
    };
    awaited.remove(&id.to_string())
}

/// One message on stdout, whole: the two pumps never interleave inside a line.
async fn write_line<W: AsyncWrite + Unpin>(out: &Mutex<W>, line: &str) {
    let mut out = out.lock().await;
    let written = async {
        out.write_all(line.as_bytes()).await?;
        out.write_all(b"\n").await?;
        out.flush().await
    };
    if let Err(error) = written.await {
        tracing::debug!(%error, "MCP stdout closed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_answers_awaited_are_picked_out() {
        let awaited = Awaited::default();
        // Nothing awaited: a line is not even read.
        assert!(!awaited_answer(&awaited, "not JSON at all"));
        awaited.locked().insert("7".into());
        let server_request =
            r#"{"jsonrpc":"2.0","id":7,"method":"elicitation/create","params":{}}"#;
        assert!(!awaited_answer(&awaited, server_request));
        assert!(!awaited_answer(
            &awaited,
            r#"{"jsonrpc":"2.0","id":8,"result":{}}"#
        ));
        assert!(awaited_answer(
            &awaited,
            r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[]}}"#
        ));
        assert!(awaited.locked().is_empty());
    }
}
