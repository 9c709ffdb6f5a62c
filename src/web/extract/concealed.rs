//! Text a reader of the HTML alone can tell a person would not see: elements with `hidden`, and
//! inline styles that hide them (`display: none`, `visibility: hidden`, `opacity: 0`, a font
//! under 2 px, far off the page). Removed before extraction, as the browser's reads leave out
//! concealed text (stylesheets need a browser: `mode: browser` judges those too).

use dom_query::Document;

/// `html` without its concealed elements, and how many characters of text they held.
pub fn strip(html: &str) -> (String, usize) {
    let document = Document::from(html);
    let mut dropped = 0;
    let mut found = false;
    for node in document.select("[hidden], [style]").nodes() {
        let concealed = node.has_attr("hidden")
            || node
                .attr("style")
                .is_some_and(|style| hides(&style.to_ascii_lowercase()));
        if concealed {
            dropped += node.text().trim().chars().count();
            node.remove_from_parent();
            found = true;
        }
    }
    if found {
        (document.html().to_string(), dropped)
    } else {
        (html.to_string(), 0)
    }
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
    declarations.iter().any(|d| {
        let Some(value) = d.strip_prefix("font-size:") else {
            return d
                .strip_prefix("left:-")
                .or_else(|| d.strip_prefix("top:-"))
                .and_then(|v| v.trim_end_matches("px").parse::<f64>().ok())
                .is_some_and(|offset| offset >= 1000.0);
        };
        value
            .trim_end_matches("px")
            .parse::<f64>()
            .is_ok_and(|px| px < 2.0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_elements_and_hiding_styles_go_and_the_rest_stays() {
        let html = r#"<p>Shown</p><p hidden>H1</p><div style="display: none">H2</div>
            <span style="font-size:1px">H3</span><p style="position:absolute; left:-9999px">H4</p>
            <p style="opacity: 0 !important">H5</p><p style="color: red">Red</p>"#;
        let (clean, dropped) = strip(html);
        for gone in ["H1", "H2", "H3", "H4", "H5"] {
            assert!(!clean.contains(gone), "{gone} in {clean}");
        }
        assert!(clean.contains("Shown") && clean.contains("Red"), "{clean}");
        assert_eq!(dropped, 10);
    }
}
