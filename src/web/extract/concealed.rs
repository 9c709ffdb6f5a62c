//! What a reader of the HTML alone can tell a person would not see: elements with `hidden`, and
//! inline styles that hide them (`display: none`, `visibility: hidden`, `opacity: 0`, a font
//! under 2 px, clipped away or shrunk to nothing with hidden overflow, far off the page).
//! Removed before extraction with every link, image and control inside, as the browser's reads
//! leave them out (stylesheets need a browser: `mode: browser` judges those too). The page is
//! parsed within `bounded::MAX_DEPTH` here, so what comes out nests no deeper.

use dom_query::{Matcher, NodeRef};

use crate::web::bounded;

/// Elements that lead somewhere, show a picture or take input: each one taken out counts one.
const CARRIERS: &str = "a[href], area[href], img, picture, video, audio, iframe, embed, \
    object, button, input:not([type=hidden]), select, textarea";

/// What is left of a page to read: its HTML when anything was taken out of it, what concealed
/// content was taken out (characters of text, plus one per link, image or control), the
/// elements too deeply nested to read.
pub struct Visible {
    pub html: Option<String>,
    pub dropped: usize,
    pub too_deep: usize,
}

/// `html` without its concealed elements and what nests deeper than `bounded::MAX_DEPTH`.
pub fn strip(html: &str) -> Visible {
    let bounded::Parsed { document, too_deep } = bounded::document(html);
    // Compiled once a page hides anything.
    let carriers = std::cell::OnceCell::new();
    let mut dropped = 0;
    let mut found = false;
    for node in document.select("[hidden], [style]").nodes() {
        let concealed = node.has_attr("hidden")
            || node
                .attr("style")
                .is_some_and(|style| hides(&style.to_ascii_lowercase()));
        // One inside what is already taken out was counted with it.
        if concealed && attached(node) {
            dropped += node.text().trim().chars().count()
                + carriers_in(
                    node,
                    carriers
                        .get_or_init(|| Matcher::new(CARRIERS).ok())
                        .as_ref(),
                );
            node.remove_from_parent();
            found = true;
        }
    }
    Visible {
        html: (found || too_deep > 0).then(|| document.html().to_string()),
        dropped,
        too_deep,
    }
}

/// Whether `node` is still in its document.
fn attached(node: &NodeRef) -> bool {
    node.ancestors_it(None)
        .last()
        .is_some_and(|top| top.is_document())
}

/// The links, images and controls (`CARRIERS`) `node` is or holds.
fn carriers_in(node: &NodeRef, carriers: Option<&Matcher>) -> usize {
    let Some(carriers) = carriers else {
        return 0;
    };
    std::iter::once(*node)
        .chain(node.descendants_it())
        .filter(|n| n.is_match(carriers))
        .count()
}

/// Whether an inline style hides its element.
fn hides(style: &str) -> bool {
    let squeezed: String = style.chars().filter(|c| !c.is_whitespace()).collect();
    let declarations: Vec<&str> = squeezed.split(';').collect();
    let has = |wanted: &str| {
        declarations
            .iter()
            .any(|d| d.trim_end_matches("!important") == wanted)
    };
    if has("display:none") || has("visibility:hidden") || has("opacity:0") {
        return true;
    }
    let clipped = declarations.iter().any(|d| {
        let d = d.trim_end_matches("!important");
        d.starts_with("clip:rect(0") && d.trim_end_matches(')').split([',', ' ']).all(zero)
            || d == "clip-path:inset(50%)"
            || d == "clip-path:inset(100%)"
    });
    let pixels = |name: &str| {
        declarations.iter().find_map(|d| {
            d.trim_end_matches("!important")
                .strip_prefix(name)?
                .trim_end_matches("px")
                .parse::<f64>()
                .ok()
        })
    };
    let overflow_hidden = declarations
        .iter()
        .any(|d| d.starts_with("overflow:") && !d.contains("visible"));
    let no_size = [pixels("width:"), pixels("height:")]
        .iter()
        .any(|size| size.is_some_and(|px| px <= 1.0));
    let away = ["left:", "top:", "text-indent:", "margin-left:"]
        .iter()
        .any(|name| pixels(name).is_some_and(|offset| offset <= -1000.0));
    clipped
        || (overflow_hidden && no_size)
        || away
        || pixels("font-size:").is_some_and(|px| px < 2.0)
}

/// Whether a `clip: rect(…)` argument is zero (the spaces between them squeezed out too).
fn zero(part: &str) -> bool {
    part.trim_start_matches("clip:rect(")
        .chars()
        .all(|c| matches!(c, '0' | 'p' | 'x'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_elements_and_hiding_styles_go_and_the_rest_stays() {
        let html = r#"<p>Shown</p><p hidden>H1</p><div style="display: none">H2</div>
            <span style="font-size:1px">H3</span><p style="position:absolute; left:-9999px">H4</p>
            <p style="opacity: 0 !important">H5</p><p style="color: red">Red</p>"#;
        let Visible { html, dropped, .. } = strip(html);
        let clean = html.unwrap();
        for gone in ["H1", "H2", "H3", "H4", "H5"] {
            assert!(!clean.contains(gone), "{gone} in {clean}");
        }
        assert!(clean.contains("Shown") && clean.contains("Red"), "{clean}");
        assert_eq!(dropped, 10);
    }

    #[test]
    fn links_and_images_go_with_what_hides_them_and_count_one_each() {
        let html = r#"<p>Shown <a href="/ok">ok</a></p>
            <div style="visibility:hidden"><a href="https://evil.test/1">L1</a></div>
            <p style="position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0,0,0,0)"><a href="https://evil.test/2"></a></p>
            <p style="position:absolute; left:-9999px"><img src="https://evil.test/3.png"></p>
            <div hidden><p style="display:none"><a href="https://evil.test/4">L4</a></p></div>
            <p style="clip-path: inset(50%)"><button>B</button></p>
            <span style="clip: rect(0 0 0 0); position: absolute"><a href="https://evil.test/5"></a></span>"#;
        let Visible { html, dropped, .. } = strip(html);
        let clean = html.unwrap();
        assert!(!clean.contains("evil.test"), "{clean}");
        assert!(clean.contains("/ok") && !clean.contains(">B<"), "{clean}");
        // "L1", "L4" and "B"; six links, images and buttons (the one inside two hidden
        // elements counted once).
        assert_eq!(dropped, 5 + 6);
    }

    #[test]
    fn ordinary_styles_hide_nothing() {
        for style in [
            "width:1px",
            "overflow:hidden;height:200px",
            "left:-10px",
            "clip:rect(0,10px,10px,0)",
            "clip:rect(0 100px 100px 0)",
            "font-size:12px",
        ] {
            assert!(!hides(style), "{style}");
        }
    }
}
