//! The pages a crawler may go on to from an HTML page: every link (`a`, `area`), the canonical
//! URL and the next page (`rel=next`), with the link's text. Found by html5ever's tokenizer
//! alone (no tree is built: a site crawl reads every page's links besides its content, and a
//! second full parse cost a third of its throughput), with script, style and other raw-text
//! elements kept raw as the HTML parser keeps them, so that markup inside a script is no link.

use std::cell::RefCell;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{
    BufferQueue, Tag, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer,
};
use url::Url;

/// The longest link text kept (a map's title).
const TEXT_CHARS: usize = 200;

/// Every link target of `html` (absolute, resolved against its `<base href>` or `base`) with
/// the link's text (empty for `link` and `area`), in page order; `rel=nofollow` links left out.
pub fn link_targets(html: &str, base: &Url) -> Vec<(String, String)> {
    let tokenizer = Tokenizer::new(Links::default(), Default::default());
    let input = BufferQueue::default();
    input.push_back(StrTendril::from_slice(html));
    let _ = tokenizer.feed(&input);
    tokenizer.end();
    let found = tokenizer.sink.found.take();
    let base = tokenizer
        .sink
        .base
        .take()
        .and_then(|href| base.join(&href).ok())
        .unwrap_or_else(|| base.clone());
    found
        .into_iter()
        .filter_map(|(href, text)| {
            let href = href.trim();
            if href.is_empty() || href.starts_with('#') {
                return None;
            }
            let url = base.join(href).ok()?;
            matches!(url.scheme(), "http" | "https").then(|| (url.to_string(), text))
        })
        .collect()
}

/// What the tokenizer found so far.
#[derive(Default)]
struct Links {
    /// (href as written, link text).
    found: RefCell<Vec<(String, String)>>,
    /// The first `<base href>`.
    base: RefCell<Option<String>>,
    /// The index in `found` of the `<a>` whose text is being read.
    open: RefCell<Option<usize>>,
}

impl Links {
    fn start(&self, tag: &Tag) {
        let attr = |name: &str| {
            tag.attrs
                .iter()
                .find(|a| &*a.name.local == name)
                .map(|a| a.value.to_string())
        };
        let rel = attr("rel").unwrap_or_default().to_ascii_lowercase();
        let rels = || rel.split_ascii_whitespace();
        match &*tag.name {
            "base" if self.base.borrow().is_none() => *self.base.borrow_mut() = attr("href"),
            "a" | "area" | "link" => {
                let Some(href) = attr("href") else { return };
                let wanted = match &*tag.name {
                    "link" => rels().any(|r| r == "canonical" || r == "next"),
                    _ => !rels().any(|r| r == "nofollow"),
                };
                if wanted {
                    let mut found = self.found.borrow_mut();
                    if &*tag.name == "a" && !tag.self_closing {
                        *self.open.borrow_mut() = Some(found.len());
                    }
                    found.push((href, String::new()));
                }
            }
            _ => {}
        }
    }

    fn text(&self, text: &str) {
        let Some(at) = *self.open.borrow() else {
            return;
        };
        let mut found = self.found.borrow_mut();
        let label = &mut found[at].1;
        if label.chars().count() < TEXT_CHARS {
            let words = text.split_whitespace();
            for word in words {
                if !label.is_empty() {
                    label.push(' ');
                }
                label.push_str(word);
            }
            if label.chars().count() > TEXT_CHARS {
                *label = label.chars().take(TEXT_CHARS).collect();
            }
        }
    }
}

impl TokenSink for Links {
    type Handle = ();

    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        match token {
            Token::TagToken(tag) if tag.kind == TagKind::StartTag => {
                self.start(&tag);
                // As the tree builder would: these elements' content is text, not markup.
                return match &*tag.name {
                    "script" => TokenSinkResult::RawData(RawKind::ScriptData),
                    "style" | "xmp" | "iframe" | "noembed" | "noframes" => {
                        TokenSinkResult::RawData(RawKind::Rawtext)
                    }
                    "textarea" | "title" => TokenSinkResult::RawData(RawKind::Rcdata),
                    _ => TokenSinkResult::Continue,
                };
            }
            Token::TagToken(tag) if &*tag.name == "a" => *self.open.borrow_mut() = None,
            Token::CharacterTokens(text) => self.text(&text),
            _ => {}
        }
        TokenSinkResult::Continue
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_canonical_and_next_are_found_and_scripts_are_not_markup() {
        let html = r##"<html><head><base href="https://example.com/docs/">
            <link rel="canonical" href="/docs/intro"><link rel="stylesheet" href="a.css">
            <link rel="next" href="page-2"><title><a href="/not-a-link"></title>
            <script>var s = '<a href="/from-script">x</a>';</script></head>
            <body><a href="guide">The <b>guide</b>
            here</a><a href="/ad" rel="sponsored nofollow">Ad</a><a href="#top">Top</a>
            <a href="mailto:a@example.com">Mail</a><map><area href="/area" alt="A"></map>
            </body></html>"##;
        let base = Url::parse("https://example.com/").unwrap();
        let found = link_targets(html, &base);
        let urls: Vec<&str> = found.iter().map(|(url, _)| url.as_str()).collect();
        assert_eq!(
            urls,
            [
                "https://example.com/docs/intro",
                "https://example.com/docs/page-2",
                "https://example.com/docs/guide",
                "https://example.com/area",
            ]
        );
        assert_eq!(found[2].1, "The guide here");
    }
}
