//! browser_read: element lists (frames, shadow DOM, paging, refs) and content modes.

mod common;

use std::collections::HashSet;

use common::{element_lines, fails, ok, open, ref_of};
use serde_json::{Value, json};

#[tokio::test]
async fn all_200_elements_are_listed() {
    open("read-200", "elements.html").await;
    let lines = element_lines("read-200").await;
    let elements: Vec<&String> = lines.iter().filter(|l| l.starts_with('[')).collect();
    assert_eq!(elements.len(), 200, "{lines:#?}");
    let refs: HashSet<u32> = elements
        .iter()
        .map(|l| ref_of(&[l.to_string()], ""))
        .collect();
    assert_eq!(refs.len(), 200, "refs must be distinct");
}

#[tokio::test]
async fn paging_returns_every_element_exactly_once() {
    open("read-paging", "elements.html").await;
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut args = json!({ "session": "read-paging", "mode": "elements", "max_tokens": 300 });
        if let Some(c) = &cursor {
            args["cursor"] = json!(c);
        }
        let page = ok("browser_read", args).await;
        pages += 1;
        assert_eq!(page["total"], 200);
        let content = page["content"].as_str().unwrap();
        assert!(
            content.len() <= 300 * 4 + 200,
            "page over budget: {} chars",
            content.len()
        );
        seen.extend(
            content
                .lines()
                .filter(|l| l.starts_with('['))
                .map(str::to_string),
        );
        match page["next_cursor"].as_str() {
            Some(next) => {
                assert_eq!(page["truncated"], true);
                cursor = Some(next.to_string());
            }
            None => break,
        }
        assert!(pages < 100, "paging does not end");
    }
    assert!(pages > 3, "expected several pages, got {pages}");
    let unique: HashSet<&String> = seen.iter().collect();
    assert_eq!(seen.len(), 200, "every element once");
    assert_eq!(unique.len(), 200);
}

#[tokio::test]
async fn controls_inside_iframes_of_both_origins_are_listed() {
    open("read-frames", "frames.html").await;
    let lines = element_lines("read-frames").await;
    let joined = lines.join("\n");
    for name in [
        "Top button",
        "Same-origin frame button",
        "Same-origin frame input",
        "Cross-origin frame button",
        "Cross-origin frame link",
    ] {
        assert!(joined.contains(name), "{name} missing from\n{joined}");
    }
}

#[tokio::test]
async fn open_shadow_roots_and_click_handlers_are_listed() {
    open("read-shadow", "shadow.html").await;
    let joined = element_lines("read-shadow").await.join("\n");
    assert!(joined.contains("textbox \"Shadow query\""), "{joined}");
    assert!(joined.contains("button \"Shadow go\""), "{joined}");
    assert!(joined.contains("clickable \"Clickable div\""), "{joined}");
}

#[tokio::test]
async fn refs_stay_stable_and_old_ones_become_stale_after_navigation() {
    open("read-refs", "spa.html").await;
    let first = element_lines("read-refs").await;
    let again = element_lines("read-refs").await;
    assert_eq!(first, again, "refs are stable while the page is unchanged");
    let sort = ref_of(&first, "Sort by price");
    let text = ok(
        "browser_read",
        json!({ "session": "read-refs", "mode": "text", "ref": sort }),
    )
    .await;
    assert_eq!(text["content"], "Sort by price");

    open("read-refs", "history-a.html").await;
    common::stale(
        "browser_read",
        json!({ "session": "read-refs", "mode": "text", "ref": sort }),
    )
    .await;
    let new_lines = element_lines("read-refs").await;
    let link = ref_of(&new_lines, "to B");
    assert!(link > sort, "numbers are never reused: {link} after {sort}");
    fails(
        "browser_read",
        json!({ "session": "read-refs", "mode": "text", "ref": 99999 }),
        "NO_SUCH_REF",
    )
    .await;
}

#[tokio::test]
async fn markdown_text_html_find_and_extract() {
    open("read-modes", "article.html").await;
    let markdown = ok(
        "browser_read",
        json!({ "session": "read-modes", "mode": "markdown", "max_tokens": 200 }),
    )
    .await;
    assert_eq!(markdown["truncated"], true);
    assert!(markdown["content"].as_str().unwrap().len() <= 800);
    let next = markdown["next_cursor"].as_str().unwrap();
    let second = ok(
        "browser_read",
        json!({ "session": "read-modes", "mode": "markdown", "max_tokens": 200, "cursor": next }),
    )
    .await;
    assert_ne!(second["content"], markdown["content"]);

    let html = ok(
        "browser_read",
        json!({ "session": "read-modes", "mode": "html", "selector": "h1" }),
    )
    .await;
    assert!(html["content"].as_str().unwrap().starts_with("<h1"));

    let text = ok(
        "browser_read",
        json!({ "session": "read-modes", "mode": "text", "max_tokens": 100000 }),
    )
    .await;
    let body = text["content"].as_str().unwrap();
    let word = body
        .split_whitespace()
        .find(|w| w.len() > 8 && w.chars().all(char::is_alphabetic))
        .unwrap();
    let found = ok(
        "browser_read",
        json!({ "session": "read-modes", "mode": "find", "query": word }),
    )
    .await;
    assert!(found["matches"].as_u64().unwrap() >= 1, "{found:#}");
    assert!(
        found["content"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains(&word.to_lowercase())
    );

    let extract = ok(
        "browser_read",
        json!({ "session": "read-modes", "mode": "extract", "query": word }),
    )
    .await;
    assert!(extract["sections"].as_u64().unwrap() >= 1);
    assert!(
        extract["content"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains(&word.to_lowercase())
    );
    fails(
        "browser_read",
        json!({ "session": "read-modes", "mode": "find" }),
        "INVALID_ARGUMENT",
    )
    .await;
    fails(
        "browser_read",
        json!({ "session": "read-modes", "mode": "html", "selector": "#nope" }),
        "INVALID_ARGUMENT",
    )
    .await;
    fails(
        "browser_read",
        json!({ "session": "read-modes", "cursor": "garbage" }),
        "INVALID_ARGUMENT",
    )
    .await;
}

/// Text in shadow roots — open ones, a closed one inside them, light content slotted in — is
/// read at its place in every content mode, and waited for like any other text.
#[tokio::test]
async fn shadow_root_text_is_read_in_place() {
    let s = "read-components";
    let arrived = ok(
        "browser_navigate",
        json!({ "session": s, "target": common::harness().page("components.html"),
                "wait_for": "Shipping: 4.50 EUR" }),
    )
    .await;
    assert_eq!(arrived["ready"]["by"], "wait_for", "{arrived:#}");
    let in_order = [
        "Two items",
        "Summary",
        "Total: 99.50 EUR",
        "Shipping: 4.50 EUR",
        "Gift wrap included",
        "Questions?",
    ];
    for mode in ["markdown", "text"] {
        let read = ok(
            "browser_read",
            json!({ "session": s, "mode": mode, "full": true }),
        )
        .await;
        let content = read["content"].as_str().unwrap();
        let places: Vec<Option<usize>> = in_order.iter().map(|t| content.find(t)).collect();
        assert!(
            places.iter().all(Option::is_some) && places.windows(2).all(|w| w[0] < w[1]),
            "{mode}: {content}"
        );
    }
    let found = ok(
        "browser_read",
        json!({ "session": s, "mode": "find", "query": "99.50" }),
    )
    .await;
    let hit = found["content"].as_str().unwrap();
    assert!(hit.starts_with("§ Basket › Summary: "), "{hit}");
    let lines = element_lines(s).await;
    let pay = ref_of(&lines, "button \"Pay\"");
    assert!(
        hit.contains(&format!("→ refs [{pay}]")),
        "{hit} / {lines:#?}"
    );
    // The element's own text, through its ref.
    let summary = ok(
        "browser_read",
        json!({ "session": s, "mode": "text", "ref": pay }),
    )
    .await;
    assert_eq!(summary["content"], "Pay");
}

/// A match names its heading path and only the refs of its own section — not the table of
/// contents above it or the permalink in the footer.
#[tokio::test]
async fn find_names_the_section_of_each_match() {
    let s = "read-sections";
    open(s, "manual.html").await;
    let lines = element_lines(s).await;
    let found = ok(
        "browser_read",
        json!({ "session": s, "mode": "find", "query": "8080" }),
    )
    .await;
    let hit = found["content"].as_str().unwrap();
    let reference = ref_of(&lines, "port reference");
    assert_eq!(
        hit,
        format!(
            "§ Manual › Configuration › Ports: \"The server listens on port 8080 unless told otherwise.\" → refs [{reference}]"
        )
    );
    // A match inside a link names that link; one before any heading has no path.
    let found = ok(
        "browser_read",
        json!({ "session": s, "mode": "find", "query": "Download page" }),
    )
    .await;
    let download = ref_of(&lines, "Download page");
    assert!(
        found["content"]
            .as_str()
            .unwrap()
            .ends_with(&format!("→ refs [{download}]")),
        "{found:#}"
    );
    let found = ok(
        "browser_read",
        json!({ "session": s, "mode": "find", "query": "Installation" }),
    )
    .await;
    let first = found["content"].as_str().unwrap().lines().next().unwrap();
    assert!(first.starts_with("\"Installation"), "{first}");
}

/// Every mode of browser_read on the session's current page: each answers (never a script
/// error) with the page's URL; returns the answers by mode.
async fn read_every_mode(session: &str) -> Vec<(&'static str, Value)> {
    let mut answers = Vec::new();
    for (mode, query) in [
        ("elements", None),
        ("markdown", None),
        ("text", None),
        ("html", None),
        ("find", Some("anything")),
        ("extract", Some("anything")),
    ] {
        let mut args = json!({ "session": session, "mode": mode });
        if let Some(query) = query {
            args["query"] = json!(query);
        }
        let read = ok("browser_read", args).await;
        assert!(read["url"].is_string(), "{mode}: {read:#}");
        answers.push((mode, read));
    }
    answers
}

#[tokio::test]
async fn a_failed_navigation_s_error_page_reads_empty_with_the_error() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let target = format!("http://{}/", closed.local_addr().unwrap());
    drop(closed);
    let session = "read-error-page";
    let failed = fails(
        "browser_navigate",
        json!({ "session": session, "target": target }),
        "NAVIGATION_FAILED",
    )
    .await;
    let message = failed["error"]["message"].as_str().unwrap();
    assert!(message.contains("CONNECTION_REFUSED"), "{failed:#}");
    for (mode, read) in read_every_mode(session).await {
        // Chromium's own error text is not the site's content; the error is said beside it.
        assert_eq!(read["content"], "", "{mode}: {read:#}");
        let error = &read["navigation_error"];
        assert_eq!(error["url"], target, "{mode}: {read:#}");
        assert_eq!(error["code"], "NAVIGATION_FAILED", "{mode}: {read:#}");
        assert_eq!(error["message"], message, "{mode}: {read:#}");
        assert_eq!(error["hint"], failed["error"]["hint"], "{mode}: {read:#}");
    }
    // The next document is read as itself, without the old error.
    open(session, "article.html").await;
    let read = ok(
        "browser_read",
        json!({ "session": session, "mode": "text" }),
    )
    .await;
    assert!(read.get("navigation_error").is_none(), "{read:#}");
}

#[tokio::test]
async fn pages_without_a_body_read_empty() {
    let session = "read-bodiless";
    ok(
        "browser_navigate",
        json!({ "session": session, "target": "about:blank" }),
    )
    .await;
    for (mode, read) in read_every_mode(session).await {
        assert_eq!(read["url"], "about:blank", "{mode}: {read:#}");
        assert!(read.get("navigation_error").is_none(), "{mode}: {read:#}");
    }
    open(session, "bodiless.html").await;
    for (mode, read) in read_every_mode(session).await {
        let content = read["content"].as_str().unwrap();
        assert!(!content.contains("Soon gone"), "{mode}: {read:#}");
    }
    // Not even a root element left.
    ok(
        "browser_interact",
        json!({ "session": session, "action": "evaluate", "script": "document.documentElement.remove()" }),
    )
    .await;
    for (mode, read) in read_every_mode(session).await {
        assert_eq!(read["content"], "", "{mode}: {read:#}");
    }
}
