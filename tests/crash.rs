//! Chromium dying mid-session: the call in flight fails fast with BROWSER_UNAVAILABLE and the
//! next call relaunches the browser. Its own binary, so no other test shares the dying browser.

mod common;

use std::time::{Duration, Instant};

use common::{call, harness, ok, open};
use serde_json::json;

fn browser_pid() -> u32 {
    let app = harness().app.clone();
    harness()
        .block_on(async move { app.browser.pool.existing().await.and_then(|b| b.pid()) })
        .expect("a browser is running")
}

#[tokio::test]
async fn killed_browser_fails_the_call_in_flight_and_the_next_call_works() {
    open("crash", "spa.html").await;
    let pid = browser_pid();
    let hung =
        |received: Vec<(String, String)>| received.iter().filter(|(p, _)| p == "/hang").count();
    let before = hung(common::page_fixtures::received());
    let stuck = tokio::spawn(call(
        "browser_navigate",
        json!({ "session": "crash", "target": harness().page("never.html"), "timeout_ms": 60000 }),
    ));
    // The navigation is in flight once its page asked for the image that never comes.
    common::eventually(
        "the page's stuck image requested",
        Duration::from_secs(30),
        || async { hung(common::page_fixtures::received()) > before },
    )
    .await;
    let killed_at = Instant::now();
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let (status, body) = stuck.await.unwrap();
    assert_eq!(body["error"]["code"], "BROWSER_UNAVAILABLE", "{body:#}");
    assert_eq!(status, 503);
    assert!(
        killed_at.elapsed() < Duration::from_secs(5),
        "took {:?}",
        killed_at.elapsed()
    );

    let again = open("crash", "spa.html").await;
    assert!(
        again["elements"]
            .as_str()
            .unwrap()
            .contains("Add Item 01 to cart")
    );
    assert_ne!(browser_pid(), pid, "a new browser was launched");
    let other = ok("browser_read", json!({ "session": "crash-other" })).await;
    assert_eq!(other["url"], "about:blank");
}
