//! What `open_web_page` (and the crawler) takes out of an HTML page: the main content with its
//! metadata, the whole page, its links, its images, or an outline — as Markdown or plain text.
//!
//! Pure functions over a string: no I/O, so the extraction benchmark times exactly this.

mod concealed;
mod links;
mod main_content;
mod outline;
mod prune;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use url::Url;

pub use links::link_targets;
pub use main_content::Article;
pub use outline::Structured;

// Which part of the page to return (no schema description of its own: the tool list's size).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExtractKind {
    #[default]
    Main,
    Full,
    Links,
    Images,
    Structured,
    Json,
}

// How text content is written (no schema description of its own).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TextFormat {
    #[default]
    Markdown,
    Text,
}

/// The result of one extraction.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Extracted {
    pub title: String,
    /// The requested part, rendered in the requested format.
    pub content: String,
    /// Article metadata (extract=main only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub article: Option<Article>,
    /// Meta tags and headings (extract=structured only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub structured: Option<Structured>,
    /// What the HTML hides from a person (`hidden`, hiding inline styles), left out:
    /// characters of text, plus one per link, image or control.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hidden_text_dropped: Option<usize>,
    /// Elements nested deeper than `bounded::MAX_DEPTH`, left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub too_deep: Option<usize>,
}

/// Extracts `kind` from `html`, resolving relative URLs against `base`; what the HTML hides
/// from a person is in none of them (links and images included).
pub fn extract(html: &str, base: &Url, kind: ExtractKind, format: TextFormat) -> Extracted {
    let visible = concealed::strip(html);
    let html = visible.html.as_deref().unwrap_or(html);
    let mut extracted = extract_visible(html, base, kind, format);
    extracted.hidden_text_dropped = (visible.dropped > 0).then_some(visible.dropped);
    extracted.too_deep = (visible.too_deep > 0).then_some(visible.too_deep);
    extracted
}

/// `html` without what it hides from a person, as `extract` reads it: for the readers of its
/// own (a selector schema's data).
pub fn shown(html: &str) -> std::borrow::Cow<'_, str> {
    match concealed::strip(html).html {
        Some(visible) => std::borrow::Cow::Owned(visible),
        None => std::borrow::Cow::Borrowed(html),
    }
}

fn extract_visible(html: &str, base: &Url, kind: ExtractKind, format: TextFormat) -> Extracted {
    match kind {
        ExtractKind::Main | ExtractKind::Json => {
            let (article, content_html) = main_content::extract(html, base);
            Extracted {
                title: article.title.clone(),
                content: render(&content_html, format),
                article: Some(article),
                ..Extracted::default()
            }
        }
        ExtractKind::Full => {
            let page = outline::full_page(html, base);
            Extracted {
                title: page.title,
                content: render(&page.body_html, format),
                ..Extracted::default()
            }
        }
        ExtractKind::Links => outline::links(html, base),
        ExtractKind::Images => outline::images(html, base),
        ExtractKind::Structured => outline::structured(html),
    }
}

/// Renders an HTML fragment as Markdown or as plain text.
fn render(html: &str, format: TextFormat) -> String {
    match format {
        TextFormat::Markdown => super::markdown::to_markdown(html),
        TextFormat::Text => {
            let text = dom_query::Document::fragment(html).formatted_text();
            super::markdown::collapse_blank_lines(&text)
        }
    }
}

/// Collapses whitespace runs to single spaces and trims.
pub fn normalize_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
