//! `browser_navigate`: open a URL or a search, move in history, reload — and return once the
//! page is ready, with the start of its element list.

use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::paging::slice_lines;
use super::{Ctx, Tool, ToolOutput, browser_fields, merge, session_name};
use crate::browser::{Destination, SessionGuard, Tab};
use crate::error::{ErrorCode, ToolError, ToolResult};

/// Token budget of the element list included in a navigation result.
const INLINE_ELEMENTS_TOKENS: usize = 600;
/// Bounds of `timeout_ms`.
const TIMEOUT_RANGE_MS: (u64, u64) = (100, 120_000);

const GUIDE: &str = "browser_navigate opens a page and returns when it is really ready \
(JS-rendered content included), with the first interactive elements as `[ref] role \"name\"` \
lines. Use wait_for only for content that appears late on its own.";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NavigateArgs {
    /// URL (mode=url) or search query (mode=search).
    pub target: Option<String>,
    /// Default url.
    pub mode: Option<Mode>,
    /// mode=search engine (default duckduckgo).
    pub engine: Option<Engine>,
    /// Open in a new tab.
    pub new_tab: Option<bool>,
    /// Text or CSS selector to wait for.
    pub wait_for: Option<String>,
    /// Time limit in ms (default 15000).
    pub timeout_ms: Option<u64>,
    /// Budget of the element list (default 600, 0: none).
    pub max_tokens: Option<usize>,
    /// Default "default".
    pub session: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[default]
    Url,
    Search,
    Back,
    Forward,
    Reload,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    #[default]
    Duckduckgo,
    Bing,
    Google,
}

impl Engine {
    fn url_for(self, query: &str) -> String {
        let base = match self {
            Engine::Duckduckgo => "https://duckduckgo.com/html/?q=",
            Engine::Bing => "https://www.bing.com/search?q=",
            Engine::Google => "https://www.google.com/search?q=",
        };
        let query: String = url::form_urlencoded::byte_serialize(query.as_bytes()).collect();
        format!("{base}{query}")
    }
}

pub struct Navigate;

#[async_trait]
impl Tool for Navigate {
    type Args = NavigateArgs;
    const NAME: &'static str = "browser_navigate";
    const GUIDE: &'static str = GUIDE;
    const DESCRIPTION: &'static str = "Open a URL or web search (or go back/forward/reload) and wait until the page is ready; returns status, readiness and the first interactive elements.";

    async fn run(&self, ctx: &Ctx, args: NavigateArgs) -> ToolResult<ToolOutput> {
        let destination = destination(&args)?;
        let timeout = timeout(args.timeout_ms, ctx.config.navigation_timeout_ms)?;
        let mut session = ctx.browser.session(session_name(&args.session)).await?;
        let name = session.name().to_string();
        let tab = target_tab(&mut session, args.new_tab.unwrap_or(false)).await?;
        let arrival = tab
            .navigate(destination, args.wait_for.as_deref(), timeout)
            .await?;
        let budget = args.max_tokens.unwrap_or(INLINE_ELEMENTS_TOKENS);
        let mut extra = json!(arrival);
        if budget > 0 {
            let list = tab.elements(None).await?;
            let slice = slice_lines(&list.lines(), budget, None)?;
            extra["elements_total"] = json!(list.elements.len());
            extra["elements"] = json!(slice.content);
            if let Some(cursor) = slice.next_cursor {
                extra["elements_next_cursor"] = json!(cursor);
            }
        }
        let fields = browser_fields(&name, tab).await;
        Ok(ToolOutput::json(merge(fields, extra)))
    }
}

async fn target_tab(session: &mut SessionGuard, new_tab: bool) -> ToolResult<&mut Tab> {
    if new_tab {
        session.open_tab("about:blank").await
    } else {
        session.active_tab().await
    }
}

fn destination(args: &NavigateArgs) -> ToolResult<Destination> {
    let target = args
        .target
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty());
    let need_target =
        |mode: &str| ToolError::invalid(format!("field `target` is required for mode={mode}"));
    Ok(match args.mode.unwrap_or_default() {
        Mode::Url => Destination::Url(checked_url(target.ok_or_else(|| need_target("url"))?)?),
        Mode::Search => {
            let query = target.ok_or_else(|| need_target("search"))?;
            Destination::Url(args.engine.unwrap_or_default().url_for(query))
        }
        Mode::Back => Destination::Back,
        Mode::Forward => Destination::Forward,
        Mode::Reload => Destination::Reload,
    })
}

/// Only http(s) and about:blank may be opened; a bare host gets `https://`.
pub(super) fn checked_url(target: &str) -> ToolResult<String> {
    if target == "about:blank" {
        return Ok(target.to_string());
    }
    let parsed = match url::Url::parse(target) {
        Ok(url) => url,
        Err(url::ParseError::RelativeUrlWithoutBase) => {
            url::Url::parse(&format!("https://{target}")).map_err(|e| {
                ToolError::invalid(format!("field `target`: {target:?} is not a URL: {e}"))
            })?
        }
        Err(e) => {
            return Err(ToolError::invalid(format!(
                "field `target`: {target:?} is not a URL: {e}"
            )));
        }
    };
    match parsed.scheme() {
        "http" | "https" if parsed.host().is_some() => Ok(parsed.to_string()),
        "http" | "https" => Err(ToolError::invalid(format!(
            "field `target`: {target:?} has no host"
        ))),
        scheme => Err(ToolError::new(
            ErrorCode::BlockedUrl,
            format!("{scheme}: URLs cannot be opened"),
        )
        .with_hint("only http(s) URLs and about:blank can be opened")),
    }
}

fn timeout(requested: Option<u64>, default_ms: u64) -> ToolResult<Duration> {
    let ms = requested.unwrap_or(default_ms);
    let (min, max) = TIMEOUT_RANGE_MS;
    if !(min..=max).contains(&ms) {
        return Err(ToolError::invalid(format!(
            "field `timeout_ms` must be between {min} and {max}, got {ms}"
        )));
    }
    Ok(Duration::from_millis(ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_web_urls_pass() {
        assert_eq!(checked_url("example.com").unwrap(), "https://example.com/");
        assert_eq!(checked_url("about:blank").unwrap(), "about:blank");
        for blocked in [
            "file:///etc/passwd",
            "javascript:alert(1)",
            "data:text/html,hi",
            "chrome://settings",
        ] {
            assert_eq!(
                checked_url(blocked).unwrap_err().code,
                ErrorCode::BlockedUrl,
                "{blocked}"
            );
        }
        assert_eq!(
            checked_url("http://").unwrap_err().code,
            ErrorCode::InvalidArgument
        );
    }

    #[test]
    fn search_urls_encode_the_query() {
        assert_eq!(
            Engine::Bing.url_for("rust & sse"),
            "https://www.bing.com/search?q=rust+%26+sse"
        );
    }
}
