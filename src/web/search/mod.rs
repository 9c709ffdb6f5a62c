//! web_search: four backends behind one request/response shape, and `auto`, which tries the
//! configured ones in order, fails over on errors, rate limits and CAPTCHAs, and rests a failed
//! backend for a cool-down instead of hammering it on every call.

mod brave;
mod duckduckgo;
mod searxng;
mod tavily;

use crate::sync::Locked;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::config::SearchConfig;
use crate::error::{ErrorCode, ToolError, ToolResult};

/// Which backend to ask.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BackendChoice {
    #[default]
    Auto,
    Duckduckgo,
    Searxng,
    Tavily,
    Brave,
}

// How recent results must be (no schema description: the tool list's size).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TimeRange {
    Day,
    Week,
    Month,
    Year,
}

/// One search, as every backend receives it.
#[derive(Debug, Clone)]
pub struct SearchRequest {
    pub query: String,
    pub max_results: usize,
    pub time_range: Option<TimeRange>,
    /// Language or region code (`en`, `de-de`).
    pub language: Option<String>,
    /// Tavily's `search_depth` (basic | advanced | fast | ultra-fast).
    pub search_depth: Option<String>,
    /// Only results from these domains.
    pub include_domains: Vec<String>,
}

impl SearchRequest {
    /// The query with `site:` operators for backends that have no domain filter of their own.
    fn query_with_sites(&self) -> String {
        match self.include_domains.as_slice() {
            [] => self.query.clone(),
            domains => {
                let sites: Vec<String> = domains.iter().map(|d| format!("site:{d}")).collect();
                format!("{} ({})", self.query, sites.join(" OR "))
            }
        }
    }
}

/// One result, plain text.
#[derive(Debug, Clone, Serialize, PartialEq, JsonSchema)]
pub struct SearchHit {
    pub title: String,
    pub url: String,
    pub snippet: String,
    /// The backend (and engine, for SearXNG) that found it.
    pub source: String,
}

/// A backend that was tried (or skipped) and why it gave nothing.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FailedBackend {
    pub name: &'static str,
    pub reason: String,
}

/// What web_search returns.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SearchOutcome {
    pub query: String,
    pub results: Vec<SearchHit>,
    /// Distinct results found before `max_results` was applied.
    pub total_results: usize,
    pub backend: &'static str,
    pub failed_backends: Vec<FailedBackend>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Why a backend produced no answer.
#[derive(Debug, Clone)]
pub enum Failure {
    NotConfigured(&'static str),
    RateLimited(String),
    Captcha,
    Timeout,
    Http(u16, String),
    BadResponse(String),
    Unreachable(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::NotConfigured(setting) => write!(f, "not configured: set {setting}"),
            Failure::RateLimited(detail) => write!(f, "rate limited ({detail})"),
            Failure::Captcha => write!(f, "answered with a CAPTCHA / bot challenge"),
            Failure::Timeout => write!(f, "timed out"),
            Failure::Http(status, detail) => write!(f, "HTTP {status}: {detail}"),
            Failure::BadResponse(detail) => write!(f, "unreadable response: {detail}"),
            Failure::Unreachable(detail) => write!(f, "unreachable: {detail}"),
        }
    }
}

impl Failure {
    fn from_reqwest(error: &reqwest::Error) -> Self {
        if error.is_timeout() {
            Failure::Timeout
        } else if error.is_decode() {
            Failure::BadResponse(error.to_string())
        } else {
            let mut cause: &dyn std::error::Error = error;
            while let Some(next) = cause.source() {
                cause = next;
            }
            Failure::Unreachable(cause.to_string())
        }
    }

    /// The error for a call that named this backend explicitly.
    fn into_error(self, backend: &str) -> ToolError {
        let message = format!("{backend}: {self}");
        match self {
            Failure::NotConfigured(_) => ToolError::new(ErrorCode::NotConfigured, message),
            Failure::Timeout => ToolError::new(ErrorCode::Timeout, message)
                .with_hint("try again, or backend=auto to use another backend"),
            _ => ToolError::new(ErrorCode::Upstream, message)
                .with_hint("try backend=auto, another backend, or again later"),
        }
    }
}

/// Sends a prepared request, classifying transport errors and rate-limit statuses.
async fn send(request: reqwest::RequestBuilder) -> Result<reqwest::Response, Failure> {
    let response = request
        .send()
        .await
        .map_err(|e| Failure::from_reqwest(&e))?;
    let status = response.status().as_u16();
    if status == 429 {
        return Err(Failure::RateLimited("HTTP 429".into()));
    }
    Ok(response)
}

/// Reads the body; a non-success status becomes `Failure::Http` with the body's gist.
async fn body(response: reqwest::Response) -> Result<String, Failure> {
    let status = response.status().as_u16();
    let text = response
        .text()
        .await
        .map_err(|e| Failure::from_reqwest(&e))?;
    if !(200..300).contains(&status) {
        return Err(Failure::Http(status, error_detail(&text)));
    }
    Ok(text)
}

/// What an error body says: the message of a JSON error (`{"detail": {"error"}}` of Tavily,
/// `{"error": {"detail"}}` of Brave, `{"error"}` of SearXNG), else its first 200 characters.
fn error_detail(text: &str) -> String {
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(text) {
        let pointers = [
            "/detail/error",
            "/error/detail",
            "/error/message",
            "/error",
            "/detail",
            "/message",
        ];
        if let Some(message) = pointers.iter().find_map(|p| value.pointer(p)?.as_str()) {
            return message.to_string();
        }
    }
    plain_text(text).chars().take(200).collect()
}

/// Plain text from a snippet that may hold tags and entities.
pub fn plain_text(text: &str) -> String {
    let decoded = if text.contains(['<', '&']) {
        super::bounded::fragment(text).document.text().to_string()
    } else {
        text.to_string()
    };
    decoded.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The search backends with their shared HTTP client and cool-down book.
pub struct Searcher {
    config: SearchConfig,
    cooling: Mutex<HashMap<&'static str, (Instant, String)>>,
}

impl Searcher {
    pub fn new(config: SearchConfig) -> Self {
        Self {
            config,
            cooling: Mutex::new(HashMap::new()),
        }
    }

    pub async fn search(
        &self,
        http: &reqwest::Client,
        choice: BackendChoice,
        request: &SearchRequest,
    ) -> ToolResult<SearchOutcome> {
        let named = match choice {
            BackendChoice::Auto => None,
            BackendChoice::Duckduckgo => Some("duckduckgo"),
            BackendChoice::Searxng => Some("searxng"),
            BackendChoice::Tavily => Some("tavily"),
            BackendChoice::Brave => Some("brave"),
        };
        if let Some(name) = named {
            let hits = self
                .ask(http, name, request)
                .await
                .map_err(|failure| failure.into_error(name))?;
            return Ok(outcome(request, name, hits, Vec::new()));
        }
        let mut failed = Vec::new();
        for name in self.auto_order() {
            if let Some(reason) = self.cooling_down(name) {
                failed.push(FailedBackend { name, reason });
                continue;
            }
            match self.ask(http, name, request).await {
                Ok(hits) => return Ok(outcome(request, name, hits, failed)),
                Err(failure) => {
                    tracing::warn!(backend = name, %failure, "search backend failed");
                    self.rest(name, &failure);
                    failed.push(FailedBackend {
                        name,
                        reason: failure.to_string(),
                    });
                }
            }
        }
        let reasons: Vec<String> = failed
            .iter()
            .map(|f| format!("{}: {}", f.name, f.reason))
            .collect();
        Err(ToolError::new(
            ErrorCode::Upstream,
            if reasons.is_empty() {
                "no search backend is configured".to_string()
            } else {
                format!("every search backend failed — {}", reasons.join("; "))
            },
        )
        .with_hint(
            "try again later; configure another backend (search.searxng_url, WEBPILOT_BRAVE_KEY, \
             WEBPILOT_TAVILY_KEY), or open a known URL with open_web_page",
        ))
    }

    /// Configured backends in the configured order (DuckDuckGo needs no key).
    fn auto_order(&self) -> Vec<&'static str> {
        self.config
            .order
            .iter()
            .map(|backend| backend.name())
            .filter(|name| self.configured(name).is_ok())
            .collect()
    }

    fn configured(&self, name: &str) -> Result<(), Failure> {
        let missing = match name {
            "searxng" => self
                .config
                .searxng_url
                .is_none()
                .then_some("search.searxng_url (WEBPILOT_SEARXNG_URL)"),
            "tavily" => self
                .config
                .tavily_key
                .is_none()
                .then_some("search.tavily_key (WEBPILOT_TAVILY_KEY)"),
            "brave" => self
                .config
                .brave_key
                .is_none()
                .then_some("search.brave_key (WEBPILOT_BRAVE_KEY)"),
            _ => None,
        };
        missing.map_or(Ok(()), |setting| Err(Failure::NotConfigured(setting)))
    }

    async fn ask(
        &self,
        http: &reqwest::Client,
        name: &'static str,
        request: &SearchRequest,
    ) -> Result<Vec<SearchHit>, Failure> {
        self.configured(name)?;
        let config = &self.config;
        let hits = match name {
            "duckduckgo" => duckduckgo::search(http, &config.duckduckgo_url, request).await,
            "searxng" => {
                let url = config.searxng_url.as_deref().unwrap_or_default();
                searxng::search(http, url, request).await
            }
            "tavily" => {
                let key = config.tavily_key.as_deref().unwrap_or_default();
                tavily::search(http, &config.tavily_url, key, request).await
            }
            _ => {
                let key = config.brave_key.as_deref().unwrap_or_default();
                brave::search(http, &config.brave_url, key, request).await
            }
        }?;
        Ok(hits)
    }

    fn cooling_down(&self, name: &str) -> Option<String> {
        let cooling = self.cooling.locked();
        let (until, reason) = cooling.get(name)?;
        let left = until.checked_duration_since(Instant::now())?;
        Some(format!(
            "skipped for {} s more after: {reason}",
            left.as_secs().max(1)
        ))
    }

    fn rest(&self, name: &'static str, failure: &Failure) {
        let until = Instant::now() + Duration::from_secs(self.config.cooldown_secs);
        self.cooling
            .locked()
            .insert(name, (until, failure.to_string()));
    }
}

/// Merges duplicates (same URL), caps the list, and says so when nothing was found.
fn outcome(
    request: &SearchRequest,
    backend: &'static str,
    hits: Vec<SearchHit>,
    failed_backends: Vec<FailedBackend>,
) -> SearchOutcome {
    let mut seen = HashSet::new();
    let mut results: Vec<SearchHit> = Vec::new();
    for hit in hits {
        if hit.url.is_empty() {
            continue;
        }
        let key = hit.url.trim_end_matches('/').to_string();
        if seen.insert(key.clone()) {
            results.push(hit);
        } else if let Some(first) = results
            .iter_mut()
            .find(|r| r.url.trim_end_matches('/') == key)
            && first.snippet.is_empty()
        {
            first.snippet = hit.snippet;
        }
    }
    let total_results = results.len();
    results.truncate(request.max_results);
    let message = results
        .is_empty()
        .then(|| format!("{backend} found nothing for {:?}", request.query));
    SearchOutcome {
        query: request.query.clone(),
        results,
        total_results,
        backend,
        failed_backends,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(url: &str, snippet: &str) -> SearchHit {
        SearchHit {
            title: url.into(),
            url: url.into(),
            snippet: snippet.into(),
            source: "test".into(),
        }
    }

    #[test]
    fn duplicates_merge_and_the_list_is_capped() {
        let request = SearchRequest {
            query: "q".into(),
            max_results: 2,
            time_range: None,
            language: None,
            search_depth: None,
            include_domains: Vec::new(),
        };
        let hits = vec![
            hit("https://a.example/x", ""),
            hit("https://a.example/x/", "the snippet"),
            hit("https://b.example/", "b"),
            hit("https://c.example/", "c"),
        ];
        let outcome = outcome(&request, "test", hits, Vec::new());
        assert_eq!(outcome.total_results, 3);
        assert_eq!(outcome.results.len(), 2);
        assert_eq!(outcome.results[0].snippet, "the snippet");
        assert_eq!(outcome.message, None);
    }

    #[test]
    fn snippets_become_plain_text() {
        assert_eq!(
            plain_text("A <strong>bold</strong>&nbsp;claim &amp; \n more &#x27;x&#x27;"),
            "A bold claim & more 'x'"
        );
    }
}
