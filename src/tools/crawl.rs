//! `crawl_batch` and `crawl_status`: many URLs read like open_web_page, in the background, with
//! bounded parallelism; results persist across restarts.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Call, Scope, Tool};
use crate::crawl::{Follow, TaskOptions, TaskReport, TaskStatus};
use crate::error::ToolResult;
use crate::pages::{FetchMode, PageOptions, paging};
use crate::web::extract::{ExtractKind, TextFormat};

const DEFAULT_PARALLEL: usize = 4;

const BATCH_GUIDE: &str = "crawl_batch reads many URLs in the background (like open_web_page) \
and returns a task_id at once; poll crawl_status with it for progress, results and errors.";
const STATUS_GUIDE: &str = "crawl_status reports a crawl task: status (pending, running, \
completed, failed), progress of total, each URL's result or error in URL order, about 4000 \
tokens per call; pass next_cursor as cursor for the rest (best once the task completed).";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CrawlBatchArgs {
    // http(s) URLs to read.
    pub urls: Vec<String>,
    /// Default main.
    pub extract: Option<ExtractKind>,
    /// Default markdown.
    pub format: Option<TextFormat>,
    /// Default auto.
    pub mode: Option<FetchMode>,
    /// URLs at once (default 4).
    pub parallel: Option<usize>,
    /// Per page (default 4000).
    #[schemars(range(min = 1))]
    pub max_tokens: Option<usize>,
    /// Signed events URL.
    pub webhook: Option<String>,
    /// Crawl the urls' sites: depth (link hops, default 1), scope (same_host default, same_site, prefix: seed's folder, any), include/exclude (URL or path globs), max_pages, from_sitemap, map (list URLs only).
    pub follow: Option<Follow>,
}

shared_fields!(CrawlBatchArgs {});

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CrawlStatusArgs {
    // From crawl_batch.
    pub task_id: String,
    pub cursor: Option<String>,
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
    task_id: String,
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
        "Read many URLs in the background, as open_web_page; returns a task_id for crawl_status.";

    async fn run(&self, call: &mut Call<'_>, args: CrawlBatchArgs) -> ToolResult<CrawlStarted> {
        let options = TaskOptions {
            page: PageOptions {
                extract: args.extract.unwrap_or_default(),
                format: args.format.unwrap_or_default(),
                mode: args.mode.unwrap_or_default(),
                max_tokens: args.max_tokens,
                links: false,
            },
            parallel: args.parallel.unwrap_or(DEFAULT_PARALLEL),
            webhook: args.webhook,
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
    const DESCRIPTION: &'static str = "A crawl task's status, progress, results and errors.";

    async fn run(
        &self,
        call: &mut Call<'_>,
        args: CrawlStatusArgs,
    ) -> ToolResult<CrawlStatusOutput> {
        // URL indices, not positions: URLs finishing meanwhile do not shift the cursor.
        let from = paging::parse_cursor(args.cursor.as_deref(), 'I', usize::MAX)?;
        let budget = paging::budget_chars(paging::budget(args.max_tokens)?);
        let (report, next) = call
            .ctx
            .crawler
            .status_page(call.tenant(), args.task_id.trim(), from, budget)
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
