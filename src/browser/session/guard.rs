//! Holding a session for one call: its tabs, opening and adopting pages, staged uploads; the
//! session's command lock is released when the guard drops.

use super::*;

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
    pub(in crate::browser) fn release_admission(&mut self) {
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

    pub fn name(&self) -> &SessionName {
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
    pub(super) async fn admitted(&mut self, what: &str) -> ToolResult<()> {
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
    pub(super) async fn create_tab(&mut self, id: String) -> ToolResult<Tab> {
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
    pub(super) async fn target_url(&self, target: &TargetId) -> Option<String> {
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

    pub(super) fn next_tab_id(&mut self) -> String {
        self.state.next_tab_number += 1;
        format!("t{}", self.state.next_tab_number)
    }

    pub(super) fn index_of(&self, id: &str) -> Option<usize> {
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
    pub(super) fn document_guard(&self) -> Arc<DocumentGuard> {
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

    /// Where the session's latest result said it was, replaced by `now`.
    pub fn retell(&mut self, now: Told) -> Option<Told> {
        self.state.told.replace(now)
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
    pub(super) async fn forget_page(&mut self, tab: Tab) {
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
    pub(super) async fn sync_with(&mut self, targets: &[TargetInfo]) -> Vec<String> {
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
pub(in crate::browser) async fn list_pages(browser: &BrowserHandle) -> ToolResult<Vec<TargetInfo>> {
    let list = browser.browser.execute(GetTargetsParams::default());
    let targets = browser.cdp("listing pages", list).await?;
    Ok(targets
        .result
        .target_infos
        .into_iter()
        .filter(|t| t.r#type == "page")
        .collect())
}
