//! Crawls as MCP tasks, as the protocol's 2025-11-25 revision defines them (what the official
//! SDKs speak): `tools/call` of crawl_batch with a `task` field starts the crawl and answers
//! with its task at once; `tasks/get`, `tasks/result` (waits for the end, then the crawl's whole
//! report as the call's result), `tasks/list` and `tasks/cancel` map onto the caller's tenant's
//! crawl tasks, whose ids they share. rmcp models a later draft of tasks and drops a call's
//! `task` field, so these messages are answered before they reach it (`intercept.rs`, on both
//! transports), and its `initialize` and `tools/list` answers are marked with what is offered.

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::app::App;
use crate::crawl::{TaskStatus, TaskSummary};
use crate::error::{ErrorCode, ToolError};
use crate::ids::TaskId;
use crate::tenancy::Tenant;
use crate::tenancy::links::rfc3339_millis;
use crate::tools::Caller;

/// The one tool that runs as a task.
const TASK_TOOL: &str = "crawl_batch";
/// How often a client is asked to poll a running task.
const POLL_INTERVAL_MS: u64 = 1_000;
/// Tasks per `tasks/list` page.
const LIST_PAGE: usize = 50;
/// The `_meta` key that ties a task's result to its task.
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// JSON-RPC error codes of the answers.
const INVALID_PARAMS: i64 = -32602;
const METHOD_NOT_FOUND: i64 = -32601;
const INTERNAL_ERROR: i64 = -32603;

/// What the tasks layer does with a message from the client.
#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    /// A tasks request: answered here, rmcp never sees it.
    Answer,
    /// A request whose answer says what tasks are offered: rmcp answers, the answer is marked.
    Mark,
    /// Anything else, for rmcp alone.
    Pass,
}

/// Which way a client's message goes.
pub fn route(message: &Value) -> Route {
    if message.get("id").is_none() {
        return Route::Pass;
    }
    match message.get("method").and_then(Value::as_str) {
        Some("tasks/get" | "tasks/result" | "tasks/list" | "tasks/cancel") => Route::Answer,
        Some("tools/call") if message.pointer("/params/task").is_some() => Route::Answer,
        Some("initialize" | "tools/list") => Route::Mark,
        _ => Route::Pass,
    }
}

/// Marks an answer of rmcp's: `initialize` declares the tasks capability, `tools/list` says
/// crawl_batch may run as a task. Other messages are left as they are.
pub fn mark(message: &mut Value) {
    let Some(result) = message.get_mut("result").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(capabilities) = result
        .get_mut("capabilities")
        .and_then(Value::as_object_mut)
    {
        capabilities.insert(
            "tasks".into(),
            json!({ "list": {}, "cancel": {}, "requests": { "tools": { "call": {} } } }),
        );
    }
    if let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) {
        for tool in tools.iter_mut().filter(|tool| tool["name"] == TASK_TOOL) {
            tool["execution"] = json!({ "taskSupport": "optional" });
        }
    }
}

/// A JSON-RPC error answer.
#[derive(Serialize)]
struct RpcError {
    code: i64,
    message: String,
}

impl RpcError {
    fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

impl From<ToolError> for RpcError {
    fn from(error: ToolError) -> Self {
        let code = match error.code {
            ErrorCode::Internal => INTERNAL_ERROR,
            _ => INVALID_PARAMS,
        };
        let message = if error.hint.is_empty() {
            error.message
        } else {
            format!("{} ({})", error.message, error.hint)
        };
        Self::new(code, message)
    }
}

/// Answers a message `route` sent here: the whole JSON-RPC response.
pub async fn answer(app: &App, tenant: &Arc<Tenant>, message: &Value) -> Value {
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let params = message.get("params").cloned().unwrap_or_else(|| json!({}));
    let method = message.get("method").and_then(Value::as_str).unwrap_or("");
    let answered = match method {
        "tools/call" => create(app, tenant, &params).await,
        "tasks/list" => list(app, tenant, &params).await,
        _ => match params.get("taskId").and_then(Value::as_str) {
            None => Err(RpcError::new(INVALID_PARAMS, "params.taskId is required")),
            Some(task_id) => match TaskId::parse(task_id) {
                Err(error) => Err(error.into()),
                Ok(task_id) => match method {
                    "tasks/get" => task(app, tenant, &task_id).await,
                    "tasks/result" => result(app, tenant, &task_id).await,
                    _ => cancel(app, tenant, &task_id).await,
                },
            },
        },
    };
    let (result, error) = match answered {
        Ok(result) => (Some(result), None),
        Err(error) => (None, Some(error)),
    };
    let reply = Reply {
        jsonrpc: "2.0",
        id,
        result,
        error,
    };
    serde_json::to_value(reply).unwrap_or_default()
}

/// A JSON-RPC response: its `result`, or its `error`.
#[derive(Serialize)]
struct Reply {
    jsonrpc: &'static str,
    id: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<RpcError>,
}

/// A crawl as an MCP task.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct McpTask {
    task_id: TaskId,
    /// `working`, `completed`, `failed` or `cancelled`.
    status: &'static str,
    status_message: String,
    created_at: String,
    last_updated_at: String,
    /// Crawl results are kept until deleted: no time to live (`null`).
    ttl: Option<u64>,
    poll_interval: u64,
}

/// `tasks/list`'s answer: a page of tasks, and where the next page starts.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TaskPage {
    tasks: Vec<McpTask>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_cursor: Option<String>,
}

/// A value the protocol's types always serialize.
fn value(typed: impl Serialize) -> Value {
    serde_json::to_value(typed).unwrap_or_default()
}

/// `tools/call` with `task`: crawl_batch starts the crawl; the answer is its task.
async fn create(app: &App, tenant: &Arc<Tenant>, params: &Value) -> Result<Value, RpcError> {
    let name = params.get("name").and_then(Value::as_str).unwrap_or("");
    if name != TASK_TOOL {
        return Err(RpcError::new(
            METHOD_NOT_FOUND,
            format!(
                "{name} does not run as a task (only {TASK_TOOL} does): call it without `task`"
            ),
        ));
    }
    let arguments = params
        .get("arguments")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let caller = Caller::new(tenant.clone());
    let started = app.registry.call(TASK_TOOL, arguments, &caller).await?;
    let task_id = TaskId::parse(started.json["task_id"].as_str().unwrap_or_default())?;
    let summary = app.crawler.summary(tenant, &task_id).await?;
    Ok(json!({ "task": task_of(&summary) }))
}

/// `tasks/get`: where the crawl is.
async fn task(app: &App, tenant: &Tenant, task_id: &TaskId) -> Result<Value, RpcError> {
    Ok(value(task_of(&app.crawler.summary(tenant, task_id).await?)))
}

/// `tasks/result`: waits until the crawl ends, then answers as the call would have: its whole
/// report as text and structured content (`isError` when every URL failed).
async fn result(app: &App, tenant: &Arc<Tenant>, task_id: &TaskId) -> Result<Value, RpcError> {
    let (mut summary, mut events) = app.crawler.subscribe(tenant, task_id).await?;
    while !summary.status.is_finished() {
        match events.recv().await {
            Ok(event) if event.name() != "done" => continue,
            // Done, or events missed: the store says where the task is.
            Ok(_) | Err(RecvError::Lagged(_)) => {}
            Err(RecvError::Closed) => {
                (summary, events) = app.crawler.subscribe(tenant, task_id).await?;
                continue;
            }
        }
        summary = app.crawler.summary(tenant, task_id).await?;
    }
    // The whole report, as REST's task route answers: no page budget.
    let args = json!({ "task_id": task_id, "max_tokens": usize::MAX });
    let caller = Caller::new(tenant.clone());
    let report = app.registry.call("crawl_status", args, &caller).await?.json;
    Ok(json!({
        "content": [{ "type": "text", "text": report.to_string() }],
        "structuredContent": report,
        "isError": summary.status == TaskStatus::Failed,
        "_meta": { RELATED_TASK: { "taskId": task_id } },
    }))
}

/// `tasks/list`: the tenant's crawls, newest first, a page at a time.
async fn list(app: &App, tenant: &Tenant, params: &Value) -> Result<Value, RpcError> {
    let cursor = params.get("cursor").and_then(Value::as_str);
    let from = match cursor.map(str::parse::<usize>) {
        None => 0,
        Some(Ok(from)) => from,
        Some(Err(_)) => return Err(RpcError::new(INVALID_PARAMS, "unknown cursor")),
    };
    let listed = app.crawler.list(tenant, None, from + LIST_PAGE + 1).await?;
    let more = listed.tasks.len() > from + LIST_PAGE;
    let tasks = listed
        .tasks
        .iter()
        .skip(from)
        .take(LIST_PAGE)
        .map(task_of)
        .collect();
    let next_cursor = more.then(|| (from + LIST_PAGE).to_string());
    Ok(value(TaskPage { tasks, next_cursor }))
}

/// `tasks/cancel`: the crawl stops where it is; a finished one is an error.
async fn cancel(app: &App, tenant: &Tenant, task_id: &TaskId) -> Result<Value, RpcError> {
    let summary = app.crawler.cancel(tenant, task_id).await?;
    Ok(value(task_of(&summary)))
}

/// A crawl as an MCP task.
fn task_of(summary: &TaskSummary) -> McpTask {
    let status = match summary.status {
        TaskStatus::Pending | TaskStatus::Running => "working",
        TaskStatus::Completed => "completed",
        TaskStatus::Failed => "failed",
        TaskStatus::Cancelled => "cancelled",
    };
    let status_message = match summary.status {
        TaskStatus::Failed => format!("every one of its {} URLs failed", summary.total),
        _ => format!("{} of {} URLs read", summary.progress, summary.total),
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    McpTask {
        task_id: summary.task_id.clone(),
        status,
        status_message,
        created_at: rfc3339_millis(summary.created_ms.max(0) as f64 / 1000.0),
        last_updated_at: rfc3339_millis(now),
        ttl: None,
        poll_interval: POLL_INTERVAL_MS,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_requests_are_answered_here_and_answers_about_offers_marked() {
        let call = |params: Value| json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
        assert_eq!(
            route(&call(json!({"name": "crawl_batch", "task": {"ttl": 1}}))),
            Route::Answer
        );
        assert_eq!(route(&call(json!({"name": "crawl_batch"}))), Route::Pass);
        assert_eq!(
            route(&json!({"id": 2, "method": "tasks/result", "params": {}})),
            Route::Answer
        );
        assert_eq!(
            route(&json!({"method": "tasks/get"})),
            Route::Pass,
            "a notification"
        );
        assert_eq!(
            route(&json!({"id": 3, "method": "initialize"})),
            Route::Mark
        );
        let mut listed = json!({"id": 4, "result": {"tools": [{"name": "crawl_batch"}, {"name": "browser_read"}]}});
        mark(&mut listed);
        assert_eq!(
            listed["result"]["tools"][0]["execution"]["taskSupport"],
            "optional"
        );
        assert!(listed["result"]["tools"][1].get("execution").is_none());
        let mut init = json!({"id": 0, "result": {"capabilities": {"tools": {}}}});
        mark(&mut init);
        assert_eq!(
            init["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"],
            json!({})
        );
    }
}
