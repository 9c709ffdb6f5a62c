//! Sessions: one isolated browser context each (own cookies, storage, cache) with its tabs.
//!
//! A session is created on first use (a private `s-…` one only by `create_private`) and closed
//! after `session_idle_secs` without calls. Each session serialises its own commands (its state
//! sits behind an async mutex held for a whole tool call); different sessions run in parallel.

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
use super::live::{Control, LiveHub, LiveStats, LiveTab, LiveTabs};
use super::memory::MemoryGauge;
use super::pool::{BrowserHandle, BrowserPool};
use super::tab::Tab;
use crate::config::Config;
use crate::egress::{Blocked, Lane, NO_BYPASS};
use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::policy::UrlPolicy;
use crate::tenant::Tenant;

/// The browser side of the service: the pool and the sessions living in it.
pub struct BrowserService {
    pub pool: BrowserPool,
    config: Arc<Config>,
    /// Live sessions by tenant and name: a name means something only within its tenant. A std
    /// mutex: it is held only to look up or insert, never across an await.
    sessions: Mutex<HashMap<SessionKey, Arc<Session>>>,
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
    warm: super::warm::WarmSessions,
}

/// A session's tenant name (empty for the operator) and its own name.
type SessionKey = (String, String);

/// Where a new session lives: its live side and its browser endpoint.
type Place = (Arc<LiveHub>, usize);

/// One named session. Its `state` mutex is the session's command queue.
pub struct Session {
    name: String,
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

/// The prefix of private sessions' names: only `create_private` makes such a session, so a
/// name with it that is not live (never made, closed, reaped, another tenant's) is an error,
/// never a new empty session of that name.
const PRIVATE_PREFIX: &str = "s-";

/// Whether `name` is a private session's (made only by `POST /api/sessions`).
pub fn is_private(name: &str) -> bool {
    name.starts_with(PRIVATE_PREFIX)
}

/// The error for a private session's name that names no live session of the caller's. It says
/// the same whether the session never existed, is gone or is another tenant's.
fn no_such_private_session(name: &str) -> ToolError {
    ToolError::new(
        ErrorCode::NoSuchSession,
        format!("no live private session {name:?}"),
    )
    .with_hint(
        "create a private session with POST /api/sessions; a reaped session's cookies are \
         gone — export a profile to keep a login",
    )
}

/// `prefix` and 128 random bits in lower-case base32: a name nobody can guess.
pub fn unguessable_name(prefix: &str) -> String {
    let mut bits = [0u8; 16];
    // The OS's randomness; its failure leaves no safe way to name a private session.
    getrandom::fill(&mut bits).expect("the operating system provides random bytes");
    let encoded = data_encoding::BASE32_NOPAD.encode(&bits);
    format!("{prefix}{}", encoded.to_ascii_lowercase())
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
    fn place(&self, sessions: &HashMap<SessionKey, Arc<Session>>) -> ToolResult<Place> {
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

    /// The live side of `tenant`'s session `name`, if it is live.
    pub fn live(&self, tenant: &Tenant, name: &str) -> Option<Arc<LiveHub>> {
        self.lookup(&(tenant.name().to_string(), name.to_string()))
            .map(|session| session.live.clone())
    }

    /// A person's control of `tenant`'s live session `name`: its command lock, taken as a call
    /// takes it (waiting for the call in progress until `deadline`).
    pub async fn take_control(
        &self,
        tenant: &Tenant,
        name: &str,
        deadline: Instant,
    ) -> ToolResult<Control> {
        let session = self
            .lookup(&(tenant.name().to_string(), name.to_string()))
            .ok_or_else(|| {
                ToolError::new(
                    ErrorCode::NoSuchSession,
                    format!("no live session {name:?}"),
                )
            })?;
        let hub = session.live.clone();
        if hub.controlled() {
            return Err(super::live::control_taken());
        }
        let mut guard = self.take(session, deadline).await?;
        guard.active_tab().await?;
        guard.publish_tabs();
        Control::new(guard, hub)
    }

    /// Takes the command lock of `tenant`'s session `name` (creating the session if needed)
    /// with its browser context ready. A new context waits for its turn in the admission queue
    /// until `deadline` at most.
    pub async fn session(
        &self,
        tenant: &Arc<Tenant>,
        name: &str,
        deadline: Instant,
    ) -> ToolResult<SessionGuard> {
        let session = self.lookup_or_create(tenant, name).await?;
        self.take(session, deadline).await
    }

    /// `session`, for a call that waits for a person (a hand-off): when a person has control of
    /// the session (now, or while the call waits for its turn), the call is theirs to wait for,
    /// not their control's end: it gets the session's live side instead of its command lock.
    pub async fn session_or_person(
        &self,
        tenant: &Arc<Tenant>,
        name: &str,
        deadline: Instant,
    ) -> ToolResult<Turn> {
        let session = self.lookup_or_create(tenant, name).await?;
        let hub = session.live.clone();
        // Cancelling `take` while it waits for the lock is safe: a person who has control holds
        // the lock, so `take` cannot have got past it.
        tokio::select! {
            biased;
            () = hub.person_in_control() => Ok(Turn::Person(hub)),
            guard = self.take(session, deadline) => guard.map(Turn::Agent),
        }
    }

    /// A session of its own for one job of `tenant`: its own browser context (cookies,
    /// storage, cache), not listed, not shared, not reaped. `SessionGuard::discard` closes it.
    /// Made ahead when it can be (`warm`), with its first tab open then.
    pub async fn scratch_session(
        self: &Arc<Self>,
        tenant: &Arc<Tenant>,
        purpose: &str,
        deadline: Instant,
    ) -> ToolResult<SessionGuard> {
        let limit = self.config.crawl.warm_renders;
        let warm = self.warm.take(tenant.name());
        if limit > 0 {
            self.refill_warm(tenant, limit);
        }
        if let Some(mut guard) = warm {
            let current = self.pool.current(guard.session.endpoint).await;
            if current.is_ok_and(|browser| browser.generation == guard.browser.generation) {
                guard.deadline = deadline;
                return Ok(guard);
            }
            guard.discard().await;
        }
        self.cold_scratch_session(tenant, purpose, deadline).await
    }

    /// The warm sessions.
    pub(super) fn warm(&self) -> &super::warm::WarmSessions {
        &self.warm
    }

    /// Warm sessions ready for renders now.
    pub fn warm_sessions(&self) -> usize {
        self.warm.ready()
    }

    /// `scratch_session`, made now.
    pub(super) async fn cold_scratch_session(
        &self,
        tenant: &Arc<Tenant>,
        purpose: &str,
        deadline: Instant,
    ) -> ToolResult<SessionGuard> {
        let number = self.scratch_count.fetch_add(1, Ordering::Relaxed) + 1;
        let name = format!("_{purpose}-{number}");
        let place = {
            let sessions = self.sessions.locked();
            self.place(&sessions)?
        };
        let session = Session::new(tenant.clone(), name, true, place);
        {
            let mut scratch = self.scratch.locked();
            scratch.retain(|s| s.strong_count() > 0);
            scratch.push(Arc::downgrade(&session));
        }
        self.take(session, deadline).await
    }

    async fn take(&self, session: Arc<Session>, deadline: Instant) -> ToolResult<SessionGuard> {
        session.touch();
        let lock = session.state.clone().lock_owned();
        let mut state = match tokio::time::timeout_at(deadline.into(), lock).await {
            Ok(state) => state,
            Err(_) => return Err(busy(&session)),
        };
        let browser = match self.pool.current(session.endpoint).await {
            Ok(browser) => browser,
            Err(error) => return Err(self.lost_with_its_browser(&session, error)),
        };
        let mut ticket = None;
        if state
            .browser
            .as_ref()
            .is_none_or(|b| b.generation != browser.generation)
        {
            state.reset();
            ticket = Some(
                self.admission
                    .admit(deadline, "creating the session's browser context")
                    .await?,
            );
            let (params, lane) = context_params(&browser, &session).await?;
            let context = browser
                .cdp(
                    "creating a browser context",
                    browser.browser.create_browser_context(params),
                )
                .await?;
            // Kept before anything else can fail, so that `dispose` closes it whatever happens.
            state.set_context(Some(context.clone()));
            state.lane = lane;
            state.browser = Some(browser.clone());
            self.set_downloads(&browser, &context, &session).await?;
            session
                .identity
                .apply_to_context(&browser, &context)
                .await?;
        }
        let mut guard = self.guard(session, state, browser, deadline);
        guard.queued = ticket.as_ref().map_or(Duration::ZERO, |t| t.queued);
        guard.ticket = ticket;
        Ok(guard)
    }

    /// A session whose remote browser cannot be reached goes with it: its name is free again,
    /// for a new session on a browser that answers.
    fn lost_with_its_browser(&self, session: &Arc<Session>, error: ToolError) -> ToolError {
        let Some(address) = self.pool.endpoint_address(session.endpoint) else {
            return error;
        };
        let key = (session.tenant.name().to_string(), session.name.clone());
        let mut sessions = self.sessions.locked();
        if sessions.get(&key).is_some_and(|s| Arc::ptr_eq(s, session)) {
            sessions.remove(&key);
        }
        let hint = if is_private(&session.name) {
            "its pages and cookies are gone: start a new session with POST /api/sessions (in a \
             browser that answers)"
        } else {
            "its pages and cookies are gone: call again to start a new session of that name \
             (in a browser that answers)"
        };
        ToolError::new(
            ErrorCode::BrowserUnavailable,
            format!(
                "session {:?} lived in the browser at {address}, which does not answer: {}",
                session.name, error.message
            ),
        )
        .with_hint(hint)
    }

    fn guard(
        &self,
        session: Arc<Session>,
        state: OwnedMutexGuard<SessionState>,
        browser: Arc<BrowserHandle>,
        deadline: Instant,
    ) -> SessionGuard {
        SessionGuard {
            uploads: self.uploads_of(&session),
            session,
            state,
            browser,
            max_tabs: self.config.max_tabs_per_session,
            discarded: false,
            admission: self.admission.clone(),
            deadline,
            ticket: None,
            queued: Duration::ZERO,
            quiet: false,
        }
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

    /// Where a session stages inline uploads: `<data dir>/uploads/<pid>/<session>-<serial>/`,
    /// its own whatever its name, and this process's own (another webpilot on the same data dir
    /// cleans only the folders of processes that are gone).
    fn uploads_of(&self, session: &Session) -> PathBuf {
        self.config
            .data_dir
            .join("uploads")
            .join(std::process::id().to_string())
            .join(format!("{}-{}", folder_name(&session.name), session.serial))
    }

    /// Lets a session's pages download into `downloads/<session>/` of its tenant's data dir and
    /// report it; a scratch session's renders download nothing.
    async fn set_downloads(
        &self,
        browser: &BrowserHandle,
        context: &BrowserContextId,
        session: &Session,
    ) -> ToolResult<()> {
        let params = if session.scratch {
            SetDownloadBehaviorParams {
                behavior: SetDownloadBehaviorBehavior::Deny,
                browser_context_id: Some(context.clone()),
                download_path: None,
                events_enabled: None,
            }
        } else {
            let dir = session.downloads_dir(&self.config.data_dir);
            SetDownloadBehaviorParams {
                behavior: SetDownloadBehaviorBehavior::Allow,
                browser_context_id: Some(context.clone()),
                download_path: Some(dir.to_string_lossy().into_owned()),
                events_enabled: Some(true),
            }
        };
        browser
            .cdp(
                "setting the download behaviour",
                browser.browser.execute(params),
            )
            .await?;
        Ok(())
    }

    async fn lookup_or_create(&self, tenant: &Arc<Tenant>, name: &str) -> ToolResult<Arc<Session>> {
        let key = (tenant.name().to_string(), name.to_string());
        if let Some(session) = self.lookup(&key) {
            return Ok(session);
        }
        if is_private(name) {
            return Err(no_such_private_session(name));
        }
        let memory = self.memory_room().await;
        let mut sessions = self.sessions.locked();
        if let Some(session) = sessions.get(&key) {
            return Ok(session.clone());
        }
        self.room_for_one(&sessions, tenant)?;
        memory?;
        let place = self.place(&sessions)?;
        let session = Session::new(tenant.clone(), name.to_string(), false, place);
        sessions.insert(key, session.clone());
        Ok(session)
    }

    /// Creates session `name` of `tenant` with `identity`, or confirms that the live one has
    /// it: an identity is given when a session is created, never changed under its pages.
    pub async fn create_with_identity(
        &self,
        tenant: &Arc<Tenant>,
        name: &str,
        identity: Identity,
    ) -> ToolResult<()> {
        identity.check()?;
        let key = (tenant.name().to_string(), name.to_string());
        let memory = self.memory_room().await;
        let mut sessions = self.sessions.locked();
        if let Some(session) = sessions.get(&key) {
            if session.identity == identity {
                return Ok(());
            }
            return Err(ToolError::invalid(format!(
                "field `session_options`: session {name:?} already exists with another identity"
            ))
            .with_hint(
                "pass session_options on a session's first call, or use a new session name",
            ));
        }
        if is_private(name) {
            return Err(no_such_private_session(name));
        }
        self.room_for_one(&sessions, tenant)?;
        memory?;
        let place = self.place(&sessions)?;
        let session = Session::with(
            tenant.clone(),
            name.to_string(),
            false,
            place,
            SessionExtras {
                identity,
                ..SessionExtras::default()
            },
        );
        sessions.insert(key, session);
        Ok(())
    }

    fn lookup(&self, key: &SessionKey) -> Option<Arc<Session>> {
        let sessions = self.sessions.locked();
        sessions.get(key).cloned()
    }

    /// `LIMIT` when the browser's memory is over `browser_max_pss_mb`: a new session would
    /// only push it further.
    async fn memory_room(&self) -> ToolResult<()> {
        let Some(limit_mb) = self.config.browser_max_pss_mb else {
            return Ok(());
        };
        let Some(pss) = self.browser_pss().await else {
            return Ok(());
        };
        let used_mb = pss / (1024 * 1024);
        if used_mb < limit_mb {
            return Ok(());
        }
        Err(ToolError::new(
            ErrorCode::Limit,
            format!(
                "the browser uses {used_mb} MB (PSS), over browser_max_pss_mb = {limit_mb}: no \
                 new session until it uses less"
            ),
        )
        .with_hint(
            "reuse a live session (GET /api/sessions), close one you no longer need (DELETE \
             /api/sessions/{id}), or call again later",
        )
        .retry_after(30))
    }

    /// A new private session of `tenant`: an unguessable name (`s-` and 128 random bits),
    /// which only its creator knows; `idle` overrides the idle limit. Its browser context opens
    /// on first use.
    pub async fn create_private(
        &self,
        tenant: &Arc<Tenant>,
        extras: SessionExtras,
    ) -> ToolResult<String> {
        extras.identity.check()?;
        let name = unguessable_name(PRIVATE_PREFIX);
        let memory = self.memory_room().await;
        let mut sessions = self.sessions.locked();
        self.room_for_one(&sessions, tenant)?;
        memory?;
        let place = self.place(&sessions)?;
        let session = Session::with(tenant.clone(), name.clone(), false, place, extras);
        sessions.insert((tenant.name().to_string(), name.clone()), session);
        Ok(name)
    }

    /// `tenant`'s live sessions, by name.
    pub fn sessions(&self, tenant: &Tenant) -> Vec<SessionSummary> {
        let sessions = self.sessions.locked();
        let mut summaries: Vec<SessionSummary> = sessions
            .iter()
            .filter(|((owner, _), _)| owner == tenant.name())
            .map(|(_, s)| SessionSummary {
                session: s.name.clone(),
                label: s.label.clone(),
                tabs: s.tab_count.load(Ordering::Relaxed),
                idle_secs: s.idle_for().as_secs(),
                busy: s.state.try_lock().is_err(),
                identity: s.identity.clone(),
                browser: self.pool.endpoint_address(s.endpoint).map(str::to_string),
            })
            .collect();
        summaries.sort_by(|a, b| a.session.cmp(&b.session));
        summaries
    }

    /// Refuses a new session past the service's maximum or past `tenant`'s own.
    fn room_for_one(
        &self,
        sessions: &HashMap<SessionKey, Arc<Session>>,
        tenant: &Tenant,
    ) -> ToolResult<()> {
        if let Some(limit) = tenant.max_sessions() {
            let own = sessions
                .keys()
                .filter(|(owner, _)| owner == tenant.name())
                .count();
            if own >= limit {
                return Err(ToolError::new(
                    ErrorCode::Limit,
                    format!("{own} sessions of yours are live, the maximum of your key"),
                )
                .with_hint(
                    "reuse one of your sessions (GET /api/sessions lists them), or close one \
                     with DELETE /api/sessions/{id}",
                ));
            }
        }
        if sessions.len() >= self.config.max_sessions {
            return Err(ToolError::new(
                ErrorCode::Limit,
                format!(
                    "{} sessions are live, the configured maximum",
                    sessions.len()
                ),
            )
            .with_hint(format!(
                "reuse an existing session name, or wait: idle sessions close after {} s",
                self.config.session_idle_secs
            )));
        }
        Ok(())
    }

    /// How many sessions are live, all tenants.
    pub fn session_count(&self) -> usize {
        self.sessions.locked().len()
    }

    /// Closes `tenant`'s session `name` now (its context, tabs, cookies). Returns whether it
    /// existed.
    pub async fn close_session(&self, tenant: &Tenant, name: &str) -> bool {
        let key = (tenant.name().to_string(), name.to_string());
        let removed = self.sessions.locked().remove(&key);
        match removed {
            Some(session) => {
                let mut state = session.state.lock().await;
                state.dispose().await;
                true
            }
            None => false,
        }
    }

    /// Until the service stops or is dropped: closes sessions idle past the configured
    /// timeout, every few seconds, and sweeps stray pages every `browser_sweep_secs`.
    pub fn spawn_housekeeping(self: &Arc<Self>, stop: CancellationToken, tasks: &TaskTracker) {
        let idle = Duration::from_secs(self.config.session_idle_secs);
        let reap_every = (idle / 4).clamp(Duration::from_millis(200), Duration::from_secs(30));
        self.every(reap_every, &stop, tasks, move |service| async move {
            service.reap_idle(idle).await
        });
        if self.pool.endpoint_address(0).is_some() {
            self.every(ENDPOINT_PROBE_EVERY, &stop, tasks, |service| async move {
                service.pool.probe_down().await
            });
        }
        let sweep_every = Duration::from_millis(self.config.browser_sweep_ms.max(100));
        self.every(sweep_every, &stop, tasks, |service| async move {
            service.sweep().await
        });
        if let Some(secs) = self.config.browser_recycle_idle_secs.filter(|s| *s > 0) {
            let after = Duration::from_secs(secs);
            let every = (after / 4).clamp(Duration::from_millis(200), Duration::from_secs(30));
            self.every(every, &stop, tasks, move |service| async move {
                service.recycle_when_unused(after).await
            });
        }
    }

    /// Closes the browser once no session (scratch ones included) has lived for `after`.
    async fn recycle_when_unused(&self, after: Duration) {
        let since = {
            let mut since = self.unused_since.locked();
            if !self.unused() {
                *since = None;
                return;
            }
            *since.get_or_insert_with(Instant::now)
        };
        if since.elapsed() >= after && self.pool.recycle_if(|| self.unused()).await {
            self.warm.clear();
            tracing::info!(
                unused_secs = since.elapsed().as_secs(),
                "closed the unused browser: the next call starts a fresh one"
            );
            *self.unused_since.locked() = None;
        }
    }

    /// No session is live, not even a scratch one (warm ones waiting for a render aside).
    fn unused(&self) -> bool {
        let scratch = self.scratch.locked();
        let live_scratch = scratch.iter().filter(|s| s.strong_count() > 0).count();
        self.session_count() == 0 && live_scratch <= self.warm.ready()
    }

    /// Runs `chore` every `period` on the service, while it lives and `stop` is not cancelled.
    fn every<F, Fut>(
        self: &Arc<Self>,
        period: Duration,
        stop: &CancellationToken,
        tasks: &TaskTracker,
        chore: F,
    ) where
        F: Fn(Arc<Self>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send,
    {
        let service = Arc::downgrade(self);
        let stop = stop.clone();
        tasks.spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    () = stop.cancelled() => return,
                }
                let Some(service) = service.upgrade() else {
                    return;
                };
                chore(service).await;
            }
        });
    }

    /// Compares Chromium's pages with the sessions' tabs. A page in an idle session's context
    /// that no tab holds (a tab whose opening timed out, a popup since its last call) is
    /// adopted as a tab; one nobody can adopt, or in a context no session owns, is closed.
    /// Contexts no session owns, two sweeps in a row, are closed too. A remote browser's
    /// pages and contexts that are not ours are left alone.
    async fn sweep(&self) {
        for browser in self.pool.existing_all().await {
            self.sweep_browser(&browser).await;
        }
    }

    async fn sweep_browser(&self, browser: &Arc<BrowserHandle>) {
        let Ok(targets) = list_pages(browser).await else {
            return;
        };
        let owners = self.owners_by_context();
        let mut by_context: HashMap<Option<BrowserContextId>, Vec<TargetInfo>> = HashMap::new();
        for page in targets {
            by_context
                .entry(page.browser_context_id.clone())
                .or_default()
                .push(page);
        }
        let local = browser.pid().is_some();
        for (context, pages) in by_context {
            match context.as_ref().and_then(|c| owners.get(c)) {
                Some(session) => self.sweep_session(session, browser, &pages).await,
                None if local => {
                    for page in pages {
                        tracing::info!(target = %page.target_id.inner(), url = %page.url, "closing a page no session owns");
                        self.close_stray(browser, page.target_id).await;
                    }
                }
                None => {}
            }
        }
        if local {
            self.dispose_unowned_contexts(browser, &owners).await;
        }
    }

    /// Every live session's context, the scratch sessions' included.
    fn owners_by_context(&self) -> HashMap<BrowserContextId, Arc<Session>> {
        let named: Vec<Arc<Session>> = self.sessions.locked().values().cloned().collect();
        let scratch: Vec<Arc<Session>> = self
            .scratch
            .locked()
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        named
            .into_iter()
            .chain(scratch)
            .filter_map(|session| Some((session.published_context()?, session)))
            .collect()
    }

    /// Adopts or closes `pages` (of `session`'s context) that none of its tabs holds, when the
    /// session is idle; a busy one does that itself on its next look at its tabs.
    async fn sweep_session(
        &self,
        session: &Arc<Session>,
        browser: &Arc<BrowserHandle>,
        pages: &[TargetInfo],
    ) {
        let Ok(state) = session.state.clone().try_lock_owned() else {
            return;
        };
        let current = state
            .browser
            .as_ref()
            .is_some_and(|b| b.generation == browser.generation);
        let held = |state: &SessionState, page: &TargetInfo| {
            state.tabs.iter().any(|t| t.target_id() == &page.target_id)
                || state.closed_targets.contains(&page.target_id)
        };
        if !current || pages.iter().all(|page| held(&state, page)) {
            return;
        }
        let mut guard = self.guard(session.clone(), state, browser.clone(), Instant::now());
        guard.quiet = true;
        let adopted = guard.sync_with(pages).await;
        self.strays_adopted
            .fetch_add(adopted.len() as u64, Ordering::Relaxed);
        let unheld: Vec<TargetId> = pages
            .iter()
            .filter(|page| !held(&guard.state, page))
            .map(|page| page.target_id.clone())
            .collect();
        for target in unheld {
            guard.state.closed_targets.insert(target.clone());
            self.close_stray(browser, target).await;
        }
    }

    async fn close_stray(&self, browser: &BrowserHandle, target: TargetId) {
        let close = browser.browser.execute(CloseTargetParams::new(target));
        if browser.cdp("closing a stray page", close).await.is_ok() {
            self.strays_closed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Disposes the contexts that no session owned in this sweep nor in the previous one (a
    /// context whose creation answered after its call had given up).
    async fn dispose_unowned_contexts(
        &self,
        browser: &BrowserHandle,
        owners: &HashMap<BrowserContextId, Arc<Session>>,
    ) {
        let list = browser.browser.execute(
            chromiumoxide::cdp::browser_protocol::target::GetBrowserContextsParams::default(),
        );
        let Ok(contexts) = browser.cdp("listing browser contexts", list).await else {
            return;
        };
        let unowned: HashSet<BrowserContextId> = contexts
            .result
            .browser_context_ids
            .into_iter()
            .filter(|c| !owners.contains_key(c))
            .collect();
        let previous = std::mem::replace(&mut *self.unowned_contexts.locked(), unowned.clone());
        for context in unowned.intersection(&previous) {
            tracing::info!(context = %context.inner(), "closing a browser context no session owns");
            let dispose = browser.browser.dispose_browser_context(context.clone());
            let _ = browser.cdp("closing a browser context", dispose).await;
        }
    }

    async fn reap_idle(&self, idle: Duration) {
        let expired: Vec<Arc<Session>> = {
            let mut sessions = self.sessions.locked();
            let names: Vec<SessionKey> = sessions
                .iter()
                .filter(|(_, s)| {
                    s.idle_for() >= s.idle_limit.unwrap_or(idle)
                        && s.state.try_lock().is_ok()
                        // A person watching it, or an agent waiting for one, is using it.
                        && !s.live.attended()
                })
                .map(|(key, _)| key.clone())
                .collect();
            names.iter().filter_map(|n| sessions.remove(n)).collect()
        };
        for session in expired {
            tracing::info!(session = %session.name, tenant = session.tenant.label(), "closing idle session");
            session.state.lock().await.dispose().await;
        }
    }

    /// Closes every session and the browser.
    pub async fn shutdown(&self) {
        self.warm.clear();
        let sessions: Vec<Arc<Session>> = self.sessions.locked().drain().map(|(_, s)| s).collect();
        for session in sessions {
            if let Ok(mut state) = session.state.try_lock() {
                state.tabs.clear();
            }
        }
        self.pool.shutdown().await;
    }
}

/// A session name as a folder name: what is not alphanumeric, `-` or `_` becomes `_`.
fn folder_name(session: &str) -> String {
    session
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A new context's parameters: its own lane of the egress proxy when the browser can reach it.
async fn context_params(
    browser: &BrowserHandle,
    session: &Session,
) -> ToolResult<(CreateBrowserContextParams, Option<Arc<Lane>>)> {
    let Some(egress) = &browser.egress else {
        return Ok((CreateBrowserContextParams::default(), None));
    };
    let policy = session.tenant.policy().clone();
    let opening = match session.identity.upstream()? {
        Some(own) => egress.open_lane_through(policy, Some(Arc::new(own))).await,
        None => egress.open_lane_under(policy).await,
    };
    let lane = opening.map_err(|e| {
        ToolError::new(
            ErrorCode::BrowserUnavailable,
            format!("cannot open a lane of the egress proxy: {e}"),
        )
    })?;
    let params = CreateBrowserContextParams::builder()
        .proxy_server(lane.proxy_server())
        .proxy_bypass_list(NO_BYPASS)
        .build();
    Ok((params, Some(Arc::new(lane))))
}

/// Numbers sessions as they are created.
static SESSION_SERIAL: AtomicU64 = AtomicU64::new(0);

/// How often remote browser endpoints marked down are probed.
const ENDPOINT_PROBE_EVERY: Duration = Duration::from_secs(2);

impl Session {
    fn downloads_dir(&self, data_dir: &std::path::Path) -> PathBuf {
        self.tenant
            .data_dir(data_dir)
            .join("downloads")
            .join(folder_name(&self.name))
    }

    fn new(tenant: Arc<Tenant>, name: String, scratch: bool, place: Place) -> Arc<Self> {
        Self::with(tenant, name, scratch, place, SessionExtras::default())
    }

    fn with(
        tenant: Arc<Tenant>,
        name: String,
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

impl Drop for SessionGuard {
    fn drop(&mut self) {
        if !self.quiet {
            self.session.touch();
        }
        self.session
            .tab_count
            .store(self.state.tabs.len(), Ordering::Relaxed);
        self.publish_tabs();
        // A job dropped midway (its caller went away) still closes its scratch context.
        if self.session.scratch
            && !self.discarded
            && !self.quiet
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let session = self.session.clone();
            runtime.spawn(async move { session.state.lock().await.dispose().await });
        }
    }
}

impl SessionGuard {
    /// How the session presents itself to sites.
    pub fn identity(&self) -> &Identity {
        &self.session.identity
    }

    /// Where the session's downloads go: `downloads/<session>/` in its tenant's data dir.
    pub fn downloads_dir(&self, data_dir: &std::path::Path) -> PathBuf {
        self.session.downloads_dir(data_dir)
    }

    /// Lets go of the admission slot the call holds (a warm session waiting for its render).
    pub(super) fn release_admission(&mut self) {
        self.ticket = None;
        self.queued = Duration::ZERO;
    }

    /// The session's only tab, opened if it has none yet (a warm session has one ready).
    pub async fn first_tab(&mut self) -> ToolResult<&mut Tab> {
        if self.state.tabs.is_empty() {
            return self.open_tab().await;
        }
        let index = self.state.tabs.len() - 1;
        self.state.active = Some(self.state.tabs[index].id.clone());
        Ok(&mut self.state.tabs[index])
    }

    /// Closes the session's browser context, tabs and cookies with it.
    pub async fn discard(mut self) {
        self.state.dispose().await;
        self.discarded = true;
    }

    pub fn name(&self) -> &str {
        &self.session.name
    }

    /// The session's live side.
    pub fn live(&self) -> &Arc<LiveHub> {
        &self.session.live
    }

    /// Shows the session's tabs as they are now to its live viewers.
    pub fn publish_tabs(&self) {
        let tabs = self
            .state
            .tabs
            .iter()
            .map(|tab| {
                LiveTab::new(
                    tab.id.clone(),
                    tab.page.clone(),
                    tab.target_id().clone(),
                    self.browser.clone(),
                )
            })
            .collect();
        self.session.live.publish(LiveTabs {
            tabs,
            active: self.state.active.clone(),
        });
    }

    /// Marks the session as in use now.
    pub fn touch(&self) {
        self.session.touch();
    }

    /// Writes a file sent inline where the session's pages can pick it (mode 0600, its own
    /// folder so names never collide); it stays until the session closes.
    pub async fn stage_upload(&mut self, name: &str, bytes: Vec<u8>) -> ToolResult<PathBuf> {
        self.state.staged += 1;
        let folder = self.uploads.join(self.state.staged.to_string());
        let path = folder.join(name);
        self.state.uploads = Some(self.uploads.clone());
        let written = path.clone();
        tokio::task::spawn_blocking(move || {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::create_dir_all(&folder)?;
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&written)?
                .write_all(&bytes)
        })
        .await
        .map_err(|e| ToolError::internal(format!("staging an upload failed: {e}")))?
        .map_err(|e| ToolError::internal(format!("cannot stage the upload {name:?}: {e}")))?;
        Ok(path)
    }

    /// The active tab, opening a blank one if the session has none (after adopting its pages
    /// no tab holds: one whose opening outlasted its call is this session's tab, not a second).
    pub async fn active_tab(&mut self) -> ToolResult<&mut Tab> {
        if self.state.tabs.is_empty() {
            self.sync_tabs().await?;
        }
        let active = self.state.active.clone();
        let index = match active.and_then(|id| self.index_of(&id)) {
            Some(index) => index,
            None if !self.state.tabs.is_empty() => {
                self.state.active = Some(self.state.tabs[0].id.clone());
                0
            }
            None => {
                self.open_tab().await?;
                self.state.tabs.len() - 1
            }
        };
        Ok(&mut self.state.tabs[index])
    }

    /// How long this call waited in the admission queue.
    pub fn queued(&self) -> Duration {
        self.queued
    }

    /// Takes an admission slot for this call, unless it holds one already.
    async fn admitted(&mut self, what: &str) -> ToolResult<()> {
        if self.ticket.is_none() {
            let ticket = self.admission.admit(self.deadline, what).await?;
            self.queued += ticket.queued;
            self.ticket = Some(ticket);
        }
        Ok(())
    }

    /// A new tab of the session's context with id `id`, on about:blank. Its creation counts
    /// against the call's deadline; a page Chromium creates after the call gave up is adopted
    /// by the session's next look at its tabs (or by the sweep).
    async fn create_tab(&mut self, id: String) -> ToolResult<Tab> {
        self.admitted("opening a tab").await?;
        let mut params = CreateTargetParams::new("about:blank");
        params.browser_context_id = self.state.context.clone();
        let left = self.deadline.saturating_duration_since(Instant::now());
        let limit = left.clamp(MIN_TAB_CREATION, self.browser.cdp_timeout);
        let page = self
            .browser
            .within(
                limit,
                "opening a tab",
                self.browser.browser.new_page(params),
            )
            .await?;
        let guard = self.document_guard();
        let tab = Tab::attach(id, page, self.browser.clone(), guard).await?;
        tab.present_as(&self.session.identity).await?;
        for script in &self.state.init_scripts {
            tab.install_script(script).await?;
        }
        Ok(tab)
    }

    /// Replaces tab `id` with a fresh one of the same id if its renderer crashed; returns the
    /// crashed page's URL then (a reload reopens it).
    pub async fn replace_if_crashed(&mut self, id: &str) -> ToolResult<Option<String>> {
        let index = self.index_of(id).ok_or_else(|| no_such_tab(id))?;
        if !self.state.tabs[index].crashed() {
            return Ok(None);
        }
        let url = self.target_url(self.state.tabs[index].target_id()).await;
        let fresh = self.create_tab(id.to_string()).await?;
        let crashed = std::mem::replace(&mut self.state.tabs[index], fresh);
        tracing::info!(tab = id, "replaced a tab whose renderer crashed");
        self.forget_page(crashed).await;
        Ok(url)
    }

    /// The URL Chromium has for a target (a crashed page's too).
    async fn target_url(&self, target: &TargetId) -> Option<String> {
        let info = self.browser.browser.execute(
            chromiumoxide::cdp::browser_protocol::target::GetTargetInfoParams {
                target_id: Some(target.clone()),
            },
        );
        let info = self.browser.cdp("reading a target", info).await.ok()?;
        let url = info.result.target_info.url;
        (url != "about:blank" && !url.is_empty()).then_some(url)
    }

    /// Opens a new blank tab and makes it active.
    pub async fn open_tab(&mut self) -> ToolResult<&mut Tab> {
        if self.state.tabs.len() >= self.max_tabs {
            return Err(ToolError::new(
                ErrorCode::Limit,
                format!(
                    "the session already has {} tabs, the configured maximum",
                    self.max_tabs
                ),
            )
            .with_hint("close tabs you no longer need with browser_tabs action=close"));
        }
        let id = self.next_tab_id();
        let tab = self.create_tab(id).await?;
        self.state.active = Some(tab.id.clone());
        self.state.tabs.push(tab);
        Ok(self.state.tabs.last_mut().expect("a tab was just pushed"))
    }

    fn next_tab_id(&mut self) -> String {
        self.state.next_tab_number += 1;
        format!("t{}", self.state.next_tab_number)
    }

    fn index_of(&self, id: &str) -> Option<usize> {
        self.state.tabs.iter().position(|t| t.id == id)
    }

    /// The tab with this id.
    pub fn tab(&mut self, id: &str) -> ToolResult<&mut Tab> {
        match self.index_of(id) {
            Some(index) => Ok(&mut self.state.tabs[index]),
            None => Err(no_such_tab(id)),
        }
    }

    /// What judges the documents of the session's tabs: its tenant's policy, its lane.
    fn document_guard(&self) -> Arc<DocumentGuard> {
        let policy = self.session.tenant.policy().clone();
        self.browser
            .guard
            .for_session(self.state.lane.clone(), policy)
    }

    /// Connections the egress policy refused to the session's pages since the last call.
    pub fn take_blocked(&self) -> Vec<Blocked> {
        self.state
            .lane
            .as_ref()
            .map(|lane| lane.take_blocked())
            .unwrap_or_default()
    }

    pub(crate) fn context_id(&self) -> Option<BrowserContextId> {
        self.state.context.clone()
    }

    pub(crate) fn browser(&self) -> &BrowserHandle {
        &self.browser
    }

    pub(crate) fn tabs(&self) -> impl Iterator<Item = &Tab> {
        self.state.tabs.iter()
    }

    pub(crate) fn remember_script(&mut self, script: String) {
        self.state.init_scripts.push(script);
    }

    /// The named tab, or the active one when no id is given.
    /// An id not known yet may be a popup opened since the last call: adopt pages first.
    pub async fn tab_or_active(&mut self, id: Option<&str>) -> ToolResult<&mut Tab> {
        match id {
            Some(id) => {
                if self.index_of(id).is_none() {
                    self.sync_tabs().await?;
                }
                self.tab(id)
            }
            None => self.active_tab().await,
        }
    }

    pub fn active_id(&self) -> Option<&str> {
        self.state.active.as_deref()
    }

    pub fn switch_to(&mut self, id: &str) -> ToolResult<()> {
        self.index_of(id).ok_or_else(|| no_such_tab(id))?;
        self.state.active = Some(id.to_string());
        Ok(())
    }

    /// Closes a tab; the most recently opened remaining tab becomes active.
    pub async fn close_tab(&mut self, id: &str) -> ToolResult<()> {
        let index = self.index_of(id).ok_or_else(|| no_such_tab(id))?;
        let tab = self.state.tabs.remove(index);
        self.forget_page(tab).await;
        if self.state.active.as_deref() == Some(id) {
            self.state.active = self.state.tabs.last().map(|t| t.id.clone());
        }
        Ok(())
    }

    /// Closes a tab's page, which is no tab any more.
    async fn forget_page(&mut self, tab: Tab) {
        let page = tab.page.clone();
        // Chromium lists the target for a moment longer; it must not come back as a popup.
        self.state.closed_targets.insert(tab.target_id().clone());
        drop(tab);
        // A page stuck in a script must not block closing it: give the close a short limit.
        let _ = self
            .browser
            .within(Duration::from_secs(3), "closing a tab", page.close())
            .await;
    }

    /// Adopts the pages of the session's context that no tab holds (popups, `target=_blank`,
    /// a tab whose opening outlasted its call) and forgets tabs whose page has closed. Returns
    /// the ids of adopted tabs.
    pub async fn sync_tabs(&mut self) -> ToolResult<Vec<String>> {
        let targets = list_pages(&self.browser).await?;
        Ok(self.sync_with(&targets).await)
    }

    /// `sync_tabs` on pages already listed (at least those of the session's context).
    async fn sync_with(&mut self, targets: &[TargetInfo]) -> Vec<String> {
        let all: HashSet<&TargetId> = targets.iter().map(|t| &t.target_id).collect();
        self.state.closed_targets.retain(|t| all.contains(t));
        let live: Vec<TargetId> = targets
            .iter()
            .filter(|t| {
                t.browser_context_id.is_some() && t.browser_context_id == self.state.context
            })
            .map(|t| t.target_id.clone())
            .collect();
        self.state.tabs.retain(|t| live.contains(t.target_id()));
        if self
            .state
            .active
            .as_ref()
            .is_some_and(|id| !self.state.tabs.iter().any(|t| &t.id == id))
        {
            self.state.active = self.state.tabs.last().map(|t| t.id.clone());
        }
        let mut adopted = Vec::new();
        for target in live {
            let known = self.state.tabs.iter().any(|t| t.target_id() == &target)
                || self.state.closed_targets.contains(&target);
            if known {
                continue;
            }
            // chromiumoxide has the page once it has attached to it: until then, a later look
            // adopts it.
            let Ok(page) = self.browser.browser.get_page(target.clone()).await else {
                continue;
            };
            // A page can close while it is being adopted; that is no error of this call.
            let guard = self.document_guard();
            let attached =
                match Tab::attach(self.next_tab_id(), page, self.browser.clone(), guard).await {
                    Ok(tab) => tab.present_as(&self.session.identity).await.map(|()| tab),
                    Err(error) => Err(error),
                };
            match attached {
                Ok(tab) => {
                    adopted.push(tab.id.clone());
                    self.state.tabs.push(tab);
                }
                Err(error) => {
                    tracing::debug!(target = ?target, message = %error.message, "page vanished before adoption");
                    self.state.closed_targets.insert(target);
                }
            }
        }
        adopted
    }

    /// All tabs with their URL and title.
    pub async fn list_tabs(&mut self) -> ToolResult<Vec<TabInfo>> {
        self.sync_tabs().await?;
        let active = self.state.active.clone();
        let mut infos = Vec::with_capacity(self.state.tabs.len());
        for tab in &self.state.tabs {
            infos.push(TabInfo {
                tab: tab.id.clone(),
                url: tab.url().await,
                title: tab.title().await,
                active: active.as_deref() == Some(tab.id.as_str()),
            });
        }
        Ok(infos)
    }
}

/// A tab's creation gets at least this long, whatever is left of its call: cut shorter, it
/// would only leave a page for the sweep.
const MIN_TAB_CREATION: Duration = Duration::from_millis(100);

/// Chromium's pages (with their contexts), in one browser-side call.
pub(super) async fn list_pages(browser: &BrowserHandle) -> ToolResult<Vec<TargetInfo>> {
    let list = browser.browser.execute(GetTargetsParams::default());
    let targets = browser.cdp("listing pages", list).await?;
    Ok(targets
        .result
        .target_infos
        .into_iter()
        .filter(|t| t.r#type == "page")
        .collect())
}

/// The session's command lock stayed taken until the call's deadline.
fn busy(session: &Session) -> ToolError {
    if session.live.controlled() {
        ToolError::new(
            ErrorCode::Timeout,
            format!(
                "a person has control of session {:?} in its live view",
                session.name
            ),
        )
        .with_hint("wait until they give it back (browser_interact action=wait picks up a hand-off), or retry with a longer timeout_ms")
    } else {
        ToolError::new(
            ErrorCode::Timeout,
            format!("session {:?} stayed busy with another call", session.name),
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
