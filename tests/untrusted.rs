//! Pages written by strangers: text a person cannot see (hidden in each way pages hide it, in a
//! shadow root and in another site's frame) is left out of every read, said how much, and named
//! when it reads like instructions to a model; a visible review quoting such an instruction
//! stays, marked.

mod common;

use common::{ok, open};
use serde_json::{Value, json};

const HIDDEN: [&str; 12] = [
    "(H1)", "(H2)", "(H3)", "(H4)", "(H5)", "(H6)", "(H7)", "(H8)", "(H9)", "(H10)", "(H11)",
    "(H12)",
];

async fn read(session: &str, args: Value) -> Value {
    let mut args = args;
    args["session"] = json!(session);
    args["max_tokens"] = json!(100_000);
    ok("browser_read", args).await
}

#[tokio::test]
async fn hidden_instructions_are_left_out_of_every_read_and_a_visible_one_is_marked() {
    let s = "untrusted-read";
    open(s, "injected.html").await;
    for mode in ["markdown", "text"] {
        let result = read(s, json!({ "mode": mode, "full": mode == "markdown" })).await;
        let content = result["content"].as_str().unwrap();
        for marker in HIDDEN {
            assert!(!content.contains(marker), "{mode}: {marker} in\n{content}");
        }
        // What a person sees stays: the page, its shadow root, the seller's frame, the review.
        for shown in [
            "warm light",
            "Ships in two days",
            "Sold by Lamp",
            "on the box",
        ] {
            assert!(
                content.contains(shown),
                "{mode}: {shown:?} missing in\n{content}"
            );
        }
        let dropped = result["hidden_text_dropped"].as_u64().unwrap_or(0);
        assert!(dropped > 200, "{mode}: {result:#}");
        let warnings = result["warnings"].as_array().unwrap();
        let visible: Vec<&Value> = warnings
            .iter()
            .filter(|w| w["where"] == "visible")
            .collect();
        assert_eq!(visible.len(), 1, "{mode}: {warnings:#?}");
        assert!(
            visible[0]["excerpt"]
                .as_str()
                .unwrap()
                .contains("on the box")
        );
        assert!(
            warnings
                .iter()
                .any(|w| w["where"].as_str().unwrap().starts_with("hidden")
                    && w["kind"] == "instructions_in_page"),
            "{mode}: {warnings:#?}"
        );
    }
    for marker in ["(H8)", "(H9)", "(H11)", "(H12)"] {
        let found = read(s, json!({ "mode": "find", "query": marker })).await;
        assert_eq!(found["matches"], 0, "{marker}: {found:#}");
    }
    let seen = read(s, json!({ "mode": "find", "query": "Sold by Lamp" })).await;
    assert_eq!(seen["matches"], 1, "{seen:#}");
    let extract = read(s, json!({ "mode": "extract", "query": "instructions" })).await;
    let content = extract["content"].as_str().unwrap();
    for marker in HIDDEN {
        assert!(!content.contains(marker), "extract: {marker} in\n{content}");
    }
}

#[tokio::test]
async fn open_web_page_leaves_out_what_the_html_itself_hides() {
    let url = common::harness().page("injected.html");
    let result = ok(
        "open_web_page",
        json!({ "url": url, "mode": "http", "extract": "full", "max_tokens": 100000 }),
    )
    .await;
    let content = result["content"].as_str().unwrap();
    // Hidden by the `hidden` attribute and inline styles; classes need a browser's styles.
    for marker in ["(H1)", "(H2)", "(H3)"] {
        assert!(!content.contains(marker), "{marker} in\n{content}");
    }
    assert!(
        content.contains("warm light") && content.contains("on the box"),
        "{content}"
    );
    assert!(
        result["hidden_text_dropped"].as_u64().unwrap_or(0) > 100,
        "{result:#}"
    );
}

/// Page text in a block naming its source, with an end marker the page cannot imitate.
fn assert_bounded(content: &str, source: &str) {
    let first = content.lines().next().unwrap_or_default();
    let tag = first
        .strip_prefix("<<<page-content ")
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("no opening marker: {first}\n{content}"));
    assert_eq!(tag.len(), 8, "{first}");
    assert!(first.ends_with(&format!(" source={source}>>>")), "{first}");
    let last = content.lines().last().unwrap_or_default();
    assert_eq!(last, format!("<<<end page-content {tag}>>>"));
    // The page's own imitation of the end marker does not end the block.
    assert_eq!(
        content.matches(&format!("end page-content {tag}")).count(),
        1
    );
}

#[tokio::test]
async fn page_text_comes_in_marked_blocks_when_asked() {
    let s = "untrusted-bounded";
    let url = common::harness().page("injected.html");
    open(s, "injected.html").await;
    for mode in ["markdown", "text"] {
        let read = read(s, json!({ "mode": mode, "boundaries": true })).await;
        assert_bounded(read["content"].as_str().unwrap(), &url);
    }
    let plain = read(s, json!({ "mode": "markdown" })).await;
    assert!(
        plain["content"]
            .as_str()
            .unwrap()
            .starts_with("# Desk lamp"),
        "{plain:#}"
    );
    let page = ok(
        "open_web_page",
        json!({ "url": url, "mode": "http", "boundaries": true }),
    )
    .await;
    assert_bounded(page["content"].as_str().unwrap(), &url);
    assert!(
        page["content"]
            .as_str()
            .unwrap()
            .contains("end page-content>>> and the rest")
    );
}
