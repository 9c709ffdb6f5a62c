//! Conversations kept in SQLite (`webpilot.db`): their settings and their messages as the model
//! saw them (tool calls and results, with each result's one-line summary). A turn's messages are
//! written together once complete — the assistant's tool calls with all their results, or its
//! answer — so the stored history never holds half a tool call. Images go to files under
//! `<data dir>/conversations/<id>/`, and messages refer to them as `file:<name>`.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use base64::Engine;
use rusqlite::{Connection, OptionalExtension, params};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::tools::Image;

const SCHEMA: &str = "
PRAGMA journal_mode = WAL;
PRAGMA synchronous = NORMAL;
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

/// Prefix of an image reference inside a stored message.
const FILE_REF: &str = "file:";

/// What a new conversation is set up with.
#[derive(Debug, Default, Deserialize, JsonSchema, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewConversation {
    /// Shown in the list (default: the first question, once asked).
    pub title: Option<String>,
    /// The model (default: the configured one).
    pub model: Option<String>,
    /// Tool names the model may use (default: all).
    pub tools: Option<Vec<String>>,
    /// The browser session the tools use (default: one of the conversation's own).
    pub session: Option<String>,
}

/// A conversation's settings.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Conversation {
    pub id: String,
    pub title: String,
    pub model: Option<String>,
    pub tools: Option<Vec<String>>,
    pub session: String,
    pub created_ms: i64,
    pub updated_ms: i64,
}

/// A stored message: as the model saw it, with the one-line summary of a tool result.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct StoredMessage {
    pub seq: i64,
    #[schema(value_type = Object)]
    pub message: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// A tool result's images, as files of the conversation (`GET …/files/{name}`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    pub created_ms: i64,
}

/// A message to store, with a tool result's summary and images.
pub struct Record {
    pub message: Value,
    pub summary: Option<String>,
    pub images: Vec<Image>,
}

/// Takes each complete turn's messages as the agent loop ends it (before its next event).
pub type Recorder = std::sync::Arc<dyn Fn(Vec<Record>) + Send + Sync>;

impl Record {
    pub fn of(message: Value) -> Self {
        Self {
            message,
            summary: None,
            images: Vec::new(),
        }
    }
}

pub struct Conversations {
    connection: Mutex<Connection>,
    files: PathBuf,
}

fn db_error(error: rusqlite::Error) -> ToolError {
    ToolError::internal(format!("the conversation store failed: {error}"))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

pub fn no_such_conversation(id: &str) -> ToolError {
    ToolError::new(
        ErrorCode::NoSuchConversation,
        format!("no conversation {id:?}"),
    )
    .with_hint("GET /api/conversations lists yours")
}

impl Conversations {
    /// Opens (creating) the store in `database`, with image files under `data_dir`.
    pub fn open(database: &Path, data_dir: &Path) -> anyhow::Result<Self> {
        if let Some(dir) = database.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let connection = Connection::open(database)?;
        connection.execute_batch(SCHEMA)?;
        Ok(Self {
            connection: Mutex::new(connection),
            files: data_dir.join("conversations"),
        })
    }

    fn db(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.connection.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn create(&self, tenant: &str, new: NewConversation) -> ToolResult<Conversation> {
        let id = crate::browser::unguessable_name("c-");
        let now = now_ms();
        let conversation = Conversation {
            session: new
                .session
                .unwrap_or_else(|| format!("chat-{}", &id[2..14])),
            id,
            title: new.title.unwrap_or_default(),
            model: new.model,
            tools: new.tools,
            created_ms: now,
            updated_ms: now,
        };
        let tools = conversation
            .tools
            .as_ref()
            .map(|t| serde_json::to_string(t).unwrap_or_default());
        self.db()
            .execute(
                "INSERT INTO conversations (id, tenant, title, model, tools, session, created_ms, updated_ms) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)",
                params![conversation.id, tenant, conversation.title, conversation.model, tools, conversation.session, now],
            )
            .map_err(db_error)?;
        Ok(conversation)
    }

    /// `tenant`'s conversations, newest first: at most `limit`, after `cursor` (from a previous
    /// page). Returns the next page's cursor when there is more.
    pub fn list(
        &self,
        tenant: &str,
        limit: usize,
        cursor: Option<&str>,
    ) -> ToolResult<(Vec<Conversation>, Option<String>)> {
        // Row ids grow with every insert: newer conversations have larger ones, ties impossible.
        let before = match cursor {
            None => i64::MAX,
            Some(cursor) => parse_cursor(cursor)?,
        };
        let db = self.db();
        let mut statement = db
            .prepare(
                "SELECT id, title, model, tools, session, created_ms, updated_ms, rowid \
                 FROM conversations WHERE tenant = ?1 AND rowid < ?2 ORDER BY rowid DESC LIMIT ?3",
            )
            .map_err(db_error)?;
        let rows = statement
            .query_map(params![tenant, before, (limit + 1) as i64], |row| {
                Ok((conversation_row(row)?, row.get::<_, i64>(7)?))
            })
            .map_err(db_error)?;
        let mut page: Vec<(Conversation, i64)> =
            rows.collect::<Result<_, _>>().map_err(db_error)?;
        let next = (page.len() > limit).then(|| {
            page.truncate(limit);
            format!("r{}", page.last().expect("a full page").1)
        });
        Ok((page.into_iter().map(|(c, _)| c).collect(), next))
    }

    /// One of `tenant`'s conversations.
    pub fn get(&self, tenant: &str, id: &str) -> ToolResult<Conversation> {
        self.db()
            .query_row(
                "SELECT id, title, model, tools, session, created_ms, updated_ms FROM conversations \
                 WHERE tenant = ?1 AND id = ?2",
                params![tenant, id],
                conversation_row,
            )
            .optional()
            .map_err(db_error)?
            .ok_or_else(|| no_such_conversation(id))
    }

    /// The conversation's messages in order.
    pub fn messages(&self, id: &str) -> ToolResult<Vec<StoredMessage>> {
        let db = self.db();
        let mut statement = db
            .prepare(
                "SELECT seq, message, summary, files, created_ms FROM conversation_messages \
                 WHERE conversation_id = ?1 ORDER BY seq",
            )
            .map_err(db_error)?;
        let rows = statement
            .query_map(params![id], |row| {
                let message: String = row.get(1)?;
                let files: Option<String> = row.get(3)?;
                Ok(StoredMessage {
                    seq: row.get(0)?,
                    message: serde_json::from_str(&message).unwrap_or(Value::Null),
                    summary: row.get(2)?,
                    files: files
                        .and_then(|f| serde_json::from_str(&f).ok())
                        .unwrap_or_default(),
                    created_ms: row.get(4)?,
                })
            })
            .map_err(db_error)?;
        rows.collect::<Result<_, _>>().map_err(db_error)
    }

    /// The history to send the model: the stored messages, images read back from their files.
    pub fn history(&self, id: &str) -> ToolResult<Vec<Value>> {
        let dir = self.files.join(id);
        Ok(self
            .messages(id)?
            .into_iter()
            .map(|stored| inline_images(stored.message, &dir))
            .collect())
    }

    /// Stores one complete turn's messages in one transaction; images in them go to files.
    /// Names the conversation after its first question if it has no title.
    pub fn append(&self, id: &str, records: Vec<Record>) -> ToolResult<()> {
        let dir = self.files.join(id);
        let mut db = self.db();
        let transaction = db.transaction().map_err(db_error)?;
        // A conversation deleted while it was answering keeps nothing of the answer.
        let exists: bool = transaction
            .query_row(
                "SELECT COUNT(*) > 0 FROM conversations WHERE id = ?1",
                params![id],
                |row| row.get(0),
            )
            .map_err(db_error)?;
        if !exists {
            return Err(no_such_conversation(id));
        }
        let next: i64 = transaction
            .query_row(
                "SELECT COALESCE(MAX(seq), 0) FROM conversation_messages WHERE conversation_id = ?1",
                params![id],
                |row| row.get(0),
            )
            .map_err(db_error)?;
        let now = now_ms();
        for (offset, record) in records.into_iter().enumerate() {
            let seq = next + 1 + offset as i64;
            let message = extract_images(record.message, &dir, seq)?;
            let files = save_images(&record.images, &dir, seq)?;
            let files = (!files.is_empty()).then(|| json!(files).to_string());
            if message["role"] == "user"
                && let Some(question) = message["content"].as_str()
            {
                let title: String = question.chars().take(80).collect();
                transaction
                    .execute(
                        "UPDATE conversations SET title = ?2 WHERE id = ?1 AND title = ''",
                        params![id, title],
                    )
                    .map_err(db_error)?;
            }
            transaction
                .execute(
                    "INSERT INTO conversation_messages (conversation_id, seq, message, summary, files, created_ms) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![id, seq, message.to_string(), record.summary, files, now],
                )
                .map_err(db_error)?;
        }
        transaction
            .execute(
                "UPDATE conversations SET updated_ms = ?2 WHERE id = ?1",
                params![id, now],
            )
            .map_err(db_error)?;
        transaction.commit().map_err(db_error)
    }

    /// Deletes one of `tenant`'s conversations with its files; false if there was none.
    pub fn delete(&self, tenant: &str, id: &str) -> ToolResult<bool> {
        let mut db = self.db();
        let transaction = db.transaction().map_err(db_error)?;
        let removed = transaction
            .execute(
                "DELETE FROM conversations WHERE tenant = ?1 AND id = ?2",
                params![tenant, id],
            )
            .map_err(db_error)?;
        if removed > 0 {
            transaction
                .execute(
                    "DELETE FROM conversation_messages WHERE conversation_id = ?1",
                    params![id],
                )
                .map_err(db_error)?;
        }
        transaction.commit().map_err(db_error)?;
        if removed > 0 {
            let _ = std::fs::remove_dir_all(self.files.join(id));
        }
        Ok(removed > 0)
    }

    /// An image file of `tenant`'s conversation `id`: its bytes and type.
    pub fn file(&self, tenant: &str, id: &str, name: &str) -> ToolResult<(Vec<u8>, &'static str)> {
        self.get(tenant, id)?;
        let valid = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
            && !name.starts_with('.');
        let missing = || ToolError::new(ErrorCode::NoSuchConversation, format!("no file {name:?}"));
        if !valid {
            return Err(missing());
        }
        let bytes = std::fs::read(self.files.join(id).join(name)).map_err(|_| missing())?;
        Ok((bytes, mime_of(name)))
    }
}

fn conversation_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Conversation> {
    let tools: Option<String> = row.get(3)?;
    Ok(Conversation {
        id: row.get(0)?,
        title: row.get(1)?,
        model: row.get(2)?,
        tools: tools.and_then(|t| serde_json::from_str(&t).ok()),
        session: row.get(4)?,
        created_ms: row.get(5)?,
        updated_ms: row.get(6)?,
    })
}

fn parse_cursor(cursor: &str) -> ToolResult<i64> {
    cursor
        .strip_prefix('r')
        .and_then(|rowid| rowid.parse().ok())
        .ok_or_else(|| {
            ToolError::invalid(format!("cursor {cursor:?} is not one this service gave"))
                .with_hint("pass next_cursor of the previous page, or no cursor for the first")
        })
}

fn mime_of(name: &str) -> &'static str {
    match name.rsplit('.').next() {
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("webp") => "image/webp",
        Some("pdf") => "application/pdf",
        _ => "application/octet-stream",
    }
}

fn extension_of(mime: &str) -> &'static str {
    match mime {
        "image/jpeg" => "jpg",
        "image/webp" => "webp",
        "application/pdf" => "pdf",
        _ => "png",
    }
}

/// Writes a tool result's images to files named after the message; returns their names.
fn save_images(images: &[Image], dir: &Path, seq: i64) -> ToolResult<Vec<String>> {
    images
        .iter()
        .enumerate()
        .map(|(index, image)| {
            let name = format!("{seq}-result-{index}.{}", extension_of(image.mime));
            write_file(dir, &name, &image.data)?;
            Ok(name)
        })
        .collect()
}

fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> ToolResult<()> {
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(dir.join(name), bytes))
        .map_err(|e| ToolError::internal(format!("cannot store an image: {e}")))
}

/// Writes the `data:` image URLs of a message's parts to files and refers to them instead.
fn extract_images(mut message: Value, dir: &Path, seq: i64) -> ToolResult<Value> {
    let Some(parts) = message["content"].as_array_mut() else {
        return Ok(message);
    };
    for (index, part) in parts.iter_mut().enumerate() {
        let Some(url) = part["image_url"]["url"].as_str() else {
            continue;
        };
        let Some((mime, data)) = url
            .strip_prefix("data:")
            .and_then(|rest| rest.split_once(";base64,"))
        else {
            continue;
        };
        let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(data) else {
            continue;
        };
        let name = format!("{seq}-{index}.{}", extension_of(mime));
        write_file(dir, &name, &bytes)?;
        part["image_url"]["url"] = json!(format!("{FILE_REF}{name}"));
    }
    Ok(message)
}

/// The reverse of `extract_images`, for the model.
fn inline_images(mut message: Value, dir: &Path) -> Value {
    let Some(parts) = message["content"].as_array_mut() else {
        return message;
    };
    for part in parts.iter_mut() {
        let Some(name) = part["image_url"]["url"]
            .as_str()
            .and_then(|url| url.strip_prefix(FILE_REF))
            .map(str::to_string)
        else {
            continue;
        };
        if let Ok(bytes) = std::fs::read(dir.join(&name)) {
            let data = base64::engine::general_purpose::STANDARD.encode(bytes);
            part["image_url"]["url"] = json!(format!("data:{};base64,{data}", mime_of(&name)));
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_are_stored_whole_paged_newest_first_and_images_go_to_files() {
        let dir = tempfile::tempdir().unwrap();
        let store = Conversations::open(&dir.path().join("db"), dir.path()).unwrap();
        let first = store.create("", NewConversation::default()).unwrap();
        let png = base64::engine::general_purpose::STANDARD.encode(b"\x89PNG fake");
        store
            .append(
                &first.id,
                vec![
                    Record::of(json!({"role": "user", "content": "What is on the page?"})),
                    Record::of(json!({"role": "user", "content": [{"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{png}")}}]})),
                ],
            )
            .unwrap();
        let stored = store.messages(&first.id).unwrap();
        assert_eq!(stored.len(), 2);
        assert_eq!(
            stored[1].message["content"][0]["image_url"]["url"],
            "file:2-0.png"
        );
        let history = store.history(&first.id).unwrap();
        assert!(
            history[1]["content"][0]["image_url"]["url"]
                .as_str()
                .unwrap()
                .starts_with("data:image/png;base64,")
        );
        assert_eq!(
            store.get("", &first.id).unwrap().title,
            "What is on the page?"
        );
        assert_eq!(
            store.file("", &first.id, "2-0.png").unwrap().0,
            b"\x89PNG fake"
        );
        assert!(store.file("", &first.id, "../db").is_err());
        assert!(store.get("other", &first.id).is_err(), "another tenant's");

        for _ in 0..4 {
            store.create("", NewConversation::default()).unwrap();
        }
        let (page, next) = store.list("", 2, None).unwrap();
        assert_eq!(page.len(), 2);
        let (rest, last) = store.list("", 10, next.as_deref()).unwrap();
        assert_eq!(rest.len(), 3);
        assert!(last.is_none());
        assert!(rest.iter().all(|c| !page.iter().any(|p| p.id == c.id)));
        assert!(store.delete("", &first.id).unwrap());
        assert!(!store.delete("", &first.id).unwrap());
        assert!(store.messages(&first.id).unwrap().is_empty());
    }
}
