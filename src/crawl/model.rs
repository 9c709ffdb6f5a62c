//! What a crawl task is, as callers see it: its status and options, summaries and reports,
//! per-item results and errors, and its progress events.

use super::*;

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
    /// Stopped by its caller: what was not read yet is skipped as `cancelled`.
    Cancelled,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Pending => "pending",
            TaskStatus::Running => "running",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Self> {
        [
            Self::Pending,
            Self::Running,
            Self::Completed,
            Self::Failed,
            Self::Cancelled,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
    }

    /// Whether nothing more will happen to the task.
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }
}

/// How a task reads its URLs, as stored with it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskOptions {
    #[serde(flatten)]
    pub page: PageOptions,
    /// URLs of the task read at once.
    pub parallel: usize,
    /// Where the task's events go (`started`, then `completed` or `failed`), signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<String>,
    /// The webhook also gets a `page` event per URL finished.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub webhook_pages: bool,
    /// Links the task follows from its seeds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follow: Option<Follow>,
    /// A site crawl's seeds, which its scope is judged against.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seeds: Vec<String>,
}

/// A task without its results.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TaskSummary {
    pub task_id: TaskId,
    pub status: TaskStatus,
    /// URLs finished (read, failed or skipped when their turn came).
    pub progress: usize,
    /// URLs to read: the seeds, and the pages found that are in scope.
    pub total: usize,
    /// URLs not read (robots.txt, out of scope, over `max_pages`, duplicates).
    #[serde(rename = "skipped_count", skip_serializing_if = "is_zero")]
    pub skipped: usize,
    /// URLs a map lists.
    #[serde(rename = "listed_count", skip_serializing_if = "is_zero")]
    pub listed: usize,
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
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<ItemSkipped>,
    /// A map's URLs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub listed: Vec<ItemListed>,
}

/// How a URL of the task was found: none for seeds.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct Origin {
    /// Link hops from a seed.
    #[serde(skip_serializing_if = "is_zero_depth")]
    pub depth: u32,
    /// The page (or sitemap) that linked to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

/// A URL read.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ItemResult {
    pub index: usize,
    pub url: String,
    #[serde(flatten)]
    pub origin: Origin,
    pub result: Page,
}

/// A URL that could not be read.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ItemError {
    pub index: usize,
    pub url: String,
    #[serde(flatten)]
    pub origin: Origin,
    pub error: ToolError,
}

/// A URL not read, and why.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ItemSkipped {
    pub index: usize,
    pub url: String,
    #[serde(flatten)]
    pub origin: Origin,
    #[serde(flatten)]
    pub skip: Skip,
}

/// A URL a map lists.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ItemListed {
    pub index: usize,
    pub url: String,
    #[serde(flatten)]
    pub origin: Origin,
    #[serde(flatten)]
    pub listing: Listing,
}

/// What a map knows of a URL without reading it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Listing {
    /// The page's title, or the text of a link to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// Why a URL was not read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Skip {
    pub reason: SkipReason,
    /// The rule that kept it out (a robots.txt line, a redirect).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The text of the link to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// What became of a URL of a task.
#[derive(Debug, Clone)]
pub enum ItemOutcome {
    Read(Box<Page>),
    Failed(ToolError),
    Skipped(Skip),
    Listed(Listing),
}

impl ItemOutcome {
    pub fn error(&self) -> Option<&ToolError> {
        match self {
            ItemOutcome::Failed(error) => Some(error),
            _ => None,
        }
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn is_zero_depth(n: &u32) -> bool {
    *n == 0
}

/// Task summaries, newest first.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TaskList {
    pub tasks: Vec<TaskSummary>,
}

/// Progress of a task: a `progress` event after each URL, then `done`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CrawlEvent {
    Progress {
        task_id: TaskId,
        index: usize,
        url: String,
        ok: bool,
        progress: usize,
        total: usize,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<ToolError>,
        /// Not read, and why.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        skipped: Option<SkipReason>,
    },
    Done {
        task_id: TaskId,
        status: TaskStatus,
        progress: usize,
        total: usize,
        errors: usize,
        #[serde(default, skip_serializing_if = "is_zero")]
        skipped: usize,
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
}
