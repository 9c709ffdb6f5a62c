//! The embedded engine: crawl tasks in SQLite (`webpilot.db` in the data dir), used by one
//! instance. Claims are leases like PostgreSQL's, but the only instance clears them at start,
//! and its own per-host semaphores keep the host limit.

use crate::db::sqlite::Sqlite;
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use super::{
    Claim, Counts, CrawlStore, ItemRow, Lease, Recorded, StoreResult, TaskRow, found_columns,
    outcome_columns, stored_outcome, stored_task,
};
use crate::crawl::{Found, ItemOutcome, TaskStatus};
use crate::ids::{TaskId, TenantName};
use crate::pages::Page;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY,
    created_ms INTEGER NOT NULL,
    status TEXT NOT NULL,
    options TEXT NOT NULL,
    total INTEGER NOT NULL,
    tenant TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS items (
    task_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    url TEXT NOT NULL,
    state TEXT NOT NULL,
    result TEXT,
    error TEXT,
    finished_seq INTEGER,
    claimed_by TEXT,
    lease_until INTEGER,
    PRIMARY KEY (task_id, idx)
);
-- A re-crawl looks up the tenant's earlier reads of a URL.
CREATE INDEX IF NOT EXISTS items_by_url ON items (url);
-- A task's counts by outcome come from this index alone.
CREATE INDEX IF NOT EXISTS items_by_state ON items (task_id, state, finished_seq);
";

/// Brings a database of an older version up to this schema: (table, column, statement).
const MIGRATIONS: [(&str, &str, &str); 9] = [
    (
        "tasks",
        "tenant",
        "ALTER TABLE tasks ADD COLUMN tenant TEXT NOT NULL DEFAULT ''",
    ),
    (
        "items",
        "claimed_by",
        "ALTER TABLE items ADD COLUMN claimed_by TEXT",
    ),
    (
        "items",
        "lease_until",
        "ALTER TABLE items ADD COLUMN lease_until INTEGER",
    ),
    // A site crawl reads each page once: one item per normalised URL (none for older rows).
    (
        "items",
        "key",
        "ALTER TABLE items ADD COLUMN key TEXT;
         CREATE UNIQUE INDEX items_by_key ON items (task_id, key) WHERE key IS NOT NULL;",
    ),
    (
        "items",
        "depth",
        "ALTER TABLE items ADD COLUMN depth INTEGER NOT NULL DEFAULT 0",
    ),
    (
        "items",
        "found_from",
        "ALTER TABLE items ADD COLUMN found_from TEXT",
    ),
    // Counts kept on the task's row, so that recording a page or adding the pages it links to
    // does not count the task's items (a site crawl's grow to thousands).
    (
        "tasks",
        "finished",
        "ALTER TABLE tasks ADD COLUMN finished INTEGER NOT NULL DEFAULT 0;
         UPDATE tasks SET finished =
             (SELECT COUNT(finished_seq) FROM items WHERE items.task_id = tasks.id);",
    ),
    (
        "tasks",
        "items",
        "ALTER TABLE tasks ADD COLUMN items INTEGER NOT NULL DEFAULT 0;
         UPDATE tasks SET items = (SELECT COUNT(*) FROM items WHERE items.task_id = tasks.id);",
    ),
    (
        "tasks",
        "queued",
        "ALTER TABLE tasks ADD COLUMN queued INTEGER NOT NULL DEFAULT 0;
         UPDATE tasks SET queued = (SELECT COUNT(*) FROM items
             WHERE items.task_id = tasks.id AND items.state != 'skipped');",
    ),
];

/// The columns an item is read back with.
const ITEM_COLUMNS: &str = "idx, url, state, result, error, depth, found_from";

pub struct SqliteStore {
    sqlite: Sqlite,
}

type DbResult<T> = Result<T, rusqlite::Error>;

impl SqliteStore {
    pub fn open(sqlite: Sqlite) -> anyhow::Result<Self> {
        sqlite.migrate(SCHEMA, &MIGRATIONS)?;
        // One instance per file: claims of a previous run died with it.
        sqlite.lock().execute_batch(
            "UPDATE items SET claimed_by = NULL, lease_until = NULL WHERE claimed_by IS NOT NULL",
        )?;
        Ok(Self { sqlite })
    }

    fn counts_now(db: &Connection, id: &TaskId) -> DbResult<Counts> {
        db.query_row(
            "SELECT COUNT(finished_seq), COALESCE(SUM(state = 'failed'), 0),
                    COALESCE(SUM(state = 'done'), 0), COALESCE(SUM(state = 'skipped'), 0),
                    COALESCE(SUM(state = 'listed'), 0)
             FROM items WHERE task_id = ?1 AND state != 'pending'",
            params![id],
            |row| {
                Ok(Counts {
                    finished: count(row, 0)?,
                    failed: count(row, 1)?,
                    read: count(row, 2)?,
                    skipped: count(row, 3)?,
                    listed: count(row, 4)?,
                })
            },
        )
    }

    /// Inserts found URLs after the task's last (their room counted from its `queued`, those
    /// that take one of its `max_pages`), keeps the task's counts, and says which were new.
    fn insert_found(
        tx: &rusqlite::Transaction<'_>,
        id: &TaskId,
        found: &[Found],
        max_pages: usize,
    ) -> DbResult<Vec<bool>> {
        let (items, queued): (i64, i64) = tx.query_row(
            "SELECT items, queued FROM tasks WHERE id = ?1",
            params![id],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )?;
        let (mut next, mut room) = (items, max_pages.saturating_sub(queued.max(0) as usize));
        let (mut taking, mut pending) = (0i64, 0i64);
        let mut insert = tx.prepare(
            "INSERT OR IGNORE INTO items
                 (task_id, idx, url, key, depth, found_from, state, result, error)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?;
        let mut added = Vec::with_capacity(found.len());
        for item in found {
            let (state, result, error) = found_columns(item, room > 0);
            let new = insert.execute(params![
                id, next, item.url, item.key, item.depth, item.from, state, result, error
            ])? == 1;
            if new {
                next += 1;
                room -= usize::from(state != "skipped");
                taking += i64::from(state != "skipped");
                pending += i64::from(state == "pending");
            }
            added.push(new);
        }
        tx.execute(
            "UPDATE tasks SET items = ?2, queued = queued + ?3, total = total + ?4 WHERE id = ?1",
            params![id, next, taking, pending],
        )?;
        Ok(added)
    }
}

#[async_trait]
impl CrawlStore for SqliteStore {
    async fn create(&self, task: &TaskRow, seeds: &[Found], _per_host: usize) -> StoreResult<()> {
        let options = serde_json::to_string(&task.options).unwrap_or_default();
        let (task, seeds) = (task.clone(), seeds.to_vec());
        self.sqlite
            .run(move |db| {
                let tx = db.transaction()?;
                tx.execute(
                    "INSERT INTO tasks (id, created_ms, status, options, total, tenant)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![
                        task.id,
                        task.created_ms,
                        task.status.as_str(),
                        options,
                        0,
                        task.tenant.stored()
                    ],
                )?;
                Self::insert_found(&tx, &task.id, &seeds, usize::MAX)?;
                Ok(tx.commit()?)
            })
            .await
    }

    async fn add(
        &self,
        id: &TaskId,
        found: &[Found],
        max_pages: usize,
        _per_host: usize,
    ) -> StoreResult<Vec<bool>> {
        let (id, found) = (id.clone(), found.to_vec());
        self.sqlite
            .run(move |db| {
                let tx = db.transaction()?;
                let added = Self::insert_found(&tx, &id, &found, max_pages)?;
                tx.commit()?;
                Ok(added)
            })
            .await
    }

    async fn set_status(&self, id: &TaskId, status: TaskStatus) -> StoreResult<bool> {
        let id = id.clone();
        self.sqlite
            .run(move |db| {
                let changed = db.execute(
                    "UPDATE tasks SET status = ?2
                     WHERE id = ?1 AND status NOT IN ('completed', 'failed', 'cancelled')",
                    params![id, status.as_str()],
                )?;
                Ok(changed == 1)
            })
            .await
    }

    async fn task(&self, id: &TaskId) -> StoreResult<Option<TaskRow>> {
        let id = id.clone();
        self.sqlite
            .run(move |db| {
                Ok(db
                    .query_row(
                        "SELECT id, created_ms, status, options, total, tenant FROM tasks WHERE id = ?1",
                        params![id],
                        task_row,
                    )
                    .optional()?)
            })
            .await
    }

    async fn owned_task(&self, tenant: &TenantName, id: &TaskId) -> StoreResult<Option<TaskRow>> {
        let (id, tenant) = (id.clone(), tenant.stored().to_string());
        self.sqlite
            .run(move |db| {
                Ok(db
                    .query_row(
                        "SELECT id, created_ms, status, options, total, tenant FROM tasks
                         WHERE id = ?1 AND tenant = ?2",
                        params![id, tenant],
                        task_row,
                    )
                    .optional()?)
            })
            .await
    }

    async fn tasks(
        &self,
        tenant: &crate::ids::TenantName,
        status: Option<TaskStatus>,
        limit: usize,
    ) -> StoreResult<Vec<TaskRow>> {
        let (status, tenant) = (status.map(TaskStatus::as_str), tenant.stored().to_string());
        self.sqlite
            .run(move |db| {
                let mut query = db.prepare(
                    "SELECT id, created_ms, status, options, total, tenant FROM tasks
                     WHERE tenant = ?3 AND (?1 IS NULL OR status = ?1)
                     ORDER BY created_ms DESC, id LIMIT ?2",
                )?;
                let rows = query.query_map(params![status, limit as i64, tenant], task_row)?;
                Ok(rows.collect::<DbResult<_>>()?)
            })
            .await
    }

    async fn unfinished(&self) -> StoreResult<Vec<TaskId>> {
        self.sqlite
            .run(|db| {
                let mut query = db.prepare(
                    "SELECT id FROM tasks WHERE status IN ('pending', 'running') ORDER BY created_ms",
                )?;
                let rows = query.query_map([], |row| row.get(0).map(TaskId::made))?;
                Ok(rows.collect::<DbResult<_>>()?)
            })
            .await
    }

    async fn claim(&self, id: &TaskId, lease: &Lease) -> StoreResult<Claim> {
        let (id, lease) = (id.clone(), lease.clone());
        self.sqlite.run(move |db| claim_next(db, &id, &lease)).await
    }

    async fn cancel(&self, id: &TaskId) -> StoreResult<bool> {
        let id = id.clone();
        self.sqlite.run(move |db| cancel_task(db, &id)).await
    }

    async fn renew(&self, id: &TaskId, index: usize, lease: &Lease) -> StoreResult<bool> {
        let until = now_ms() + lease.length.as_millis() as i64;
        let (id, owner) = (id.clone(), lease.owner.clone());
        self.sqlite
            .run(move |db| {
                let changed = db.execute(
                    "UPDATE items SET lease_until = ?4
                     WHERE task_id = ?1 AND idx = ?2 AND claimed_by = ?3 AND state = 'pending'",
                    params![id, index as i64, owner, until],
                )?;
                Ok(changed == 1)
            })
            .await
    }

    async fn release(&self, id: &TaskId, lease: &Lease) -> StoreResult<()> {
        let (id, owner) = (id.clone(), lease.owner.clone());
        self.sqlite
            .run(move |db| {
                db.execute(
                    "UPDATE items SET claimed_by = NULL, lease_until = NULL
                     WHERE task_id = ?1 AND claimed_by = ?2 AND state = 'pending'",
                    params![id, owner],
                )?;
                Ok(())
            })
            .await
    }

    async fn finish(
        &self,
        id: &TaskId,
        index: usize,
        outcome: &ItemOutcome,
        lease: &Lease,
        _announcement: &str,
    ) -> StoreResult<Option<Recorded>> {
        let (state, result, error) = outcome_columns(outcome);
        let (id, owner) = (id.clone(), lease.owner.clone());
        self.sqlite
            .run(move |db| finish_item(db, &id, index, (state, result, error), &owner))
            .await
    }

    async fn counts(&self, id: &TaskId) -> StoreResult<Counts> {
        let id = id.clone();
        self.sqlite
            .run(move |db| Ok(Self::counts_now(db, &id)?))
            .await
    }

    async fn last_read(
        &self,
        tenant: &crate::ids::TenantName,
        url: &str,
    ) -> StoreResult<Option<Page>> {
        let (tenant, url) = (tenant.stored().to_string(), url.to_string());
        let result: Option<Option<String>> = self
            .sqlite
            .run(move |db| {
                Ok(db
                    .query_row(
                        "SELECT items.result FROM items JOIN tasks ON tasks.id = items.task_id
                 WHERE tasks.tenant = ?1 AND items.url = ?2 AND items.result IS NOT NULL
                   AND (items.result LIKE '%\"etag\"%' OR items.result LIKE '%\"last_modified\"%')
                 ORDER BY tasks.created_ms DESC, items.finished_seq DESC LIMIT 1",
                        params![tenant, url],
                        |row| row.get(0),
                    )
                    .optional()?)
            })
            .await?;
        Ok(super::with_validators(result.flatten()))
    }

    async fn finished(&self, id: &TaskId) -> StoreResult<Vec<ItemRow>> {
        let id = id.clone();
        self.sqlite
            .run(move |db| {
                let mut query = db.prepare(&format!(
                    "SELECT {ITEM_COLUMNS} FROM items WHERE task_id = ?1 AND state != 'pending'
                     ORDER BY finished_seq IS NULL, finished_seq, idx"
                ))?;
                let rows = query.query_map(params![id], item_row)?;
                Ok(rows.collect::<DbResult<_>>()?)
            })
            .await
    }

    async fn finished_page(
        &self,
        id: &TaskId,
        from: usize,
        max_chars: usize,
    ) -> StoreResult<(Vec<ItemRow>, Option<usize>)> {
        let id = id.clone();
        self.sqlite
            .run(move |db| finished_items_from(db, &id, from, max_chars))
            .await
    }

    fn shared(&self) -> bool {
        false
    }

    async fn publish(&self, _payload: &str) -> StoreResult<()> {
        Ok(())
    }

    fn round_trips(&self) -> Option<u64> {
        None
    }
}

/// The task's next pending item not under another's lease, claimed for `lease`; else whether
/// items are still pending under leases (busy) or none is left.
fn claim_next(db: &mut Connection, id: &TaskId, lease: &Lease) -> StoreResult<Claim> {
    let now = now_ms();
    let claimed = db
        .query_row(
            "UPDATE items SET claimed_by = ?2, lease_until = ?3
             WHERE rowid = (SELECT rowid FROM items
                            WHERE task_id = ?1 AND state = 'pending'
                              AND (lease_until IS NULL OR lease_until < ?4)
                            ORDER BY idx LIMIT 1)
             RETURNING idx, url, depth",
            params![id, lease.owner, now + lease.length.as_millis() as i64, now],
            |row| {
                Ok(Claim::Item {
                    index: count(row, 0)?,
                    url: row.get(1)?,
                    depth: row.get(2)?,
                })
            },
        )
        .optional()?;
    if let Some(item) = claimed {
        return Ok(item);
    }
    let pending: i64 = db.query_row(
        "SELECT COUNT(*) FROM items WHERE task_id = ?1 AND state = 'pending'",
        params![id],
        |row| row.get(0),
    )?;
    Ok(if pending > 0 {
        Claim::Busy
    } else {
        Claim::Empty
    })
}

/// Cancels a task still pending or running; its pending items are skipped as cancelled.
fn cancel_task(db: &mut Connection, id: &TaskId) -> StoreResult<bool> {
    let tx = db.transaction()?;
    let changed = tx.execute(
        "UPDATE tasks SET status = 'cancelled'
         WHERE id = ?1 AND status IN ('pending', 'running')",
        params![id],
    )?;
    if changed == 1 {
        let skipped = tx.execute(
            "UPDATE items SET state = 'skipped', error = ?2, claimed_by = NULL,
                 lease_until = NULL
             WHERE task_id = ?1 AND state = 'pending'",
            params![id, super::cancelled_error()],
        )?;
        tx.execute(
            "UPDATE tasks SET total = total - ?2 WHERE id = ?1",
            params![id, skipped as i64],
        )?;
    }
    tx.commit()?;
    Ok(changed == 1)
}

/// An item's outcome kept, when the item is still ours (claimed by `owner`).
fn finish_item(
    db: &mut Connection,
    id: &TaskId,
    index: usize,
    (state, result, error): (&str, Option<String>, Option<String>),
    owner: &str,
) -> StoreResult<Option<Recorded>> {
    let tx = db.transaction()?;
    // The task's count orders finishes; it is only kept when the item was ours.
    let (finished, total): (i64, i64) = tx.query_row(
        "UPDATE tasks SET finished = finished + 1 WHERE id = ?1 RETURNING finished, total",
        params![id],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?;
    let changed = tx.execute(
        "UPDATE items SET state = ?3, result = ?4, error = ?5, claimed_by = NULL,
             lease_until = NULL, finished_seq = ?7
         WHERE task_id = ?1 AND idx = ?2 AND state = 'pending' AND claimed_by = ?6",
        params![id, index as i64, state, result, error, owner, finished],
    )?;
    if changed != 1 {
        // Dropped unsaved: the count goes back.
        return Ok(None);
    }
    tx.commit()?;
    Ok(Some(Recorded {
        progress: finished.max(0) as usize,
        total: total.max(0) as usize,
    }))
}

/// Finished items from index `from` on, within `max_chars` of URL and result, and the index
/// to go on from.
fn finished_items_from(
    db: &mut Connection,
    id: &TaskId,
    from: usize,
    max_chars: usize,
) -> StoreResult<(Vec<ItemRow>, Option<usize>)> {
    let mut query = db.prepare(&format!(
        "SELECT {ITEM_COLUMNS},
                length(url) + length(COALESCE(result, error, '')) FROM items
         WHERE task_id = ?1 AND state != 'pending' AND idx >= ?2 ORDER BY idx"
    ))?;
    let mut rows = query.query(params![id, from as i64])?;
    let (mut items, mut used) = (Vec::new(), 0);
    while let Some(row) = rows.next()? {
        let cost = count(row, 7)?;
        if !items.is_empty() && used + cost > max_chars {
            return Ok((items, Some(count(row, 0)?)));
        }
        used += cost;
        items.push(item_row(row)?);
    }
    Ok((items, None))
}

fn item_row(row: &rusqlite::Row<'_>) -> DbResult<ItemRow> {
    Ok(ItemRow {
        index: count(row, 0)?,
        url: row.get(1)?,
        outcome: stored_outcome(&row.get::<_, String>(2)?, row.get(3)?, row.get(4)?),
        depth: row.get(5)?,
        from: row.get(6)?,
    })
}

fn task_row(row: &rusqlite::Row<'_>) -> DbResult<TaskRow> {
    Ok(stored_task(
        row.get(0)?,
        row.get(5)?,
        row.get(1)?,
        &row.get::<_, String>(2)?,
        &row.get::<_, String>(3)?,
        row.get(4)?,
    ))
}

/// A non-negative integer column as usize (SQLite integers are i64).
fn count(row: &rusqlite::Row<'_>, column: usize) -> DbResult<usize> {
    Ok(row.get::<_, i64>(column)?.max(0) as usize)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
