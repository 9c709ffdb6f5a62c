//! The tool registry: every capability is a `Tool`, and every front (REST, CLI, agent loop, MCP)
//! serves this one registry.
//!
//! A tool declares an args struct (serde + schemars; its doc comments become the schema's
//! descriptions) and a short handler calling into `browser` or `web`. Concerns common to all
//! tools — argument parsing with field-naming errors, timing, tracing — live here, once.

mod cookies;
mod crawl;
mod interact;
mod navigate;
pub mod open_web_page;
pub mod paging;
mod read;
mod schema;
mod screenshot;
mod tabs;
mod web_search;

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use tracing::Instrument;

use crate::browser::{BrowserService, Tab};
use crate::config::Config;
use crate::crawl::Crawler;
use crate::error::{ToolError, ToolResult};
use crate::metrics::Metrics;
use crate::web::WebService;

/// Name of the session used when a call does not name one.
pub const DEFAULT_SESSION: &str = "default";

/// What a tool hands back: a JSON object, plus images for fronts that can show them.
#[derive(Debug, Clone)]
pub struct ToolOutput {
    pub json: Value,
    pub images: Vec<Image>,
}

/// An image produced by a tool (screenshots).
#[derive(Debug, Clone)]
pub struct Image {
    pub mime: &'static str,
    pub data: Vec<u8>,
}

impl ToolOutput {
    pub fn json(json: Value) -> Self {
        Self {
            json,
            images: Vec::new(),
        }
    }
}

/// Shared state every tool may use.
pub struct Ctx {
    pub config: Arc<Config>,
    pub browser: Arc<BrowserService>,
    pub web: Arc<WebService>,
    pub crawler: Arc<Crawler>,
}

/// One tool: its name, description, typed arguments and handler.
#[async_trait]
pub trait Tool: Send + Sync + 'static {
    type Args: DeserializeOwned + JsonSchema + Send;
    const NAME: &'static str;
    const DESCRIPTION: &'static str;
    /// A few sentences on when and how to use the tool, for an agent's system prompt.
    const GUIDE: &'static str;
    /// Whether a REST client may ask for the result as an image (`Accept: image/…`).
    const RETURNS_IMAGE: bool = false;

    async fn run(&self, ctx: &Ctx, args: Self::Args) -> ToolResult<ToolOutput>;
}

/// The object-safe face of a `Tool`, as the registry stores it.
#[async_trait]
trait DynTool: Send + Sync {
    fn name(&self) -> &'static str;
    fn definition(&self) -> Value;
    fn guide(&self) -> &'static str;
    fn api_description(&self) -> ApiDescription;
    async fn call(&self, ctx: &Ctx, args: Value) -> ToolResult<ToolOutput>;
}

#[async_trait]
impl<T: Tool> DynTool for T {
    fn name(&self) -> &'static str {
        T::NAME
    }

    fn definition(&self) -> Value {
        json!({
            "type": "function",
            "function": {
                "name": T::NAME,
                "description": T::DESCRIPTION,
                "parameters": schema::parameters::<T::Args>(),
            }
        })
    }

    fn guide(&self) -> &'static str {
        T::GUIDE
    }

    fn api_description(&self) -> ApiDescription {
        ApiDescription {
            name: T::NAME,
            description: T::DESCRIPTION,
            arguments: schema::full::<T::Args>(),
            returns_image: T::RETURNS_IMAGE,
        }
    }

    async fn call(&self, ctx: &Ctx, args: Value) -> ToolResult<ToolOutput> {
        let args = parse_args::<T::Args>(T::NAME, args)?;
        self.run(ctx, args).await
    }
}

/// Parses arguments, naming the offending field in the error.
fn parse_args<A: DeserializeOwned>(tool: &str, args: Value) -> ToolResult<A> {
    let args = match args {
        Value::Null => Value::Object(Map::new()),
        other => other,
    };
    if !args.is_object() {
        return Err(ToolError::invalid(format!(
            "arguments of {tool} must be a JSON object"
        )));
    }
    serde_path_to_error::deserialize(args).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner().to_string();
        let message = if path == "." {
            format!("{tool}: {inner}")
        } else {
            format!("{tool}: field `{path}`: {inner}")
        };
        ToolError::invalid(message)
            .with_hint(format!("GET /api/tools shows the parameters of {tool}"))
    })
}

/// What the REST API description says of a tool.
pub struct ApiDescription {
    pub name: &'static str,
    pub description: &'static str,
    /// The complete JSON Schema (2020-12) of the arguments, bounds and formats included.
    pub arguments: Value,
    pub returns_image: bool,
}

/// All tools, by name, in a stable order.
pub struct Registry {
    tools: Vec<Box<dyn DynTool>>,
    /// The OpenAI function definitions, generated once: schemas never change at run time.
    definitions: Value,
    ctx: Ctx,
    metrics: Metrics,
}

impl Registry {
    pub fn new(
        config: Arc<Config>,
        browser: Arc<BrowserService>,
        web: Arc<WebService>,
        crawler: Arc<Crawler>,
    ) -> Self {
        let tools: Vec<Box<dyn DynTool>> = vec![
            Box::new(navigate::Navigate),
            Box::new(read::Read),
            Box::new(interact::Interact),
            Box::new(screenshot::Screenshot),
            Box::new(tabs::Tabs),
            Box::new(cookies::Cookies),
            Box::new(web_search::WebSearch),
            Box::new(open_web_page::OpenWebPage),
            Box::new(crawl::CrawlBatch),
            Box::new(crawl::CrawlStatus),
        ];
        let definitions = Value::Array(tools.iter().map(|t| t.definition()).collect());
        Self {
            tools,
            definitions,
            ctx: Ctx {
                config,
                browser,
                web,
                crawler,
            },
            metrics: Metrics::default(),
        }
    }

    pub fn ctx(&self) -> &Ctx {
        &self.ctx
    }

    /// Counts and latencies of the calls made so far.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.tools.iter().map(|t| t.name()).collect()
    }

    /// The tool list as OpenAI function definitions.
    pub fn definitions(&self) -> &Value {
        &self.definitions
    }

    /// Every tool as the REST API description documents it.
    pub fn api_descriptions(&self) -> Vec<ApiDescription> {
        self.tools.iter().map(|t| t.api_description()).collect()
    }

    /// The usage guides of all tools, one paragraph each.
    pub fn prompt(&self) -> String {
        self.tools
            .iter()
            .map(|t| t.guide())
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    /// Fills `session` when tool `name` takes one and `args` does not name it: how each front
    /// (REST header, chat request, MCP connection) supplies its default session.
    pub fn with_default_session(&self, name: &str, mut args: Value, session: &str) -> Value {
        if let Value::Object(map) = &mut args
            && self.accepts(name, "session")
        {
            map.entry("session").or_insert_with(|| json!(session));
        }
        args
    }

    /// Whether tool `name` takes an argument called `field`.
    pub fn accepts(&self, name: &str, field: &str) -> bool {
        self.definitions
            .as_array()
            .into_iter()
            .flatten()
            .find(|d| d["function"]["name"] == name)
            .is_some_and(|d| {
                d["function"]["parameters"]["properties"]
                    .get(field)
                    .is_some()
            })
    }

    /// Runs one tool. The result object always carries `elapsed_ms`.
    pub async fn call(&self, name: &str, args: Value) -> ToolResult<ToolOutput> {
        let tool = self
            .tools
            .iter()
            .find(|t| t.name() == name)
            .ok_or_else(|| {
                ToolError::new(
                    crate::error::ErrorCode::NoSuchTool,
                    format!("no tool named {name:?}; tools: {}", self.names().join(", ")),
                )
            })?;
        let started = Instant::now();
        let result = tool
            .call(&self.ctx, args)
            .instrument(tracing::info_span!("tool", tool = name))
            .await;
        let elapsed = started.elapsed();
        let elapsed_ms = elapsed.as_millis() as u64;
        let outcome = match &result {
            Ok(_) => {
                tracing::info!(tool = name, elapsed_ms, "tool call done");
                "ok".to_string()
            }
            Err(e) => {
                tracing::info!(tool = name, elapsed_ms, code = ?e.code, "tool call failed");
                e.code.name()
            }
        };
        self.metrics.record(name, &outcome, elapsed.as_secs_f64());
        result.map(|mut output| {
            if let Value::Object(map) = &mut output.json {
                map.insert("elapsed_ms".into(), json!(elapsed_ms));
            }
            output
        })
    }
}

/// Fields every browser result carries: session, tab, url, title.
async fn browser_fields(session: &str, tab: &Tab) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("session".into(), json!(session));
    map.insert("tab".into(), json!(tab.id));
    map.insert("url".into(), json!(tab.url().await));
    map.insert("title".into(), json!(tab.title().await));
    map
}

/// Merges tool-specific fields after the common browser fields.
fn merge(mut base: Map<String, Value>, extra: Value) -> Value {
    if let Value::Object(extra) = extra {
        base.extend(extra);
    }
    Value::Object(base)
}

fn session_name(session: &Option<String>) -> &str {
    session
        .as_deref()
        .filter(|s| !s.is_empty())
        .unwrap_or(DEFAULT_SESSION)
}
