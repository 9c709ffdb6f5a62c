//! browser_navigate against real Chromium and fixture pages on 127.0.0.1.

mod common;

use std::time::{Duration, Instant};

use common::{fails, harness, ok, open};
use serde_json::json;

#[tokio::test]
async fn spa_is_ready_with_its_rendered_content_without_wait_for() {
    let result = open("nav-spa", "spa.html").await;
    assert_eq!(result["status"], 200);
    assert_eq!(result["ready"]["by"], "quiet", "{result:#}");
    let elements = result["elements"].as_str().unwrap();
    assert!(
        elements.contains("button \"Add Item 01 to cart\""),
        "{elements}"
    );
    let markdown = ok(
        "browser_read",
        json!({ "session": "nav-spa", "mode": "markdown" }),
    )
    .await;
    let content = markdown["content"].as_str().unwrap();
    assert!(content.contains("Showing 50 of 50 items"), "{content}");
    assert!(content.contains("Item 50"), "{content}");
    for field in ["session", "tab", "url", "title", "elapsed_ms"] {
        assert!(
            markdown.get(field).is_some(),
            "{field} missing: {markdown:#}"
        );
    }
}

#[tokio::test]
async fn content_behind_fetch_timer_and_frame_is_waited_for() {
    let result = open("nav-late", "late.html").await;
    assert_eq!(result["ready"]["by"], "quiet", "{result:#}");
    assert!(
        result["elements"].as_str().unwrap().contains("Late button"),
        "{result:#}"
    );
}

#[tokio::test]
async fn wait_for_text_returns_once_it_appears() {
    let result = ok(
        "browser_navigate",
        json!({ "session": "nav-wait", "target": harness().page("spa.html"), "wait_for": "Showing 50 of 50 items" }),
    )
    .await;
    assert_eq!(result["ready"]["by"], "wait_for", "{result:#}");
    let text = common::page_text("nav-wait").await;
    assert!(text.contains("Showing 50 of 50 items"));
}

#[tokio::test]
async fn never_finishing_resource_returns_within_the_timeout_and_page_stays_usable() {
    // Warm the session first: the measured call must not include launching the browser.
    ok(
        "browser_navigate",
        json!({ "session": "nav-never", "target": "about:blank" }),
    )
    .await;
    let started = Instant::now();
    let result = ok(
        "browser_navigate",
        json!({ "session": "nav-never", "target": harness().page("never.html"), "timeout_ms": 1500 }),
    )
    .await;
    // 1.5 s of waiting plus a generous margin for listing the page on a busy machine.
    assert!(
        started.elapsed() < Duration::from_millis(1500 + 5000),
        "took {:?}",
        started.elapsed()
    );
    assert!(
        result["ready"]["after_ms"].as_u64().unwrap() <= 1500 + 5000,
        "{result:#}"
    );
    assert_eq!(result["ready"]["by"], "timeout", "{result:#}");
    let missing = result["ready"]["missing"].to_string();
    assert!(
        missing.contains("/hang"),
        "missing should name the stuck request: {missing}"
    );
    assert!(missing.contains("load event"), "{missing}");
    assert!(
        result["elements"]
            .as_str()
            .unwrap()
            .contains("Still usable")
    );
    let text = common::page_text("nav-never").await;
    assert!(text.contains("Visible before the stuck resource"));
}

#[tokio::test]
async fn dialogs_on_load_are_answered_and_reported() {
    let result = open("nav-alert", "alert.html").await;
    let dialogs = result["dialogs"].as_array().expect("dialogs reported");
    assert_eq!(dialogs.len(), 2, "{result:#}");
    assert_eq!(dialogs[0]["type"], "alert");
    assert_eq!(dialogs[0]["message"], "Hello from the page");
    assert_eq!(dialogs[1]["type"], "confirm");
    let text = common::page_text("nav-alert").await;
    assert!(text.contains("after the alert, confirm=true"));
}

#[tokio::test]
async fn http_errors_are_reported_as_status() {
    let result = open("nav-404", "status/404").await;
    assert_eq!(result["status"], 404);
    assert_eq!(result["title"], "Status 404");
    let missing = open("nav-404", "no-such-page.html").await;
    assert_eq!(missing["status"], 404);
}

#[tokio::test]
async fn refused_connection_is_navigation_failed() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    ok(
        "browser_navigate",
        json!({ "session": "nav-refused", "target": "about:blank" }),
    )
    .await;
    let error = fails(
        "browser_navigate",
        json!({ "session": "nav-refused", "target": format!("http://127.0.0.1:{port}/") }),
        "NAVIGATION_FAILED",
    )
    .await;
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("CONNECTION_REFUSED"),
        "{error}"
    );
}

#[tokio::test]
async fn non_web_schemes_are_blocked() {
    for target in [
        "file:///etc/passwd",
        "javascript:alert(1)",
        "chrome://version",
    ] {
        fails(
            "browser_navigate",
            json!({ "session": "nav-blocked", "target": target }),
            "BLOCKED_URL",
        )
        .await;
    }
}

#[tokio::test]
async fn back_forward_and_reload_move_through_history() {
    open("nav-history", "history-a.html").await;
    open("nav-history", "history-b.html").await;
    let back = ok(
        "browser_navigate",
        json!({ "session": "nav-history", "mode": "back" }),
    )
    .await;
    assert_eq!(back["title"], "History A", "{back:#}");
    let forward = ok(
        "browser_navigate",
        json!({ "session": "nav-history", "mode": "forward" }),
    )
    .await;
    assert_eq!(forward["title"], "History B");
    let reload = ok(
        "browser_navigate",
        json!({ "session": "nav-history", "mode": "reload" }),
    )
    .await;
    assert_eq!(reload["title"], "History B");
    assert_eq!(reload["status"], 200);
    fails(
        "browser_navigate",
        json!({ "session": "nav-history", "mode": "forward" }),
        "INVALID_ARGUMENT",
    )
    .await;
}

#[tokio::test]
async fn missing_target_names_the_field() {
    let missing = json!({ "session": "nav-args" });
    common::invalid("browser_navigate", missing, "target").await;
    let too_short =
        json!({ "session": "nav-args", "target": "http://127.0.0.1/", "timeout_ms": 5 });
    common::invalid("browser_navigate", too_short, "timeout_ms").await;
}

#[tokio::test]
async fn new_tab_opens_the_page_beside_the_current_one() {
    open("nav-newtab", "history-a.html").await;
    let second = ok(
        "browser_navigate",
        json!({ "session": "nav-newtab", "target": harness().page("history-b.html"), "new_tab": true }),
    )
    .await;
    assert_eq!(second["title"], "History B");
    assert_ne!(second["tab"], "t1", "{second:#}");
    let tabs = ok("browser_tabs", json!({ "session": "nav-newtab" })).await;
    assert_eq!(tabs["tabs"].as_array().unwrap().len(), 2);
    assert_eq!(tabs["active"], second["tab"]);
}

/// The URL policy holds inside the browser: loopback other than the allowed 127.0.0.1 and the
/// metadata address are refused, whether typed, reached through a redirect, opened in a new tab,
/// followed from a link or loaded in a frame. (Host names are judged by their addresses: unit
/// tests in browser/guard.rs.)
#[tokio::test]
async fn private_targets_are_blocked_in_the_browser_too() {
    let s = "nav-policy";
    let trap = common::Trap::new();
    let untouched = |step: &str| trap.untouched(step);
    let other_loopback = trap.url("/spa.html");
    let redirected = harness().page(&format!(
        "web/redirect?to={}",
        url::form_urlencoded::byte_serialize(other_loopback.as_bytes()).collect::<String>()
    ));
    for (target, named) in [
        (other_loopback.as_str(), "127.0.0.3"),
        (redirected.as_str(), "127.0.0.3"),
        (
            "http://169.254.169.254/latest/meta-data/",
            "169.254.169.254",
        ),
    ] {
        let refused = fails(
            "browser_navigate",
            json!({ "session": s, "target": target }),
            "BLOCKED_URL",
        )
        .await;
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(message.contains(named), "{target}: {refused:#}");
        assert!(
            refused["error"]["hint"]
                .as_str()
                .unwrap()
                .contains("fetch.allow"),
            "{refused:#}"
        );
        untouched(target);
    }
    open(s, "spa.html").await;
    let tabs_before = ok("browser_tabs", json!({ "session": s })).await;
    let new_tab = fails(
        "browser_tabs",
        json!({ "session": s, "action": "new", "url": other_loopback }),
        "BLOCKED_URL",
    )
    .await;
    assert!(
        new_tab["error"]["message"]
            .as_str()
            .unwrap()
            .contains("127.0.0.3")
    );
    let tabs_after = ok("browser_tabs", json!({ "session": s })).await;
    assert_eq!(
        (&tabs_after["tabs"], &tabs_after["active"]),
        (&tabs_before["tabs"], &tabs_before["active"]),
        "a refused `new` leaves no tab behind"
    );
    untouched("new tab");
    // A link the page offers is refused when followed; the result says why.
    let add_link = format!(
        "() => {{ const a = document.createElement('a'); a.href = {other_loopback:?}; \
         a.textContent = 'Private place'; document.body.prepend(a); }}"
    );
    ok(
        "browser_interact",
        json!({ "session": s, "action": "evaluate", "script": add_link }),
    )
    .await;
    let link = common::ref_of(&common::element_lines(s).await, "Private place");
    common::assert_click_refused(&common::harness().api, s, link, "127.0.0.3").await;
    untouched("link");
    // A frame the page adds is refused too; the page itself stays.
    open(s, "spa.html").await;
    let add_frame = format!(
        "() => new Promise((done) => {{ const frame = document.createElement('iframe'); \
         frame.onload = () => done('loaded'); frame.src = {other_loopback:?}; \
         document.body.append(frame); setTimeout(() => done('no load event'), 5000); }})"
    );
    let framed = ok(
        "browser_interact",
        json!({ "session": s, "action": "evaluate", "script": add_frame }),
    )
    .await;
    assert_eq!(framed["value"], "loaded", "{framed:#}");
    assert!(
        framed["url"].is_null(),
        "the page stays, so its URL is not news: {framed:#}"
    );
    untouched("frame");
    // The allowed address still opens.
    assert_eq!(open(s, "spa.html").await["status"], 200);
}

/// A site whose pages each hold an image that never finishes, served by a plain HTTP/1.1
/// server that logs when each request arrives and when its connection closes.
struct HangingSite {
    base: String,
    log: std::sync::Arc<std::sync::Mutex<Vec<(Instant, String)>>>,
}

impl HangingSite {
    async fn start() -> Self {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = log.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                let record = record.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match socket.read(&mut byte).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&byte[..n]),
                        }
                    }
                    let line = String::from_utf8_lossy(&head)
                        .lines()
                        .next()
                        .unwrap_or_default()
                        .to_string();
                    let path = line.split(' ').nth(1).unwrap_or_default().to_string();
                    let note = |what: String| record.lock().unwrap().push((Instant::now(), what));
                    note(format!("GET {path}"));
                    if let Some(page) = path.strip_prefix("/page/") {
                        let body = format!(
                            "<!doctype html><title>Page {page}</title><h1>Page {page}</h1>\
                             <img src=\"/never.png?{page}\" alt=\"\">"
                        );
                        let response = format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        );
                        let _ = socket.write_all(response.as_bytes()).await;
                        return;
                    }
                    // The image: never answered; the connection ends when the browser drops it.
                    while matches!(socket.read(&mut byte).await, Ok(n) if n > 0) {}
                    note(format!("closed {path}"));
                });
            }
        });
        Self { base, log }
    }

    fn seen(&self, what: &str) -> Vec<Instant> {
        let log = self.log.lock().unwrap();
        log.iter()
            .filter(|(_, w)| w == what)
            .map(|(at, _)| *at)
            .collect()
    }
}

/// Opening a page while the current one is still loading (an image that never finishes) does
/// not wait for it: every navigation reaches the server at once, and the old page's hanging
/// request ends.
#[tokio::test]
async fn a_new_navigation_never_waits_for_the_previous_document() {
    let s = "nav-superseded";
    let site = HangingSite::start().await;
    let go = |page: &str| {
        json!({ "session": s, "target": format!("{}/page/{page}", site.base),
                "wait_for": format!("Page {page}"), "timeout_ms": 5000 })
    };
    // The session and its tab exist first: what is timed is the navigation, not their start.
    ok(
        "browser_navigate",
        json!({ "session": s, "target": "about:blank" }),
    )
    .await;
    for (attempt, page) in ["1", "1", "2"].into_iter().enumerate() {
        let started = Instant::now();
        let arrived = ok("browser_navigate", go(page)).await;
        assert_eq!(
            arrived["ready"]["by"], "wait_for",
            "navigation {attempt}: {arrived:#}"
        );
        assert!(
            arrived["url"]
                .as_str()
                .unwrap()
                .ends_with(&format!("/page/{page}"))
        );
        let requests = site.seen(&format!("GET /page/{page}"));
        let reached = requests.last().expect("the page was requested");
        assert!(
            // At once, not after the old page's stuck image (which never ends).
            reached.duration_since(started) < Duration::from_millis(5000),
            "navigation {attempt} reached the server after {:?}",
            reached.duration_since(started)
        );
    }
    assert_eq!(
        site.seen("GET /page/1").len(),
        2,
        "the same URL again is a new request"
    );
    // The superseded documents' images were cancelled: their connections closed.
    common::eventually(
        "the first page's image request ends",
        Duration::from_secs(10),
        || async { !site.seen("closed /never.png?1").is_empty() },
    )
    .await;
}
