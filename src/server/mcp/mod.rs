//! The MCP front (rmcp): the same registry over stdio (`webpilot mcp`) and streamable HTTP
//! (`/mcp`). Same tools and schemas as REST, each with its `outputSchema`; a result comes back
//! as text and as `structuredContent`, images as image content; a failed call is
//! `isError: true` with the error JSON as text. Each MCP connection gets a browser session of
//! its own unless the call names one. Beside tools: the tools' guides and a few workflows as
//! prompts (`prompts.rs`), the calls' log lines at the level a client sets (`logging.rs`), and
//! `notifications/cancelled` ending the call it names at once; what the tenant keeps (downloads,
//! saved screenshots, traces, crawl results) as resources (`resources.rs`), crawl resources
//! updated on progress for a client that subscribes; crawls as tasks (`tasks.rs`, answered in
//! front of rmcp by `intercept.rs`).

mod completion;
mod elicitation;
mod intercept;
mod logging;
mod prompts;
mod resources;
mod tasks;

pub use intercept::{TaskDoor, intercept, stdio};

use std::collections::HashMap;
use std::sync::Arc;

use axum::http::request::Parts;
use base64::Engine;
use rmcp::ErrorData;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    ContentBlock, GetPromptRequestParams, GetPromptResponse, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ResourceContents, ServerCapabilities,
    ServerConfig, Tool, ToolAnnotations,
};
#[allow(deprecated)]
use rmcp::model::{SubscribeRequestParams, UnsubscribeRequestParams};
// Logging is deprecated by the protocol's 2026 revision; clients of the 2025 ones use it.
#[allow(deprecated)]
use rmcp::model::SetLevelRequestParams;
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RequestContext, RoleServer};
use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::error::{ErrorCode, ToolError};
use crate::ids::SessionName;
use crate::sync::Locked;
use crate::tenancy::Tenant;
use crate::tools::{Caller, HandoffProgress, TaskProgress};

/// One MCP connection's view of the service.
#[derive(Clone)]
pub struct McpFront {
    app: App,
    /// The browser session calls use when they do not name one.
    session: SessionName,
    /// The log level the client set (none: no log lines).
    log: logging::LogLevel,
    /// The sessions this connection's calls used, whose downloads it lists.
    used: Arc<std::sync::Mutex<Vec<SessionName>>>,
    /// Resource subscriptions, by URI: cancelled on unsubscribe or when the connection ends.
    watching: Arc<std::sync::Mutex<HashMap<String, CancellationToken>>>,
}

impl McpFront {
    pub fn new(app: App) -> Self {
        Self {
            app,
            // Unguessable: no other caller can name it.
            session: SessionName::new_mcp(),
            log: logging::LogLevel::default(),
            used: Default::default(),
            watching: Default::default(),
        }
    }

    /// Notes the session a call runs in, for `resources/list`.
    fn note_session(&self, arguments: Option<&Map<String, Value>>) {
        let named = arguments
            .and_then(|a| a.get("session"))
            .and_then(Value::as_str)
            .and_then(|name| SessionName::parse_callers(name).ok());
        let session = named.unwrap_or_else(|| self.session.clone());
        let mut used = self.used.locked();
        if !used.contains(&session) {
            used.push(session);
        }
    }

    fn tools(&self) -> Vec<Tool> {
        self.app
            .registry
            .specs()
            .iter()
            .map(|spec| {
                let effects = spec.effects;
                let hints = ToolAnnotations::with_title(spec.title)
                    .read_only(effects.read_only)
                    .destructive(effects.destructive)
                    .idempotent(effects.idempotent)
                    .open_world(effects.open_world);
                Tool::new(spec.name, spec.description, object(&spec.parameters))
                    .with_title(spec.title)
                    .with_annotations(hints)
                    .with_raw_output_schema(object(&spec.output_schema))
            })
            .collect()
    }

    /// Whose request it is: the tenant the request's key opened over HTTP (the auth layer puts
    /// it in the request), the operator over stdio.
    fn tenant(&self, context: &RequestContext<RoleServer>) -> Result<Arc<Tenant>, ToolError> {
        match context.extensions.get::<Parts>() {
            None => Ok(self.app.tenants.operator()),
            Some(parts) => parts
                .extensions
                .get::<Arc<Tenant>>()
                .cloned()
                .ok_or_else(|| {
                    ToolError::new(ErrorCode::Unauthorized, "the request has no tenant")
                }),
        }
    }

    /// The tenant of a request that is not a tool call, as a protocol error when there is none.
    fn requester(&self, context: &RequestContext<RoleServer>) -> Result<Arc<Tenant>, ErrorData> {
        self.tenant(context)
            .map_err(|e| ErrorData::invalid_request(e.message, None))
    }

    /// Whose call it is, in which session, reporting progress where the client asked.
    fn caller(&self, context: &RequestContext<RoleServer>) -> Result<Caller, ToolError> {
        let tenant = self.tenant(context)?;
        let parts = context.extensions.get::<Parts>();
        let origin = parts.and_then(|parts| super::origin_of(&parts.headers));
        let mut caller = Caller::new(tenant)
            .in_session(Some(self.session.clone()))
            .at(origin);
        if let Some(opener) = elicitation::UrlElicitation::of(&context.peer) {
            caller = caller.opening_links(Arc::new(opener));
        }
        if let Some(token) = context.meta.get_progress_token() {
            caller = caller
                .reporting(progress_notifier(context.peer.clone(), token.clone()))
                .reporting_tasks(task_notifier(context.peer.clone(), token));
        }
        Ok(caller)
    }

    async fn call(
        &self,
        name: &str,
        arguments: Option<Map<String, Value>>,
        caller: &Caller,
    ) -> CallToolResult {
        let arguments = Value::Object(arguments.unwrap_or_default());
        let registry = &self.app.registry;
        match registry.call(name, arguments, caller).await {
            Ok(output) => {
                // The result twice, per the 2025-06-18 spec: as text for clients that read
                // content, and as structured content matching the tool's outputSchema.
                let mut content = vec![ContentBlock::text(output.json.to_string())];
                content.extend(output.images.iter().map(|image| {
                    let data = base64::engine::general_purpose::STANDARD.encode(&image.data);
                    if image.is_picture() {
                        ContentBlock::image(data, image.mime)
                    } else {
                        let uri = format!("webpilot:{name}");
                        ContentBlock::resource(
                            ResourceContents::blob(data, uri).with_mime_type(image.mime),
                        )
                    }
                }));
                // A saved file is also a resource the client can read by its link.
                content.extend(output.saved.iter().filter_map(|path| {
                    resources::link_for(&self.app, &caller.tenant, path)
                        .map(ContentBlock::resource_link)
                }));
                let mut result = CallToolResult::success(content);
                result.structured_content = Some(output.json);
                result
            }
            Err(error) => failed(&error),
        }
    }
}

/// Turns a waiting hand-off into progress notifications (the client asked for them with a
/// progress token), which also keep clients that reset their timeout on progress waiting.
fn progress_notifier(
    peer: Peer<RoleServer>,
    token: ProgressToken,
) -> mpsc::UnboundedSender<HandoffProgress> {
    notifier(peer, token, |token, progress: HandoffProgress| {
        let message = format!(
            "Waiting for a person in the live view ({} s): {} Link: {}",
            progress.waited_ms / 1000,
            progress.message,
            progress.live_url
        );
        let seconds = progress.waited_ms as f64 / 1000.0;
        ProgressNotificationParam::new(token, seconds).with_message(message)
    })
}

/// Turns a background task's progress, while a call waits on it, into progress notifications.
fn task_notifier(
    peer: Peer<RoleServer>,
    token: ProgressToken,
) -> mpsc::UnboundedSender<TaskProgress> {
    notifier(peer, token, |token, update: TaskProgress| {
        ProgressNotificationParam::new(token, update.progress as f64)
            .with_total(update.total as f64)
            .with_message(update.message)
    })
}

/// A channel whose updates go to the client as progress notifications under `token`, each
/// written by `notice`, until the client is gone.
fn notifier<T: Send + 'static>(
    peer: Peer<RoleServer>,
    token: ProgressToken,
    notice: impl Fn(ProgressToken, T) -> ProgressNotificationParam + Send + 'static,
) -> mpsc::UnboundedSender<T> {
    let (sender, mut updates) = mpsc::unbounded_channel::<T>();
    tokio::spawn(async move {
        while let Some(update) = updates.recv().await {
            if peer
                .notify_progress(notice(token.clone(), update))
                .await
                .is_err()
            {
                break;
            }
        }
    });
    sender
}

/// A failed call: `isError`, with the error JSON as text.
fn failed(error: &ToolError) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(error.to_json().to_string())])
}

/// A schema as the JSON object MCP tool descriptions carry.
fn object(schema: &Value) -> Arc<Map<String, Value>> {
    Arc::new(schema.as_object().cloned().unwrap_or_default())
}

impl ServerHandler for McpFront {
    #[allow(deprecated)]
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_prompts()
            .enable_completions()
            .enable_logging()
            .enable_resources()
            .enable_resources_subscribe()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("webpilot", env!("CARGO_PKG_VERSION")))
            .with_instructions(self.app.registry.prompt())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = match self.caller(&context) {
            Ok(caller) => caller,
            Err(error) => return Ok(failed(&error).into()),
        };
        self.note_session(request.arguments.as_ref());
        let (peer, name) = (&context.peer, request.name.clone());
        let started_line = logging::started(&name, request.arguments.as_ref());
        self.log.send(peer, started_line).await;
        let started = std::time::Instant::now();
        // A cancelled call ends here: its future is dropped, which lets go of its session and
        // tab as a REST client that hangs up does.
        let result = tokio::select! {
            result = self.call(&name, request.arguments, &caller) => result,
            () = context.ct.cancelled() => failed(&ToolError::new(
                ErrorCode::Timeout,
                format!("{name} was cancelled by the client"),
            ).with_hint("call again when it is wanted; the session is as the cancelled call left it")),
        };
        let elapsed = started.elapsed().as_millis();
        self.log
            .send(peer, logging::finished(&name, &result, elapsed))
            .await;
        Ok(result.into())
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.log.set(request.level);
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(prompts::list(
            self.app.registry.specs(),
        )))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let specs = self.app.registry.specs();
        prompts::get(specs, &request.name, request.arguments.as_ref()).map(Into::into)
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let tenant = self.requester(&context)?;
        let used = self.used.locked().clone();
        completion::complete(&self.app, &tenant, &used, &request)
            .await
            .map(CompleteResult::new)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let tenant = self.requester(&context)?;
        let sessions = self.used.locked().clone();
        let listed = resources::list(&self.app, &tenant, &sessions).await;
        Ok(ListResourcesResult::with_all_items(listed))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(
            resources::templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let tenant = self.requester(&context)?;
        resources::read(&self.app, &tenant, &request.uri)
            .await
            .map(Into::into)
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let tenant = self.requester(&context)?;
        let stop = CancellationToken::new();
        let watch = resources::watch(&self.app, &tenant, &request.uri, context.peer, stop.clone());
        watch.await?;
        if let Some(earlier) = self.watching.locked().insert(request.uri, stop) {
            earlier.cancel();
        }
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if let Some(stop) = self.watching.locked().remove(&request.uri) {
            stop.cancel();
        }
        Ok(())
    }
}
