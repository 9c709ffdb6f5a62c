//! Stored conversations: their settings and their messages as the model saw them (tool calls and
//! results, with each result's one-line summary), behind one trait with two engines: SQLite in
//! the data dir (`webpilot.db`, images as files under `<data dir>/conversations/<id>/`) and
//! PostgreSQL (`--database-url`, images as rows, so every instance reads every conversation).
//! A turn's messages are written together once complete — the assistant's tool calls with all
//! their results, or its answer — so the stored history never holds half a tool call. Messages
//! refer to their images as `file:<name>`.

mod postgres;
mod sqlite;

use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine;
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::db::Storage;
use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::ids::TenantName;
use crate::tools::Image;

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
pub type Recorder = Arc<dyn Fn(Vec<Record>) -> BoxFuture<'static, ()> + Send + Sync>;

impl Record {
    pub fn of(message: Value) -> Self {
        Self {
            message,
            summary: None,
            images: Vec::new(),
        }
    }
}

/// A turn ready to store from sequence number `first` on: messages with their images as file
/// references, the files' bytes, and the title it gives a conversation that has none.
struct Turn {
    messages: Vec<StoredMessage>,
    files: Vec<(String, Vec<u8>)>,
    title: Option<String>,
}

impl Turn {
    fn of(records: Vec<Record>, first: i64, now: i64) -> Self {
        let mut turn = Turn {
            messages: Vec::with_capacity(records.len()),
            files: Vec::new(),
            title: None,
        };
        for (offset, record) in records.into_iter().enumerate() {
            let seq = first + offset as i64;
            let message = extract_images(record.message, seq, &mut turn.files);
            let mut files = Vec::new();
            for (index, image) in record.images.into_iter().enumerate() {
                let name = format!("{seq}-result-{index}.{}", extension_of(image.mime));
                files.push(name.clone());
                turn.files.push((name, image.data));
            }
            if turn.title.is_none()
                && message["role"] == "user"
                && let Some(question) = message["content"].as_str()
            {
                turn.title = Some(question.chars().take(80).collect());
            }
            turn.messages.push(StoredMessage {
                seq,
                message,
                summary: record.summary,
                files,
                created_ms: now,
            });
        }
        turn
    }
}

/// One engine's storage. Writes are one transaction each.
#[async_trait]
trait ConversationStore: Send + Sync {
    async fn create(&self, tenant: &str, conversation: &Conversation) -> anyhow::Result<()>;

    /// `tenant`'s conversations with positions below `before`, newest first, with their
    /// positions (which grow with every conversation created).
    async fn list(
        &self,
        tenant: &str,
        before: i64,
        limit: usize,
    ) -> anyhow::Result<Vec<(Conversation, i64)>>;

    async fn get(&self, tenant: &str, id: &str) -> anyhow::Result<Option<Conversation>>;

    async fn messages(&self, id: &str) -> anyhow::Result<Vec<StoredMessage>>;

    /// Stores `records` after the conversation's last message, their images with them, and
    /// names an untitled conversation; false (nothing stored) when there is no conversation.
    async fn append(&self, id: &str, records: Vec<Record>, now: i64) -> anyhow::Result<bool>;

    /// Deletes the conversation with its messages and files; false if there was none.
    async fn delete(&self, tenant: &str, id: &str) -> anyhow::Result<bool>;

    /// A file of conversation `id` (its name already checked).
    async fn file(&self, id: &str, name: &str) -> anyhow::Result<Option<Vec<u8>>>;
}

pub struct Conversations {
    store: Box<dyn ConversationStore>,
}

fn db_error(error: anyhow::Error) -> ToolError {
    ToolError::internal(format!("the conversation store failed: {error:#}"))
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
    /// The store in PostgreSQL (migrating it), else in SQLite with image files under
    /// `data_dir`.
    pub async fn open(storage: &Storage, data_dir: &std::path::Path) -> anyhow::Result<Self> {
        let store: Box<dyn ConversationStore> = match storage {
            Storage::Shared(database) => {
                Box::new(postgres::PostgresStore::open(database.clone()).await?)
            }
            Storage::Embedded(sqlite) => {
                Box::new(sqlite::SqliteStore::open(sqlite.clone(), data_dir)?)
            }
        };
        Ok(Self { store })
    }

    pub async fn create(
        &self,
        tenant: &TenantName,
        new: NewConversation,
    ) -> ToolResult<Conversation> {
        let id = crate::ids::unguessable("c-");
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
        self.store
            .create(tenant.stored(), &conversation)
            .await
            .map_err(db_error)?;
        Ok(conversation)
    }

    /// `tenant`'s conversations, newest first: at most `limit`, after `cursor` (from a previous
    /// page). Returns the next page's cursor when there is more.
    pub async fn list(
        &self,
        tenant: &TenantName,
        limit: usize,
        cursor: Option<&str>,
    ) -> ToolResult<(Vec<Conversation>, Option<String>)> {
        let before = match cursor {
            None => i64::MAX,
            Some(cursor) => parse_cursor(cursor)?,
        };
        let mut page = self
            .store
            .list(tenant.stored(), before, limit + 1)
            .await
            .map_err(db_error)?;
        let next = (page.len() > limit).then(|| {
            page.truncate(limit);
            format!("r{}", page.last().expect("a full page").1)
        });
        Ok((page.into_iter().map(|(c, _)| c).collect(), next))
    }

    /// One of `tenant`'s conversations.
    pub async fn get(&self, tenant: &TenantName, id: &str) -> ToolResult<Conversation> {
        self.store
            .get(tenant.stored(), id)
            .await
            .map_err(db_error)?
            .ok_or_else(|| no_such_conversation(id))
    }

    /// The conversation's messages in order.
    pub async fn messages(&self, id: &str) -> ToolResult<Vec<StoredMessage>> {
        self.store.messages(id).await.map_err(db_error)
    }

    /// The history to send the model: the stored messages, images read back from their files.
    pub async fn history(&self, id: &str) -> ToolResult<Vec<Value>> {
        let mut history = Vec::new();
        for stored in self.messages(id).await? {
            history.push(self.inline_images(id, stored.message).await?);
        }
        Ok(history)
    }

    /// Stores one complete turn's messages in one transaction; images in them go to files.
    /// Names the conversation after its first question if it has no title. A conversation
    /// deleted while it was answering keeps nothing of the answer.
    pub async fn append(&self, id: &str, records: Vec<Record>) -> ToolResult<()> {
        match self.store.append(id, records, now_ms()).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(no_such_conversation(id)),
            Err(error) => Err(db_error(error)),
        }
    }

    /// Deletes one of `tenant`'s conversations with its files; false if there was none.
    pub async fn delete(&self, tenant: &TenantName, id: &str) -> ToolResult<bool> {
        self.store
            .delete(tenant.stored(), id)
            .await
            .map_err(db_error)
    }

    /// An image file of `tenant`'s conversation `id`: its bytes and type.
    pub async fn file(
        &self,
        tenant: &TenantName,
        id: &str,
        name: &str,
    ) -> ToolResult<(Vec<u8>, &'static str)> {
        self.get(tenant, id).await?;
        let valid = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
            && !name.starts_with('.');
        let missing = || ToolError::new(ErrorCode::NoSuchConversation, format!("no file {name:?}"));
        if !valid {
            return Err(missing());
        }
        let bytes = self.store.file(id, name).await.map_err(db_error)?;
        Ok((bytes.ok_or_else(missing)?, mime_of(name)))
    }

    /// The reverse of `extract_images`, for the model.
    async fn inline_images(&self, id: &str, mut message: Value) -> ToolResult<Value> {
        let Some(parts) = message["content"].as_array_mut() else {
            return Ok(message);
        };
        for part in parts.iter_mut() {
            let Some(name) = part["image_url"]["url"]
                .as_str()
                .and_then(|url| url.strip_prefix(FILE_REF))
                .map(str::to_string)
            else {
                continue;
            };
            if let Some(bytes) = self.store.file(id, &name).await.map_err(db_error)? {
                let data = base64::engine::general_purpose::STANDARD.encode(bytes);
                part["image_url"]["url"] = json!(format!("data:{};base64,{data}", mime_of(&name)));
            }
        }
        Ok(message)
    }
}

fn parse_cursor(cursor: &str) -> ToolResult<i64> {
    cursor
        .strip_prefix('r')
        .and_then(|position| position.parse().ok())
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

/// Moves the `data:` image URLs of a message's parts to `files`, referring to them instead.
fn extract_images(mut message: Value, seq: i64, files: &mut Vec<(String, Vec<u8>)>) -> Value {
    let Some(parts) = message["content"].as_array_mut() else {
        return message;
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
        files.push((name.clone(), bytes));
        part["image_url"]["url"] = json!(format!("{FILE_REF}{name}"));
    }
    message
}

/// The columns a stored message is kept in: its JSON and its files' names as JSON (none: null).
fn message_columns(message: &StoredMessage) -> (String, Option<String>) {
    let files = (!message.files.is_empty()).then(|| json!(message.files).to_string());
    (message.message.to_string(), files)
}

/// A stored message from its columns.
fn stored_message(
    seq: i64,
    message: &str,
    summary: Option<String>,
    files: Option<String>,
    created_ms: i64,
) -> StoredMessage {
    StoredMessage {
        seq,
        message: serde_json::from_str(message).unwrap_or(Value::Null),
        summary,
        files: files
            .and_then(|f| serde_json::from_str(&f).ok())
            .unwrap_or_default(),
        created_ms,
    }
}

/// A conversation's tool list as stored (JSON), and back.
fn tools_column(tools: &Option<Vec<String>>) -> Option<String> {
    tools
        .as_ref()
        .map(|t| serde_json::to_string(t).unwrap_or_default())
}

fn tools_of(column: Option<String>) -> Option<Vec<String>> {
    column.and_then(|t| serde_json::from_str(&t).ok())
}
