//! MCP logging: `logging/setLevel` for the connection, and each tool call's lines — started,
//! how the page's readiness was decided, its warnings, done or failed — as
//! `notifications/message` at or above the level set (nothing before a client sets one).
// The 2026 revision of the protocol deprecates logging; clients of the 2025 ones still use it.
#![allow(deprecated)]

use std::sync::{Arc, Mutex};

use rmcp::model::{CallToolResult, LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::{Peer, RoleServer};
use serde_json::{Map, Value, json};

use crate::sync::Locked;

/// The level a connection's client set, shared by its calls.
#[derive(Clone, Default)]
pub struct LogLevel(Arc<Mutex<Option<LoggingLevel>>>);

impl LogLevel {
    pub fn set(&self, level: LoggingLevel) {
        *self.0.locked() = Some(level);
    }

    fn wants(&self, level: LoggingLevel) -> bool {
        self.0.locked().is_some_and(|set| rank(level) >= rank(set))
    }

    /// Sends `lines` the client wants; a client gone is not an error of the call.
    pub async fn send(&self, peer: &Peer<RoleServer>, lines: Vec<(LoggingLevel, Value)>) {
        for (level, data) in lines.into_iter().filter(|(level, _)| self.wants(*level)) {
            let message = LoggingMessageNotificationParam::new(level, data).with_logger("webpilot");
            if peer.notify_logging_message(message).await.is_err() {
                return;
            }
        }
    }
}

/// RFC 5424's order, as the protocol has it.
fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// The line a call starts with: the names of its arguments, never their values (a typed
/// password, a cookie file's content).
pub fn started(tool: &str, arguments: Option<&Map<String, Value>>) -> Vec<(LoggingLevel, Value)> {
    let names: Vec<&String> = arguments.into_iter().flat_map(|a| a.keys()).collect();
    vec![(
        LoggingLevel::Debug,
        json!({"tool": tool, "event": "started", "arguments": names}),
    )]
}

/// What a finished call says: its readiness decision, its warnings, and done or failed.
pub fn finished(
    tool: &str,
    result: &CallToolResult,
    elapsed_ms: u128,
) -> Vec<(LoggingLevel, Value)> {
    let mut lines = Vec::new();
    if result.is_error == Some(true) {
        let error = result
            .content
            .first()
            .and_then(|c| c.as_text())
            .and_then(|t| serde_json::from_str::<Value>(&t.text).ok())
            .map(|e| e["error"].clone())
            .unwrap_or(Value::Null);
        lines.push((
            LoggingLevel::Error,
            json!({"tool": tool, "event": "failed", "elapsed_ms": elapsed_ms, "error": error}),
        ));
        return lines;
    }
    let output = result.structured_content.clone().unwrap_or(Value::Null);
    if let Some(ready) = output.get("ready").filter(|r| !r.is_null()) {
        lines.push((
            LoggingLevel::Info,
            json!({"tool": tool, "event": "ready", "ready": ready}),
        ));
    }
    for warning in output["warnings"].as_array().into_iter().flatten() {
        lines.push((
            LoggingLevel::Warning,
            json!({"tool": tool, "event": "warning", "warning": warning}),
        ));
    }
    lines.push((
        LoggingLevel::Info,
        json!({"tool": tool, "event": "done", "elapsed_ms": elapsed_ms}),
    ));
    lines
}
