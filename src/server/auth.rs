//! Bearer-key authentication, required on every route but `/healthz` and the live view (which
//! takes capability links instead) when a token or tenant keys are set. The key names the
//! request's tenant, which this layer puts in the request's extensions and handlers take as
//! `CallerTenant` (a request without one is `UNAUTHORIZED`); without keys every request is the
//! operator's. `/healthz` without a key is a liveness probe and has no tenant; with one, the key
//! is checked like anywhere else (so it is no oracle for guessing). Failures are counted
//! (`webpilot_auth_failures_total`), and a client address that fails too often is refused
//! outright for a while, right key or not, so guessing gains nothing. Behind a trusted proxy
//! (`trusted_proxies`) the client address is the one its `X-Forwarded-For` names.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::{ErrorCode, ToolError};
use crate::tenancy::rate::{Quota, RateLimiter};
use crate::tenancy::{Tenant, Tenants};
use crate::tools::Registry;

/// Failed authentications a client address may make, refilled over a minute.
const FAILURES_PER_MINUTE: u32 = 10;

/// What the authentication layer works with.
#[derive(Clone)]
pub(super) struct Auth {
    tenants: Arc<Tenants>,
    /// For the failure counter in its metrics.
    registry: Arc<Registry>,
    /// Failures by client address.
    failures: Arc<RateLimiter>,
    /// Proxies whose `X-Forwarded-For` is believed.
    proxies: Arc<Vec<ipnet::IpNet>>,
}

impl Auth {
    pub(super) fn new(
        tenants: Arc<Tenants>,
        registry: Arc<Registry>,
        proxies: Vec<ipnet::IpNet>,
    ) -> Self {
        let quota = Quota {
            count: FAILURES_PER_MINUTE,
            period: Duration::from_secs(60),
        };
        Self {
            tenants,
            registry,
            failures: Arc::new(RateLimiter::keyed(quota)),
            proxies: Arc::new(proxies),
        }
    }

    fn trusted(&self, address: IpAddr) -> bool {
        self.proxies
            .iter()
            .any(|network| network.contains(&address))
    }

    /// Who is calling: the peer, or behind trusted proxies the nearest address of the
    /// `X-Forwarded-For` chain that is not one of them (entries further left are the client's
    /// word, forgeable).
    fn client(&self, request: &Request) -> String {
        let Some(peer) = request
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(peer)| peer.ip())
        else {
            return String::new();
        };
        if !self.trusted(peer) {
            return peer.to_string();
        }
        let chain: Vec<IpAddr> = request
            .headers()
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .filter_map(|entry| entry.trim().parse().ok())
            .collect();
        chain
            .iter()
            .rev()
            .find(|address| !self.trusted(**address))
            .or(chain.first())
            .unwrap_or(&peer)
            .to_string()
    }
}

pub(super) async fn require_token(
    State(auth): State<Auth>,
    mut request: Request,
    next: Next,
) -> Response {
    if !auth.tenants.auth_required() {
        request.extensions_mut().insert(auth.tenants.operator());
        return next.run(request).await;
    }
    // The live view checks its own capability links, which people get instead of the token;
    // the console page asks for the token itself (every call it makes sends it).
    let path = request.uri().path();
    let probe = path == "/healthz"
        && !request
            .headers()
            .contains_key(axum::http::header::AUTHORIZATION);
    if probe || path == "/" || path.starts_with("/live/") {
        return next.run(request).await;
    }
    let client = auth.client(&request);
    if let Some(wait) = auth.failures.exhausted(&client) {
        return ToolError::new(
            ErrorCode::Limit,
            format!("too many failed authentications from {client}"),
        )
        .with_hint(format!("wait {wait} s, then send the right bearer token"))
        .retry_after(wait)
        .into_response();
    }
    let presented = request
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match presented.and_then(|key| auth.tenants.authenticate(key)) {
        Some(tenant) => {
            request.extensions_mut().insert(tenant);
            next.run(request).await
        }
        None => {
            auth.registry.metrics().auth_failed();
            // The bucket only counts here; refusals come from `exhausted` above.
            let _ = auth.failures.take(&client);
            ToolError::new(ErrorCode::Unauthorized, "missing or wrong bearer key").into_response()
        }
    }
}

/// The request's tenant, as the authentication layer found it.
pub(super) struct CallerTenant(pub Arc<Tenant>);

impl<S: Send + Sync> FromRequestParts<S> for CallerTenant {
    type Rejection = ToolError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ToolError> {
        parts
            .extensions
            .get::<Arc<Tenant>>()
            .cloned()
            .map(CallerTenant)
            .ok_or_else(|| ToolError::new(ErrorCode::Unauthorized, "the request has no tenant"))
    }
}
