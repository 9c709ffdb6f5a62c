//! One `Config` for the whole process: defaults ← `webpilot.toml` ← `WEBPILOT_*` env ← flags.
//!
//! Flags and environment variables are both parsed by clap (`ConfigArgs`), which already gives
//! flags precedence over the environment; the TOML file sits below both.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Port of the REST/MCP service unless configured otherwise.
pub const DEFAULT_PORT: u16 = 8931;
/// Shortest bearer token accepted.
const MIN_TOKEN_CHARS: usize = 16;

/// Everything the service needs to know at start-up.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Address the HTTP server binds to. Anything but loopback requires `token`.
    pub bind: IpAddr,
    pub port: u16,
    /// Bearer token required on every request when set (mandatory off loopback).
    pub token: Option<String>,
    /// Where profiles, screenshots and the crawl database live.
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
    /// Call rates per tool (`web_search = "10/min"`) and a `default`; none by default. Each
    /// tenant has buckets of its own.
    pub rate: HashMap<String, String>,
    /// Tenants: one entry per key (`[[keys]]`), besides those of `keys_file`.
    pub keys: Vec<KeyEntry>,
    /// A TOML file of `[[keys]]` entries (`webpilot keys add NAME` writes it); default
    /// `keys.toml` in the data dir, when it exists.
    pub keys_file: Option<PathBuf>,
    pub viewport_width: u32,
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
}

/// One key of the keys file: the tenant it opens, the key's SHA-256 and the tenant's limits.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct KeyEntry {
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
}

/// The keys file: `[[keys]]` entries only.
#[derive(Debug, Default, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct KeysFile {
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
#[derive(Debug, Clone, Deserialize)]
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
#[derive(Debug, Clone, Deserialize)]
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
        }
    }
}

/// Where the agent loop's model lives.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmConfig {
    /// Base URL of an OpenAI-compatible API (`…/v1`); `/chat/completions` is appended.
    pub base_url: String,
    pub api_key: Option<String>,
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
#[derive(Debug, Clone, Deserialize)]
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

/// Limits and address policy of browserless fetches.
#[derive(Debug, Clone, Deserialize)]
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
    pub max_redirects: usize,
    pub connect_timeout_ms: u64,
    /// Longest silence while reading a response.
    pub read_timeout_ms: u64,
    /// Longest a whole fetch (all redirects, whole body) may take.
    pub total_timeout_ms: u64,
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
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
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SearchConfig {
    /// Backends `auto` tries, in order; unconfigured ones (no URL or key) are left out.
    pub order: Vec<SearchBackend>,
    pub duckduckgo_url: String,
    /// A SearXNG instance with JSON output enabled (none by default).
    pub searxng_url: Option<String>,
    pub tavily_url: String,
    pub tavily_key: Option<String>,
    pub brave_url: String,
    pub brave_key: Option<String>,
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
        }
    }
}

fn default_data_dir() -> PathBuf {
    dirs::data_dir()
        .unwrap_or_else(|| PathBuf::from("."))
        .join("webpilot")
}

/// Command-line flags; each can also be given as a `WEBPILOT_*` environment variable.
#[derive(Debug, Default, Clone, clap::Args)]
pub struct ConfigArgs {
    /// Configuration file (TOML). Default: ./webpilot.toml if it exists.
    #[arg(long, env = "WEBPILOT_CONFIG", global = true)]
    pub config: Option<PathBuf>,
    /// Address to bind (default 127.0.0.1; anything else requires --token).
    #[arg(long, env = "WEBPILOT_BIND", global = true)]
    pub bind: Option<IpAddr>,
    /// Port to listen on (default 8931; 0 picks a free one).
    #[arg(long, env = "WEBPILOT_PORT", global = true)]
    pub port: Option<u16>,
    /// Bearer token required on every request.
    #[arg(long, env = "WEBPILOT_TOKEN", global = true, hide_env_values = true)]
    pub token: Option<String>,
    /// A TOML file of tenants' keys (`[[keys]]` entries; see `webpilot keys add`).
    #[arg(long, env = "WEBPILOT_KEYS_FILE", global = true)]
    pub keys_file: Option<PathBuf>,
    /// Data directory (profiles, screenshots, crawl database).
    #[arg(long, env = "WEBPILOT_DATA_DIR", global = true)]
    pub data_dir: Option<PathBuf>,
    /// Chromium executable to launch.
    #[arg(long, env = "WEBPILOT_CHROMIUM", global = true)]
    pub chromium: Option<PathBuf>,
    /// DevTools WebSocket URL of a running browser to use instead of launching one.
    #[arg(long, env = "WEBPILOT_BROWSER_WS", global = true)]
    pub browser_ws: Option<String>,
    /// DevTools HTTP URL (e.g. http://host:9222) of a running browser to use.
    #[arg(long, env = "WEBPILOT_BROWSER_URL", global = true)]
    pub browser_url: Option<String>,
    /// Route a remote browser's traffic through the egress proxy (default: when it is on loopback).
    #[arg(long, env = "WEBPILOT_REMOTE_EGRESS", global = true)]
    pub remote_egress: Option<bool>,
    /// Launch the browser at start instead of on first use.
    #[arg(long, env = "WEBPILOT_EAGER_BROWSER", global = true)]
    pub eager_browser: Option<bool>,
    /// Maximum number of live browser sessions.
    #[arg(long, env = "WEBPILOT_MAX_SESSIONS", global = true)]
    pub max_sessions: Option<usize>,
    /// Close sessions idle for this many seconds.
    #[arg(long, env = "WEBPILOT_SESSION_IDLE_SECS", global = true)]
    pub session_idle_secs: Option<u64>,
    /// New contexts, tabs and first navigations at once (default: twice the CPUs).
    #[arg(long, env = "WEBPILOT_BROWSER_CONCURRENCY", global = true)]
    pub browser_concurrency: Option<usize>,
    /// Refuse new sessions while the browser uses more memory (PSS, MB) than this.
    #[arg(long, env = "WEBPILOT_BROWSER_MAX_PSS_MB", global = true)]
    pub browser_max_pss_mb: Option<u64>,
    /// Close the browser once no session has lived for this many seconds (default 300; 0 never).
    #[arg(long, env = "WEBPILOT_BROWSER_RECYCLE_IDLE_SECS", global = true)]
    pub browser_recycle_idle_secs: Option<u64>,
    /// The service's address as people reach it; live-view links start with it.
    #[arg(long, env = "WEBPILOT_PUBLIC_URL", global = true)]
    pub public_url: Option<String>,
    /// Secret that signs live-view links (default: a random one per process).
    #[arg(
        long,
        env = "WEBPILOT_LIVE_SECRET",
        global = true,
        hide_env_values = true
    )]
    pub live_secret: Option<String>,
    /// Seconds calls in flight may run on after SIGINT/SIGTERM (default 10).
    #[arg(long, env = "WEBPILOT_SHUTDOWN_GRACE_SECS", global = true)]
    pub shutdown_grace_secs: Option<u64>,
    /// Default viewport as WIDTHxHEIGHT (default 1280x720).
    #[arg(long, env = "WEBPILOT_VIEWPORT", global = true, value_parser = parse_viewport)]
    pub viewport: Option<(u32, u32)>,
    /// Upstream proxy for the browser and HTTP fetches (http://user:pass@host:port, socks5://…).
    #[arg(long, env = "WEBPILOT_PROXY", global = true, hide_env_values = true)]
    pub proxy: Option<String>,
    /// Hosts that go direct, not through --proxy (comma list; *.domain for subdomains).
    #[arg(
        long,
        env = "WEBPILOT_PROXY_BYPASS",
        global = true,
        value_delimiter = ','
    )]
    pub proxy_bypass: Option<Vec<String>>,
    /// Private/loopback targets open_web_page may fetch (IPs, CIDRs, host names; comma list).
    #[arg(
        long,
        env = "WEBPILOT_FETCH_ALLOW",
        global = true,
        value_delimiter = ','
    )]
    pub fetch_allow: Option<Vec<String>>,
    /// The only hosts the tools reach: exact hosts and *.domain (comma list; default all).
    #[arg(
        long,
        env = "WEBPILOT_FETCH_ALLOW_DOMAINS",
        global = true,
        value_delimiter = ','
    )]
    pub fetch_allow_domains: Option<Vec<String>>,
    /// Hosts the tools never reach: exact hosts and *.domain (comma list).
    #[arg(
        long,
        env = "WEBPILOT_FETCH_DENY_DOMAINS",
        global = true,
        value_delimiter = ','
    )]
    pub fetch_deny_domains: Option<Vec<String>>,
    /// Host names /mcp answers besides loopback ones (comma list).
    #[arg(
        long,
        env = "WEBPILOT_MCP_ALLOWED_HOSTS",
        global = true,
        value_delimiter = ','
    )]
    pub mcp_allowed_hosts: Option<Vec<String>>,
    /// Browser origins allowed to call /mcp besides loopback ones (comma list).
    #[arg(
        long,
        env = "WEBPILOT_MCP_ALLOWED_ORIGINS",
        global = true,
        value_delimiter = ','
    )]
    pub mcp_allowed_origins: Option<Vec<String>>,
    /// Proxies whose X-Forwarded-For names the client (IPs or CIDRs, comma list).
    #[arg(
        long,
        env = "WEBPILOT_TRUSTED_PROXIES",
        global = true,
        value_delimiter = ','
    )]
    pub trusted_proxies: Option<Vec<String>>,
    /// PostgreSQL URL (postgres://user:pass@host/db) for state shared by several instances.
    #[arg(
        long,
        env = "WEBPILOT_DATABASE_URL",
        global = true,
        hide_env_values = true
    )]
    pub database_url: Option<String>,
    /// This instance's URL as the other instances reach it (default: its bound address).
    #[arg(long, env = "WEBPILOT_INSTANCE_URL", global = true)]
    pub instance_url: Option<String>,
    /// Order in which web_search backend=auto tries backends (comma list).
    #[arg(
        long,
        env = "WEBPILOT_SEARCH_ORDER",
        global = true,
        value_delimiter = ','
    )]
    pub search_order: Option<Vec<SearchBackend>>,
    /// SearXNG instance URL (JSON output enabled).
    #[arg(long, env = "WEBPILOT_SEARXNG_URL", global = true)]
    pub searxng_url: Option<String>,
    /// Tavily API key.
    #[arg(
        long,
        env = "WEBPILOT_TAVILY_KEY",
        global = true,
        hide_env_values = true
    )]
    pub tavily_key: Option<String>,
    /// Brave Search API subscription token.
    #[arg(
        long,
        env = "WEBPILOT_BRAVE_KEY",
        global = true,
        hide_env_values = true
    )]
    pub brave_key: Option<String>,
    /// OpenAI-compatible API base URL for /api/chat (…/v1).
    #[arg(long, env = "WEBPILOT_LLM_BASE_URL", global = true)]
    pub llm_base_url: Option<String>,
    /// API key of that endpoint.
    #[arg(
        long,
        env = "WEBPILOT_LLM_API_KEY",
        global = true,
        hide_env_values = true
    )]
    pub llm_api_key: Option<String>,
    /// Model name for /api/chat.
    #[arg(long, env = "WEBPILOT_LLM_MODEL", global = true)]
    pub llm_model: Option<String>,
}

fn parse_viewport(text: &str) -> Result<(u32, u32), String> {
    let (w, h) = text
        .split_once(['x', 'X'])
        .ok_or_else(|| format!("viewport must be WIDTHxHEIGHT, got {text:?}"))?;
    let parse = |s: &str| {
        s.trim()
            .parse::<u32>()
            .ok()
            .filter(|v| (100..=10_000).contains(v))
    };
    match (parse(w), parse(h)) {
        (Some(w), Some(h)) => Ok((w, h)),
        _ => Err(format!(
            "viewport sides must be numbers from 100 to 10000, got {text:?}"
        )),
    }
}

impl Config {
    /// Builds the configuration from the file (if any), the environment and the flags, and
    /// refuses unsafe or unworkable ones.
    pub fn load(args: &ConfigArgs) -> anyhow::Result<Self> {
        let config = Self::load_unchecked(args)?;
        config.validate()?;
        Ok(config)
    }

    /// `load` without `validate`: for commands that start no service (`keys`), which must work
    /// while the configuration still lacks what serving needs (keys for a non-loopback bind).
    pub fn load_unchecked(args: &ConfigArgs) -> anyhow::Result<Self> {
        let mut config = match &args.config {
            Some(path) => Self::from_file(path)?,
            None if Path::new("webpilot.toml").exists() => {
                Self::from_file(Path::new("webpilot.toml"))?
            }
            None => Self::default(),
        };
        config.apply(args);
        config
            .keys
            .extend(KeysFile::read(&config.keys_path())?.keys);
        Ok(config)
    }

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

    fn from_file(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
    }

    fn apply(&mut self, args: &ConfigArgs) {
        fn set<T: Clone>(slot: &mut T, value: &Option<T>) {
            if let Some(v) = value {
                *slot = v.clone();
            }
        }
        set(&mut self.bind, &args.bind);
        set(&mut self.port, &args.port);
        set(&mut self.data_dir, &args.data_dir);
        set(&mut self.chromium, &args.chromium);
        set(&mut self.eager_browser, &args.eager_browser);
        set(&mut self.max_sessions, &args.max_sessions);
        set(&mut self.session_idle_secs, &args.session_idle_secs);
        if args.browser_concurrency.is_some() {
            self.browser_concurrency = args.browser_concurrency;
        }
        if args.browser_max_pss_mb.is_some() {
            self.browser_max_pss_mb = args.browser_max_pss_mb;
        }
        if let Some(secs) = args.browser_recycle_idle_secs {
            self.browser_recycle_idle_secs = (secs > 0).then_some(secs);
        }
        set(&mut self.shutdown_grace_secs, &args.shutdown_grace_secs);
        if args.public_url.is_some() {
            self.public_url = args.public_url.clone();
        }
        if args.live_secret.is_some() {
            self.live_secret = args.live_secret.clone();
        }
        if args.database_url.is_some() {
            self.database_url = args.database_url.clone();
        }
        if args.instance_url.is_some() {
            self.instance_url = args.instance_url.clone();
        }
        if args.token.is_some() {
            self.token = args.token.clone();
        }
        if args.keys_file.is_some() {
            self.keys_file = args.keys_file.clone();
        }
        if args.browser_ws.is_some() {
            self.browser_ws = args.browser_ws.clone();
        }
        if args.browser_url.is_some() {
            self.browser_url = args.browser_url.clone();
        }
        if args.remote_egress.is_some() {
            self.remote_egress = args.remote_egress;
        }
        set(&mut self.fetch.allow, &args.fetch_allow);
        if args.proxy.is_some() {
            self.proxy = args.proxy.clone();
        }
        set(&mut self.proxy_bypass, &args.proxy_bypass);
        set(&mut self.fetch.allow_domains, &args.fetch_allow_domains);
        set(&mut self.fetch.deny_domains, &args.fetch_deny_domains);
        set(&mut self.mcp_allowed_hosts, &args.mcp_allowed_hosts);
        set(&mut self.mcp_allowed_origins, &args.mcp_allowed_origins);
        set(&mut self.trusted_proxies, &args.trusted_proxies);
        set(&mut self.llm.base_url, &args.llm_base_url);
        set(&mut self.llm.model, &args.llm_model);
        if args.llm_api_key.is_some() {
            self.llm.api_key.clone_from(&args.llm_api_key);
        }
        set(&mut self.search.order, &args.search_order);
        for (slot, value) in [
            (&mut self.search.searxng_url, &args.searxng_url),
            (&mut self.search.tavily_key, &args.tavily_key),
            (&mut self.search.brave_key, &args.brave_key),
        ] {
            if value.is_some() {
                slot.clone_from(value);
            }
        }
        if let Some((w, h)) = args.viewport {
            self.viewport_width = w;
            self.viewport_height = h;
        }
    }

    /// Refuses configurations that would be unsafe or cannot work.
    /// `trusted_proxies` as networks (an address is a network of one).
    pub fn proxy_networks(&self) -> anyhow::Result<Vec<ipnet::IpNet>> {
        self.trusted_proxies
            .iter()
            .map(|entry| {
                entry
                    .parse::<ipnet::IpNet>()
                    .or_else(|_| entry.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                    .map_err(|_| {
                        anyhow::anyhow!(
                            "trusted_proxies: {entry:?} is not an IP address or network"
                        )
                    })
            })
            .collect()
    }

    /// Refuses a non-loopback bind that nobody's key guards.
    pub fn check_exposure(&self) -> anyhow::Result<()> {
        if !self.bind.is_loopback()
            && self.token.as_deref().is_none_or(str::is_empty)
            && self.keys.is_empty()
        {
            anyhow::bail!(
                "binding to {} exposes the browser to the network: set --token (or WEBPILOT_TOKEN) \
                 or give tenants keys (--keys-file, or `webpilot keys add` with --database-url)",
                self.bind
            );
        }
        Ok(())
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        if let Some(token) = &self.token
            && (token.trim().is_empty() || token.chars().count() < MIN_TOKEN_CHARS)
        {
            anyhow::bail!(
                "--token (WEBPILOT_TOKEN) must be at least {MIN_TOKEN_CHARS} characters, not blank: \
                 a short token is soon guessed (e.g. `openssl rand -hex 24`)"
            );
        }
        // Keys kept in PostgreSQL are read at start, and checked then.
        if self.database_url.is_none() {
            self.check_exposure()?;
        }
        self.proxy_networks()?;
        if self.max_sessions == 0 {
            anyhow::bail!("max_sessions must be at least 1");
        }
        if self.browser_concurrency == Some(0) {
            anyhow::bail!("browser_concurrency must be at least 1");
        }
        for (flag, value) in [
            ("--public-url", &self.public_url),
            ("--instance-url", &self.instance_url),
        ] {
            if let Some(value) = value {
                let parsed = url::Url::parse(value)
                    .map_err(|e| anyhow::anyhow!("{flag} {value:?} is not a URL: {e}"))?;
                if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
                    anyhow::bail!("{flag} must be an http(s) URL like https://pilot.example.com");
                }
            }
        }
        if let Some(database) = &self.database_url
            && !(database.starts_with("postgres://") || database.starts_with("postgresql://"))
        {
            anyhow::bail!("--database-url must be a postgres:// URL");
        }
        if self.max_body_bytes_in_flight == 0 {
            anyhow::bail!("max_body_bytes_in_flight must be at least 1");
        }
        if self.crawl.lease_secs == 0 {
            anyhow::bail!("crawl lease_secs must be at least 1");
        }
        if self
            .live_secret
            .as_deref()
            .is_some_and(|s| s.len() < MIN_TOKEN_CHARS)
        {
            anyhow::bail!("live_secret must be at least {MIN_TOKEN_CHARS} characters");
        }
        if self.live_link_secs == 0 {
            anyhow::bail!("live_link_secs must be at least 1");
        }
        let crawl = &self.crawl;
        if [
            crawl.max_urls,
            crawl.max_parallel,
            crawl.global_parallel,
            crawl.per_host,
            crawl.browser_parallel,
        ]
        .contains(&0)
        {
            anyhow::bail!(
                "crawl limits (max_urls, max_parallel, global_parallel, per_host, browser_parallel) must be at least 1"
            );
        }
        // The operator's policy and rates, and every key's.
        crate::tenant::Tenants::from_config(self)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_loopback_bind_requires_a_token() {
        let args = ConfigArgs {
            bind: Some("0.0.0.0".parse().unwrap()),
            ..Default::default()
        };
        let mut config = Config::default();
        config.apply(&args);
        assert!(config.validate().is_err());
        for weak in ["x", "secret", &" ".repeat(20)] {
            config.token = Some(weak.into());
            assert!(config.validate().is_err(), "{weak:?}");
        }
        config.token = Some("a3f9c1e07b5d2468".into());
        assert!(config.validate().is_ok());
    }

    #[test]
    fn trusted_proxies_are_addresses_or_networks() {
        let mut config = Config {
            trusted_proxies: vec!["10.0.0.0/8".into(), "192.0.2.1".into(), "::1".into()],
            ..Config::default()
        };
        assert_eq!(config.proxy_networks().unwrap().len(), 3);
        assert!(config.validate().is_ok());
        config.trusted_proxies.push("nginx".into());
        let error = config.validate().unwrap_err().to_string();
        assert!(error.contains("\"nginx\""), "{error}");
    }

    #[test]
    fn flags_override_the_file() {
        let file: Config = toml::from_str("port = 9000\nmax_sessions = 3").unwrap();
        let mut config = file;
        config.apply(&ConfigArgs {
            port: Some(9100),
            ..Default::default()
        });
        assert_eq!(config.port, 9100);
        assert_eq!(config.max_sessions, 3);
    }

    #[test]
    fn mcp_allow_lists_come_from_the_file_or_the_flags() {
        let mut config: Config =
            toml::from_str("mcp_allowed_hosts = [\"mcp.example.com\"]").unwrap();
        assert_eq!(config.mcp_allowed_hosts, ["mcp.example.com"]);
        assert!(config.mcp_allowed_origins.is_empty());
        config.apply(&ConfigArgs {
            mcp_allowed_origins: Some(vec!["https://app.example.com".into()]),
            ..Default::default()
        });
        assert_eq!(config.mcp_allowed_hosts, ["mcp.example.com"]);
        assert_eq!(config.mcp_allowed_origins, ["https://app.example.com"]);
    }

    #[test]
    fn viewport_flag_is_parsed_and_checked() {
        assert_eq!(parse_viewport("1024x768"), Ok((1024, 768)));
        assert!(parse_viewport("10x10").is_err());
        assert!(parse_viewport("wide").is_err());
    }
}
