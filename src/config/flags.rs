//! The command line's half of the configuration: `ConfigArgs` (clap flags, each also a
//! `WEBPILOT_*` environment variable) and loading a `Config` from the TOML file, the keys file
//! and those flags, which override the file.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use super::{Config, KeysFile, SearchBackend};

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
    /// Key that encrypts saved profiles at rest (64 hex digits or base64 of 32 bytes).
    #[arg(
        long,
        env = "WEBPILOT_PROFILE_KEY",
        global = true,
        hide_env_values = true
    )]
    pub profile_key: Option<String>,
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

    fn from_file(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
    }

    /// Sets every value a flag (or its environment variable) gives, over the file's.
    pub(super) fn apply(&mut self, args: &ConfigArgs) {
        self.apply_service(args);
        self.apply_browser(args);
        self.apply_web(args);
    }

    /// The server: its address, who may call it, the state it shares.
    fn apply_service(&mut self, args: &ConfigArgs) {
        set(&mut self.bind, &args.bind);
        set(&mut self.port, &args.port);
        set(&mut self.data_dir, &args.data_dir);
        set(&mut self.shutdown_grace_secs, &args.shutdown_grace_secs);
        for (slot, value) in [
            (&mut self.token, &args.token),
            (&mut self.public_url, &args.public_url),
            (&mut self.live_secret, &args.live_secret),
            (&mut self.profile_key, &args.profile_key),
            (&mut self.database_url, &args.database_url),
            (&mut self.instance_url, &args.instance_url),
        ] {
            set_some(slot, value);
        }
        set_some(&mut self.keys_file, &args.keys_file);
        set(&mut self.mcp_allowed_hosts, &args.mcp_allowed_hosts);
        set(&mut self.mcp_allowed_origins, &args.mcp_allowed_origins);
        set(&mut self.trusted_proxies, &args.trusted_proxies);
    }

    /// The browser and its sessions.
    fn apply_browser(&mut self, args: &ConfigArgs) {
        set(&mut self.chromium, &args.chromium);
        set(&mut self.eager_browser, &args.eager_browser);
        set(&mut self.max_sessions, &args.max_sessions);
        set(&mut self.session_idle_secs, &args.session_idle_secs);
        set_some(&mut self.browser_concurrency, &args.browser_concurrency);
        set_some(&mut self.browser_max_pss_mb, &args.browser_max_pss_mb);
        if let Some(secs) = args.browser_recycle_idle_secs {
            self.browser_recycle_idle_secs = (secs > 0).then_some(secs);
        }
        set_some(&mut self.browser_ws, &args.browser_ws);
        set_some(&mut self.browser_url, &args.browser_url);
        set_some(&mut self.remote_egress, &args.remote_egress);
        if let Some((w, h)) = args.viewport {
            self.viewport_width = w;
            self.viewport_height = h;
        }
    }

    /// What the tools reach and through what: the URL policy, the proxy, search and the model.
    fn apply_web(&mut self, args: &ConfigArgs) {
        set(&mut self.fetch.allow, &args.fetch_allow);
        set(&mut self.fetch.allow_domains, &args.fetch_allow_domains);
        set(&mut self.fetch.deny_domains, &args.fetch_deny_domains);
        set_some(&mut self.proxy, &args.proxy);
        set(&mut self.proxy_bypass, &args.proxy_bypass);
        set(&mut self.llm.base_url, &args.llm_base_url);
        set(&mut self.llm.model, &args.llm_model);
        set_some(&mut self.llm.api_key, &args.llm_api_key);
        set(&mut self.search.order, &args.search_order);
        set_some(&mut self.search.searxng_url, &args.searxng_url);
        set_some(&mut self.search.tavily_key, &args.tavily_key);
        set_some(&mut self.search.brave_key, &args.brave_key);
    }
}

/// A value the flags give replaces the file's.
fn set<T: Clone>(slot: &mut T, value: &Option<T>) {
    if let Some(v) = value {
        *slot = v.clone();
    }
}

/// An optional setting the flags give replaces the file's; without the flag the file's stays.
fn set_some<T: Clone>(slot: &mut Option<T>, value: &Option<T>) {
    if value.is_some() {
        slot.clone_from(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
