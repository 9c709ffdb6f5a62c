//! `open_web_page`: read a page without driving a browser — guarded HTTP GET, content
//! extraction, Markdown — and render it in the browser only when HTTP alone cannot show it
//! (a JavaScript shell, an empty body, a challenge page), saying so.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use url::Url;

use super::paging::{self, slice_text};
use super::{Ctx, Tool, ToolOutput};
use crate::browser::{BrowserService, Destination, Form, Scope};
use crate::config::Config;
use crate::crawl::PageLoader;
use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::web::client::Fetched;
use crate::web::extract::{self, ExtractKind, Extracted, TextFormat};
use crate::web::{WebService, shell};

/// The browser session that renders pages for this tool, apart from agents' own sessions.
const RENDER_SESSION: &str = "_open_web_page";

const GUIDE: &str = "open_web_page reads a URL without a browser: the main article text as \
Markdown by default (extract=full|links|images|structured for other views). It renders the page \
in the browser by itself when plain HTTP gets a JavaScript shell. Long pages are paged: pass \
next_cursor back as cursor.";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenWebPageArgs {
    /// http(s) URL to read.
    pub url: String,
    /// Default main (article + metadata).
    pub extract: Option<ExtractKind>,
    /// Default markdown.
    pub format: Option<TextFormat>,
    /// Default auto (browser only when needed).
    pub mode: Option<FetchMode>,
    /// Token budget (default 4000).
    pub max_tokens: Option<usize>,
    /// next_cursor of the previous call.
    pub cursor: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FetchMode {
    #[default]
    Auto,
    Http,
    Browser,
}

pub struct OpenWebPage;

/// A page's text as one of the two routes produced it.
struct Loaded {
    final_url: Url,
    status: Option<u16>,
    extracted: Extracted,
    via: &'static str,
    why: Option<String>,
    body_truncated: bool,
}

#[async_trait]
impl Tool for OpenWebPage {
    type Args = OpenWebPageArgs;
    const NAME: &'static str = "open_web_page";
    const GUIDE: &'static str = GUIDE;
    const DESCRIPTION: &'static str = "Read a web page without a browser: main content, whole page, links, images or outline, as Markdown or text. Paged by max_tokens/cursor.";

    async fn run(&self, ctx: &Ctx, args: OpenWebPageArgs) -> ToolResult<ToolOutput> {
        let fetcher = Fetcher {
            config: ctx.config.clone(),
            browser: ctx.browser.clone(),
            web: ctx.web.clone(),
        };
        fetcher.open(args).await.map(ToolOutput::json)
    }
}

/// What open_web_page needs, apart from the registry: the crawler loads pages through it too.
#[derive(Clone)]
pub struct Fetcher {
    pub config: Arc<Config>,
    pub browser: Arc<BrowserService>,
    pub web: Arc<WebService>,
}

impl Fetcher {
    /// Loads, extracts and pages one URL: the open_web_page result.
    pub async fn open(&self, args: OpenWebPageArgs) -> ToolResult<Value> {
        let url = Url::parse(args.url.trim()).map_err(|e| {
            ToolError::invalid(format!("field `url` is not a URL ({e}): {:?}", args.url))
        })?;
        self.web.client.policy().check_url(&url)?;
        let kind = args.extract.unwrap_or_default();
        let format = args.format.unwrap_or_default();
        let loaded = match args.mode.unwrap_or_default() {
            FetchMode::Browser => self.render(&url, kind, format, None).await?,
            mode => {
                let fetched = self.web.client.get(&url).await?;
                match from_http(fetched, kind, format, mode == FetchMode::Auto).await? {
                    Ok(loaded) => loaded,
                    Err(why) => self.render(&url, kind, format, Some(why)).await?,
                }
            }
        };
        let budget = args.max_tokens.unwrap_or(paging::DEFAULT_MAX_TOKENS).max(1);
        let slice = slice_text(&loaded.extracted.content, budget, args.cursor.as_deref())?;
        let mut result = json!({
            "url": url.as_str(),
            "final_url": loaded.final_url.as_str(),
            "status": loaded.status,
            "title": loaded.extracted.title,
            "content": slice.content,
            "content_length": loaded.extracted.content.chars().count(),
            "truncated": slice.truncated || loaded.body_truncated,
            "next_cursor": slice.next_cursor,
            "via": loaded.via,
            "extract": kind,
            "format": format,
        });
        let extras: [(&str, Value); 4] = [
            ("why", json!(loaded.why)),
            (
                "body_truncated",
                json!(loaded.body_truncated.then_some(true)),
            ),
            ("article", json!(loaded.extracted.article)),
            ("structured", json!(loaded.extracted.structured)),
        ];
        for (key, value) in extras {
            if !value.is_null() {
                result[key] = value;
            }
        }
        Ok(result)
    }

    /// Renders `url` in a tab of the tool's own browser session and extracts from the live DOM.
    async fn render(
        &self,
        url: &Url,
        kind: ExtractKind,
        format: TextFormat,
        why: Option<String>,
    ) -> ToolResult<Loaded> {
        self.web.client.check_target(url).await?;
        let timeout = Duration::from_millis(self.config.navigation_timeout_ms);
        let mut session = self.browser.session(RENDER_SESSION).await?;
        let tab = session.open_tab("about:blank").await?;
        let tab_id = tab.id.clone();
        let rendered = async {
            let arrival = tab
                .navigate(Destination::Url(url.to_string()), None, timeout)
                .await?;
            let html = tab.content(&Scope::Page, Form::Html).await?;
            let final_url = Url::parse(&tab.url().await).unwrap_or_else(|_| url.clone());
            Ok::<_, ToolError>((arrival.status, html, final_url))
        }
        .await;
        // The tab is closed whatever happened, so failed renders do not pile up.
        let _ = session.close_tab(&tab_id).await;
        let (status, html, final_url) = rendered?;
        let base = final_url.clone();
        let extracted =
            tokio::task::spawn_blocking(move || extract::extract(&html, &base, kind, format))
                .await
                .map_err(|e| ToolError::internal(format!("extraction failed: {e}")))?;
        Ok(Loaded {
            final_url,
            status: status.and_then(|s| u16::try_from(s).ok()),
            extracted,
            via: "browser",
            why: Some(why.unwrap_or_else(|| "mode=browser".into())),
            body_truncated: false,
        })
    }
}

impl PageLoader for Fetcher {
    fn load(&self, url: String, options: Value) -> BoxFuture<'static, ToolResult<Value>> {
        let fetcher = self.clone();
        Box::pin(async move {
            let mut args = options;
            if let Value::Object(map) = &mut args {
                map.retain(|key, _| {
                    ["extract", "format", "mode", "max_tokens"].contains(&key.as_str())
                });
            }
            args["url"] = json!(url);
            let args: OpenWebPageArgs = serde_json::from_value(args)
                .map_err(|e| ToolError::invalid(format!("crawl options: {e}")))?;
            fetcher.open(args).await
        })
    }
}

/// Extracts from an HTTP response; `Err(why)` when `escalate` and the page needs a browser.
async fn from_http(
    fetched: Fetched,
    kind: ExtractKind,
    format: TextFormat,
    escalate: bool,
) -> ToolResult<Result<Loaded, String>> {
    let mime = fetched.mime();
    let status = Some(fetched.status);
    let body_truncated = fetched.truncated;
    let final_url = fetched.final_url.clone();
    let html = match content_class(&mime, &fetched.body) {
        ContentClass::Html => fetched.text(true),
        ContentClass::Text => {
            let text = fetched.text(false);
            return Ok(Ok(Loaded {
                final_url,
                status,
                extracted: Extracted {
                    content: text,
                    ..Extracted::default()
                },
                via: "http",
                why: None,
                body_truncated,
            }));
        }
        ContentClass::Binary => return Err(not_a_page(&fetched.final_url, &mime)),
    };
    let base = final_url.clone();
    let (extracted, why) = tokio::task::spawn_blocking(move || {
        let why = escalate.then(|| shell::needs_browser(&html)).flatten();
        let extracted = why
            .is_none()
            .then(|| extract::extract(&html, &base, kind, format));
        (extracted, why)
    })
    .await
    .map_err(|e| ToolError::internal(format!("extraction failed: {e}")))?;
    Ok(match (extracted, why) {
        (Some(extracted), _) => Ok(Loaded {
            final_url,
            status,
            extracted,
            via: "http",
            why: None,
            body_truncated,
        }),
        (None, why) => Err(why.unwrap_or_default()),
    })
}

enum ContentClass {
    Html,
    Text,
    Binary,
}

/// What a response is, by its media type, or by sniffing when the server did not say.
fn content_class(mime: &str, body: &[u8]) -> ContentClass {
    match mime {
        "text/html" | "application/xhtml+xml" => ContentClass::Html,
        "" => {
            let start = String::from_utf8_lossy(&body[..body.len().min(512)]).to_ascii_lowercase();
            if start.contains("<html") || start.contains("<!doctype html") {
                ContentClass::Html
            } else if body.iter().take(1024).any(|&b| b == 0) {
                ContentClass::Binary
            } else {
                ContentClass::Text
            }
        }
        text if text.starts_with("text/")
            || text.ends_with("json")
            || text.ends_with("+xml")
            || text == "application/xml"
            || text == "application/javascript" =>
        {
            ContentClass::Text
        }
        _ => ContentClass::Binary,
    }
}

fn not_a_page(url: &Url, mime: &str) -> ToolError {
    let what = match mime {
        "application/pdf" => "a PDF document",
        m if m.starts_with("image/") => "an image",
        m if m.starts_with("video/") || m.starts_with("audio/") => "media",
        _ => "binary data",
    };
    ToolError::new(
        ErrorCode::Upstream,
        format!("{url} is {what} ({mime}), not a web page; open_web_page reads HTML and text"),
    )
    .with_hint("open it with browser_navigate to view or download it")
}
