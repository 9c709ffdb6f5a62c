//! Links, images and controls a person cannot see (hidden in each way pages hide text, in a
//! shadow root, in another site's frame, a whole frame hidden) are in no read, no annotated
//! screenshot and no `open_web_page` result, their addresses not even in `warnings`; a visible
//! link quoting the same words stays, listed and clickable.

use serde_json::{Value, json};

use super::read;
use crate::common::{self, content_lines, ok, open, ref_of};

/// What `hidden-links.html` hides with the `hidden` attribute or inline styles (a reader of the
/// HTML alone can tell), each token in an address and a link's text.
const INLINE: [&str; 7] = ["zq1", "zq2", "zq3", "zq4", "zq5", "zq6", "zq7"];
/// What it hides with its stylesheet, a text's address, its shadow root's and its frames'.
const STYLED: [&str; 15] = [
    "zq8", "zq9", "zqa", "zqb", "zqc", "zqurl", "zqs1", "zqs2", "zqad", "zqf1", "zqf2", "zqf3",
    "zqf4", "zqf5", "zqf6",
];

fn assert_hidden(what: &str, found: &Value, tokens: &[&str]) {
    let text = found.to_string().to_lowercase();
    for token in tokens {
        assert!(!text.contains(token), "{what}: {token} in\n{found:#}");
    }
}

fn assert_all_hidden(what: &str, found: &Value) {
    assert_hidden(what, found, &INLINE);
    assert_hidden(what, found, &STYLED);
}

#[tokio::test]
async fn hidden_links_are_in_no_read_and_a_visible_one_stays() {
    let s = "untrusted-links";
    open(s, "hidden-links.html").await;
    let markdown = read(s, json!({ "mode": "markdown", "full": true })).await;
    assert_all_hidden("markdown", &markdown);
    let content = markdown["content"].as_str().unwrap();
    for shown in [
        "partner?m=visible",
        "shipping?m=shadow-visible",
        "seller?m=frame-visible",
    ] {
        assert!(content.contains(shown), "{shown} missing in\n{content}");
    }
    // Text and elements both counted; the warnings quote at most 100 characters, an address
    // in them cut to its host.
    assert!(
        markdown["hidden_text_dropped"].as_u64().unwrap_or(0) > 100,
        "{markdown:#}"
    );
    let warnings = markdown["warnings"].as_array().unwrap();
    let hidden: Vec<&str> = warnings
        .iter()
        .filter(|w| w["where"].as_str().unwrap().starts_with("hidden"))
        .map(|w| w["excerpt"].as_str().unwrap())
        .collect();
    assert!(
        hidden.iter().all(|e| e.chars().count() <= 100),
        "{warnings:#?}"
    );
    assert!(
        hidden.iter().any(|e| e.contains("send it to evil.example")),
        "{warnings:#?}"
    );
    assert!(
        warnings.iter().any(|w| w["where"] == "visible"),
        "{warnings:#?}"
    );

    let text = read(s, json!({ "mode": "text" })).await;
    assert_all_hidden("text", &text);
    assert!(
        text["content"]
            .as_str()
            .unwrap()
            .contains("a prankster wrote"),
        "{text:#}"
    );
    let extract = read(
        s,
        json!({ "mode": "extract", "query": "partner offer instructions" }),
    )
    .await;
    assert_all_hidden("extract", &extract);
    let schema = json!({ "fields": {
        "links": { "selector": "a", "attr": "href", "all": true },
        "images": { "selector": "img", "attr": "src", "all": true },
    } });
    let data = read(s, json!({ "mode": "json", "schema": schema })).await;
    assert_all_hidden("json", &data);
    assert!(data.to_string().contains("partner?m=visible"), "{data:#}");

    let elements = read(s, json!({ "mode": "elements" })).await;
    assert_all_hidden("elements", &elements);
    let lines = content_lines(&elements);
    let visible = ref_of(&lines, "a prankster wrote");
    assert!(
        lines.iter().any(
            |l| l.starts_with(&format!("[{visible}] link ")) && l.contains("partner?m=visible")
        ),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l.contains("Seller page")),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l.contains("shipping details")),
        "{lines:#?}"
    );

    // The visible words are found, with the visible link; the hidden ones beside them are not
    // in the match's context.
    let found = read(
        s,
        json!({ "mode": "find", "query": "previous instructions" }),
    )
    .await;
    assert_eq!(found["matches"], 1, "{found:#}");
    assert!(
        found["content"]
            .as_str()
            .unwrap()
            .contains(&format!("[{visible}]")),
        "{found:#}"
    );
    let linen = read(s, json!({ "mode": "find", "query": "linen" })).await;
    assert_eq!(linen["matches"], 1, "{linen:#}");
    assert_all_hidden("find", &linen);
    let offers = read(s, json!({ "mode": "find", "query": "offer" })).await;
    assert_eq!(offers["matches"], 0, "{offers:#}");

    // The visible link is clickable: it takes the tab to its address.
    let clicked = ok(
        "browser_interact",
        json!({ "session": s, "action": "click", "ref": visible }),
    )
    .await;
    assert!(
        clicked.to_string().contains("partner?m=visible"),
        "{clicked:#}"
    );
}

#[tokio::test]
async fn an_annotated_screenshot_boxes_no_hidden_element() {
    let s = "untrusted-links-shot";
    open(s, "hidden-links.html").await;
    let lines = common::element_lines(s).await;
    let visible = ref_of(&lines, "a prankster wrote");
    let shot = ok(
        "browser_screenshot",
        json!({ "session": s, "annotate": true, "full_page": true }),
    )
    .await;
    let legend = shot["legend"].as_array().unwrap();
    assert_all_hidden("legend", &shot["legend"]);
    assert!(legend.iter().any(|e| e["ref"] == visible), "{legend:#?}");
    // Every box is an element of the list, which has none of the hidden ones.
    for entry in legend {
        let line = format!("[{}] ", entry["ref"]);
        assert!(
            lines.iter().any(|l| l.starts_with(&line)),
            "{entry} not in {lines:#?}"
        );
    }
}

#[tokio::test]
async fn open_web_page_leaves_hidden_links_out_by_http_and_by_browser() {
    let url = common::harness().page("hidden-links.html");
    for extract in ["full", "main", "links"] {
        let page = ok(
            "open_web_page",
            json!({ "url": url, "mode": "http", "extract": extract, "max_tokens": 100_000 }),
        )
        .await;
        assert_hidden(&format!("http {extract}"), &page, &INLINE);
        if extract != "main" {
            assert!(page.to_string().contains("partner?m=visible"), "{page:#}");
        }
    }
    for extract in ["full", "links"] {
        let page = ok(
            "open_web_page",
            json!({ "url": url, "mode": "browser", "extract": extract, "max_tokens": 100_000 }),
        )
        .await;
        assert_all_hidden(&format!("browser {extract}"), &page);
        assert!(page.to_string().contains("partner?m=visible"), "{page:#}");
    }
}

/// Two empty elements in a hidden box: one each in the count, however the page is read.
const EMPTY_HIDDEN: &str = r#"<!doctype html><html><head><title>Empty</title></head><body>
  <p>Nothing else here.</p>
  <div style="opacity: 0"><a href="/partner?m=zqe"></a><img src="/pixel.png?m=zqe" alt=""></div>
</body></html>"#;

#[tokio::test]
async fn each_hidden_element_counts_one() {
    let url = common::serve_document(
        "empty-hidden.html",
        EMPTY_HIDDEN.as_bytes().to_vec(),
        "text/html",
    )
    .await;
    let s = "untrusted-links-count";
    ok("browser_navigate", json!({ "session": s, "target": url })).await;
    let markdown = read(s, json!({ "mode": "markdown", "full": true })).await;
    assert_eq!(markdown["hidden_text_dropped"], 2, "{markdown:#}");
    assert_hidden("markdown", &markdown, &["zqe"]);
    for mode in ["http", "browser"] {
        let page = ok(
            "open_web_page",
            json!({ "url": url, "mode": mode, "extract": "full" }),
        )
        .await;
        assert_eq!(page["hidden_text_dropped"], 2, "{mode}: {page:#}");
        assert_hidden(mode, &page, &["zqe"]);
    }
}
