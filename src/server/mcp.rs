//! The MCP front (rmcp): the same registry over stdio (`webpilot mcp`) and streamable HTTP
//! (`/mcp`). Same tools and schemas as REST; a failed call is `isError: true` with the error
//! JSON as text; images come back as image content. Each MCP connection gets a browser session
//! of its own unless the call names one.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use base64::Engine;
use rmcp::ErrorData;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Map, Value};

use crate::app::App;

/// Numbers the connections, to name their browser sessions.
static CONNECTIONS: AtomicU64 = AtomicU64::new(0);

/// One MCP connection's view of the service.
#[derive(Clone)]
pub struct McpFront {
    app: App,
    /// The browser session calls use when they do not name one.
    session: Arc<str>,
}

impl McpFront {
    pub fn new(app: App) -> Self {
        let number = CONNECTIONS.fetch_add(1, Ordering::Relaxed) + 1;
        Self {
            app,
            session: format!("mcp-{number}").into(),
        }
    }

    fn tools(&self) -> Vec<Tool> {
        self.app
            .registry
            .definitions()
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|definition| {
                let function = &definition["function"];
                let schema: Map<String, Value> = function["parameters"].as_object()?.clone();
                Some(Tool::new(
                    function["name"].as_str()?.to_string(),
                    function["description"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    Arc::new(schema),
                ))
            })
            .collect()
    }

    async fn call(&self, name: &str, arguments: Option<Map<String, Value>>) -> CallToolResult {
        let arguments = Value::Object(arguments.unwrap_or_default());
        let arguments = self
            .app
            .registry
            .with_default_session(name, arguments, &self.session);
        match self.app.registry.call(name, arguments).await {
            Ok(output) => {
                let mut content = vec![ContentBlock::text(output.json.to_string())];
                content.extend(output.images.iter().map(|image| {
                    let data = base64::engine::general_purpose::STANDARD.encode(&image.data);
                    ContentBlock::image(data, image.mime)
                }));
                CallToolResult::success(content)
            }
            Err(error) => {
                CallToolResult::error(vec![ContentBlock::text(error.to_json().to_string())])
            }
        }
    }
}

impl ServerHandler for McpFront {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
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
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(self.call(&request.name, request.arguments).await.into())
    }
}
