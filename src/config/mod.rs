//! The configuration model: one `Config` for the whole process, its sections (`[fetch]`,
//! `[search]`, `[llm]`, `[crawl]`, `[files]`, `[downloads]`, `[network]`, `[trace]`,
//! `[results]`), their defaults, the tenants' key entries (`KeyEntry`, `KeysFile`) and
//! `SearchBackend`.
//!
//! Where the values come from: defaults ← `webpilot.toml` ← `WEBPILOT_*` env ← flags. Flags
//! and environment variables are both parsed by clap ([`ConfigArgs`], in `flags`), which
//! already gives flags precedence over the environment; the TOML file sits below both.
//! Validation is in `check`; `reference` renders all of it as docs/configuration.md.

mod actions;
mod check;
mod flags;
pub mod reference;

pub use actions::{ActionsConfig, GUARDED_ACTIONS};
pub use flags::ConfigArgs;

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Port of the REST/MCP service unless configured otherwise.
pub const DEFAULT_PORT: u16 = 8931;

/// Everything the service needs to know at start-up.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Address the HTTP server binds to. Anything but loopback requires `token`.
    pub bind: IpAddr,
    /// Port the HTTP server listens on; 0 picks a free one.
    pub port: u16,
    /// Bearer token required on every request when set (mandatory off loopback).
    pub token: Option<String>,
    /// Where profiles, screenshots and the crawl database live.
    #[schemars(extend("x-default-text" = "`webpilot` in the user's data directory (`$XDG_DATA_HOME`, else `~/.local/share`)"))]
    pub data_dir: PathBuf,
    /// Chromium executable to launch when no remote browser is configured.
    pub chromium: PathBuf,
    /// A program that execs Chromium tied to this process's life (the `webpilot` binary itself,
    /// set by `main`); none launches Chromium directly.
    #[serde(skip)]
    pub launcher: Option<PathBuf>,
    /// Connect to a running browser over its DevTools WebSocket instead of launching one.
    pub browser_ws: Option<String>,
    /// Connect to a running browser through its DevTools HTTP endpoint (`http://host:9222`).
    pub browser_url: Option<String>,
    /// Whether a remote browser's contexts go through the egress proxy on 127.0.0.1: by default
    /// when its DevTools endpoint is on loopback (the same machine). `false` for a browser that
    /// is reached through a port mapping (a container) and cannot reach this machine's loopback.
    pub remote_egress: Option<bool>,
    /// Launch Chromium when the service starts instead of on the first browser call.
    pub eager_browser: bool,
    /// How many browser sessions may be live at once.
    pub max_sessions: usize,
    /// How many tabs one session may hold.
    pub max_tabs_per_session: usize,
    /// Sessions idle for longer than this are closed.
    pub session_idle_secs: u64,
    /// How many new browser contexts, new tabs and first navigations run at once; the others
    /// wait their turn. Default: twice the CPUs.
    pub browser_concurrency: Option<usize>,
    /// Over this much browser memory (PSS, all its processes), new sessions are refused.
    pub browser_max_pss_mb: Option<u64>,
    /// How often Chromium's pages are compared with the sessions' tabs (strays are adopted or
    /// closed), in milliseconds.
    pub browser_sweep_ms: u64,
    /// A launched browser no session has used for this long is closed (the next call starts a
    /// fresh one, with the memory of a fresh one); none keeps it.
    pub browser_recycle_idle_secs: Option<u64>,
    /// How long calls in flight may run on after SIGINT/SIGTERM before the browser closes.
    pub shutdown_grace_secs: u64,
    /// The service's address as people reach it (`https://pilot.example.com` behind a proxy):
    /// live-view links start with it. None: the host a call came in on.
    pub public_url: Option<String>,
    /// Signs live-view links; none draws one at start (links die with the process).
    pub live_secret: Option<String>,
    /// How long a live-view link stays valid; an open live view renews its own.
    pub live_link_secs: u64,
    /// Encrypts saved profiles at rest (ChaCha20-Poly1305): 32 bytes as 64 hex digits or
    /// base64. None keeps them as plain JSON, protected by file mode 0600.
    pub profile_key: Option<String>,
    /// Most cookies a profile import (`browser_cookies action=import`) may carry; past it the
    /// import is refused (`LIMIT`). Its origins and their localStorage entries have the same cap.
    pub max_profile_cookies: usize,
    /// Call rates per tool (`web_search = "10/min"`) and a `default`; none by default. Each
    /// tenant has buckets of its own.
    pub rate: HashMap<String, String>,
    /// Tenants: one entry per key (`[[keys]]`), besides those of `keys_file`.
    pub keys: Vec<KeyEntry>,
    /// A TOML file of `[[keys]]` entries (`webpilot keys add NAME` writes it); default
    /// `keys.toml` in the data dir, when it exists.
    pub keys_file: Option<PathBuf>,
    /// Width of a new tab's viewport, in CSS pixels (`--viewport WIDTHxHEIGHT`).
    pub viewport_width: u32,
    /// Height of a new tab's viewport, in CSS pixels.
    pub viewport_height: u32,
    /// Upper bound for a single CDP command; a hung page cannot hold a session longer.
    pub cdp_timeout_ms: u64,
    /// Default `timeout_ms` of browser_navigate.
    pub navigation_timeout_ms: u64,
    /// The guarded HTTP client of open_web_page and the crawler.
    pub fetch: FetchConfig,
    /// web_search backends.
    pub search: SearchConfig,
    /// The OpenAI-compatible model behind `/api/chat`.
    pub llm: LlmConfig,
    /// Batch crawling limits.
    pub crawl: CrawlConfig,
    /// The server files tools may read.
    pub files: FilesConfig,
    /// Downloads by URL (`browser_interact action=download`).
    pub downloads: DownloadsConfig,
    /// What each tab records of what its page did (browser_read mode=network|console, HAR).
    pub network: NetworkConfig,
    /// The trace every session keeps of its tool calls (export, replay).
    pub trace: TraceConfig,
    /// What results say.
    pub results: ResultsConfig,
    /// An upstream proxy for the browser and the HTTP client alike (`http://user:pass@host:port`
    /// or `socks5://…`); the URL policy still judges every target.
    pub proxy: Option<String>,
    /// Hosts that go direct, not through `proxy` (`example.com`, `*.example.com`).
    pub proxy_bypass: Vec<String>,
    /// Host names `/mcp` answers besides loopback ones (the names clients use to reach a
    /// non-loopback bind).
    pub mcp_allowed_hosts: Vec<String>,
    /// Browser origins (`https://app.example.com`, `http://localhost:*`) that may call `/mcp`
    /// besides loopback ones; requests without an `Origin` (non-browser clients) always may.
    pub mcp_allowed_origins: Vec<String>,
    /// Load balancers and reverse proxies (IPs or CIDR networks) whose `X-Forwarded-For` names
    /// the client: failed authentications then count against that client, not against the
    /// proxy every client comes through.
    pub trusted_proxies: Vec<String>,
    /// PostgreSQL URL for shared state (crawl tasks); none: SQLite in the data dir.
    pub database_url: Option<String>,
    /// How the other instances reach this one (sessions are routed to the instance holding them).
    pub instance_url: Option<String>,
    /// Bytes of request bodies read at once, across all requests; a request past it is
    /// answered BUSY (503) with Retry-After.
    pub max_body_bytes_in_flight: u64,
    /// Wrap what pages say (browser_read, open_web_page) in marked blocks naming the source, so
    /// a model can tell a page's words from its user's (a call's `boundaries` overrides it; the
    /// built-in agent loop always wraps).
    pub content_boundaries: bool,
    /// Actions agents may not take (`deny`) or that a person must allow first (`confirm`).
    pub actions: ActionsConfig,
    /// What a navigation does about consent dialogs (cookie walls) of known consent platforms
    /// and generic patterns: `reject` what can be refused, `accept`, or `leave` them (a call's
    /// `consent` overrides it).
    pub consent: ConsentChoice,
}

/// What to answer a consent dialog.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ConsentChoice {
    #[default]
    Reject,
    Accept,
    Leave,
}

/// One key of the keys file: the tenant it opens, the key's SHA-256 and the tenant's limits.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KeyEntry {
    /// Tenant name: 1-32 lower-case letters, digits, `-` or `_` (not first).
    pub tenant: String,
    /// Lower-case hex SHA-256 of the key (never the key).
    pub sha256: String,
    /// Most live sessions of this tenant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_sessions: Option<usize>,
    /// Narrows `fetch.allow_domains`: the tenant reaches only hosts both lists allow.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_domains: Vec<String>,
    /// Hosts the tenant never reaches, besides `fetch.deny_domains`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny_domains: Vec<String>,
    /// Call rates per tool and a `default`, over those of `[rate]`.
    #[serde(default, skip_serializing_if = "HashMap::is_empty")]
    pub rate: HashMap<String, String>,
    /// Most URLs of one crawl task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crawl_max_urls: Option<usize>,
    /// Largest `parallel` of a crawl task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crawl_parallel: Option<usize>,
    /// `"obey"`: this tenant's crawls obey robots.txt even where `[crawl] robots = "ignore"`. A
    /// tenant only narrows: its `"ignore"` changes nothing where the operator obeys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crawl_robots: Option<RobotsRule>,
    /// Actions refused or confirmed for this tenant (`deny`, `confirm`), besides those of
    /// `[actions]`.
    #[serde(default, skip_serializing_if = "ActionsConfig::is_empty")]
    pub actions: ActionsConfig,
    /// The model this tenant's pages are read into data by (`extract: json` with a schema),
    /// instead of `[llm]`'s: its own key, or its own server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<LlmConfig>,
}

/// The keys file: `[[keys]]` entries only.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KeysFile {
    /// One entry per key.
    #[serde(default)]
    pub keys: Vec<KeyEntry>,
}

impl KeysFile {
    /// Reads the file; a missing file has no keys.
    pub fn read(path: &Path) -> anyhow::Result<Self> {
        match std::fs::read_to_string(path) {
            Ok(text) => {
                toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(anyhow::anyhow!("cannot read {}: {e}", path.display())),
        }
    }
}

/// Where the server files that tools read (`upload`, `import` paths) must live.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct FilesConfig {
    /// Relative paths resolve here (default `<data dir>/files/`).
    pub root: Option<PathBuf>,
    /// Further folders whose files may be read, by absolute path.
    pub roots: Vec<PathBuf>,
    /// Largest file a tool reads.
    pub max_bytes: u64,
}

impl Default for FilesConfig {
    fn default() -> Self {
        Self {
            root: None,
            roots: Vec::new(),
            max_bytes: 50 * 1024 * 1024,
        }
    }
}

/// How much a batch crawl may do at once.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct CrawlConfig {
    /// Most URLs one task may hold.
    pub max_urls: usize,
    /// Largest `parallel` a task may ask for.
    pub max_parallel: usize,
    /// Fetches in flight across all tasks.
    pub global_parallel: usize,
    /// Fetches in flight per host (`host:port`), across all tasks.
    pub per_host: usize,
    /// Browser renders (open_web_page and crawls) in flight at once, each in its own context.
    pub browser_parallel: usize,
    /// Browser contexts (each with a blank tab) kept ready for renders, per tenant, while
    /// renders are being asked for; each serves one render and is closed after it. 0: every
    /// render starts cold.
    pub warm_renders: usize,
    /// Seconds an instance holds a claimed URL without renewing it; after that another instance
    /// may read it (PostgreSQL only: one SQLite file has one instance).
    pub lease_secs: u64,
    /// Whether crawls obey each site's robots.txt (skipping what it disallows for webpilot,
    /// pacing fetches by its `Crawl-delay`) or ignore it.
    pub robots: RobotsRule,
    /// Signs webhook events (each task's secret is derived from it). None: the one instances
    /// sharing PostgreSQL share, else one drawn at start (signatures change with a restart).
    pub webhook_secret: Option<String>,
    /// Webhook URL prefixes allowed besides https URLs the URL policy allows (an internal
    /// receiver such as `http://hooks.internal:8080/`), delivered without the policy's checks.
    pub webhook_allow: Vec<String>,
}

/// What crawls do with a site's robots.txt.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RobotsRule {
    #[default]
    Obey,
    Ignore,
}

impl Default for CrawlConfig {
    fn default() -> Self {
        Self {
            max_urls: 500,
            max_parallel: 16,
            global_parallel: 32,
            per_host: 4,
            browser_parallel: 4,
            warm_renders: 4,
            lease_secs: 60,
            robots: RobotsRule::Obey,
            webhook_secret: None,
            webhook_allow: Vec::new(),
        }
    }
}

/// Where the agent loop's model lives.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct LlmConfig {
    /// Base URL of an OpenAI-compatible API (`…/v1`); `/chat/completions` is appended.
    pub base_url: String,
    /// The API's key, sent as a bearer token.
    pub api_key: Option<String>,
    /// The model a chat uses unless its request names another.
    pub model: String,
    /// Send screenshots to the model as image parts (else a one-line description).
    pub vision: bool,
    /// Longest wait for the model's first byte and between streamed chunks.
    pub timeout_ms: u64,
    /// Retries of 429 and 5xx answers, with backoff (or the server's Retry-After).
    pub max_retries: u32,
}

impl Default for LlmConfig {
    fn default() -> Self {
        Self {
            base_url: "https://api.openai.com/v1".into(),
            api_key: None,
            model: "gpt-4o-mini".into(),
            vision: false,
            timeout_ms: 120_000,
            max_retries: 3,
        }
    }
}

/// Downloads by URL.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct DownloadsConfig {
    /// A download stops here and is reported `truncated`.
    pub max_bytes: u64,
}

impl Default for DownloadsConfig {
    fn default() -> Self {
        Self {
            max_bytes: 200 * 1024 * 1024,
        }
    }
}

/// What each tab records of what its page did: requests (of the page, its frames and workers)
/// with their answers, console messages and page errors.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct NetworkConfig {
    /// Record every tab's requests, console messages and page errors.
    pub capture: bool,
    /// Requests kept per tab; the oldest go first.
    pub max_requests: usize,
    /// Console messages and page errors kept per tab; the oldest go first.
    pub max_messages: usize,
    /// Bytes of one body (a document, a fetch/XHR answer, an event stream, a request's data)
    /// kept; the rest is cut and reported `truncated`.
    pub max_body_bytes: usize,
    /// Bytes of bodies kept per tab; the oldest bodies go first.
    pub max_tab_body_bytes: usize,
    /// Hide `Authorization`, `Proxy-Authorization`, `Cookie` and `Set-Cookie` values,
    /// credentials in URLs and password-like form fields in every read and HAR file.
    pub redact: bool,
}

impl Default for NetworkConfig {
    fn default() -> Self {
        Self {
            capture: true,
            max_requests: 1000,
            max_messages: 500,
            max_body_bytes: 1024 * 1024,
            max_tab_body_bytes: 20 * 1024 * 1024,
            redact: true,
        }
    }
}

/// What tools' results say.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ResultsConfig {
    /// Every browser result says where its session is in full (`session`, `tab`, `url`,
    /// `title`), as a call's `verbose: true` asks; by default an action's result says only
    /// what changed since the session's previous result.
    pub verbose: bool,
}

/// Each session's trace: its browser tool calls in order, with the elements they acted on
/// (`GET /api/sessions/{session}/trace`, `webpilot trace export`, `webpilot replay`).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct TraceConfig {
    /// Record every session's trace.
    pub enabled: bool,
    /// A trace is removed this many hours after its last step.
    pub max_age_hours: u64,
    /// A trace stops growing at this many bytes (its first steps are kept).
    pub max_bytes: u64,
    /// JPEG quality (1-100) of the viewport picture kept after each step that changes the
    /// page (navigations, actions, tab changes); 0 (the default) keeps none. A picture makes
    /// Chromium render the page once more, which the session's next call waits for (about
    /// 40 ms on 2 cores): worth it behind an agent that thinks between calls, not in a script.
    pub screenshot_quality: u8,
}

impl Default for TraceConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_age_hours: 72,
            max_bytes: 50 * 1024 * 1024,
            screenshot_quality: 0,
        }
    }
}

/// Limits and address policy of browserless fetches.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct FetchConfig {
    /// Private, loopback or link-local targets fetched anyway: IPs, CIDR networks or host names.
    pub allow: Vec<String>,
    /// When not empty, the only hosts the tools reach: exact hosts and `*.domain` (subdomains).
    pub allow_domains: Vec<String>,
    /// Hosts the tools never reach (exact and `*.domain`); they win over `allow_domains`.
    pub deny_domains: Vec<String>,
    /// Bodies are cut (and reported `truncated`) at this many bytes.
    pub max_bytes: usize,
    /// Redirects followed before a fetch fails.
    pub max_redirects: usize,
    /// Longest wait for a connection (fetches and search backends alike).
    pub connect_timeout_ms: u64,
    /// Longest silence while reading a response.
    pub read_timeout_ms: u64,
    /// Longest a whole fetch (all redirects, whole body) may take.
    pub total_timeout_ms: u64,
    /// Longest reading a fetched or rendered page or file may take (extraction, selector and
    /// XPath schemas, documents, PDFs); past it the call answers TIMEOUT naming the stage.
    pub read_limit_ms: u64,
    /// `User-Agent` of fetches without a browser and of search backends' requests.
    pub user_agent: String,
    /// Certificate authorities (a PEM file) trusted besides the built-in roots by fetches
    /// without a browser, e.g. a company's CA.
    pub ca_file: Option<std::path::PathBuf>,
}

impl Default for FetchConfig {
    fn default() -> Self {
        Self {
            allow: Vec::new(),
            allow_domains: Vec::new(),
            deny_domains: Vec::new(),
            max_bytes: 8 * 1024 * 1024,
            max_redirects: 10,
            connect_timeout_ms: 5_000,
            read_timeout_ms: 10_000,
            total_timeout_ms: 30_000,
            read_limit_ms: 20_000,
            user_agent: concat!(
                "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) ",
                "Chrome/131.0 Safari/537.36 webpilot/",
                env!("CARGO_PKG_VERSION")
            )
            .into(),
            ca_file: None,
        }
    }
}

/// A web_search backend, as configured (`search.order`) and named in results.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum SearchBackend {
    Duckduckgo,
    Searxng,
    Tavily,
    Brave,
}

impl SearchBackend {
    /// The name in configuration and results.
    pub fn name(self) -> &'static str {
        match self {
            SearchBackend::Duckduckgo => "duckduckgo",
            SearchBackend::Searxng => "searxng",
            SearchBackend::Tavily => "tavily",
            SearchBackend::Brave => "brave",
        }
    }
}

/// Where each search backend lives, its key, and the order `backend=auto` tries them in.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct SearchConfig {
    /// Backends `auto` tries, in order; unconfigured ones (no URL or key) are left out.
    pub order: Vec<SearchBackend>,
    /// DuckDuckGo's HTML endpoint.
    pub duckduckgo_url: String,
    /// A SearXNG instance with JSON output enabled (none by default).
    pub searxng_url: Option<String>,
    /// Tavily's API.
    pub tavily_url: String,
    /// Tavily API key; without one Tavily is not used.
    pub tavily_key: Option<String>,
    /// Brave Search's API.
    pub brave_url: String,
    /// Brave Search API subscription token; without one Brave is not used.
    pub brave_key: Option<String>,
    /// Longest a search backend's answer may take.
    pub timeout_ms: u64,
    /// A backend that failed is skipped by `auto` for this long.
    pub cooldown_secs: u64,
}

impl Default for SearchConfig {
    fn default() -> Self {
        Self {
            order: vec![
                SearchBackend::Duckduckgo,
                SearchBackend::Searxng,
                SearchBackend::Brave,
                SearchBackend::Tavily,
            ],
            duckduckgo_url: "https://html.duckduckgo.com/html/".into(),
            searxng_url: None,
            tavily_url: "https://api.tavily.com".into(),
            tavily_key: None,
            brave_url: "https://api.search.brave.com".into(),
            brave_key: None,
            timeout_ms: 10_000,
            cooldown_secs: 120,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            bind: IpAddr::from([127, 0, 0, 1]),
            port: DEFAULT_PORT,
            token: None,
            data_dir: default_data_dir(),
            chromium: PathBuf::from("/usr/bin/chromium"),
            launcher: None,
            browser_ws: None,
            browser_url: None,
            remote_egress: None,
            eager_browser: false,
            max_sessions: 16,
            max_tabs_per_session: 20,
            session_idle_secs: 900,
            browser_concurrency: None,
            browser_max_pss_mb: None,
            browser_sweep_ms: 30_000,
            browser_recycle_idle_secs: Some(300),
            shutdown_grace_secs: 10,
            public_url: None,
            live_secret: None,
            live_link_secs: 900,
            profile_key: None,
            max_profile_cookies: 10_000,
            rate: Default::default(),
            keys: Vec::new(),
            keys_file: None,
            viewport_width: 1280,
            viewport_height: 720,
            cdp_timeout_ms: 10_000,
            navigation_timeout_ms: 15_000,
            fetch: FetchConfig::default(),
            search: SearchConfig::default(),
            llm: LlmConfig::default(),
            crawl: CrawlConfig::default(),
            files: FilesConfig::default(),
            downloads: DownloadsConfig::default(),
            network: NetworkConfig::default(),
            trace: TraceConfig::default(),
            results: ResultsConfig::default(),
            proxy: None,
            proxy_bypass: Vec::new(),
            mcp_allowed_hosts: Vec::new(),
            mcp_allowed_origins: Vec::new(),
            trusted_proxies: Vec::new(),
            database_url: None,
            instance_url: None,
            // Three tool calls with the largest inline file (50 MiB: 67 MiB in base64) and
            // room for many small ones.
            max_body_bytes_in_flight: 256 * 1024 * 1024,
            content_boundaries: false,
            actions: ActionsConfig::default(),
            consent: ConsentChoice::Reject,
        }
    }
}

fn default_data_dir() -> PathBuf {
    dirs::data_dir()
        .unwrap_or_else(|| PathBuf::from("."))
        .join("webpilot")
}

impl Config {
    /// How many expensive browser steps run at once: `browser_concurrency`, else twice the
    /// CPUs (a step waits on Chromium about as long as it computes).
    pub fn browser_concurrency(&self) -> usize {
        self.browser_concurrency.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(2, |cpus| cpus.get() * 2)
        })
    }

    /// The keys file: `keys_file`, or `keys.toml` in the data dir.
    pub fn keys_path(&self) -> PathBuf {
        self.keys_file
            .clone()
            .unwrap_or_else(|| self.data_dir.join("keys.toml"))
    }
}
