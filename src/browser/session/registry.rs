//! The live sessions by tenant and name: finding, creating (one admission path for named,
//! identity-bearing and private sessions), listing, closing; scratch sessions for renders; a
//! person's control.

use super::*;

impl BrowserService {
    /// The live side of session `id`, if it is live.
    pub fn live(&self, id: &SessionId) -> Option<Arc<LiveHub>> {
        self.lookup(id).map(|session| session.live.clone())
    }

    /// A person's control of live session `id`: its command lock, taken as a call takes it
    /// (waiting for the call in progress until `deadline`).
    pub async fn take_control(&self, id: &SessionId, deadline: Instant) -> ToolResult<Control> {
        let session = self.lookup(id).ok_or_else(|| {
            ToolError::new(
                ErrorCode::NoSuchSession,
                format!("no live session {:?}", id.name.as_str()),
            )
        })?;
        let hub = session.live.clone();
        if hub.controlled() {
            return Err(crate::browser::live::control_taken());
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
        name: &SessionName,
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
        name: &SessionName,
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
    pub(super) fn warm(&self) -> &warm::WarmSessions {
        &self.warm
    }

    /// Warm sessions ready for renders now.
    pub fn warm_sessions(&self) -> usize {
        self.warm.ready()
    }

    /// `scratch_session`, made now.
    pub(in crate::browser) async fn cold_scratch_session(
        &self,
        tenant: &Arc<Tenant>,
        purpose: &str,
        deadline: Instant,
    ) -> ToolResult<SessionGuard> {
        let number = self.scratch_count.fetch_add(1, Ordering::Relaxed) + 1;
        let name = SessionName::internal(format_args!("{purpose}-{number}"));
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

    async fn lookup_or_create(
        &self,
        tenant: &Arc<Tenant>,
        name: &SessionName,
    ) -> ToolResult<Arc<Session>> {
        let id = SessionId::new(tenant.name().clone(), name.clone());
        if let Some(session) = self.lookup(&id) {
            return Ok(session);
        }
        if name.is_private() {
            return Err(no_such_private_session(name));
        }
        self.admit(tenant, id, SessionExtras::default(), |existing| {
            Ok(existing.clone())
        })
        .await
    }

    /// Creates session `name` of `tenant` with `identity`, or confirms that the live one has
    /// it: an identity is given when a session is created, never changed under its pages.
    pub async fn create_with_identity(
        &self,
        tenant: &Arc<Tenant>,
        name: &SessionName,
        identity: Identity,
    ) -> ToolResult<()> {
        identity.check()?;
        let id = SessionId::new(tenant.name().clone(), name.clone());
        if name.is_private() && self.lookup(&id).is_none() {
            return Err(no_such_private_session(name));
        }
        let extras = SessionExtras {
            identity: identity.clone(),
            ..SessionExtras::default()
        };
        self.admit(tenant, id, extras, |existing| {
            if existing.identity == identity {
                return Ok(existing.clone());
            }
            Err(ToolError::invalid(format!(
                "field `session_options`: session {:?} already exists with another identity",
                name.as_str()
            ))
            .with_hint("pass session_options on a session's first call, or use a new session name"))
        })
        .await?;
        Ok(())
    }

    /// A new private session of `tenant`: an unguessable name (`s-` and 128 random bits),
    /// which only its creator knows; `idle` overrides the idle limit. Its browser context opens
    /// on first use.
    pub async fn create_private(
        &self,
        tenant: &Arc<Tenant>,
        extras: SessionExtras,
    ) -> ToolResult<SessionName> {
        extras.identity.check()?;
        let id = SessionId::new(tenant.name().clone(), SessionName::new_private());
        let session = self
            .admit(tenant, id, extras, |_| {
                Err(ToolError::internal("a new private name was already taken"))
            })
            .await?;
        Ok(session.name.clone())
    }

    /// The one way a named session comes to be: `id`'s live session goes to `existing` (which
    /// accepts it or says why not); else, with room for one more (the service's and the
    /// tenant's maximum, the browser's memory), a new session is registered under `id`.
    async fn admit(
        &self,
        tenant: &Arc<Tenant>,
        id: SessionId,
        extras: SessionExtras,
        existing: impl FnOnce(&Arc<Session>) -> ToolResult<Arc<Session>>,
    ) -> ToolResult<Arc<Session>> {
        let memory = self.memory_room().await;
        let mut sessions = self.sessions.locked();
        if let Some(session) = sessions.get(&id) {
            return existing(session);
        }
        self.room_for_one(&sessions, tenant)?;
        memory?;
        let place = self.place(&sessions)?;
        let session = Session::with(tenant.clone(), id.name.clone(), false, place, extras);
        sessions.insert(id, session.clone());
        Ok(session)
    }

    pub(super) fn lookup(&self, id: &SessionId) -> Option<Arc<Session>> {
        self.sessions.locked().get(id).cloned()
    }

    /// `LIMIT` when the browser's memory is over `browser_max_pss_mb`: a new session would
    /// only push it further.
    pub(super) async fn memory_room(&self) -> ToolResult<()> {
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

    /// `tenant`'s live sessions, by name.
    pub fn sessions(&self, tenant: &TenantName) -> Vec<SessionSummary> {
        let sessions = self.sessions.locked();
        let mut summaries: Vec<SessionSummary> = sessions
            .iter()
            .filter(|(id, _)| &id.tenant == tenant)
            .map(|(_, s)| SessionSummary {
                session: s.name.to_string(),
                label: s.label.clone(),
                tabs: s.tab_count.load(Ordering::Relaxed),
                idle_secs: s.idle_for().as_secs(),
                busy: s.state.try_lock().is_err(),
                identity: s.identity.clone(),
                browser: self.pool.endpoint_address(s.endpoint).map(str::to_string),
                questions: s.live.confirmations().open(),
            })
            .collect();
        summaries.sort_by(|a, b| a.session.cmp(&b.session));
        summaries
    }

    /// Refuses a new session past the service's maximum or past `tenant`'s own.
    pub(super) fn room_for_one(
        &self,
        sessions: &HashMap<SessionId, Arc<Session>>,
        tenant: &Tenant,
    ) -> ToolResult<()> {
        if let Some(limit) = tenant.max_sessions() {
            let own = sessions
                .keys()
                .filter(|id| &id.tenant == tenant.name())
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
    pub async fn close_session(&self, id: &SessionId) -> bool {
        let removed = self.sessions.locked().remove(id);
        match removed {
            Some(session) => {
                let mut state = session.state.lock().await;
                state.dispose().await;
                true
            }
            None => false,
        }
    }
}

/// The error for a private session's name that names no live session of the caller's. It says
/// the same whether the session never existed, is gone or is another tenant's.
fn no_such_private_session(name: &SessionName) -> ToolError {
    ToolError::new(
        ErrorCode::NoSuchSession,
        format!("no live private session {:?}", name.as_str()),
    )
    .with_hint(
        "create a private session with POST /api/sessions; a reaped session's cookies are \
         gone — export a profile to keep a login",
    )
}
