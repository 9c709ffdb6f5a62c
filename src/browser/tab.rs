//! One tab of a session: its chromiumoxide `Page`, the events watched on it (requests in
//! flight, the main document's status, JS dialogs) and script evaluation.

use crate::sync::Locked;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chromiumoxide::Command;
use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::network::{
    EventRequestWillBeSent, EventResponseReceived, ResourceType,
};
use chromiumoxide::cdp::browser_protocol::page::{
    AddScriptToEvaluateOnNewDocumentParams, BringToFrontParams, EventFrameNavigated,
};
use chromiumoxide::cdp::js_protocol::runtime::{EvaluateParams, ExceptionDetails};
use serde::Serialize;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use super::frame_loads::FrameLoads;
use super::frames::{Doc, Frames, InitScripts};
use super::guard::DocumentGuard;
use super::link::CdpTarget;
use super::observe::TabLog;
use super::pool::BrowserHandle;
use super::snapshot::RefBook;
use super::watcher::{Watched, settles_on_response, spawn_watcher};
use crate::egress::Lane;
use crate::error::{ErrorCode, ToolError, ToolResult};

/// The in-page agent (busy-ness counters and element refs), installed in every new document.
pub(crate) const AGENT_JS: &str = include_str!("agent.js");

/// A JS dialog that was answered automatically.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct DialogRecord {
    #[serde(rename = "type")]
    pub kind: String,
    pub message: String,
    /// What the dialog was answered with.
    pub answer: String,
}

/// What the event watcher has seen on this tab; read by readiness checks and results.
#[derive(Debug, Default)]
pub(crate) struct TabEvents {
    /// Requests started and not yet finished or failed. Keyed by request id; requests of
    /// out-of-process frames by `<session>/<request id>`.
    pub inflight: HashMap<String, Pending>,
    /// Number of main-frame commits: a new document, or a same-document history change.
    pub main_commits: u64,
    /// The URL the latest main-frame commit could not load, when that commit is Chromium's
    /// error page (DNS failure, refused connection…).
    pub unreachable_url: Option<String>,
    /// Why the latest `navigate` failed; kept until a document commits in the main frame (its
    /// error page does not count), read back while that error page shows.
    pub navigation_failure: Option<ToolError>,
    /// HTTP status of the latest main-frame document response.
    pub document_status: Option<i64>,
    /// Its media type.
    pub document_mime: Option<String>,
    /// Dialogs answered since the last `take_dialogs`.
    pub dialogs: Vec<DialogRecord>,
    /// How to answer the next dialog (`browser_interact action=dialog`); accept by default.
    pub next_dialog: Option<DialogAnswer>,
    /// The main frame is loading a new document (set on start, cleared on stop).
    pub main_loading: bool,
    /// Why the URL policy refused the main frame's latest document request, until taken.
    pub blocked: Option<ToolError>,
    /// Documents loading and committed in the frames below the top one.
    pub frames: FrameLoads,
}

/// A request in flight.
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    pub url: String,
    pub started: Instant,
    /// The frame whose document this request loads, when it is a frame's: such a document is
    /// the frame's own business once its answer arrives or its frame attaches out of process
    /// (whose target then reports the rest).
    pub frame_document: Option<String>,
    /// The document it belongs to (CDP's loader id): a new document's own requests survive its
    /// commit whichever of the two events is handled first.
    pub loader: String,
}

impl TabEvents {
    /// Before a navigation: forgets the previous document's answer and refusal; returns the
    /// main frame's commits so far.
    pub(crate) fn forget_document(&mut self) -> u64 {
        self.document_status = None;
        self.document_mime = None;
        self.blocked = None;
        self.main_commits
    }

    /// A response arrived: the main document's status and type are kept.
    pub(crate) fn response(&mut self, event: &EventResponseReceived, main_frame: &str) {
        if event
            .frame_id
            .as_ref()
            .is_some_and(|frame| frame.inner() == main_frame)
            && event.r#type == ResourceType::Document
            && event.request_id.inner() == event.loader_id.inner()
        {
            self.document_status = Some(event.response.status);
            self.document_mime = Some(event.response.mime_type.clone());
        }
        self.response_received(event.request_id.inner(), &event.r#type);
    }

    /// A frame committed a document; the main frame's commit starts a new document.
    pub(crate) fn frame_navigated(&mut self, event: &EventFrameNavigated) {
        if event.frame.parent_id.is_some() {
            self.frames.committed(&event.frame.url);
            return;
        }
        self.main_commits += 1;
        self.unreachable_url = event.frame.unreachable_url.clone();
        if self.unreachable_url.is_none() {
            self.navigation_failure = None;
        }
        // The previous document's requests go; the new one's stay, even those whose events
        // were handled before this commit (the event streams are read in no fixed order).
        let loader = event.frame.loader_id.inner();
        self.inflight
            .retain(|_, pending| pending.url == event.frame.url || &pending.loader == loader);
    }

    /// Notes a request of the target whose main frame is `main_frame`.
    pub(crate) fn request_sent(
        &mut self,
        key: String,
        event: &EventRequestWillBeSent,
        main_frame: &str,
    ) {
        if event.request.url.starts_with("data:") {
            return;
        }
        let frame = event.frame_id.as_ref().map(|f| f.inner().as_str());
        let frame_document = (event.r#type == Some(ResourceType::Document)
            && frame != Some(main_frame))
        .then(|| frame.map(str::to_string))
        .flatten();
        self.inflight.insert(
            key,
            Pending {
                url: event.request.url.clone(),
                started: Instant::now(),
                frame_document,
                loader: event.loader_id.inner().clone(),
            },
        );
    }

    /// A response arrived: some requests are done with it (`settles_on_response`).
    pub(crate) fn response_received(&mut self, key: &str, kind: &ResourceType) {
        let done = settles_on_response(kind)
            || self
                .inflight
                .get(key)
                .is_some_and(|pending| pending.frame_document.is_some());
        if done {
            self.inflight.remove(key);
        }
    }

    /// A frame attached out of process: its target reports its document from now on.
    pub(crate) fn frame_attached(&mut self, frame: &str) {
        self.inflight
            .retain(|_, pending| pending.frame_document.as_deref() != Some(frame));
    }
}

/// A caller's choice for the next JS dialog.
#[derive(Debug, Clone)]
pub struct DialogAnswer {
    pub accept: bool,
    pub prompt_text: Option<String>,
}

/// One tab. Dropping it stops its watcher; the page itself is closed by the session.
pub struct Tab {
    /// Stable id within the session (`t1`, `t2`, …), never reused.
    pub id: String,
    pub(crate) page: Page,
    pub(crate) browser: Arc<BrowserHandle>,
    pub(crate) events: Arc<Mutex<TabEvents>>,
    /// What the page did: requests, console messages, page errors (`observe`).
    pub(crate) log: Arc<Mutex<TabLog>>,
    /// Ref numbering of this tab's element snapshots.
    pub(crate) refs: RefBook,
    /// Out-of-process frames, and the tab's page session on the link.
    pub(crate) frames: Frames,
    /// Scripts the session runs in every document before the page's own (restored storage).
    pub(crate) scripts: InitScripts,
    /// The session's lane of the egress proxy: why a connection of the tab failed.
    pub(crate) lane: Option<Arc<Lane>>,
    /// Whether the browser and this tab's renderer still answer.
    pub(crate) liveness: Liveness,
    /// What the latest read of the page's content left out as concealed, frames included.
    pub(crate) concealed: Mutex<super::Concealed>,
    watcher: JoinHandle<()>,
    /// Asks the watcher to answer once it has handled every event that arrived before.
    pings: mpsc::UnboundedSender<oneshot::Sender<()>>,
}

/// How a tab's page ended, if it did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Ending {
    /// Its renderer died (out of memory, a crash): the tab shows nothing until it is replaced.
    Crashed,
    /// The page is gone (it closed itself, or was closed from elsewhere).
    Closed,
}

impl Ending {
    fn error(self) -> ToolError {
        match self {
            Ending::Crashed => renderer_crashed(),
            Ending::Closed => ToolError::new(
                ErrorCode::NoSuchTab,
                "the tab's page closed (it closed itself, or something else closed it)",
            )
            .with_hint("list the session's tabs with browser_tabs action=list"),
        }
    }
}

/// What a CDP call on a tab races against: the browser dying, the tab's renderer crashing
/// (out of memory, a crash) and its page closing. Each ends the call at once instead of at its
/// time limit.
#[derive(Clone)]
pub(crate) struct Liveness {
    browser: Arc<BrowserHandle>,
    ended: watch::Receiver<Option<Ending>>,
}

impl Liveness {
    /// An error once the browser is gone, the renderer crashed or the page closed.
    pub(crate) fn check(&self) -> ToolResult<()> {
        if !self.browser.is_alive() {
            return Err(super::pool::browser_died());
        }
        match *self.ended.borrow() {
            Some(ending) => Err(ending.error()),
            None => Ok(()),
        }
    }

    /// The error of a tab that ended: the browser's end when the browser is going (closing it
    /// closes every tab first), else the tab's own.
    fn failure(&self, ending: Ending) -> ToolError {
        if self.browser.is_alive() {
            ending.error()
        } else {
            super::pool::browser_died()
        }
    }

    pub(crate) fn crashed(&self) -> bool {
        *self.ended.borrow() == Some(Ending::Crashed)
    }

    /// Runs one CDP call on the tab under the command timeout.
    pub(crate) async fn cdp<T, E: std::fmt::Display>(
        &self,
        what: &str,
        call: impl Future<Output = Result<T, E>>,
    ) -> ToolResult<T> {
        self.within(self.browser.cdp_timeout, what, call).await
    }

    /// Like `cdp`, with an explicit time limit.
    pub(crate) async fn within<T, E: std::fmt::Display>(
        &self,
        limit: Duration,
        what: &str,
        call: impl Future<Output = Result<T, E>>,
    ) -> ToolResult<T> {
        self.check()?;
        let mut ended = self.ended.clone();
        let end = async move {
            // An error means the watcher is gone (the tab is being dropped): nothing to learn.
            let ending = match ended.wait_for(Option::is_some).await {
                Ok(ending) => *ending,
                Err(_) => None,
            };
            match ending {
                Some(ending) => self.failure(ending),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            result = self.browser.within(limit, what, call) => result,
            error = end => Err(error),
        }
    }
}

/// The error of a call on a tab whose renderer crashed.
pub(crate) fn renderer_crashed() -> ToolError {
    ToolError::new(
        ErrorCode::BrowserUnavailable,
        "the tab's renderer crashed (out of memory, or a crash); the tab shows nothing any more",
    )
    .with_hint("the tab's renderer crashed; browser_navigate opens a fresh one")
}

impl Drop for Tab {
    fn drop(&mut self) {
        self.watcher.abort();
    }
}

impl Tab {
    /// Wraps a page: installs the agent script and starts watching its events.
    pub(crate) async fn attach(
        id: String,
        page: Page,
        browser: Arc<BrowserHandle>,
        guard: Arc<DocumentGuard>,
    ) -> ToolResult<Self> {
        let events = Arc::new(Mutex::new(TabEvents::default()));
        let log = Arc::new(Mutex::new(TabLog::new(browser.network.clone())));
        let lane = guard.lane().cloned();
        let (ending, ended) = watch::channel(None);
        let (pings, ping_receiver) = mpsc::unbounded_channel();
        let watched = Watched {
            guard: guard.clone(),
            events: events.clone(),
            log: log.clone(),
            pings: ping_receiver,
        };
        let watcher = spawn_watcher(&page, &browser, watched, ending).await?;
        let liveness = Liveness {
            browser: browser.clone(),
            ended,
        };
        let install = AddScriptToEvaluateOnNewDocumentParams::new(AGENT_JS);
        liveness
            .cdp("installing the page agent", page.execute(install))
            .await?;
        let scripts = InitScripts::default();
        let frames = Frames::attach(
            &browser,
            &page,
            guard,
            events.clone(),
            log.clone(),
            scripts.clone(),
        )
        .await;
        let tab = Self {
            id,
            page,
            browser,
            events,
            log,
            refs: RefBook::default(),
            frames,
            scripts,
            lane,
            liveness,
            concealed: Mutex::default(),
            watcher,
            pings,
        };
        // Pages that already have a document (popups) get the agent now as well.
        let _ = tab.evaluate_raw(AGENT_JS).await;
        Ok(tab)
    }

    /// Runs one CDP call on this tab: it fails at once if the browser dies or the renderer
    /// crashes.
    pub(crate) async fn cdp<T, E: std::fmt::Display>(
        &self,
        what: &str,
        call: impl Future<Output = Result<T, E>>,
    ) -> ToolResult<T> {
        self.liveness.cdp(what, call).await
    }

    /// Whether the tab's renderer crashed: it answers nothing until it is replaced.
    pub fn crashed(&self) -> bool {
        self.liveness.crashed()
    }

    /// Makes this tab the visible one of its window. A popup covers its opener, and Chromium
    /// acknowledges input to a covered tab only after seconds; a visible one answers at once.
    pub async fn bring_to_front(&self) -> ToolResult<()> {
        self.cdp(
            "bringing the tab to the front",
            self.page.execute(BringToFrontParams::default()),
        )
        .await
        .map(drop)
    }

    pub(crate) fn target_id(&self) -> &chromiumoxide::cdp::browser_protocol::target::TargetId {
        self.page.target_id()
    }

    /// Evaluates in the top document.
    pub(crate) async fn evaluate_raw(&self, expression: &str) -> ToolResult<serde_json::Value> {
        self.evaluate_in(&Doc::Top, expression, None).await
    }

    /// Evaluates in `doc`, under `limit` (readiness probes use a short one) or the CDP timeout.
    pub(crate) async fn evaluate_in(
        &self,
        doc: &Doc,
        expression: &str,
        limit: Option<Duration>,
    ) -> ToolResult<serde_json::Value> {
        let mut params = EvaluateParams::new(expression);
        params.return_by_value = Some(true);
        params.await_promise = Some(true);
        if let Doc::Context { context, .. } = doc {
            params.context_id = Some(*context);
        }
        let call = self.send_to(doc, params);
        let limit = limit.unwrap_or(self.browser.cdp_timeout);
        let result = self
            .liveness
            .within(limit, "evaluating in the page", call)
            .await?;
        if let Some(details) = &result.exception_details {
            return Err(script_error(details));
        }
        Ok(result.result.value.unwrap_or(serde_json::Value::Null))
    }

    /// Sends a command to the target holding `doc` (the tab's page, or a frame's session);
    /// time limits are the caller's.
    pub(crate) async fn send_to<C: Command>(
        &self,
        doc: &Doc,
        command: C,
    ) -> Result<C::Response, String> {
        match doc {
            Doc::Top | Doc::Context { .. } => {
                CdpTarget::Page(self.page.clone()).send(command).await
            }
            Doc::Remote { session, .. } => {
                self.frames
                    .target(&Some(session.clone()))
                    .send(command)
                    .await
            }
        }
    }

    pub async fn url(&self) -> String {
        self.cdp("reading the URL", self.page.url())
            .await
            .ok()
            .flatten()
            .unwrap_or_default()
    }

    pub async fn title(&self) -> String {
        self.cdp("reading the title", self.page.get_title())
            .await
            .ok()
            .flatten()
            .unwrap_or_default()
    }

    pub(crate) fn take_dialogs(&self) -> Vec<DialogRecord> {
        std::mem::take(&mut lock(&self.events).dialogs)
    }

    /// Downloads started from this tab since the last call.
    pub(crate) fn take_downloads(&self) -> Vec<super::pool::Download> {
        let main_frame = self.page.target_id().inner().clone();
        let mut log = self.browser.downloads.locked();
        let (mine, others): (Vec<_>, Vec<_>) = log
            .unreported
            .drain(..)
            .partition(|d| d.frame_id == main_frame);
        log.unreported = others;
        mine
    }

    /// Whether the browser is still writing a download it names `file`.
    pub fn downloading(&self, file: &str) -> bool {
        let log = self.browser.downloads.locked();
        log.in_flight.values().any(|name| name == file)
    }

    /// Decides how the next JS dialog of this tab is answered.
    pub fn answer_next_dialog(&self, answer: DialogAnswer) {
        lock(&self.events).next_dialog = Some(answer);
    }

    /// What the page did (requests, console, page errors), for reading.
    pub fn log(&self) -> std::sync::MutexGuard<'_, TabLog> {
        self.log.locked()
    }

    /// Starts an action: its `page_events` and `since: last_action` count from here.
    pub fn mark_action(&self) {
        self.log().mark();
    }

    /// Waits (briefly) until the watcher has handled every event of the page that arrived
    /// before this call: what a read or a result says then includes everything up to the last
    /// CDP answer. Events of out-of-process frames and workers come over another connection
    /// and may still be on their way.
    pub async fn caught_up(&self) {
        let (reply, answered) = oneshot::channel();
        if self.pings.send(reply).is_ok() {
            let _ = tokio::time::timeout(Duration::from_secs(1), answered).await;
        }
    }

    /// What went wrong since the action started, if anything.
    pub async fn page_events(&self) -> Option<super::PageEvents> {
        self.caught_up().await;
        self.log().page_events()
    }

    /// What the page did since the action started, for a trace (`max` lines of each kind).
    pub async fn action_lines(&self, max: usize) -> super::ActionLines {
        self.caught_up().await;
        self.log().since_action(max)
    }

    /// Main-frame commits so far; pass to `settle_after_action` to detect navigations.
    pub fn main_commits(&self) -> u64 {
        lock(&self.events).main_commits
    }
}

/// A script's exception as an error an agent can act on.
pub(crate) fn script_error(details: &ExceptionDetails) -> ToolError {
    let message = details
        .exception
        .as_ref()
        .and_then(|e| e.description.clone())
        .unwrap_or_else(|| details.text.clone());
    ToolError::new(
        ErrorCode::InvalidArgument,
        format!("the script threw: {message}"),
    )
    .with_hint("fix the script; it runs in the page's main world")
}

pub(crate) fn lock(events: &Mutex<TabEvents>) -> std::sync::MutexGuard<'_, TabEvents> {
    events.locked()
}
