//! Where crawl tasks and their items live, behind one trait with two engines: SQLite in the data
//! dir (the embedded default, one instance) and PostgreSQL (`--database-url`, shared by every
//! instance). An item is claimed under a lease before it is read and written once, with its
//! result, by the lease holder; an item whose holder died is claimed again once its lease ends.

mod postgres;
mod sqlite;

use std::time::Duration;

use async_trait::async_trait;

use super::{Found, ItemOutcome, Listing, Skip, TaskOptions, TaskStatus};
use crate::error::ToolError;
use crate::ids::{TaskId, TenantName};
use crate::pages::Page;

pub use postgres::{CHANNEL, PostgresStore};
pub use sqlite::SqliteStore;

pub type StoreResult<T> = anyhow::Result<T>;

/// A task's row.
#[derive(Debug, Clone)]
pub struct TaskRow {
    pub id: TaskId,
    /// Whose task it is (stored as its name, the operator's as the empty one).
    pub tenant: TenantName,
    pub created_ms: i64,
    pub status: TaskStatus,
    pub options: TaskOptions,
    pub total: usize,
}

/// A finished (or skipped) item.
#[derive(Debug, Clone)]
pub struct ItemRow {
    pub index: usize,
    pub url: String,
    pub depth: u32,
    pub from: Option<String>,
    pub outcome: ItemOutcome,
}

/// A task's items by what became of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Items that were to be read and have an outcome (read, failed, or skipped when read).
    pub finished: usize,
    pub failed: usize,
    /// Pages read.
    pub read: usize,
    /// URLs not read, whether found so or skipped when their turn came.
    pub skipped: usize,
    /// URLs a map lists.
    pub listed: usize,
}

/// Who holds claims, and for how long a claim lasts unrenewed.
#[derive(Debug, Clone)]
pub struct Lease {
    /// The instance: unique per process.
    pub owner: String,
    pub length: Duration,
}

/// What a claim found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// This item is ours to read until the lease ends.
    Item {
        index: usize,
        url: String,
        /// Link hops from a seed.
        depth: u32,
    },
    /// Items are pending but held by others (or their host is at its limit): try again later.
    Busy,
    /// No item is pending.
    Empty,
}

/// A recorded outcome: the task's count of finished items, this one included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recorded {
    pub progress: usize,
    /// The task's URLs to read, as many as found so far.
    pub total: usize,
}

/// Crawl storage. Every method is one statement or one transaction.
#[async_trait]
pub trait CrawlStore: Send + Sync {
    /// Stores a task and its seeds, all pending.
    async fn create(&self, task: &TaskRow, seeds: &[Found], per_host: usize) -> StoreResult<()>;

    /// Adds URLs a task found, each unless the task has its key already: pending while the
    /// task has fewer than `max_pages` items to read, else skipped. Whether each was added.
    async fn add(
        &self,
        id: &TaskId,
        found: &[Found],
        max_pages: usize,
        per_host: usize,
    ) -> StoreResult<Vec<bool>>;

    /// Sets a task's status; a finished status is set once: false when it already was.
    async fn set_status(&self, id: &TaskId, status: TaskStatus) -> StoreResult<bool>;

    async fn task(&self, id: &TaskId) -> StoreResult<Option<TaskRow>>;

    /// Task `id` if it is `tenant`'s: the owner is part of the query, so another tenant's task
    /// is never read.
    async fn owned_task(&self, tenant: &TenantName, id: &TaskId) -> StoreResult<Option<TaskRow>>;

    /// `tenant`'s tasks, newest first, optionally with one status.
    async fn tasks(
        &self,
        tenant: &TenantName,
        status: Option<TaskStatus>,
        limit: usize,
    ) -> StoreResult<Vec<TaskRow>>;

    /// Tasks not finished yet, oldest first.
    async fn unfinished(&self) -> StoreResult<Vec<TaskId>>;

    /// Claims the task's first pending item nobody holds.
    async fn claim(&self, id: &TaskId, lease: &Lease) -> StoreResult<Claim>;

    /// Ends a pending or running task as cancelled: its pending items (claimed ones too) become
    /// skipped as cancelled and leave its total, so a page being read is not recorded when it
    /// ends. False when the task had already finished.
    async fn cancel(&self, id: &TaskId) -> StoreResult<bool>;

    /// Extends a claim; false when it is no longer ours.
    async fn renew(&self, id: &TaskId, index: usize, lease: &Lease) -> StoreResult<bool>;

    /// Gives up this instance's claims on a task's items (they stay pending).
    async fn release(&self, id: &TaskId, lease: &Lease) -> StoreResult<()>;

    /// Records a claimed item's outcome once. `announcement` is the progress event to send to
    /// every instance with the count filled in, where the engine sends events itself. None when
    /// the item was not ours any more (or already recorded).
    async fn finish(
        &self,
        id: &TaskId,
        index: usize,
        outcome: &ItemOutcome,
        lease: &Lease,
        announcement: &str,
    ) -> StoreResult<Option<Recorded>>;

    /// The task's items by outcome, counted without reading their results.
    async fn counts(&self, id: &TaskId) -> StoreResult<Counts>;

    /// The latest page `tenant`'s tasks read at `url` with an `ETag` or `Last-Modified`, for a
    /// conditional request.
    async fn last_read(
        &self,
        tenant: &crate::ids::TenantName,
        url: &str,
    ) -> StoreResult<Option<Page>>;

    /// Finished items in the order they finished.
    async fn finished(&self, id: &TaskId) -> StoreResult<Vec<ItemRow>>;

    /// Finished items from URL index `from` on, in URL order, while their stored JSON fits
    /// `max_chars` (at least one), and the index of the first one left out.
    async fn finished_page(
        &self,
        id: &TaskId,
        from: usize,
        max_chars: usize,
    ) -> StoreResult<(Vec<ItemRow>, Option<usize>)>;

    /// Whether progress reaches other instances through the engine (then `publish` sends the
    /// other events, and `finish` its progress event).
    fn shared(&self) -> bool;

    /// Sends an event to every instance (shared engines only).
    async fn publish(&self, payload: &str) -> StoreResult<()>;

    /// Queries sent to the database so far, when it counts them.
    fn round_trips(&self) -> Option<u64>;
}

/// An item's stored outcome columns: (state, result JSON, error JSON).
fn outcome_columns(outcome: &ItemOutcome) -> (&'static str, Option<String>, Option<String>) {
    // Plain data with string keys: encoding cannot fail.
    let text = |value: serde_json::Result<String>| value.ok();
    match outcome {
        ItemOutcome::Read(page) => ("done", text(serde_json::to_string(page)), None),
        ItemOutcome::Failed(error) => ("failed", None, text(serde_json::to_string(error))),
        ItemOutcome::Skipped(skip) => ("skipped", None, text(serde_json::to_string(skip))),
        ItemOutcome::Listed(listing) => ("listed", text(serde_json::to_string(listing)), None),
    }
}

/// The error column of an item its task's cancellation skipped.
fn cancelled_error() -> Option<String> {
    let skip = Skip {
        reason: super::SkipReason::Cancelled,
        rule: None,
        title: None,
    };
    outcome_columns(&ItemOutcome::Skipped(skip)).2
}

/// The outcome columns of a URL a task found: (state, result JSON, error JSON). It takes
/// one of the task's `max_pages` unless it is skipped, and is skipped when `room` is none.
fn found_columns(found: &Found, room: bool) -> (&'static str, Option<String>, Option<String>) {
    let reason = match found.skip {
        Some(reason) => Some(reason),
        None if !room => Some(super::SkipReason::MaxPages),
        None => None,
    };
    let title = found.title.clone();
    match reason {
        None if found.list_only => outcome_columns(&ItemOutcome::Listed(Listing { title })),
        None => ("pending", None, None),
        Some(reason) => outcome_columns(&ItemOutcome::Skipped(Skip {
            reason,
            rule: found.rule.clone(),
            title,
        })),
    }
}

/// The per-host limit's unit of a stored URL.
fn host_of(url: &str) -> String {
    url::Url::parse(url)
        .map(|u| super::host_key(&u))
        .unwrap_or_default()
}

/// A stored result that a conditional request can stand on.
fn with_validators(result: Option<String>) -> Option<Page> {
    let page: Page = serde_json::from_str(&result?).ok()?;
    (page.etag.is_some() || page.last_modified.is_some()).then_some(page)
}

/// An item's outcome from its stored columns.
fn stored_outcome(state: &str, result: Option<String>, error: Option<String>) -> ItemOutcome {
    let unreadable = |e: serde_json::Error| ToolError::internal(format!("stored result: {e}"));
    match (state, result, error) {
        ("skipped", _, Some(skip)) => serde_json::from_str(&skip)
            .map_or_else(|e| ItemOutcome::Failed(unreadable(e)), ItemOutcome::Skipped),
        ("listed", Some(listing), _) => serde_json::from_str(&listing)
            .map_or_else(|e| ItemOutcome::Failed(unreadable(e)), ItemOutcome::Listed),
        (_, Some(result), _) => serde_json::from_str(&result).map_or_else(
            |e| ItemOutcome::Failed(unreadable(e)),
            |page| ItemOutcome::Read(Box::new(page)),
        ),
        (_, None, Some(error)) => {
            ItemOutcome::Failed(serde_json::from_str(&error).unwrap_or_else(unreadable))
        }
        _ => ItemOutcome::Failed(ToolError::internal("a finished item without its outcome")),
    }
}

/// A task row from its stored columns; a row this version cannot read (written by another one)
/// still lists, flagged in the log.
fn stored_task(
    id: String,
    tenant: String,
    created_ms: i64,
    status: &str,
    options: &str,
    total: i64,
) -> TaskRow {
    let status = TaskStatus::parse(status).unwrap_or_else(|| {
        tracing::warn!(task = %id, status, "unknown crawl task status; shown as failed");
        TaskStatus::Failed
    });
    let options = serde_json::from_str(options).unwrap_or_else(|error| {
        tracing::warn!(task = %id, %error, "unreadable crawl task options");
        TaskOptions::default()
    });
    TaskRow {
        id: TaskId::made(id),
        tenant: TenantName::from_stored(&tenant),
        created_ms,
        status,
        options,
        total: total.max(0) as usize,
    }
}
