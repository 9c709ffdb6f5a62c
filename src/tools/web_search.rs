//! `web_search`: a web search without a browser, over DuckDuckGo (no key), SearXNG, Tavily or
//! Brave, with failover between them.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Call, Scope, Tool};
use crate::error::{ToolError, ToolResult};
use crate::web::search::{BackendChoice, SearchOutcome, SearchRequest, TimeRange};

/// Bounds of `max_results`.
const MAX_RESULTS: (usize, usize) = (1, 20);
const DEFAULT_RESULTS: usize = 5;
/// DuckDuckGo refuses longer queries; no backend needs more.
const MAX_QUERY_CHARS: usize = 500;

const GUIDE: &str = "web_search finds pages without a browser and returns titles, URLs and \
snippets. Read a result with open_web_page (or browser_navigate when you need to interact).";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebSearchArgs {
    /// Search terms.
    pub query: String,
    /// 1–20 (default 5).
    #[schemars(range(min = 1, max = 20))]
    pub max_results: Option<usize>,
    /// auto: failover.
    pub backend: Option<BackendChoice>,
    // Recency.
    pub time_range: Option<TimeRange>,
    /// e.g. en, de-de.
    pub language: Option<String>,
    /// Tavily: basic|advanced.
    pub search_depth: Option<String>,
    /// Only these.
    pub include_domains: Option<Vec<String>>,
}

shared_fields!(WebSearchArgs {});

/// The hits, and which backends were tried.
#[derive(Debug, Serialize, JsonSchema)]
pub struct WebSearchOutput {
    #[serde(flatten)]
    outcome: SearchOutcome,
    /// Time the search took, failovers included.
    search_time_ms: u64,
}

pub struct WebSearch;

#[async_trait]
impl Tool for WebSearch {
    type Args = WebSearchArgs;
    type Output = WebSearchOutput;
    const NAME: &'static str = "web_search";
    const GUIDE: &'static str = GUIDE;
    const EXAMPLE: &'static str = r#"{"query": "rust async runtime comparison", "max_results": 5}"#;
    const SCOPE: Scope = Scope::Web;
    const TITLE: &'static str = "Search the web";
    const EFFECTS: crate::tools::Effects = crate::tools::Effects::READS_WEB;
    const DESCRIPTION: &'static str = "Search the web: title, url, snippet per result.";

    async fn run(&self, call: &mut Call<'_>, args: WebSearchArgs) -> ToolResult<WebSearchOutput> {
        let backend = args.backend.unwrap_or_default();
        let request = request(args)?;
        let started = std::time::Instant::now();
        let web = &call.ctx.web;
        let outcome = web
            .searcher
            .search(web.client.trusted(), backend, &request)
            .await?;
        Ok(WebSearchOutput {
            outcome,
            search_time_ms: started.elapsed().as_millis() as u64,
        })
    }

    fn summary(output: &WebSearchOutput) -> String {
        format!("{} results", output.outcome.results.len())
    }
}

/// Checks the arguments and normalises the query's whitespace.
fn request(args: WebSearchArgs) -> ToolResult<SearchRequest> {
    let query = args.query.split_whitespace().collect::<Vec<_>>().join(" ");
    if query.is_empty() {
        return Err(ToolError::invalid("field `query` must not be empty"));
    }
    if query.chars().count() > MAX_QUERY_CHARS {
        return Err(ToolError::invalid(format!(
            "field `query` is longer than {MAX_QUERY_CHARS} characters"
        )));
    }
    let max_results = args.max_results.unwrap_or(DEFAULT_RESULTS);
    if !(MAX_RESULTS.0..=MAX_RESULTS.1).contains(&max_results) {
        return Err(ToolError::invalid(format!(
            "field `max_results` must be from {} to {}, got {max_results}",
            MAX_RESULTS.0, MAX_RESULTS.1
        )));
    }
    if let Some(depth) = &args.search_depth
        && !["basic", "advanced", "fast", "ultra-fast"].contains(&depth.as_str())
    {
        return Err(ToolError::invalid(
            "field `search_depth` must be basic, advanced, fast or ultra-fast",
        ));
    }
    Ok(SearchRequest {
        query,
        max_results,
        time_range: args.time_range,
        language: args.language.filter(|l| !l.trim().is_empty()),
        search_depth: args.search_depth,
        include_domains: args.include_domains.unwrap_or_default(),
    })
}
