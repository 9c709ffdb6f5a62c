//! Batch crawling: a task is a list of URLs read as `open_web_page` reads them (through
//! `pages`, with the task's `PageOptions`) with bounded parallelism (per task, per host,
//! overall), its results kept in SQLite so a restart resumes it, and its progress broadcast as
//! one event per finished URL, then `done`.

mod store;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::{Semaphore, broadcast};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::CrawlConfig;
use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::pages::{Page, PageOptions, Pages};
use crate::tenant::{Tenant, Tenants};
use store::Store;

/// Events buffered per subscriber before a slow one starts missing them.
const EVENT_BUFFER: usize = 1024;

/// Where a task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TaskStatus {
    Pending,
    Running,
    /// Every URL has an outcome and at least one was read.
    Completed,
    /// Every URL failed.
    Failed,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Pending => "pending",
            TaskStatus::Running => "running",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        [Self::Pending, Self::Running, Self::Completed, Self::Failed]
            .into_iter()
            .find(|s| s.as_str() == text)
    }

    /// Whether nothing more will happen to the task.
    pub fn is_finished(self) -> bool {
        matches!(self, TaskStatus::Completed | TaskStatus::Failed)
    }
}

/// How a task reads its URLs, as stored with it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskOptions {
    #[serde(flatten)]
    pub page: PageOptions,
    /// URLs of the task read at once.
    pub parallel: usize,
}

/// A task without its results.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TaskSummary {
    pub task_id: String,
    pub status: TaskStatus,
    /// URLs finished (read or failed).
    pub progress: usize,
    pub total: usize,
    pub created_ms: i64,
    pub options: TaskOptions,
}

/// A task with (a page of) its outcomes.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TaskReport {
    #[serde(flatten)]
    pub summary: TaskSummary,
    pub results: Vec<ItemResult>,
    pub errors: Vec<ItemError>,
}

/// A URL read.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ItemResult {
    pub index: usize,
    pub url: String,
    pub result: Page,
}

/// A URL that could not be read.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ItemError {
    pub index: usize,
    pub url: String,
    pub error: ToolError,
}

/// Task summaries, newest first.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TaskList {
    pub tasks: Vec<TaskSummary>,
}

/// Progress of a task: a `progress` event after each URL, then `done`.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum CrawlEvent {
    Progress {
        task_id: String,
        index: usize,
        url: String,
        ok: bool,
        progress: usize,
        total: usize,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<ToolError>,
    },
    Done {
        task_id: String,
        status: TaskStatus,
        progress: usize,
        total: usize,
        errors: usize,
    },
}

impl CrawlEvent {
    /// The SSE event name.
    pub fn name(&self) -> &'static str {
        match self {
            CrawlEvent::Progress { .. } => "progress",
            CrawlEvent::Done { .. } => "done",
        }
    }

    /// The SSE data.
    pub fn data(&self) -> Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

pub struct Crawler {
    store: Store,
    pages: Arc<Pages>,
    /// Whose tasks they are: a resumed task runs for its tenant, under its policy.
    tenants: Arc<Tenants>,
    config: CrawlConfig,
    global: Arc<Semaphore>,
    hosts: Mutex<HashMap<String, Arc<Semaphore>>>,
    channels: Mutex<HashMap<String, broadcast::Sender<CrawlEvent>>>,
    /// Serialises "record an outcome, count, announce" so progress numbers go out in order.
    finishing: Mutex<()>,
    next_id: AtomicU64,
    /// The service's shutdown: once cancelled, no item starts and none in flight is recorded.
    stop: CancellationToken,
    /// The service's background tasks, which shutdown waits for.
    tasks: TaskTracker,
}

impl Crawler {
    /// Opens the task database and resumes tasks a previous run left unfinished.
    pub fn open(
        path: &Path,
        config: CrawlConfig,
        pages: Arc<Pages>,
        tenants: Arc<Tenants>,
        stop: CancellationToken,
        tasks: TaskTracker,
    ) -> anyhow::Result<Arc<Self>> {
        let crawler = Arc::new(Self {
            store: Store::open(path)?,
            pages,
            tenants,
            global: Arc::new(Semaphore::new(config.global_parallel)),
            config,
            hosts: Mutex::new(HashMap::new()),
            channels: Mutex::new(HashMap::new()),
            finishing: Mutex::new(()),
            next_id: AtomicU64::new(0),
            stop,
            tasks,
        });
        for id in crawler.store.unfinished()? {
            tracing::info!(task = %id, "resuming crawl task");
            crawler.spawn(id);
        }
        Ok(crawler)
    }

    /// Checks and stores a task of `tenant`, starts it, and returns its id.
    pub fn submit(
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
        for (index, url) in urls.iter().enumerate() {
            let ok = url::Url::parse(url).is_ok_and(|u| matches!(u.scheme(), "http" | "https"));
            if !ok {
                return Err(ToolError::invalid(format!(
                    "field `urls[{index}]` is not an http(s) URL: {url:?}"
                )));
            }
        }
        let now = now_ms();
        let id = format!(
            "crawl-{now:x}-{}",
            self.next_id.fetch_add(1, Ordering::Relaxed)
        );
        crate::pages::paging::budget(options.page.max_tokens)?;
        self.store
            .create(&id, tenant.name(), now as i64, &options, &urls)
            .map_err(database_error)?;
        self.spawn(id.clone());
        Ok(id)
    }

    /// Resolves once the service shuts down: every task stops where it is, items in flight
    /// stay pending (not failed), so the next start reads them again.
    async fn stopped(&self) {
        self.stop.cancelled().await;
    }

    fn spawn(self: &Arc<Self>, id: String) {
        let crawler = self.clone();
        self.tasks.spawn(async move {
            if let Err(error) = crawler.run(&id).await {
                tracing::error!(task = %id, %error, "crawl task stopped");
            }
        });
    }

    async fn run(self: Arc<Self>, id: &str) -> anyhow::Result<()> {
        let Some(task) = self.store.task(id)? else {
            return Ok(());
        };
        let Some(tenant) = self.tenants.named(&task.tenant) else {
            // Its key is gone from the keys file: nobody may run it, nor see it.
            tracing::warn!(task = %id, tenant = %task.tenant, "crawl task of an unknown tenant left pending");
            return Ok(());
        };
        self.store.set_status(id, TaskStatus::Running)?;
        let per_task = Arc::new(Semaphore::new(task.options.parallel.max(1)));
        let mut running = JoinSet::new();
        for (index, url) in self.store.pending(id)? {
            let permit = tokio::select! {
                permit = per_task.clone().acquire_owned() => permit?,
                () = self.stopped() => break,
            };
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
                    // Left pending: the next start reads it again.
                    () = crawler.stopped() => {}
                }
                drop(permit);
            });
        }
        while running.join_next().await.is_some() {}
        if self.stop.is_cancelled() {
            // Still running in the database: the next start resumes it.
            return Ok(());
        }
        let (finished, errors) = self.store.counts(id)?;
        let status = if errors == finished {
            TaskStatus::Failed
        } else {
            TaskStatus::Completed
        };
        self.store.set_status(id, status)?;
        self.announce(CrawlEvent::Done {
            task_id: id.to_string(),
            status,
            progress: finished,
            total: task.total,
            errors,
        });
        Ok(())
    }

    async fn fetch(&self, tenant: &Arc<Tenant>, item: Item<'_>, options: PageOptions) {
        let Item {
            id,
            index,
            url,
            total,
        } = item;
        let host = self.host_limit(&url);
        let outcome = async {
            let host = host.acquire_owned().await.ok();
            let global = self.global.clone().acquire_owned().await.ok();
            // A render counts against the render limit, not against these fetch limits.
            let release = move || drop((host, global));
            self.pages
                .open_releasing(tenant, &url, &options, None, release)
                .await
        }
        .await
        .and_then(|page| match page.status {
            Some(status) if status >= 400 => Err(ToolError::new(
                ErrorCode::Upstream,
                format!("{url} answered HTTP {status}"),
            )
            .with_hint("check the URL")),
            _ => Ok(page),
        });
        let _order = self.finishing.lock().unwrap_or_else(|e| e.into_inner());
        match self.store.finish(id, index, &outcome) {
            Ok(true) => {}
            Ok(false) => return,
            Err(error) => {
                tracing::error!(task = %id, %error, "cannot record a crawl result");
                return;
            }
        }
        self.announce(CrawlEvent::Progress {
            task_id: id.to_string(),
            index,
            url,
            ok: outcome.is_ok(),
            progress: self.store.progress(id).unwrap_or(0),
            total,
            error: outcome.err(),
        });
    }

    /// The semaphore of `url`'s host (`host:port`), shared by all tasks.
    fn host_limit(&self, url: &str) -> Arc<Semaphore> {
        let host = url::Url::parse(url)
            .ok()
            .map(|u| {
                format!(
                    "{}:{}",
                    u.host_str().unwrap_or(""),
                    u.port_or_known_default().unwrap_or(0)
                )
            })
            .unwrap_or_default();
        let mut hosts = self.hosts.lock().unwrap_or_else(|e| e.into_inner());
        hosts
            .entry(host)
            .or_insert_with(|| Arc::new(Semaphore::new(self.config.per_host)))
            .clone()
    }

    fn announce(&self, event: CrawlEvent) {
        let (CrawlEvent::Progress { task_id, .. } | CrawlEvent::Done { task_id, .. }) = &event;
        let id = task_id.clone();
        let done = matches!(event, CrawlEvent::Done { .. });
        let mut channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(sender) = channels.get(&id) {
            let _ = sender.send(event);
        }
        // After `done` nothing more comes; subscribers keep their receivers until they read it.
        if done {
            channels.remove(&id);
        }
    }

    /// Progress events of `tenant`'s task from now on, with its status at subscription time.
    pub fn subscribe(
        &self,
        tenant: &Tenant,
        id: &str,
    ) -> ToolResult<(TaskSummary, broadcast::Receiver<CrawlEvent>)> {
        let mut channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        // Read under the lock: `announce` cannot slip a `done` between the two.
        let summary = self.summary(tenant, id)?;
        let receiver = if summary.status.is_finished() {
            broadcast::channel(1).1
        } else {
            channels
                .entry(id.to_string())
                .or_insert_with(|| broadcast::channel(EVENT_BUFFER).0)
                .subscribe()
        };
        Ok((summary, receiver))
    }

    /// Status and counts of `tenant`'s task, without its results. Another tenant's task is as
    /// unknown as one that never was.
    pub fn summary(&self, tenant: &Tenant, id: &str) -> ToolResult<TaskSummary> {
        let task = self
            .store
            .task(id)
            .map_err(database_error)?
            .filter(|task| task.tenant == tenant.name())
            .ok_or_else(|| no_such_task(id))?;
        self.summarize(task)
    }

    fn summarize(&self, task: store::TaskRow) -> ToolResult<TaskSummary> {
        let progress = self.store.progress(&task.id).map_err(database_error)?;
        Ok(TaskSummary {
            task_id: task.id,
            status: task.status,
            progress,
            total: task.total,
            created_ms: task.created_ms,
            options: task.options,
        })
    }

    /// Status, results and errors of a task, in the order URLs finished.
    pub fn status(&self, tenant: &Tenant, id: &str) -> ToolResult<TaskReport> {
        let summary = self.summary(tenant, id)?;
        let finished = self.store.finished(id).map_err(database_error)?;
        Ok(with_items(summary, finished))
    }

    /// Status and the results and errors of URLs from index `from` on, in URL order, as many as
    /// fit `max_chars` (at least one), plus the index of the first URL left out.
    pub fn status_page(
        &self,
        tenant: &Tenant,
        id: &str,
        from: usize,
        max_chars: usize,
    ) -> ToolResult<(TaskReport, Option<usize>)> {
        let summary = self.summary(tenant, id)?;
        if from > summary.total {
            return Err(ToolError::invalid(format!(
                "field `cursor` points past the task's {} URLs",
                summary.total
            ))
            .with_hint("pass the next_cursor of the previous result, or omit cursor"));
        }
        let (items, next) = self
            .store
            .finished_page(id, from, max_chars)
            .map_err(database_error)?;
        Ok((with_items(summary, items), next))
    }

    /// `tenant`'s task summaries, newest first.
    pub fn list(
        &self,
        tenant: &Tenant,
        status: Option<TaskStatus>,
        limit: usize,
    ) -> ToolResult<TaskList> {
        let tasks = self
            .store
            .tasks(tenant.name(), status, limit)
            .map_err(database_error)?;
        let tasks: ToolResult<Vec<TaskSummary>> =
            tasks.into_iter().map(|t| self.summarize(t)).collect();
        Ok(TaskList { tasks: tasks? })
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

/// `summary` with the items split into `results` and `errors`, in the given order.
fn with_items(summary: TaskSummary, items: Vec<store::ItemRow>) -> TaskReport {
    let (mut results, mut errors) = (Vec::new(), Vec::new());
    for item in items {
        let (index, url) = (item.index, item.url);
        match item.outcome {
            Ok(result) => results.push(ItemResult { index, url, result }),
            Err(error) => errors.push(ItemError { index, url, error }),
        }
    }
    TaskReport {
        summary,
        results,
        errors,
    }
}

fn no_such_task(id: &str) -> ToolError {
    ToolError::new(ErrorCode::NoSuchTask, format!("no crawl task {id:?}"))
        .with_hint("use the task_id crawl_batch returned; GET /api/crawler/tasks lists tasks")
}

fn database_error(error: rusqlite::Error) -> ToolError {
    ToolError::internal(format!("crawl database: {error}"))
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
