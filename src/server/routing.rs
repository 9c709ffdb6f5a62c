//! Session routing between instances sharing a database: a call for a browser session held by
//! another instance is sent on to it (method, path, headers with the caller's credentials, body;
//! the answer streamed back, so SSE passes through), one this instance holds or nobody holds runs
//! here, and one whose instance died answers `BROWSER_UNAVAILABLE` at once. With this, any
//! round-robin load balancer can stand in front of the instances.

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use std::sync::Arc;

use super::rest::SESSION_HEADER;
use crate::app::App;
use crate::db::cluster::{Cluster, Holder};
use crate::error::{ErrorCode, ToolError};
use crate::ids::{SessionId, SessionName};
use crate::tenancy::Tenant;
use crate::tools::Scope;

/// Marks a call another instance sent on (its value: the instances' shared mark): it runs here,
/// whatever the records say (no loops). Any other value is dropped and the call routed.
pub const FORWARDED_HEADER: &str = "x-webpilot-forwarded";

/// Headers that belong to one connection, not to the call. `Host` goes on: the holder answers
/// as the instance the caller reached (live-view links name the address the caller used).
const HOP_BY_HOP: [HeaderName; 6] = [
    header::CONNECTION,
    header::CONTENT_LENGTH,
    header::TRANSFER_ENCODING,
    header::TE,
    header::TRAILER,
    header::UPGRADE,
];

/// Which session a call is for, if it is one the routing cares about.
enum Target {
    /// A call whose session is named in its JSON body (`session`), else in the session header,
    /// else the default one.
    InBody,
    /// `DELETE /api/sessions/{name}` and `GET /api/sessions/{name}/trace…`: the session in the
    /// path.
    InPath(String),
    /// `POST /api/conversations/{id}/messages`: the conversation's session.
    Conversation(String),
    /// Anything else runs here.
    Local,
}

fn target(app: &App, method: &Method, path: &str) -> Target {
    if method == Method::POST {
        if path == "/api/chat" {
            return Target::InBody;
        }
        if let Some(tool) = path.strip_prefix("/api/tools/") {
            let browser = app
                .registry
                .specs()
                .iter()
                .any(|spec| spec.name == tool && spec.scope == Scope::Browser);
            return if browser {
                Target::InBody
            } else {
                Target::Local
            };
        }
    }
    if method == Method::POST
        && let Some(id) = path
            .strip_prefix("/api/conversations/")
            .and_then(|rest| rest.strip_suffix("/messages"))
    {
        return Target::Conversation(id.to_string());
    }
    if method == Method::DELETE
        && let Some(name) = path.strip_prefix("/api/sessions/")
    {
        return Target::InPath(name.to_string());
    }
    // A live session's trace is on the disk of the instance holding it, and its questions
    // for a person in its memory.
    if let Some((name, rest)) = path
        .strip_prefix("/api/sessions/")
        .and_then(|rest| rest.split_once('/'))
        && ((method == Method::GET && rest.starts_with("trace"))
            || ((method == Method::GET || method == Method::POST)
                && rest.starts_with("confirmations")))
    {
        return Target::InPath(name.to_string());
    }
    Target::Local
}

/// The session a call runs in, decided as the call wrapper decides it (`SessionName::choose`):
/// `session` in its body, else the session header, else the default. None for a name that is
/// not one (the handler refuses the call and says why).
fn session_of(headers: &HeaderMap, body: &[u8]) -> Option<SessionName> {
    let named = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|args| args.get("session")?.as_str().map(str::to_string));
    let header = match headers.get(SESSION_HEADER) {
        Some(value) => Some(value.to_str().ok()?),
        None => None,
    };
    let front = SessionName::parse_optional(header).ok()?;
    SessionName::choose(named.as_deref(), front.as_ref()).ok()
}

/// The middleware (after authentication, which puts the caller's tenant in the request).
pub(super) async fn route(State(app): State<App>, mut request: Request, next: Next) -> Response {
    let Some(cluster) = app.cluster.clone() else {
        return next.run(request).await;
    };
    let forwarded = match request.headers_mut().remove(FORWARDED_HEADER) {
        Some(mark) => cluster.is_forwarding_mark(mark.as_bytes()),
        None => false,
    };
    let tenant = request.extensions().get::<Arc<Tenant>>().cloned();
    let (Some(tenant), false) = (tenant, forwarded) else {
        return next.run(request).await;
    };
    let (parts, body) = request.into_parts();
    let (named, limit) = match target(&app, &parts.method, parts.uri.path()) {
        Target::Local => return next.run(Request::from_parts(parts, body)).await,
        Target::InPath(name) => (Some(name), 1 << 20),
        Target::Conversation(id) => match app.conversations.get(tenant.name(), &id).await {
            Ok(conversation) => (
                Some(conversation.session),
                super::rest::tool_body_limit(&app),
            ),
            // Not the caller's, or none: the handler says so.
            Err(_) => return next.run(Request::from_parts(parts, body)).await,
        },
        // A tool call's body may carry a file inline (base64).
        Target::InBody => (None, super::rest::tool_body_limit(&app)),
    };
    let body = match axum::body::to_bytes(body, limit).await {
        Ok(bytes) => bytes,
        Err(error) => {
            let error = ToolError::invalid(format!("cannot read the request body: {error}"));
            return error.into_response();
        }
    };
    let session = match named {
        Some(name) => SessionName::parse(&name).ok(),
        None => session_of(&parts.headers, &body),
    };
    // A name that is not one runs here, where the call is refused with the reason.
    let Some(session) = session else {
        return next.run(Request::from_parts(parts, Body::from(body))).await;
    };
    let session = SessionId::new(tenant.name().clone(), session);
    match holder(&app, &cluster, &session).await {
        Ok(Holder::Here) => {
            let closing = parts.method == Method::DELETE;
            let response = next.run(Request::from_parts(parts, Body::from(body))).await;
            if closing && response.status().is_success() {
                let _ = cluster.forget_on(&session, cluster.instance()).await;
            }
            response
        }
        Ok(Holder::Elsewhere { instance, url }) => {
            match forward(&cluster, parts, body, &url).await {
                Ok(response) => response,
                Err(error) => {
                    tracing::warn!(%instance, %url, %error, "cannot reach the instance holding a session");
                    // Nothing listens there: the instance is gone before its heartbeat says so.
                    if error.is_connect() {
                        let _ = cluster.forget_on(&session, &instance).await;
                    }
                    unavailable(&session, &instance).into_response()
                }
            }
        }
        Ok(Holder::Gone { instance }) => unavailable(&session, &instance).into_response(),
        Err(error) => {
            // Without the shared records, this instance still serves what it holds.
            tracing::warn!(%error, "session records unavailable; running the call here");
            next.run(Request::from_parts(parts, Body::from(body))).await
        }
    }
}

/// Where the call's session lives. A private session's record is made by its creator only: a
/// call naming one no instance holds runs here (to be refused), and claims nothing, so that no
/// record lists a session nobody made; a record of one that is no longer live here (reaped) is
/// dropped.
async fn holder(app: &App, cluster: &Cluster, session: &SessionId) -> anyhow::Result<Holder> {
    if !session.name.is_private() {
        return cluster.holder(session).await;
    }
    let holder = cluster.holder_if_held(session).await?;
    if matches!(holder, Some(Holder::Here)) && app.browser.live(session).is_none() {
        cluster.forget_on(session, cluster.instance()).await?;
    }
    Ok(holder.unwrap_or(Holder::Here))
}

fn unavailable(session: &SessionId, instance: &str) -> ToolError {
    let again = if session.name.is_private() {
        "start a new session with POST /api/sessions"
    } else {
        "call again to start a new session of that name"
    };
    ToolError::new(
        ErrorCode::BrowserUnavailable,
        format!(
            "session {:?} lived on instance {instance}, which stopped answering",
            session.name.as_str()
        ),
    )
    .with_hint(format!(
        "its pages and cookies are gone: {again} (load a saved profile with browser_cookies to \
         log in again)"
    ))
}

/// Sends the call on to the instance at `url` and streams its answer back.
async fn forward(
    cluster: &Cluster,
    parts: Parts,
    body: Bytes,
    url: &str,
) -> reqwest::Result<Response> {
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut request = cluster
        .client()
        .request(parts.method, format!("{}{path}", url.trim_end_matches('/')))
        .header(FORWARDED_HEADER, cluster.forwarding_mark())
        .body(body);
    for (name, value) in &parts.headers {
        if !HOP_BY_HOP.contains(name) {
            request = request.header(name, value);
        }
    }
    let answer = request.send().await?;
    let mut response = Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        if !HOP_BY_HOP.contains(name) {
            response = response.header(name, value);
        }
    }
    Ok(response
        .body(Body::from_stream(answer.bytes_stream()))
        .unwrap_or_else(|error| {
            ToolError::internal(format!("forwarded answer: {error}")).into_response()
        })
        .into_response())
}
