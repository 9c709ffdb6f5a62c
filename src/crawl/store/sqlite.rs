//! The embedded engine: crawl tasks in SQLite (`webpilot.db` in the data dir), used by one
//! instance. Claims are leases like PostgreSQL's, but the only instance clears them at start,
//! and its own per-host semaphores keep the host limit.

use crate::db::sqlite::Sqlite;
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use super::{
    Claim, CrawlStore, ItemRow, Lease, Recorded, StoreResult, TaskRow, outcome_columns,
    stored_outcome, stored_task,
};
use crate::crawl::TaskStatus;
use crate::error::ToolError;
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
";

/// Brings a database of an older version up to this schema: (table, column, statement).
const MIGRATIONS: [(&str, &str, &str); 3] = [
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
];

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

    fn db(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.sqlite.lock()
    }

    fn counts_now(db: &Connection, id: &str) -> DbResult<(usize, usize)> {
        db.query_row(
            "SELECT COUNT(*), COALESCE(SUM(state = 'failed'), 0) FROM items
             WHERE task_id = ?1 AND state != 'pending'",
            params![id],
            |row| Ok((count(row, 0)?, count(row, 1)?)),
        )
    }
}

#[async_trait]
impl CrawlStore for SqliteStore {
    async fn create(
        &self,
        task: &TaskRow,
        urls: &[(String, String)],
        _per_host: usize,
    ) -> StoreResult<()> {
        let options = serde_json::to_string(&task.options).unwrap_or_default();
        let mut db = self.db();
        let tx = db.transaction()?;
        tx.execute(
            "INSERT INTO tasks (id, created_ms, status, options, total, tenant)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                task.id,
                task.created_ms,
                task.status.as_str(),
                options,
                urls.len() as i64,
                task.tenant.stored()
            ],
        )?;
        {
            let mut insert = tx.prepare(
                "INSERT INTO items (task_id, idx, url, state) VALUES (?1, ?2, ?3, 'pending')",
            )?;
            for (index, (url, _host)) in urls.iter().enumerate() {
                insert.execute(params![task.id, index as i64, url])?;
            }
        }
        Ok(tx.commit()?)
    }

    async fn set_status(&self, id: &str, status: TaskStatus) -> StoreResult<bool> {
        let changed = self.db().execute(
            "UPDATE tasks SET status = ?2 WHERE id = ?1 AND status NOT IN ('completed', 'failed')",
            params![id, status.as_str()],
        )?;
        Ok(changed == 1)
    }

    async fn task(&self, id: &str) -> StoreResult<Option<TaskRow>> {
        Ok(self
            .db()
            .query_row(
                "SELECT id, created_ms, status, options, total, tenant FROM tasks WHERE id = ?1",
                params![id],
                task_row,
            )
            .optional()?)
    }

    async fn tasks(
        &self,
        tenant: &crate::ids::TenantName,
        status: Option<TaskStatus>,
        limit: usize,
    ) -> StoreResult<Vec<TaskRow>> {
        let status = status.map(TaskStatus::as_str);
        let db = self.db();
        let mut query = db.prepare(
            "SELECT id, created_ms, status, options, total, tenant FROM tasks
             WHERE tenant = ?3 AND (?1 IS NULL OR status = ?1)
             ORDER BY created_ms DESC, id LIMIT ?2",
        )?;
        let rows = query.query_map(params![status, limit as i64, tenant.stored()], task_row)?;
        Ok(rows.collect::<DbResult<_>>()?)
    }

    async fn unfinished(&self) -> StoreResult<Vec<String>> {
        let db = self.db();
        let mut query = db.prepare(
            "SELECT id FROM tasks WHERE status IN ('pending', 'running') ORDER BY created_ms",
        )?;
        let rows = query.query_map([], |row| row.get(0))?;
        Ok(rows.collect::<DbResult<_>>()?)
    }

    async fn claim(&self, id: &str, lease: &Lease) -> StoreResult<Claim> {
        let now = now_ms();
        let db = self.db();
        let claimed = db
            .query_row(
                "UPDATE items SET claimed_by = ?2, lease_until = ?3
                 WHERE rowid = (SELECT rowid FROM items
                                WHERE task_id = ?1 AND state = 'pending'
                                  AND (lease_until IS NULL OR lease_until < ?4)
                                ORDER BY idx LIMIT 1)
                 RETURNING idx, url",
                params![id, lease.owner, now + lease.length.as_millis() as i64, now],
                |row| Ok((count(row, 0)?, row.get::<_, String>(1)?)),
            )
            .optional()?;
        if let Some((index, url)) = claimed {
            return Ok(Claim::Item { index, url });
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

    async fn renew(&self, id: &str, index: usize, lease: &Lease) -> StoreResult<bool> {
        let until = now_ms() + lease.length.as_millis() as i64;
        let changed = self.db().execute(
            "UPDATE items SET lease_until = ?4
             WHERE task_id = ?1 AND idx = ?2 AND claimed_by = ?3 AND state = 'pending'",
            params![id, index as i64, lease.owner, until],
        )?;
        Ok(changed == 1)
    }

    async fn release(&self, id: &str, lease: &Lease) -> StoreResult<()> {
        self.db().execute(
            "UPDATE items SET claimed_by = NULL, lease_until = NULL
             WHERE task_id = ?1 AND claimed_by = ?2 AND state = 'pending'",
            params![id, lease.owner],
        )?;
        Ok(())
    }

    async fn finish(
        &self,
        id: &str,
        index: usize,
        outcome: &Result<Page, ToolError>,
        lease: &Lease,
        _announcement: &str,
    ) -> StoreResult<Option<Recorded>> {
        let (state, result, error) = outcome_columns(outcome);
        let db = self.db();
        let changed = db.execute(
            "UPDATE items SET state = ?3, result = ?4, error = ?5, claimed_by = NULL, lease_until = NULL,
                 finished_seq = (SELECT COALESCE(MAX(finished_seq), 0) + 1 FROM items WHERE task_id = ?1)
             WHERE task_id = ?1 AND idx = ?2 AND state = 'pending' AND claimed_by = ?6",
            params![id, index as i64, state, result, error, lease.owner],
        )?;
        if changed != 1 {
            return Ok(None);
        }
        let (progress, _) = Self::counts_now(&db, id)?;
        Ok(Some(Recorded { progress }))
    }

    async fn counts(&self, id: &str) -> StoreResult<(usize, usize)> {
        Ok(Self::counts_now(&self.db(), id)?)
    }

    async fn last_read(
        &self,
        tenant: &crate::ids::TenantName,
        url: &str,
    ) -> StoreResult<Option<Page>> {
        let result: Option<Option<String>> = self
            .db()
            .query_row(
                "SELECT items.result FROM items JOIN tasks ON tasks.id = items.task_id
                 WHERE tasks.tenant = ?1 AND items.url = ?2 AND items.result IS NOT NULL
                   AND (items.result LIKE '%\"etag\"%' OR items.result LIKE '%\"last_modified\"%')
                 ORDER BY tasks.created_ms DESC, items.finished_seq DESC LIMIT 1",
                params![tenant.stored(), url],
                |row| row.get(0),
            )
            .optional()?;
        Ok(super::with_validators(result.flatten()))
    }

    async fn finished(&self, id: &str) -> StoreResult<Vec<ItemRow>> {
        let db = self.db();
        let mut query = db.prepare(
            "SELECT idx, url, result, error FROM items
             WHERE task_id = ?1 AND state != 'pending' ORDER BY finished_seq",
        )?;
        let rows = query.query_map(params![id], item_row)?;
        Ok(rows.collect::<DbResult<_>>()?)
    }

    async fn finished_page(
        &self,
        id: &str,
        from: usize,
        max_chars: usize,
    ) -> StoreResult<(Vec<ItemRow>, Option<usize>)> {
        let db = self.db();
        let mut query = db.prepare(
            "SELECT idx, url, result, error,
                    length(url) + length(COALESCE(result, error, '')) FROM items
             WHERE task_id = ?1 AND state != 'pending' AND idx >= ?2 ORDER BY idx",
        )?;
        let mut rows = query.query(params![id, from as i64])?;
        let (mut items, mut used) = (Vec::new(), 0);
        while let Some(row) = rows.next()? {
            let cost = count(row, 4)?;
            if !items.is_empty() && used + cost > max_chars {
                return Ok((items, Some(count(row, 0)?)));
            }
            used += cost;
            items.push(item_row(row)?);
        }
        Ok((items, None))
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

fn item_row(row: &rusqlite::Row<'_>) -> DbResult<ItemRow> {
    Ok(ItemRow {
        index: count(row, 0)?,
        url: row.get(1)?,
        outcome: stored_outcome(row.get(2)?, row.get(3)?),
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
