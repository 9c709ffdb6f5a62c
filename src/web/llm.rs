//! A streaming client for OpenAI-compatible `/chat/completions`: sends the conversation and the
//! tool definitions, and folds the SSE chunks (content, reasoning and tool-call deltas, split
//! anywhere) into one assistant turn, reporting deltas as they arrive. 429 and 5xx answers are
//! retried with backoff a bounded number of times.

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Map, Value, json};

use crate::config::LlmConfig;

/// Longest pause honoured from a `Retry-After` header.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);
const FIRST_BACKOFF: Duration = Duration::from_millis(500);

/// A streamed piece of the answer, as it arrives.
pub enum Delta<'a> {
    Content(&'a str),
    Reasoning(&'a str),
}

/// One assistant turn, complete.
#[derive(Debug, Default)]
pub struct Turn {
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Option<Value>,
}

/// A tool call requested by the model (arguments as the raw string it sent).
#[derive(Debug, Clone, Default)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// Why the model gave no turn.
#[derive(Debug)]
pub struct LlmError {
    /// The upstream HTTP status, when there was an answer.
    pub status: Option<u16>,
    pub message: String,
}

impl LlmError {
    fn new(status: Option<u16>, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }
}

pub struct LlmClient {
    http: reqwest::Client,
    config: LlmConfig,
}

impl LlmClient {
    pub fn new(config: LlmConfig) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(Duration::from_millis(config.timeout_ms))
            .build()?;
        Ok(Self { http, config })
    }

    pub fn vision(&self) -> bool {
        self.config.vision
    }

    /// Streams one completion, calling `on_delta` for content and reasoning as they arrive.
    pub async fn complete(
        &self,
        model: Option<&str>,
        messages: &[Value],
        tools: &[Value],
        on_delta: impl FnMut(Delta<'_>),
    ) -> Result<Turn, LlmError> {
        self.stream(model, messages, tools, &Map::new(), on_delta)
            .await
    }

    /// One completion whose answer is to be JSON shaped by `schema` (`response_format:
    /// json_schema`, not strict: callers' schemas rarely meet strict mode's rules). A server
    /// that refuses the format (400) is asked again without it; the prompt asks for JSON too.
    pub async fn complete_json(
        &self,
        messages: &[Value],
        schema: &Value,
    ) -> Result<Turn, LlmError> {
        let mut format = Map::new();
        format.insert(
            "response_format".into(),
            json!({"type": "json_schema",
                   "json_schema": {"name": "extraction", "schema": schema, "strict": false}}),
        );
        match self.stream(None, messages, &[], &format, |_| ()).await {
            Err(LlmError {
                status: Some(400), ..
            }) => self.stream(None, messages, &[], &Map::new(), |_| ()).await,
            answer => answer,
        }
    }

    /// Whether an operator set a model up: a key, or a server other than the default.
    pub fn configured(&self) -> bool {
        self.config.api_key.is_some() || self.config.base_url != LlmConfig::default().base_url
    }

    async fn stream(
        &self,
        model: Option<&str>,
        messages: &[Value],
        tools: &[Value],
        extra: &Map<String, Value>,
        mut on_delta: impl FnMut(Delta<'_>),
    ) -> Result<Turn, LlmError> {
        let response = self
            .send_with_retries(model, messages, tools, extra)
            .await?;
        let mut turn = Turn::default();
        let mut calls: Vec<ToolCall> = Vec::new();
        let mut buffer = String::new();
        let mut finished = false;
        let mut body = response.bytes_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| transport_error(&e, "reading the stream"))?;
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffer.find('\n') {
                let line: String = buffer.drain(..=end).collect();
                let Some(data) = line.trim().strip_prefix("data:") else {
                    continue;
                };
                let data = data.trim();
                if data == "[DONE]" {
                    finished = true;
                    continue;
                }
                let Ok(chunk) = serde_json::from_str::<Value>(data) else {
                    return Err(LlmError::new(
                        Some(200),
                        format!("not a JSON chunk: {data:.200}"),
                    ));
                };
                finished |= fold_chunk(&chunk, &mut turn, &mut calls, &mut on_delta);
            }
        }
        if !finished {
            return Err(LlmError::new(
                Some(200),
                "the model's stream ended before the answer was complete",
            ));
        }
        turn.tool_calls = calls.into_iter().filter(|c| !c.name.is_empty()).collect();
        Ok(turn)
    }

    async fn send_with_retries(
        &self,
        model: Option<&str>,
        messages: &[Value],
        tools: &[Value],
        extra: &Map<String, Value>,
    ) -> Result<reqwest::Response, LlmError> {
        let url = format!(
            "{}/chat/completions",
            self.config.base_url.trim_end_matches('/')
        );
        let mut body = json!({
            "model": model.unwrap_or(&self.config.model),
            "messages": messages,
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        if !tools.is_empty() {
            body["tools"] = json!(tools);
        }
        for (key, value) in extra {
            body[key] = value.clone();
        }
        let mut backoff = FIRST_BACKOFF;
        let mut attempt = 0;
        loop {
            let mut request = self.http.post(&url).json(&body);
            if let Some(key) = &self.config.api_key {
                request = request.bearer_auth(key);
            }
            let response = request
                .send()
                .await
                .map_err(|e| transport_error(&e, "calling the model"))?;
            let status = response.status().as_u16();
            if (200..300).contains(&status) {
                return Ok(response);
            }
            let retryable = status == 429 || status >= 500;
            if !retryable || attempt >= self.config.max_retries {
                let text = response.text().await.unwrap_or_default();
                return Err(LlmError::new(
                    Some(status),
                    format!(
                        "the model's API answered {status}: {}",
                        error_message(&text)
                    ),
                ));
            }
            let wait = retry_after(&response).unwrap_or(backoff);
            tracing::warn!(status, attempt, ?wait, "model API busy; retrying");
            tokio::time::sleep(wait).await;
            backoff *= 2;
            attempt += 1;
        }
    }
}

/// Adds one chunk to the turn; true when it carries a finish reason.
fn fold_chunk(
    chunk: &Value,
    turn: &mut Turn,
    calls: &mut Vec<ToolCall>,
    on_delta: &mut impl FnMut(Delta<'_>),
) -> bool {
    if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
        turn.usage = Some(usage.clone());
    }
    let Some(choice) = chunk["choices"].get(0) else {
        return false;
    };
    let delta = &choice["delta"];
    if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
        turn.content.push_str(text);
        on_delta(Delta::Content(text));
    }
    if let Some(text) = delta["reasoning_content"]
        .as_str()
        .filter(|t| !t.is_empty())
    {
        on_delta(Delta::Reasoning(text));
    }
    for part in delta["tool_calls"].as_array().into_iter().flatten() {
        let index = part["index"].as_u64().unwrap_or(calls.len() as u64) as usize;
        if calls.len() <= index {
            calls.resize(index + 1, ToolCall::default());
        }
        let call = &mut calls[index];
        if let Some(id) = part["id"].as_str() {
            call.id = id.to_string();
        }
        if let Some(name) = part["function"]["name"].as_str() {
            call.name.push_str(name);
        }
        if let Some(arguments) = part["function"]["arguments"].as_str() {
            call.arguments.push_str(arguments);
        }
    }
    choice["finish_reason"].is_string()
}

fn retry_after(response: &reqwest::Response) -> Option<Duration> {
    let seconds: f64 = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs_f64(seconds.max(0.0)).min(MAX_RETRY_AFTER))
}

/// The message of an OpenAI-style error body, else its start.
fn error_message(text: &str) -> String {
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
        .unwrap_or_else(|| text.chars().take(200).collect())
}

fn transport_error(error: &reqwest::Error, doing: &str) -> LlmError {
    let what = if error.is_timeout() {
        "timed out"
    } else {
        "failed"
    };
    let mut cause: &dyn std::error::Error = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    LlmError::new(None, format!("{doing} {what}: {cause}"))
}

/// An assistant message carrying tool calls, for the transcript sent back to the model.
pub fn assistant_message(turn: &Turn) -> Value {
    let mut message = Map::new();
    message.insert("role".into(), json!("assistant"));
    message.insert("content".into(), json!(turn.content));
    if !turn.tool_calls.is_empty() {
        let calls: Vec<Value> = turn
            .tool_calls
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
            .collect();
        message.insert("tool_calls".into(), json!(calls));
    }
    Value::Object(message)
}
