//! Moving a tab: open a URL, go back/forward in history, reload — then wait until ready.
//!
//! chromiumoxide's `goto` waits for `load` only (and the whole request timeout when a resource
//! never finishes), so navigation is issued in the background and readiness is decided by
//! `settle` instead.

use std::time::{Duration, Instant};

use chromiumoxide::cdp::browser_protocol::page::{
    GetNavigationHistoryParams, NavigateParams, NavigateToHistoryEntryParams, ReloadParams,
    StopLoadingParams,
};
use schemars::JsonSchema;
use serde::Serialize;
use tokio::sync::oneshot;

use super::settle::{Readiness, SettleGoal};
use super::tab::{DialogRecord, Tab, lock};
use crate::error::{ErrorCode, ToolError, ToolResult};

/// How long to wait for Chromium's error text once its error page is showing.
const ERROR_TEXT_WAIT: Duration = Duration::from_secs(3);
/// How long to wait for Chromium's error page once a navigation has failed.
const ERROR_PAGE_WAIT: Duration = Duration::from_secs(1);

/// Where to go.
#[derive(Debug, Clone)]
pub enum Destination {
    Url(String),
    Back,
    Forward,
    Reload,
}

/// Why a tab shows Chromium's error page instead of a document.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FailedNavigation {
    /// The URL that could not be loaded.
    pub url: String,
    /// NAVIGATION_FAILED, or BLOCKED_URL when the URL policy refused it.
    pub code: ErrorCode,
    /// What went wrong.
    pub message: String,
    /// How to recover.
    pub hint: String,
}

/// What a navigation found.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Arrival {
    /// HTTP status of the main document, when one was loaded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<i64>,
    pub ready: Readiness,
    /// The main document's media type (`application/pdf` shows no text to read).
    #[serde(skip)]
    pub mime: Option<String>,
    /// JS dialogs answered during the navigation.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dialogs: Vec<DialogRecord>,
}

impl Tab {
    /// Navigates and waits until the page is ready, `wait_for` appears, or `timeout` passes.
    /// A failure that leaves Chromium's error page is remembered for reading that page.
    pub async fn navigate(
        &mut self,
        destination: Destination,
        wait_for: Option<&str>,
        timeout: Duration,
    ) -> ToolResult<Arrival> {
        let arrival = self.go(destination, wait_for, timeout).await;
        if let Err(error) = &arrival
            && matches!(
                error.code,
                ErrorCode::BlockedUrl | ErrorCode::NavigationFailed
            )
            // An aborted navigation (a download, an empty answer) leaves the document as it was.
            && !error.message.contains("ERR_ABORTED")
        {
            lock(&self.events).navigation_failure = Some(error.clone());
        }
        arrival
    }

    /// Why the tab shows Chromium's error page, if it does: the failed navigation's own error,
    /// else (a link or a reload that failed) that the page could not be loaded.
    pub fn failed_navigation(&self) -> Option<FailedNavigation> {
        let events = lock(&self.events);
        let url = events.unreachable_url.clone()?;
        let error = events
            .navigation_failure
            .clone()
            .unwrap_or_else(|| navigation_failed("the page could not be loaded"));
        Some(FailedNavigation {
            url,
            code: error.code,
            message: error.message,
            hint: error.hint,
        })
    }

    async fn go(
        &mut self,
        destination: Destination,
        wait_for: Option<&str>,
        timeout: Duration,
    ) -> ToolResult<Arrival> {
        let started = Instant::now();
        let commits_before = lock(&self.events).forget_document();
        let url = match &destination {
            Destination::Url(url) => Some(url.clone()),
            _ => None,
        };
        let mut failure = self.start_navigation(destination).await?;
        let goal = SettleGoal {
            wait_for,
            started,
            timeout,
            commits_before: Some(commits_before),
            dom_quiet: Duration::from_millis(super::settle::DOM_QUIET_MS),
            observe_at_least: Duration::ZERO,
            baseline: None,
        };
        let settled = self
            .settle(&goal, || match failure.as_mut().map(|rx| rx.try_recv()) {
                // Not sooner: ending at the refusal itself would leave the error page's commit
                // to land in the next navigation's wait.
                Some(Ok(Some(error))) => Err(lock(&self.events)
                    .blocked
                    .take()
                    .unwrap_or_else(|| self.navigation_error(url.as_deref(), &error))),
                _ => Ok(()),
            })
            .await;
        let ready = match settled {
            Ok(ready) => ready,
            Err(error)
                if matches!(
                    error.code,
                    ErrorCode::BlockedUrl | ErrorCode::NavigationFailed
                ) =>
            {
                // Chromium answers a failed navigation just before it shows its error page;
                // that commit belongs to this navigation, not to the next one's wait.
                if !error.message.contains("ERR_ABORTED") {
                    self.await_commit_after(commits_before).await;
                }
                return Err(error);
            }
            Err(error) => return Err(error),
        };
        let (status, mime, error_page) = {
            let mut events = lock(&self.events);
            if let Some(refusal) = events.blocked.take() {
                return Err(refusal);
            }
            (
                events.document_status,
                events.document_mime.clone(),
                events.unreachable_url.is_some(),
            )
        };
        if error_page {
            return Err(self.error_page_error(url.as_deref(), failure).await);
        }
        Ok(Arrival {
            status,
            ready,
            mime,
            dialogs: self.take_dialogs(),
        })
    }

    /// The error of a navigation that ended on Chromium's error page: its text arrives with the
    /// navigation's answer, just after the error page.
    async fn error_page_error(
        &self,
        url: Option<&str>,
        failure: Option<oneshot::Receiver<Option<String>>>,
    ) -> ToolError {
        let error = match failure {
            Some(rx) => tokio::time::timeout(ERROR_TEXT_WAIT, rx)
                .await
                .ok()
                .and_then(Result::ok)
                .flatten(),
            None => None,
        };
        self.navigation_error(
            url,
            error.as_deref().unwrap_or("the page could not be loaded"),
        )
    }

    /// The error of a failed navigation to `url`. When Chromium only saw its proxy connection
    /// fail, or a connection end without an answer (an upstream proxy refusing plain HTTP), the
    /// egress lane knows why: the policy (`BLOCKED_URL`), DNS, the connection or the proxy.
    fn navigation_error(&self, url: Option<&str>, error: &str) -> ToolError {
        let through_proxy = [
            "SOCKS",
            "PROXY",
            "TUNNEL",
            "EMPTY_RESPONSE",
            "CONNECTION_CLOSED",
        ]
        .iter()
        .any(|name| error.contains(name));
        let known = url
            .filter(|_| through_proxy)
            .and_then(|url| url::Url::parse(url).ok())
            .and_then(|url| {
                let (host, port) = (url.host_str()?.to_string(), url.port_or_known_default()?);
                let failure = self.lane.as_ref()?.failure(&host, port)?;
                Some(failure.navigation_error(&format!("{host}:{port}")))
            });
        match known {
            Some(Ok(refusal)) => refusal,
            Some(Err(network)) => navigation_failed(&network),
            None => navigation_failed(error),
        }
    }

    /// Waits (briefly) until the main frame has committed a document after `commits_before`.
    async fn await_commit_after(&self, commits_before: u64) {
        let deadline = Instant::now() + ERROR_PAGE_WAIT;
        while self.main_commits() <= commits_before && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(super::settle::SETTLE_POLL_MS)).await;
        }
    }

    /// Issues the navigation. For URLs the returned channel later carries Chromium's error
    /// text if the navigation failed (DNS, refused connection, …).
    async fn start_navigation(
        &self,
        destination: Destination,
    ) -> ToolResult<Option<oneshot::Receiver<Option<String>>>> {
        match destination {
            Destination::Url(url) => {
                if lock(&self.events).main_loading {
                    // The previous document is still loading: end its requests now rather
                    // than at the new document's commit, so they hold no connection it needs.
                    // Best effort: an error page, for one, has nothing to stop.
                    let stop = self.page.execute(StopLoadingParams::default());
                    let _ = self.cdp("stopping the page", stop).await;
                }
                let (tx, rx) = oneshot::channel();
                let target = self.frames.navigation_target();
                tokio::spawn(async move {
                    // Answers when the navigation commits or fails (through chromiumoxide: when
                    // the page loads); only its error text matters here.
                    let error = match target.send(NavigateParams::new(url)).await {
                        Ok(response) => response.error_text,
                        Err(_) => None,
                    };
                    let _ = tx.send(error);
                });
                Ok(Some(rx))
            }
            Destination::Reload => {
                self.cdp("reloading", self.page.execute(ReloadParams::default()))
                    .await?;
                Ok(None)
            }
            Destination::Back | Destination::Forward => {
                let step: i64 = if matches!(destination, Destination::Back) {
                    -1
                } else {
                    1
                };
                let history = self
                    .cdp(
                        "reading the history",
                        self.page.execute(GetNavigationHistoryParams::default()),
                    )
                    .await?;
                let index = history.result.current_index + step;
                let entry = usize::try_from(index)
                    .ok()
                    .and_then(|i| history.result.entries.get(i))
                    .ok_or_else(|| {
                        let which = if step < 0 { "back" } else { "forward" };
                        ToolError::new(
                            ErrorCode::InvalidArgument,
                            format!("there is no page to go {which} to in this tab"),
                        )
                        .with_hint("open a URL with mode=url instead")
                    })?;
                self.cdp(
                    "moving in history",
                    self.page
                        .execute(NavigateToHistoryEntryParams::new(entry.id)),
                )
                .await?;
                Ok(None)
            }
        }
    }
}

fn navigation_failed(error: &str) -> ToolError {
    let hint = match error {
        e if e.contains("CONNECTION_REFUSED") => {
            "nothing listens at that address; check host and port"
        }
        e if e.contains("NAME_NOT_RESOLVED") => {
            "the host name does not resolve; check the spelling"
        }
        e if e.contains("ABORTED") => {
            "the server answered without a page (a download or an empty response)"
        }
        e if e.contains("CERT") => "the site's TLS certificate is not valid",
        _ => "check the URL; the site may be down or unreachable",
    };
    ToolError::new(
        ErrorCode::NavigationFailed,
        format!("navigation failed: {error}"),
    )
    .with_hint(hint)
}
