//! Bearer-token authentication, required on every route but `/healthz` when a token is set.
//! Failures are counted (`webpilot_auth_failures_total`), and a client address that fails too
//! often is refused outright for a while, right token or not, so guessing gains nothing.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::Response;

use super::rest::error_response;
use crate::error::{ErrorCode, ToolError};
use crate::tools::{Quota, RateLimiter, Registry};

/// Failed authentications a client address may make, refilled over a minute.
const FAILURES_PER_MINUTE: u32 = 10;

/// What the authentication layer works with.
#[derive(Clone)]
pub(super) struct Auth {
    token: Option<Arc<String>>,
    /// For the failure counter in its metrics.
    registry: Arc<Registry>,
    /// Failures by client address.
    failures: Arc<RateLimiter>,
}

impl Auth {
    pub(super) fn new(token: Option<String>, registry: Arc<Registry>) -> Self {
        let quota = Quota {
            count: FAILURES_PER_MINUTE,
            period: Duration::from_secs(60),
        };
        Self {
            token: token.map(Arc::new),
            registry,
            failures: Arc::new(RateLimiter::keyed(quota)),
        }
    }
}

pub(super) async fn require_token(
    State(auth): State<Auth>,
    request: Request,
    next: Next,
) -> Response {
    let Some(token) = &auth.token else {
        return next.run(request).await;
    };
    if request.uri().path() == "/healthz" {
        return next.run(request).await;
    }
    let client = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(peer)| peer.ip().to_string())
        .unwrap_or_default();
    if let Some(wait) = auth.failures.exhausted(&client) {
        return error_response(
            &ToolError::new(
                ErrorCode::Limit,
                format!("too many failed authentications from {client}"),
            )
            .with_hint(format!("wait {wait} s, then send the right bearer token"))
            .retry_after(wait),
        );
    }
    let presented = request
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match presented {
        Some(given) if constant_time_eq(given.as_bytes(), token.as_bytes()) => {
            next.run(request).await
        }
        _ => {
            auth.registry.metrics().auth_failed();
            // The bucket only counts here; refusals come from `exhausted` above.
            let _ = auth.failures.take(&client);
            error_response(&ToolError::new(
                ErrorCode::Unauthorized,
                "missing or wrong bearer token",
            ))
        }
    }
}

/// Compares without an early exit, so timing does not reveal how much of the token matched.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
