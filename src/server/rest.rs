//! REST: `GET /api/tools` (OpenAI function definitions), `GET /api/tools/prompt` (usage guides),
//! `POST /api/tools/{name}` (run a tool with the JSON body as arguments), `GET /healthz`,
//! `GET /metrics` (Prometheus text), `GET /api/openapi.json` (the API description).
//! Every error has the tool error shape.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Router;
use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json};
use serde_json::{Value, json};

use super::auth::CallerTenant;
use super::reply::{error_with_status, parse_body};
use crate::app::App;
use crate::error::{ErrorCode, ToolError};
use crate::ids::SessionName;
use crate::metrics::Gauge;
use crate::tenancy::Tenant;
use crate::tools::{Caller, ToolOutput};

/// The largest tool call body: room for an inline file of `files.max_bytes` in base64 (4 bytes
/// per 3), plus the other arguments.
pub(super) fn tool_body_limit(app: &App) -> usize {
    let inline = app.config.files.max_bytes.div_ceil(3) * 4;
    usize::try_from(inline)
        .unwrap_or(usize::MAX)
        .saturating_add(1 << 20)
}

/// Header naming the browser session when the arguments do not.
pub const SESSION_HEADER: &str = "x-webpilot-session";

pub(super) fn routes(app: App) -> Router {
    Router::new()
        .route("/healthz", get(health))
        .route("/api/tools", get(list_tools))
        .route("/api/tools/prompt", get(tool_prompt))
        .route(
            "/api/tools/{name}",
            post(call_tool).layer(DefaultBodyLimit::max(tool_body_limit(&app))),
        )
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(app)
}

/// Liveness; with the operator's token (or without keys) also the browser's generation and
/// pid and the live sessions.
#[utoipa::path(get, path = "/healthz", tag = "service",
    responses((status = 200, description = "The service is up.", body = Object)))]
async fn health(State(app): State<App>, tenant: Option<Extension<Arc<Tenant>>>) -> Json<Value> {
    // A probe, or a tenant: how busy the service is and its browser's pid are the operator's.
    if !tenant.is_some_and(|Extension(tenant)| tenant.is_operator()) {
        return Json(json!({ "ok": true }));
    }
    let browser = app.browser.pool.existing().await;
    Json(json!({
        "ok": true,
        "browser": browser.as_ref().map(|b| json!({ "generation": b.generation, "pid": b.pid() })),
        "sessions": app.browser.session_count(),
    }))
}

/// The tools as OpenAI function definitions.
#[utoipa::path(get, path = "/api/tools", tag = "tools",
    responses((status = 200, description = "OpenAI function definitions.", body = Vec<Object>)))]
async fn list_tools(State(app): State<App>) -> Json<Value> {
    Json(app.registry.definitions().clone())
}

/// The tools' usage guides, ready to use as (part of) an agent's system prompt.
#[utoipa::path(get, path = "/api/tools/prompt", tag = "tools",
    responses((status = 200, description = "Usage guides.", body = String, content_type = "text/plain")))]
async fn tool_prompt(State(app): State<App>) -> String {
    app.registry.prompt()
}

/// Prometheus text: tool calls and latencies, live sessions, browser restarts, egress refusals,
/// the admission queue, stray pages, the browser's memory. The operator's: a tenant's key does
/// not open it.
#[utoipa::path(get, path = "/metrics", tag = "service",
    responses((status = 200, description = "Prometheus text format 0.0.4.", body = String,
        content_type = "text/plain")))]
async fn metrics(
    State(app): State<App>,
    CallerTenant(tenant): CallerTenant,
) -> Result<Response, ToolError> {
    if !tenant.is_operator() {
        return Err(ToolError::new(
            ErrorCode::Unauthorized,
            "/metrics is the operator's: a tenant's key does not open it",
        )
        .with_hint("scrape /metrics with the operator's token (--token, WEBPILOT_TOKEN)"));
    }
    let mut gauges = admission_gauges(&app);
    gauges.extend(browser_gauges(&app).await);
    gauges.extend(service_gauges(&app));
    let text = app.registry.metrics().render(&gauges);
    let content_type = "text/plain; version=0.0.4; charset=utf-8";
    Ok(([(header::CONTENT_TYPE, content_type)], text).into_response())
}

/// The admission queue's side of `/metrics`.
fn admission_gauges(app: &App) -> Vec<Gauge<'_>> {
    let queue = app.browser.admission();
    vec![
        Gauge::level(
            "webpilot_browser_admission_slots",
            "New contexts, tabs and first navigations that may run at once.",
            queue.capacity as f64,
        ),
        Gauge::level(
            "webpilot_browser_admission_in_use",
            "Admission slots held now.",
            queue.in_use as f64,
        ),
        Gauge::level(
            "webpilot_browser_admission_queue_length",
            "Calls waiting for an admission slot now.",
            queue.waiting as f64,
        ),
        Gauge::total(
            "webpilot_browser_admission_admitted_total",
            "Calls admitted (at once or after waiting).",
            queue.admitted as f64,
        ),
        Gauge::total(
            "webpilot_browser_admission_wait_seconds_total",
            "Time admitted calls spent waiting in the queue.",
            queue.waited_seconds,
        ),
        Gauge::total(
            "webpilot_browser_admission_refused_total",
            "Calls refused with LIMIT because their deadline passed in the queue.",
            queue.refused as f64,
        ),
    ]
}

/// The browser's side of `/metrics`: strays, recycling, crashes, pages, memory, sessions.
async fn browser_gauges(app: &App) -> Vec<Gauge<'_>> {
    let strays = app.browser.sweep_stats();
    let pss = app.browser.browser_pss().await.unwrap_or(0);
    vec![
        Gauge::total(
            "webpilot_browser_stray_pages_adopted_total",
            "Pages no tab held that the sweep gave to their session.",
            strays.adopted as f64,
        ),
        Gauge::total(
            "webpilot_browser_stray_pages_closed_total",
            "Pages no session could hold that the sweep closed.",
            strays.closed as f64,
        ),
        Gauge::total(
            "webpilot_browser_recycled_total",
            "Browsers closed because no session used them (the next call started a fresh one).",
            app.browser.pool.recycled() as f64,
        ),
        Gauge::total(
            "webpilot_browser_tab_crashes_total",
            "Tabs whose renderer crashed.",
            app.browser.pool.tab_crashes() as f64,
        ),
        Gauge::level(
            "webpilot_browser_pages",
            "Pages (tabs) Chromium has, of every session; more than the sessions' tabs are strays.",
            app.browser.page_count().await.unwrap_or(0) as f64,
        ),
        Gauge::level(
            "webpilot_browser_tabs",
            "Tabs the sessions hold (as their last call left them).",
            app.browser.tab_count() as f64,
        ),
        Gauge::level(
            "webpilot_browser_pss_bytes",
            "Memory of the browser and all its processes (proportional set size).",
            pss as f64,
        ),
        Gauge::level(
            "webpilot_browser_sessions",
            "Live browser sessions.",
            app.browser.session_count() as f64,
        ),
        Gauge::total(
            "webpilot_browser_restarts_total",
            "Times Chromium was relaunched after it died.",
            app.browser.pool.restarts() as f64,
        ),
    ]
}

/// The service's side of `/metrics`: authentication, request bodies, live views, egress and,
/// with PostgreSQL, crawl queries.
fn service_gauges(app: &App) -> Vec<Gauge<'_>> {
    let live = app.browser.live_stats();
    let gauges = vec![
        Gauge::total(
            "webpilot_auth_failures_total",
            "Requests refused for a missing or wrong bearer token.",
            app.registry.metrics().auth_failures() as f64,
        ),
        Gauge::level(
            "webpilot_http_body_bytes_reading",
            "Bytes of request bodies being read now (of max_body_bytes_in_flight).",
            app.registry.metrics().body_bytes_reading() as f64,
        ),
        Gauge::total(
            "webpilot_http_bodies_refused_total",
            "Requests answered BUSY because the bodies being read held max_body_bytes_in_flight.",
            app.registry.metrics().body_refusals() as f64,
        ),
        Gauge::level(
            "webpilot_live_viewers",
            "Live views connected.",
            live.viewers.load(Ordering::Relaxed) as f64,
        ),
        Gauge::level(
            "webpilot_live_screencasts",
            "Tabs being screencast to live views (one per watched tab).",
            live.screencasts.load(Ordering::Relaxed) as f64,
        ),
        Gauge::total(
            "webpilot_live_frames_total",
            "Screencast frames Chromium sent to live views.",
            live.frames.load(Ordering::Relaxed) as f64,
        ),
        Gauge::total(
            "webpilot_egress_refused_total",
            "Connections and documents of the browser that the URL policy refused.",
            app.browser.pool.egress_refused() as f64,
        ),
    ];
    // Only with PostgreSQL: SQLite calls are not round trips.
    let queries = app.crawler.store_round_trips().map(|queries| {
        Gauge::total(
            "webpilot_crawl_database_queries_total",
            "Queries this instance sent to the shared crawl database.",
            queries as f64,
        )
    });
    gauges.into_iter().chain(queries).collect()
}

async fn call_tool(
    State(app): State<App>,
    CallerTenant(tenant): CallerTenant,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ToolError> {
    let args = parse_body(body)?;
    let caller = Caller::new(tenant)
        .in_session(session_of(&headers)?)
        .at(super::origin_of(&headers));
    let mut output = app.registry.call(&name, args, &caller).await?;
    let mut timings = std::mem::take(&mut output.timings);
    let started = std::time::Instant::now();
    let mut response = render(output, &headers);
    timings.add("rest-render", started.elapsed());
    if let Ok(value) = header::HeaderValue::from_str(&timings.server_timing()) {
        response.headers_mut().insert("server-timing", value);
    }
    Ok(response)
}

/// The session `X-Webpilot-Session` names, if any.
fn session_of(headers: &HeaderMap) -> Result<Option<SessionName>, ToolError> {
    match headers.get(SESSION_HEADER).map(|v| v.to_str()) {
        Some(Ok(session)) => SessionName::parse_optional(Some(session)),
        None => Ok(None),
        // Not a silent fall-back to the shared default session.
        Some(Err(_)) => Err(ToolError::invalid(format!(
            "header {SESSION_HEADER} must be a session name in ASCII"
        ))
        .with_hint("name the session with letters, digits and dashes")),
    }
}

/// JSON with images as base64, or the raw image when the client accepts its type.
fn render(mut output: ToolOutput, headers: &HeaderMap) -> Response {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if let Some(file) = output.file.take()
        && accept.contains(file.mime)
    {
        return ([(header::CONTENT_TYPE, file.mime)], file.data).into_response();
    }
    if let Some(image) = output.images.first()
        && (accept.contains(image.mime) || (image.is_picture() && accept.contains("image/*")))
    {
        let image = output.images.swap_remove(0);
        return ([(header::CONTENT_TYPE, image.mime)], image.data).into_response();
    }
    if let (Some(image), Value::Object(map)) = (output.images.first(), &mut output.json) {
        use base64::Engine;
        map.insert(
            "image".into(),
            json!(base64::engine::general_purpose::STANDARD.encode(&image.data)),
        );
    }
    Json(output.json).into_response()
}

async fn not_found() -> ToolError {
    ToolError::new(ErrorCode::NoSuchTool, "no such endpoint").with_hint(
        "endpoints: GET /api/tools, GET /api/tools/prompt, POST /api/tools/{name}, GET /healthz",
    )
}

async fn method_not_allowed() -> Response {
    let error = ToolError::invalid("method not allowed on this endpoint")
        .with_hint("GET /api/tools lists tools; POST /api/tools/{name} runs one");
    error_with_status(StatusCode::METHOD_NOT_ALLOWED, &error)
}
