//! `browser_navigate`: open a URL or a search, move in history, reload — and return once the
//! page is ready, with the start of its element list.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Call, Scope, SessionField, TimeoutMs, Tool};
use crate::browser::{Arrival, ConsentAnswer, Destination, PageEvents};
use crate::config::ConsentChoice;
use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::pages::paging::slice_lines;

/// Token budget of the element list included in a navigation result.
const INLINE_ELEMENTS_TOKENS: usize = 600;
/// Longest a navigation waits for a consent dialog to be answered.
const CONSENT_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

const GUIDE: &str = "browser_navigate opens a page and returns when it is really ready \
(JS-rendered content included), with the first interactive elements as `[ref] role \"name\"` \
lines. Use wait_for only for content that appears late on its own.";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NavigateArgs {
    /// URL, or query for mode=search.
    pub target: Option<String>,
    /// Default url.
    pub mode: Option<Mode>,
    /// mode=search.
    pub engine: Option<Engine>,
    /// New tab.
    pub new_tab: Option<bool>,
    /// Text or selector to await.
    pub wait_for: Option<String>,
    /// ms (default 15000).
    pub timeout_ms: Option<TimeoutMs>,
    /// Elements budget (default 600).
    pub max_tokens: Option<usize>,
    /// Cookie walls (default reject).
    pub consent: Option<ConsentChoice>,
    pub session: Option<SessionField>,
}

shared_fields!(NavigateArgs {
    session,
    timeout_ms
});

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

/// Where the navigation ended, with the start of the element list.
#[derive(Debug, Serialize, JsonSchema)]
pub struct NavigateOutput {
    #[serde(flatten)]
    arrival: Arrival,
    /// Interactive elements on the page (absent with max_tokens 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    elements_total: Option<usize>,
    /// The first of them, `[ref] role "name"` per line.
    #[serde(skip_serializing_if = "Option::is_none")]
    elements: Option<String>,
    /// Pass as browser_read mode=elements cursor for the rest.
    #[serde(skip_serializing_if = "Option::is_none")]
    elements_next_cursor: Option<String>,
    /// The consent dialog answered (reject or accept), or left hidden, and which platform's.
    #[serde(skip_serializing_if = "Option::is_none")]
    consent: Option<ConsentAnswer>,
    /// How to read what the browser cannot show as a page (a PDF).
    #[serde(skip_serializing_if = "Option::is_none")]
    hint: Option<String>,
    /// What went wrong while the page loaded (console errors, page errors, failed requests);
    /// absent when nothing did.
    #[serde(skip_serializing_if = "Option::is_none")]
    page_events: Option<PageEvents>,
}

pub struct Navigate;

#[async_trait]
impl Tool for Navigate {
    type Args = NavigateArgs;
    type Output = NavigateOutput;
    const NAME: &'static str = "browser_navigate";
    const GUIDE: &'static str = GUIDE;
    const EXAMPLE: &'static str = r#"{"target": "https://example.com"}"#;
    const SCOPE: Scope = Scope::Browser;
    const TITLE: &'static str = "Open a page";
    const EFFECTS: crate::tools::Effects = crate::tools::Effects {
        read_only: false,
        destructive: false,
        idempotent: false,
        open_world: true,
    };
    const DESCRIPTION: &'static str =
        "Open a URL or search (back/forward/reload), wait until ready; returns elements.";

    async fn run(&self, call: &mut Call<'_>, args: NavigateArgs) -> ToolResult<NavigateOutput> {
        let mut destination = destination(&args)?;
        let id = if args.new_tab.unwrap_or(false) {
            call.new_tab().await?.id.clone()
        } else {
            let (tab, crashed_url) = call.tab_to_navigate().await?;
            // A reload of a crashed tab reopens its page in the fresh one.
            if let (Destination::Reload, Some(url)) = (&destination, crashed_url) {
                destination = Destination::Url(url);
            }
            tab.id.clone()
        };
        let time_left = call.time_left();
        let ends = call.ends();
        let choice = args.consent.unwrap_or(call.ctx.config.consent);
        let tab = call.use_tab(&id)?;
        tab.mark_action();
        let arrival = tab
            .navigate(destination, args.wait_for.as_deref(), time_left)
            .await?;
        let hint = (arrival.mime.as_deref() == Some("application/pdf")).then(|| {
            "this is a PDF document, which the browser shows without text to read: read it with \
             open_web_page (the same URL; paged, with headings), or save it with browser_interact \
             action=download"
                .to_string()
        });
        let left = ends.saturating_duration_since(std::time::Instant::now());
        let consent = tab
            .answer_consent(choice, CONSENT_WAIT.min(left), left)
            .await;
        let mut output = NavigateOutput {
            arrival,
            consent,
            elements_total: None,
            elements: None,
            elements_next_cursor: None,
            hint,
            page_events: None,
        };
        let budget = args.max_tokens.unwrap_or(INLINE_ELEMENTS_TOKENS);
        if budget > 0 {
            let list = tab.elements(None).await?;
            let slice = slice_lines(&list.lines(), budget, None)?;
            output.elements_total = Some(list.elements.len());
            output.elements = Some(slice.content);
            output.elements_next_cursor = slice.next_cursor;
        }
        output.page_events = tab.page_events().await;
        Ok(output)
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
    crate::policy::check_length(target, "target")?;
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
