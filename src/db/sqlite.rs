//! The embedded database: `webpilot.db` in the data dir, one connection for the process, shared
//! by the stores that keep their rows there when no PostgreSQL is configured (crawl tasks,
//! conversations). The connection's settings are made once here; each store brings its tables
//! (`migrate`).

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use rusqlite::{Connection, params};

use crate::sync::Locked;

/// The database file's name in the data dir.
pub const FILE: &str = "webpilot.db";

/// The process's connection to the embedded database. A std mutex, taken on the blocking pool
/// (`run`) or for statements short enough to run in place, never held across an await.
#[derive(Clone)]
pub struct Sqlite {
    connection: Arc<Mutex<Connection>>,
}

impl Sqlite {
    /// Opens (creating it and its folder) the database at `path`: write-ahead log, fsync at
    /// checkpoints only.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let connection = Connection::open(path)?;
        connection.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;")?;
        Ok(Self {
            connection: Arc::new(Mutex::new(connection)),
        })
    }

    /// Brings a store's tables up to this version: `schema` (`CREATE … IF NOT EXISTS`), then
    /// each (table, column, statement) whose column a database of an older version lacks.
    pub fn migrate(&self, schema: &str, columns: &[(&str, &str, &str)]) -> anyhow::Result<()> {
        let connection = self.lock();
        connection.execute_batch(schema)?;
        for (table, column, statement) in columns {
            let present: bool = connection.query_row(
                "SELECT COUNT(*) FROM pragma_table_info(?1) WHERE name = ?2",
                params![table, column],
                |row| row.get(0),
            )?;
            if !present {
                connection.execute_batch(statement)?;
            }
        }
        Ok(())
    }

    /// The connection, for one statement or transaction.
    pub fn lock(&self) -> MutexGuard<'_, Connection> {
        self.connection.locked()
    }

    /// Runs `work` with the connection on the blocking pool: a statement waiting for the disk
    /// or for the lock never holds an async worker, and with it every task queued behind it
    /// (`/healthz`, a stream's next event).
    pub async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Connection) -> anyhow::Result<T> + Send + 'static,
    ) -> anyhow::Result<T> {
        let connection = self.connection.clone();
        tokio::task::spawn_blocking(move || work(&mut connection.locked()))
            .await
            .map_err(|e| anyhow::anyhow!("a database task ended before it answered: {e}"))?
    }
}
