//! Hostile inputs that are small or cheap to send but ask for a lot of work: an 822-byte kind of
//! spreadsheet whose repeated rows and columns make a billion cells, a book listing one chapter
//! thousands of times, a 50 MB robots.txt with a chain of sitemap indexes, a cookies.txt of a
//! million lines. Each goes to a `webpilot serve` process of the test's own, and is answered
//! within a budget, saying where it stopped; the process's peak memory stays within the budget
//! of one call, and what the service did is asserted from the servers' side where it shows.

mod common;

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use common::process::Service;
use futures::StreamExt;
use serde_json::{Value, json};

const ODS: &str = "application/vnd.oasis.opendocument.spreadsheet";
const EPUB: &str = "application/epub+zip";

/// A zip package as office programs write it: `mimetype` first and stored, the rest deflated.
fn package(mimetype: &str, parts: &[(&str, &[u8])]) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let stored =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    zip.start_file("mimetype", stored).unwrap();
    zip.write_all(mimetype.as_bytes()).unwrap();
    let deflated = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in parts {
        zip.start_file(*name, deflated).unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

fn sheet(name: &str, rows: &str) -> String {
    format!(r#"<table:table table:name="{name}">{rows}</table:table>"#)
}

/// A row of one text cell, repeated `columns` times, the row repeated `rows` times.
fn repeated_row(text: &str, rows: usize, columns: usize) -> String {
    format!(
        r#"<table:table-row table:number-rows-repeated="{rows}"><table:table-cell table:number-columns-repeated="{columns}" office:value-type="string"><text:p>{text}</text:p></table:table-cell></table:table-row>"#
    )
}

/// Serves `bytes` as `mime` on 127.0.0.1, at the URL it returns.
async fn serve_document(name: &str, bytes: Vec<u8>, mime: &'static str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/{name}", listener.local_addr().unwrap());
    let bytes = Bytes::from(bytes);
    let app = axum::Router::new().fallback(move || {
        let bytes = bytes.clone();
        async move { ([(axum::http::header::CONTENT_TYPE, mime)], bytes) }
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// Reads `url` with `open_web_page` from `service`.
async fn read(service: &Service, url: &str) -> Value {
    let args = json!({"url": url, "mode": "http", "max_tokens": 2000});
    service.reads("open_web_page", args).await
}

#[tokio::test]
async fn a_spreadsheet_repeating_rows_and_columns_into_a_billion_cells_is_cut_saying_where() {
    // A thousand rows, each repeated a thousand times, each of a cell repeated a thousand
    // times: 10^9 cells from a few kilobytes.
    let bomb = repeated_row("cell", 1_000, 1_000).repeat(1_000);
    let content = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.2"><office:body><office:spreadsheet>{}{}{}</office:spreadsheet></office:body></office:document-content>"#,
        sheet("Before", &repeated_row("kept-before", 1, 1)),
        sheet("Bomb", &bomb),
        sheet("After", &repeated_row("left-after", 1, 1)),
    );
    let file = package(ODS, &[("content.xml", content.as_bytes())]);
    assert!(file.len() < 20_000, "{} bytes", file.len());
    let mut service = Service::start();
    let page = read(&service, &serve_document("billion.ods", file, ODS).await).await;

    let cut = page["document"]["cut"].as_str().unwrap_or_default();
    assert_eq!(
        cut, "at table \"Bomb\", row 1000: past the 1000000 cells a read takes",
        "{:#}",
        page["document"]
    );
    let length = page["content_length"].as_u64().unwrap();
    // 999 rows of 1,000 cells ("| cell ") and the sheet before: about 7 million characters,
    // where the file asks for 7 billion.
    assert!(
        (6_000_000..8_000_000).contains(&length),
        "content_length {length}"
    );
    assert!(page["content"].as_str().unwrap().contains("kept-before"));
    assert!(page["next_cursor"].is_string(), "paged: {page:#}");
    service.alive_within_budget();
}

#[tokio::test]
async fn a_book_listing_one_chapter_three_thousand_times_reads_it_once() {
    let words: String = (0..90_000).map(|i| format!("word{} ", i % 997)).collect();
    assert!(words.len() > 500_000 && words.len() < 1_000_000);
    let chapter = format!(
        r#"<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title>The only chapter</title></head><body><h1>Once</h1><p>{words}</p></body></html>"#
    );
    // Three manifest items name the same file; the spine lists them 3,000 times.
    let manifest: String = (0..3)
        .map(|i| format!(r#"<item id="c{i}" href="text/../text/ch.xhtml" media-type="application/xhtml+xml"/>"#))
        .collect();
    let spine: String = (0..3_000)
        .map(|i| format!(r#"<itemref idref="c{}"/>"#, i % 3))
        .collect();
    let opf = format!(
        r#"<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Echo</dc:title></metadata><manifest>{manifest}</manifest><spine>{spine}</spine></package>"#
    );
    let container = r#"<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>"#;
    let file = package(
        EPUB,
        &[
            ("META-INF/container.xml", container.as_bytes()),
            ("OEBPS/content.opf", opf.as_bytes()),
            ("OEBPS/text/ch.xhtml", chapter.as_bytes()),
        ],
    );
    let mut service = Service::start();
    let page = read(&service, &serve_document("echo.epub", file, EPUB).await).await;
    let document = &page["document"];
    assert_eq!(
        document["sections"],
        json!(["The only chapter"]),
        "{document:#}"
    );
    assert_eq!(document.get("cut"), None, "{document:#}");
    let length = page["content_length"].as_u64().unwrap() as usize;
    assert!(
        length > words.len() && length < words.len() + 1_000,
        "the chapter once: {length} characters for {} of text",
        words.len()
    );
    service.alive_within_budget();
}

/// Bytes of robots.txt the test server handed to the connection, and sitemap files asked for.
#[derive(Clone, Default)]
struct Seen {
    robots_bytes: Arc<AtomicUsize>,
    sitemaps: Arc<AtomicUsize>,
}

const ROBOTS_BYTES: usize = 50 * 1024 * 1024;
const CHUNK: usize = 64 * 1024;

/// A 50 MB robots.txt: a rule in its first lines, comment lines, and 1 MiB in (past the 500 KiB
/// a crawler reads) a rule of the same group that would keep `/late/` from being read.
fn robots(origin: String, seen: Seen) -> Body {
    let head = format!("User-agent: *\nDisallow: /private/\nSitemap: {origin}/sitemap/0.xml\n");
    let chunks = ROBOTS_BYTES / CHUNK;
    let stream = futures::stream::iter(0..chunks).map(move |n| {
        let mut chunk = if n == 0 { head.clone() } else { String::new() };
        if n == 16 {
            chunk.push_str("Disallow: /late/\n");
        }
        let filler = "# a comment line, as long as many are\n";
        while chunk.len() + filler.len() <= CHUNK {
            chunk.push_str(filler);
        }
        seen.robots_bytes.fetch_add(chunk.len(), Ordering::SeqCst);
        Ok::<_, std::convert::Infallible>(Bytes::from(chunk))
    });
    Body::from_stream(stream)
}

fn article(title: &str, links: &[&str]) -> axum::response::Html<String> {
    let links: String = links
        .iter()
        .map(|l| format!(r#"<li><a href="{l}">{l}</a></li>"#))
        .collect();
    axum::response::Html(format!(
        "<!doctype html><html><head><title>{title}</title></head><body><main><h1>{title}</h1>\
         <p>This page is part of a small site whose robots.txt is fifty megabytes long, most of \
         it comments, so that a crawler reading all of it would spend its memory there.</p>\
         <ul>{links}</ul></main></body></html>"
    ))
}

/// The site: its pages, its robots.txt, and sitemap indexes each listing the next, forever.
async fn hostile_site(seen: Seen) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let (robots_origin, sitemap_origin) = (origin.clone(), origin.clone());
    let app = axum::Router::new()
        .route(
            "/robots.txt",
            axum::routing::get(move |State(seen): State<Seen>| {
                let origin = robots_origin.clone();
                async move { robots(origin, seen) }
            }),
        )
        .route(
            "/",
            axum::routing::get(|| async { article("Home", &["/a", "/private/b", "/late/c"]) }),
        )
        .route(
            "/sitemap/{file}",
            axum::routing::get(move |State(seen): State<Seen>, Path(file): Path<String>| {
                let origin = sitemap_origin.clone();
                async move {
                    seen.sitemaps.fetch_add(1, Ordering::SeqCst);
                    let n: usize = file.trim_end_matches(".xml").parse().unwrap_or(0);
                    format!(
                        r#"<?xml version="1.0" encoding="UTF-8"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><sitemap><loc>{origin}/sitemap/{}.xml</loc></sitemap></sitemapindex>"#,
                        n + 1
                    )
                }
            }),
        )
        .fallback(|uri: axum::http::Uri| async move { article(uri.path(), &[]) })
        .with_state(seen);
    tokio::spawn(async move { axum::serve(listener, app).await });
    origin
}

#[tokio::test]
async fn a_fifty_megabyte_robots_txt_is_obeyed_from_its_first_500_kib() {
    let seen = Seen::default();
    let origin = hostile_site(seen.clone()).await;
    let mut service = Service::start();
    let api = &service.api;
    let args = json!({
        "urls": [format!("{origin}/")],
        "mode": "http",
        "follow": {"depth": 1, "from_sitemap": true},
    });
    let id = common::crawl_until_finished(api, args, Duration::from_secs(90)).await;
    let report = service
        .reads(
            "crawl_status",
            json!({"task_id": id, "max_tokens": 100_000}),
        )
        .await;
    assert_eq!(report["status"], "completed", "{report:#}");
    let urls = |field: &str| -> Vec<String> {
        let mut urls: Vec<String> = report[field]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|item| item["url"].as_str().unwrap().replace(&origin, ""))
            .collect();
        urls.sort();
        urls
    };
    // The rule in the first lines holds; the one a megabyte in was never read.
    assert_eq!(urls("results"), ["/", "/a", "/late/c"], "{report:#}");
    assert_eq!(urls("skipped"), ["/private/b"], "{report:#}");
    assert_eq!(report["skipped"][0]["reason"], "robots", "{report:#}");
    // The service stopped reading: what the server handed over is the part read and what the
    // sockets' buffers held, far from the whole file.
    let sent = seen.robots_bytes.load(Ordering::SeqCst);
    assert!(sent < ROBOTS_BYTES / 4, "{sent} bytes of robots.txt sent");
    // The sitemap indexes list one another without end: the task reads 50 of them.
    assert_eq!(seen.sitemaps.load(Ordering::SeqCst), 50);
    service.alive_within_budget();
}

#[tokio::test]
async fn a_million_line_cookies_txt_is_refused_and_the_saved_profile_kept() {
    let line =
        |name: &str, value: &str| format!("127.0.0.1\tFALSE\t/\tFALSE\t0\t{name}\t{value}\n");
    let saved = format!("# Netscape HTTP Cookie File\n{}", line("sid", "kept-value"));
    let mut service = Service::start();
    let imported = service
        .reads(
            "browser_cookies",
            json!({"action": "import", "name": "capped", "content": saved}),
        )
        .await;
    assert_eq!(imported["cookies"], 1, "{imported:#}");

    let mut huge = String::from("# Netscape HTTP Cookie File\n");
    for i in 0..1_000_000 {
        huge.push_str(&line(&format!("c{i}"), "v"));
    }
    let refused = service
        .refuses(
            "browser_cookies",
            json!({"action": "import", "name": "capped", "content": huge}),
            "LIMIT",
        )
        .await;
    let error = &refused["error"];
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("1000000 cookies") && message.contains("10000"),
        "{error:#}"
    );
    let hint = error["hint"].as_str().unwrap();
    assert!(hint.contains("at most 10000 cookies"), "{error:#}");

    // The profile saved before is the one that loads.
    let session = "capped-cookies";
    let loaded = service
        .reads(
            "browser_cookies",
            json!({"session": session, "action": "load", "name": "capped"}),
        )
        .await;
    assert_eq!(loaded["loaded"], 1, "{loaded:#}");
    let listed = service
        .reads(
            "browser_cookies",
            json!({"session": session, "action": "list", "show_values": true}),
        )
        .await;
    assert_eq!(listed["count"], 1, "{listed:#}");
    assert_eq!(listed["cookies"][0]["name"], "sid");
    assert_eq!(listed["cookies"][0]["value"], "kept-value");
    service.alive_within_budget();
}
