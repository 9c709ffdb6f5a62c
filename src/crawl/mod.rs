//! Batch crawling: a task is a list of URLs read as `open_web_page` reads them (through
//! `pages`, with the task's `PageOptions`) with bounded parallelism (per task, per host,
//! overall), its results kept in a store (SQLite, or PostgreSQL shared by several instances,
//! each claiming items under leases) so a restart resumes it, and its progress broadcast as one
//! event per finished URL, then `done`, to subscribers on every instance.

mod follow;
mod frontier;
mod model;
mod reading;
mod reports;
pub(crate) mod robots;
pub(crate) mod sitemaps;
mod store;
mod webhook;

pub use frontier::{Follow, Found, LinkScope, SkipReason};
pub use model::*;

use crate::db::Storage;
use crate::sync::Locked;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, Semaphore, broadcast};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::{CrawlConfig, RobotsRule};
use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::ids::TaskId;
use crate::pages::{Page, PageOptions, Pages};
use crate::tenancy::{Tenant, Tenants};
use frontier::Frontier;
use reading::Item;
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
    /// Sites' robots.txt: obeyed where the configuration or the task's tenant says so, read for
    /// their sitemaps always.
    robots: RobotsBook,
    webhooks: Webhooks,
    channels: Mutex<HashMap<TaskId, broadcast::Sender<CrawlEvent>>>,
    /// Tasks this instance is working on, each with what wakes it when an item of the task
    /// finished anywhere (a host slot may be free).
    runners: Mutex<HashMap<TaskId, Arc<Notify>>>,
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
    Created { created: TaskId },
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
                let notices = database.listening(store::CHANNEL, stop.clone()).await;
                (
                    Arc::new(PostgresStore::open(database.clone()).await?),
                    Some(notices),
                )
            }
            Storage::Embedded(sqlite) => (Arc::new(SqliteStore::open(sqlite.clone())?), None),
        };
        let robots = RobotsBook::new(pages.user_agent(), web.clone());
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
    ) -> ToolResult<TaskId> {
        self.check_limits(tenant, &urls, &options)?;
        let mut options = options;
        let items = match &options.follow {
            Some(follow) => {
                Frontier::new(follow, &urls)?;
                options.seeds = urls.clone();
                Frontier::seeds(&urls)
            }
            None => Frontier::listed(urls),
        };
        let now = now_ms();
        let task = TaskRow {
            id: TaskId::made(format!(
                "crawl-{now:x}-{}-{}",
                self.lease.owner,
                self.next_id.fetch_add(1, Ordering::Relaxed)
            )),
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
            let started = webhook::Started {
                task_id: &task.id,
                total: task.total,
            };
            self.webhooks
                .send((&owner, &task.id), url, "started", &started, false);
        }
        self.spawn(task.id.clone());
        Ok(task.id)
    }

    /// Whether a task of `tenant` with `urls` and `options` is within the limits: URLs (each
    /// http(s)), parallelism, webhook.
    fn check_limits(
        &self,
        tenant: &Tenant,
        urls: &[String],
        options: &TaskOptions,
    ) -> ToolResult<()> {
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
        for (index, url) in urls.iter().enumerate() {
            if !url::Url::parse(url).is_ok_and(|u| matches!(u.scheme(), "http" | "https")) {
                return Err(ToolError::invalid(format!(
                    "field `urls[{index}]` is not an http(s) URL: {url:?}"
                )));
            }
        }
        crate::pages::paging::budget(options.page.max_tokens)?;
        if let Some(url) = &options.webhook {
            self.webhooks.check(tenant, url)?;
        } else if options.webhook_pages {
            return Err(ToolError::invalid(
                "field `webhook_pages` needs a `webhook`",
            ));
        }
        Ok(())
    }

    /// The secret task `id`'s webhook events are signed with (hex), for its caller to check.
    pub fn webhook_secret(&self, id: &TaskId) -> String {
        self.webhooks.task_secret(id)
    }

    /// Cancels `tenant`'s pending or running task on every instance: URLs not read yet are
    /// skipped as cancelled, pages being read are not recorded, no further page is fetched, and
    /// the task's subscribers and webhook hear `cancelled`. A finished task stays as it is.
    pub async fn cancel(&self, tenant: &Tenant, id: &TaskId) -> ToolResult<TaskSummary> {
        // Another tenant's task is as unknown as one that never was.
        self.owned(tenant, id).await?;
        let cancelled = self.store.cancel(id).await.map_err(database_error)?;
        let task = self.owned(tenant, id).await?;
        let counts = self.store.counts(id).await.map_err(database_error)?;
        let summary = reports::summary_of(task, counts);
        if !cancelled {
            return Err(ToolError::invalid(format!(
                "crawl task {id:?} is already {}",
                summary.status.as_str()
            ))
            .with_hint(
                "only a pending or running task can be cancelled; crawl_status reads its results",
            ));
        }
        self.robots.forget(id);
        let webhook = summary.options.webhook.as_deref();
        let (status, total) = (TaskStatus::Cancelled, summary.total);
        self.ended(id, tenant.name(), webhook, status, total, counts)
            .await;
        Ok(summary)
    }

    /// Tells a task's webhook and its subscribers on every instance how it ended: `status`,
    /// with its `total` and `counts`.
    async fn ended(
        &self,
        id: &TaskId,
        tenant: &crate::ids::TenantName,
        webhook: Option<&str>,
        status: TaskStatus,
        total: usize,
        counts: store::Counts,
    ) {
        if let (Some(url), Some(owner)) = (webhook, self.tenants.named(tenant)) {
            let ended = webhook::Ended {
                task_id: id,
                total,
                progress: counts.finished,
                errors: counts.failed,
                skipped: counts.skipped,
            };
            self.webhooks
                .send((&owner, id), url, status.as_str(), &ended, true);
        }
        self.announce(CrawlEvent::Done {
            task_id: id.clone(),
            status,
            progress: counts.finished,
            total,
            errors: counts.failed,
            skipped: counts.skipped,
        })
        .await;
    }

    /// Resolves once the service shuts down: every task stops where it is, items in flight
    /// stay pending (not failed), so the next start reads them again.
    async fn stopped(&self) {
        self.stop.cancelled().await;
    }

    /// Starts working on task `id` unless this instance already is.
    fn spawn(self: &Arc<Self>, id: TaskId) {
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
    async fn run(self: &Arc<Self>, id: &TaskId, finished_elsewhere: &Notify) -> anyhow::Result<()> {
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
        let frontier = match &task.options.follow {
            Some(follow) => Some(Arc::new(Frontier::new(follow, &task.options.seeds)?)),
            None => None,
        };
        let options = item_options(&task.options, frontier.as_deref());
        let page_hook: Option<Arc<str>> = (task.options.webhook_pages)
            .then(|| task.options.webhook.as_deref().map(Arc::from))
            .flatten();
        let per_task = Arc::new(Semaphore::new(task.options.parallel.max(1)));
        let mut running = JoinSet::new();
        loop {
            let permit = tokio::select! {
                permit = per_task.clone().acquire_owned() => permit?,
                () = self.stopped() => break,
            };
            // This instance's capacity before a claim: an item claimed is an item this instance
            // can start now, and a host slot it holds is one it uses (the others of a cluster
            // claim the rest).
            let capacity = tokio::select! {
                capacity = self.global.clone().acquire_owned() => capacity?,
                () = self.stopped() => break,
            };
            // Reaped as they end: a wait for "the next item of ours to finish" below must not be
            // answered by one that finished long ago (each such answer is a claim for nothing).
            while running.try_join_next().is_some() {}
            match self.store.claim(id, &self.lease).await? {
                Claim::Item { index, url, depth } => {
                    let (crawler, tenant, id) = (self.clone(), tenant.clone(), id.clone());
                    let (options, frontier) = (options.clone(), frontier.clone());
                    let page_hook = page_hook.clone();
                    running.spawn(async move {
                        let item = Item {
                            id: &id,
                            index,
                            url,
                            depth,
                            frontier: frontier.as_deref(),
                            capacity: Some(capacity),
                            page_hook: page_hook.as_deref(),
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
                    drop((permit, capacity));
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
        let id = &task.id;
        self.robots.forget(id);
        let counts = self.store.counts(id).await?;
        // Everything found: the task's total grew while it ran.
        let total = self.store.task(id).await?.map_or(task.total, |t| t.total);
        let status = if counts.read + counts.listed == 0 {
            TaskStatus::Failed
        } else {
            TaskStatus::Completed
        };
        if self.store.set_status(id, status).await? {
            let webhook = task.options.webhook.as_deref();
            self.ended(id, &task.tenant, webhook, status, total, counts)
                .await;
        }
        Ok(())
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

/// How a task's items are read: as its options say, with their links when it follows them,
/// and only their titles and links when it maps a site.
fn item_options(options: &TaskOptions, frontier: Option<&Frontier>) -> PageOptions {
    let mut page = options.page.clone();
    page.links = frontier.is_some();
    if frontier.is_some_and(|f| f.follow.map) {
        page.extract = crate::web::extract::ExtractKind::Links;
    }
    page
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
