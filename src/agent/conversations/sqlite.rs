//! The embedded engine: conversations in SQLite (`webpilot.db` in the data dir), their images as
//! files under `<data dir>/conversations/<id>/`.

use crate::db::sqlite::Sqlite;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use super::{
    Conversation, ConversationStore, Record, StoredMessage, Turn, message_columns, stored_message,
    tools_column, tools_of,
};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS conversations (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    title TEXT NOT NULL,
    model TEXT,
    tools TEXT,
    session TEXT,
    created_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS conversation_messages (
    conversation_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    message TEXT NOT NULL,
    summary TEXT,
    files TEXT,
    created_ms INTEGER NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);
";

pub struct SqliteStore {
    sqlite: Sqlite,
    files: PathBuf,
}

impl SqliteStore {
    pub fn open(sqlite: Sqlite, data_dir: &Path) -> anyhow::Result<Self> {
        sqlite.migrate(SCHEMA, &[])?;
        Ok(Self {
            sqlite,
            files: data_dir.join("conversations"),
        })
    }
}

fn conversation_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Conversation> {
    Ok(Conversation {
        id: row.get(0)?,
        title: row.get(1)?,
        model: row.get(2)?,
        tools: tools_of(row.get(3)?),
        session: row.get(4)?,
        created_ms: row.get(5)?,
        updated_ms: row.get(6)?,
    })
}

#[async_trait]
impl ConversationStore for SqliteStore {
    async fn create(&self, tenant: &str, c: &Conversation) -> anyhow::Result<()> {
        let (tenant, c) = (tenant.to_string(), c.clone());
        self.sqlite
            .run(move |db| {
                db.execute(
                    "INSERT INTO conversations (id, tenant, title, model, tools, session, created_ms, updated_ms) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                    params![c.id, tenant, c.title, c.model, tools_column(&c.tools), c.session, c.created_ms, c.updated_ms],
                )?;
                Ok(())
            })
            .await
    }

    async fn list(
        &self,
        tenant: &str,
        before: i64,
        limit: usize,
    ) -> anyhow::Result<Vec<(Conversation, i64)>> {
        let tenant = tenant.to_string();
        self.sqlite
            .run(move |db| {
                // Row ids grow with every insert: newer conversations have larger ones, ties
                // impossible.
                let mut statement = db.prepare(
                    "SELECT id, title, model, tools, session, created_ms, updated_ms, rowid \
                     FROM conversations WHERE tenant = ?1 AND rowid < ?2 ORDER BY rowid DESC LIMIT ?3",
                )?;
                let rows = statement.query_map(params![tenant, before, limit as i64], |row| {
                    Ok((conversation_row(row)?, row.get::<_, i64>(7)?))
                })?;
                Ok(rows.collect::<Result<_, _>>()?)
            })
            .await
    }

    async fn get(&self, tenant: &str, id: &str) -> anyhow::Result<Option<Conversation>> {
        let (tenant, id) = (tenant.to_string(), id.to_string());
        self.sqlite
            .run(move |db| {
                Ok(db
                    .query_row(
                        "SELECT id, title, model, tools, session, created_ms, updated_ms FROM conversations \
                         WHERE tenant = ?1 AND id = ?2",
                        params![tenant, id],
                        conversation_row,
                    )
                    .optional()?)
            })
            .await
    }

    async fn messages(&self, id: &str) -> anyhow::Result<Vec<StoredMessage>> {
        let id = id.to_string();
        self.sqlite
            .run(move |db| {
                let mut statement = db.prepare(
                    "SELECT seq, message, summary, files, created_ms FROM conversation_messages \
                     WHERE conversation_id = ?1 ORDER BY seq",
                )?;
                let rows = statement.query_map(params![id], |row| {
                    let message: String = row.get(1)?;
                    Ok(stored_message(
                        row.get(0)?,
                        &message,
                        row.get(2)?,
                        row.get(3)?,
                        row.get(4)?,
                    ))
                })?;
                Ok(rows.collect::<Result<_, _>>()?)
            })
            .await
    }

    async fn append(&self, id: &str, records: Vec<Record>, now: i64) -> anyhow::Result<bool> {
        let (id, dir) = (id.to_string(), self.files.join(id));
        self.sqlite
            .run(move |db| append_turn(db, &id, &dir, records, now))
            .await
    }

    async fn delete(&self, tenant: &str, id: &str) -> anyhow::Result<bool> {
        let (tenant, id, dir) = (tenant.to_string(), id.to_string(), self.files.join(id));
        self.sqlite
            .run(move |db| {
                let transaction = db.transaction()?;
                let removed = transaction.execute(
                    "DELETE FROM conversations WHERE tenant = ?1 AND id = ?2",
                    params![tenant, id],
                )?;
                if removed > 0 {
                    transaction.execute(
                        "DELETE FROM conversation_messages WHERE conversation_id = ?1",
                        params![id],
                    )?;
                }
                transaction.commit()?;
                if removed > 0 {
                    let _ = std::fs::remove_dir_all(&dir);
                }
                Ok(removed > 0)
            })
            .await
    }

    async fn file(&self, id: &str, name: &str) -> anyhow::Result<Option<Vec<u8>>> {
        match tokio::fs::read(self.files.join(id).join(name)).await {
            Ok(bytes) => Ok(Some(bytes)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error.into()),
        }
    }
}

/// One turn written whole: its images as files under `dir`, its messages as rows, the
/// conversation's time and (when it had none) title; false when the conversation is gone.
fn append_turn(
    db: &mut Connection,
    id: &str,
    dir: &Path,
    records: Vec<Record>,
    now: i64,
) -> anyhow::Result<bool> {
    let transaction = db.transaction()?;
    let last: Option<i64> = transaction
        .query_row(
            "SELECT (SELECT COALESCE(MAX(seq), 0) FROM conversation_messages \
             WHERE conversation_id = ?1) FROM conversations WHERE id = ?1",
            params![id],
            |row| row.get(0),
        )
        .optional()?;
    let Some(last) = last else {
        return Ok(false);
    };
    let turn = Turn::of(records, last + 1, now);
    for (name, bytes) in &turn.files {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join(name), bytes)?;
    }
    for message in &turn.messages {
        let (json, files) = message_columns(message);
        transaction.execute(
            "INSERT INTO conversation_messages (conversation_id, seq, message, summary, files, created_ms) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![id, message.seq, json, message.summary, files, now],
        )?;
    }
    transaction.execute(
        "UPDATE conversations SET updated_ms = ?2, \
         title = CASE WHEN title = '' AND ?3 IS NOT NULL THEN ?3 ELSE title END WHERE id = ?1",
        params![id, now, turn.title],
    )?;
    transaction.commit()?;
    Ok(true)
}
