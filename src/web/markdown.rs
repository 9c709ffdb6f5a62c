//! HTML → Markdown with htmd, skipping what is never content.

/// Tags whose text is never part of the readable content (htmd would print it otherwise).
const SKIPPED_TAGS: [&str; 9] = [
    "script", "style", "noscript", "template", "title", "head", "svg", "iframe", "canvas",
];

/// Converts an HTML fragment or document to Markdown, collapsing runs of blank lines.
pub fn to_markdown(html: &str) -> String {
    to_markdown_counted(html).0
}

/// `to_markdown`, and how many elements were left out for nesting deeper than
/// `bounded::MAX_DEPTH` (htmd walks the tree recursively, so they are left out first).
pub fn to_markdown_counted(html: &str) -> (String, usize) {
    let (html, too_deep) = super::bounded::shallow(html);
    (convert(&html), too_deep)
}

fn convert(html: &str) -> String {
    let converter = htmd::HtmlToMarkdown::builder()
        .skip_tags(SKIPPED_TAGS.to_vec())
        .build();
    let markdown = converter.convert(html).unwrap_or_default();
    collapse_blank_lines(&markdown)
}

/// Trims line ends and collapses runs of blank lines to one.
pub fn collapse_blank_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank_run = 0;
    for line in text.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank_run += 1;
            if blank_run > 1 {
                continue;
            }
        } else {
            blank_run = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_structure_and_skips_scripts() {
        let md = to_markdown(
            "<main><h1>Title</h1><script>var x=1</script><p>Hello <a href=\"https://e.x/a\">link</a></p>\
             <ul><li>one</li><li>two</li></ul></main>",
        );
        assert!(md.starts_with("# Title"), "{md}");
        assert!(md.contains("[link](https://e.x/a)"), "{md}");
        assert!(
            md.contains("*   one") || md.contains("- one") || md.contains("* one"),
            "{md}"
        );
        assert!(!md.contains("var x"), "{md}");
    }
}
