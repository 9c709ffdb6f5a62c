//! Batch crawling: a task is a list of URLs fetched and extracted with bounded parallelism
//! (per task, per host, overall), its results kept in SQLite so a restart resumes it, and its
//! progress broadcast as one event per finished URL, then `done`.
//!
//! Fetching is not done here: a `PageLoader` (open_web_page's, from the tool layer) is handed
//! in, so the crawler reads pages exactly as `open_web_page` does.

mod store;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::{Semaphore, broadcast};
use tokio::task::JoinSet;

use crate::config::CrawlConfig;
use crate::error::{ErrorCode, ToolError, ToolResult};
use store::Store;

/// Events buffered per subscriber before a slow one starts missing them.
const EVENT_BUFFER: usize = 1024;

/// Loads one page for a task: the result JSON, or the error.
pub trait PageLoader: Send + Sync + 'static {
    fn load(&self, url: String, options: Value) -> BoxFuture<'static, ToolResult<Value>>;
}

/// Progress of a task: `progress` after each URL, then `done`.
#[derive(Debug, Clone)]
pub struct CrawlEvent {
    pub name: &'static str,
    pub data: Value,
}

pub struct Crawler {
    store: Store,
    loader: Arc<dyn PageLoader>,
    config: CrawlConfig,
    global: Arc<Semaphore>,
    hosts: Mutex<HashMap<String, Arc<Semaphore>>>,
    channels: Mutex<HashMap<String, broadcast::Sender<CrawlEvent>>>,
    /// Serialises "record an outcome, count, announce" so progress numbers go out in order.
    finishing: Mutex<()>,
    next_id: AtomicU64,
}

impl Crawler {
    /// Opens the task database and resumes tasks a previous run left unfinished.
    pub fn open(
        path: &Path,
        config: CrawlConfig,
        loader: Arc<dyn PageLoader>,
    ) -> anyhow::Result<Arc<Self>> {
        let crawler = Arc::new(Self {
            store: Store::open(path)?,
            loader,
            global: Arc::new(Semaphore::new(config.global_parallel)),
            config,
            hosts: Mutex::new(HashMap::new()),
            channels: Mutex::new(HashMap::new()),
            finishing: Mutex::new(()),
            next_id: AtomicU64::new(0),
        });
        for id in crawler.store.unfinished()? {
            tracing::info!(task = %id, "resuming crawl task");
            crawler.spawn(id);
        }
        Ok(crawler)
    }

    /// Checks and stores a task, starts it, and returns its id.
    pub fn submit(
        self: &Arc<Self>,
        urls: Vec<String>,
        parallel: usize,
        options: Value,
    ) -> ToolResult<String> {
        if urls.is_empty() {
            return Err(ToolError::invalid(
                "field `urls` must hold at least one URL",
            ));
        }
        if urls.len() > self.config.max_urls {
            return Err(ToolError::new(
                ErrorCode::Limit,
                format!(
                    "{} URLs is more than the configured maximum of {}",
                    urls.len(),
                    self.config.max_urls
                ),
            )
            .with_hint("split the URLs into several tasks"));
        }
        if !(1..=self.config.max_parallel).contains(&parallel) {
            return Err(ToolError::invalid(format!(
                "field `parallel` must be from 1 to {}",
                self.config.max_parallel
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
        let mut options = options;
        options["parallel"] = json!(parallel);
        self.store
            .create(&id, now as i64, &options, &urls)
            .map_err(database_error)?;
        self.spawn(id.clone());
        Ok(id)
    }

    fn spawn(self: &Arc<Self>, id: String) {
        let crawler = self.clone();
        tokio::spawn(async move {
            if let Err(error) = crawler.run(&id).await {
                tracing::error!(task = %id, %error, "crawl task stopped");
            }
        });
    }

    async fn run(self: Arc<Self>, id: &str) -> anyhow::Result<()> {
        let Some(task) = self.store.task(id)? else {
            return Ok(());
        };
        self.store.set_status(id, "running")?;
        let parallel = task.options["parallel"].as_u64().unwrap_or(1).max(1) as usize;
        let per_task = Arc::new(Semaphore::new(parallel));
        let mut running = JoinSet::new();
        for (index, url) in self.store.pending(id)? {
            let permit = per_task.clone().acquire_owned().await?;
            let crawler = self.clone();
            let (id, options) = (id.to_string(), task.options.clone());
            running.spawn(async move {
                crawler.fetch(&id, index, url, options, task.total).await;
                drop(permit);
            });
        }
        while running.join_next().await.is_some() {}
        let (finished, errors) = self.store.counts(id)?;
        let status = if errors == finished {
            "failed"
        } else {
            "completed"
        };
        self.store.set_status(id, status)?;
        self.announce(id, "done", json!({"task_id": id, "status": status, "progress": finished, "total": task.total, "errors": errors}));
        Ok(())
    }

    async fn fetch(&self, id: &str, index: usize, url: String, options: Value, total: usize) {
        let host = self.host_limit(&url);
        let outcome = async {
            let _host = host.acquire().await.ok();
            let _global = self.global.acquire().await.ok();
            self.loader.load(url.clone(), options).await
        }
        .await;
        let outcome = match outcome {
            Ok(result) => match result["status"].as_u64() {
                Some(status) if status >= 400 => Err(json!({
                    "code": "UPSTREAM",
                    "message": format!("{url} answered HTTP {status}"),
                    "hint": "check the URL",
                })),
                _ => Ok(result),
            },
            Err(error) => Err(error.to_json()["error"].clone()),
        };
        let _order = self.finishing.lock().unwrap_or_else(|e| e.into_inner());
        match self.store.finish(id, index, &outcome) {
            Ok(true) => {}
            Ok(false) => return,
            Err(error) => {
                tracing::error!(task = %id, %error, "cannot record a crawl result");
                return;
            }
        }
        let progress = self.store.progress(id).unwrap_or(0);
        let mut data = json!({"task_id": id, "index": index, "url": url, "ok": outcome.is_ok(), "progress": progress, "total": total});
        if let Err(error) = &outcome {
            data["error"] = error.clone();
        }
        self.announce(id, "progress", data);
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

    fn announce(&self, id: &str, name: &'static str, data: Value) {
        let mut channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(sender) = channels.get(id) {
            let _ = sender.send(CrawlEvent { name, data });
        }
        // After `done` nothing more comes; subscribers keep their receivers until they read it.
        if name == "done" {
            channels.remove(id);
        }
    }

    /// Progress events of a task from now on, with its status at subscription time.
    pub fn subscribe(&self, id: &str) -> ToolResult<(Value, broadcast::Receiver<CrawlEvent>)> {
        let mut channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        // Read under the lock: `announce` cannot slip a `done` between the two.
        let summary = self.summary(id)?;
        let receiver = if matches!(summary["status"].as_str(), Some("completed" | "failed")) {
            broadcast::channel(1).1
        } else {
            channels
                .entry(id.to_string())
                .or_insert_with(|| broadcast::channel(EVENT_BUFFER).0)
                .subscribe()
        };
        Ok((summary, receiver))
    }

    /// Status and counts of a task, without its results.
    pub fn summary(&self, id: &str) -> ToolResult<Value> {
        let task = self
            .store
            .task(id)
            .map_err(database_error)?
            .ok_or_else(|| no_such_task(id))?;
        let progress = self.store.progress(id).map_err(database_error)?;
        Ok(json!({
            "task_id": task.id,
            "status": task.status,
            "progress": progress,
            "total": task.total,
            "created_ms": task.created_ms,
            "options": task.options,
        }))
    }

    /// Status, results and errors of a task, in the order URLs finished.
    pub fn status(&self, id: &str) -> ToolResult<Value> {
        let summary = self.summary(id)?;
        let finished = self.store.finished(id).map_err(database_error)?;
        Ok(with_items(summary, finished))
    }

    /// Status and the results and errors of URLs from index `from` on, in URL order, as many as
    /// fit `max_chars` (at least one), plus the index of the first URL left out.
    pub fn status_page(
        &self,
        id: &str,
        from: usize,
        max_chars: usize,
    ) -> ToolResult<(Value, Option<usize>)> {
        let summary = self.summary(id)?;
        if summary["total"]
            .as_u64()
            .is_some_and(|total| from as u64 > total)
        {
            return Err(ToolError::invalid(format!(
                "field `cursor` points past the task's {} URLs",
                summary["total"]
            ))
            .with_hint("pass the next_cursor of the previous result, or omit cursor"));
        }
        let (items, next) = self
            .store
            .finished_page(id, from, max_chars)
            .map_err(database_error)?;
        Ok((with_items(summary, items), next))
    }

    /// Task summaries, newest first.
    pub fn list(&self, status: Option<&str>, limit: usize) -> ToolResult<Value> {
        let tasks = self.store.tasks(status, limit).map_err(database_error)?;
        let summaries: ToolResult<Vec<Value>> = tasks.iter().map(|t| self.summary(&t.id)).collect();
        Ok(json!({ "tasks": summaries? }))
    }
}

/// `summary` with the items split into `results` and `errors`, in the given order.
fn with_items(mut summary: Value, items: Vec<store::ItemRow>) -> Value {
    let (mut results, mut errors) = (Vec::new(), Vec::new());
    for item in items {
        match (item.result, item.error) {
            (Some(result), _) => {
                results.push(json!({"index": item.index, "url": item.url, "result": result}))
            }
            (None, error) => {
                errors.push(json!({"index": item.index, "url": item.url, "error": error}))
            }
        }
    }
    summary["results"] = json!(results);
    summary["errors"] = json!(errors);
    summary
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
