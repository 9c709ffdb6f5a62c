//! A tab's watcher: the page's event streams (requests, commits, loading, dialogs, crashes,
//! console and log) kept in the tab's `TabEvents` (readiness) and `TabLog` (what the page did),
//! and JS dialogs answered so the page never blocks.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::inspector::{
    EnableParams as InspectorEnableParams, EventTargetCrashed,
};
use chromiumoxide::cdp::browser_protocol::log::EventEntryAdded;
use chromiumoxide::cdp::browser_protocol::network::{
    EventDataReceived, EventEventSourceMessageReceived, EventLoadingFailed, EventLoadingFinished,
    EventRequestWillBeSent, EventResponseReceived, ResourceType,
};
use chromiumoxide::cdp::browser_protocol::page::{
    DialogType, EventFrameDetached, EventFrameNavigated, EventFrameStartedLoading,
    EventFrameStoppedLoading, EventJavascriptDialogOpening, EventNavigatedWithinDocument,
    HandleJavaScriptDialogParams,
};
use chromiumoxide::cdp::js_protocol::runtime::{EventConsoleApiCalled, EventExceptionThrown};
use chromiumoxide::listeners::EventStream;
use futures::StreamExt;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use super::guard::DocumentGuard;
use super::link::CdpTarget;
use super::observe::{Origin, TabLog, ingest};
use super::pool::BrowserHandle;
use super::tab::{DialogAnswer, DialogRecord, Ending, TabEvents, lock};
use crate::error::ToolResult;
use crate::sync::Locked;

/// The page's event streams a tab's watcher follows.
struct PageStreams {
    crashes: EventStream<EventTargetCrashed>,
    destroyed: EventStream<chromiumoxide::cdp::browser_protocol::target::EventTargetDestroyed>,
    started: EventStream<EventRequestWillBeSent>,
    finished: EventStream<EventLoadingFinished>,
    failed: EventStream<EventLoadingFailed>,
    responses: EventStream<EventResponseReceived>,
    commits: EventStream<EventFrameNavigated>,
    in_document: EventStream<EventNavigatedWithinDocument>,
    loading_started: EventStream<EventFrameStartedLoading>,
    loading_stopped: EventStream<EventFrameStoppedLoading>,
    frames_detached: EventStream<EventFrameDetached>,
    paused: EventStream<chromiumoxide::cdp::browser_protocol::fetch::EventRequestPaused>,
    dialogs: EventStream<EventJavascriptDialogOpening>,
    data: EventStream<EventDataReceived>,
    streamed: EventStream<EventEventSourceMessageReceived>,
    console: EventStream<EventConsoleApiCalled>,
    exceptions: EventStream<EventExceptionThrown>,
    browser_log: EventStream<EventEntryAdded>,
}

impl PageStreams {
    async fn subscribe(page: &Page, browser: &BrowserHandle) -> ToolResult<Self> {
        let subscribe = "subscribing to page events";
        let crashes = browser
            .cdp(subscribe, page.event_listener::<EventTargetCrashed>())
            .await?;
        // A target's end is reported to the browser's session, for every target: the watcher
        // keeps its own.
        let destroyed = browser
            .cdp(subscribe, browser.browser.event_listener())
            .await?;
        // Chromium reports a renderer crash to a page's clients only with the domain enabled.
        browser
            .cdp(subscribe, page.execute(InspectorEnableParams::default()))
            .await?;
        Ok(Self {
            crashes,
            destroyed,
            started: browser.cdp(subscribe, page.event_listener()).await?,
            finished: browser.cdp(subscribe, page.event_listener()).await?,
            failed: browser.cdp(subscribe, page.event_listener()).await?,
            responses: browser.cdp(subscribe, page.event_listener()).await?,
            commits: browser.cdp(subscribe, page.event_listener()).await?,
            in_document: browser.cdp(subscribe, page.event_listener()).await?,
            loading_started: browser.cdp(subscribe, page.event_listener()).await?,
            loading_stopped: browser.cdp(subscribe, page.event_listener()).await?,
            frames_detached: browser.cdp(subscribe, page.event_listener()).await?,
            paused: super::guard::guard_documents(page, browser).await?,
            dialogs: browser.cdp(subscribe, page.event_listener()).await?,
            data: browser.cdp(subscribe, page.event_listener()).await?,
            streamed: browser.cdp(subscribe, page.event_listener()).await?,
            console: browser.cdp(subscribe, page.event_listener()).await?,
            exceptions: browser.cdp(subscribe, page.event_listener()).await?,
            browser_log: browser.cdp(subscribe, page.event_listener()).await?,
        })
    }
}

/// What a tab's watchers keep current: readiness and dialogs, and the page's log.
pub(crate) struct Watched {
    pub guard: Arc<DocumentGuard>,
    pub events: Arc<Mutex<TabEvents>>,
    pub log: Arc<Mutex<TabLog>>,
    /// Answered once every event that had arrived before is handled (`Tab::caught_up`).
    pub pings: mpsc::UnboundedReceiver<oneshot::Sender<()>>,
}

/// Subscribes to the page's events and keeps `TabEvents` and the tab's log current until the
/// tab is dropped.
// Long: one arm per event stream.
pub(crate) async fn spawn_watcher(
    page: &Page,
    browser: &BrowserHandle,
    watched: Watched,
    ending: watch::Sender<Option<Ending>>,
) -> ToolResult<JoinHandle<()>> {
    let mut streams = PageStreams::subscribe(page, browser).await?;
    // Chromium names a page's main frame after its target.
    let main_frame = page.target_id().inner().clone();
    let page = page.clone();
    let crash_count = browser.tab_crashes.clone();
    let Watched {
        guard,
        events,
        log,
        mut pings,
    } = watched;
    Ok(tokio::spawn(async move {
        let s = &mut streams;
        let lane = guard.lane().cloned();
        let origin = |frame: Option<&str>| match frame {
            Some(frame) if frame != main_frame => Origin::Frame(frame.to_string()),
            _ => Origin::Page,
        };
        loop {
            // In order, so that a ping (last) is answered only when no event is waiting.
            tokio::select! {
                biased;
                Some(event) = s.started.next() => {
                    let key = event.request_id.inner();
                    lock(&events).request_sent(key.clone(), &event, &main_frame);
                    let by = origin(event.frame_id.as_ref().map(|f| f.inner().as_str()));
                    log.locked().request_sent(key, &event, by);
                }
                Some(event) = s.finished.next() => {
                    let key = event.request_id.inner();
                    lock(&events).inflight.remove(key);
                    if let Some(body) = log.locked().loading_finished(key, &event) {
                        tokio::spawn(ingest::fetch_body(CdpTarget::Page(page.clone()), log.clone(), body));
                    }
                }
                Some(event) = s.failed.next() => {
                    let key = event.request_id.inner();
                    lock(&events).inflight.remove(key);
                    log.locked().loading_failed(key, &event, lane.as_deref());
                }
                Some(event) = s.responses.next() => {
                    lock(&events).response(&event, &main_frame);
                    log.locked().response_received(event.request_id.inner(), &event);
                }
                Some(event) = s.data.next() => log.locked().data_received(event.request_id.inner(), &event),
                Some(event) = s.streamed.next() => {
                    log.locked().event_source_message(event.request_id.inner(), &event);
                }
                Some(event) = s.console.next() => log.locked().console_called(&event, Origin::Page),
                Some(event) = s.exceptions.next() => log.locked().exception_thrown(&event, Origin::Page),
                Some(event) = s.browser_log.next() => log.locked().log_entry(&event.entry, Origin::Page),
                Some(event) = s.commits.next() => lock(&events).frame_navigated(&event),
                Some(event) = s.in_document.next() => {
                    if *event.frame_id.inner() == main_frame {
                        lock(&events).main_commits += 1;
                    }
                }
                Some(event) = s.loading_started.next() => {
                    let frame = event.frame_id.inner();
                    if *frame == main_frame {
                        lock(&events).main_loading = true;
                    } else {
                        lock(&events).frames.started_loading(frame);
                    }
                }
                Some(event) = s.loading_stopped.next() => {
                    let frame = event.frame_id.inner();
                    if *frame == main_frame {
                        lock(&events).main_loading = false;
                    } else {
                        lock(&events).frames.stopped_loading(frame);
                    }
                }
                Some(event) = s.frames_detached.next() => {
                    lock(&events).frames.stopped_loading(event.frame_id.inner());
                }
                Some(event) = s.paused.next() => {
                    // Resolving a host name may take a while; other events must not wait.
                    let target = CdpTarget::Page(page.clone());
                    let answer = super::guard::answer(target, guard.clone(), events.clone(), Some(main_frame.clone()), event);
                    tokio::spawn(answer);
                }
                Some(event) = s.dialogs.next() => {
                    answer_dialog(&CdpTarget::Page(page.clone()), &event, &events).await;
                }
                Some(_) = s.crashes.next() => {
                    tracing::warn!(target = %main_frame, "a tab's renderer crashed");
                    crash_count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    ending.send_replace(Some(Ending::Crashed));
                }
                Some(event) = s.destroyed.next() => {
                    if *event.target_id.inner() != main_frame {
                        continue;
                    }
                    tracing::info!(target = %main_frame, "a tab's page went away");
                    ending.send_if_modified(|ended| {
                        let first = ended.is_none();
                        ended.get_or_insert(Ending::Closed);
                        first
                    });
                }
                Some(reply) = pings.recv() => { let _ = reply.send(()); }
                else => break,
            }
        }
    }))
}

/// Whether a request is done, for readiness, once its response has arrived: the body of a fetch,
/// XHR, beacon or media request may stream for ever or never be read (the page has what it asked
/// for). Documents, scripts, styles, images and fonts count until their body has loaded: the
/// page needs them to render.
pub(crate) fn settles_on_response(kind: &ResourceType) -> bool {
    !matches!(
        kind,
        ResourceType::Document
            | ResourceType::Script
            | ResourceType::Stylesheet
            | ResourceType::Image
            | ResourceType::Font
    )
}

/// Answers a JS dialog so the page never blocks: as the caller asked for this one, else alerts
/// and confirms are accepted, prompts get their default text, and `beforeunload` lets the
/// navigation proceed. The dialog is recorded first: the action that opened it may end as
/// soon as it is answered.
pub(crate) async fn answer_dialog(
    target: &CdpTarget,
    event: &EventJavascriptDialogOpening,
    events: &Mutex<TabEvents>,
) {
    let answer = lock(events).next_dialog.take().unwrap_or(DialogAnswer {
        accept: true,
        prompt_text: None,
    });
    let mut params = HandleJavaScriptDialogParams::new(answer.accept);
    let described = match (event.r#type.clone(), answer.accept) {
        (_, false) => "dismissed".to_string(),
        (DialogType::Prompt, true) => {
            let text = answer
                .prompt_text
                .or_else(|| event.default_prompt.clone())
                .unwrap_or_default();
            params.prompt_text = Some(text.clone());
            format!("accepted with {text:?}")
        }
        _ => "accepted".to_string(),
    };
    lock(events).dialogs.push(DialogRecord {
        kind: event.r#type.as_ref().to_string(),
        message: event.message.clone(),
        answer: described,
    });
    let _ = tokio::time::timeout(Duration::from_secs(5), target.send(params)).await;
}
