//! Batch crawling: a task is a list of URLs read as `open_web_page` reads them (through
//! `pages`, with the task's `PageOptions`) with bounded parallelism (per task, per host,
//! overall), its results kept in a store (SQLite, or PostgreSQL shared by several instances,
//! each claiming items under leases) so a restart resumes it, and its progress broadcast as one
//! event per finished URL, then `done`, to subscribers on every instance.

mod model;
mod reports;
mod robots;
mod store;
mod webhook;

pub use model::*;

use crate::db::Storage;
use crate::sync::Locked;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::{Notify, Semaphore, broadcast};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::{CrawlConfig, RobotsRule};
use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::pages::{Page, PageOptions, Pages};
use crate::tenancy::{Tenant, Tenants};
use robots::RobotsBook;
use store::{Claim, CrawlStore, ItemRow, Lease, PostgresStore, SqliteStore, TaskRow};
pub use webhook::SIGNATURE_HEADER as WEBHOOK_SIGNATURE_HEADER;
use webhook::Webhooks;

/// Events buffered per subscriber before a slow one starts missing them.
const EVENT_BUFFER: usize = 1024;

pub struct Crawler {
    store: Arc<dyn CrawlStore>,
    pages: Arc<Pages>,
    /// Whose tasks they are: a resumed task runs for its tenant, under its policy.
    tenants: Arc<Tenants>,
    config: CrawlConfig,
    /// This instance's claims.
    lease: Lease,
    global: Arc<Semaphore>,
    hosts: Mutex<HashMap<String, Arc<Semaphore>>>,
    /// Sites' robots.txt, when the configuration obeys them.
    robots: Option<RobotsBook>,
    webhooks: Webhooks,
    channels: Mutex<HashMap<String, broadcast::Sender<CrawlEvent>>>,
    /// Tasks this instance is working on, each with what wakes it when an item of the task
    /// finished anywhere (a host slot may be free).
    runners: Mutex<HashMap<String, Arc<Notify>>>,
    /// Serialises "record an outcome, announce it" so progress numbers go out in order.
    finishing: tokio::sync::Mutex<()>,
    next_id: AtomicU64,
    /// The service's shutdown: once cancelled, no item starts and none in flight is recorded.
    stop: CancellationToken,
    /// The service's background tasks, which shutdown waits for.
    tasks: TaskTracker,
}

/// How often a task whose pending items are all held elsewhere looks again.
const BUSY_POLL: Duration = Duration::from_millis(100);
/// How long an instance with nothing of a task in flight lets finishes elsewhere gather before
/// it claims again.
const IDLE_CLAIM_DELAY: Duration = Duration::from_millis(25);
/// How often a shared store is searched for tasks no notice announced.
const RESCAN_EVERY: Duration = Duration::from_secs(5);

/// What the shared store's channel carries: a new task, or an event.
#[derive(Deserialize)]
#[serde(untagged)]
enum Notice {
    Created { created: String },
    Event(CrawlEvent),
}

impl Crawler {
    /// Opens the task store (`database` when set, else SQLite at `path`) and resumes tasks left
    /// unfinished; with a shared store, also takes part in every task another instance starts.
    #[allow(clippy::too_many_arguments)]
    pub async fn open(
        storage: &Storage,
        owner: String,
        config: CrawlConfig,
        pages: Arc<Pages>,
        tenants: Arc<Tenants>,
        (web, webhook_secret): (Arc<crate::web::WebService>, Vec<u8>),
        stop: CancellationToken,
        tasks: TaskTracker,
    ) -> anyhow::Result<Arc<Self>> {
        let (store, notices): (Arc<dyn CrawlStore>, _) = match storage {
            Storage::Shared(database) => {
                // Listening before looking for tasks: none starts unseen in between.
                let notices = database.listen(store::CHANNEL, stop.clone());
                (
                    Arc::new(PostgresStore::open(database.clone()).await?),
                    Some(notices),
                )
            }
            Storage::Embedded(sqlite) => (Arc::new(SqliteStore::open(sqlite.clone())?), None),
        };
        let robots =
            (config.robots == RobotsRule::Obey).then(|| RobotsBook::new(pages.user_agent()));
        let webhooks = Webhooks::new(
            webhook_secret,
            config.webhook_allow.clone(),
            web,
            stop.clone(),
            tasks.clone(),
        );
        let crawler = Arc::new(Self {
            store,
            webhooks,
            pages,
            tenants,
            lease: Lease {
                owner,
                length: Duration::from_secs(config.lease_secs),
            },
            global: Arc::new(Semaphore::new(config.global_parallel)),
            robots,
            config,
            hosts: Mutex::new(HashMap::new()),
            channels: Mutex::new(HashMap::new()),
            runners: Mutex::new(HashMap::new()),
            finishing: tokio::sync::Mutex::new(()),
            next_id: AtomicU64::new(0),
            stop,
            tasks,
        });
        crawler.resume().await?;
        if let Some(notices) = notices {
            crawler.follow(notices);
        }
        Ok(crawler)
    }

    /// Works on every unfinished task this instance is not already working on.
    async fn resume(self: &Arc<Self>) -> anyhow::Result<()> {
        for id in self.store.unfinished().await? {
            self.spawn(id);
        }
        Ok(())
    }

    /// Follows the shared store's notices: tasks created elsewhere, events of every instance;
    /// and looks for unfinished tasks now and then, in case a notice was lost.
    fn follow(self: &Arc<Self>, mut notices: tokio::sync::mpsc::Receiver<String>) {
        let crawler = self.clone();
        self.tasks.spawn(async move {
            let mut rescan = tokio::time::interval(RESCAN_EVERY);
            rescan.tick().await;
            loop {
                tokio::select! {
                    notice = notices.recv() => match notice.as_deref().map(serde_json::from_str) {
                        Some(Ok(Notice::Created { created })) => crawler.spawn(created),
                        Some(Ok(Notice::Event(event))) => crawler.broadcast(event),
                        Some(Err(error)) => tracing::warn!(%error, "unreadable crawl notice"),
                        None => return,
                    },
                    _ = rescan.tick() => {
                        if let Err(error) = crawler.resume().await {
                            tracing::warn!(%error, "cannot look for crawl tasks");
                        }
                    }
                    () = crawler.stopped() => return,
                }
            }
        });
    }

    /// Checks and stores a task of `tenant`, starts it, and returns its id.
    pub async fn submit(
        self: &Arc<Self>,
        tenant: &Tenant,
        urls: Vec<String>,
        options: TaskOptions,
    ) -> ToolResult<String> {
        if urls.is_empty() {
            return Err(ToolError::invalid(
                "field `urls` must hold at least one URL",
            ));
        }
        let max_urls = tenant
            .crawl_max_urls()
            .map_or(self.config.max_urls, |own| own.min(self.config.max_urls));
        if urls.len() > max_urls {
            return Err(ToolError::new(
                ErrorCode::Limit,
                format!(
                    "{} URLs is more than the configured maximum of {max_urls}",
                    urls.len(),
                ),
            )
            .with_hint("split the URLs into several tasks"));
        }
        let max_parallel = tenant
            .crawl_parallel()
            .map_or(self.config.max_parallel, |own| {
                own.min(self.config.max_parallel)
            });
        if !(1..=max_parallel).contains(&options.parallel) {
            return Err(ToolError::invalid(format!(
                "field `parallel` must be from 1 to {max_parallel}"
            )));
        }
        let mut items = Vec::with_capacity(urls.len());
        for (index, url) in urls.into_iter().enumerate() {
            let Some(host) = url::Url::parse(&url)
                .ok()
                .filter(|u| matches!(u.scheme(), "http" | "https"))
                .map(|u| host_key(&u))
            else {
                return Err(ToolError::invalid(format!(
                    "field `urls[{index}]` is not an http(s) URL: {url:?}"
                )));
            };
            items.push((url, host));
        }
        crate::pages::paging::budget(options.page.max_tokens)?;
        if let Some(url) = &options.webhook {
            self.webhooks.check(tenant, url)?;
        }
        let now = now_ms();
        let task = TaskRow {
            id: format!(
                "crawl-{now:x}-{}-{}",
                self.lease.owner,
                self.next_id.fetch_add(1, Ordering::Relaxed)
            ),
            tenant: tenant.name().clone(),
            created_ms: now as i64,
            status: TaskStatus::Pending,
            total: items.len(),
            options,
        };
        self.store
            .create(&task, &items, self.config.per_host)
            .await
            .map_err(database_error)?;
        if let (Some(url), Some(owner)) = (&task.options.webhook, self.tenants.named(&task.tenant))
        {
            let event = json!({ "event": "started", "task_id": task.id, "total": task.total });
            self.webhooks.send(&owner, &task.id, url, event, false);
        }
        self.spawn(task.id.clone());
        Ok(task.id)
    }

    /// The secret task `id`'s webhook events are signed with (hex), for its caller to check.
    pub fn webhook_secret(&self, id: &str) -> String {
        self.webhooks.task_secret(id)
    }

    /// Resolves once the service shuts down: every task stops where it is, items in flight
    /// stay pending (not failed), so the next start reads them again.
    async fn stopped(&self) {
        self.stop.cancelled().await;
    }

    /// Starts working on task `id` unless this instance already is.
    fn spawn(self: &Arc<Self>, id: String) {
        let mut runners = self.runners.locked();
        if self.stop.is_cancelled() || runners.contains_key(&id) {
            return;
        }
        let finished_elsewhere = Arc::new(Notify::new());
        runners.insert(id.clone(), finished_elsewhere.clone());
        let crawler = self.clone();
        self.tasks.spawn(async move {
            if let Err(error) = crawler.run(&id, &finished_elsewhere).await {
                tracing::error!(task = %id, %error, "crawl task stopped");
            }
            let mut runners = crawler.runners.locked();
            runners.remove(&id);
        });
    }

    /// Claims and reads the task's items until none is pending, then concludes it.
    async fn run(self: &Arc<Self>, id: &str, finished_elsewhere: &Notify) -> anyhow::Result<()> {
        let Some(task) = self.store.task(id).await? else {
            return Ok(());
        };
        if task.status.is_finished() {
            return Ok(());
        }
        let Some(tenant) = self.tenants.named(&task.tenant) else {
            // Its key is gone from the keys file: nobody may run it, nor see it.
            tracing::warn!(task = %id, tenant = %task.tenant, "crawl task of an unknown tenant left pending");
            return Ok(());
        };
        self.store.set_status(id, TaskStatus::Running).await?;
        let per_task = Arc::new(Semaphore::new(task.options.parallel.max(1)));
        let mut running = JoinSet::new();
        loop {
            let permit = tokio::select! {
                permit = per_task.clone().acquire_owned() => permit?,
                () = self.stopped() => break,
            };
            // Reaped as they end: a wait for "the next item of ours to finish" below must not be
            // answered by one that finished long ago (each such answer is a claim for nothing).
            while running.try_join_next().is_some() {}
            match self.store.claim(id, &self.lease).await? {
                Claim::Item { index, url } => {
                    let (crawler, tenant) = (self.clone(), tenant.clone());
                    let (id, options) = (id.to_string(), task.options.page.clone());
                    running.spawn(async move {
                        let item = Item {
                            id: &id,
                            index,
                            url,
                            total: task.total,
                        };
                        tokio::select! {
                            () = crawler.fetch(&tenant, item, options) => {}
                            // Left pending: read again by the next start or another instance.
                            () = crawler.stopped() => {}
                        }
                        drop(permit);
                    });
                }
                Claim::Empty => break,
                Claim::Busy => {
                    drop(permit);
                    if !self.room(&mut running, finished_elsewhere).await {
                        break;
                    }
                }
            }
        }
        while running.join_next().await.is_some() {}
        if self.stop.is_cancelled() {
            // Still running in the store: pending items are read again, sooner without leases.
            return self.store.release(id, &self.lease).await;
        }
        self.conclude(&task).await
    }

    /// Waits until a claim may find a slot: with items of its own in flight, the next to finish
    /// frees one here; without, an item finishing on any instance may have freed one; else a
    /// while passes. False when the service stops.
    async fn room(&self, running: &mut JoinSet<()>, finished_elsewhere: &Notify) -> bool {
        tokio::select! {
            Some(_) = running.join_next(), if !running.is_empty() => true,
            () = finished_elsewhere.notified(), if running.is_empty() => {
                // The instance that finished usually takes the slot back at once: claiming on
                // every finish would mostly find nothing, so finishes in a short while are
                // answered with one claim.
                tokio::time::sleep(IDLE_CLAIM_DELAY).await;
                true
            }
            () = tokio::time::sleep(BUSY_POLL) => true,
            () = self.stopped() => false,
        }
    }

    /// Sets a task whose items all finished to its final status and announces it, once across
    /// all instances.
    async fn conclude(&self, task: &TaskRow) -> anyhow::Result<()> {
        let (id, total) = (task.id.as_str(), task.total);
        if let Some(robots) = &self.robots {
            robots.forget(id);
        }
        let (finished, errors) = self.store.counts(id).await?;
        let status = if errors == finished {
            TaskStatus::Failed
        } else {
            TaskStatus::Completed
        };
        if self.store.set_status(id, status).await? {
            if let (Some(url), Some(owner)) =
                (&task.options.webhook, self.tenants.named(&task.tenant))
            {
                let event = json!({ "event": status.as_str(), "task_id": id, "total": total,
                    "progress": finished, "errors": errors });
                self.webhooks.send(&owner, id, url, event, true);
            }
            self.announce(CrawlEvent::Done {
                task_id: id.to_string(),
                status,
                progress: finished,
                total,
                errors,
            })
            .await;
        }
        Ok(())
    }

    /// Reads a claimed item, renewing its lease meanwhile, and records its outcome.
    async fn fetch(&self, tenant: &Arc<Tenant>, item: Item<'_>, options: PageOptions) {
        let Item {
            id,
            index,
            url,
            total,
        } = item;
        let host = self.host_limit(&url);
        let read = async {
            let parsed = url::Url::parse(&url).ok();
            let delay = self.robots_allow(tenant, id, parsed.as_ref()).await?;
            let host = host.acquire_owned().await.ok();
            if let (Some(delay), Some(parsed), Some(robots)) = (delay, &parsed, &self.robots) {
                robots.pace(&host_key(parsed), delay).await;
            }
            let global = self.global.clone().acquire_owned().await.ok();
            // A render counts against the render limit, not against these fetch limits.
            let release = move || drop((host, global));
            let previous = self.last_read(tenant, &url, &options).await;
            self.pages
                .open_since(tenant, &url, &options, None, previous, release)
                .await
        };
        let Some(outcome) = self.renewing(id, index, read).await else {
            return;
        };
        let outcome = outcome.and_then(|page| match page.status {
            Some(status) if status >= 400 => Err(ToolError::new(
                ErrorCode::Upstream,
                format!("{url} answered HTTP {status}"),
            )
            .with_hint("check the URL")),
            _ => Ok(page),
        });
        let mut event = CrawlEvent::Progress {
            task_id: id.to_string(),
            index,
            url,
            ok: outcome.is_ok(),
            progress: 0,
            total,
            error: outcome.as_ref().err().cloned(),
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
            Ok(Some(recorded)) if !shared => {
                if let CrawlEvent::Progress { progress, .. } = &mut event {
                    *progress = recorded.progress;
                }
                self.broadcast(event);
            }
            // The store told every instance (this one too).
            Ok(_) => {}
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
    async fn robots_allow(
        &self,
        tenant: &Arc<Tenant>,
        id: &str,
        url: Option<&url::Url>,
    ) -> ToolResult<Option<Duration>> {
        let (Some(robots), Some(parsed)) = (&self.robots, url) else {
            return Ok(None);
        };
        if !matches!(parsed.scheme(), "http" | "https") {
            return Ok(None);
        }
        robots.check(&self.pages, tenant, id, parsed).await
    }

    /// Runs `work` while renewing the item's lease; None when the lease was lost to another
    /// instance (which reads the item again), so the outcome must not be recorded.
    async fn renewing<T>(
        &self,
        id: &str,
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

    /// Sends an event to its subscribers on every instance.
    async fn announce(&self, event: CrawlEvent) {
        if !self.store.shared() {
            return self.broadcast(event);
        }
        let payload = serde_json::to_string(&event).unwrap_or_default();
        if let Err(error) = self.store.publish(&payload).await {
            tracing::warn!(%error, "cannot publish a crawl event");
        }
    }

    /// Hands an event to this instance's subscribers, and wakes its runner of the task.
    fn broadcast(&self, event: CrawlEvent) {
        let (CrawlEvent::Progress { task_id, .. } | CrawlEvent::Done { task_id, .. }) = &event;
        let id = task_id.clone();
        if let Some(runner) = self.runners.locked().get(&id) {
            runner.notify_one();
        }
        let done = matches!(event, CrawlEvent::Done { .. });
        let mut channels = self.channels.locked();
        if let Some(sender) = channels.get(&id) {
            let _ = sender.send(event);
        }
        // After `done` nothing more comes; subscribers keep their receivers until they read it.
        if done {
            channels.remove(&id);
        }
    }
}

/// One URL of a task.
struct Item<'a> {
    id: &'a str,
    index: usize,
    url: String,
    /// The task's URL count, for progress events.
    total: usize,
}

/// A URL's host and port, the unit of the per-host limit.
fn host_key(url: &url::Url) -> String {
    format!(
        "{}:{}",
        url.host_str().unwrap_or(""),
        url.port_or_known_default().unwrap_or(0)
    )
}

fn database_error(error: anyhow::Error) -> ToolError {
    ToolError::internal(format!("crawl database: {error}"))
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
