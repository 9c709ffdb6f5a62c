//! Boilerplate Readability keeps inside an article: datelines and bylines, picture credits and
//! captions, share bars, "related"/"more from" links, breadcrumbs, newsletter boxes, contact
//! lines, author bios. Judged by class words and by the shape of the text, never by site.
//!
//! Tuned on the visible parts of the Readability and Zyte corpora (see `scripts/bench`): each
//! rule had to raise word-F1 on the Zyte pages without costing much on Readability's, whose
//! ground truth is Readability.js's own output and so keeps such furniture.

use dom_query::{Document, NodeRef};

/// Class words that mark page furniture rather than article text.
const FURNITURE_CLASS_WORDS: [&str; 44] = [
    "byline",
    "bylines",
    "author",
    "authors",
    "dateline",
    "date",
    "dates",
    "timestamp",
    "published",
    "updated",
    "credit",
    "credits",
    "caption",
    "copyright",
    "share",
    "sharing",
    "social",
    "related",
    "recommended",
    "breadcrumb",
    "breadcrumbs",
    "newsletter",
    "signup",
    "subscribe",
    "subscription",
    "promo",
    "promoted",
    "advert",
    "sponsored",
    "print",
    "reprint",
    "tools",
    "toolbar",
    "tags",
    "bio",
    "attribution",
    "popular",
    "trending",
    "donate",
    "meta",
    "rail",
    "teaser",
    "kicker",
    "sidebar",
];

/// Short blocks opening like this are captions, credits, datelines or calls to action.
const FURNITURE_OPENINGS: [&str; 34] = [
    "by ",
    "photo:",
    "photo by",
    "photograph:",
    "image:",
    "(image",
    "image copyright",
    "image caption",
    "media playback",
    "sharing is caring",
    "share this",
    "continue reading",
    "read more",
    "advertisement",
    "follow us",
    "you may also like",
    "related:",
    "related post",
    "about the author",
    "order reprints",
    "copyright",
    "©",
    "source:",
    "also on ",
    "more from ",
    "loading",
    "text size",
    "recent articles",
    "popular this week",
    "have a tip",
    "join our",
    "get the latest",
    "listen:",
    "download:",
];

/// First words of a dateline ("Updated 10:01 pm PST, Tuesday, November 19, 2019").
const DATE_WORDS: [&str; 6] = [
    "published",
    "updated",
    "posted",
    "modified",
    "originally",
    "original",
];

/// Picture credits, wherever they sit in a caption.
const CREDIT_MARKS: [&str; 8] = [
    "getty images",
    "ap photo",
    "(photo",
    "photo:",
    "image credit",
    "(reuters",
    "shutterstock",
    "photo by ",
];

/// How contact lines open ("Email Jane at jane@example.com", "Write to Al at …").
const CONTACT_OPENINGS: [&str; 6] = [
    "email ",
    "e-mail ",
    "write to ",
    "reach ",
    "contact ",
    "follow ",
];

/// A block this short (in words) can be furniture; longer ones are prose.
const SHORT_BLOCK_WORDS: usize = 16;
/// Contact lines run a little longer.
const CONTACT_BLOCK_WORDS: usize = 32;
/// Captions carrying a credit run longer still.
const CAPTION_BLOCK_WORDS: usize = 45;
/// Link-only lines ("Lakers vs Nets: NBA make final decision [VIDEO]") of this many words are
/// teasers for other pages.
const LINK_LINE_WORDS: (usize, usize) = (4, 30);
/// Share of a line's words inside links that makes it a link line.
const LINK_LINE_SHARE: f64 = 0.8;
/// A class-marked element holding more than this share of the article is a wrapper, kept.
const MAX_MARKED_SHARE: f64 = 0.3;

/// Removes furniture from an article fragment in place.
pub fn prune(doc: &Document) {
    let root = doc.root();
    let total_words = word_count(&root.text());
    let doomed: Vec<NodeRef> = root
        .descendants_it()
        .filter(|node| node.is_element() && is_furniture(node, total_words))
        .collect();
    for node in doomed {
        node.remove_from_parent();
    }
}

fn is_furniture(node: &NodeRef, total_words: usize) -> bool {
    let name = node.node_name().unwrap_or_default();
    let name = name.as_ref();
    if matches!(name, "nav" | "figcaption") {
        return true;
    }
    if matches!(name, "html" | "head" | "body") {
        return false;
    }
    let marked = has_furniture_class(node);
    if !marked && !is_text_block(name) {
        return false;
    }
    let text = node.text();
    let words = word_count(&text);
    if words == 0 {
        return false;
    }
    if marked && (words as f64) <= (total_words as f64) * MAX_MARKED_SHARE {
        return true;
    }
    match name {
        "ul" | "ol" => is_headline_list(node, words),
        "time" => words <= SHORT_BLOCK_WORDS,
        _ => {
            is_link_line(node, name, words)
                || is_credit(name, &text, words)
                || (words <= SHORT_BLOCK_WORDS && reads_like_furniture(&text))
                || (words <= CONTACT_BLOCK_WORDS && is_contact_line(&text))
        }
    }
}

fn is_text_block(name: &str) -> bool {
    matches!(
        name,
        "p" | "div"
            | "span"
            | "li"
            | "ul"
            | "ol"
            | "section"
            | "aside"
            | "header"
            | "footer"
            | "figure"
            | "time"
            | "h2"
            | "h3"
            | "h4"
            | "h5"
            | "h6"
            | "em"
            | "strong"
            | "small"
    )
}

fn has_furniture_class(node: &NodeRef) -> bool {
    // Ids are often slugs of headings ("sharing-with-a-team"), so only classes count.
    node.attr("class").is_some_and(|classes| {
        words_of_identifier(&classes).any(|word| FURNITURE_CLASS_WORDS.contains(&word.as_str()))
    })
}

/// Splits `related-posts__item authorBio` into related, posts, item, author, bio.
fn words_of_identifier(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|part| !part.is_empty())
        .flat_map(|part| {
            let mut words = Vec::new();
            let mut current = String::new();
            for c in part.chars() {
                if c.is_ascii_uppercase() && !current.is_empty() {
                    words.push(std::mem::take(&mut current));
                }
                current.push(c.to_ascii_lowercase());
            }
            words.push(current);
            words
        })
}

/// A list of long links: related stories. Short-link lists are tables of contents, "see also"
/// lists and references, which articles keep.
fn is_headline_list(node: &NodeRef, words: usize) -> bool {
    let items = node.element_children().len();
    items >= 3
        && linked_words(node) as f64 / words as f64 > LINK_LINE_SHARE
        && (6..=20).contains(&(words / items))
}

/// A paragraph, item or heading that is (almost) all link: a teaser for another page.
fn is_link_line(node: &NodeRef, name: &str, words: usize) -> bool {
    matches!(name, "p" | "li" | "h2" | "h3" | "h4" | "h5" | "h6")
        && (LINK_LINE_WORDS.0..=LINK_LINE_WORDS.1).contains(&words)
        && linked_words(node) as f64 >= words as f64 * LINK_LINE_SHARE
}

fn is_credit(name: &str, text: &str, words: usize) -> bool {
    if words > CAPTION_BLOCK_WORDS || !matches!(name, "p" | "div" | "span" | "small" | "em") {
        return false;
    }
    let lower = text.to_lowercase();
    CREDIT_MARKS.iter().any(|mark| lower.contains(mark))
}

/// Words inside links below `node`.
fn linked_words(node: &NodeRef) -> usize {
    node.descendants_it()
        .filter(|n| n.node_name().as_deref() == Some("a"))
        .map(|a| word_count(&a.text()))
        .sum()
}

fn reads_like_furniture(text: &str) -> bool {
    let lower = text.trim().to_lowercase();
    if FURNITURE_OPENINGS
        .iter()
        .any(|opening| lower.starts_with(opening))
    {
        return true;
    }
    // A dateline opens with its verb: "Updated 10:01 pm", "Published: Nov 19".
    let first_word = lower
        .split(|c: char| !c.is_alphanumeric())
        .find(|w| !w.is_empty());
    lower.chars().any(|c| c.is_ascii_digit())
        && first_word.is_some_and(|word| DATE_WORDS.contains(&word))
}

/// "Email Jane at jane@example.com or follow her @jane", "Follow him on Twitter".
fn is_contact_line(text: &str) -> bool {
    let lower = text.trim().to_lowercase();
    let has_address = lower.split_whitespace().any(|word| {
        word.split_once('@')
            .is_some_and(|(user, domain)| !user.is_empty() && domain.contains('.'))
    });
    (has_address
        && CONTACT_OPENINGS
            .iter()
            .any(|opening| lower.starts_with(opening)))
        || (lower.starts_with("follow ") && lower.contains(" on twitter"))
}

fn word_count(text: &str) -> usize {
    text.split_whitespace().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pruned(html: &str) -> String {
        let doc = Document::fragment(html.replace("><", "> <"));
        prune(&doc);
        doc.root()
            .text()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn furniture_goes_and_prose_stays() {
        let body = "The council voted on Tuesday to approve the new budget after a long debate about schools and roads in the district.";
        let html = format!(
            "<div><p class=\"article__byline\">By Jane Doe</p><p>Updated 10:01 pm PST, Nov 19, 2019</p>\
             <p>{body}</p><figure><img src=a.jpg><figcaption>A road</figcaption></figure>\
             <p>Photo: John Smith / Getty Images</p><p>{body}</p>\
             <ul><li><a href=/a>Ten things you never knew about budgets in cities</a></li>\
             <li><a href=/b>Why the roads in this district keep breaking every winter</a></li>\
             <li><a href=/c>The schools that got the most money from the council</a></li></ul>\
             <p>Email Jane at jane@example.com or follow her on Twitter.</p></div>"
        );
        assert_eq!(pruned(&html), format!("{body} {body}"));
    }

    #[test]
    fn wrappers_and_short_link_lists_survive() {
        let body = "word ".repeat(60);
        let html = format!(
            "<div class=\"post-meta-wrapper\"><p>{body}</p></div>\
             <ul><li><a href=/a>Mozilla</a></li><li><a href=/b>Gecko</a></li><li><a href=/c>Firefox</a></li></ul>"
        );
        let text = pruned(&html);
        assert!(text.contains("Mozilla Gecko Firefox"), "{text}");
        assert!(text.starts_with("word word"), "{text}");
    }
}
