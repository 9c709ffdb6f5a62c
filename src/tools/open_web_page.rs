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
in the browser by itself when plain HTTP gets a JavaScript shell. PDFs, Word, Excel, PowerPoint, \
OpenDocument, EPUB and CSV files read like pages. extract=json returns `data`: with schema = \
{base, fields} (CSS selectors: base picks repeated items, each field a selector or \
{selector, attr, all, fields}) at DOM speed; with schema = a JSON Schema, the configured model \
reads the page into it, or without a model the page's JSON-LD, microdata and Open Graph fill it; \
a spreadsheet's rows come as objects by header. Long pages and sheets are paged: pass \
next_cursor back as cursor.";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenWebPageArgs {
    /// Page URL.
    pub url: String,
    // Default main (no schema description: the tool list's size).
    pub extract: Option<ExtractKind>,
    // Default markdown.
    pub format: Option<TextFormat>,
    // Default auto.
    pub mode: Option<FetchMode>,
    /// JSON Schema or {base, fields}.
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub schema: Option<serde_json::Value>,
    /// Budget (default 4000).
    #[schemars(range(min = 1))]
    pub max_tokens: Option<usize>,
    pub cursor: Option<String>,
    /// Mark page text.
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
    const DESCRIPTION: &'static str = "Read a page, PDF or document without a browser: content, links, outline or JSON data; paged.";

    async fn run(&self, call: &mut Call<'_>, args: OpenWebPageArgs) -> ToolResult<Page> {
        let options = PageOptions {
            extract: args.extract.unwrap_or_default(),
            format: args.format.unwrap_or_default(),
            mode: args.mode.unwrap_or_default(),
            max_tokens: args.max_tokens,
            ..PageOptions::default()
        }
        .with_data(args.schema, args.extract.is_some())?;
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
