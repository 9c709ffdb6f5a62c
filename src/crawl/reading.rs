//! Reading one claimed item of a task: robots.txt and the crawl delay first, the host's and the
//! instance's fetch slots, the page (asking whether it changed since the tenant's last read),
//! a site crawl's growth, the lease renewed meanwhile; then its outcome recorded once and
//! announced.

use super::*;

/// One URL of a task.
pub(super) struct Item<'a> {
    pub(super) id: &'a TaskId,
    pub(super) index: usize,
    pub(super) url: String,
    /// Link hops from a seed.
    pub(super) depth: u32,
    /// A site crawl's scope, which the page's links are judged by.
    pub(super) frontier: Option<&'a Frontier>,
    /// One of this instance's fetches in flight (`global_parallel`).
    pub(super) capacity: Option<tokio::sync::OwnedSemaphorePermit>,
    /// The task's webhook, when it asked for an event per URL.
    pub(super) page_hook: Option<&'a str>,
}

impl Crawler {
    /// Reads a claimed item, renewing its lease meanwhile, and records its outcome.
    pub(super) async fn fetch(
        &self,
        tenant: &Arc<Tenant>,
        mut item: Item<'_>,
        options: PageOptions,
    ) {
        let capacity = item.capacity.take();
        let read = self.read(tenant, &item, options, capacity);
        let Some(outcome) = self.renewing(item.id, item.index, read).await else {
            return;
        };
        let outcome = outcome.unwrap_or_else(|rule| {
            ItemOutcome::Skipped(Skip {
                reason: SkipReason::Robots,
                rule: Some(rule.message),
                title: None,
            })
        });
        self.record(tenant, &item, outcome).await;
    }

    /// What became of an item: read, failed, or (in a site crawl) a duplicate; Err is the
    /// robots.txt rule that keeps it from being fetched.
    async fn read(
        &self,
        tenant: &Arc<Tenant>,
        item: &Item<'_>,
        options: PageOptions,
        capacity: Option<tokio::sync::OwnedSemaphorePermit>,
    ) -> ToolResult<ItemOutcome> {
        let url = &item.url;
        let host = self.host_limit(url);
        let parsed = url::Url::parse(url).ok();
        let delay = self.robots_allow(tenant, item.id, parsed.as_ref()).await?;
        let host = host.acquire_owned().await.ok();
        if let (Some(delay), Some(parsed)) = (delay, &parsed) {
            self.robots.pace(&host_key(parsed), delay).await;
        }
        // A render counts against the render limit, not against these fetch limits.
        let release = move || drop((host, capacity));
        let previous = self.last_read(tenant, url, &options).await;
        let page = self
            .pages
            .open_since(tenant, url, &options, None, previous, release)
            .await;
        Ok(match page {
            Ok(page) if page.status.is_some_and(|status| status >= 400) => ItemOutcome::Failed(
                ToolError::new(
                    ErrorCode::Upstream,
                    format!("{url} answered HTTP {}", page.status.unwrap_or_default()),
                )
                .with_hint("check the URL"),
            ),
            Ok(page) => match item.frontier {
                Some(frontier) => self.discovered(tenant, item, frontier, page).await,
                None => ItemOutcome::Read(Box::new(page)),
            },
            Err(error) => ItemOutcome::Failed(error),
        })
    }

    /// Records an item's outcome once and announces it, in order (to the task's webhook too,
    /// when it asked for page events).
    async fn record(&self, tenant: &Arc<Tenant>, item: &Item<'_>, outcome: ItemOutcome) {
        let (id, index) = (item.id, item.index);
        let mut event = CrawlEvent::Progress {
            task_id: id.clone(),
            index,
            url: item.url.clone(),
            ok: matches!(outcome, ItemOutcome::Read(_)),
            progress: 0,
            total: 0,
            error: outcome.error().cloned(),
            skipped: match &outcome {
                ItemOutcome::Skipped(skip) => Some(skip.reason),
                _ => None,
            },
        };
        let announcement = serde_json::to_string(&event).unwrap_or_default();
        let shared = self.store.shared();
        let _order = if shared {
            None
        } else {
            Some(self.finishing.lock().await)
        };
        match self
            .store
            .finish(id, index, &outcome, &self.lease, &announcement)
            .await
        {
            Ok(Some(recorded)) => {
                if let CrawlEvent::Progress {
                    progress, total, ..
                } = &mut event
                {
                    *progress = recorded.progress;
                    *total = recorded.total;
                }
                if let Some(hook) = item.page_hook {
                    self.webhooks
                        .send((tenant, id), hook, "page", &event, false);
                }
                // A shared store told every instance (this one too).
                if !shared {
                    self.broadcast(event);
                }
            }
            Ok(None) => {}
            Err(error) => tracing::error!(task = %id, %error, "cannot record a crawl result"),
        }
    }

    /// The tenant's latest read of `url` with validators, which a re-crawl asks the site about
    /// (`If-None-Match`, `If-Modified-Since`) instead of reading it again; none for browser
    /// renders, or when the store cannot say.
    async fn last_read(&self, tenant: &Tenant, url: &str, options: &PageOptions) -> Option<Page> {
        if options.mode == crate::pages::FetchMode::Browser {
            return None;
        }
        let previous = self.store.last_read(tenant.name(), url).await;
        // Read the same way, or its content is not what this task asked for.
        previous.ok().flatten().filter(|page| {
            page.extract == options.extract
                && page.format == options.format
                && page.next_cursor.is_none()
        })
    }

    /// Whether the site's robots.txt lets task `id` read `url` (when robots.txt are obeyed):
    /// Ok with the host's crawl delay, or the error that reports the URL as skipped.
    pub(super) async fn robots_allow(
        &self,
        tenant: &Arc<Tenant>,
        id: &TaskId,
        url: Option<&url::Url>,
    ) -> ToolResult<Option<Duration>> {
        let obeyed = self.config.robots == RobotsRule::Obey || tenant.obeys_robots();
        let Some(parsed) = url.filter(|_| obeyed) else {
            return Ok(None);
        };
        if !matches!(parsed.scheme(), "http" | "https") {
            return Ok(None);
        }
        self.robots.check(tenant, id, parsed).await
    }

    /// Runs `work` while renewing the item's lease; None when the lease was lost to another
    /// instance (which reads the item again), so the outcome must not be recorded.
    async fn renewing<T>(
        &self,
        id: &TaskId,
        index: usize,
        work: impl Future<Output = T>,
    ) -> Option<T> {
        let mut work = std::pin::pin!(work);
        let mut renewal = tokio::time::interval(self.lease.length / 3);
        renewal.tick().await;
        loop {
            tokio::select! {
                outcome = &mut work => return Some(outcome),
                _ = renewal.tick() => match self.store.renew(id, index, &self.lease).await {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::warn!(task = %id, index, "crawl item's lease lost; left to its new holder");
                        return None;
                    }
                    // The lease may still hold: keep reading, renew at the next tick.
                    Err(error) => tracing::warn!(task = %id, index, %error, "cannot renew a crawl lease"),
                },
            }
        }
    }

    /// The semaphore of `url`'s host (`host:port`), shared by all tasks of this instance.
    fn host_limit(&self, url: &str) -> Arc<Semaphore> {
        let host = url::Url::parse(url)
            .map(|u| host_key(&u))
            .unwrap_or_default();
        let mut hosts = self.hosts.locked();
        hosts
            .entry(host)
            .or_insert_with(|| Arc::new(Semaphore::new(self.config.per_host)))
            .clone()
    }
}
