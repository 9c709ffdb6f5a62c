//! Hostile pages as attackers write them, served by the test to a `webpilot serve` process of its
//! own: 20,000 nested tables, 100,000 nested `div`s, an XPath and a CSS schema over 2,000 nested
//! `div`s, 50,000 nested list items built by script in a cross-site frame. Every call gets an
//! answer (content or a typed error), the process stays up (a stack overflow would abort it:
//! each page goes through every read mode), `/healthz` answers throughout, its peak memory
//! stays within the budget, and its resident memory comes back after the spike.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::response::IntoResponse;
use common::eventually;
use common::process::Service;
use serde_json::json;

/// `levels` elements opened by `open` and closed by `close`, with `inner` at the bottom,
/// between a first and a last paragraph.
fn nested(open: &str, close: &str, levels: usize, inner: &str) -> String {
    format!(
        "<!doctype html><html><head><title>Deep</title></head><body><h1>Top of the page</h1>\
         <p>A first paragraph that a reader keeps, long enough to count as content.</p>{}{inner}{}\
         <p>The last paragraph.</p></body></html>",
        open.repeat(levels),
        close.repeat(levels)
    )
}

/// A page that nests `levels` list items by script, in a frame on another site.
fn scripted_list(levels: usize) -> String {
    format!(
        "<!doctype html><title>List</title><p>Frame top</p><ul id=root></ul><script>\
         let at = document.getElementById('root');\
         for (let i = 0; i < {levels}; i++) {{\
           const li = document.createElement('li'); li.append('item ' + i);\
           const ul = document.createElement('ul'); li.append(ul); at.append(li); at = ul;\
         }}</script>"
    )
}

/// The hostile site: its pages by path, on 127.0.0.1 and (another site) `localhost`.
struct Site {
    origin: String,
    cross_site: String,
}

impl Site {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let cross_site = format!("http://localhost:{port}");
        let mut pages: HashMap<String, String> = HashMap::new();
        pages.insert(
            "/tables".into(),
            nested("<table><tr><td>", "</td></tr></table>", 20_000, "cell"),
        );
        pages.insert(
            "/divs".into(),
            nested("<div>", "</div>", 100_000, "Innermost"),
        );
        pages.insert(
            "/divs-2000".into(),
            nested("<div class=d>", "</div>", 2_000, "x"),
        );
        pages.insert("/list".into(), scripted_list(50_000));
        pages.insert("/small".into(), nested("<div>", "</div>", 3, "small"));
        pages.insert(
            "/framed".into(),
            format!("<!doctype html><title>Framed</title><h1>Host</h1><iframe src='{cross_site}/list' width=600 height=400></iframe>"),
        );
        pages.insert(
            "/scripted".into(),
            scripted_list(1_000).replace("<title>List</title>", "<title>Scripted</title>"),
        );
        let pages = Arc::new(pages);
        let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
            let page = pages.get(uri.path()).cloned();
            async move {
                match page {
                    Some(html) => axum::response::Html(html).into_response(),
                    None => (axum::http::StatusCode::NOT_FOUND, "no such page").into_response(),
                }
            }
        });
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self {
            origin: format!("http://127.0.0.1:{port}"),
            cross_site,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.origin)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_pages_get_answers_and_the_service_survives_them() {
    let site = Site::start().await;
    let mut service = Service::start();
    let small = json!({"url": site.url("/small"), "mode": "http"});
    service.reads("open_web_page", small).await;
    let before = service.memory_kib("VmRSS");

    // Over HTTP, in every kind and format: nothing nests deeper than the limit, and the
    // result says how much was left out.
    for path in ["/tables", "/divs"] {
        for extract in ["main", "full", "links", "images", "structured"] {
            for format in ["markdown", "text"] {
                let args = json!({"url": site.url(path), "mode": "http", "extract": extract,
                                  "format": format});
                let page = service.reads("open_web_page", args).await;
                assert!(
                    page["too_deep"].as_u64().unwrap_or(0) > 10_000,
                    "{path} {extract}: {page:#}"
                );
                if matches!(extract, "main" | "full" | "structured") {
                    let content = page["content"].as_str().unwrap();
                    assert!(
                        content.contains("first paragraph"),
                        "{path} {extract}: {content}"
                    );
                    assert!(
                        !content.contains("Innermost"),
                        "{path} {extract}: {content}"
                    );
                }
            }
        }
    }

    // Selector schemas over 2,000 nested divs: XPath's descendants of descendants and CSS's.
    for field in ["count(.//div//div)", "div div div"] {
        let args = json!({"url": site.url("/divs-2000"), "mode": "http", "extract": "json",
                          "schema": {"fields": {"found": field}}});
        let page = service.reads("open_web_page", args).await;
        assert!(!page["data"]["found"].is_null(), "{field}: {page:#}");
    }

    // The heap's freed memory goes back to the system within seconds.
    eventually(
        "resident memory back near where it was",
        Duration::from_secs(30),
        || {
            let rss = service.memory_kib("VmRSS");
            async move { rss <= 2 * before }
        },
    )
    .await;

    // Through the browser: a page deeper than Blink's parser nests (2,000 levels), built by
    // script, rendered for open_web_page and read in every mode; then 100,000 levels in a
    // cross-site frame (whose renderer gives up: the frame is then empty).
    let args = json!({"url": site.url("/scripted"), "mode": "browser", "extract": "full"});
    let page = service.reads("open_web_page", args).await;
    let content = page["content"].as_str().unwrap();
    assert!(
        content.contains("Frame top") && content.contains("item 3"),
        "{page:#}"
    );
    assert!(page["too_deep"].as_u64().unwrap_or(0) > 500, "{page:#}");
    let session = json!("deep");
    for path in ["/scripted", "/framed"] {
        let navigate = json!({"session": session, "target": site.url(path)});
        service.reads("browser_navigate", navigate).await;
        for mode in [
            "elements", "markdown", "text", "html", "find", "extract", "json",
        ] {
            let mut args = json!({"session": session, "mode": mode, "query": "item 4"});
            if mode == "json" {
                args["schema"] = json!({"fields": {"items": {"selector": "li", "all": true}}});
            }
            let read = service.answers("browser_read", args).await;
            if path == "/scripted" && mode == "markdown" {
                assert!(read["too_deep"].as_u64().unwrap_or(0) > 500, "{read:#}");
                assert!(
                    read["content"].as_str().unwrap().contains("item 3"),
                    "{read:#}"
                );
            }
        }
    }
    assert!(site.cross_site.starts_with("http://localhost:"));

    service.alive_within_budget();
}
