//! The browsers of this process: one Chromium launched here, or one or more remote CDP
//! endpoints (`--browser-url a,b,…`); launch (or connect), liveness, relaunch and shutdown.
//!
//! A `BrowserHandle` is one browser *generation* of one endpoint. When Chromium dies, its handle
//! is marked dead (every CDP call racing on it fails at once with `BROWSER_UNAVAILABLE`) and the
//! next call to `BrowserPool::current` launches (or reconnects) a new generation. Sessions notice
//! the new generation and rebuild their browser context. A remote endpoint that cannot be
//! reached is marked down: it gets no new sessions until a probe finds it answering again.

use crate::sync::Locked;
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

/// One running (or connected) Chromium.
pub struct BrowserHandle {
    /// chromiumoxide's client; only `&self` methods are used, so it is shared freely.
    pub(crate) browser: Browser,
    pub generation: u64,
    /// `true` while the browser is usable; flipped once by the watchdog or the handler task.
    alive: watch::Receiver<bool>,
    /// Set when webpilot closes the browser: its tabs going away then is the browser's end,
    /// not theirs.
    closing: std::sync::atomic::AtomicBool,
    /// Process id of a launched browser (none when connected remotely).
    pid: Option<u32>,
    /// Drives the CDP connection; aborted on drop.
    handler_task: JoinHandle<()>,
    /// Watches the process or pings the remote browser; aborted on drop.
    watchdog_task: JoinHandle<()>,
    /// The temporary profile and TMPDIR of a launched browser, deleted when the handle drops
    /// (after the process has exited, see `shutdown`).
    _profile_dir: Option<tempfile::TempDir>,
    pub(crate) cdp_timeout: Duration,
    /// Downloads of every session, appended by the download watcher, taken by tabs.
    pub(crate) downloads: Arc<std::sync::Mutex<Vec<Download>>>,
    /// Follows `Browser.downloadWillBegin/Progress`; aborted on drop.
    download_task: JoinHandle<()>,
    /// Which documents tabs may load.
    pub(crate) guard: Arc<DocumentGuard>,
    /// Where the browser contexts' connections go: set when this browser can reach the egress
    /// proxy on 127.0.0.1 (launched here, or a remote browser on this machine).
    pub(crate) egress: Option<Arc<Egress>>,
    /// The lane of connections outside any context of ours (`--proxy-server`).
    _default_lane: Option<Lane>,
    /// The second connection, for frame sessions and direct navigation (`link.rs`); `None`
    /// when the browser would not take one.
    pub(crate) link: Option<Arc<CdpLink>>,
    /// Counts tabs whose renderer crashed (the pool's counter).
    pub(crate) tab_crashes: Arc<AtomicU64>,
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

impl Drop for BrowserHandle {
    fn drop(&mut self) {
        self.handler_task.abort();
        self.watchdog_task.abort();
        self.download_task.abort();
    }
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
        let launched_here = slot.as_ref().is_some_and(|h| h.pid.is_some());
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
                && let Some(pid) = slot.as_ref().and_then(|h| h.pid)
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
        let downloads = Arc::new(std::sync::Mutex::new(Vec::new()));
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

/// Profile preferences Chromium has no flag for. No network prediction: Chromium would otherwise
/// open a connection to a navigation's host while the URL guard still holds the request, so a
/// refused private address would be contacted (though never sent a request).
const PREFERENCES: &str = r#"{"net": {"network_prediction_options": 2}}"#;

fn write_preferences(profile: &std::path::Path) -> ToolResult<()> {
    let default = profile.join("Default");
    std::fs::create_dir_all(&default)
        .and_then(|()| std::fs::write(default.join("Preferences"), PREFERENCES))
        .map_err(|e| unavailable(format!("cannot write the browser profile: {e}")))
}

/// A launched browser's profile and TMPDIR live in `<temp dir>/webpilot-chromium-<pid>-XXXX`,
/// `<pid>` being webpilot's.
const BROWSER_DIR_PREFIX: &str = "webpilot-chromium-";

/// Removes, in the background, the browser dirs that webpilot processes which are gone left in
/// the temp dir (killed with SIGKILL, they could not remove them): profiles with cookies,
/// caches, hundreds of MB each.
pub fn remove_abandoned_browser_dirs() -> tokio::task::JoinHandle<usize> {
    tokio::task::spawn_blocking(|| {
        let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
            return 0;
        };
        let abandoned = entries.flatten().map(|e| e.path()).filter(|path| {
            let pid = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix(BROWSER_DIR_PREFIX))
                .and_then(|rest| rest.split_once('-'))
                .and_then(|(pid, _)| pid.parse::<u32>().ok());
            // This process's own dirs belong to browsers it runs (tests start several services
            // in one process).
            pid.is_some_and(|pid| pid != std::process::id() && !process_running(pid))
        });
        let removed = abandoned
            .filter(|path| std::fs::remove_dir_all(path).is_ok())
            .count();
        if removed > 0 {
            tracing::info!(
                removed,
                "removed browser dirs of webpilot processes that are gone"
            );
        }
        removed
    })
}

/// Removes, in the background, the inline uploads that webpilot processes which are gone
/// staged under `<data dir>/uploads/<pid>/` (a session's uploads live as long as it does).
pub fn remove_abandoned_uploads(data_dir: &std::path::Path) -> tokio::task::JoinHandle<usize> {
    let uploads = data_dir.join("uploads");
    tokio::task::spawn_blocking(move || {
        let Ok(entries) = std::fs::read_dir(&uploads) else {
            return 0;
        };
        entries
            .flatten()
            .map(|e| e.path())
            .filter(|path| {
                let pid = path
                    .file_name()
                    .and_then(|n| n.to_str()?.parse::<u32>().ok());
                pid.is_some_and(|pid| pid != std::process::id() && !process_running(pid))
            })
            .filter(|path| std::fs::remove_dir_all(path).is_ok())
            .count()
    })
}

/// Environment variable that turns the `webpilot` binary into a Chromium launcher: it asks the
/// kernel to kill it when webpilot dies (`PR_SET_PDEATHSIG`), then execs the named browser.
/// Without it, a webpilot killed by SIGKILL (or the OOM killer) would orphan its Chromium.
pub const EXEC_CHROMIUM_ENV: &str = "WEBPILOT_EXEC_CHROMIUM";

/// Runs the launcher role when asked to (see `EXEC_CHROMIUM_ENV`); returns only if not asked
/// or if the exec failed.
pub fn exec_chromium_if_launcher() -> Option<std::io::Error> {
    use std::os::unix::process::CommandExt;
    let browser = std::env::var_os(EXEC_CHROMIUM_ENV)?;
    // SAFETY: prctl with constant arguments on the current process.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    let error = std::process::Command::new(browser)
        .args(std::env::args_os().skip(1))
        .env_remove(EXEC_CHROMIUM_ENV)
        .exec();
    Some(error)
}

/// Chromium's launch flags: headless, no background traffic, a private profile and TMPDIR,
/// every connection through the egress proxy (`proxy`), loopback included.
fn launch_config(
    config: &Config,
    profile: PathBuf,
    tmp: PathBuf,
    proxy: &str,
) -> ToolResult<BrowserConfig> {
    let viewport = chromiumoxide::handler::viewport::Viewport {
        width: config.viewport_width,
        height: config.viewport_height,
        ..Default::default()
    };
    let builder = match &config.launcher {
        Some(launcher) => BrowserConfig::builder()
            .chrome_executable(launcher)
            .env(EXEC_CHROMIUM_ENV, config.chromium.to_string_lossy()),
        None => BrowserConfig::builder().chrome_executable(&config.chromium),
    };
    builder
        .no_sandbox()
        .user_data_dir(profile)
        .env("TMPDIR", tmp.to_string_lossy())
        .viewport(viewport)
        .window_size(config.viewport_width, config.viewport_height)
        .launch_timeout(Duration::from_secs(20))
        .request_timeout(Duration::from_millis(config.cdp_timeout_ms))
        // BrowserConfig adds the leading `--` itself (CHROMIUM.md).
        .args([
            "disable-gpu",
            "disable-component-update",
            "disable-quic",
            "disable-background-networking",
            "disable-sync",
            "no-first-run",
            "disable-dev-shm-usage",
            // The omnibox popup is WebUI with a renderer of its own per window, so per
            // browser context: headless never shows it, and every session and render paid a
            // process for it. (Measured with SystemInfo.getProcessInfo: a new context's first
            // tab started 3 renderers, 2 without it.)
            "disable-features=Translate,TranslateUI,MediaRouter,OptimizationHints,\
             WebUIOmniboxPopup,WebUIOmniboxAimPopup",
            "no-startup-window",
            "mute-audio",
            "disable-breakpad",
            "disable-crash-reporter",
        ])
        .arg(("proxy-server", proxy))
        .arg(("proxy-bypass-list", NO_BYPASS))
        // WebRTC's UDP does not go through a proxy: none at all, rather than unchecked.
        .arg(("force-webrtc-ip-handling-policy", "disable_non_proxied_udp"))
        .build()
        .map_err(|e| unavailable(format!("invalid browser configuration: {e}")))
}

/// Whether the browser's DevTools endpoint is on this machine's loopback, so that it can
/// reach the egress proxy there.
fn on_this_machine(devtools: &str) -> bool {
    url::Url::parse(devtools).is_ok_and(|url| match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => false,
    })
}

/// The second connection to the browser; without it tabs still work, but frames of other sites
/// stay out of reach and navigations queue behind a page still loading.
async fn connect_link(address: &str, limit: Duration) -> Option<Arc<CdpLink>> {
    match tokio::time::timeout(limit, CdpLink::connect(address)).await {
        Ok(Ok(link)) => Some(Arc::new(link)),
        Ok(Err(error)) => {
            tracing::warn!(%error, "cannot connect to the browser a second time");
            None
        }
        Err(_) => {
            tracing::warn!("connecting to the browser a second time timed out");
            None
        }
    }
}

/// Runs chromiumoxide's event loop; its end means the connection is gone.
async fn drive_handler(mut handler: chromiumoxide::Handler, alive: Arc<watch::Sender<bool>>) {
    while let Some(event) = handler.next().await {
        if let Err(error) = event {
            // Individual bad messages (e.g. events this crate version cannot parse) are harmless.
            tracing::debug!(%error, "CDP handler error");
        }
    }
    tracing::warn!("CDP connection closed");
    alive.send_replace(false);
}

/// Records downloads as the browser reports them (begin, then progress until done).
async fn watch_downloads(
    browser: &Browser,
    downloads: Arc<std::sync::Mutex<Vec<Download>>>,
    limit: Duration,
) -> JoinHandle<()> {
    let begun =
        tokio::time::timeout(limit, browser.event_listener::<EventDownloadWillBegin>()).await;
    let progress =
        tokio::time::timeout(limit, browser.event_listener::<EventDownloadProgress>()).await;
    let (Ok(Ok(mut begun)), Ok(Ok(mut progress))) = (begun, progress) else {
        tracing::warn!("cannot follow downloads");
        return tokio::spawn(async {});
    };
    tokio::spawn(async move {
        let lock = || downloads.locked();
        loop {
            tokio::select! {
                Some(event) = begun.next() => lock().push(Download {
                    url: event.url.clone(),
                    file: event.suggested_filename.clone(),
                    state: "in_progress".into(),
                    frame_id: event.frame_id.inner().clone(),
                    guid: event.guid.clone(),
                }),
                Some(event) = progress.next() => {
                    if let Some(download) = lock().iter_mut().find(|d| d.guid == event.guid) {
                        download.state = event.state.as_ref().to_ascii_lowercase().replace("inprogress", "in_progress");
                    }
                }
                else => break,
            }
        }
    })
}

/// Marks the browser dead when its process exits (local) or stops answering (remote).
async fn watchdog(pid: Option<u32>, ws: String, alive: Arc<watch::Sender<bool>>) {
    let mut tick = tokio::time::interval(Duration::from_millis(WATCHDOG_INTERVAL_MS));
    loop {
        tick.tick().await;
        let gone = match pid {
            Some(pid) => !process_running(pid),
            None => !remote_answers(&ws).await,
        };
        if gone {
            tracing::warn!(?pid, "browser process is gone");
            alive.send_replace(false);
            return;
        }
    }
}

/// True while `pid` exists and is not a zombie.
fn process_running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.chars().next())
            .is_some_and(|state| state != 'Z' && state != 'X'),
        Err(_) => false,
    }
}

/// `url` with its host name resolved to an address: Chromium's DevTools server answers only
/// requests whose `Host` is an IP address or localhost (against DNS rebinding), so a name such
/// as `chromium` (a compose service) must not reach it.
async fn by_address(url: &str) -> String {
    let Ok(mut parsed) = url::Url::parse(url) else {
        return url.to_string();
    };
    let Some(url::Host::Domain(name)) = parsed.host() else {
        return url.to_string();
    };
    if name.eq_ignore_ascii_case("localhost") {
        return url.to_string();
    }
    let target = (
        name.to_string(),
        parsed.port_or_known_default().unwrap_or(80),
    );
    let resolved = tokio::net::lookup_host(target)
        .await
        .ok()
        .and_then(|mut addresses| addresses.next());
    match resolved {
        Some(address) if parsed.set_ip_host(address.ip()).is_ok() => {
            let text = parsed.to_string();
            // Url adds a `/` path to a bare origin; the client appends its own paths.
            if url.ends_with('/') {
                text
            } else {
                text.trim_end_matches('/').to_string()
            }
        }
        _ => url.to_string(),
    }
}

/// A remote browser is alive while its DevTools endpoint accepts TCP connections.
async fn remote_answers(ws: &str) -> bool {
    let Ok(url) = url::Url::parse(ws) else {
        return true;
    };
    let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
        return true;
    };
    let connect = tokio::net::TcpStream::connect((host.to_string(), port));
    matches!(
        tokio::time::timeout(Duration::from_millis(REMOTE_PING_TIMEOUT_MS), connect).await,
        Ok(Ok(_))
    )
}

impl BrowserHandle {
    /// Usable: running, and not being closed.
    pub fn is_alive(&self) -> bool {
        *self.alive.borrow() && !self.closing.load(Ordering::SeqCst)
    }

    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// The browser's DevTools WebSocket address.
    pub fn devtools_address(&self) -> &str {
        self.browser.websocket_address()
    }

    /// Runs one CDP call under the command timeout, failing at once if the browser dies.
    pub(crate) async fn cdp<T, E: std::fmt::Display>(
        &self,
        what: &str,
        call: impl Future<Output = Result<T, E>>,
    ) -> ToolResult<T> {
        self.within(self.cdp_timeout, what, call).await
    }

    /// Like `cdp`, with an explicit time limit.
    pub(crate) async fn within<T, E: std::fmt::Display>(
        &self,
        limit: Duration,
        what: &str,
        call: impl Future<Output = Result<T, E>>,
    ) -> ToolResult<T> {
        let mut alive = self.alive.clone();
        if !*alive.borrow() {
            return Err(browser_died());
        }
        tokio::select! {
            result = tokio::time::timeout(limit, call) => match result {
                Ok(Ok(value)) => Ok(value),
                Ok(Err(error)) => Err(self.classify(what, error.to_string())),
                Err(_) if !self.is_alive() => Err(browser_died()),
                Err(_) => Err(ToolError::new(
                    ErrorCode::Timeout,
                    format!("{what} did not answer within {} ms", limit.as_millis()),
                )),
            },
            _ = alive.wait_for(|alive| !alive) => Err(browser_died()),
        }
    }

    fn classify(&self, what: &str, error: String) -> ToolError {
        if !self.is_alive() || error.contains("channel closed") || error.contains("Ws(") {
            return browser_died();
        }
        ToolError::new(ErrorCode::Internal, format!("{what} failed: {error}"))
            .with_hint("the browser rejected the command; retry, or open the page again")
    }

    /// Asks Chromium to close, waits for the process to exit, and kills it if it does not.
    async fn shutdown(&self) {
        let running = self.is_alive();
        self.closing.store(true, Ordering::SeqCst);
        if running {
            let close = self.browser.execute(CloseParams::default());
            let _ = tokio::time::timeout(Duration::from_millis(CLOSE_GRACE_MS), close).await;
        }
        let Some(pid) = self.pid else { return };
        let deadline = tokio::time::Instant::now() + Duration::from_millis(CLOSE_GRACE_MS);
        while process_running(pid) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if process_running(pid) {
            tracing::warn!(pid, "browser did not exit; killing it");
            // SAFETY: plain syscall on a pid we launched and still own (not yet reaped).
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
    }
}

fn unavailable(message: String) -> ToolError {
    ToolError::new(ErrorCode::BrowserUnavailable, message)
}

pub(crate) fn browser_died() -> ToolError {
    unavailable("the browser stopped during the call".into())
}
