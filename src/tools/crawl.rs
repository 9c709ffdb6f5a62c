//! `crawl_batch` and `crawl_status`: many URLs read like open_web_page, in the background, with
//! bounded parallelism; results persist across restarts.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Call, Scope, Tool};
use crate::crawl::{CrawlEvent, Follow, TaskOptions, TaskReport, TaskStatus};
use crate::error::ToolResult;
use crate::ids::TaskId;
use crate::pages::{FetchMode, PageOptions, paging};
use crate::tools::TaskProgress;
use crate::web::extract::{ExtractKind, TextFormat};
use tokio::sync::broadcast;

const DEFAULT_PARALLEL: usize = 4;

const BATCH_GUIDE: &str = "crawl_batch reads many URLs in the background (like open_web_page) \
and returns a task_id at once; poll crawl_status with it for progress, results and errors. With \
follow it crawls the urls' sites: depth link hops (default 1), scope same_host (default), \
same_site, prefix (a seed's folder) or any (include decides), include/exclude globs (/docs/** \
or whole URLs), max_pages, from_sitemap (start from the sitemaps too), map (list URLs with \
titles, read no content); each result says its depth and from, URLs not read are in skipped \
with a reason.";
const STATUS_GUIDE: &str = "crawl_status reports a crawl task: status (pending, running, \
completed, failed, cancelled), progress of total, each URL's result or error in URL order, about 4000 \
tokens per call; pass next_cursor as cursor for the rest (best once the task completed). \
wait: N returns when the task ends or after N seconds.";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CrawlBatchArgs {
    /// URLs or seeds.
    pub urls: Vec<String>,
    // Default main, as open_web_page (no schema description: the tool list's size).
    pub extract: Option<ExtractKind>,
    // Default markdown.
    pub format: Option<TextFormat>,
    // Default auto.
    pub mode: Option<FetchMode>,
    /// JSON Schema or {base, fields}.
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub schema: Option<serde_json::Value>,
    /// At once (default 4).
    pub parallel: Option<usize>,
    /// Per page.
    #[schemars(range(min = 1))]
    pub max_tokens: Option<usize>,
    /// Signed events URL.
    pub webhook: Option<String>,
    /// The webhook also gets a `page` event per URL. Left out of the published schema (the
    /// tool list's size): an integration's option, documented in docs/tools.md.
    #[schemars(skip)]
    pub webhook_pages: Option<bool>,
    /// Links: depth (default 1); map: URLs only.
    pub follow: Option<Follow>,
}

shared_fields!(CrawlBatchArgs {});

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CrawlStatusArgs {
    /// From crawl_batch.
    pub task_id: String,
    pub cursor: Option<String>,
    /// Seconds to wait.
    #[schemars(range(max = 120))]
    pub wait: Option<u32>,
    /// About this many tokens of outcomes per call (default 4000). Not published, so the tool
    /// list stays small and a model reads a task page by page; a front that answers with a
    /// task's whole report passes a budget of its own.
    #[schemars(skip)]
    pub max_tokens: Option<usize>,
}

shared_fields!(CrawlStatusArgs {});

/// The task just created.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CrawlStarted {
    /// Pass to crawl_status.
    task_id: TaskId,
    status: TaskStatus,
    total: usize,
    parallel: usize,
    /// With `webhook`: the secret its events are signed with, `x-webpilot-signature:
    /// sha256=<hex HMAC-SHA256 of the body>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    webhook_secret: Option<String>,
}

/// A task's status and a page of its outcomes.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CrawlStatusOutput {
    #[serde(flatten)]
    report: TaskReport,
    /// More outcomes follow: pass `next_cursor` as cursor.
    truncated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_cursor: Option<String>,
}

pub struct CrawlBatch;
pub struct CrawlStatus;

/// The longest `wait` of crawl_status.
const MAX_WAIT_SECS: u32 = 120;

/// Waits until task `id` finished or `seconds` passed, reporting its progress to the caller
/// (MCP progress notifications) as URLs finish.
async fn await_end(call: &Call<'_>, id: &TaskId, seconds: u32) -> ToolResult<()> {
    if seconds > MAX_WAIT_SECS {
        return Err(crate::error::ToolError::invalid(format!(
            "field `wait` must be at most {MAX_WAIT_SECS} seconds"
        ))
        .with_hint("wait again after this call returns"));
    }
    let (summary, mut events) = call.ctx.crawler.subscribe(call.tenant(), id).await?;
    if summary.status.is_finished() {
        return Ok(());
    }
    let ends = tokio::time::Instant::now() + std::time::Duration::from_secs(seconds.into());
    loop {
        let event = tokio::select! {
            event = events.recv() => event,
            () = tokio::time::sleep_until(ends) => return Ok(()),
        };
        match event {
            Ok(CrawlEvent::Progress {
                progress,
                total,
                url,
                ..
            }) => call.report_task(TaskProgress {
                progress,
                total,
                message: format!("{progress} of {total} URLs: {url}"),
            }),
            Ok(CrawlEvent::Done { .. }) | Err(broadcast::error::RecvError::Closed) => {
                return Ok(());
            }
            // Missed events: the next one carries the count.
            Err(broadcast::error::RecvError::Lagged(_)) => {}
        }
    }
}

#[async_trait]
impl Tool for CrawlBatch {
    type Args = CrawlBatchArgs;
    type Output = CrawlStarted;
    const NAME: &'static str = "crawl_batch";
    const GUIDE: &'static str = BATCH_GUIDE;
    const EXAMPLE: &'static str =
        r#"{"urls": ["https://example.com/a", "https://example.com/b"], "parallel": 4}"#;
    const SCOPE: Scope = Scope::Task;
    const TITLE: &'static str = "Crawl pages";
    const EFFECTS: crate::tools::Effects = crate::tools::Effects {
        read_only: false,
        destructive: false,
        idempotent: false,
        open_world: true,
    };
    const DESCRIPTION: &'static str =
        "Read many URLs or a site in the background; returns a task_id for crawl_status.";

    async fn run(&self, call: &mut Call<'_>, args: CrawlBatchArgs) -> ToolResult<CrawlStarted> {
        let options = TaskOptions {
            page: PageOptions {
                extract: args.extract.unwrap_or_default(),
                format: args.format.unwrap_or_default(),
                mode: args.mode.unwrap_or_default(),
                max_tokens: args.max_tokens,
                ..PageOptions::default()
            }
            .with_data(args.schema, args.extract.is_some())?,
            parallel: args.parallel.unwrap_or(DEFAULT_PARALLEL),
            webhook: args.webhook,
            webhook_pages: args.webhook_pages.unwrap_or(false),
            follow: args.follow,
            seeds: Vec::new(),
        };
        let hooked = options.webhook.is_some();
        let (total, parallel) = (args.urls.len(), options.parallel);
        let task_id = call
            .ctx
            .crawler
            .submit(call.tenant(), args.urls, options)
            .await?;
        let crawler = &call.ctx.crawler;
        Ok(CrawlStarted {
            webhook_secret: hooked.then(|| crawler.webhook_secret(&task_id)),
            task_id,
            status: TaskStatus::Pending,
            total,
            parallel,
        })
    }
}

#[async_trait]
impl Tool for CrawlStatus {
    type Args = CrawlStatusArgs;
    type Output = CrawlStatusOutput;
    const NAME: &'static str = "crawl_status";
    const GUIDE: &'static str = STATUS_GUIDE;
    const EXAMPLE: &'static str = r#"{"task_id": "crawl-18c2f0a1b2c-0"}"#;
    const SCOPE: Scope = Scope::Task;
    const TITLE: &'static str = "Crawl progress";
    const EFFECTS: crate::tools::Effects = crate::tools::Effects::READS;
    const DESCRIPTION: &'static str = "A crawl task's status, progress and outcomes.";

    async fn run(
        &self,
        call: &mut Call<'_>,
        args: CrawlStatusArgs,
    ) -> ToolResult<CrawlStatusOutput> {
        // URL indices, not positions: URLs finishing meanwhile do not shift the cursor.
        let from = paging::parse_cursor(args.cursor.as_deref(), 'I', usize::MAX)?;
        let budget = paging::budget_chars(paging::budget(args.max_tokens)?);
        let id = TaskId::parse(&args.task_id)?;
        if let Some(seconds) = args.wait {
            await_end(call, &id, seconds).await?;
        }
        let (report, next) = call
            .ctx
            .crawler
            .status_page(call.tenant(), &id, from, budget)
            .await?;
        Ok(CrawlStatusOutput {
            report,
            truncated: next.is_some(),
            next_cursor: next.map(|next| format!("I{next}")),
        })
    }

    fn summary(output: &CrawlStatusOutput) -> String {
        let summary = &output.report.summary;
        format!(
            "{} {}/{}",
            summary.status.as_str(),
            summary.progress,
            summary.total
        )
    }
}
