//! Starting a browser: Chromium's flags and profile, connecting to a remote one, and the
//! tasks that watch it (its CDP handler, downloads, the watchdog); leftovers of earlier runs.

use super::*;

/// Profile preferences Chromium has no flag for. No network prediction: Chromium would otherwise
/// open a connection to a navigation's host while the URL guard still holds the request, so a
/// refused private address would be contacted (though never sent a request).
pub(super) const PREFERENCES: &str = r#"{"net": {"network_prediction_options": 2}}"#;

pub(super) fn write_preferences(profile: &std::path::Path) -> ToolResult<()> {
    let default = profile.join("Default");
    std::fs::create_dir_all(&default)
        .and_then(|()| std::fs::write(default.join("Preferences"), PREFERENCES))
        .map_err(|e| unavailable(format!("cannot write the browser profile: {e}")))
}

/// A launched browser's profile and TMPDIR live in `<temp dir>/webpilot-chromium-<pid>-XXXX`,
/// `<pid>` being webpilot's.
pub(super) const BROWSER_DIR_PREFIX: &str = "webpilot-chromium-";

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
pub(super) fn launch_config(
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
            "no-startup-window",
            "mute-audio",
            "disable-breakpad",
            "disable-crash-reporter",
        ])
        // Feature lists go as key and values, which BrowserConfig merges with its own
        // `--enable-features`/`--disable-features`: as plain strings they would be second
        // switches of the same name, and Chromium keeps only one of them, whichever its
        // (unordered) argument map puts last.
        //
        // The omnibox popup is WebUI with a renderer of its own per window, so per browser
        // context: headless never shows it, and every session and render paid a process for
        // it. (Measured with SystemInfo.getProcessInfo: a new context's first tab started 3
        // renderers, 2 without it.)
        //
        // Autofill asks Google's server about every form a page shows (about 20 requests a
        // second over 8 sessions on form pages), through the session's egress lane, whatever
        // `--disable-background-networking` says: off, so no page's forms leave the machine.
        .arg((
            "disable-features",
            "Translate,TranslateUI,MediaRouter,OptimizationHints,WebUIOmniboxPopup,\
             WebUIOmniboxAimPopup,AutofillServerCommunication",
        ))
        // WebMCP: the tools pages publish for agents (`document.modelContext`).
        .arg(("enable-features", "WebMCP"))
        .arg(("proxy-server", proxy))
        .arg(("proxy-bypass-list", NO_BYPASS))
        // WebRTC's UDP does not go through a proxy: none at all, rather than unchecked.
        .arg(("force-webrtc-ip-handling-policy", "disable_non_proxied_udp"))
        .build()
        .map_err(|e| unavailable(format!("invalid browser configuration: {e}")))
}

/// Whether the browser's DevTools endpoint is on this machine's loopback, so that it can
/// reach the egress proxy there.
pub(super) fn on_this_machine(devtools: &str) -> bool {
    url::Url::parse(devtools).is_ok_and(|url| match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => false,
    })
}

/// The second connection to the browser; without it tabs still work, but frames of other sites
/// stay out of reach and navigations queue behind a page still loading.
pub(super) async fn connect_link(address: &str, limit: Duration) -> Option<Arc<CdpLink>> {
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
pub(super) async fn drive_handler(
    mut handler: chromiumoxide::Handler,
    alive: Arc<watch::Sender<bool>>,
) {
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
pub(super) async fn watch_downloads(
    browser: &Browser,
    downloads: Arc<std::sync::Mutex<DownloadLog>>,
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
                Some(event) = begun.next() => {
                    let mut log = lock();
                    log.in_flight.insert(event.guid.clone(), event.suggested_filename.clone());
                    log.unreported.push(Download {
                        url: event.url.clone(),
                        file: event.suggested_filename.clone(),
                        state: "in_progress".into(),
                        frame_id: event.frame_id.inner().clone(),
                        guid: event.guid.clone(),
                    });
                }
                Some(event) = progress.next() => {
                    let state = event.state.as_ref().to_ascii_lowercase().replace("inprogress", "in_progress");
                    let mut log = lock();
                    if state != "in_progress" {
                        log.in_flight.remove(&event.guid);
                    }
                    if let Some(download) = log.unreported.iter_mut().find(|d| d.guid == event.guid) {
                        download.state = state;
                    }
                }
                else => break,
            }
        }
    })
}

/// Marks the browser dead when its process exits (local) or stops answering (remote).
pub(super) async fn watchdog(pid: Option<u32>, ws: String, alive: Arc<watch::Sender<bool>>) {
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
pub(super) fn process_running(pid: u32) -> bool {
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
pub(super) async fn by_address(url: &str) -> String {
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
pub(super) async fn remote_answers(ws: &str) -> bool {
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
