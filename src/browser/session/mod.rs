//! Sessions: one isolated browser context each (own cookies, storage, cache) with its tabs.
//!
//! A session is created on first use (a private `s-…` one only by `create_private`) and closed
//! after `session_idle_secs` without calls. Each session serialises its own commands (its state
//! sits behind an async mutex held for a whole tool call); different sessions run in parallel.

mod guard;
mod har;
pub mod live;
pub use har::SavedHar;
mod open;
mod registry;
mod sweep;
mod warm;

use crate::sync::Locked;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use chromiumoxide::cdp::browser_protocol::browser::{
    BrowserContextId, SetDownloadBehaviorBehavior, SetDownloadBehaviorParams,
};
use chromiumoxide::cdp::browser_protocol::target::{
    CloseTargetParams, CreateBrowserContextParams, CreateTargetParams, GetTargetsParams, TargetId,
    TargetInfo,
};
use serde::Serialize;
use tokio::sync::OwnedMutexGuard;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::admission::{Admission, AdmissionStats, Ticket};
use super::guard::DocumentGuard;
use super::identity::Identity;
use super::memory::MemoryGauge;
use super::pool::{BrowserHandle, BrowserPool};
use super::tab::Tab;
use crate::config::Config;
use crate::egress::{Blocked, Lane, NO_BYPASS};
use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::ids::{SessionId, SessionName, TenantName};
use crate::policy::UrlPolicy;
use crate::tenancy::Tenant;
pub(super) use guard::list_pages;
use live::{Control, LiveHub, LiveStats, LiveTab, LiveTabs};

/// The browser side of the service: the pool and the sessions living in it.
pub struct BrowserService {
    pub pool: BrowserPool,
    config: Arc<Config>,
    /// Live sessions by tenant and name: a name means something only within its tenant. A std
    /// mutex: it is held only to look up or insert, never across an await.
    sessions: Mutex<HashMap<SessionId, Arc<Session>>>,
    /// Numbers the scratch sessions, to name them.
    scratch_count: AtomicU64,
    /// Scratch sessions, which the map does not hold: the sweep must know their contexts.
    scratch: Mutex<Vec<Weak<Session>>>,
    /// The queue in front of new contexts, new tabs and their first navigation.
    admission: Arc<Admission>,
    /// The browser's memory, for the watermark and `/metrics`.
    memory: MemoryGauge,
    /// What the sweep found: pages no tab held, adopted by their session or closed.
    strays_adopted: AtomicU64,
    strays_closed: AtomicU64,
    /// Contexts no session owned in the previous sweep (disposed if still so in this one).
    unowned_contexts: Mutex<HashSet<BrowserContextId>>,
    /// Since when no session has been live (for recycling the browser).
    unused_since: Mutex<Option<Instant>>,
    /// The live views' counters.
    live: Arc<LiveStats>,
    /// Scratch sessions made ahead for renders.
    warm: warm::WarmSessions,
}

/// Where a new session lives: its live side and its browser endpoint.
type Place = (Arc<LiveHub>, usize);

/// One named session. Its `state` mutex is the session's command queue.
pub struct Session {
    name: SessionName,
    /// Whose it is: what it may reach, where it downloads, whose session count it adds to.
    tenant: Arc<Tenant>,
    /// What the creator of a private session called it (not its name).
    label: Option<String>,
    /// Its own idle limit, if it was given one.
    idle_limit: Option<Duration>,
    /// Tabs when its last call ended.
    tab_count: std::sync::atomic::AtomicUsize,
    /// Unique among this process's sessions, even of one name over time.
    serial: u64,
    /// The browser endpoint it lives in (its pages go where that browser goes).
    endpoint: usize,
    state: Arc<tokio::sync::Mutex<SessionState>>,
    /// Last time a command started or finished; read by the idle reaper.
    last_used: Mutex<Instant>,
    /// A scratch session: closed as soon as its one job lets go of it.
    scratch: bool,
    /// The browser context, readable without the command lock (the sweep's view).
    context: ContextMirror,
    /// What its live view shows and who controls it.
    live: Arc<LiveHub>,
    /// How it presents itself to sites; fixed when it is created.
    identity: Identity,
}

/// A session's browser context, published outside its command lock.
type ContextMirror = Arc<Mutex<Option<BrowserContextId>>>;

/// A session's browser-side state, guarded by the session's command lock.
#[derive(Default)]
pub struct SessionState {
    /// The browser generation the context below lives in; a newer generation means the
    /// context and tabs are gone and must be rebuilt.
    browser: Option<Arc<BrowserHandle>>,
    context: Option<BrowserContextId>,
    /// `context`, published for the sweep.
    mirror: ContextMirror,
    /// The context's way out through the egress proxy (what it refused, and why).
    lane: Option<Arc<Lane>>,
    tabs: Vec<Tab>,
    active: Option<String>,
    /// Tab numbers keep growing so a closed tab's id is never reused.
    next_tab_number: u32,
    /// Scripts every tab of the session runs before page scripts (restored localStorage).
    init_scripts: Vec<String>,
    /// Pages this session closed, which Chromium may list for a moment longer: never adopted.
    closed_targets: HashSet<TargetId>,
    /// Files sent inline for uploads, staged here until the session closes (a page reads an
    /// upload's file when it submits, not when it is picked).
    uploads: Option<PathBuf>,
    /// Inline files staged so far (their folder numbers).
    staged: u32,
    /// Where the session's latest result said it was: an action's result says it again only
    /// where it changed.
    told: Option<Told>,
}

/// Where a result told the agent its session was: the tab, its URL and its title.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Told {
    pub tab: String,
    pub url: String,
    pub title: String,
}

/// What the sweep of stray pages has done since start.
#[derive(Debug, Clone, Copy, Default)]
pub struct SweepStats {
    pub adopted: u64,
    pub closed: u64,
}

/// A live session as `GET /api/sessions` lists it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct SessionSummary {
    pub session: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Tabs when its last call ended.
    pub tabs: usize,
    /// Seconds since its last call.
    pub idle_secs: u64,
    /// A call is running in it now.
    pub busy: bool,
    /// How it presents itself, when it was created with an identity.
    #[serde(skip_serializing_if = "Identity::is_default")]
    pub identity: Identity,
    /// The remote browser (DevTools URL) it lives in, with `--browser-url`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub browser: Option<String>,
    /// Actions waiting for a person to allow them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub questions: Vec<live::Question>,
}

/// What a session may be created with besides its name.
#[derive(Debug, Clone, Default)]
pub struct SessionExtras {
    /// What its creator calls it (not its name).
    pub label: Option<String>,
    /// Its own idle limit.
    pub idle: Option<Duration>,
    pub identity: Identity,
}

/// Who has a session's turn, for a call that waits for a person.
pub enum Turn {
    /// The call: it holds the session's command lock.
    Agent(SessionGuard),
    /// A person in control of the session's live view: the hub to wait on.
    Person(Arc<LiveHub>),
}

/// One tab as `browser_tabs list` shows it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TabInfo {
    pub tab: String,
    pub url: String,
    pub title: String,
    pub active: bool,
}

impl BrowserService {
    /// `policy` decides which documents tabs may load (see `guard`).
    pub fn new(config: Arc<Config>, policy: UrlPolicy) -> Arc<Self> {
        let concurrency = config.browser_concurrency();
        Arc::new(Self {
            pool: BrowserPool::new(config.clone(), policy),
            config,
            sessions: Mutex::new(HashMap::new()),
            scratch_count: AtomicU64::new(0),
            scratch: Mutex::new(Vec::new()),
            admission: Admission::new(concurrency),
            memory: MemoryGauge::default(),
            strays_adopted: AtomicU64::new(0),
            strays_closed: AtomicU64::new(0),
            unowned_contexts: Mutex::new(HashSet::new()),
            unused_since: Mutex::new(None),
            live: Arc::default(),
            warm: Default::default(),
        })
    }

    /// A new session's live side.
    fn hub(&self) -> Arc<LiveHub> {
        let size = (self.config.viewport_width, self.config.viewport_height);
        LiveHub::new(self.live.clone(), size)
    }

    /// A new session's place: its live side, and the browser endpoint with the fewest sessions
    /// of those that answer and have room.
    fn place(&self, sessions: &HashMap<SessionId, Arc<Session>>) -> ToolResult<Place> {
        let mut live = vec![0; self.pool.endpoint_count()];
        for session in sessions.values() {
            if let Some(count) = live.get_mut(session.endpoint) {
                *count += 1;
            }
        }
        Ok((self.hub(), self.pool.choose(&live)?))
    }

    /// The live views' counters.
    pub fn live_stats(&self) -> &LiveStats {
        &self.live
    }

    /// The admission queue now.
    pub fn admission(&self) -> AdmissionStats {
        self.admission.stats()
    }

    /// Stray pages the sweep adopted or closed since start.
    pub fn sweep_stats(&self) -> SweepStats {
        SweepStats {
            adopted: self.strays_adopted.load(Ordering::Relaxed),
            closed: self.strays_closed.load(Ordering::Relaxed),
        }
    }

    /// Chromium's pages now, of every context of every browser; none without a browser.
    pub async fn page_count(&self) -> Option<usize> {
        let browsers = self.pool.existing_all().await;
        let mut count = None;
        for browser in browsers {
            if let Ok(pages) = list_pages(&browser).await {
                *count.get_or_insert(0) += pages.len();
            }
        }
        count
    }

    /// The tabs of every session, scratch ones included, as their last call left them.
    pub fn tab_count(&self) -> usize {
        let owners = self.owners_by_context();
        owners
            .values()
            .map(|s| s.tab_count.load(Ordering::Relaxed))
            .sum()
    }

    /// The browser's total proportional memory (PSS of its processes), in bytes; none without
    /// a local browser.
    pub async fn browser_pss(&self) -> Option<u64> {
        let pid = self.pool.existing().await?.pid()?;
        self.memory.pss(pid).await
    }
}

/// Exclusive access to one session for the duration of a tool call.
pub struct SessionGuard {
    session: Arc<Session>,
    state: OwnedMutexGuard<SessionState>,
    browser: Arc<BrowserHandle>,
    max_tabs: usize,
    /// Where this session stages inline upload files.
    uploads: PathBuf,
    /// `discard` closed the context already.
    discarded: bool,
    admission: Arc<Admission>,
    /// When the call holding the guard must be done: the admission queue waits until then.
    deadline: Instant,
    /// The admission slot this call holds (from a new context or tab to the end of the call:
    /// the first navigation is part of the cost).
    ticket: Option<Ticket>,
    /// How long the call waited in the admission queue.
    queued: Duration,
    /// The sweep's guard: looking at an idle session does not make it busy.
    quiet: bool,
}

/// Numbers sessions as they are created.
static SESSION_SERIAL: AtomicU64 = AtomicU64::new(0);

/// How often remote browser endpoints marked down are probed.
const ENDPOINT_PROBE_EVERY: Duration = Duration::from_secs(2);

impl Session {
    fn downloads_dir(&self, data_dir: &std::path::Path) -> PathBuf {
        self.tenant.downloads_dir(data_dir, &self.name)
    }

    fn new(tenant: Arc<Tenant>, name: SessionName, scratch: bool, place: Place) -> Arc<Self> {
        Self::with(tenant, name, scratch, place, SessionExtras::default())
    }

    fn with(
        tenant: Arc<Tenant>,
        name: SessionName,
        scratch: bool,
        (live, endpoint): Place,
        extras: SessionExtras,
    ) -> Arc<Self> {
        let context = ContextMirror::default();
        Arc::new(Self {
            serial: SESSION_SERIAL.fetch_add(1, Ordering::Relaxed),
            endpoint,
            label: extras.label,
            idle_limit: extras.idle,
            identity: extras.identity,
            tab_count: Default::default(),
            name,
            tenant,
            scratch,
            state: Arc::new(tokio::sync::Mutex::new(SessionState {
                mirror: context.clone(),
                ..SessionState::default()
            })),
            context,
            last_used: Mutex::new(Instant::now()),
            live,
        })
    }

    fn published_context(&self) -> Option<BrowserContextId> {
        self.context.locked().clone()
    }

    fn touch(&self) {
        *self.last_used.locked() = Instant::now();
    }

    fn idle_for(&self) -> Duration {
        self.last_used.locked().elapsed()
    }

    /// Its tenant's name and its own.
    fn id(&self) -> SessionId {
        SessionId::new(self.tenant.name().clone(), self.name.clone())
    }
}

impl SessionState {
    /// Forgets everything tied to the previous browser generation.
    fn reset(&mut self) {
        self.tabs.clear();
        self.active = None;
        self.set_context(None);
        self.lane = None;
        self.browser = None;
        self.closed_targets.clear();
        self.init_scripts.clear();
        self.told = None;
    }

    fn set_context(&mut self, context: Option<BrowserContextId>) {
        *self.mirror.locked() = context.clone();
        self.context = context;
    }

    /// Closes the browser context (and with it every tab) if the browser is still alive, and
    /// removes the session's staged uploads.
    async fn dispose(&mut self) {
        let tabs = std::mem::take(&mut self.tabs);
        drop(tabs);
        if let Some(uploads) = self.uploads.take() {
            let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(uploads)).await;
        }
        if let (Some(browser), Some(context)) = (self.browser.clone(), self.context.clone())
            && browser.is_alive()
        {
            let _ = browser
                .cdp(
                    "closing a browser context",
                    browser.browser.dispose_browser_context(context),
                )
                .await;
        }
        self.reset();
    }
}

/// The session's command lock stayed taken until the call's deadline.
fn busy(session: &Session) -> ToolError {
    if session.live.controlled() {
        ToolError::new(
            ErrorCode::Timeout,
            format!(
                "a person has control of session {:?} in its live view",
                session.name.as_str()
            ),
        )
        .with_hint("wait until they give it back (browser_interact action=wait picks up a hand-off), or retry with a longer timeout_ms")
    } else {
        ToolError::new(
            ErrorCode::Timeout,
            format!("session {:?} stayed busy with another call", session.name.as_str()),
        )
        .with_hint("calls on one session run one at a time: retry when the other call is done, or use another session")
    }
}

fn no_such_tab(id: &str) -> ToolError {
    ToolError::new(
        ErrorCode::NoSuchTab,
        format!("no tab {id:?} in this session"),
    )
}
