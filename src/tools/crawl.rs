//! `crawl_batch` and `crawl_status`: many URLs read like open_web_page, in the background, with
//! bounded parallelism; results persist across restarts.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::open_web_page::FetchMode;
use super::paging;
use super::{Ctx, Tool, ToolOutput};
use crate::error::ToolResult;
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
    /// http(s) URLs to read.
    pub urls: Vec<String>,
    /// As open_web_page (default main).
    pub extract: Option<ExtractKind>,
    /// Default markdown.
    pub format: Option<TextFormat>,
    /// As open_web_page (default auto).
    pub mode: Option<FetchMode>,
    /// URLs at once (default 4).
    pub parallel: Option<usize>,
    /// Token budget per page (default 4000).
    pub max_tokens: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CrawlStatusArgs {
    /// The task_id crawl_batch returned.
    pub task_id: String,
    /// next_cursor of the previous call.
    pub cursor: Option<String>,
}

pub struct CrawlBatch;
pub struct CrawlStatus;

#[async_trait]
impl Tool for CrawlBatch {
    type Args = CrawlBatchArgs;
    const NAME: &'static str = "crawl_batch";
    const GUIDE: &'static str = BATCH_GUIDE;
    const DESCRIPTION: &'static str =
        "Read many URLs in the background, as open_web_page; returns a task_id for crawl_status.";

    async fn run(&self, ctx: &Ctx, args: CrawlBatchArgs) -> ToolResult<ToolOutput> {
        let options = json!({
            "extract": args.extract.unwrap_or_default(),
            "format": args.format.unwrap_or_default(),
            "mode": args.mode.unwrap_or_default(),
            "max_tokens": args.max_tokens,
        });
        let total = args.urls.len();
        let parallel = args.parallel.unwrap_or(DEFAULT_PARALLEL);
        let task_id = ctx.crawler.submit(args.urls, parallel, options)?;
        Ok(ToolOutput::json(json!({
            "task_id": task_id,
            "status": "pending",
            "total": total,
            "parallel": parallel,
        })))
    }
}

#[async_trait]
impl Tool for CrawlStatus {
    type Args = CrawlStatusArgs;
    const NAME: &'static str = "crawl_status";
    const GUIDE: &'static str = STATUS_GUIDE;
    const DESCRIPTION: &'static str = "A crawl task's status, progress, results and errors.";

    async fn run(&self, ctx: &Ctx, args: CrawlStatusArgs) -> ToolResult<ToolOutput> {
        // URL indices, not positions: URLs finishing meanwhile do not shift the cursor.
        let from = paging::parse_cursor(args.cursor.as_deref(), 'I', usize::MAX)?;
        let budget = paging::budget_chars(paging::DEFAULT_MAX_TOKENS);
        let (mut status, next) = ctx.crawler.status_page(args.task_id.trim(), from, budget)?;
        status["truncated"] = json!(next.is_some());
        if let Some(next) = next {
            status["next_cursor"] = json!(format!("I{next}"));
        }
        Ok(ToolOutput::json(status))
    }
}
