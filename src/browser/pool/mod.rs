//! The browsers of this process: one Chromium launched here, or one or more remote CDP
//! endpoints (`--browser-url a,b,…`); launch (or connect), liveness, relaunch and shutdown.
//!
//! A `BrowserHandle` is one browser *generation* of one endpoint. When Chromium dies, its handle
//! is marked dead (every CDP call racing on it fails at once with `BROWSER_UNAVAILABLE`) and the
//! next call to `BrowserPool::current` launches (or reconnects) a new generation. Sessions notice
//! the new generation and rebuild their browser context. A remote endpoint that cannot be
//! reached is marked down: it gets no new sessions until a probe finds it answering again.

mod handle;
mod launch;

use handle::*;
use launch::*;

use crate::sync::Locked;
pub use handle::BrowserHandle;
pub(crate) use handle::browser_died;
pub use launch::{
    exec_chromium_if_launcher, remove_abandoned_browser_dirs, remove_abandoned_uploads,
};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chromiumoxide::browser::{Browser, BrowserConfig};
use chromiumoxide::cdp::browser_protocol::browser::{
    CloseParams, EventDownloadProgress, EventDownloadWillBegin,
};
use futures::StreamExt;
use tokio::sync::{Mutex, watch};
use tokio::task::JoinHandle;

use super::guard::DocumentGuard;
use super::link::CdpLink;
use crate::config::Config;
use crate::egress::{Egress, Lane, NO_BYPASS, Upstream};
use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::policy::UrlPolicy;

/// How often the watchdog looks at the browser process (or pings a remote browser).
const WATCHDOG_INTERVAL_MS: u64 = 250;
/// A remote browser that does not answer a version ping within this time is considered gone.
const REMOTE_PING_TIMEOUT_MS: u64 = 3_000;
/// How long a closing browser gets to exit before it is killed.
const CLOSE_GRACE_MS: u64 = 3_000;
/// How long connecting to a remote browser may take (a host that is gone often only times out).
const REMOTE_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// One place browsers come from.
struct Endpoint {
    /// A running browser's DevTools URL; none: Chromium launched here.
    address: Option<String>,
    /// Most sessions it takes.
    cap: Option<usize>,
    /// The live generation, if any. The mutex also serialises launches, so two sessions that
    /// find the browser dead at the same time start only one new Chromium.
    current: Mutex<Option<Arc<BrowserHandle>>>,
    /// Set while it does not answer: no new sessions go there.
    down: std::sync::atomic::AtomicBool,
    /// Whether a generation was ever started (later ones are restarts).
    started: std::sync::atomic::AtomicBool,
}

impl Endpoint {
    fn new(address: Option<String>, cap: Option<usize>) -> Self {
        Self {
            address,
            cap,
            current: Mutex::new(None),
            down: Default::default(),
            started: Default::default(),
        }
    }
}

/// The endpoints the configuration names: `browser_ws`, else each of `browser_url`'s comma list
/// (`URL` or `URL#N`, N its session cap), else Chromium launched here.
fn endpoints(config: &Config) -> Vec<Endpoint> {
    if let Some(ws) = &config.browser_ws {
        return vec![Endpoint::new(Some(ws.clone()), None)];
    }
    let remote: Vec<Endpoint> = config
        .browser_url
        .iter()
        .flat_map(|list| list.split(','))
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(|item| match item.rsplit_once('#') {
            Some((url, cap)) => Endpoint::new(Some(url.to_string()), cap.parse().ok()),
            None => Endpoint::new(Some(item.to_string()), None),
        })
        .collect();
    if remote.is_empty() {
        vec![Endpoint::new(None, None)]
    } else {
        remote
    }
}

/// Owns every endpoint's current browser generation and starts a new one when needed.
pub struct BrowserPool {
    config: Arc<Config>,
    endpoints: Vec<Endpoint>,
    /// Counts generations; the first launch is generation 1.
    generations: AtomicU64,
    /// The egress proxy every launched browser's connections go through.
    egress: Arc<Egress>,
    /// Which documents tabs may load (`fetch.allow`), shared by every generation.
    guard: Arc<DocumentGuard>,
    /// Set by `shutdown`: no browser is launched any more.
    closed: std::sync::atomic::AtomicBool,
    /// Tabs whose renderer crashed, every generation.
    tab_crashes: Arc<AtomicU64>,
    /// Browsers closed because nothing used them (`recycle_if`).
    recycled: AtomicU64,
}

/// A file the page started to download.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct Download {
    pub url: String,
    pub file: String,
    /// in_progress | completed | canceled
    pub state: String,
    #[serde(skip)]
    pub(crate) frame_id: String,
    #[serde(skip)]
    guid: String,
}

/// What the browser downloads: what tabs have not reported yet, and what is being written.
#[derive(Debug, Default)]
pub(crate) struct DownloadLog {
    /// Started, not yet taken by the tab they started in.
    pub(crate) unreported: Vec<Download>,
    /// The file names of downloads still being written, by guid.
    pub(crate) in_flight: std::collections::HashMap<String, String>,
}

impl BrowserPool {
    pub fn new(config: Arc<Config>, policy: UrlPolicy) -> Self {
        // An invalid proxy is refused at start, by the web client built beside the pool.
        let upstream = Upstream::configured(&config).ok().flatten();
        let egress = Egress::through(policy, upstream);
        Self {
            endpoints: endpoints(&config),
            config,
            generations: AtomicU64::new(0),
            guard: Arc::new(DocumentGuard::new(egress.clone())),
            egress,
            closed: Default::default(),
            tab_crashes: Default::default(),
            recycled: AtomicU64::new(0),
        }
    }

    /// Closes a launched browser if `unused()` still holds while no launch can race it; the
    /// next call starts a fresh one. A long-lived Chromium keeps the heap its busiest moment
    /// needed; a fresh one starts small. Returns whether it closed one.
    pub async fn recycle_if(&self, unused: impl FnOnce() -> bool) -> bool {
        let mut slot = self.endpoints[0].current.lock().await;
        let launched_here = slot.as_ref().is_some_and(|h| h.pid().is_some());
        if !launched_here || !unused() {
            return false;
        }
        if let Some(handle) = slot.take() {
            handle.shutdown().await;
            self.recycled.fetch_add(1, Ordering::SeqCst);
        }
        true
    }

    /// Browsers closed because nothing used them, since start.
    pub fn recycled(&self) -> u64 {
        self.recycled.load(Ordering::SeqCst)
    }

    /// Tabs whose renderer crashed since start.
    pub fn tab_crashes(&self) -> u64 {
        self.tab_crashes.load(Ordering::Relaxed)
    }

    /// Connections the egress proxy refused since start.
    pub fn egress_refused(&self) -> u64 {
        self.egress.refused_total()
    }

    /// How many endpoints there are.
    pub fn endpoint_count(&self) -> usize {
        self.endpoints.len()
    }

    /// A remote endpoint's address (none for the browser launched here).
    pub fn endpoint_address(&self, endpoint: usize) -> Option<&str> {
        self.endpoints.get(endpoint)?.address.as_deref()
    }

    /// The endpoint a new session goes to, given each endpoint's live sessions: the least busy
    /// of those that answer and have room.
    pub fn choose(&self, sessions: &[usize]) -> ToolResult<usize> {
        let candidates = self
            .endpoints
            .iter()
            .enumerate()
            .filter(|(index, endpoint)| {
                let live = sessions.get(*index).copied().unwrap_or(0);
                !endpoint.down.load(Ordering::SeqCst) && endpoint.cap.is_none_or(|cap| live < cap)
            });
        candidates
            .min_by_key(|(index, _)| sessions.get(*index).copied().unwrap_or(0))
            .map(|(index, _)| index)
            .ok_or_else(|| {
                let down = self
                    .endpoints
                    .iter()
                    .filter(|e| e.down.load(Ordering::SeqCst))
                    .count();
                if down == self.endpoints.len() {
                    unavailable("no browser endpoint answers".into())
                        .with_hint("check the hosts of --browser-url; call again once one is back")
                } else {
                    ToolError::new(
                        ErrorCode::Limit,
                        "every browser endpoint that answers has its maximum of sessions",
                    )
                    .with_hint("close a session (DELETE /api/sessions/{id}) or wait for idle ones to close")
                }
            })
    }

    /// Probes endpoints marked down and takes back those that answer again.
    pub async fn probe_down(&self) {
        for endpoint in &self.endpoints {
            if let Some(address) = &endpoint.address
                && endpoint.down.load(Ordering::SeqCst)
                && remote_answers(address).await
            {
                tracing::info!(endpoint = %address, "browser endpoint answers again");
                endpoint.down.store(false, Ordering::SeqCst);
            }
        }
    }

    /// The live browser of `endpoint`, launching (or reconnecting) one if there is none or it
    /// died.
    pub async fn current(&self, endpoint: usize) -> ToolResult<Arc<BrowserHandle>> {
        let Some(place) = self.endpoints.get(endpoint) else {
            return Err(unavailable(format!("no browser endpoint {endpoint}")));
        };
        let mut slot = place.current.lock().await;
        if self.closed.load(Ordering::SeqCst) {
            return Err(unavailable("webpilot is shutting down".into())
                .with_hint("call again once the service is back"));
        }
        if let Some(handle) = slot.as_ref()
            && handle.is_alive()
        {
            return Ok(handle.clone());
        }
        if let Some(dead) = slot.take() {
            tracing::warn!(
                generation = dead.generation,
                endpoint = place.address.as_deref().unwrap_or("local"),
                "browser is gone; starting a new one"
            );
            dead.shutdown().await;
        }
        let generation = self.generations.fetch_add(1, Ordering::SeqCst) + 1;
        let started = self.start(generation, place.address.as_deref()).await;
        if place.address.is_some() {
            // A remote browser that cannot be reached gets no new sessions until it answers.
            place.down.store(started.is_err(), Ordering::SeqCst);
        }
        let handle = Arc::new(started?);
        place.started.store(true, Ordering::SeqCst);
        *slot = Some(handle.clone());
        Ok(handle)
    }

    /// The first endpoint's live browser, without starting one.
    pub async fn existing(&self) -> Option<Arc<BrowserHandle>> {
        self.endpoints[0]
            .current
            .lock()
            .await
            .clone()
            .filter(|h| h.is_alive())
    }

    /// Every endpoint's live browser, without starting any.
    pub async fn existing_all(&self) -> Vec<Arc<BrowserHandle>> {
        let mut live = Vec::new();
        for endpoint in &self.endpoints {
            if let Some(handle) = endpoint.current.lock().await.clone()
                && handle.is_alive()
            {
                live.push(handle);
            }
        }
        live
    }

    /// How many browsers were started after one died (crash recoveries; not recycling).
    pub fn restarts(&self) -> u64 {
        let generations = self.generations.load(Ordering::SeqCst);
        let first = self
            .endpoints
            .iter()
            .filter(|e| e.started.load(Ordering::SeqCst))
            .count() as u64;
        generations.saturating_sub(first + self.recycled())
    }

    /// Closes the browsers and removes their temporary profiles; none is started after.
    pub async fn shutdown(&self) {
        self.closed.store(true, Ordering::SeqCst);
        for endpoint in &self.endpoints {
            let mut slot = endpoint.current.lock().await;
            if let Some(handle) = slot.take() {
                handle.shutdown().await;
            }
        }
    }

    /// Kills a launched browser at once, without waiting: for process exit paths that cannot
    /// run async code (e.g. an `atexit` hook in tests).
    pub fn kill_now(&self) {
        for endpoint in &self.endpoints {
            if let Ok(slot) = endpoint.current.try_lock()
                && let Some(pid) = slot.as_ref().and_then(|h| h.pid())
            {
                // SAFETY: plain syscall on a pid we launched.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        }
    }

    async fn start(&self, generation: u64, remote: Option<&str>) -> ToolResult<BrowserHandle> {
        let cdp_timeout = Duration::from_millis(self.config.cdp_timeout_ms);
        let (browser, handler, profile_dir, default_lane) = match remote {
            Some(url) => {
                let address = by_address(url).await;
                let limit = cdp_timeout.min(REMOTE_CONNECT_TIMEOUT);
                let (browser, handler) = tokio::time::timeout(limit, Browser::connect(address))
                    .await
                    .map_err(|_| {
                        unavailable(format!("connecting to the browser at {url} timed out"))
                    })?
                    .map_err(|e| {
                        unavailable(format!("cannot connect to the browser at {url}: {e}"))
                    })?;
                (browser, handler, None, None)
            }
            None => {
                let lane = self
                    .egress
                    .open_background_lane()
                    .await
                    .map_err(|e| unavailable(format!("cannot open the egress proxy: {e}")))?;
                let (browser, handler, dir) = self.launch(&lane).await?;
                (browser, handler, Some(dir), Some(lane))
            }
        };
        let reachable = self
            .config
            .remote_egress
            .unwrap_or_else(|| on_this_machine(browser.websocket_address()));
        let egress = (default_lane.is_some() || reachable).then(|| self.egress.clone());
        if egress.is_none() {
            tracing::warn!(
                "the remote browser cannot reach the egress proxy (another host, or \
                 --remote-egress false): only its documents are checked against the URL \
                 policy, not its subresources"
            );
        }
        let mut browser = browser;
        let link = connect_link(browser.websocket_address(), cdp_timeout).await;
        let pid = browser
            .get_mut_child()
            .and_then(|child| child.as_mut_inner().id());
        let (alive_tx, alive) = watch::channel(true);
        let alive_tx = Arc::new(alive_tx);
        let handler_task = tokio::spawn(drive_handler(handler, alive_tx.clone()));
        let watchdog_task =
            tokio::spawn(watchdog(pid, browser.websocket_address().clone(), alive_tx));
        let downloads = Arc::new(std::sync::Mutex::new(DownloadLog::default()));
        let download_task = watch_downloads(&browser, downloads.clone(), cdp_timeout).await;
        tracing::info!(generation, ?pid, "browser ready");
        Ok(BrowserHandle {
            browser,
            generation,
            alive,
            pid,
            handler_task,
            watchdog_task,
            closing: Default::default(),
            _profile_dir: profile_dir,
            cdp_timeout,
            downloads,
            download_task,
            guard: self.guard.clone(),
            egress,
            _default_lane: default_lane,
            link,
            tab_crashes: self.tab_crashes.clone(),
            network: self.config.network.clone(),
        })
    }

    async fn launch(
        &self,
        lane: &Lane,
    ) -> ToolResult<(Browser, chromiumoxide::Handler, tempfile::TempDir)> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("{BROWSER_DIR_PREFIX}{}-", std::process::id()))
            .tempdir()
            .map_err(|e| unavailable(format!("cannot create a browser profile dir: {e}")))?;
        let tmp = dir.path().join("tmp");
        std::fs::create_dir_all(&tmp)
            .map_err(|e| unavailable(format!("cannot create the browser's TMPDIR: {e}")))?;
        let profile = dir.path().join("profile");
        write_preferences(&profile)?;
        let config = launch_config(&self.config, profile, tmp, &lane.proxy_server())?;
        let (browser, handler) = Browser::launch(config).await.map_err(|e| {
            unavailable(format!(
                "cannot launch {}: {e}",
                self.config.chromium.display()
            ))
            .with_hint("install Chromium (scripts/setup) or set --chromium / --browser-ws")
        })?;
        Ok((browser, handler, dir))
    }
}
