//! Sessions and tabs: isolation, parallelism, tab management, popups.

mod common;

use std::time::Duration;

use common::{eventually, fails, harness, ok, open};
use serde_json::json;

#[tokio::test]
async fn cookies_of_one_session_are_invisible_in_another() {
    open("iso-a", "cookies.html?set=flavour=oatmeal").await;
    let a = common::page_text("iso-a").await;
    assert!(a.contains("flavour=oatmeal"), "{a:#}");
    open("iso-b", "cookies.html").await;
    let b = common::page_text("iso-b").await;
    assert_eq!(b.trim(), "cookies: []");
    // and the cookie persists within session A
    open("iso-a", "cookies.html").await;
    let again = common::page_text("iso-a").await;
    assert!(again.contains("flavour=oatmeal"));
}

#[tokio::test]
async fn ten_sessions_navigate_in_parallel() {
    let calls = (0..10).map(|i| async move {
        let session = format!("par-{i}");
        let result = open(&session, "spa.html").await;
        (session, result)
    });
    for (session, result) in futures::future::join_all(calls).await {
        assert_eq!(result["session"], session.as_str());
        assert_eq!(result["status"], 200);
        assert!(
            result["elements"]
                .as_str()
                .unwrap()
                .contains("Add Item 01 to cart"),
            "{session}: {result:#}"
        );
    }
}

#[tokio::test]
async fn tabs_can_be_opened_switched_and_closed() {
    let session = "tabs-basic";
    open(session, "history-a.html").await;
    let opened = ok(
        "browser_tabs",
        json!({ "session": session, "action": "new", "url": harness().page("history-b.html") }),
    )
    .await;
    let tabs = opened["tabs"].as_array().unwrap();
    assert_eq!(tabs.len(), 2, "{opened:#}");
    let new_id = opened["active"].as_str().unwrap().to_string();
    assert_eq!(tabs[1]["title"], "History B");
    let read = common::page_text(session).await;
    assert!(read.contains("Page B"));
    let first_id = tabs[0]["tab"].as_str().unwrap().to_string();
    ok(
        "browser_tabs",
        json!({ "session": session, "action": "switch", "tab": first_id }),
    )
    .await;
    let read = common::page_text(session).await;
    assert!(read.contains("Page A"));
    let closed = ok(
        "browser_tabs",
        json!({ "session": session, "action": "close", "tab": new_id }),
    )
    .await;
    assert_eq!(closed["tabs"].as_array().unwrap().len(), 1);
    fails(
        "browser_tabs",
        json!({ "session": session, "action": "switch", "tab": new_id }),
        "NO_SUCH_TAB",
    )
    .await;
    fails(
        "browser_tabs",
        json!({ "session": session, "action": "switch" }),
        "INVALID_ARGUMENT",
    )
    .await;
}

#[tokio::test]
async fn popups_show_up_as_tabs() {
    let session = "tabs-popup";
    open(session, "popup.html").await;
    eventually(
        "the popup becomes a tab",
        Duration::from_secs(10),
        || async {
            let list = ok("browser_tabs", json!({ "session": session })).await;
            list["tabs"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["url"].as_str().unwrap_or("").contains("who=popup"))
        },
    )
    .await;
    // The popup covers its opener; acting in the opener still answers at once (Chromium
    // acknowledges input to a covered tab only after ~5 s unless it is brought to the front).
    let link = common::ref_of(&common::element_lines(session).await, "Open in new tab");
    let clicked = ok(
        "browser_interact",
        json!({ "session": session, "tab": "t1", "action": "click", "ref": link }),
    )
    .await;
    assert_eq!(
        clicked["new_tabs"].as_array().unwrap().len(),
        1,
        "{clicked:#}"
    );
    assert!(
        clicked["elapsed_ms"].as_u64().unwrap() < 3000,
        "a click in the covered opener took {} ms",
        clicked["elapsed_ms"]
    );
    // Popups of one session never appear in another.
    open("tabs-popup-other", "history-a.html").await;
    let other = ok("browser_tabs", json!({ "session": "tabs-popup-other" })).await;
    assert_eq!(other["tabs"].as_array().unwrap().len(), 1, "{other:#}");
}

/// Two callers that do not name sessions each take a private one: unguessable names, their own
/// tabs and cookies, listed, closed by DELETE; the service's own names are not theirs to use.
#[tokio::test]
async fn private_sessions_are_separate_and_unguessable() {
    let api = &harness().api;
    let create = |body: serde_json::Value| async move {
        let response = common::client()
            .post(format!("{api}/api/sessions"))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json::<serde_json::Value>().await.unwrap())
    };
    let (status, first) = create(json!({ "name": "agent one", "idle_secs": 600 })).await;
    assert_eq!(status, 200, "{first:#}");
    let (_, second) = create(json!({})).await;
    let (a, b) = (
        first["session"].as_str().unwrap().to_string(),
        second["session"].as_str().unwrap().to_string(),
    );
    for name in [&a, &b] {
        // "s-" and 128 bits in base32 (26 characters).
        assert_eq!(name.len(), 28, "{name}");
        assert!(name.starts_with("s-"));
    }
    assert_ne!(a, b);

    open(&a, "cookies.html?set=private=yes").await;
    open(&b, "history-a.html").await;
    open(&b, "cookies.html").await;
    assert_eq!(common::page_text(&b).await.trim(), "cookies: []");
    let tabs_a = ok("browser_tabs", json!({ "session": a })).await;
    assert_eq!(tabs_a["tabs"].as_array().unwrap().len(), 1, "{tabs_a:#}");

    let listed = common::get_json(&format!("{api}/api/sessions")).await;
    let entry = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["session"] == a.as_str())
        .unwrap_or_else(|| panic!("{a} is not listed: {listed:#}"))
        .clone();
    assert_eq!(entry["label"], "agent one");
    assert_eq!(entry["tabs"], 1);

    for reserved in ["mcp-1", "_open_web_page-1"] {
        let args = json!({ "session": reserved, "target": "about:blank" });
        let refused = fails("browser_navigate", args, "INVALID_ARGUMENT").await;
        assert!(
            refused["error"]["message"]
                .as_str()
                .unwrap()
                .contains("belong to the service")
        );
        let by_header = common::client()
            .post(format!("{api}/api/tools/browser_tabs"))
            .header("x-webpilot-session", reserved)
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(by_header.status(), 400, "{reserved}");
    }
    for bad in [
        json!({ "idle_secs": 1 }),
        json!({ "name": "" }),
        json!({ "colour": "red" }),
    ] {
        let (status, body) = create(bad.clone()).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (400, Some("INVALID_ARGUMENT")),
            "{bad}"
        );
    }

    let close = || async {
        common::client()
            .delete(format!("{api}/api/sessions/{a}"))
            .send()
            .await
            .unwrap()
    };
    assert_eq!(close().await.status(), 204);
    let again = close().await;
    assert_eq!(again.status(), 404);
    let body: serde_json::Value = again.json().await.unwrap();
    assert_eq!(body["error"]["code"], "NO_SUCH_SESSION");
    let listed = common::get_json(&format!("{api}/api/sessions")).await;
    assert!(
        !listed["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["session"] == a.as_str())
    );
    // Closed, its name names nothing any more: a call naming it makes no new session.
    let never = "s-nobodymadethisone0000000000";
    for name in [a.as_str(), never] {
        refused_as_gone(api, name).await;
    }
    assert!(!listed_in(api, &a).await);
}

/// Whether `GET /api/sessions` of the service at `api` lists `session`.
async fn listed_in(api: &str, session: &str) -> bool {
    let listed = common::get_json(&format!("{api}/api/sessions")).await;
    listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["session"] == session)
}

/// Asserts that calls naming private session `name` (in the arguments, or in the session
/// header) are `NO_SUCH_SESSION` with the hint to create one, and leave no session behind.
async fn refused_as_gone(api: &str, name: &str) {
    let by_argument = json!({ "session": name, "target": "about:blank" });
    let (status, body) = common::call_at(api, "browser_navigate", by_argument).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("NO_SUCH_SESSION")),
        "{name}: {body:#}"
    );
    let hint = body["error"]["hint"].as_str().unwrap();
    assert!(hint.contains("POST /api/sessions"), "{body:#}");
    let by_header = common::client()
        .post(format!("{api}/api/tools/browser_tabs"))
        .header("x-webpilot-session", name)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(by_header.status(), 404, "{name}");
    assert!(!listed_in(api, name).await, "{name} was made");
}

/// A private session closed for being idle is gone for good: its name is refused, not reused
/// for a new empty session.
#[tokio::test]
async fn a_reaped_private_session_is_not_made_again() {
    let mut config = common::loopback_config();
    config.session_idle_secs = 1;
    let reaping = common::start(config);
    let api = reaping.api.as_str();
    let session = common::new_session(api).await;
    let args = json!({ "session": session, "target": reaping.page("history-a.html") });
    common::ok_at(api, "browser_navigate", args).await;
    eventually(
        "the idle session to be closed",
        Duration::from_secs(20),
        || {
            let session = session.clone();
            async move { !listed_in(api, &session).await }
        },
    )
    .await;
    refused_as_gone(api, &session).await;
}

/// What the page sees of its browser: agent, language, time zone, colour scheme, window,
/// position.
async fn browser_side(session: &str) -> serde_json::Value {
    let script = "(async () => ({ agent: navigator.userAgent, language: navigator.language, \
        zone: Intl.DateTimeFormat().resolvedOptions().timeZone, \
        dark: matchMedia('(prefers-color-scheme: dark)').matches, width: innerWidth, \
        position: await new Promise(done => navigator.geolocation.getCurrentPosition( \
            p => done([p.coords.latitude, p.coords.longitude]), e => done(e.message), { timeout: 5000 })) }))()";
    ok(
        "browser_interact",
        json!({ "session": session, "action": "evaluate", "script": script }),
    )
    .await["value"]
        .clone()
}

/// The last `/whoami` request the fixture server saw from `agent`.
fn seen_by_server(agent: &str) -> Vec<String> {
    let seen = common::page_fixtures::received();
    let (_, line) = seen
        .iter()
        .rev()
        .find(|(path, line)| path == "/whoami" && line.starts_with(agent))
        .unwrap_or_else(|| panic!("the server saw no request from {agent}: {seen:?}"));
    line.split('|').map(str::to_string).collect()
}

#[tokio::test]
async fn two_sessions_present_different_identities_side_by_side() {
    let h = harness();
    // One through the REST API…
    let response = common::client()
        .post(format!("{}/api/sessions", h.api))
        .json(&json!({
            "name": "alice's errands",
            "user_agent": "WebpilotTest/1.0 (alice)",
            "locale": "de-DE",
            "timezone": "Asia/Tokyo",
            "geolocation": { "latitude": 48.8566, "longitude": 2.3522 },
            "viewport": { "width": 800, "height": 600 },
            "extra_headers": { "X-Acting-For": "alice" },
            "color_scheme": "dark"
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let alice = response.json::<serde_json::Value>().await.unwrap()["session"]
        .as_str()
        .unwrap()
        .to_string();
    // …one through the tool, on its first call.
    let bob = "identity-bob";
    let opened = ok(
        "browser_tabs",
        json!({ "session": bob, "action": "new", "session_options": {
            "user_agent": "WebpilotTest/1.0 (bob)", "locale": "fr-FR",
            "timezone": "America/New_York", "extra_headers": { "X-Acting-For": "bob" } } }),
    )
    .await;
    assert_eq!(opened["identity"]["locale"], "fr-FR", "{opened:#}");

    let (a, b) = tokio::join!(open(&alice, "whoami"), open(bob, "whoami"));
    assert_eq!(a["title"], "Who am I");
    assert_eq!(b["title"], "Who am I");
    let (a, b) = tokio::join!(browser_side(&alice), browser_side(bob));
    assert_eq!(a["agent"], "WebpilotTest/1.0 (alice)", "{a:#}");
    assert_eq!(a["language"], "de-DE");
    assert_eq!(a["zone"], "Asia/Tokyo");
    assert_eq!(a["dark"], true);
    assert_eq!(a["width"], 800);
    assert_eq!(a["position"], json!([48.8566, 2.3522]), "{a:#}");
    assert_eq!(b["agent"], "WebpilotTest/1.0 (bob)", "{b:#}");
    assert_eq!(b["language"], "fr-FR");
    assert_eq!(b["zone"], "America/New_York");
    assert_eq!(b["dark"], false);
    assert_eq!(b["width"], 1280);

    // What the server saw, not only what the pages say.
    let alice_seen = seen_by_server("WebpilotTest/1.0 (alice)");
    assert!(alice_seen[1].starts_with("de-DE"), "{alice_seen:?}");
    assert_eq!(alice_seen[2], "alice");
    let bob_seen = seen_by_server("WebpilotTest/1.0 (bob)");
    assert!(bob_seen[1].starts_with("fr-FR"), "{bob_seen:?}");
    assert_eq!(bob_seen[2], "bob");

    // The identity is listed with the session and kept for new tabs.
    let listed = ok("browser_tabs", json!({ "session": alice })).await;
    assert_eq!(listed["identity"]["timezone"], "Asia/Tokyo", "{listed:#}");
    ok(
        "browser_tabs",
        json!({ "session": alice, "action": "new", "url": h.page("whoami") }),
    )
    .await;
    assert_eq!(browser_side(&alice).await["zone"], "Asia/Tokyo");
    let sessions = common::get_json(&format!("{}/api/sessions", h.api)).await;
    let entry = sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["session"] == alice.as_str())
        .unwrap()
        .clone();
    assert_eq!(entry["identity"]["user_agent"], "WebpilotTest/1.0 (alice)");

    // An identity is set when a session is made, never swapped under its pages.
    let error = fails(
        "browser_tabs",
        json!({ "session": bob, "action": "new", "session_options": { "locale": "en-GB" } }),
        "INVALID_ARGUMENT",
    )
    .await;
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("another identity"),
        "{error:#}"
    );
}

#[tokio::test]
async fn bad_identities_are_refused_with_the_field_named() {
    for (options, field) in [
        (json!({ "timezone": "Mars/Olympus_Mons" }), "timezone"),
        (
            json!({ "geolocation": { "latitude": 123.0, "longitude": 0.0 } }),
            "geolocation",
        ),
        (
            json!({ "viewport": { "width": 5, "height": 600 } }),
            "viewport",
        ),
        (
            json!({ "extra_headers": { "Bad Header": "x" } }),
            "extra_headers",
        ),
        (json!({ "shoe_size": 42 }), "session_options"),
    ] {
        let session = format!("identity-bad-{field}");
        let error = fails(
            "browser_tabs",
            json!({ "session": session, "action": "new", "session_options": options }),
            "INVALID_ARGUMENT",
        )
        .await;
        assert!(
            error["error"]["message"].as_str().unwrap().contains(field),
            "{field}: {error:#}"
        );
    }
    fails(
        "browser_tabs",
        json!({ "session": "identity-list", "session_options": { "locale": "de-DE" } }),
        "INVALID_ARGUMENT",
    )
    .await;
}
