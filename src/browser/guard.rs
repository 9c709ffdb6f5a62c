//! The URL policy inside Chromium. Every document request of a tab — the page itself, its
//! frames, each redirect hop, a script's `location = …` — is paused before it leaves and
//! checked against `fetch.allow` (`crate::policy`); a refused one fails with `BlockedByClient`,
//! and for the main frame the tab remembers why, so tools answer `BLOCKED_URL` instead of
//! showing Chromium's error page.
//!
//! Subresources (images, scripts, fetch/XHR) are not paused: pausing every request would cost
//! each page load a round trip per resource.

use std::sync::{Arc, Mutex};

use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::fetch::{
    ContinueRequestParams, EnableParams, EventRequestPaused, FailRequestParams, RequestPattern,
    RequestStage,
};
use chromiumoxide::cdp::browser_protocol::network::{ErrorReason, ResourceType};
use chromiumoxide::listeners::EventStream;

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
    let documents = RequestPattern {
        url_pattern: Some("*".into()),
        resource_type: Some(ResourceType::Document),
        request_stage: Some(RequestStage::Request),
    };
    let enable = EnableParams {
        patterns: Some(vec![documents]),
        handle_auth_requests: None,
    };
    browser
        .cdp("guarding document requests", page.execute(enable))
        .await?;
    Ok(paused)
}

/// Lets a paused document request go on, or fails it. A refusal in the main frame is recorded
/// before the request fails, so it is there by the time the error page commits.
pub(crate) async fn answer(
    page: Page,
    policy: Arc<UrlPolicy>,
    events: Arc<Mutex<TabEvents>>,
    main_frame: String,
    paused: Arc<EventRequestPaused>,
) {
    let verdict = match url::Url::parse(&paused.request.url) {
        Ok(url) => policy.resolve_and_check(&url).await,
        // Chromium only requests URLs it could parse; let it report anything stranger itself.
        Err(_) => Ok(()),
    };
    let request = paused.request_id.clone();
    let sent = match verdict {
        Ok(()) => page
            .execute(ContinueRequestParams::new(request))
            .await
            .map(drop),
        Err(refusal) => {
            tracing::info!(message = %refusal.message, "document request blocked");
            if *paused.frame_id.inner() == main_frame {
                lock(&events).blocked = Some(refusal);
            }
            page.execute(FailRequestParams::new(
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
