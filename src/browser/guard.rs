//! The URL policy inside Chromium. Every document request of a tab — the page itself, its
//! frames, each redirect hop, a script's `location = …` — is paused before it leaves and
//! checked against `fetch.allow` (`crate::policy`); a refused one fails with `BlockedByClient`,
//! and for the main frame the tab remembers why, so tools answer `BLOCKED_URL` instead of
//! showing Chromium's error page.
//!
//! This is the first line, not the only one: it names the refusal of a tab's own document
//! before anything commits, and it is all a remote browser on another host has. Everything
//! else a page loads (subresources, workers, popups, frames the tab does not follow) is held
//! by the egress proxy (`crate::egress`), which a launched browser's every connection goes
//! through.

use std::sync::{Arc, Mutex};

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
use crate::egress::{Egress, Lane, Unreachable};
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

/// The URL policy for documents, judged with the egress proxy's resolver (one address cache);
/// a session's guard notes its refusals in the session's lane, beside the proxy's own.
#[derive(Clone)]
pub(crate) struct DocumentGuard {
    egress: Arc<Egress>,
    /// The policy of the session (its tenant's).
    policy: Arc<UrlPolicy>,
    lane: Option<Arc<Lane>>,
}

impl DocumentGuard {
    /// The guard of pages outside any session, under the service's policy.
    pub(crate) fn new(egress: Arc<Egress>) -> Self {
        Self {
            policy: egress.resolver().policy().clone(),
            egress,
            lane: None,
        }
    }

    /// The guard of a session's pages: its policy, and refusals noted in its `lane`.
    pub(crate) fn for_session(&self, lane: Option<Arc<Lane>>, policy: Arc<UrlPolicy>) -> Arc<Self> {
        Arc::new(Self {
            egress: self.egress.clone(),
            policy,
            lane,
        })
    }

    /// The session's lane of the egress proxy, if its browser reaches the proxy.
    pub(crate) fn lane(&self) -> Option<&Arc<Lane>> {
        self.lane.as_ref()
    }

    /// Scheme, then every address the host resolves to, since Chromium may connect to any of
    /// them. A name that does not resolve passes: its request fails on its own (at the egress
    /// proxy, or in Chromium's DNS for a remote browser).
    pub(crate) async fn check(&self, url: &Url) -> ToolResult<()> {
        let verdict = self.judge(url).await;
        if let (Err(error), Some(lane), Some(host), Some(port)) = (
            &verdict,
            &self.lane,
            url.host_str(),
            url.port_or_known_default(),
        ) {
            lane.refused(host, port, error);
        }
        verdict
    }

    async fn judge(&self, url: &Url) -> ToolResult<()> {
        self.policy.check_url(url)?;
        let Some(Host::Domain(name)) = url.host() else {
            return Ok(());
        };
        match self
            .egress
            .resolver()
            .checked_under(&self.policy, name)
            .await
        {
            Err(Unreachable::Refused(error)) => Err(error),
            Ok(_) | Err(Unreachable::Unresolved) => Ok(()),
        }
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
        let strict = DocumentGuard::new(Egress::new(UrlPolicy::default()));
        for _ in 0..2 {
            // The second answer comes from the cache and must say the same.
            let refused = strict.check(&local).await.unwrap_err();
            assert_eq!(refused.code, ErrorCode::BlockedUrl);
            assert!(refused.message.contains("localhost"), "{}", refused.message);
        }
        let by_name =
            DocumentGuard::new(Egress::new(UrlPolicy::new(&["localhost".into()]).unwrap()));
        let subdomain = Url::parse("http://x.localhost:9/").unwrap();
        assert!(strict.check(&subdomain).await.is_err());
        assert!(by_name.check(&local).await.is_ok());
        let unknown = Url::parse("http://no-such-host.invalid/").unwrap();
        assert!(strict.check(&unknown).await.is_ok());
        let file = Url::parse("file:///etc/passwd").unwrap();
        assert!(strict.check(&file).await.is_err());
        // A session's guard judges by its tenant's policy, not the service's.
        let narrowed = by_name
            .policy
            .narrowed("alice", &[], &["localhost".into()])
            .unwrap();
        let tenants = by_name.for_session(None, Arc::new(narrowed));
        assert!(tenants.check(&local).await.is_err());
        assert!(by_name.check(&local).await.is_ok());
    }
}
