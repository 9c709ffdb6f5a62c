//! Reading tasks back: a tenant's task summaries, one task's report (whole or a page of it),
//! progress subscriptions. Another tenant's task answers as if it did not exist.

use super::*;

impl Crawler {
    /// Queries this instance sent to the crawl store, when the store counts them.
    pub fn store_round_trips(&self) -> Option<u64> {
        self.store.round_trips()
    }

    /// Progress events of `tenant`'s task from now on, with its status at subscription time.
    pub async fn subscribe(
        &self,
        tenant: &Tenant,
        id: &TaskId,
    ) -> ToolResult<(TaskSummary, broadcast::Receiver<CrawlEvent>)> {
        // Subscribed before reading the status: a `done` in between is in the receiver.
        let receiver = {
            let mut channels = self.channels.locked();
            channels
                .entry(id.clone())
                .or_insert_with(|| broadcast::channel(EVENT_BUFFER).0)
                .subscribe()
        };
        let summary = self.summary(tenant, id).await;
        if summary.as_ref().map_or(true, |s| s.status.is_finished()) {
            let mut channels = self.channels.locked();
            if channels.get(id).is_some_and(|s| s.receiver_count() <= 1) {
                channels.remove(id);
            }
        }
        Ok((summary?, receiver))
    }

    /// Status and counts of `tenant`'s task, without its results. Another tenant's task is as
    /// unknown as one that never was.
    pub async fn summary(&self, tenant: &Tenant, id: &TaskId) -> ToolResult<TaskSummary> {
        let task = self.owned(tenant, id).await?;
        self.summarize(task).await
    }

    /// `tenant`'s task as stored; another tenant's is as unknown as one that never was.
    pub(super) async fn owned(&self, tenant: &Tenant, id: &TaskId) -> ToolResult<TaskRow> {
        self.store
            .owned_task(tenant.name(), id)
            .await
            .map_err(database_error)?
            .ok_or_else(|| no_such_task(id))
    }

    pub(super) async fn summarize(&self, task: TaskRow) -> ToolResult<TaskSummary> {
        let counts = self.store.counts(&task.id).await.map_err(database_error)?;
        Ok(summary_of(task, counts))
    }
}

/// A task's summary from its row and its items' counts.
pub(super) fn summary_of(task: TaskRow, counts: store::Counts) -> TaskSummary {
    TaskSummary {
        task_id: task.id,
        status: task.status,
        progress: counts.finished,
        skipped: counts.skipped,
        listed: counts.listed,
        total: task.total,
        created_ms: task.created_ms,
        options: task.options,
    }
}

impl Crawler {
    /// Status, results and errors of a task, in the order URLs finished.
    pub async fn status(&self, tenant: &Tenant, id: &TaskId) -> ToolResult<TaskReport> {
        let summary = self.summary(tenant, id).await?;
        let finished = self.store.finished(id).await.map_err(database_error)?;
        Ok(with_items(summary, finished))
    }

    /// Status and the results and errors of URLs from index `from` on, in URL order, as many as
    /// fit `max_chars` (at least one), plus the index of the first URL left out.
    pub async fn status_page(
        &self,
        tenant: &Tenant,
        id: &TaskId,
        from: usize,
        max_chars: usize,
    ) -> ToolResult<(TaskReport, Option<usize>)> {
        let summary = self.summary(tenant, id).await?;
        // Every URL of the task has an index: those read, skipped or listed.
        let urls = summary.total + summary.skipped + summary.listed;
        if from > urls {
            return Err(ToolError::invalid(format!(
                "field `cursor` points past the task's {urls} URLs"
            ))
            .with_hint("pass the next_cursor of the previous result, or omit cursor"));
        }
        let (items, next) = self
            .store
            .finished_page(id, from, max_chars)
            .await
            .map_err(database_error)?;
        Ok((with_items(summary, items), next))
    }

    /// `tenant`'s task summaries, newest first.
    pub async fn list(
        &self,
        tenant: &Tenant,
        status: Option<TaskStatus>,
        limit: usize,
    ) -> ToolResult<TaskList> {
        let rows = self
            .store
            .tasks(tenant.name(), status, limit)
            .await
            .map_err(database_error)?;
        let mut tasks = Vec::with_capacity(rows.len());
        for row in rows {
            tasks.push(self.summarize(row).await?);
        }
        Ok(TaskList { tasks })
    }
}

/// `summary` with the items split into `results`, `errors` and `skipped`, in the given order.
pub(super) fn with_items(summary: TaskSummary, items: Vec<ItemRow>) -> TaskReport {
    let (mut results, mut errors) = (Vec::new(), Vec::new());
    let (mut skipped, mut listed) = (Vec::new(), Vec::new());
    for item in items {
        let (index, url) = (item.index, item.url);
        let origin = Origin {
            depth: item.depth,
            from: item.from,
        };
        match item.outcome {
            ItemOutcome::Read(result) => results.push(ItemResult {
                index,
                url,
                origin,
                result: *result,
            }),
            ItemOutcome::Failed(error) => errors.push(ItemError {
                index,
                url,
                origin,
                error,
            }),
            ItemOutcome::Skipped(skip) => skipped.push(ItemSkipped {
                index,
                url,
                origin,
                skip,
            }),
            ItemOutcome::Listed(listing) => listed.push(ItemListed {
                index,
                url,
                origin,
                listing,
            }),
        }
    }
    TaskReport {
        summary,
        results,
        errors,
        skipped,
        listed,
    }
}

pub(super) fn no_such_task(id: &TaskId) -> ToolError {
    ToolError::new(
        ErrorCode::NoSuchTask,
        format!("no crawl task {:?}", id.as_str()),
    )
    .with_hint("use the task_id crawl_batch returned; GET /api/crawler/tasks lists tasks")
}
