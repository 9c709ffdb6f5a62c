//! A session's live view: what a person watching it sees (the session's tabs, screencast frames
//! of one of them, the hand-off asked of them) and what a person in control does (real input
//! on the page). The HTTP side lives in `server/live.rs`; this side speaks CDP.
//!
//! Each `Session` has one `LiveHub`. Viewers never take the session's command lock to watch:
//! the hub holds a copy of the tabs' page handles, published whenever a call lets go of the
//! session. Taking control does take the lock (`BrowserService::take_control`), so the agent's
//! calls wait while a person drives the page.

mod confirm;
mod handoff;
mod person;
mod remote_input;
mod screencast;

use crate::sync::Locked;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::page::BringToFrontParams;
use chromiumoxide::cdp::browser_protocol::target::{GetTargetInfoParams, TargetId};
use tokio::sync::watch;

pub use confirm::{Answer, CONFIRMATION_LIFETIME, Confirmation, Confirmations, Question};
pub use handoff::{HandedBack, Handoff, HandoffState, Until};
pub use person::{ForeignFrame, PersonInput};
pub use remote_input::{Button, KeyKind, MouseKind, RemoteInput};
pub use screencast::{Frame, Watching};

use super::{SessionGuard, TabInfo};
use crate::browser::pool::BrowserHandle;
use crate::error::{ErrorCode, ToolError, ToolResult};

/// Counters of every live view of the service, for `/metrics`.
#[derive(Debug, Default)]
pub struct LiveStats {
    /// Viewers connected now.
    pub viewers: AtomicUsize,
    /// Screencasts running now (one per watched tab, whatever the number of its viewers).
    pub screencasts: AtomicUsize,
    /// Frames Chromium sent.
    pub frames: AtomicU64,
}

/// A tab as the live view knows it: enough to watch it and drive it without the session lock.
#[derive(Clone)]
pub struct LiveTab {
    pub id: String,
    page: Page,
    target: TargetId,
    browser: Arc<BrowserHandle>,
}

impl LiveTab {
    pub(crate) fn new(
        id: String,
        page: Page,
        target: TargetId,
        browser: Arc<BrowserHandle>,
    ) -> Self {
        Self {
            id,
            page,
            target,
            browser,
        }
    }

    /// Whether `other` is this tab showing the same page (a crashed tab's replacement is not).
    pub fn is(&self, other: &LiveTab) -> bool {
        self.id == other.id && self.target == other.target
    }

    /// The tab's URL, as Chromium has it (no script runs in the page).
    async fn url(&self) -> Option<String> {
        let params = GetTargetInfoParams {
            target_id: Some(self.target.clone()),
        };
        let info = self
            .browser
            .within(URL_LIMIT, "reading a tab's URL", self.page.execute(params))
            .await
            .ok()?;
        Some(info.result.target_info.url.clone())
    }
}

/// How long a check of a tab's URL may take.
const URL_LIMIT: Duration = Duration::from_secs(2);

/// The session's tabs as its last call left them.
#[derive(Clone, Default)]
pub struct LiveTabs {
    pub tabs: Vec<LiveTab>,
    pub active: Option<String>,
}

impl LiveTabs {
    pub fn get(&self, id: &str) -> Option<&LiveTab> {
        self.tabs.iter().find(|t| t.id == id)
    }

    /// The tab a viewer shows: `wanted` while it exists, else the session's active tab.
    pub fn shown(&self, wanted: Option<&str>) -> Option<&LiveTab> {
        wanted
            .and_then(|id| self.get(id))
            .or_else(|| self.active.as_deref().and_then(|id| self.get(id)))
            .or_else(|| self.tabs.first())
    }

    /// Every tab with its URL and title, from one look at Chromium's pages.
    pub async fn infos(&self) -> Vec<TabInfo> {
        let Some(first) = self.tabs.first() else {
            return Vec::new();
        };
        let pages = super::list_pages(&first.browser).await.unwrap_or_default();
        self.tabs
            .iter()
            .filter_map(|tab| {
                let page = pages.iter().find(|page| page.target_id == tab.target)?;
                Some(TabInfo {
                    tab: tab.id.clone(),
                    url: page.url.clone(),
                    title: page.title.clone(),
                    active: self.active.as_deref() == Some(tab.id.as_str()),
                })
            })
            .collect()
    }

    fn same_as(&self, other: &LiveTabs) -> bool {
        self.active == other.active
            && self.tabs.len() == other.tabs.len()
            && self.tabs.iter().zip(&other.tabs).all(|(a, b)| a.is(b))
    }
}

/// One session's live side: its published tabs, its screencasts, its hand-off, who controls it.
pub struct LiveHub {
    tabs: watch::Sender<LiveTabs>,
    handoff: watch::Sender<HandoffState>,
    screencasts: Mutex<HashMap<TargetId, Weak<screencast::Screencast>>>,
    /// A person has control (holds the session's command lock through a viewer); watched by
    /// a hand-off, which is for that person and so does not wait for their control to end.
    controlled: watch::Sender<bool>,
    /// Viewers connected to this session.
    viewers: AtomicUsize,
    stats: Arc<LiveStats>,
    /// The frame size asked of Chromium: the configured viewport.
    frame_size: (u32, u32),
    /// What a person did through the live view, until the trace takes it.
    person: person::PersonLog,
    /// Actions waiting for a person to allow them.
    confirmations: Confirmations,
}

impl LiveHub {
    pub(crate) fn new(stats: Arc<LiveStats>, frame_size: (u32, u32)) -> Arc<Self> {
        Arc::new(Self {
            tabs: watch::channel(LiveTabs::default()).0,
            handoff: watch::channel(HandoffState::None).0,
            screencasts: Mutex::new(HashMap::new()),
            controlled: watch::channel(false).0,
            viewers: AtomicUsize::new(0),
            stats,
            frame_size,
            person: person::PersonLog::default(),
            confirmations: Confirmations::default(),
        })
    }

    /// Makes `tabs` what viewers see; wakes them only when something changed.
    pub(crate) fn publish(&self, tabs: LiveTabs) {
        self.tabs.send_if_modified(|current| {
            if current.same_as(&tabs) {
                false
            } else {
                *current = tabs;
                true
            }
        });
    }

    /// The session's tabs, and their changes.
    pub fn tabs(&self) -> watch::Receiver<LiveTabs> {
        self.tabs.subscribe()
    }

    /// Actions waiting for a person to allow or refuse them.
    pub fn confirmations(&self) -> &Confirmations {
        &self.confirmations
    }

    /// The hand-off asked of a person, and its changes.
    pub fn handoff(&self) -> watch::Receiver<HandoffState> {
        self.handoff.subscribe()
    }

    pub fn controlled(&self) -> bool {
        *self.controlled.borrow()
    }

    /// Returns once a person has control (at once if one has it now).
    pub async fn person_in_control(&self) {
        // The hub owns the sender, so the channel outlives this wait.
        let _ = self.controlled.subscribe().wait_for(|taken| *taken).await;
    }

    /// Counts a viewer of this session (and of the service) while the returned value lives.
    pub fn viewer(self: &Arc<Self>) -> Viewing {
        self.viewers.fetch_add(1, Ordering::Relaxed);
        self.stats.viewers.fetch_add(1, Ordering::Relaxed);
        Viewing(self.clone())
    }

    /// Whether someone watches the session or an agent waits for a person in it: the session
    /// is in use even though no call runs.
    pub fn attended(&self) -> bool {
        self.viewers.load(Ordering::Relaxed) > 0
            || matches!(&*self.handoff.borrow(), HandoffState::Open(_))
    }

    /// Frames of `tab`, starting its screencast if no one watches it yet; it stops when the last
    /// `Watching` of it is dropped. The tab comes to the front: Chromium paints (and so
    /// screencasts) only the tab in front.
    pub async fn watch(&self, tab: &LiveTab) -> ToolResult<Watching> {
        tab.browser
            .cdp(
                "bringing the tab to the front",
                tab.page.execute(BringToFrontParams::default()),
            )
            .await?;
        let existing = {
            let mut casts = self.screencasts.locked();
            casts.retain(|_, cast| cast.strong_count() > 0);
            casts.get(&tab.target).and_then(Weak::upgrade)
        };
        let cast = match existing {
            Some(cast) => cast,
            None => {
                let cast = screencast::Screencast::start(
                    &tab.page,
                    &tab.browser,
                    self.frame_size,
                    self.stats.clone(),
                )
                .await?;
                let mut casts = self.screencasts.locked();
                casts.insert(tab.target.clone(), Arc::downgrade(&cast));
                cast
            }
        };
        Ok(Watching::of(cast))
    }

    /// Sends a person's input to `tab`; only a viewer in control may.
    pub async fn input(
        &self,
        _control: &Control,
        tab: &LiveTab,
        input: RemoteInput,
    ) -> ToolResult<()> {
        self.person.note(&tab.page, &input).await;
        input.dispatch(&tab.page, &tab.browser).await
    }

    /// What a person did through the live view since the last time this was asked.
    pub fn take_person_inputs(&self) -> Vec<PersonInput> {
        self.person.take()
    }

    /// The person says they are done: an open hand-off ends with `person`.
    pub fn done(&self) {
        handoff::end(&self.handoff, HandedBack::Person);
    }

    /// The person will not come (their client declined the link): an open hand-off ends with
    /// `declined`.
    pub fn declined(&self) {
        handoff::end(&self.handoff, HandedBack::Declined);
    }

    /// Opens a hand-off (or keeps the one open, with the new message): a watcher ends it when
    /// `until` holds on the session's active tab, or at `handoff.ends`.
    pub fn begin_handoff(self: &Arc<Self>, handoff: Handoff) -> Arc<Handoff> {
        handoff::begin(self, handoff)
    }

    /// Waits until the open hand-off ends or `deadline` passes; takes its outcome (the hand-off
    /// is over for the session then). None if it is still open at `deadline`, or if there is none.
    pub async fn await_handoff(
        &self,
        deadline: tokio::time::Instant,
    ) -> Option<(Arc<Handoff>, HandedBack)> {
        handoff::wait(&self.handoff, deadline).await
    }

    /// The hand-off open or ended and not picked up yet.
    pub fn pending_handoff(&self) -> Option<Arc<Handoff>> {
        match &*self.handoff.borrow() {
            HandoffState::None => None,
            HandoffState::Open(h) | HandoffState::Ended(h, _) => Some(h.clone()),
        }
    }
}

/// A connected viewer, counted while it lives.
pub struct Viewing(Arc<LiveHub>);

impl Drop for Viewing {
    fn drop(&mut self) {
        self.0.viewers.fetch_sub(1, Ordering::Relaxed);
        self.0.stats.viewers.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A person's control of a session: the session's command lock, held by their viewer. Dropping
/// it gives control back.
pub struct Control {
    guard: SessionGuard,
    hub: Arc<LiveHub>,
}

impl Control {
    pub(crate) fn new(guard: SessionGuard, hub: Arc<LiveHub>) -> ToolResult<Self> {
        if hub.controlled.send_replace(true) {
            return Err(control_taken());
        }
        Ok(Self { guard, hub })
    }

    /// Adopts pages the person opened (popups) and publishes the tabs.
    pub async fn sync_tabs(&mut self) -> ToolResult<()> {
        self.guard.sync_tabs().await?;
        self.guard.publish_tabs();
        Ok(())
    }

    /// Makes `id` the session's active tab.
    pub fn switch_to(&mut self, id: &str) -> ToolResult<()> {
        self.guard.switch_to(id)?;
        self.guard.publish_tabs();
        Ok(())
    }

    /// Keeps the session from counting as idle while a person drives it.
    pub fn touch(&self) {
        self.guard.touch();
    }
}

/// Another viewer has control already.
pub(crate) fn control_taken() -> ToolError {
    ToolError::new(
        ErrorCode::Limit,
        "another viewer has control of this session",
    )
    .with_hint("wait until they give it back")
}

impl Drop for Control {
    fn drop(&mut self) {
        self.hub.controlled.send_replace(false);
    }
}
