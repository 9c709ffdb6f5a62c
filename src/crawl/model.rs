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

    pub(crate) fn parse(text: &str) -> Option<Self> {
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
    /// Where the task's events go (`started`, then `completed` or `failed`), signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<String>,
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
#[derive(Debug, Clone, Serialize, Deserialize)]
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
