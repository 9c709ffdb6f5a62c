//! Crawl tasks and their results in SQLite (`webpilot.db` in the data dir). An item is written
//! once, with its result, so a restart re-runs exactly the items that never finished.

use std::path::Path;
use std::sync::Mutex;

use rusqlite::{Connection, OptionalExtension, params};

use super::{TaskOptions, TaskStatus};
use crate::error::ToolError;
use crate::pages::Page;

const SCHEMA: &str = "
PRAGMA journal_mode = WAL;
PRAGMA synchronous = NORMAL;
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
    PRIMARY KEY (task_id, idx)
);
";

/// Brings a database of an older version up to this schema.
const MIGRATIONS: [(&str, &str); 1] = [(
    "tenant",
    "ALTER TABLE tasks ADD COLUMN tenant TEXT NOT NULL DEFAULT ''",
)];

/// A task's row.
#[derive(Debug, Clone)]
pub struct TaskRow {
    pub id: String,
    /// Whose task it is (empty: the operator's).
    pub tenant: String,
    pub created_ms: i64,
    pub status: TaskStatus,
    pub options: TaskOptions,
    pub total: usize,
}

/// A finished item.
#[derive(Debug, Clone)]
pub struct ItemRow {
    pub index: usize,
    pub url: String,
    pub outcome: Result<Page, ToolError>,
}

pub struct Store {
    connection: Mutex<Connection>,
}

type DbResult<T> = Result<T, rusqlite::Error>;

impl Store {
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let connection = Connection::open(path)?;
        connection.execute_batch(SCHEMA)?;
        for (column, migration) in MIGRATIONS {
            let present: bool = connection.query_row(
                "SELECT COUNT(*) FROM pragma_table_info('tasks') WHERE name = ?1",
                params![column],
                |row| row.get(0),
            )?;
            if !present {
                connection.execute_batch(migration)?;
            }
        }
        Ok(Self {
            connection: Mutex::new(connection),
        })
    }

    fn db(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.connection.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn create(
        &self,
        id: &str,
        tenant: &str,
        created_ms: i64,
        options: &TaskOptions,
        urls: &[String],
    ) -> DbResult<()> {
        let options = serde_json::to_string(options).unwrap_or_default();
        let mut db = self.db();
        let tx = db.transaction()?;
        tx.execute(
            "INSERT INTO tasks (id, created_ms, status, options, total, tenant)
             VALUES (?1, ?2, 'pending', ?3, ?4, ?5)",
            params![id, created_ms, options, urls.len() as i64, tenant],
        )?;
        {
            let mut insert = tx.prepare(
                "INSERT INTO items (task_id, idx, url, state) VALUES (?1, ?2, ?3, 'pending')",
            )?;
            for (index, url) in urls.iter().enumerate() {
                insert.execute(params![id, index as i64, url])?;
            }
        }
        tx.commit()
    }

    pub fn set_status(&self, id: &str, status: TaskStatus) -> DbResult<()> {
        self.db()
            .execute(
                "UPDATE tasks SET status = ?2 WHERE id = ?1",
                params![id, status.as_str()],
            )
            .map(drop)
    }

    pub fn task(&self, id: &str) -> DbResult<Option<TaskRow>> {
        self.db()
            .query_row(
                "SELECT id, created_ms, status, options, total, tenant FROM tasks WHERE id = ?1",
                params![id],
                task_row,
            )
            .optional()
    }

    /// `tenant`'s tasks, newest first, optionally with one status.
    pub fn tasks(
        &self,
        tenant: &str,
        status: Option<TaskStatus>,
        limit: usize,
    ) -> DbResult<Vec<TaskRow>> {
        let status = status.map(TaskStatus::as_str);
        let db = self.db();
        let mut query = db.prepare(
            "SELECT id, created_ms, status, options, total, tenant FROM tasks
             WHERE tenant = ?3 AND (?1 IS NULL OR status = ?1)
             ORDER BY created_ms DESC, id LIMIT ?2",
        )?;
        let rows = query.query_map(params![status, limit as i64, tenant], task_row)?;
        rows.collect()
    }

    /// Tasks a previous run left unfinished.
    pub fn unfinished(&self) -> DbResult<Vec<String>> {
        let db = self.db();
        let mut query = db.prepare(
            "SELECT id FROM tasks WHERE status IN ('pending', 'running') ORDER BY created_ms",
        )?;
        let rows = query.query_map([], |row| row.get(0))?;
        rows.collect()
    }

    /// Items still to do, in order.
    pub fn pending(&self, id: &str) -> DbResult<Vec<(usize, String)>> {
        let db = self.db();
        let mut query = db.prepare(
            "SELECT idx, url FROM items WHERE task_id = ?1 AND state = 'pending' ORDER BY idx",
        )?;
        let rows = query.query_map(params![id], |row| Ok((count(row, 0)?, row.get(1)?)))?;
        rows.collect()
    }

    /// Records an item's outcome once; false when it was already recorded.
    pub fn finish(
        &self,
        id: &str,
        index: usize,
        outcome: &Result<Page, ToolError>,
    ) -> DbResult<bool> {
        // Plain data with string keys: encoding cannot fail.
        let text = |value: serde_json::Result<String>| value.ok();
        let (state, result, error) = match outcome {
            Ok(page) => ("done", text(serde_json::to_string(page)), None),
            Err(error) => ("failed", None, text(serde_json::to_string(error))),
        };
        let changed = self.db().execute(
            "UPDATE items SET state = ?3, result = ?4, error = ?5,
                 finished_seq = (SELECT COALESCE(MAX(finished_seq), 0) + 1 FROM items WHERE task_id = ?1)
             WHERE task_id = ?1 AND idx = ?2 AND state = 'pending'",
            params![id, index as i64, state, result, error],
        )?;
        Ok(changed == 1)
    }

    /// How many items are finished.
    pub fn progress(&self, id: &str) -> DbResult<usize> {
        self.counts(id).map(|(finished, _)| finished)
    }

    /// Finished and failed items, counted without reading their results.
    pub fn counts(&self, id: &str) -> DbResult<(usize, usize)> {
        self.db().query_row(
            "SELECT COUNT(*), COALESCE(SUM(state = 'failed'), 0) FROM items
             WHERE task_id = ?1 AND state != 'pending'",
            params![id],
            |row| Ok((count(row, 0)?, count(row, 1)?)),
        )
    }

    /// Finished items in the order they finished.
    pub fn finished(&self, id: &str) -> DbResult<Vec<ItemRow>> {
        let db = self.db();
        let mut query = db.prepare(
            "SELECT idx, url, result, error FROM items
             WHERE task_id = ?1 AND state != 'pending' ORDER BY finished_seq",
        )?;
        let rows = query.query_map(params![id], item_row)?;
        rows.collect()
    }

    /// Finished items from URL index `from` on, in URL order, while their stored JSON fits
    /// `max_chars` (at least one), and the index of the first one left out. Rows past the budget
    /// are not read.
    pub fn finished_page(
        &self,
        id: &str,
        from: usize,
        max_chars: usize,
    ) -> DbResult<(Vec<ItemRow>, Option<usize>)> {
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
}

fn item_row(row: &rusqlite::Row<'_>) -> DbResult<ItemRow> {
    let result: Option<String> = row.get(2)?;
    let error: Option<String> = row.get(3)?;
    let unreadable = |e: serde_json::Error| ToolError::internal(format!("stored result: {e}"));
    let outcome = match (result, error) {
        (Some(result), _) => serde_json::from_str(&result).map_err(unreadable),
        (None, Some(error)) => Err(serde_json::from_str(&error).unwrap_or_else(unreadable)),
        (None, None) => Err(ToolError::internal("a finished item without its outcome")),
    };
    Ok(ItemRow {
        index: count(row, 0)?,
        url: row.get(1)?,
        outcome,
    })
}

fn task_row(row: &rusqlite::Row<'_>) -> DbResult<TaskRow> {
    let status: String = row.get(2)?;
    let options: String = row.get(3)?;
    let id: String = row.get(0)?;
    // A row this version cannot read (written by another one) still lists, flagged in the log.
    let status = TaskStatus::parse(&status).unwrap_or_else(|| {
        tracing::warn!(task = %id, status, "unknown crawl task status; shown as failed");
        TaskStatus::Failed
    });
    let options = serde_json::from_str(&options).unwrap_or_else(|error| {
        tracing::warn!(task = %id, %error, "unreadable crawl task options");
        TaskOptions::default()
    });
    Ok(TaskRow {
        id,
        tenant: row.get(5)?,
        created_ms: row.get(1)?,
        status,
        options,
        total: count(row, 4)?,
    })
}

/// A non-negative integer column as usize (SQLite integers are i64).
fn count(row: &rusqlite::Row<'_>, column: usize) -> DbResult<usize> {
    Ok(row.get::<_, i64>(column)?.max(0) as usize)
}
