//! Sessions: one isolated browser context each (own cookies, storage, cache) with its tabs.
//!
//! A session is created on first use and closed after `session_idle_secs` without calls. Each
//! session serialises its own commands (its state sits behind an async mutex held for a whole
//! tool call); different sessions run in parallel.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chromiumoxide::cdp::browser_protocol::browser::{
    BrowserContextId, SetDownloadBehaviorBehavior, SetDownloadBehaviorParams,
};
use chromiumoxide::cdp::browser_protocol::target::{
    CreateBrowserContextParams, CreateTargetParams, GetTargetInfoParams, TargetId,
};
use serde::Serialize;
use tokio::sync::OwnedMutexGuard;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::guard::DocumentGuard;
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
}

/// A session's tenant name (empty for the operator) and its own name.
type SessionKey = (String, String);

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
    state: Arc<tokio::sync::Mutex<SessionState>>,
    /// Last time a command started or finished; read by the idle reaper.
    last_used: Mutex<Instant>,
    /// A scratch session: closed as soon as its one job lets go of it.
    scratch: bool,
}

/// A session's browser-side state, guarded by the session's command lock.
#[derive(Default)]
pub struct SessionState {
    /// The browser generation the context below lives in; a newer generation means the
    /// context and tabs are gone and must be rebuilt.
    browser: Option<Arc<BrowserHandle>>,
    context: Option<BrowserContextId>,
    /// The context's way out through the egress proxy (what it refused, and why).
    lane: Option<Arc<Lane>>,
    tabs: Vec<Tab>,
    active: Option<String>,
    /// Tab numbers keep growing so a closed tab's id is never reused.
    next_tab_number: u32,
    /// Scripts every tab of the session runs before page scripts (restored localStorage).
    init_scripts: Vec<String>,
    /// Targets seen in `browser.pages()` that are not to be adopted: other sessions' pages and
    /// pages this session closed.
    foreign_targets: HashSet<TargetId>,
    /// Files sent inline for uploads, staged here until the session closes (a page reads an
    /// upload's file when it submits, not when it is picked).
    uploads: Option<PathBuf>,
    /// Inline files staged so far (their folder numbers).
    staged: u32,
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
}

/// `prefix` and 128 random bits in lower-case base32: a name nobody can guess.
pub fn unguessable_name(prefix: &str) -> String {
    let mut bits = [0u8; 16];
    // The OS's randomness; its failure leaves no safe way to name a private session.
    getrandom::fill(&mut bits).expect("the operating system provides random bytes");
    let encoded = data_encoding::BASE32_NOPAD.encode(&bits);
    format!("{prefix}{}", encoded.to_ascii_lowercase())
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
        Arc::new(Self {
            pool: BrowserPool::new(config.clone(), policy),
            config,
            sessions: Mutex::new(HashMap::new()),
            scratch_count: AtomicU64::new(0),
        })
    }

    /// Takes the command lock of `tenant`'s session `name` (creating the session if needed)
    /// with its browser context ready.
    pub async fn session(&self, tenant: &Arc<Tenant>, name: &str) -> ToolResult<SessionGuard> {
        let session = self.lookup_or_create(tenant, name)?;
        self.take(session).await
    }

    /// A session of its own for one job of `tenant`: its own browser context (cookies,
    /// storage, cache), not listed, not shared, not reaped. `SessionGuard::discard` closes it.
    pub async fn scratch_session(
        &self,
        tenant: &Arc<Tenant>,
        purpose: &str,
    ) -> ToolResult<SessionGuard> {
        let number = self.scratch_count.fetch_add(1, Ordering::Relaxed) + 1;
        let name = format!("_{purpose}-{number}");
        self.take(Session::new(tenant.clone(), name, true)).await
    }

    async fn take(&self, session: Arc<Session>) -> ToolResult<SessionGuard> {
        session.touch();
        let mut state = session.state.clone().lock_owned().await;
        let browser = self.pool.current().await?;
        if state
            .browser
            .as_ref()
            .is_none_or(|b| b.generation != browser.generation)
        {
            state.reset();
            let (params, lane) = context_params(&browser, &session.tenant).await?;
            let context = browser
                .cdp(
                    "creating a browser context",
                    browser.browser.create_browser_context(params),
                )
                .await?;
            // Kept before anything else can fail, so that `dispose` closes it whatever happens.
            state.context = Some(context.clone());
            state.lane = lane;
            state.browser = Some(browser.clone());
            self.set_downloads(&browser, &context, &session).await?;
        }
        Ok(SessionGuard {
            uploads: self.uploads_of(&session),
            session,
            state,
            browser,
            max_tabs: self.config.max_tabs_per_session,
            discarded: false,
        })
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
            let dir = session
                .tenant
                .data_dir(&self.config.data_dir)
                .join("downloads")
                .join(folder_name(&session.name));
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

    fn lookup_or_create(&self, tenant: &Arc<Tenant>, name: &str) -> ToolResult<Arc<Session>> {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let key = (tenant.name().to_string(), name.to_string());
        if let Some(session) = sessions.get(&key) {
            return Ok(session.clone());
        }
        self.room_for_one(&sessions, tenant)?;
        let session = Session::new(tenant.clone(), name.to_string(), false);
        sessions.insert(key, session.clone());
        Ok(session)
    }

    /// A new private session of `tenant`: an unguessable name (`s-` and 128 random bits),
    /// which only its creator knows; `idle` overrides the idle limit. Its browser context opens
    /// on first use.
    pub fn create_private(
        &self,
        tenant: &Arc<Tenant>,
        label: Option<String>,
        idle: Option<Duration>,
    ) -> ToolResult<String> {
        let name = unguessable_name("s-");
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        self.room_for_one(&sessions, tenant)?;
        let session = Session::with(tenant.clone(), name.clone(), false, label, idle);
        sessions.insert((tenant.name().to_string(), name.clone()), session);
        Ok(name)
    }

    /// `tenant`'s live sessions, by name.
    pub fn sessions(&self, tenant: &Tenant) -> Vec<SessionSummary> {
        let sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let mut summaries: Vec<SessionSummary> = sessions
            .iter()
            .filter(|((owner, _), _)| owner == tenant.name())
            .map(|(_, s)| SessionSummary {
                session: s.name.clone(),
                label: s.label.clone(),
                tabs: s.tab_count.load(Ordering::Relaxed),
                idle_secs: s.idle_for().as_secs(),
                busy: s.state.try_lock().is_err(),
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
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }

    /// Closes `tenant`'s session `name` now (its context, tabs, cookies). Returns whether it
    /// existed.
    pub async fn close_session(&self, tenant: &Tenant, name: &str) -> bool {
        let key = (tenant.name().to_string(), name.to_string());
        let removed = self
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&key);
        match removed {
            Some(session) => {
                let mut state = session.state.lock().await;
                state.dispose().await;
                true
            }
            None => false,
        }
    }

    /// Closes sessions idle past the configured timeout, every few seconds, until the service
    /// stops or is dropped.
    pub fn spawn_reaper(self: &Arc<Self>, stop: CancellationToken, tasks: &TaskTracker) {
        let service = Arc::downgrade(self);
        let idle = Duration::from_secs(self.config.session_idle_secs);
        let every = (idle / 4).clamp(Duration::from_millis(200), Duration::from_secs(30));
        tasks.spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    () = stop.cancelled() => return,
                }
                let Some(service) = service.upgrade() else {
                    return;
                };
                service.reap_idle(idle).await;
            }
        });
    }

    async fn reap_idle(&self, idle: Duration) {
        let expired: Vec<Arc<Session>> = {
            let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
            let names: Vec<SessionKey> = sessions
                .iter()
                .filter(|(_, s)| {
                    s.idle_for() >= s.idle_limit.unwrap_or(idle) && s.state.try_lock().is_ok()
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
        let sessions: Vec<Arc<Session>> = self
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .map(|(_, s)| s)
            .collect();
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
    tenant: &Tenant,
) -> ToolResult<(CreateBrowserContextParams, Option<Arc<Lane>>)> {
    let Some(egress) = &browser.egress else {
        return Ok((CreateBrowserContextParams::default(), None));
    };
    let lane = egress
        .open_lane_under(tenant.policy().clone())
        .await
        .map_err(|e| {
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

impl Session {
    fn new(tenant: Arc<Tenant>, name: String, scratch: bool) -> Arc<Self> {
        Self::with(tenant, name, scratch, None, None)
    }

    fn with(
        tenant: Arc<Tenant>,
        name: String,
        scratch: bool,
        label: Option<String>,
        idle_limit: Option<Duration>,
    ) -> Arc<Self> {
        Arc::new(Self {
            serial: SESSION_SERIAL.fetch_add(1, Ordering::Relaxed),
            label,
            idle_limit,
            tab_count: Default::default(),
            name,
            tenant,
            scratch,
            state: Arc::new(tokio::sync::Mutex::new(SessionState::default())),
            last_used: Mutex::new(Instant::now()),
        })
    }

    fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    fn idle_for(&self) -> Duration {
        self.last_used
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .elapsed()
    }
}

impl SessionState {
    /// Forgets everything tied to the previous browser generation.
    fn reset(&mut self) {
        self.tabs.clear();
        self.active = None;
        self.context = None;
        self.lane = None;
        self.browser = None;
        self.foreign_targets.clear();
        self.init_scripts.clear();
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
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        self.session.touch();
        self.session
            .tab_count
            .store(self.state.tabs.len(), Ordering::Relaxed);
        // A job dropped midway (its caller went away) still closes its scratch context.
        if self.session.scratch
            && !self.discarded
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let session = self.session.clone();
            runtime.spawn(async move { session.state.lock().await.dispose().await });
        }
    }
}

impl SessionGuard {
    /// Closes the session's browser context, tabs and cookies with it.
    pub async fn discard(mut self) {
        self.state.dispose().await;
        self.discarded = true;
    }

    pub fn name(&self) -> &str {
        &self.session.name
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

    /// The active tab, opening a blank one if the session has none.
    pub async fn active_tab(&mut self) -> ToolResult<&mut Tab> {
        let active = self.state.active.clone();
        let index = match active.and_then(|id| self.index_of(&id)) {
            Some(index) => index,
            None if !self.state.tabs.is_empty() => {
                self.state.active = Some(self.state.tabs[0].id.clone());
                0
            }
            None => {
                self.open_tab("about:blank").await?;
                self.state.tabs.len() - 1
            }
        };
        Ok(&mut self.state.tabs[index])
    }

    /// Opens a new tab (on `url`, or blank) and makes it active.
    pub async fn open_tab(&mut self, url: &str) -> ToolResult<&mut Tab> {
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
        let mut params = CreateTargetParams::new(url);
        params.browser_context_id = self.state.context.clone();
        let page = self
            .browser
            .cdp("opening a tab", self.browser.browser.new_page(params))
            .await?;
        let guard = self.document_guard();
        let tab = Tab::attach(self.next_tab_id(), page, self.browser.clone(), guard).await?;
        for script in &self.state.init_scripts {
            tab.install_script(script).await?;
        }
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
        let page = tab.page.clone();
        // The target lingers in `pages()` for a moment; it must not come back as a popup.
        self.state.foreign_targets.insert(tab.target_id().clone());
        drop(tab);
        // A page stuck in a script must not block closing it: give the close a short limit.
        let _ = self
            .browser
            .within(Duration::from_secs(3), "closing a tab", page.close())
            .await;
        if self.state.active.as_deref() == Some(id) {
            self.state.active = self.state.tabs.last().map(|t| t.id.clone());
        }
        Ok(())
    }

    /// Adopts pages opened by the session's own pages (popups, `target=_blank`) as tabs and
    /// forgets tabs whose page has closed. Returns the ids of adopted tabs.
    pub async fn sync_tabs(&mut self) -> ToolResult<Vec<String>> {
        let pages = self
            .browser
            .cdp("listing pages", self.browser.browser.pages())
            .await?;
        let live: HashSet<TargetId> = pages.iter().map(|p| p.target_id().clone()).collect();
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
        for page in pages {
            let target = page.target_id().clone();
            let known = self.state.tabs.iter().any(|t| t.target_id() == &target)
                || self.state.foreign_targets.contains(&target);
            if known {
                continue;
            }
            let info = self
                .browser
                .cdp(
                    "reading a target",
                    self.browser.browser.execute(GetTargetInfoParams {
                        target_id: Some(target.clone()),
                    }),
                )
                .await;
            let ours = info.is_ok_and(|info| {
                info.result.target_info.browser_context_id == self.state.context
                    && info.result.target_info.r#type == "page"
            });
            if !ours {
                self.state.foreign_targets.insert(target);
                continue;
            }
            // A page can close while it is being adopted; that is no error of this call.
            let guard = self.document_guard();
            match Tab::attach(self.next_tab_id(), page, self.browser.clone(), guard).await {
                Ok(tab) => {
                    adopted.push(tab.id.clone());
                    self.state.tabs.push(tab);
                }
                Err(error) => {
                    tracing::debug!(target = ?target, message = %error.message, "page vanished before adoption");
                    self.state.foreign_targets.insert(target);
                }
            }
        }
        Ok(adopted)
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

fn no_such_tab(id: &str) -> ToolError {
    ToolError::new(
        ErrorCode::NoSuchTab,
        format!("no tab {id:?} in this session"),
    )
}
