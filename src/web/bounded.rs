//! HTML parsed as a stranger may write it: no deeper than `MAX_DEPTH` open elements. A page of
//! 20,000 nested tables makes html5ever's scope checks quadratic (each start tag scans the stack
//! of open elements) and every walker after it recurse 20,000 levels. So the tokens reach the
//! tree builder through `Capped`, which leaves out a start tag met at `MAX_DEPTH` and the whole
//! subtree it opens, and counts what it left out. Blink stops nesting at 512 too; there it
//! flattens, here the subtree is skipped: flattened, a hidden container's children would lose
//! the `hidden` or `style` that hides them, and a hidden link would be read.
//!
//! Everything that parses a page goes through `document`, `fragment` or `shallow` (for the
//! crates that parse a string themselves: htmd, dom_smoothie).

use std::borrow::Cow;
use std::cell::Cell;

use dom_query::Document;
use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{
    BufferQueue, Tag, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};
use html5ever::tree_builder::{Tracer, TreeBuilder, TreeBuilderOpts, TreeSink, create_element};
use html5ever::{LocalName, QualName, TokenizerResult, local_name, ns};

/// Deepest nesting of elements read; what opens below it is left out.
pub const MAX_DEPTH: usize = 512;

/// A page parsed within `MAX_DEPTH`, and how many elements were left out for being deeper.
pub struct Parsed {
    pub document: Document,
    pub too_deep: usize,
}

/// `html` parsed as a whole document, as `Document::from` parses it.
pub fn document(html: &str) -> Parsed {
    let builder = TreeBuilder::new(Document::default(), options(false));
    run(builder, TokenizerOpts::default(), html)
}

/// `html` parsed as a fragment in a `body`, as `Document::fragment` parses it.
pub fn fragment(html: &str) -> Parsed {
    let sink = Document::fragment_sink();
    let body = QualName::new(None, ns!(html), local_name!("body"));
    let context = create_element(&sink, body, Vec::new());
    let builder = TreeBuilder::new_for_fragment(sink, context, None, options(true));
    let tokenizer = TokenizerOpts {
        initial_state: Some(builder.tokenizer_state_for_context_elem(false)),
        ..TokenizerOpts::default()
    };
    run(builder, tokenizer, html)
}

/// `html` as it is when it cannot nest deeper than `MAX_DEPTH`, else parsed within it and written
/// out again: for the crates that take a string and walk it recursively.
pub fn shallow(html: &str) -> (Cow<'_, str>, usize) {
    if !may_nest_deep(html) {
        return (Cow::Borrowed(html), 0);
    }
    let parsed = document(html);
    if parsed.too_deep == 0 {
        return (Cow::Borrowed(html), 0);
    }
    (
        Cow::Owned(parsed.document.html().to_string()),
        parsed.too_deep,
    )
}

/// dom_query's own parsing options (scripting off: `noscript` is read as markup).
fn options(fragment: bool) -> TreeBuilderOpts {
    TreeBuilderOpts {
        scripting_enabled: false,
        drop_doctype: fragment,
        ..TreeBuilderOpts::default()
    }
}

fn run(
    builder: TreeBuilder<dom_query::NodeId, Document>,
    opts: TokenizerOpts,
    html: &str,
) -> Parsed {
    let tokenizer = Tokenizer::new(Capped::new(builder), opts);
    let input = BufferQueue::default();
    input.push_back(StrTendril::from(html));
    // A script or an encoding indicator pauses the tokenizer; neither changes a parse here.
    while !matches!(tokenizer.feed(&input), TokenizerResult::Done) {}
    tokenizer.end();
    let capped = tokenizer.sink;
    Parsed {
        too_deep: capped.too_deep.get(),
        document: capped.builder.sink,
    }
}

/// The tree builder behind a depth check on every start tag.
struct Capped<S: TreeSink> {
    builder: TreeBuilder<S::Handle, S>,
    /// Inside a subtree being left out: how many of its elements are open.
    skipping: Cell<usize>,
    /// Elements left out.
    too_deep: Cell<usize>,
}

impl<S: TreeSink> Capped<S>
where
    S::Handle: Clone,
{
    fn new(builder: TreeBuilder<S::Handle, S>) -> Self {
        Self {
            builder,
            skipping: Cell::new(0),
            too_deep: Cell::new(0),
        }
    }

    /// The tree builder's open elements, counted with the formatting elements it may reopen (an
    /// upper bound: html5ever keeps its stack private but lets a tracer visit it).
    fn depth(&self) -> usize {
        let counter = Counter::<S::Handle>::default();
        self.builder.trace_handles(&counter);
        counter.count.get()
    }

    /// A token inside a subtree being left out: only its tags' nesting is followed, and a raw
    /// text element's content is tokenized as the tree builder would have asked.
    fn skip(&self, token: Token) -> TokenSinkResult<S::Handle> {
        let Token::TagToken(tag) = token else {
            return TokenSinkResult::Continue;
        };
        match tag.kind {
            TagKind::StartTag if opens(&tag) => {
                self.skipping.set(self.skipping.get() + 1);
                self.too_deep.set(self.too_deep.get() + 1);
                raw_text(&tag.name)
            }
            TagKind::StartTag => TokenSinkResult::Continue,
            TagKind::EndTag => {
                self.skipping.set(self.skipping.get().saturating_sub(1));
                TokenSinkResult::Continue
            }
        }
    }
}

impl<S: TreeSink> TokenSink for Capped<S>
where
    S::Handle: Clone,
{
    type Handle = S::Handle;

    fn process_token(&self, token: Token, line_number: u64) -> TokenSinkResult<S::Handle> {
        let deep = match &token {
            Token::EOFToken => false,
            _ if self.skipping.get() > 0 => true,
            Token::TagToken(tag) => {
                tag.kind == TagKind::StartTag && opens(tag) && self.depth() >= MAX_DEPTH
            }
            _ => false,
        };
        if deep {
            return self.skip(token);
        }
        self.builder.process_token(token, line_number)
    }

    fn end(&self) {
        self.builder.end();
    }

    fn adjusted_current_node_present_but_not_in_html_namespace(&self) -> bool {
        self.builder
            .adjusted_current_node_present_but_not_in_html_namespace()
    }
}

/// Counts the handles a tree builder holds.
struct Counter<H> {
    count: Cell<usize>,
    handle: std::marker::PhantomData<H>,
}

impl<H> Default for Counter<H> {
    fn default() -> Self {
        Self {
            count: Cell::new(0),
            handle: std::marker::PhantomData,
        }
    }
}

impl<H> Tracer for Counter<H> {
    type Handle = H;

    fn trace_handle(&self, _: &H) {
        self.count.set(self.count.get() + 1);
    }
}

/// Whether a start tag opens an element that later tokens nest in (`<div/>` does in HTML).
fn opens(tag: &Tag) -> bool {
    !is_void(&tag.name)
}

fn is_void(name: &LocalName) -> bool {
    is_void_name(name.as_bytes())
}

/// Whether a tag name (lower case) names a void element.
fn is_void_name(name: &[u8]) -> bool {
    matches!(
        name,
        b"area"
            | b"base"
            | b"br"
            | b"col"
            | b"embed"
            | b"hr"
            | b"img"
            | b"input"
            | b"link"
            | b"meta"
            | b"source"
            | b"track"
            | b"wbr"
            | b"param"
            | b"keygen"
            | b"frame"
            | b"basefont"
            | b"bgsound"
    )
}

/// How the tokenizer reads a left-out element's content: as the tree builder would ask (with
/// scripting off), so a `<div>` in a skipped script's text is not a tag.
fn raw_text<H>(name: &LocalName) -> TokenSinkResult<H> {
    match name.as_ref() {
        "script" => TokenSinkResult::RawData(RawKind::ScriptData),
        "style" | "xmp" | "iframe" | "noembed" | "noframes" => {
            TokenSinkResult::RawData(RawKind::Rawtext)
        }
        "textarea" | "title" => TokenSinkResult::RawData(RawKind::Rcdata),
        "plaintext" => TokenSinkResult::Plaintext,
        _ => TokenSinkResult::Continue,
    }
}

/// Whether `html` might nest deeper than `MAX_DEPTH`: its start tags less its end tags never
/// reach a quarter of it (a table's implied `tbody` and `tr` and reopened formatting elements
/// make the tree deeper than its tags). A byte scan, much cheaper than a parse.
fn may_nest_deep(html: &str) -> bool {
    let bytes = html.as_bytes();
    let (mut depth, mut at) = (0usize, 0usize);
    while let Some(found) = memchr_lt(&bytes[at..]) {
        at += found + 1;
        match bytes.get(at) {
            Some(b'/') => depth = depth.saturating_sub(1),
            Some(b'!') if bytes[at..].starts_with(b"!--") => {
                at = find(bytes, at, b"-->").unwrap_or(bytes.len());
            }
            Some(c) if c.is_ascii_alphabetic() => {
                let name_end = bytes[at..]
                    .iter()
                    .position(|b| !b.is_ascii_alphanumeric())
                    .map_or(bytes.len(), |n| at + n);
                let mut name = [0u8; 8];
                let length = name_end - at;
                // Void names are short; a longer name opens an element.
                let void = length <= name.len() && {
                    name[..length].copy_from_slice(&bytes[at..name_end]);
                    name[..length].make_ascii_lowercase();
                    is_void_name(&name[..length])
                };
                if !void {
                    depth += 1;
                    if depth >= MAX_DEPTH / 4 {
                        return true;
                    }
                }
            }
            _ => {}
        }
    }
    false
}

fn memchr_lt(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'<')
}

fn find(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    bytes[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|n| from + n + needle.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(tag: &str, levels: usize, inner: &str) -> String {
        format!(
            "<html><body><p>top</p>{}{inner}{}<p>after</p></body></html>",
            format!("<{tag}>").repeat(levels),
            format!("</{tag}>").repeat(levels)
        )
    }

    fn depth_of(document: &Document) -> usize {
        let mut deepest = 0;
        let mut stack = vec![(document.root(), 0usize)];
        while let Some((node, depth)) = stack.pop() {
            deepest = deepest.max(depth);
            stack.extend(node.children().into_iter().map(|c| (c, depth + 1)));
        }
        deepest
    }

    #[test]
    fn a_shallow_page_parses_as_dom_query_parses_it() {
        let html = "<!doctype html><meta charset=utf-8><title>T</title><script>a<b</script>\
                    <table><td>cell<p>one<b>bold<p>two</table><p>after";
        let parsed = document(html);
        assert_eq!(parsed.too_deep, 0);
        assert_eq!(parsed.document.html(), Document::from(html).html());
        let parsed = fragment("<li>a<li>b<script>if (a<b) {}</script>");
        assert_eq!(
            parsed.document.html(),
            Document::fragment("<li>a<li>b<script>if (a<b) {}</script>").html()
        );
    }

    #[test]
    fn deep_nesting_is_cut_at_the_limit_and_counted() {
        let html = nested("div", 20_000, "<a href=/deep>deep</a>");
        let parsed = document(&html);
        assert!(depth_of(&parsed.document) <= MAX_DEPTH + 2);
        assert!(parsed.too_deep > 19_000, "{}", parsed.too_deep);
        let text = parsed.document.select("body").text();
        assert!(text.contains("top") && text.contains("after"), "{text}");
        assert!(
            !text.contains("deep"),
            "the subtree below the limit is left out"
        );
        let tables = nested("table", 20_000, "x");
        assert!(depth_of(&document(&tables).document) <= MAX_DEPTH + 4);
    }

    #[test]
    fn a_script_in_a_skipped_subtree_does_not_open_tags() {
        let html = nested("div", 600, "<script>'<div><div><div>'</script>");
        let parsed = document(&html);
        assert!(parsed.document.select("body").text().contains("after"));
        assert_eq!(parsed.document.select("body > p").length(), 2);
    }

    #[test]
    fn shallow_keeps_ordinary_html_as_it_is() {
        let ordinary = "<div><p>a<br><img src=x><p>b</div>";
        assert!(matches!(shallow(ordinary), (Cow::Borrowed(_), 0)));
        let html = nested("section", 5_000, "x");
        let (deep, cut) = shallow(&html);
        assert!(cut > 4_000);
        assert!(depth_of(&Document::from(deep.as_ref())) <= MAX_DEPTH + 2);
    }
}
