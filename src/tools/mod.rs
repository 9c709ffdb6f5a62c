//! The tool registry: every capability is a `Tool`, and every front (REST, CLI, agent loop, MCP,
//! skill file) serves this one registry through its `ToolSpec`s and `Registry::call`.
//!
//! A tool declares an args struct (serde + schemars; its doc comments become the schema's
//! descriptions), an `Output` struct (serde + schemars: the published result schema), its
//! scope, and a short handler calling into `pages`, `browser` or `web`. What every call shares —
//! argument parsing with field-naming errors, session, tab and deadline, the reply fields,
//! timing, tracing — lives in `call.rs`, once.

#[macro_use]
mod call;
mod cookies;
mod crawl;
pub mod interact;
pub mod navigate;
mod open_web_page;
mod read;
mod schema;
mod screenshot;
mod tabs;
mod web_search;

pub use read::{ReadArgs, ReadMode};
pub use schema::STANDARD_FORMATS;
pub use screenshot::{Format as ScreenshotFormat, ScreenshotArgs};

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use tokio::sync::mpsc;

use crate::browser::BrowserService;
use crate::config::Config;
use crate::crawl::Crawler;
use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::ids::SessionName;
use crate::metrics::Metrics;
use crate::pages::Pages;
use crate::tenancy::files::FileRoots;
use crate::tenancy::links::{LiveLinks, PublicUrl};
use crate::tenancy::{Tenant, Tenants};
use crate::web::WebService;

pub use call::{Call, LiveLink, PersonTimeoutMs, SessionField, TimeoutMs};
pub use schema::standard_formats;

/// Who makes a call: the tenant its key opened, and the front's default session (REST header,
/// chat request, MCP connection) for calls that name none.
#[derive(Clone)]
pub struct Caller {
    pub tenant: Arc<Tenant>,
    pub session: Option<SessionName>,
    /// Where the caller reached the service (`http://host:port`), for links handed back.
    pub origin: Option<String>,
    /// Where a long call reports while it waits (a hand-off), for fronts that can show it.
    pub progress: Option<mpsc::UnboundedSender<HandoffProgress>>,
    /// Where a call waiting on a background task reports its progress (MCP progress tokens).
    pub task_progress: Option<mpsc::UnboundedSender<TaskProgress>>,
    /// Page text comes back in marked blocks (`pages::boundaries`) unless a call says otherwise.
    pub boundaries: bool,
    /// How the front asks its client to open a link for its user (MCP URL elicitation).
    pub opener: Option<Arc<dyn LinkOpener>>,
}

/// A front whose client can open a link for its user and say whether they agreed (MCP URL
/// elicitation): a hand-off sends its live-view link this way, and says when it is over.
#[async_trait::async_trait]
pub trait LinkOpener: Send + Sync {
    /// Asks the client to open `url` for its user, with `message`; `id` names the interaction.
    async fn open(&self, id: &str, message: &str, url: &str) -> LinkAnswer;
    /// Tells the client the interaction `id` is over.
    async fn finished(&self, id: &str);
}

/// What the client said to a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkAnswer {
    /// Its user agreed to open it.
    Accepted,
    /// Its user declined, or dismissed the request.
    Declined,
    /// The request failed (the client went away, or answered with an error).
    Failed,
}

/// A link sent to a client that opens links for its user: the client's answer is awaited in
/// the background (`on_decline` runs if its user declines), and `finish` tells the client the
/// interaction is over.
pub struct SentLink {
    opener: Arc<dyn LinkOpener>,
    id: String,
    answer: tokio::task::JoinHandle<()>,
}

impl SentLink {
    /// Sends `url` with `message` under a new unguessable id starting with `prefix`.
    pub fn send(
        opener: Arc<dyn LinkOpener>,
        prefix: &str,
        message: String,
        url: String,
        on_decline: impl FnOnce() + Send + 'static,
    ) -> Self {
        let id = crate::ids::unguessable(prefix);
        let (asking, asked_id) = (opener.clone(), id.clone());
        let answer = tokio::spawn(async move {
            if asking.open(&asked_id, &message, &url).await == LinkAnswer::Declined {
                on_decline();
            }
        });
        Self { opener, id, answer }
    }

    /// Stops waiting for the client's answer and tells it the interaction is over.
    pub async fn finish(self) {
        self.answer.abort();
        self.opener.finished(&self.id).await;
    }
}

/// A tool's typed arguments as the JSON a caller sends: options left unset are left out.
pub fn arguments_of(tool: &str, args: &impl serde::Serialize) -> ToolResult<Value> {
    let mut value = serde_json::to_value(args)
        .map_err(|e| ToolError::internal(format!("arguments of {tool}: {e}")))?;
    if let Value::Object(fields) = &mut value {
        fields.retain(|_, field| !field.is_null());
    }
    Ok(value)
}

/// A hand-off waiting for a person: sent when it starts (`waited_ms` 0), then every few seconds.
#[derive(Debug, Clone, Serialize)]
pub struct HandoffProgress {
    pub session: String,
    pub message: String,
    pub live_url: String,
    pub waited_ms: u64,
}

/// A background task's progress while a call waits on it: `progress` of `total` items done.
#[derive(Debug, Clone, Serialize)]
pub struct TaskProgress {
    pub progress: usize,
    pub total: usize,
    pub message: String,
}

impl Caller {
    /// `tenant`, in the default session unless a call names one.
    pub fn new(tenant: Arc<Tenant>) -> Self {
        Self {
            tenant,
            session: None,
            origin: None,
            progress: None,
            task_progress: None,
            boundaries: false,
            opener: None,
        }
    }

    /// This caller, whose client opens links for its user.
    pub fn opening_links(mut self, opener: Arc<dyn LinkOpener>) -> Self {
        self.opener = Some(opener);
        self
    }

    /// This caller, getting page text in marked blocks.
    pub fn bounded(mut self) -> Self {
        self.boundaries = true;
        self
    }

    /// This caller with `session` as its default session.
    pub fn in_session(mut self, session: Option<SessionName>) -> Self {
        self.session = session;
        self
    }

    /// This caller, reaching the service at `origin`.
    pub fn at(mut self, origin: Option<String>) -> Self {
        self.origin = origin;
        self
    }

    /// This caller, told of hand-offs on `progress`.
    pub fn reporting(mut self, progress: mpsc::UnboundedSender<HandoffProgress>) -> Self {
        self.progress = Some(progress);
        self
    }

    /// This caller, told of the progress of tasks its calls wait on.
    pub fn reporting_tasks(mut self, progress: mpsc::UnboundedSender<TaskProgress>) -> Self {
        self.task_progress = Some(progress);
        self
    }
}

/// What a tool hands back to a front: the result object (typed output serialized, reply fields
/// added), images for fronts that can show them, and a one-line outcome for humans.
#[derive(Debug, Clone)]
pub struct ToolOutput {
    pub json: Value,
    pub images: Vec<Image>,
    /// A file the tool wrote (a HAR), returned as the response only to a REST client that asks
    /// for its type in `Accept`; every other front has its path in the JSON.
    pub file: Option<Image>,
    /// Files the call wrote for the caller (a download, a saved screenshot or PDF, a HAR file),
    /// for fronts that link to them (MCP resources).
    pub saved: Vec<std::path::PathBuf>,
    /// `5 results`, `1234 chars`, `image/png image`: the agent loop's summaries end with it.
    pub summary: String,
    /// Where the call's time went (REST answers it as `Server-Timing`); not for the agent.
    pub timings: crate::timing::Timings,
}

/// A file produced by a tool beside its JSON: a screenshot, or a page printed as a PDF.
#[derive(Debug, Clone)]
pub struct Image {
    pub mime: &'static str,
    pub data: Vec<u8>,
}

impl Image {
    /// A picture a person or a vision model can look at (not a document).
    pub fn is_picture(&self) -> bool {
        self.mime.starts_with("image/")
    }
}

/// Shared state every tool may use.
pub struct Ctx {
    pub config: Arc<Config>,
    pub files: Arc<FileRoots>,
    pub browser: Arc<BrowserService>,
    pub web: Arc<WebService>,
    pub pages: Arc<Pages>,
    pub crawler: Arc<Crawler>,
    pub tenants: Arc<Tenants>,
    /// Signs live-view links.
    pub live_links: Arc<LiveLinks>,
    /// Where those links point.
    pub public_url: Arc<PublicUrl>,
    /// Every tenant's saved profiles (files or PostgreSQL, and the profile key).
    pub profiles: crate::profiles::Profiles,
    /// Every session's trace of its tool calls.
    pub traces: Arc<crate::trace::Traces>,
}

/// What a tool works on, which decides what its calls resolve before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// A browser session (and usually one of its tabs): calls resolve a session name and a
    /// deadline, run one at a time per session, and the reply names session, tab, url, title.
    Browser,
    /// The web without a browser session: calls run side by side.
    Web,
    /// Background tasks.
    Task,
}

/// One tool: its name, description, typed arguments, typed result and handler.
///
/// The fields `session`, `tab` and `timeout_ms` a browser tool's args struct declares are
/// resolved by `Call` (see `shared_fields!`), with one rule for every tool.
/// What a tool's calls may do, over all its actions and modes, as MCP's tool annotations say
/// it: clients decide from these which calls to confirm with a person.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Effects {
    /// Nothing outside the call changes (pages are only read).
    pub read_only: bool,
    /// Something may be changed or removed for good (a form sent, a login cleared).
    pub destructive: bool,
    /// The same call again changes nothing more.
    pub idempotent: bool,
    /// It reaches sites on the web.
    pub open_world: bool,
}

impl Effects {
    /// Reads what is already there (a page, a task), reaching nothing new.
    pub const READS: Self = Self {
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    };
    /// Reads the web.
    pub const READS_WEB: Self = Self {
        open_world: true,
        ..Self::READS
    };
}

#[async_trait]
pub trait Tool: Send + Sync + 'static {
    type Args: DeserializeOwned + JsonSchema + call::Shared + Send;
    type Output: Serialize + JsonSchema + Send;
    const NAME: &'static str;
    const DESCRIPTION: &'static str;
    /// A few sentences on when and how to use the tool, for an agent's system prompt.
    const GUIDE: &'static str;
    /// One example call for the skill file, as JSON arguments.
    const EXAMPLE: &'static str;
    const SCOPE: Scope;
    /// A short human title (MCP clients show it).
    const TITLE: &'static str;
    /// What its calls do to the world, over all its actions (MCP's tool annotations).
    const EFFECTS: Effects;
    /// Whether a REST client may ask for the result as a file (`Accept: image/…`, `application/pdf`).
    const RETURNS_IMAGE: bool = false;
    /// The time limit when the call names none; `None` is the configured navigation timeout.
    const DEFAULT_TIMEOUT_MS: Option<u64> = None;

    async fn run(&self, call: &mut Call<'_>, args: Self::Args) -> ToolResult<Self::Output>;

    /// Whether this call is an action on the page, whose result says where the session is only
    /// where that is news (another tab, a new URL or title, a session other than `default`);
    /// navigations, reads and lists always say it.
    fn acts(_args: &Self::Args) -> bool {
        false
    }

    /// A result in a few words for humans: `ok` unless the tool has something better to say.
    fn summary(_output: &Self::Output) -> String {
        "ok".to_string()
    }
}

/// What the browser tools' common fields mean (their schemas leave it out to stay small).
const SHARED_FIELDS: &str = "Browser tools share `session` (a name: each session has its own \
cookies, storage and tabs; default \"default\") and `tab` (an id like t2; default the active \
tab). Long reads are paged: pass a result's next_cursor back as `cursor`.";

/// A tool as every front sees it: generated once from the tool's types.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: &'static str,
    pub description: &'static str,
    pub guide: &'static str,
    pub example: &'static str,
    pub scope: Scope,
    pub title: &'static str,
    pub effects: Effects,
    pub returns_image: bool,
    /// The complete JSON Schema (2020-12) of the arguments, bounds and formats included.
    pub input_schema: Value,
    /// The arguments' schema trimmed for a model's context (the OpenAI `parameters`).
    pub parameters: Value,
    /// The complete JSON Schema of a successful result, reply fields and `elapsed_ms` included.
    pub output_schema: Value,
}

impl ToolSpec {
    fn of<T: Tool>() -> Self {
        Self {
            name: T::NAME,
            description: T::DESCRIPTION,
            guide: T::GUIDE,
            example: T::EXAMPLE,
            scope: T::SCOPE,
            title: T::TITLE,
            effects: T::EFFECTS,
            returns_image: T::RETURNS_IMAGE,
            input_schema: schema::full::<T::Args>(),
            parameters: schema::parameters::<T::Args>(),
            output_schema: call::output_schema::<T>(),
        }
    }

    /// The OpenAI function definition.
    pub fn definition(&self) -> Value {
        json!({
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            }
        })
    }
}

/// All tools, by name, in a stable order.
pub struct Registry {
    specs: Vec<ToolSpec>,
    tools: Vec<Box<dyn call::DynTool>>,
    /// The OpenAI function definitions, generated once: schemas never change at run time.
    definitions: Value,
    ctx: Ctx,
    metrics: Metrics,
}

/// Every tool, in the registry's order.
fn all_tools() -> Vec<Box<dyn call::DynTool>> {
    vec![
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
    ]
}

/// Every tool's spec, without a service behind them (the CLI's `tools` and `skill`).
pub fn specs() -> Vec<ToolSpec> {
    all_tools().iter().map(|t| t.spec()).collect()
}

/// The specs as OpenAI function definitions.
pub fn definitions(specs: &[ToolSpec]) -> Value {
    Value::Array(specs.iter().map(ToolSpec::definition).collect())
}

impl Registry {
    pub fn new(ctx: Ctx) -> Self {
        let specs = specs();
        Self {
            definitions: definitions(&specs),
            specs,
            tools: all_tools(),
            ctx,
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

    /// Every tool's spec, in the registry's order.
    pub fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    pub fn spec(&self, name: &str) -> Option<&ToolSpec> {
        self.specs.iter().find(|s| s.name == name)
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.specs.iter().map(|s| s.name).collect()
    }

    /// The tool list as OpenAI function definitions.
    pub fn definitions(&self) -> &Value {
        &self.definitions
    }

    /// The usage guides of all tools, one paragraph each, after what the browser tools share.
    pub fn prompt(&self) -> String {
        std::iter::once(SHARED_FIELDS)
            .chain(self.specs.iter().map(|s| s.guide))
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    /// Runs one tool for `caller`, within its tenant's rates. The result object always carries
    /// `elapsed_ms`.
    pub async fn call(&self, name: &str, args: Value, caller: &Caller) -> ToolResult<ToolOutput> {
        let tool = self
            .tools
            .iter()
            .find(|t| t.name() == name)
            .ok_or_else(|| {
                ToolError::new(
                    ErrorCode::NoSuchTool,
                    format!("no tool named {name:?}; tools: {}", self.names().join(", ")),
                )
            })?;
        self.admit(name, caller)?;
        tool.call(&self.ctx, &self.metrics, args, caller).await
    }

    /// Calls `name` with a tool's own typed arguments (its `…Args`), for the service's own calls
    /// (a replay's checks): a renamed field fails to compile here instead of failing a replay.
    /// Options left unset are left out, as a caller leaves them out.
    pub async fn call_with(
        &self,
        name: &str,
        args: &impl serde::Serialize,
        caller: &Caller,
    ) -> ToolResult<ToolOutput> {
        self.call(name, arguments_of(name, args)?, caller).await
    }

    /// Takes one call of tool `name` from `caller`'s rates, as `call` does first: for a front
    /// that serves a tool's data its own way (a crawl's progress as a stream), so the tenant's
    /// rate holds there too.
    pub fn admit(&self, name: &str, caller: &Caller) -> ToolResult<()> {
        caller.tenant.rates().take(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Property names anywhere at the top of an object schema, its variants included.
    fn top_properties(schema: &Value) -> Vec<String> {
        let mut names: Vec<String> = schema["properties"]
            .as_object()
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        for key in ["oneOf", "anyOf", "allOf"] {
            for variant in schema[key].as_array().into_iter().flatten() {
                names.extend(top_properties(variant));
            }
        }
        names
    }

    fn assert_no_shadowing<T: Tool>() {
        let output = schema::output::<T::Output>();
        let names = top_properties(&output);
        for reserved in ["session", "tab", "url", "title", "elapsed_ms"] {
            let placed = reserved == "elapsed_ms" || T::SCOPE == Scope::Browser;
            assert!(
                !(placed && names.iter().any(|n| n == reserved)),
                "{}: its output has a field `{reserved}`, which the reply sets",
                T::NAME
            );
        }
    }

    /// serde lets a later field of the same name win; an Output must not reuse a reply field.
    #[test]
    fn outputs_do_not_shadow_reply_fields() {
        assert_no_shadowing::<navigate::Navigate>();
        assert_no_shadowing::<read::Read>();
        assert_no_shadowing::<interact::Interact>();
        assert_no_shadowing::<screenshot::Screenshot>();
        assert_no_shadowing::<tabs::Tabs>();
        assert_no_shadowing::<cookies::Cookies>();
        assert_no_shadowing::<web_search::WebSearch>();
        assert_no_shadowing::<open_web_page::OpenWebPage>();
        assert_no_shadowing::<crawl::CrawlBatch>();
        assert_no_shadowing::<crawl::CrawlStatus>();
        assert_eq!(all_tools().len(), 10, "a new tool joins the list above");
    }
}
