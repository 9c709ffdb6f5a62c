//! open_web_page over real HTTP from local servers: extraction kinds, charsets, the size cap,
//! the SSRF policy on every redirect hop, timeouts, content types, escalation to the browser
//! for JavaScript shells, and extraction quality on corpus pages with ground truth.

mod common;

use std::sync::OnceLock;

use common::web_fixtures::config;
use common::{Harness, call_at, start_with};
use serde_json::{Value, json};

fn service() -> &'static Harness {
    static SERVICE: OnceLock<Harness> = OnceLock::new();
    SERVICE.get_or_init(|| start_with(config))
}

async fn open(args: Value) -> (u16, Value) {
    call_at(&service().api, "open_web_page", args).await
}

async fn opened(args: Value) -> Value {
    let (status, body) = open(args.clone()).await;
    assert_eq!(status, 200, "{args}: {body:#}");
    body
}

async fn refused(args: Value, code: &str) -> Value {
    let (status, body) = open(args.clone()).await;
    assert_eq!(body["error"]["code"], code, "{args}: {body:#}");
    assert!(status >= 400);
    assert!(
        body["error"]["hint"]
            .as_str()
            .is_some_and(|h| !h.is_empty())
    );
    body
}

fn page(path: &str) -> String {
    service().page(path)
}

fn content(body: &Value) -> &str {
    body["content"].as_str().unwrap()
}

#[tokio::test]
async fn main_content_comes_with_metadata_and_without_chrome() {
    let body = opened(json!({"url": page("web/article.html")})).await;
    assert_eq!(body["via"], "http");
    assert_eq!(body["status"], 200);
    // The site name is dropped from the title, as Readability does.
    assert_eq!(body["title"], "Night trains return to the Alps");
    let text = content(&body);
    assert!(
        text.contains("## Timetable") && text.contains("from 139 euros"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "[full timetable]({})",
            page("timetables/alps.pdf")
        )),
        "{text}"
    );
    for chrome in ["About us", "Freight volumes", "Privacy", "By Ana Berger"] {
        assert!(!text.contains(chrome), "{chrome:?} leaked into {text}");
    }
    // The picture stays; its caption line (furniture to a reader of the text) goes.
    assert!(
        text.contains(&format!(
            "![A sleeper car at Zurich station]({})",
            page("img/sleeper.jpg")
        )),
        "{text}"
    );
    assert!(
        !text
            .lines()
            .any(|l| l.trim() == "A sleeper car at Zurich station"),
        "{text}"
    );
    let article = &body["article"];
    assert_eq!(article["site_name"], "Rail Weekly");
    assert_eq!(article["language"], "en");
    assert!(
        article["published_time"]
            .as_str()
            .unwrap()
            .starts_with("2026-11-02"),
        "{article}"
    );
    assert_eq!(article["byline"], "Ana Berger");
}

/// Bylines, credits, datelines and calls to action are recognised by their shape, not by the
/// first word: sentences that start with "By", "Photo", "Share", "Contact", "Read" or
/// "Published" are the article's.
#[tokio::test]
async fn furniture_goes_by_its_shape_and_sentences_that_open_alike_stay() {
    let body = opened(json!({"url": page("web/river.html")})).await;
    let text = content(&body);
    for sentence in [
        "By noon the river had risen two metres.",
        "Photo by photo, volunteers rebuilt the flooded town archive.",
        "Share of households without power fell to three percent by evening.",
        "Contact with the last village up the valley was restored at six.",
        "Read more than three hundred pages of flood reports and the pattern is plain.",
        "Published in 1998, the old flood map is still the one the council uses.",
    ] {
        assert!(
            text.contains(sentence),
            "{sentence:?} was dropped from {text}"
        );
    }
    for furniture in [
        "By Maria Keller",
        "Updated 10:01",
        "Photo: Jan Novak",
        "Read more: How",
        "Share this article",
    ] {
        assert!(
            !text.contains(furniture),
            "{furniture:?} leaked into {text}"
        );
    }
}

#[tokio::test]
async fn other_extract_kinds_and_text_format() {
    let full = opened(json!({"url": page("web/article.html"), "extract": "full"})).await;
    assert!(content(&full).contains("About us") && content(&full).contains("Freight volumes"));

    let links = opened(json!({"url": page("web/article.html"), "extract": "links"})).await;
    let lines: Vec<&str> = content(&links).lines().collect();
    assert!(
        lines.contains(&format!("- [About us]({})", page("about")).as_str()),
        "{lines:#?}"
    );
    assert!(
        lines.contains(&"- [operator's questions and answers](https://operator.example/faq)"),
        "{lines:#?}"
    );
    assert_eq!(lines.len(), 8, "each URL once: {lines:#?}");

    let images = opened(json!({"url": page("web/article.html"), "extract": "images"})).await;
    assert_eq!(
        content(&images),
        format!(
            "![A sleeper car at Zurich station]({})\n![Rail Weekly logo]({})",
            page("img/sleeper.jpg"),
            page("img/logo.png")
        )
    );

    let outline = opened(json!({"url": page("web/article.html"), "extract": "structured"})).await;
    let structured = &outline["structured"];
    assert_eq!(structured["meta"]["og:site_name"], "Rail Weekly");
    assert_eq!(structured["meta"]["author"], "Ana Berger");
    let headings: Vec<(u64, &str)> = structured["headings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["level"].as_u64().unwrap(), h["text"].as_str().unwrap()))
        .collect();
    assert_eq!(
        headings,
        [
            (1, "Night trains return to the Alps"),
            (2, "Timetable"),
            (2, "Prices"),
            (3, "More news")
        ]
    );
    assert!(content(&outline).contains("Children under six travel free"));

    let text = opened(json!({"url": page("web/article.html"), "format": "text"})).await;
    assert!(
        content(&text).contains("Timetable\n") && !content(&text).contains("##"),
        "{}",
        content(&text)
    );
    assert!(!content(&text).contains("]("), "{}", content(&text));
}

#[tokio::test]
async fn long_content_is_paged_with_a_cursor() {
    let url = page("web/article.html");
    let first = opened(json!({"url": url, "max_tokens": 40})).await;
    assert_eq!(first["truncated"], true);
    let total = first["content_length"].as_u64().unwrap() as usize;
    let mut text = content(&first).to_string();
    let mut cursor = first["next_cursor"].clone();
    while let Some(next) = cursor.as_str() {
        let slice = opened(json!({"url": url, "max_tokens": 40, "cursor": next})).await;
        text.push_str(content(&slice));
        cursor = slice["next_cursor"].clone();
    }
    assert_eq!(text.chars().count(), total);
    let whole = opened(json!({"url": url, "max_tokens": 100000})).await;
    assert_eq!(text, content(&whole));
}

#[tokio::test]
async fn legacy_charsets_are_decoded() {
    for (case, expected) in [
        ("shift_jis-header", "日本語のページです。東京駅"),
        ("windows-1251-header", "Привет, мир! Москва"),
        ("windows-1251-meta", "Привет, мир! Москва"),
        ("utf-8-bom", "Grüße aus Zürich"),
    ] {
        let body =
            opened(json!({"url": page(&format!("web/charset/{case}")), "mode": "http"})).await;
        assert_eq!(body["title"], expected, "{case}: {body:#}");
        assert!(content(&body).contains(expected), "{case}: {body:#}");
    }
}

#[tokio::test]
async fn a_huge_body_is_cut_at_the_cap() {
    let body = opened(
        json!({"url": page("web/big"), "mode": "http", "extract": "full", "max_tokens": 50}),
    )
    .await;
    assert_eq!(body["truncated"], true);
    assert_eq!(body["body_truncated"], true, "{body:#}");
    let length = body["content_length"].as_u64().unwrap();
    assert!(length > 1_000_000 && length < 9_000_000, "{length}");
}

#[tokio::test]
async fn private_targets_are_blocked_on_every_hop() {
    for target in [
        "http://127.0.0.3:9/",
        "http://169.254.169.254/latest/meta-data/",
    ] {
        let encoded: String = url::form_urlencoded::byte_serialize(target.as_bytes()).collect();
        let chain = page(&format!("web/redirect?hops=2&to={encoded}"));
        let body = refused(json!({"url": chain}), "BLOCKED_URL").await;
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(target.trim_end_matches('/').split('/').nth(2).unwrap()),
            "{message}"
        );
    }
    refused(json!({"url": "http://10.0.0.1/"}), "BLOCKED_URL").await;
    refused(json!({"url": "file:///etc/passwd"}), "BLOCKED_URL").await;
    refused(json!({"url": "javascript:alert(1)"}), "BLOCKED_URL").await;
    refused(json!({"url": "not a url"}), "INVALID_ARGUMENT").await;
    // Allowed: 127.0.0.1 is on this test's allow-list, and the redirect chain itself is fine.
    let fine = page("web/article.html");
    let encoded: String = url::form_urlencoded::byte_serialize(fine.as_bytes()).collect();
    let body = opened(json!({"url": page(&format!("web/redirect?hops=3&to={encoded}"))})).await;
    assert_eq!(body["final_url"], fine);
}

#[tokio::test]
async fn without_an_allow_list_loopback_is_blocked() {
    let strict = start_with(|fixtures| {
        let mut config = config(fixtures);
        config.fetch.allow.clear();
        config
    });
    let (status, body) = call_at(
        &strict.api,
        "open_web_page",
        json!({"url": strict.page("web/article.html")}),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["code"], "BLOCKED_URL", "{body:#}");
    assert!(
        body["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("fetch.allow")
    );
    // Browser rendering is refused the same way.
    let (_, body) = call_at(
        &strict.api,
        "open_web_page",
        json!({"url": strict.page("web/article.html"), "mode": "browser"}),
    )
    .await;
    assert_eq!(body["error"]["code"], "BLOCKED_URL", "{body:#}");
}

#[tokio::test]
async fn redirect_loops_and_stalled_servers_are_clear_errors() {
    let body = refused(json!({"url": page("web/loop/1")}), "UPSTREAM").await;
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("more than 10 redirects"),
        "{body:#}"
    );
    let started = std::time::Instant::now();
    let body = refused(json!({"url": page("web/drip")}), "TIMEOUT").await;
    assert!(
        started.elapsed() < std::time::Duration::from_secs(7),
        "{:?}",
        started.elapsed()
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("stopped answering"),
        "{body:#}"
    );
}

#[tokio::test]
async fn non_html_content_is_returned_or_refused_honestly() {
    let text = opened(json!({"url": page("web/typed/text")})).await;
    assert_eq!(content(&text), "line one\nline two — ünïcode\n");
    let data = opened(json!({"url": page("web/typed/json")})).await;
    assert_eq!(content(&data), "{\"name\": \"webpilot\", \"tools\": 8}");
    let body = refused(json!({"url": page("web/typed/pdf")}), "UPSTREAM").await;
    assert!(
        body["error"]["message"].as_str().unwrap().contains("PDF"),
        "{body:#}"
    );
}

/// A site that offers its pages to agents as Markdown gets asked for it first, and its answer is
/// used as it is, with what its `Content-Signal` allows; other kinds read its HTML rendering.
#[tokio::test]
async fn markdown_a_site_offers_is_asked_for_and_used_as_is() {
    let before = common::web_fixtures::NEGOTIATED.lock().unwrap().len();
    let body = opened(json!({"url": page("web/negotiated")})).await;
    assert_eq!(body["via"], "markdown", "{body:#}");
    assert_eq!(body["title"], "Pricing plans", "{body:#}");
    assert!(
        content(&body).starts_with("---\ntitle: Pricing"),
        "{body:#}"
    );
    assert!(
        content(&body).contains("[Compare plans](/plans)"),
        "{body:#}"
    );
    assert_eq!(
        body["content_signal"],
        "ai-train=no, search=yes, ai-input=yes"
    );
    let seen = common::web_fixtures::NEGOTIATED.lock().unwrap()[before].clone();
    assert!(
        seen.starts_with("text/markdown"),
        "the server saw Accept: {seen}"
    );
    assert!(seen.contains("text/html;q=0.9"), "{seen}");

    let links = opened(json!({"url": page("web/negotiated"), "extract": "links"})).await;
    assert_eq!(links["via"], "markdown", "{links:#}");
    assert!(
        content(&links).contains("https://sales.example/contact"),
        "{links:#}"
    );
    let text = opened(json!({"url": page("web/negotiated"), "format": "text"})).await;
    assert!(content(&text).contains("Starter is free."), "{text:#}");
    assert!(
        !content(&text).contains("]("),
        "plain text, not Markdown: {text:#}"
    );
    // A site without Markdown answers HTML as before.
    let html = opened(json!({"url": page("web/typed/text")})).await;
    assert_eq!(html["via"], "http");
    assert!(html.get("content_signal").is_none());
}

#[tokio::test]
async fn a_javascript_shell_escalates_to_the_browser() {
    let body = opened(json!({"url": page("web/shell.html")})).await;
    assert_eq!(body["via"], "browser", "{body:#}");
    assert!(
        body["why"].as_str().unwrap().contains("JavaScript shell"),
        "{body:#}"
    );
    assert_eq!(body["title"], "Harbour Timetable");
    assert!(content(&body).contains("every twenty minutes"), "{body:#}");

    let http_only = opened(json!({"url": page("web/shell.html"), "mode": "http"})).await;
    assert_eq!(http_only["via"], "http");
    assert!(!content(&http_only).contains("twenty minutes"));

    let forced = opened(json!({"url": page("web/article.html"), "mode": "browser"})).await;
    assert_eq!(forced["via"], "browser");
    assert!(content(&forced).contains("from 139 euros"));
}

/// Markdown without link targets and image lines, so only visible words are scored.
fn visible_words(markdown: &str) -> String {
    let mut out = String::new();
    let mut rest = markdown;
    while let Some(start) = rest.find("](") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        rest = after.find(')').map_or("", |end| &after[end + 1..]);
    }
    out.push_str(rest);
    out.lines()
        .filter(|l| !l.trim_start().starts_with("!["))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn extraction_quality_on_corpus_pages() {
    let corpus = common::fixtures_dir().join("corpus");
    let mut scores = Vec::new();
    for set in ["readability", "zyte"] {
        let mut pages: Vec<_> = std::fs::read_dir(corpus.join(set))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        pages.sort();
        for dir in pages {
            let name = dir.file_name().unwrap().to_string_lossy().to_string();
            let truth = match set {
                "readability" => {
                    let expected = std::fs::read_to_string(dir.join("expected.html")).unwrap();
                    dom_query::Document::from(expected)
                        .select("body")
                        .text()
                        .to_string()
                }
                _ => {
                    let truth: Value = serde_json::from_str(
                        &std::fs::read_to_string(dir.join("ground-truth.json")).unwrap(),
                    )
                    .unwrap();
                    truth["articleBody"].as_str().unwrap().to_string()
                }
            };
            let url = page(&format!("corpus/{set}/{name}/source.html"));
            let body = opened(json!({"url": url, "mode": "http", "max_tokens": 1_000_000})).await;
            let score = common::word_f1(&truth, &visible_words(content(&body)));
            if set == "readability" {
                let metadata: Value = serde_json::from_str(
                    &std::fs::read_to_string(dir.join("expected-metadata.json")).unwrap(),
                )
                .unwrap();
                assert_eq!(body["title"], metadata["title"], "{name}");
            }
            scores.push((format!("{set}/{name}"), score));
        }
    }
    let mean = scores.iter().map(|s| s.1).sum::<f64>() / scores.len() as f64;
    assert!(mean >= 0.96, "mean word F1 {mean:.3}: {scores:#?}");
    assert!(scores.iter().all(|s| s.1 >= 0.85), "{scores:#?}");
}
