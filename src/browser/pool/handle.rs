//! One browser generation of one endpoint: its CDP connection, liveness, and the CDP call
//! wrapper every command goes through (a timeout, a race with the browser's death).

use super::*;

/// One running (or connected) Chromium.
pub struct BrowserHandle {
    /// chromiumoxide's client; only `&self` methods are used, so it is shared freely.
    pub(crate) browser: Browser,
    pub generation: u64,
    /// `true` while the browser is usable; flipped once by the watchdog or the handler task.
    pub(super) alive: watch::Receiver<bool>,
    /// Set when webpilot closes the browser: its tabs going away then is the browser's end,
    /// not theirs.
    pub(super) closing: std::sync::atomic::AtomicBool,
    /// Process id of a launched browser (none when connected remotely).
    pub(super) pid: Option<u32>,
    /// Drives the CDP connection; aborted on drop.
    pub(super) handler_task: JoinHandle<()>,
    /// Watches the process or pings the remote browser; aborted on drop.
    pub(super) watchdog_task: JoinHandle<()>,
    /// The temporary profile and TMPDIR of a launched browser, deleted when the handle drops
    /// (after the process has exited, see `shutdown`).
    pub(super) _profile_dir: Option<tempfile::TempDir>,
    pub(crate) cdp_timeout: Duration,
    /// Downloads of every session, appended by the download watcher, taken by tabs.
    pub(crate) downloads: Arc<std::sync::Mutex<DownloadLog>>,
    /// Follows `Browser.downloadWillBegin/Progress`; aborted on drop.
    pub(super) download_task: JoinHandle<()>,
    /// Which documents tabs may load.
    pub(crate) guard: Arc<DocumentGuard>,
    /// Where the browser contexts' connections go: set when this browser can reach the egress
    /// proxy on 127.0.0.1 (launched here, or a remote browser on this machine).
    pub(crate) egress: Option<Arc<Egress>>,
    /// The lane of connections outside any context of ours (`--proxy-server`).
    pub(super) _default_lane: Option<Lane>,
    /// The second connection, for frame sessions and direct navigation (`link.rs`); `None`
    /// when the browser would not take one.
    pub(crate) link: Option<Arc<CdpLink>>,
    /// Counts tabs whose renderer crashed (the pool's counter).
    pub(crate) tab_crashes: Arc<AtomicU64>,
    /// What each tab records of what its page did.
    pub(crate) network: crate::config::NetworkConfig,
}

impl Drop for BrowserHandle {
    fn drop(&mut self) {
        self.handler_task.abort();
        self.watchdog_task.abort();
        self.download_task.abort();
    }
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
        let _stage = crate::timing::cdp_stage(what);
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

    pub(super) fn classify(&self, what: &str, error: String) -> ToolError {
        if !self.is_alive() || error.contains("channel closed") || error.contains("Ws(") {
            return browser_died();
        }
        ToolError::new(ErrorCode::Internal, format!("{what} failed: {error}"))
            .with_hint("the browser rejected the command; retry, or open the page again")
    }

    /// Asks Chromium to close, waits for the process to exit, and kills it if it does not.
    pub(super) async fn shutdown(&self) {
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

pub(super) fn unavailable(message: String) -> ToolError {
    ToolError::new(ErrorCode::BrowserUnavailable, message)
}

pub(crate) fn browser_died() -> ToolError {
    unavailable("the browser stopped during the call".into())
}
