//! Taking a session's command lock with its browser context ready: the context (its egress
//! lane, downloads, identity) made again for each new browser generation.

use super::*;

impl BrowserService {
    pub(super) async fn take(
        &self,
        session: Arc<Session>,
        deadline: Instant,
    ) -> ToolResult<SessionGuard> {
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
    pub(super) fn lost_with_its_browser(
        &self,
        session: &Arc<Session>,
        error: ToolError,
    ) -> ToolError {
        let Some(address) = self.pool.endpoint_address(session.endpoint) else {
            return error;
        };
        let id = session.id();
        let mut sessions = self.sessions.locked();
        if sessions.get(&id).is_some_and(|s| Arc::ptr_eq(s, session)) {
            sessions.remove(&id);
        }
        let hint = if session.name.is_private() {
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
                session.name.as_str(),
                error.message
            ),
        )
        .with_hint(hint)
    }

    pub(super) fn guard(
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

    /// Where a session stages inline uploads: `<data dir>/uploads/<pid>/<session>-<serial>/`,
    /// its own whatever its name, and this process's own (another webpilot on the same data dir
    /// cleans only the folders of processes that are gone).
    pub(super) fn uploads_of(&self, session: &Session) -> PathBuf {
        self.config
            .data_dir
            .join("uploads")
            .join(std::process::id().to_string())
            .join(format!("{}-{}", session.name.folder(), session.serial))
    }

    /// Lets a session's pages download into `downloads/<session>/` of its tenant's data dir and
    /// report it; a scratch session's renders download nothing.
    pub(super) async fn set_downloads(
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
