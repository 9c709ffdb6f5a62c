//! The shared engine: conversations in PostgreSQL, their images as rows beside their messages,
//! so any instance continues any conversation.

use async_trait::async_trait;

use super::{
    Conversation, ConversationStore, Record, StoredMessage, Turn, message_columns, stored_message,
    tools_column, tools_of,
};
use crate::db::postgres::{Database, Migration};

const MIGRATIONS: [Migration; 1] = [(
    1,
    "CREATE TABLE conversations (
         id TEXT PRIMARY KEY,
         tenant TEXT NOT NULL,
         title TEXT NOT NULL,
         model TEXT,
         tools TEXT,
         session TEXT NOT NULL,
         created_ms BIGINT NOT NULL,
         updated_ms BIGINT NOT NULL,
         position BIGSERIAL NOT NULL
     );
     CREATE INDEX conversations_by_tenant ON conversations (tenant, position DESC);
     CREATE TABLE conversation_messages (
         conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
         seq BIGINT NOT NULL,
         message TEXT NOT NULL,
         summary TEXT,
         files TEXT,
         created_ms BIGINT NOT NULL,
         PRIMARY KEY (conversation_id, seq)
     );
     CREATE TABLE conversation_files (
         conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
         name TEXT NOT NULL,
         bytes BYTEA NOT NULL,
         PRIMARY KEY (conversation_id, name)
     );",
)];

const COLUMNS: &str = "id, title, model, tools, session, created_ms, updated_ms";

pub struct PostgresStore {
    database: Database,
}

impl PostgresStore {
    pub async fn open(database: Database) -> anyhow::Result<Self> {
        database.migrate("conversations", &MIGRATIONS).await?;
        Ok(Self { database })
    }
}

fn conversation_row(row: &tokio_postgres::Row) -> Conversation {
    Conversation {
        id: row.get(0),
        title: row.get(1),
        model: row.get(2),
        tools: tools_of(row.get(3)),
        session: row.get(4),
        created_ms: row.get(5),
        updated_ms: row.get(6),
    }
}

#[async_trait]
impl ConversationStore for PostgresStore {
    async fn create(&self, tenant: &str, c: &Conversation) -> anyhow::Result<()> {
        self.database
            .client()
            .await?
            .execute(
                "INSERT INTO conversations (id, tenant, title, model, tools, session, created_ms, updated_ms) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                &[&c.id, &tenant, &c.title, &c.model, &tools_column(&c.tools), &c.session, &c.created_ms, &c.updated_ms],
            )
            .await?;
        Ok(())
    }

    async fn list(
        &self,
        tenant: &str,
        before: i64,
        limit: usize,
    ) -> anyhow::Result<Vec<(Conversation, i64)>> {
        let rows = self
            .database
            .client()
            .await?
            .query(
                &format!(
                    "SELECT {COLUMNS}, position FROM conversations \
                     WHERE tenant = $1 AND position < $2 ORDER BY position DESC LIMIT $3"
                ),
                &[&tenant, &before, &(limit as i64)],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|row| (conversation_row(row), row.get(7)))
            .collect())
    }

    async fn get(&self, tenant: &str, id: &str) -> anyhow::Result<Option<Conversation>> {
        let row = self
            .database
            .client()
            .await?
            .query_opt(
                &format!("SELECT {COLUMNS} FROM conversations WHERE tenant = $1 AND id = $2"),
                &[&tenant, &id],
            )
            .await?;
        Ok(row.as_ref().map(conversation_row))
    }

    async fn messages(&self, id: &str) -> anyhow::Result<Vec<StoredMessage>> {
        let rows = self
            .database
            .client()
            .await?
            .query(
                "SELECT seq, message, summary, files, created_ms FROM conversation_messages \
                 WHERE conversation_id = $1 ORDER BY seq",
                &[&id],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|row| {
                stored_message(
                    row.get(0),
                    row.get::<_, &str>(1),
                    row.get(2),
                    row.get(3),
                    row.get(4),
                )
            })
            .collect())
    }

    async fn append(&self, id: &str, records: Vec<Record>, now: i64) -> anyhow::Result<bool> {
        let mut client = self.database.client().await?;
        let transaction = client.transaction().await?;
        // The conversation's row stays locked to the end: turns appended from two instances at
        // once take their sequence numbers one after the other.
        let last = transaction
            .query_opt(
                "SELECT (SELECT COALESCE(MAX(seq), 0) FROM conversation_messages \
                 WHERE conversation_id = $1) FROM conversations WHERE id = $1 FOR UPDATE",
                &[&id],
            )
            .await?;
        let Some(last) = last else {
            return Ok(false);
        };
        let turn = Turn::of(records, last.get::<_, i64>(0) + 1, now);
        for (name, bytes) in &turn.files {
            transaction
                .execute(
                    "INSERT INTO conversation_files (conversation_id, name, bytes) VALUES ($1, $2, $3) \
                     ON CONFLICT (conversation_id, name) DO UPDATE SET bytes = EXCLUDED.bytes",
                    &[&id, name, bytes],
                )
                .await?;
        }
        for message in &turn.messages {
            let (json, files) = message_columns(message);
            transaction
                .execute(
                    "INSERT INTO conversation_messages (conversation_id, seq, message, summary, files, created_ms) \
                     VALUES ($1, $2, $3, $4, $5, $6)",
                    &[&id, &message.seq, &json, &message.summary, &files, &now],
                )
                .await?;
        }
        transaction
            .execute(
                "UPDATE conversations SET updated_ms = $2, \
                 title = CASE WHEN title = '' AND $3::text IS NOT NULL THEN $3 ELSE title END \
                 WHERE id = $1",
                &[&id, &now, &turn.title],
            )
            .await?;
        transaction.commit().await?;
        Ok(true)
    }

    async fn delete(&self, tenant: &str, id: &str) -> anyhow::Result<bool> {
        let removed = self
            .database
            .client()
            .await?
            .execute(
                "DELETE FROM conversations WHERE tenant = $1 AND id = $2",
                &[&tenant, &id],
            )
            .await?;
        Ok(removed > 0)
    }

    async fn file(&self, id: &str, name: &str) -> anyhow::Result<Option<Vec<u8>>> {
        let row = self
            .database
            .client()
            .await?
            .query_opt(
                "SELECT bytes FROM conversation_files WHERE conversation_id = $1 AND name = $2",
                &[&id, &name],
            )
            .await?;
        Ok(row.map(|row| row.get(0)))
    }
}
