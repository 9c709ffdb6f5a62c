//! Telling a page that needs a browser from one that does not: an empty body, a bot challenge,
//! or a JavaScript application shell (an app root and scripts, but hardly any text).

/// Pages with less visible text than this may be shells.
const SHELL_TEXT_CHARS: usize = 200;

/// Markers of bot-challenge and "checking your browser" interstitials.
const CHALLENGE_MARKERS: [&str; 8] = [
    "challenge-platform",
    "cf-browser-verification",
    "id=\"challenge-form\"",
    "id=\"cf-challenge",
    "_incapsula_resource",
    "checking your browser",
    "just a moment...",
    "enable javascript and cookies to continue",
];

/// Elements single-page apps mount into.
const APP_ROOTS: &str =
    "#root, #app, #__next, #__nuxt, #svelte, [ng-app], [data-reactroot], app-root, [id^=app-]";

/// Why `html` should be rendered by a browser, or None when the HTTP result is the page.
pub fn needs_browser(html: &str) -> Option<String> {
    if html.trim().is_empty() {
        return Some("the HTTP response body was empty".into());
    }
    let head = html[..floor_char_boundary(html, 64 * 1024)].to_ascii_lowercase();
    if let Some(marker) = CHALLENGE_MARKERS.iter().find(|m| head.contains(*m)) {
        return Some(format!(
            "the HTTP response is a challenge page ({marker:?})"
        ));
    }
    let doc = super::bounded::document(html).document;
    let has_scripts = doc.select("script").exists();
    let noscript_asks = doc
        .select("noscript")
        .text()
        .to_ascii_lowercase()
        .contains("javascript");
    doc.select("script, style, noscript, template").remove();
    let text_chars = doc
        .select("body")
        .text()
        .split_whitespace()
        .map(str::len)
        .sum::<usize>();
    if text_chars >= SHELL_TEXT_CHARS || !has_scripts {
        return None;
    }
    let has_root = doc.select(APP_ROOTS).exists();
    (has_root || noscript_asks).then(|| {
        format!(
            "the HTTP response is a JavaScript shell ({text_chars} characters of text{})",
            if noscript_asks {
                ", asks to enable JavaScript"
            } else {
                ", app root element"
            }
        )
    })
}

fn floor_char_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shells_and_challenges_are_recognised() {
        let shell =
            "<html><body><div id=\"root\"></div><script src=\"/app.js\"></script></body></html>";
        assert!(needs_browser(shell).unwrap().contains("JavaScript shell"));
        let asks = "<body><noscript>You need to enable JavaScript to run this app.</noscript><script>x()</script></body>";
        assert!(needs_browser(asks).unwrap().contains("enable JavaScript"));
        assert!(needs_browser("  ").unwrap().contains("empty"));
        let challenge = "<html><head><title>Just a moment...</title></head><body>x</body></html>";
        assert!(needs_browser(challenge).unwrap().contains("challenge"));
    }

    #[test]
    fn ordinary_pages_stay_http() {
        let article = format!(
            "<body><div id=\"root\"><p>{}</p></div><script>1</script></body>",
            "word ".repeat(80)
        );
        assert_eq!(needs_browser(&article), None);
        assert_eq!(
            needs_browser("<body><p>short, and no scripts</p></body>"),
            None
        );
    }
}
