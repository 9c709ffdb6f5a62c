//! `open_web_page`: read a page without driving a browser — `pages` fetches, extracts and pages
//! it, rendering it in the browser only when HTTP alone cannot show it.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Call, Scope, Tool};
use crate::error::ToolResult;
use crate::pages::{FetchMode, Page, PageOptions};
use crate::web::extract::{ExtractKind, TextFormat};

const GUIDE: &str = "open_web_page reads a URL without a browser: the main article text as \
Markdown by default (extract=full|links|images|structured for other views). It renders the page \
in the browser by itself when plain HTTP gets a JavaScript shell. Long pages are paged: pass \
next_cursor back as cursor.";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenWebPageArgs {
    /// Page URL.
    pub url: String,
    /// Default main.
    pub extract: Option<ExtractKind>,
    /// Default markdown.
    pub format: Option<TextFormat>,
    /// Default auto.
    pub mode: Option<FetchMode>,
    /// Budget (default 4000).
    #[schemars(range(min = 1))]
    pub max_tokens: Option<usize>,
    pub cursor: Option<String>,
    /// Page text in marked blocks.
    pub boundaries: Option<bool>,
}

shared_fields!(OpenWebPageArgs {});

pub struct OpenWebPage;

#[async_trait]
impl Tool for OpenWebPage {
    type Args = OpenWebPageArgs;
    type Output = Page;
    const NAME: &'static str = "open_web_page";
    const GUIDE: &'static str = GUIDE;
    const EXAMPLE: &'static str = r#"{"url": "https://example.com/article"}"#;
    const SCOPE: Scope = Scope::Web;
    const TITLE: &'static str = "Read a web page";
    const EFFECTS: crate::tools::Effects = crate::tools::Effects::READS_WEB;
    const DESCRIPTION: &'static str = "Read a web page or PDF without a browser: main content, whole page, links, images or outline; paged.";

    async fn run(&self, call: &mut Call<'_>, args: OpenWebPageArgs) -> ToolResult<Page> {
        let options = PageOptions {
            extract: args.extract.unwrap_or_default(),
            format: args.format.unwrap_or_default(),
            mode: args.mode.unwrap_or_default(),
            max_tokens: args.max_tokens,
            links: false,
        };
        let pages = &call.ctx.pages;
        let mut page = pages
            .open(call.tenant(), &args.url, &options, args.cursor.as_deref())
            .await?;
        if call.bounded(args.boundaries) && !page.content.is_empty() {
            page.content = crate::pages::paging::bounded(&page.content, &page.final_url);
        }
        Ok(page)
    }

    fn summary(page: &Page) -> String {
        format!("{} chars", page.content.chars().count())
    }
}
