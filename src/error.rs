//! The one error type every tool returns: `{ "error": { "code", "message", "hint" } }`.
//!
//! Codes are part of the tool contract (docs/tools.md lists them for users): each maps to one HTTP
//! status for the REST fronts and has a default hint, which tells an agent how to recover.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Machine-readable error codes of the tool contract.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, utoipa::ToSchema,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    InvalidArgument,
    StaleRef,
    NoSuchRef,
    NoSuchTab,
    NoSuchSession,
    NoSuchProfile,
    NoSuchTool,
    NoSuchTask,
    NoSuchConversation,
    Timeout,
    NavigationFailed,
    BlockedUrl,
    BrowserUnavailable,
    Upstream,
    Limit,
    /// The service is reading as many request bodies as it holds at once; retry shortly.
    Busy,
    TooLarge,
    NotConfigured,
    Unauthorized,
    /// The operator's rules deny this action.
    ForbiddenAction,
    /// The operator's rules hold this action until a person allows it.
    NeedsConfirmation,
    Internal,
}

impl ErrorCode {
    /// Every code, for the API description's list of error statuses.
    pub const ALL: [ErrorCode; 22] = [
        ErrorCode::InvalidArgument,
        ErrorCode::StaleRef,
        ErrorCode::NoSuchRef,
        ErrorCode::NoSuchTab,
        ErrorCode::NoSuchSession,
        ErrorCode::NoSuchProfile,
        ErrorCode::NoSuchTool,
        ErrorCode::NoSuchTask,
        ErrorCode::NoSuchConversation,
        ErrorCode::Timeout,
        ErrorCode::NavigationFailed,
        ErrorCode::BlockedUrl,
        ErrorCode::BrowserUnavailable,
        ErrorCode::Upstream,
        ErrorCode::Limit,
        ErrorCode::Busy,
        ErrorCode::TooLarge,
        ErrorCode::NotConfigured,
        ErrorCode::Unauthorized,
        ErrorCode::ForbiddenAction,
        ErrorCode::NeedsConfirmation,
        ErrorCode::Internal,
    ];

    /// The code as it appears on the wire (`STALE_REF`).
    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    }

    /// The HTTP status a REST front answers with for this code.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::InvalidArgument | ErrorCode::BlockedUrl => 400,
            ErrorCode::Unauthorized => 401,
            ErrorCode::ForbiddenAction => 403,
            ErrorCode::NeedsConfirmation => 428,
            ErrorCode::NoSuchRef
            | ErrorCode::NoSuchTab
            | ErrorCode::NoSuchSession
            | ErrorCode::NoSuchProfile
            | ErrorCode::NoSuchTool
            | ErrorCode::NoSuchTask
            | ErrorCode::NoSuchConversation => 404,
            ErrorCode::StaleRef => 409,
            ErrorCode::TooLarge => 413,
            ErrorCode::Limit => 429,
            ErrorCode::Internal => 500,
            ErrorCode::NotConfigured => 501,
            ErrorCode::NavigationFailed | ErrorCode::Upstream => 502,
            ErrorCode::BrowserUnavailable | ErrorCode::Busy => 503,
            ErrorCode::Timeout => 504,
        }
    }

    /// The hint used when the raiser has nothing more specific to say.
    pub fn default_hint(self) -> &'static str {
        match self {
            ErrorCode::InvalidArgument => "fix the named argument and call again",
            ErrorCode::StaleRef => {
                "the page changed since that ref was issued: take a new snapshot with browser_read mode=elements"
            }
            ErrorCode::NoSuchRef => {
                "use a ref from the latest browser_read mode=elements of this tab"
            }
            ErrorCode::NoSuchTab => "list the session's tabs with browser_tabs action=list",
            ErrorCode::NoSuchSession => {
                "GET /api/sessions lists the live sessions; POST /api/sessions creates one"
            }
            ErrorCode::NoSuchProfile => "list saved profiles or export one first",
            ErrorCode::NoSuchTool => "GET /api/tools lists the available tools",
            ErrorCode::NoSuchTask => "use the task_id crawl_batch returned",
            ErrorCode::NoSuchConversation => "GET /api/conversations lists yours",
            ErrorCode::Timeout => "retry with a larger timeout_ms, or read the page as it is",
            ErrorCode::NavigationFailed => "check the URL; the site may be down or unreachable",
            ErrorCode::BlockedUrl => "only http(s) URLs (and about:blank) can be opened",
            ErrorCode::BrowserUnavailable => {
                "the browser restarted; call again (the session's tabs were reset)"
            }
            ErrorCode::Upstream => "try again later or another backend",
            ErrorCode::Limit => "close idle sessions or tabs, or wait, then call again",
            ErrorCode::Busy => "the service is busy: wait Retry-After seconds and send again",
            ErrorCode::TooLarge => "send less: the message names the limit",
            ErrorCode::NotConfigured => "set the named configuration value and restart",
            ErrorCode::Unauthorized => {
                "send the configured bearer token: Authorization: Bearer <token>"
            }
            ErrorCode::ForbiddenAction => {
                "the operator does not allow this action: reach the goal another way or ask them"
            }
            ErrorCode::NeedsConfirmation => {
                "send the person confirm_url; once they allow it, repeat the call with \
                 confirmation set (or call with wait: true to wait for them)"
            }
            ErrorCode::Internal => "this is a bug in webpilot; retrying may help",
        }
    }
}

/// A tool failure as an agent sees it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, thiserror::Error, utoipa::ToSchema)]
#[error("{code:?}: {message}")]
pub struct ToolError {
    pub code: ErrorCode,
    /// What went wrong, naming the offending argument when there is one.
    pub message: String,
    /// How an agent recovers.
    pub hint: String,
    /// For LIMIT and BUSY: seconds to wait before calling again (also the `Retry-After` header).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_secs: Option<u64>,
    /// For NEEDS_CONFIRMATION: what a person is asked to allow, and where.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmation: Option<Box<ConfirmationAsk>>,
}

/// An action held until a person allows it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, utoipa::ToSchema)]
pub struct ConfirmationAsk {
    /// Repeat the call with `confirmation` set to this once the person has allowed it.
    pub id: String,
    /// The live view, where a person sees the page and allows or refuses the action.
    pub confirm_url: String,
    /// What the action would do.
    pub what: String,
    /// The operator's rule that holds it.
    pub rule: String,
    /// When the question lapses.
    pub expires_at: String,
}

impl ToolError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            hint: code.default_hint().to_string(),
            retry_after_secs: None,
            confirmation: None,
        }
    }

    /// Says how many seconds to wait before calling again.
    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after_secs = Some(secs);
        self
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = hint.into();
        self
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidArgument, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }

    /// The error as the JSON body every front returns.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(ErrorBody { error: self }).unwrap_or_default()
    }
}

/// The body of every error response.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ErrorBody<'a> {
    pub error: &'a ToolError,
}

pub type ToolResult<T> = Result<T, ToolError>;
