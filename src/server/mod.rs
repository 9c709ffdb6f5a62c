//! The HTTP fronts (axum): REST tool calls, the agent loop (`/api/chat`), crawl tasks, private
//! sessions, MCP (`/mcp`), the live view (`/live/…`), the console (`/`), conversations, metrics, health, the OpenAPI description,
//! bearer auth, the bound on request bodies read at once, graceful shutdown.

mod auth;
mod bodies;
mod chat;
mod confirmations;
mod console;
mod conversations;
mod crawler;
mod listen;
mod live;
mod live_relay;
pub mod mcp;
mod openapi;
mod replays;
mod reply;
mod rest;
mod routing;
mod sessions;
pub mod skill;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::response::IntoResponse;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;
use tower_http::catch_panic::CatchPanicLayer;

use crate::app::App;
use crate::error::ToolError;

/// How long calls cut short by the shutdown get to send their answer.
const ANSWER_GRACE: Duration = Duration::from_secs(3);

/// The complete router of the service.
pub fn router(app: App) -> Router {
    // Checked at start (Config::validate).
    let proxies = app.config.proxy_networks().unwrap_or_default();
    let auth = auth::Auth::new(app.tenants.clone(), app.registry.clone(), proxies);
    let sessions = Arc::new(LocalSessionManager::default());
    let door = mcp::TaskDoor {
        app: app.clone(),
        sessions: sessions.clone(),
    };
    // Crawls as MCP tasks are answered in front of rmcp, inside auth (the tenant is known).
    let mcp = Router::new()
        .nest_service("/mcp", mcp_service(&app, sessions))
        .layer(axum::middleware::from_fn_with_state(door, mcp::intercept));
    let routing = app.clone();
    let bodies = bodies::BodyBudget::new(app.config.max_body_bytes_in_flight, app.registry.clone());
    chat::routes(app.clone())
        .merge(conversations::routes(app.clone()))
        .merge(crawler::routes(app.clone()))
        .merge(sessions::routes(app.clone()))
        .merge(confirmations::routes(app.clone()))
        .merge(replays::routes(app.clone()))
        .merge(live::routes(app.clone()))
        .merge(console::routes())
        .merge(mcp)
        .merge(openapi::routes(&app))
        .merge(rest::routes(app))
        // Inside auth: a forwarded call carries the caller's key and is checked again there.
        .layer(axum::middleware::from_fn_with_state(
            routing,
            routing::route,
        ))
        // Inside auth: bodies nobody may send take none of the budget.
        .layer(axum::middleware::from_fn_with_state(bodies, bodies::bound))
        .layer(axum::middleware::from_fn_with_state(
            auth,
            auth::require_token,
        ))
        .layer(CatchPanicLayer::custom(panic_response))
}

/// Where a request reached the service (`http://` + its `Host`), for links handed back to it.
/// Behind a TLS proxy the scheme is wrong: `--public-url` is the answer there.
pub(crate) fn origin_of(headers: &axum::http::HeaderMap) -> Option<String> {
    let host = headers.get(axum::http::header::HOST)?.to_str().ok()?;
    let valid = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-.:[]".contains(c));
    valid.then(|| format!("http://{host}"))
}

/// A bug must still answer in the error shape rather than drop the connection.
fn panic_response(panic: Box<dyn std::any::Any + Send>) -> axum::response::Response {
    let what = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("unknown panic");
    tracing::error!(panic = what, "a request handler panicked");
    ToolError::internal(format!("webpilot failed: {what}")).into_response()
}

/// Streamable HTTP MCP: a handler (so a browser session) per MCP session. Against DNS rebinding
/// and cross-site pages, `Host` must be a loopback name or one of `mcp_allowed_hosts`, and an
/// `Origin`, when a browser sends one, a loopback origin or one of `mcp_allowed_origins`.
fn mcp_service(
    app: &App,
    sessions: Arc<LocalSessionManager>,
) -> StreamableHttpService<mcp::McpFront, LocalSessionManager> {
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"].map(String::from).to_vec();
    hosts.extend(app.config.mcp_allowed_hosts.iter().cloned());
    if !app.config.bind.is_loopback() && !app.config.bind.is_unspecified() {
        hosts.push(app.config.bind.to_string());
    }
    let mut origins: Vec<String> = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"]
        .map(String::from)
        .to_vec();
    origins.extend(app.config.mcp_allowed_origins.iter().cloned());
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation();
    let app = app.clone();
    StreamableHttpService::new(
        move || Ok(mcp::McpFront::new(app.clone())),
        sessions,
        config,
    )
}

/// Serves the live view alone, on the configured address with a port of the system's choosing,
/// for fronts without an HTTP server (the CLI's `call`, MCP over stdio): their hand-offs need a
/// page to link to. It stops with the service.
pub async fn serve_live_view(app: &App) -> anyhow::Result<std::net::SocketAddr> {
    let listener = tokio::net::TcpListener::bind((app.config.bind, 0))
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen for the live view: {e}"))?;
    let address = listener.local_addr()?;
    app.public_url.bound_to(address);
    let router = live::routes(app.clone()).layer(CatchPanicLayer::custom(panic_response));
    let stop = app.stop.clone();
    tokio::spawn(async move {
        let served = axum::serve(listener, router)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
        if let Err(error) = served {
            tracing::warn!(%error, "the live view stopped");
        }
    });
    Ok(address)
}

/// Serves until `shutdown` resolves, then closes the browser cleanly.
pub async fn serve(
    app: App,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    if let Ok(address) = listener.local_addr() {
        app.public_url.bound_to(address);
    }
    let graceful = listen::accept_until(listener, router(app.clone()), shutdown).await;
    let drained = graceful.shutdown();
    tokio::pin!(drained);
    let grace = Duration::from_secs(app.config.shutdown_grace_secs);
    if tokio::time::timeout(grace, &mut drained).await.is_err() {
        tracing::warn!(
            "calls still running after the grace period; closing the browser under them"
        );
        app.shutdown().await;
        // Their calls now fail at once (BROWSER_UNAVAILABLE): let those answers go out.
        let _ = tokio::time::timeout(ANSWER_GRACE, drained).await;
    } else {
        app.shutdown().await;
    }
    Ok(())
}

/// The process's one signal handler: the first SIGINT or SIGTERM cancels `stop` (the service
/// shuts down gracefully), a second one exits at once.
pub fn cancel_on_signal(stop: CancellationToken) {
    tokio::spawn(async move {
        signal().await;
        tracing::info!("shutting down (a second signal exits at once)");
        stop.cancel();
        signal().await;
        tracing::warn!("second signal: exiting without waiting");
        // Chromium goes with this process (PR_SET_PDEATHSIG).
        std::process::exit(130);
    });
}

async fn signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .expect("installing a SIGTERM handler");
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_answers_internal_in_the_error_shape() {
        let response = panic_response(Box::new("index out of bounds"));
        assert_eq!(response.status(), 500);
        let body = axum::body::to_bytes(response.into_body(), 10_000)
            .await
            .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["error"]["code"], "INTERNAL");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("index out of bounds")
        );
    }
}
