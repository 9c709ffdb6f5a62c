//! A site's own Markdown (`text/markdown` answers): read as it is where it already is what was
//! asked for, else through its HTML rendering; its links and its title.

use url::Url;

use crate::web::extract::{self, ExtractKind, Extracted, TextFormat};

/// What to read of a site's own Markdown: the main content or the whole page in Markdown is
/// the document as the site wrote it; other kinds and plain text come from its HTML rendering.
pub(super) fn from_markdown(
    markdown: String,
    base: &Url,
    kind: ExtractKind,
    format: TextFormat,
) -> Extracted {
    let title = markdown_title(&markdown);
    if matches!(kind, ExtractKind::Main | ExtractKind::Full) && format == TextFormat::Markdown {
        return Extracted {
            title,
            content: markdown,
            ..Extracted::default()
        };
    }
    let mut body = String::new();
    pulldown_cmark::html::push_html(
        &mut body,
        pulldown_cmark::Parser::new_ext(&markdown, pulldown_cmark::Options::all()),
    );
    let html = format!(
        "<!doctype html><html><head><title>{}</title></head><body><main>{body}</main></body></html>",
        crate::web::escape_html(&title)
    );
    Extracted {
        title,
        ..extract::extract(&html, base, kind, format)
    }
}

/// The links of a Markdown document, absolute, with their text.
pub fn markdown_links(markdown: &str, base: &Url) -> Vec<(String, String)> {
    use pulldown_cmark::{Event, Tag, TagEnd};
    let mut links = Vec::new();
    // The link being read: its URL and the text so far.
    let mut open: Option<(String, String)> = None;
    for event in pulldown_cmark::Parser::new(markdown) {
        match event {
            Event::Start(Tag::Link { dest_url, .. }) => {
                open = base
                    .join(&dest_url)
                    .ok()
                    .map(|u| (u.to_string(), String::new()));
            }
            Event::Text(text) | Event::Code(text) => {
                if let Some((_, label)) = &mut open {
                    label.push_str(&text);
                }
            }
            Event::End(TagEnd::Link) => links.extend(open.take()),
            _ => {}
        }
    }
    links
}

/// A Markdown document's title: its first heading, else its first line.
fn markdown_title(markdown: &str) -> String {
    let lines = || markdown.lines().map(str::trim).filter(|l| !l.is_empty());
    lines()
        .find_map(|line| {
            line.strip_prefix('#')
                .map(|h| h.trim_start_matches('#').trim())
        })
        .or_else(|| lines().next())
        .unwrap_or_default()
        .chars()
        .take(200)
        .collect()
}
