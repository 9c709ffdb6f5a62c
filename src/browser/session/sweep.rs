//! Housekeeping: idle sessions reaped, stray pages adopted or closed, unowned contexts
//! disposed, an unused browser recycled, and shutdown.

use super::*;

impl BrowserService {
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
    pub(super) async fn recycle_when_unused(&self, after: Duration) {
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
    pub(super) fn unused(&self) -> bool {
        let scratch = self.scratch.locked();
        let live_scratch = scratch.iter().filter(|s| s.strong_count() > 0).count();
        self.session_count() == 0 && live_scratch <= self.warm.ready()
    }

    /// Runs `chore` every `period` on the service, while it lives and `stop` is not cancelled.
    pub(super) fn every<F, Fut>(
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
    pub(super) async fn sweep(&self) {
        for browser in self.pool.existing_all().await {
            self.sweep_browser(&browser).await;
        }
    }

    pub(super) async fn sweep_browser(&self, browser: &Arc<BrowserHandle>) {
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
    pub(super) fn owners_by_context(&self) -> HashMap<BrowserContextId, Arc<Session>> {
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
    pub(super) async fn sweep_session(
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

    pub(super) async fn close_stray(&self, browser: &BrowserHandle, target: TargetId) {
        let close = browser.browser.execute(CloseTargetParams::new(target));
        if browser.cdp("closing a stray page", close).await.is_ok() {
            self.strays_closed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Disposes the contexts that no session owned in this sweep nor in the previous one (a
    /// context whose creation answered after its call had given up).
    pub(super) async fn dispose_unowned_contexts(
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

    pub(super) async fn reap_idle(&self, idle: Duration) {
        let expired: Vec<Arc<Session>> = {
            let mut sessions = self.sessions.locked();
            let names: Vec<SessionId> = sessions
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
