//! Whole-page views: the full body, its links, its images, and a structured outline (meta tags,
//! headings, paragraphs).

use std::collections::{BTreeMap, HashSet};

use dom_query::{Document, Selection};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use url::Url;

use super::{Extracted, normalize_whitespace};
use crate::web::bounded;

/// Elements that never hold page content.
const NON_CONTENT: &str = "script, style, noscript, template, svg, canvas, iframe, object";

/// The page title and its cleaned body.
pub struct FullPage {
    pub title: String,
    pub body_html: String,
}

/// An outline of the page: what `extract=structured` returns beside its paragraphs.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct Structured {
    /// `<meta name|property=… content=…>` pairs, first value kept.
    pub meta: BTreeMap<String, String>,
    pub headings: Vec<Heading>,
    pub paragraphs: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Heading {
    pub level: u8,
    pub text: String,
}

pub fn full_page(html: &str, base: &Url) -> FullPage {
    let doc = bounded::document(html).document;
    let base = document_base(&doc, base);
    doc.select(NON_CONTENT).remove();
    absolutize(&doc, &base);
    let body = doc.select("body");
    let body_html = if body.exists() {
        body.inner_html()
    } else {
        doc.html()
    };
    FullPage {
        title: page_title(&doc),
        body_html: body_html.to_string(),
    }
}

/// Every link as `- [text](absolute url)`, once per URL, in page order.
pub fn links(html: &str, base: &Url) -> Extracted {
    url_listing(html, base, "a[href]", |link, base| {
        let url = resolve(base, &link.attr("href").unwrap_or_default())?;
        let text = normalize_whitespace(&link.text());
        let text = if text.is_empty() {
            link.attr("title")
                .or_else(|| link.select("img[alt]").attr("alt"))
                .map(|t| normalize_whitespace(&t))
                .unwrap_or_default()
        } else {
            text
        };
        Some((format!("- [{}]({url})", escape_brackets(&text)), url))
    })
}

/// Every image as `![alt](absolute src)`, once per source, in page order.
pub fn images(html: &str, base: &Url) -> Extracted {
    url_listing(html, base, "img", |image, base| {
        let src = ["src", "data-src", "data-original"]
            .iter()
            .filter_map(|name| image.attr(name))
            .find_map(|src| resolve(base, &src))?;
        let alt = normalize_whitespace(&image.attr("alt").unwrap_or_default());
        Some((format!("![{}]({src})", escape_brackets(&alt)), src))
    })
}

/// One line per distinct URL among the elements `selector` matches; `line` gives an element's
/// line and URL (None skips it).
fn url_listing(
    html: &str,
    base: &Url,
    selector: &str,
    line: impl Fn(&Selection, &Url) -> Option<(String, String)>,
) -> Extracted {
    let bounded::Parsed {
        document: doc,
        too_deep,
    } = bounded::document(html);
    let base = document_base(&doc, base);
    let mut seen = HashSet::new();
    let lines: Vec<String> = doc
        .select(selector)
        .iter()
        .filter_map(|element| line(&element, &base))
        .filter(|(_, url)| seen.insert(url.clone()))
        .map(|(line, _)| line)
        .collect();
    Extracted {
        title: page_title(&doc),
        content: lines.join("\n"),
        too_deep: (too_deep > 0).then_some(too_deep),
        ..Extracted::default()
    }
}

/// Meta tags and headings as data; the paragraphs, one per block, as the content.
pub fn structured(html: &str) -> Extracted {
    let bounded::Parsed {
        document: doc,
        too_deep,
    } = bounded::document(html);
    let mut outline = Structured::default();
    for meta in doc.select("meta[content]").iter() {
        let key = meta
            .attr("name")
            .or_else(|| meta.attr("property"))
            .or_else(|| meta.attr("itemprop"));
        let (Some(key), Some(value)) = (key, meta.attr("content")) else {
            continue;
        };
        let value = normalize_whitespace(&value);
        if !value.is_empty() {
            outline
                .meta
                .entry(key.to_ascii_lowercase())
                .or_insert(value);
        }
    }
    doc.select(NON_CONTENT).remove();
    for heading in doc.select("h1, h2, h3, h4, h5, h6").iter() {
        let text = normalize_whitespace(&heading.text());
        if text.is_empty() {
            continue;
        }
        let level = heading
            .nodes()
            .first()
            .and_then(|n| n.node_name())
            .and_then(|name| name[1..].parse().ok())
            .unwrap_or(1);
        outline.headings.push(Heading { level, text });
    }
    let paragraphs: Vec<String> = doc
        .select("p, li, blockquote, pre, td")
        .iter()
        .filter(|block| !has_block_child(block))
        .map(|block| normalize_whitespace(&block.text()))
        .filter(|text| !text.is_empty())
        .collect();
    outline.paragraphs = paragraphs.len();
    Extracted {
        title: page_title(&doc),
        content: paragraphs.join("\n\n"),
        structured: Some(outline),
        too_deep: (too_deep > 0).then_some(too_deep),
        ..Extracted::default()
    }
}

fn has_block_child(block: &Selection) -> bool {
    block.select("p, li, blockquote, pre, td").exists()
}

/// The `<title>`, else the first `<h1>`.
fn page_title(doc: &Document) -> String {
    let title = normalize_whitespace(&doc.select("head title").text());
    if !title.is_empty() {
        return title;
    }
    normalize_whitespace(&doc.select("h1").first().text())
}

/// The URL relative links resolve against: `<base href>` when the page sets one.
fn document_base(doc: &Document, url: &Url) -> Url {
    doc.select("base[href]")
        .attr("href")
        .and_then(|href| url.join(&href).ok())
        .unwrap_or_else(|| url.clone())
}

/// An absolute http(s)/mailto URL for `href`, or None for script links and empty targets.
fn resolve(base: &Url, href: &str) -> Option<String> {
    let href = href.trim();
    if href.is_empty() || href.starts_with('#') {
        return None;
    }
    let url = base.join(href).ok()?;
    matches!(url.scheme(), "http" | "https" | "mailto" | "ftp").then(|| url.to_string())
}

/// Rewrites `a[href]` and `img[src]` to absolute URLs so Markdown links work out of context.
fn absolutize(doc: &Document, base: &Url) {
    for (selector, attr) in [("a[href]", "href"), ("img[src]", "src")] {
        for node in doc.select(selector).iter() {
            let value = node.attr(attr).unwrap_or_default();
            if let Some(url) = resolve(base, &value) {
                node.set_attr(attr, &url);
            }
        }
    }
}

fn escape_brackets(text: &str) -> String {
    text.replace('[', "\\[").replace(']', "\\]")
}
