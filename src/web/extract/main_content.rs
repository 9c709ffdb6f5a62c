//! The main content of an article page: dom_smoothie (a Readability.js port) finds the article
//! and its metadata; `prune` then removes the boilerplate Readability keeps inside it.

use dom_smoothie::{Config, Readability, TextMode};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use url::Url;

/// Article metadata found alongside the main content.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct Article {
    pub title: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub byline: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub published_time: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub site_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub excerpt: Option<String>,
}

/// The article's metadata and its content as HTML. Falls back to the whole body when no
/// article can be found (a home page, a list), so something readable always comes back.
pub fn extract(html: &str, base: &Url) -> (Article, String) {
    let config = Config {
        text_mode: TextMode::Raw,
        // Class names let `prune` recognise furniture; Markdown drops them anyway.
        keep_classes: true,
        ..Config::default()
    };
    let parsed = Readability::new(html, Some(base.as_str()), Some(config))
        .and_then(|mut readability| readability.parse());
    match parsed {
        Ok(found) => {
            let article = Article {
                title: super::normalize_whitespace(&found.title),
                byline: found.byline.map(|b| super::normalize_whitespace(&b)),
                published_time: found.published_time,
                site_name: found.site_name,
                language: found.lang,
                excerpt: found.excerpt,
            };
            let content = dom_query::Document::fragment(found.content);
            super::prune::prune(&content);
            (article, content.html().to_string())
        }
        Err(_) => {
            let page = super::outline::full_page(html, base);
            let article = Article {
                title: page.title,
                ..Article::default()
            };
            (article, page.body_html)
        }
    }
}
