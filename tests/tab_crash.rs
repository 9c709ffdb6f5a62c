//! A tab's renderer dying (killed for its memory, a crash): the call in flight on it and the
//! next one fail within a second, the next navigate replaces the tab, and other sessions never
//! notice. A tab whose page closes itself ends the call waiting on it just as fast.

mod common;

use std::time::{Duration, Instant};

use common::devtools::{biggest_renderer, kill_biggest_renderer, page_targets, target_showing};
use common::{call, eventually, harness, ok, page_text};
use serde_json::json;

/// `fixtures/hog.html` holds 400 MB; no other page of the test comes near.
const HOG_KB: u64 = 300 * 1024;

#[tokio::test]
async fn a_crashed_tab_fails_at_once_and_the_next_navigate_replaces_it() {
    let app = harness().app.clone();
    let bystander = ok(
        "browser_navigate",
        json!({ "session": "bystander", "target": harness().page("light.html?bystander") }),
    )
    .await;
    let victim = ok(
        "browser_navigate",
        json!({ "session": "victim", "target": harness().page("light.html?victim") }),
    )
    .await;

    let stuck = tokio::spawn(call(
        "browser_navigate",
        json!({ "session": "victim", "target": harness().page("hog.html?victim-stuck"), "timeout_ms": 30000 }),
    ));
    eventually(
        "the hog holds its memory",
        Duration::from_secs(20),
        || async { biggest_renderer(&app).await.1 > HOG_KB },
    )
    .await;
    let target = target_showing(&app, "victim-stuck").await;
    let crashed_at = Instant::now();
    kill_biggest_renderer(&app).await;

    let (status, body) = stuck.await.unwrap();
    let in_flight_failed = crashed_at.elapsed();
    assert_eq!(status, 503, "{body:#}");
    assert_eq!(body["error"]["code"], "BROWSER_UNAVAILABLE");
    let hint = body["error"]["hint"].as_str().unwrap();
    assert!(
        hint.contains("renderer crashed") && hint.contains("browser_navigate"),
        "{hint}"
    );
    assert!(
        in_flight_failed < Duration::from_secs(1),
        "{in_flight_failed:?}"
    );

    let next = Instant::now();
    let (status, body) = call("browser_read", json!({ "session": "victim" })).await;
    assert_eq!(status, 503, "{body:#}");
    assert!(
        next.elapsed() < Duration::from_secs(1),
        "{:?}",
        next.elapsed()
    );

    let replaced = ok(
        "browser_navigate",
        json!({ "session": "victim", "target": harness().page("light.html?victim-again") }),
    )
    .await;
    assert_eq!(replaced["tab"], victim["tab"], "the tab keeps its id");
    assert!(page_text("victim").await.contains("Ready to count"));
    let (_, tabs) = call("browser_tabs", json!({ "session": "victim" })).await;
    assert_eq!(tabs["tabs"].as_array().unwrap().len(), 1, "{tabs:#}");
    assert!(
        !page_targets(&app)
            .await
            .iter()
            .any(|p| p["id"] == target.as_str()),
        "the crashed page is closed"
    );

    let read = ok(
        "browser_read",
        json!({ "session": "bystander", "mode": "text" }),
    )
    .await;
    assert_eq!(read["tab"], bystander["tab"]);
    assert!(read["url"].as_str().unwrap().contains("bystander"));
    assert!(read["content"].as_str().unwrap().contains("Ready to count"));
}

/// A window that closes itself while a call waits on it: the call ends at once with
/// `NO_SUCH_TAB`, not at its time limit, and the opener goes on.
#[tokio::test]
async fn a_tab_whose_page_closes_itself_ends_the_call_waiting_on_it() {
    let s = "closing";
    ok(
        "browser_navigate",
        json!({ "session": s, "target": harness().page("closing.html") }),
    )
    .await;
    let lines = common::element_lines(s).await;
    let button = common::ref_of(&lines, "Open the short-lived window");
    let clicked = ok(
        "browser_interact",
        json!({ "session": s, "action": "click", "ref": button }),
    )
    .await;
    let popup = clicked["new_tabs"][0]
        .as_str()
        .expect("the window is a tab")
        .to_string();

    let asked = Instant::now();
    let (status, body) = call(
        "browser_interact",
        json!({ "session": s, "tab": popup, "action": "wait", "until": "never shown", "timeout_ms": 120000 }),
    )
    .await;
    assert_eq!(status, 404, "{body:#}");
    assert_eq!(body["error"]["code"], "NO_SUCH_TAB");
    // Ended by the tab going, not by the wait's two minutes.
    assert!(
        asked.elapsed() < Duration::from_secs(60),
        "{:?}",
        asked.elapsed()
    );

    let (_, tabs) = call("browser_tabs", json!({ "session": s })).await;
    let tabs = tabs["tabs"].as_array().unwrap().clone();
    assert_eq!(tabs.len(), 1, "{tabs:#?}");
    let read = ok(
        "browser_read",
        json!({ "session": s, "tab": tabs[0]["tab"], "mode": "text" }),
    )
    .await;
    assert!(read["content"].as_str().unwrap().contains("Opener"));
}
