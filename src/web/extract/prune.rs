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

/// Openings that never start prose: short blocks opening like this are furniture.
const FURNITURE_PHRASES: [&str; 5] = [
    "image copyright",
    "image caption",
    "media playback",
    "(image",
    "©",
];

/// Openings of attributions ("By Jane Doe", "Photo: John Smith / Getty Images"): furniture only
/// when names follow, never for a sentence like "By noon the river had risen two metres."
const ATTRIBUTION_OPENINGS: [&str; 5] = ["by ", "photo:", "photo by ", "photograph:", "image:"];

/// Openings of labels and calls to action ("Read more", "Share this:", "Loading…"): furniture
/// only when the block is the label itself (alone, before a colon or arrow, a link, or a few
/// words that make no sentence), never for "Read more than 300 pages of testimony."
const LABEL_OPENINGS: [&str; 25] = [
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
    "print this",
    "source:",
];

/// Words that make a short block a call to sign up, whatever it opens with.
const SIGNUP_WORDS: [&str; 4] = ["newsletter", "inbox", "subscribe", "sign up"];

/// Words a list of names may hold besides the names ("By Jane Doe and John Smith for the
/// Guardian").
const NAME_PARTICLES: [&str; 19] = [
    "and", "&", "the", "of", "for", "via", "with", "de", "van", "von", "der", "den", "la", "le",
    "da", "di", "del", "du", "courtesy",
];

/// Words of times and relative dates ("10:01 pm", "3 hours ago").
const TIME_WORDS: [&str; 21] = [
    "am", "pm", "a.m.", "p.m.", "ago", "min", "mins", "minute", "minutes", "hr", "hrs", "hour",
    "hours", "day", "days", "week", "weeks", "month", "months", "year", "years",
];

/// Words between the parts of a dateline ("Updated on Tuesday at 10:01 pm by Jane Doe").
const DATE_CONNECTORS: [&str; 6] = ["on", "at", "by", "the", "of", "and"];

/// Month and weekday names: a date, not a name ("By Tuesday, officials had agreed").
const CALENDAR_WORDS: [&str; 26] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
    "dec",
    "today",
    "yesterday",
];
const WEEKDAYS: [&str; 7] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
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
const CREDIT_MARKS: [&str; 6] = [
    "getty images",
    "ap photo",
    "(photo",
    "image credit",
    "(reuters",
    "shutterstock",
];

/// Credits that name a photographer where a caption's sentence ends ("A road in Kent.
/// Photo: John Smith"); inside a sentence ("The photo by Ansel Adams hangs…") they are prose.
const CREDIT_OPENINGS: [&str; 2] = ["photo:", "photo by "];

/// A label is at most this many words when nothing else marks it.
const LABEL_WORDS: usize = 6;
/// Share of a dateline's words that must be date words, numbers or names.
const DATELINE_SHARE: f64 = 0.7;

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
        if std::env::var_os("WP_PRUNE_DEBUG").is_some() {
            eprintln!(
                "PRUNE <{}> {:?}",
                node.node_name().unwrap_or_default(),
                node.text().chars().take(120).collect::<String>()
            );
        }
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
    let marked = has_furniture_class(node) || names_an_author(node);
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
        "header" => is_dated_header(node, words),
        "time" => words <= SHORT_BLOCK_WORDS,
        _ => {
            is_link_line(node, name, words)
                || is_credit(name, &text, words)
                || (words <= SHORT_BLOCK_WORDS && reads_like_furniture(node, &text, words))
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

/// Microdata or link relations that say "this is the author": `itemprop=author`, `rel=author`.
fn names_an_author(node: &NodeRef) -> bool {
    let says_author = |n: &NodeRef, attribute: &str| {
        n.attr(attribute).is_some_and(|value| {
            value
                .split_whitespace()
                .any(|v| v.eq_ignore_ascii_case("author"))
        })
    };
    says_author(node, "itemprop")
        || node
            .descendants_it()
            .any(|n| n.node_name().as_deref() == Some("a") && says_author(&n, "rel"))
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

/// An article's own header left inside its text: its date, headings (headline, dek) and
/// little else. A header with a paragraph of its own keeps it.
fn is_dated_header(node: &NodeRef, words: usize) -> bool {
    let in_headings: usize = node
        .descendants_it()
        .filter(|n| {
            n.node_name().is_some_and(|name| {
                matches!(name.as_ref(), "h1" | "h2" | "h3" | "h4" | "h5" | "h6")
            })
        })
        .map(|heading| word_count(&heading.text()))
        .sum();
    words.saturating_sub(in_headings) <= SHORT_BLOCK_WORDS
        && node
            .descendants_it()
            .any(|n| n.node_name().as_deref() == Some("time"))
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
        || CREDIT_OPENINGS.iter().any(|opening| {
            lower.match_indices(opening).any(|(at, _)| {
                let before = lower[..at].trim_end();
                let after_sentence = before.is_empty()
                    || before.ends_with(['.', '|', '/', '(', '–', '—', '-', ':', ';']);
                after_sentence && names_follow(&text[at + opening.len()..])
            })
        })
}

/// Words inside links below `node`.
fn linked_words(node: &NodeRef) -> usize {
    node.descendants_it()
        .filter(|n| n.node_name().as_deref() == Some("a"))
        .map(|a| word_count(&a.text()))
        .sum()
}

/// A short block that is an attribution, a label or a dateline by its shape, not merely by
/// its first word.
fn reads_like_furniture(node: &NodeRef, text: &str, words: usize) -> bool {
    let trimmed = text.trim();
    let lower = trimmed.to_lowercase();
    if FURNITURE_PHRASES
        .iter()
        .any(|phrase| lower.starts_with(phrase))
    {
        return true;
    }
    // The openings are ASCII, so their length is the same in `trimmed`.
    let rest_after = |opening: &str| &trimmed[opening.len()..];
    if let Some(opening) = ATTRIBUTION_OPENINGS.iter().find(|o| lower.starts_with(*o)) {
        let rest = rest_after(opening);
        return names_follow(rest) || !rest.chars().any(char::is_alphanumeric);
    }
    if let Some(opening) = LABEL_OPENINGS.iter().find(|o| lower.starts_with(*o)) {
        return is_label(rest_after(opening), trimmed, words, node);
    }
    is_dateline(trimmed)
}

/// What follows a label's opening leaves it a label: nothing, a symbol or number ("©",
/// "2019"), a colon or arrow before a title, a link, a sign-up call, or a few words that make
/// no sentence.
fn is_label(rest: &str, text: &str, words: usize, node: &NodeRef) -> bool {
    let rest = rest.trim_start();
    let lower = text.to_lowercase();
    let sentence = text.ends_with('.') && !text.ends_with("..");
    rest.chars()
        .next()
        .is_none_or(|c| (!c.is_alphabetic() && !matches!(c, '"' | '\'' | '“' | '‘')) || c == 'ⓒ')
        || linked_words(node) as f64 >= words as f64 * LINK_LINE_SHARE
        || SIGNUP_WORDS.iter().any(|word| lower.contains(word))
        || (words <= LABEL_WORDS && !sentence)
}

/// The text starts with a short list of names, up to a separator or a date ("Jane Doe and John
/// Smith, Reuters", "Justine Coleman - 11/18/19 11:04 PM EST"): capitalised words and the
/// particles between them; a date after them must be all date.
fn names_follow(text: &str) -> bool {
    let is_name = |word: &str| word.chars().next().is_some_and(char::is_uppercase);
    let mut names = 0;
    let mut words = text.split_whitespace().peekable();
    while let Some(raw) = words.next() {
        let word = raw.trim_matches(|c: char| !c.is_alphanumeric() && c != '&');
        if word.is_empty() {
            continue;
        }
        // "Jan Novak", "June Carter": a month is a name unless a number goes with it.
        let month_of_a_date = is_calendar_word(&word.to_lowercase())
            && !WEEKDAYS.contains(&word.to_lowercase().as_str())
            && !words
                .peek()
                .is_some_and(|next| next.starts_with(|c: char| c.is_ascii_digit()));
        if is_date_word(word) && !month_of_a_date {
            // The dateline after the names: all of it date words or names ("PM", "EST").
            let rest_is_date = std::iter::once(raw).chain(words).all(|w| {
                is_date_word(w)
                    || is_name(w)
                    || DATE_CONNECTORS.contains(&w.to_lowercase().as_str())
                    || !w.chars().any(char::is_alphanumeric)
            });
            return names > 0 && rest_is_date;
        }
        if is_name(word) {
            names += 1;
        } else if !NAME_PARTICLES.contains(&word.to_lowercase().as_str()) {
            return false;
        }
        if names > 8 {
            return false;
        }
        let separated = raw.ends_with([',', '|', '/', '•', '·', ';', ':', '('])
            || words
                .peek()
                .is_some_and(|next| next.starts_with(['|', '/', '•', '·', '—', '–', '(']));
        if separated {
            break;
        }
    }
    names > 0
}

/// A number, time, month or weekday, or a word of a relative date ("3 hours ago").
fn is_date_word(word: &str) -> bool {
    let lower = word
        .trim_matches(|c: char| !c.is_alphanumeric() && c != '.')
        .to_lowercase();
    word.chars().any(|c| c.is_ascii_digit())
        || is_calendar_word(lower.trim_matches('.'))
        || TIME_WORDS.contains(&lower.as_str())
}

fn is_calendar_word(lower: &str) -> bool {
    CALENDAR_WORDS.contains(&lower) || WEEKDAYS.contains(&lower)
}

/// "Updated 10:01 pm PST, Tuesday, November 19, 2019", "Published: Nov 19 by Jane Doe": a date
/// word, then (mostly) numbers, calendar words and names. "Published in 1998, the book sold…"
/// is prose.
fn is_dateline(text: &str) -> bool {
    let mut words = text
        .split(|c: char| c.is_whitespace() || matches!(c, ',' | '|' | '·' | '•'))
        .filter(|w| !w.is_empty());
    let Some(first) = words.next() else {
        return false;
    };
    if !DATE_WORDS.contains(&first.trim_end_matches(':').to_lowercase().as_str()) {
        return false;
    }
    let rest: Vec<&str> = words.collect();
    let datelike = |word: &str| {
        is_date_word(word)
            || DATE_CONNECTORS.contains(&word.to_lowercase().as_str())
            || word.chars().next().is_some_and(char::is_uppercase)
    };
    let dated = rest.iter().filter(|word| datelike(word)).count();
    rest.iter()
        .any(|word| word.chars().any(|c| c.is_ascii_digit()))
        && dated as f64 >= rest.len() as f64 * DATELINE_SHARE
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
    fn sentences_that_open_like_furniture_stay() {
        for sentence in [
            "By noon the river had risen two metres.",
            "By Tuesday, officials had agreed on a plan.",
            "By the time the pumps arrived the cellar was full.",
            "Photo by photo, volunteers rebuilt the archive.",
            "The photo by Ansel Adams hangs in the hall.",
            "Share of households without power fell to three percent.",
            "Contact with the last village was restored at six.",
            "Read more than three hundred pages of reports.",
            "Published in 1998, the old map is still in use.",
            "Loading the sandbags took the whole night.",
            "Copyright law says nothing about flood photos.",
            "Source: the ministry said the figures were final.",
        ] {
            assert_eq!(pruned(&format!("<div><p>{sentence}</p></div>")), sentence);
        }
    }

    #[test]
    fn furniture_is_known_by_its_shape() {
        for furniture in [
            "By Jane Doe",
            "by Regan September 15, 2019",
            "By Justine Coleman - 11/18/19 11:04 PM EST",
            "By Maria Keller and Tom Lutz, Reuters",
            "By the Associated Press",
            "Photo: Jan Novak / Reuters",
            "Image:",
            "Updated 10:01 pm PST, Tuesday, November 19, 2019",
            "Published 1 day ago",
            "Read more: How the old dam held",
            "Read more",
            "Share this article",
            "Loading content ...",
            "Copyright ⓒ Entermedia.co.kr. All rights reserved in every country",
            "SOURCE: News agencies",
            "Get the latest updates right in your inbox. Subscribe to our newsletters.",
        ] {
            assert_eq!(
                pruned(&format!(
                    "<div><p>{furniture}</p><p>{}</p></div>",
                    "word ".repeat(60)
                )),
                "word ".repeat(60).trim(),
                "{furniture:?} was kept"
            );
        }
        let marked = "<div><p><a rel=\"author\" href=/jane>Jane Doe</a></p><p>Closing words of the piece.</p></div>";
        assert_eq!(pruned(marked), "Closing words of the piece.");
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
