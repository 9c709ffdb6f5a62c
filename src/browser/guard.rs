//! The URL policy inside Chromium. Every document request of a tab — the page itself, its
//! frames, each redirect hop, a script's `location = …` — is paused before it leaves and
//! checked against `fetch.allow` (`crate::policy`); a refused one fails with `BlockedByClient`,
//! and for the main frame the tab remembers why, so tools answer `BLOCKED_URL` instead of
//! showing Chromium's error page.
//!
//! Subresources (images, scripts, fetch/XHR) are not paused: pausing every request would cost
//! each page load a round trip per resource.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::fetch::{
    ContinueRequestParams, EnableParams, EventRequestPaused, FailRequestParams, RequestPattern,
    RequestStage,
};
use chromiumoxide::cdp::browser_protocol::network::{ErrorReason, ResourceType};
use chromiumoxide::listeners::EventStream;
use url::{Host, Url};

use super::link::CdpTarget;
use super::pool::BrowserHandle;
use super::tab::{TabEvents, lock};
use crate::error::ToolResult;
use crate::policy::UrlPolicy;

/// Starts pausing the page's document requests; the stream carries them to `answer`.
pub(crate) async fn guard_documents(
    page: &Page,
    browser: &BrowserHandle,
) -> ToolResult<EventStream<EventRequestPaused>> {
    let paused = browser
        .cdp(
            "subscribing to paused requests",
            page.event_listener::<EventRequestPaused>(),
        )
        .await?;
    browser
        .cdp(
            "guarding document requests",
            page.execute(document_pattern()),
        )
        .await?;
    Ok(paused)
}

/// `Fetch.enable` for document requests only, paused before they are sent.
pub(crate) fn document_pattern() -> EnableParams {
    let documents = RequestPattern {
        url_pattern: Some("*".into()),
        resource_type: Some(ResourceType::Document),
        request_stage: Some(RequestStage::Request),
    };
    EnableParams {
        patterns: Some(vec![documents]),
        handle_auth_requests: None,
    }
}

/// How long a host's addresses are reused. Chromium resolves the host again for its own
/// connection, so the cache saves our lookup (a DNS round trip per document), not a check.
const ADDRESSES_TTL: Duration = Duration::from_secs(60);
/// Beyond this many cached hosts the cache starts over.
const ADDRESSES_KEPT: usize = 1024;

/// Addresses of recently checked hosts, by (lower-cased name, port), with when they were found.
type AddressCache = HashMap<(String, u16), (Instant, Vec<IpAddr>)>;

/// The URL policy with the addresses of recently checked hosts.
pub(crate) struct DocumentGuard {
    policy: UrlPolicy,
    addresses: Mutex<AddressCache>,
}

impl DocumentGuard {
    pub(crate) fn new(policy: UrlPolicy) -> Self {
        Self {
            policy,
            addresses: Mutex::new(HashMap::new()),
        }
    }

    /// Scheme, then every address the host resolves to, since Chromium may connect to any of
    /// them. A name that does not resolve passes: its request fails on its own, with the DNS
    /// error.
    pub(crate) async fn check(&self, url: &Url) -> ToolResult<()> {
        self.policy.check_url(url)?;
        let Some(Host::Domain(name)) = url.host() else {
            return Ok(());
        };
        let port = url.port_or_known_default().unwrap_or(80);
        for ip in self.resolve(name, port).await {
            self.policy.check_addr(url.as_str(), Some(name), ip)?;
        }
        Ok(())
    }

    async fn resolve(&self, name: &str, port: u16) -> Vec<IpAddr> {
        let key = (name.to_ascii_lowercase(), port);
        if let Some((at, ips)) = self.cached().get(&key)
            && at.elapsed() < ADDRESSES_TTL
        {
            return ips.clone();
        }
        let Ok(found) = tokio::net::lookup_host((name, port)).await else {
            return Vec::new();
        };
        let ips: Vec<IpAddr> = found.map(|address| address.ip()).collect();
        let mut cached = self.cached();
        if cached.len() >= ADDRESSES_KEPT {
            cached.clear();
        }
        cached.insert(key, (Instant::now(), ips.clone()));
        ips
    }

    fn cached(&self) -> std::sync::MutexGuard<'_, AddressCache> {
        self.addresses
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Lets a paused document request go on, or fails it. A refusal in the tab's main frame
/// (`main_frame`, when the request comes from the tab's own target) is recorded before the
/// request fails, so it is there by the time the error page commits.
pub(crate) async fn answer(
    target: CdpTarget,
    guard: Arc<DocumentGuard>,
    events: Arc<Mutex<TabEvents>>,
    main_frame: Option<String>,
    paused: impl std::ops::Deref<Target = EventRequestPaused> + Send,
) {
    let verdict = match Url::parse(&paused.request.url) {
        Ok(url) => guard.check(&url).await,
        // Chromium only requests URLs it could parse; let it report anything stranger itself.
        Err(_) => Ok(()),
    };
    let request = paused.request_id.clone();
    let sent = match verdict {
        Ok(()) => target
            .send(ContinueRequestParams::new(request))
            .await
            .map(drop),
        Err(refusal) => {
            tracing::info!(message = %refusal.message, "document request blocked");
            if main_frame.as_ref() == Some(paused.frame_id.inner()) {
                lock(&events).blocked = Some(refusal);
            }
            target
                .send(FailRequestParams::new(
                    request,
                    ErrorReason::BlockedByClient,
                ))
                .await
                .map(drop)
        }
    };
    if let Err(error) = sent {
        // The tab closed or navigated on meanwhile; the request is gone with it.
        tracing::debug!(%error, "a paused request could not be answered");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    #[tokio::test]
    async fn names_are_judged_by_the_addresses_they_resolve_to() {
        let local = Url::parse("http://localhost:9/").unwrap();
        let strict = DocumentGuard::new(UrlPolicy::default());
        for _ in 0..2 {
            // The second answer comes from the cache and must say the same.
            let refused = strict.check(&local).await.unwrap_err();
            assert_eq!(refused.code, ErrorCode::BlockedUrl);
            assert!(refused.message.contains("localhost"), "{}", refused.message);
        }
        let by_name = DocumentGuard::new(UrlPolicy::new(&["localhost".into()]).unwrap());
        assert!(by_name.check(&local).await.is_ok());
        let unknown = Url::parse("http://no-such-host.invalid/").unwrap();
        assert!(strict.check(&unknown).await.is_ok());
        let file = Url::parse("file:///etc/passwd").unwrap();
        assert!(strict.check(&file).await.is_err());
    }
}
