//! Documents: pages printed as PDF (`browser_screenshot format=pdf`), PDFs read by
//! `open_web_page` like pages (word F1 against the printed page's own text, headings, paging,
//! links, scans, encryption, damaged files), and downloads by URL with a session's login.

mod common;

use std::time::{Duration, Instant};

use base64::Engine;
use common::{call, client, fails, harness, ok, open, serve_document};
use serde_json::{Value, json};

/// The printed page as bytes, checked to be a PDF.
async fn print(session: &str, fixture: &str, extra: Value) -> (Vec<u8>, Value) {
    open(session, fixture).await;
    let mut args = json!({ "session": session, "format": "pdf" });
    args.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let printed = ok("browser_screenshot", args).await;
    assert_eq!(printed["format"], "application/pdf", "{printed:#}");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(printed["image"].as_str().unwrap())
        .unwrap();
    assert!(bytes.starts_with(b"%PDF-"), "not a PDF");
    assert_eq!(printed["bytes"].as_u64().unwrap() as usize, bytes.len());
    (bytes, printed)
}

/// The page's visible text, as a reader sees it.
async fn visible_text(session: &str) -> String {
    let read = ok(
        "browser_interact",
        json!({ "session": session, "action": "evaluate", "script": "document.body.innerText" }),
    )
    .await;
    read["value"].as_str().unwrap().to_string()
}

/// The words a reader sees: Markdown comments (page markers) and soft hyphens out.
fn visible(text: &str) -> String {
    text.split("<!--")
        .enumerate()
        .map(|(i, part)| {
            if i == 0 {
                part
            } else {
                part.split_once("-->").map_or("", |(_, rest)| rest)
            }
        })
        .collect::<String>()
        .replace('\u{ad}', "")
}

fn word_f1(output: &str, truth: &str) -> f64 {
    common::word_f1(&visible(truth), &visible(output))
}

async fn read_pdf(url: &str, extra: Value) -> Value {
    let mut args = json!({ "url": url, "mode": "http" });
    args.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    ok("open_web_page", args).await
}

#[tokio::test]
async fn printed_pages_read_back_with_their_words_headings_and_tables() {
    let s = "doc-round-trip";
    let cases = [
        (
            "article",
            vec![
                "# Field Notes on River Restoration",
                "## Why the bends matter",
                "### Costs and maintenance",
            ],
        ),
        ("columns", vec!["# The Night Market Review"]),
        (
            "table",
            vec![
                "# Quarterly Shipping Figures",
                "| Greyhaven | 27480 | up eleven percent |",
            ],
        ),
        (
            "hyphens",
            vec!["# Hyphenation Sample", "comprehensive documentation"],
        ),
    ];
    for (name, expected) in cases {
        let (bytes, printed) = print(s, &format!("pdf/{name}.html"), json!({})).await;
        assert_eq!(printed["pages"], 1, "{name}: {printed:#}");
        let truth = visible_text(s).await;
        let url = serve_document(&format!("{name}.pdf"), bytes, "application/pdf").await;
        let page = read_pdf(&url, json!({ "max_tokens": 20000 })).await;
        let content = page["content"].as_str().unwrap();
        let f1 = word_f1(content, &truth);
        assert!(
            f1 >= 0.95,
            "{name}: word F1 {f1:.3}\n{content}\n---\n{truth}"
        );
        for needle in expected {
            assert!(
                content.contains(needle),
                "{name}: no {needle:?} in\n{content}"
            );
        }
        assert!(content.starts_with("<!-- page 1 -->"), "{content}");
        assert_eq!(page["pdf"]["pages"], 1, "{page:#}");
        assert!(!page["title"].as_str().unwrap().is_empty(), "{page:#}");
        // Chromium writes the document's title and when it was made into the PDF.
        assert_eq!(page["pdf"]["title"], page["title"], "{page:#}");
        let created = page["pdf"]["created"].as_str().unwrap_or_default();
        assert!(
            created.len() == 25 && created.as_bytes()[10] == b'T',
            "created {created:?}"
        );
        assert!(page["pdf"].get("no_text_layer").is_none(), "{page:#}");
    }
}

#[tokio::test]
async fn crawls_read_pdfs_like_pages() {
    let s = "doc-crawl";
    let (bytes, _) = print(s, "pdf/table.html", json!({})).await;
    let url = serve_document("crawled.pdf", bytes, "application/pdf").await;
    let api = &harness().api;
    let args = json!({ "urls": [url], "mode": "http" });
    let id = common::crawl_until_finished(api, args, Duration::from_secs(60)).await;
    let status = ok("crawl_status", json!({ "task_id": id })).await;
    assert_eq!(status["errors"], json!([]), "{status:#}");
    let page = &status["results"][0]["result"];
    assert_eq!(page["pdf"]["pages"], 1, "{status:#}");
    assert!(
        page["content"]
            .as_str()
            .unwrap()
            .contains("| Northport | 48200 |"),
        "{page:#}"
    );
}

#[tokio::test]
async fn thirty_pages_page_through_the_token_budget_once_each() {
    let s = "doc-long";
    let (bytes, printed) = print(s, "pdf/long.html", json!({ "paper": "Letter" })).await;
    let pages = printed["pages"].as_u64().unwrap() as usize;
    assert!(pages >= 30, "{printed:#}");
    let truth = visible_text(s).await;
    // Served as bytes of no declared type: the reader knows a PDF by its header.
    let url = serve_document("long.pdf", bytes, "application/octet-stream").await;
    let mut cursor: Option<String> = None;
    let mut slices = Vec::new();
    loop {
        let mut extra = json!({ "max_tokens": 1500 });
        if let Some(cursor) = &cursor {
            extra["cursor"] = json!(cursor);
        }
        let page = read_pdf(&url, extra).await;
        assert_eq!(page["pdf"]["pages"].as_u64().unwrap() as usize, pages);
        slices.push(page["content"].as_str().unwrap().to_string());
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
        assert!(slices.len() < 100, "paging does not end");
    }
    assert!(slices.len() > 3, "{} slices", slices.len());
    let whole = slices.concat();
    for number in 1..=pages {
        let marker = format!("<!-- page {number} -->");
        assert_eq!(whole.matches(&marker).count(), 1, "{marker} in {whole}");
    }
    assert!(!whole.contains(&format!("<!-- page {} -->", pages + 1)));
    let f1 = word_f1(&whole, &truth);
    assert!(f1 >= 0.95, "word F1 {f1:.3}");
    for chapter in [1, 15, 30] {
        assert!(
            whole.contains(&format!("## Chapter {chapter}: The")),
            "chapter {chapter} heading"
        );
    }
}

#[tokio::test]
async fn links_scans_and_landscape() {
    let s = "doc-links";
    let (bytes, _) = print(s, "pdf/linked.html", json!({ "landscape": true })).await;
    let size = pdf_page_size(&bytes);
    assert!(size.0 > size.1, "landscape page is {size:?}");
    let url = serve_document("linked.pdf", bytes, "application/pdf").await;
    let links = read_pdf(&url, json!({ "extract": "links" })).await;
    let listed = links["content"].as_str().unwrap();
    for target in [
        "https://example.org/guide/first-steps",
        "https://docs.example.net/reference",
    ] {
        assert!(listed.contains(&format!("]({target})")), "{listed}");
    }

    let (scan, _) = print(s, "pdf/image-only.html", json!({})).await;
    let url = serve_document("scan.pdf", scan, "application/pdf").await;
    let page = read_pdf(&url, json!({})).await;
    assert_eq!(page["pdf"]["no_text_layer"], true, "{page:#}");
    assert!(!page["content"].as_str().unwrap().contains("invoice"));
}

/// Width and height of the first `/MediaBox` (points).
fn pdf_page_size(bytes: &[u8]) -> (f64, f64) {
    let text = String::from_utf8_lossy(bytes);
    let start = text.find("/MediaBox").expect("a media box") + "/MediaBox".len();
    let numbers: Vec<f64> = text[start..]
        .trim_start()
        .trim_start_matches('[')
        .split(|c: char| c == ']' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .take(4)
        .map(|n| n.parse().unwrap())
        .collect();
    (numbers[2] - numbers[0], numbers[3] - numbers[1])
}

#[tokio::test]
async fn encrypted_and_damaged_pdfs_are_clear_answers_in_time() {
    let s = "doc-damaged";
    let (bytes, _) = print(s, "pdf/article.html", json!({})).await;

    let dir = tempfile::tempdir().unwrap();
    let (plain, locked) = (dir.path().join("plain.pdf"), dir.path().join("locked.pdf"));
    std::fs::write(&plain, &bytes).unwrap();
    let status = std::process::Command::new("qpdf")
        .args(["--encrypt", "reader-secret", "owner-secret", "256", "--"])
        .arg(&plain)
        .arg(&locked)
        .status()
        .expect("qpdf (scripts/setup installs it)");
    assert!(status.success());
    let url = serve_document(
        "locked.pdf",
        std::fs::read(&locked).unwrap(),
        "application/pdf",
    )
    .await;
    let error = fails(
        "open_web_page",
        json!({ "url": url, "mode": "http" }),
        "UPSTREAM",
    )
    .await;
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("encrypted"), "{error:#}");
    assert!(!error["error"]["hint"].as_str().unwrap().is_empty());

    // Fifty damaged copies: cut short or with bytes flipped, each read or refused in time.
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for variant in 0..50 {
        let mut damaged = bytes.clone();
        if variant % 2 == 0 {
            let keep = (next() as usize) % damaged.len();
            damaged.truncate(keep.max(1));
        } else {
            for _ in 0..(1 + next() % 8) {
                let at = (next() as usize) % damaged.len();
                damaged[at] ^= 1 << (next() % 8);
            }
        }
        let url = serve_document(
            &format!("damaged-{variant}.pdf"),
            damaged,
            "application/pdf",
        )
        .await;
        let started = Instant::now();
        let (status, body) = call("open_web_page", json!({ "url": url, "mode": "http" })).await;
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(10),
            "variant {variant} took {took:?}"
        );
        match status {
            200 => assert!(body["pdf"]["pages"].is_u64(), "{variant}: {body:#}"),
            _ => {
                assert_eq!(body["error"]["code"], "UPSTREAM", "{variant}: {body:#}");
                assert!(!body["error"]["hint"].as_str().unwrap_or("").is_empty());
            }
        }
    }
}

#[tokio::test]
async fn format_pdf_refuses_image_options() {
    let s = "doc-options";
    open(s, "pdf/table.html").await;
    for (field, value) in [
        ("annotate", json!(true)),
        ("ref", json!(1)),
        ("quality", json!(50)),
    ] {
        let mut args = json!({ "session": s, "format": "pdf" });
        args[field] = value;
        let error = fails("browser_screenshot", args, "INVALID_ARGUMENT").await;
        assert!(
            error["error"]["message"].as_str().unwrap().contains(field),
            "{error:#}"
        );
    }
    fails(
        "browser_screenshot",
        json!({ "session": s, "paper": "A4" }),
        "INVALID_ARGUMENT",
    )
    .await;
    // Saved beside screenshots, with the document's extension.
    let saved = ok(
        "browser_screenshot",
        json!({ "session": s, "format": "pdf", "save": "shipping" }),
    )
    .await;
    let path = saved["saved"].as_str().unwrap();
    assert!(path.ends_with("screenshots/shipping.pdf"), "{saved:#}");
    assert!(std::fs::read(path).unwrap().starts_with(b"%PDF-"));
    // The raw document to a client that asks for it.
    let response = client()
        .post(format!("{}/api/tools/browser_screenshot", harness().api))
        .header("accept", "application/pdf")
        .json(&json!({ "session": s, "format": "pdf" }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], "application/pdf");
    assert!(response.bytes().await.unwrap().starts_with(b"%PDF-"));
}

#[tokio::test]
async fn downloads_by_url_carry_the_session_login() {
    let s = "doc-download";
    let h = harness();
    let (bytes, _) = print(s, "pdf/table.html", json!({})).await;
    serve_document("statement.pdf", bytes.clone(), "application/pdf").await;
    let url = format!("{}/members/statement.pdf", h.fixtures);

    // Not logged in: the site hides the file.
    let error = fails(
        "browser_interact",
        json!({ "session": s, "action": "download", "url": url }),
        "UPSTREAM",
    )
    .await;
    assert!(
        error["error"]["message"].as_str().unwrap().contains("404"),
        "{error:#}"
    );

    // Logged in through the site's form: the same URL gives the file.
    open(s, "login").await;
    let lines = common::element_lines(s).await;
    for (field, text) in [("Username", "alice"), ("Password", "wonderland")] {
        ok(
            "browser_interact",
            json!({ "session": s, "action": "type", "ref": common::ref_of(&lines, field), "text": text }),
        )
        .await;
    }
    ok(
        "browser_interact",
        json!({ "session": s, "action": "click", "ref": common::ref_of(&lines, "Sign in") }),
    )
    .await;
    let page_before = common::page_text(s).await;
    let done = ok(
        "browser_interact",
        json!({ "session": s, "action": "download", "url": url }),
    )
    .await;
    let saved = &done["download"];
    let path = std::path::PathBuf::from(saved["path"].as_str().unwrap());
    assert!(
        path.ends_with(format!("downloads/{s}/members-statement.pdf")),
        "{done:#}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    assert_eq!(saved["bytes"].as_u64().unwrap() as usize, bytes.len());
    assert_eq!(saved["mime"], "application/pdf");
    use sha2::Digest;
    let digest = sha2::Sha256::digest(&bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(saved["sha256"], hex);
    assert!(saved.get("truncated").is_none());
    // The page the agent was on stays as it was.
    assert_eq!(common::page_text(s).await, page_before);

    // A name of the caller's; names that leave the folder are refused.
    let named = ok(
        "browser_interact",
        json!({ "session": s, "action": "download", "url": url, "filename": "q3.pdf" }),
    )
    .await;
    assert!(
        named["download"]["path"]
            .as_str()
            .unwrap()
            .ends_with("/q3.pdf")
    );
    common::invalid(
        "browser_interact",
        json!({ "session": s, "action": "download", "url": url, "filename": "../q3.pdf" }),
        "filename",
    )
    .await;

    // The URL policy applies as for any fetch.
    for blocked in ["http://127.0.0.3:9/secret.pdf", "file:///etc/passwd"] {
        fails(
            "browser_interact",
            json!({ "session": s, "action": "download", "url": blocked }),
            "BLOCKED_URL",
        )
        .await;
    }
    common::invalid(
        "browser_interact",
        json!({ "session": s, "action": "download" }),
        "url",
    )
    .await;
}

#[test]
fn downloads_stop_at_the_size_cap() {
    let mut config = common::loopback_config();
    config.downloads.max_bytes = 100_000;
    let h = common::start(config);
    let api = h.api.clone();
    let url = format!("{}/bytes/1000000", h.fixtures);
    let result = h.block_on(async move {
        common::ok_at(
            &api,
            "browser_interact",
            json!({ "session": "capped", "action": "download", "url": url, "filename": "big.bin" }),
        )
        .await
    });
    let saved = &result["download"];
    assert_eq!(saved["truncated"], true, "{result:#}");
    assert_eq!(saved["bytes"], 100_000);
    let written = std::fs::read(saved["path"].as_str().unwrap()).unwrap();
    assert_eq!(written.len(), 100_000);
    assert!(
        written
            .iter()
            .enumerate()
            .all(|(i, b)| *b == (i % 251) as u8)
    );
}

#[tokio::test]
async fn navigating_to_a_pdf_points_to_the_reader() {
    let s = "doc-navigate";
    let (bytes, _) = print(s, "pdf/article.html", json!({})).await;
    let url = serve_document("navigate.pdf", bytes, "application/pdf").await;
    let arrived = ok("browser_navigate", json!({ "session": s, "target": url })).await;
    let hint = arrived["hint"].as_str().unwrap_or_default();
    assert!(hint.contains("open_web_page"), "{arrived:#}");
    // An ordinary page has no such hint.
    let page = open(s, "pdf/article.html").await;
    assert!(page.get("hint").is_none(), "{page:#}");
}
