//! The guarded HTTP client of every browserless fetch (open_web_page, the crawler): `http(s)`
//! only, addresses checked by `UrlPolicy` at connect time and on every redirect hop, a redirect
//! limit, connect/read/total timeouts, a body cap that stops reading, and gzip/br/deflate.
//!
//! With an upstream proxy (`--proxy`), requests go through it except to bypassed hosts; the
//! target is checked before each hop as the egress does (a name this machine cannot resolve is
//! the proxy's to resolve), and the proxy's own address is allowed.
//!
//! A second, unguarded client talks to the search backends the operator configured (a SearXNG
//! on localhost is legitimate there).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::header::{ACCEPT, CONTENT_TYPE, LOCATION};
use tokio::time::Instant;
use url::Url;

use super::charset;
use crate::config::{FetchConfig, SearchConfig};
use crate::egress::Upstream;
use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::policy::UrlPolicy;

/// A fetched response, body possibly cut at the size cap.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub final_url: Url,
    pub status: u16,
    pub content_type: Option<String>,
    /// The site's `Content-Signal` header: what it allows its content to be used for
    /// (`ai-train=no, search=yes, ai-input=yes`).
    pub content_signal: Option<String>,
    /// The response's validators, for a conditional request later.
    pub etag: Option<String>,
    pub last_modified: Option<String>,
    pub body: Vec<u8>,
    /// The body was longer than the cap and reading stopped there.
    pub truncated: bool,
}

impl Fetched {
    /// The media type, lowercase, without parameters (`text/html`).
    pub fn mime(&self) -> String {
        self.content_type
            .as_deref()
            .and_then(|ct| ct.split(';').next())
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase()
    }

    /// The body as text, decoded per its declared or detected charset.
    pub fn text(&self, html: bool) -> String {
        charset::decode(&self.body, self.content_type.as_deref(), html).0
    }
}

/// The certificate authorities of `fetch.ca_file`, trusted besides the built-in roots.
fn extra_roots(fetch: &FetchConfig) -> anyhow::Result<Vec<reqwest::Certificate>> {
    let Some(file) = &fetch.ca_file else {
        return Ok(Vec::new());
    };
    let pem = std::fs::read(file)
        .map_err(|e| anyhow::anyhow!("fetch.ca_file {}: {e}", file.display()))?;
    reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
        anyhow::anyhow!(
            "fetch.ca_file {}: not PEM certificates: {e}",
            file.display()
        )
    })
}

/// What a page fetch accepts: Markdown first, where a site offers its pages to agents that way
/// (by content negotiation, as Cloudflare does), else HTML, else anything.
const MARKDOWN_FIRST: &str = "text/markdown, text/html;q=0.9, */*;q=0.8";

/// Both HTTP clients and the limits they enforce.
pub struct WebClient {
    guarded: reqwest::Client,
    trusted: reqwest::Client,
    config: FetchConfig,
    /// The proxy guarded requests go through, if any.
    upstream: Option<Upstream>,
}

impl WebClient {
    pub fn new(
        fetch: &FetchConfig,
        search: &SearchConfig,
        policy: Arc<UrlPolicy>,
        upstream: Option<Upstream>,
    ) -> anyhow::Result<Self> {
        let builder = reqwest::Client::builder()
            .dns_resolver(Arc::new(GuardedResolver {
                policy,
                proxy_host: upstream.as_ref().map(Upstream::host),
            }))
            // Redirects are followed by hand so every hop is checked and reported.
            .redirect(reqwest::redirect::Policy::none());
        let builder = extra_roots(fetch)?
            .into_iter()
            .fold(builder, reqwest::ClientBuilder::add_root_certificate);
        let builder = match &upstream {
            Some(proxy) => builder.proxy(reqwest_proxy(proxy)?),
            // No proxy from the environment: it would resolve names out of the policy's sight.
            None => builder.no_proxy(),
        };
        let guarded = builder
            .connect_timeout(Duration::from_millis(fetch.connect_timeout_ms))
            .read_timeout(Duration::from_millis(fetch.read_timeout_ms))
            .user_agent(&fetch.user_agent)
            .gzip(true)
            .brotli(true)
            .deflate(true)
            .build()?;
        let trusted = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(fetch.connect_timeout_ms))
            .timeout(Duration::from_millis(search.timeout_ms))
            .user_agent(&fetch.user_agent)
            .gzip(true)
            .brotli(true)
            .deflate(true)
            .build()?;
        Ok(Self {
            guarded,
            trusted,
            config: fetch.clone(),
            upstream,
        })
    }

    /// Before a request that goes through the proxy: its host name's addresses, as the egress
    /// checks them (`check_url` has judged IP literals already).
    async fn check_proxied(&self, url: &Url, policy: &UrlPolicy) -> ToolResult<()> {
        match &self.upstream {
            Some(proxy) if !proxy.bypasses(url.host_str().unwrap_or_default()) => {
                check_addresses(url, policy, Resolution::ProxyMay).await
            }
            _ => Ok(()),
        }
    }

    /// The client for operator-configured endpoints (search backends).
    pub fn trusted(&self) -> &reqwest::Client {
        &self.trusted
    }

    /// Checks a URL another component (the browser) is about to load under `policy` (the
    /// caller's): scheme, host, and every address the host resolves to now. Redirects there
    /// are beyond this check.
    pub async fn check_target(&self, url: &Url, policy: &UrlPolicy) -> ToolResult<()> {
        policy.check_url(url)?;
        check_addresses(url, policy, Resolution::Required).await
    }

    /// GETs `url`, following redirects, every hop under `policy` (the caller's, which can only
    /// be narrower than the service's that judges addresses at connect time), reading at most
    /// the configured cap.
    pub async fn get(&self, url: &Url, policy: &UrlPolicy) -> ToolResult<Fetched> {
        self.get_with(url, policy, &[]).await
    }

    /// `get` reading at most `max_bytes` of the body (and never more than the configured cap):
    /// reading stops there and the connection is dropped, so a file read only in part (a
    /// robots.txt) never costs more memory than that part.
    pub async fn get_limited(
        &self,
        url: &Url,
        policy: &UrlPolicy,
        max_bytes: usize,
    ) -> ToolResult<Fetched> {
        self.fetch(url, policy, &[], max_bytes).await
    }

    /// `get` with more request headers (a conditional request's `If-None-Match`); a `304 Not
    /// Modified` answer comes back as it is, with no body.
    pub async fn get_with(
        &self,
        url: &Url,
        policy: &UrlPolicy,
        headers: &[(&str, &str)],
    ) -> ToolResult<Fetched> {
        self.fetch(url, policy, headers, self.config.max_bytes)
            .await
    }

    async fn fetch(
        &self,
        url: &Url,
        policy: &UrlPolicy,
        headers: &[(&str, &str)],
        max_bytes: usize,
    ) -> ToolResult<Fetched> {
        let deadline = Instant::now() + Duration::from_millis(self.config.total_timeout_ms);
        let mut current = url.clone();
        let mut hops: Vec<String> = Vec::new();
        loop {
            policy.check_url(&current)?;
            self.check_proxied(&current, policy).await?;
            let request = headers
                .iter()
                .fold(
                    self.guarded
                        .get(current.clone())
                        .header(ACCEPT, MARKDOWN_FIRST),
                    |request, (name, value)| request.header(*name, *value),
                )
                .send();
            let response = tokio::time::timeout_at(deadline, request)
                .await
                .map_err(|_| self.total_timeout(&current))?
                .map_err(|e| request_error(&current, &e))?;
            let location = response
                .status()
                .is_redirection()
                .then(|| response.headers().get(LOCATION))
                .flatten()
                .and_then(|l| l.to_str().ok())
                .and_then(|l| current.join(l).ok());
            let Some(next) = location else {
                let cap = max_bytes.min(self.config.max_bytes);
                return self.read_body(current, response, (deadline, cap)).await;
            };
            hops.push(current.to_string());
            if hops.len() > self.config.max_redirects {
                return Err(too_many_redirects(&hops, self.config.max_redirects));
            }
            current = next;
        }
    }

    /// POSTs a JSON `body` to `url` with `headers` (no redirects followed); the answer's status.
    /// Under `policy` through the guarded client; with None, to an address the operator listed,
    /// through the trusted one.
    pub async fn post_json(
        &self,
        url: &Url,
        policy: Option<&UrlPolicy>,
        body: &str,
        headers: &[(&str, &str)],
    ) -> ToolResult<u16> {
        let client = match policy {
            Some(policy) => {
                policy.check_url(url)?;
                self.check_proxied(url, policy).await?;
                &self.guarded
            }
            None => &self.trusted,
        };
        let request = headers.iter().fold(
            client
                .post(url.clone())
                .header(CONTENT_TYPE, "application/json")
                .body(body.to_string()),
            |request, (name, value)| request.header(*name, *value),
        );
        let limit = Duration::from_millis(self.config.total_timeout_ms);
        let response = tokio::time::timeout(limit, request.send())
            .await
            .map_err(|_| self.total_timeout(url))?
            .map_err(|e| request_error(url, &e))?;
        Ok(response.status().as_u16())
    }

    async fn read_body(
        &self,
        url: Url,
        mut response: reqwest::Response,
        (deadline, cap): (Instant, usize),
    ) -> ToolResult<Fetched> {
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let (content_signal, etag, last_modified) = (
            header("content-signal"),
            header("etag"),
            header("last-modified"),
        );
        let mut body = Vec::new();
        let mut truncated = false;
        loop {
            let chunk = tokio::time::timeout_at(deadline, response.chunk())
                .await
                .map_err(|_| self.total_timeout(&url))?
                .map_err(|e| request_error(&url, &e))?;
            let Some(chunk) = chunk else { break };
            let room = cap - body.len();
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                truncated = true;
                break;
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Fetched {
            final_url: url,
            status,
            content_type,
            content_signal,
            etag,
            last_modified,
            body,
            truncated,
        })
    }

    fn total_timeout(&self, url: &Url) -> ToolError {
        ToolError::new(
            ErrorCode::Timeout,
            format!(
                "fetching {url} took longer than {} ms",
                self.config.total_timeout_ms
            ),
        )
        .with_hint("the site is slow; try again later, or mode=browser")
    }
}

fn too_many_redirects(hops: &[String], limit: usize) -> ToolError {
    let shown: Vec<&str> = hops
        .iter()
        .rev()
        .take(4)
        .rev()
        .map(String::as_str)
        .collect();
    ToolError::new(
        ErrorCode::Upstream,
        format!(
            "more than {limit} redirects (a redirect loop?): … {}",
            shown.join(" → ")
        ),
    )
    .with_hint("the site keeps redirecting; check the URL, or open it with browser_navigate")
}

/// Turns a reqwest failure into the tool error an agent can act on.
fn request_error(url: &Url, error: &reqwest::Error) -> ToolError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(cause) = source {
        if let Some(blocked) = cause.downcast_ref::<BlockedAddress>() {
            return blocked.to_tool_error(url);
        }
        source = cause.source();
    }
    if error.is_timeout() {
        return ToolError::new(
            ErrorCode::Timeout,
            format!(
                "{url}: the server stopped answering ({})",
                root_cause(error)
            ),
        )
        .with_hint("the site is slow or stalled; try again later, or mode=browser");
    }
    let what = if error.is_connect() {
        "cannot connect"
    } else {
        "request failed"
    };
    ToolError::new(
        ErrorCode::Upstream,
        format!("{url}: {what}: {}", root_cause(error)),
    )
    .with_hint("check the URL; the site may be down or unreachable")
}

fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// Whether a host name that does not resolve here is an error.
#[derive(Clone, Copy, PartialEq)]
enum Resolution {
    Required,
    /// The request goes through a proxy, which may resolve names this machine cannot.
    ProxyMay,
}

/// Every address `url`'s host name resolves to now, under `policy`.
async fn check_addresses(url: &Url, policy: &UrlPolicy, resolution: Resolution) -> ToolResult<()> {
    let Some(url::Host::Domain(host)) = url.host() else {
        return Ok(());
    };
    let port = url.port_or_known_default().unwrap_or(80);
    let addresses = match tokio::net::lookup_host((host, port)).await {
        Ok(addresses) => addresses,
        Err(_) if resolution == Resolution::ProxyMay => return Ok(()),
        Err(e) => {
            return Err(ToolError::new(
                ErrorCode::Upstream,
                format!("{url}: cannot resolve {host}: {e}"),
            )
            .with_hint("check the host name"));
        }
    };
    for address in addresses {
        policy.check_addr(url.as_str(), Some(host), address.ip())?;
    }
    Ok(())
}

/// The upstream proxy as reqwest takes it: credentials apart, the bypass list as `NO_PROXY`.
fn reqwest_proxy(upstream: &Upstream) -> anyhow::Result<reqwest::Proxy> {
    let mut proxy = reqwest::Proxy::all(upstream.address())?;
    if let Some((user, password)) = upstream.credentials() {
        proxy = proxy.basic_auth(user, password);
    }
    let bypass: Vec<&str> = upstream
        .bypass_list()
        .iter()
        .map(|host| host.strip_prefix('*').unwrap_or(host))
        .collect();
    Ok(proxy.no_proxy(reqwest::NoProxy::from_string(&bypass.join(","))))
}

/// Raised by the resolver when a name resolves only to addresses the policy refuses.
#[derive(Debug)]
struct BlockedAddress {
    host: String,
    ip: Option<IpAddr>,
}

impl std::fmt::Display for BlockedAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} resolves only to non-public addresses", self.host)
    }
}

impl std::error::Error for BlockedAddress {}

impl BlockedAddress {
    fn to_tool_error(&self, url: &Url) -> ToolError {
        match self.ip {
            Some(ip) => UrlPolicy::default()
                .check_addr(url.as_str(), Some(&self.host), ip)
                .expect_err("a blocked address is not public"),
            None => ToolError::new(
                ErrorCode::BlockedUrl,
                format!("{url}: {} has no address", self.host),
            ),
        }
    }
}

/// Resolves names and drops every address the policy refuses, so the check happens on the very
/// addresses the connection uses (no window for DNS rebinding).
struct GuardedResolver {
    policy: Arc<UrlPolicy>,
    /// The upstream proxy's name: its address is allowed whatever it is.
    proxy_host: Option<String>,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy.clone();
        let host = name.as_str().to_string();
        let is_proxy = self
            .proxy_host
            .as_deref()
            .is_some_and(|proxy| proxy.eq_ignore_ascii_case(&host));
        Box::pin(async move {
            let resolved: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if is_proxy {
                return Ok(Box::new(resolved.into_iter()) as Addrs);
            }
            let first = resolved.first().map(SocketAddr::ip);
            let allowed: Vec<SocketAddr> = resolved
                .into_iter()
                .filter(|addr| policy.allows(Some(&host), addr.ip()))
                .collect();
            if allowed.is_empty() {
                return Err(Box::new(BlockedAddress { host, ip: first }) as _);
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}
