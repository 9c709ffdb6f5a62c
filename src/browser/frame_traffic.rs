//! What the sessions of out-of-process frames and workers report about their requests, console
//! and frames' documents, kept for the tab's readiness (frames' requests and loads) and its log
//! (everything), and how a worker is let run once it is watched.

use std::sync::{Arc, Mutex};

use chromiumoxide::cdp::events::CdpEvent;
use chromiumoxide::cdp::js_protocol::runtime::RunIfWaitingForDebuggerParams;

use super::link::{CdpLink, CdpTarget};
use super::observe::{Origin, TabLog, ingest};
use super::tab::{TabEvents, lock};
use crate::egress::Lane;
use crate::sync::Locked;

/// One event's context: the session it came from and what it updates.
pub(crate) struct Traffic<'a> {
    /// The session, to fetch bodies from.
    pub target: CdpTarget,
    pub events: &'a Mutex<TabEvents>,
    pub log: &'a Arc<Mutex<TabLog>>,
    pub lane: Option<&'a Lane>,
    /// Who the session is: a frame (by frame id) or a worker.
    pub origin: Origin,
}

impl Traffic<'_> {
    /// Records `event` if it is about requests, the console, the browser's log or a frame's
    /// document; `true` then.
    pub(crate) fn record(&self, event: &CdpEvent) -> bool {
        let key = |id: &str| format!("{}/{id}", self.session());
        // The readiness lock and the log's are taken one after the other, never nested.
        let log = || self.log.locked();
        match event {
            CdpEvent::NetworkRequestWillBeSent(sent) => {
                let key = key(sent.request_id.inner());
                // A worker's requests do not hold the page's readiness.
                if let Origin::Frame(frame) = &self.origin {
                    lock(self.events).request_sent(key.clone(), sent, frame);
                }
                let by = match (&self.origin, &sent.frame_id) {
                    (Origin::Frame(_), Some(frame)) => Origin::Frame(frame.inner().clone()),
                    _ => self.origin.clone(),
                };
                log().request_sent(&key, sent, by);
            }
            CdpEvent::NetworkResponseReceived(received) => {
                let key = key(received.request_id.inner());
                lock(self.events).response_received(&key, &received.r#type);
                log().response_received(&key, received);
            }
            CdpEvent::NetworkLoadingFinished(finished) => {
                let key = key(finished.request_id.inner());
                lock(self.events).inflight.remove(&key);
                let body = log().loading_finished(&key, finished);
                if let Some(body) = body {
                    let fetch = ingest::fetch_body(self.target.clone(), self.log.clone(), body);
                    tokio::spawn(fetch);
                }
            }
            CdpEvent::NetworkLoadingFailed(failed) => {
                let key = key(failed.request_id.inner());
                lock(self.events).inflight.remove(&key);
                log().loading_failed(&key, failed, self.lane);
            }
            CdpEvent::NetworkDataReceived(data) => {
                log().data_received(&key(data.request_id.inner()), data);
            }
            CdpEvent::NetworkEventSourceMessageReceived(message) => {
                log().event_source_message(&key(message.request_id.inner()), message);
            }
            CdpEvent::RuntimeConsoleApiCalled(called) => {
                log().console_called(called, self.origin.clone());
            }
            CdpEvent::RuntimeExceptionThrown(thrown) => {
                log().exception_thrown(thrown, self.origin.clone());
            }
            CdpEvent::LogEntryAdded(added) => log().log_entry(&added.entry, self.origin.clone()),
            // Every frame of an out-of-process frame's session is below the tab's top one.
            CdpEvent::PageFrameStartedLoading(started) => {
                lock(self.events)
                    .frames
                    .started_loading(started.frame_id.inner());
            }
            CdpEvent::PageFrameStoppedLoading(stopped) => {
                lock(self.events)
                    .frames
                    .stopped_loading(stopped.frame_id.inner());
            }
            CdpEvent::PageFrameDetached(detached) => {
                lock(self.events)
                    .frames
                    .stopped_loading(detached.frame_id.inner());
            }
            CdpEvent::PageFrameNavigated(navigated) => {
                lock(self.events).frames.committed(&navigated.frame.url);
            }
            _ => return false,
        }
        true
    }

    fn session(&self) -> &str {
        match &self.target {
            CdpTarget::Session(_, session) => session,
            CdpTarget::Page(_) => "",
        }
    }
}

/// Turns on what the tab's log needs from a frame's or worker's session: its requests, console
/// and the browser's log. Failures mean the target went away.
pub(crate) async fn watch_traffic(link: &CdpLink, session: &str) {
    let _ = futures::join!(
        link.call(
            Some(session),
            chromiumoxide::cdp::browser_protocol::network::EnableParams::default()
        ),
        link.call(
            Some(session),
            chromiumoxide::cdp::js_protocol::runtime::EnableParams::default()
        ),
        link.call(
            Some(session),
            chromiumoxide::cdp::browser_protocol::log::EnableParams::default()
        ),
    );
}

/// Lets a worker run once its requests and console are watched. Failures mean it went away.
pub(crate) async fn prepare_worker(link: Arc<CdpLink>, session: String) {
    watch_traffic(&link, &session).await;
    let _ = link
        .call(Some(&session), RunIfWaitingForDebuggerParams::default())
        .await;
}
