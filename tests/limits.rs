//! The session limit and idle reaping, on a service configured with small limits.

mod common;

use std::sync::OnceLock;
use std::time::Duration;

use common::{Harness, call_at, eventually};
use serde_json::json;

fn limited() -> &'static Harness {
    static LIMITED: OnceLock<Harness> = OnceLock::new();
    LIMITED.get_or_init(|| {
        common::start(webpilot::config::Config {
            max_sessions: 2,
            session_idle_secs: 2,
            ..common::loopback_config()
        })
    })
}

#[tokio::test]
async fn sessions_past_the_limit_are_refused_until_idle_ones_close() {
    let api = &limited().api;
    for name in ["one", "two"] {
        let (status, body) = call_at(api, "browser_tabs", json!({ "session": name })).await;
        assert_eq!(status, 200, "{body:#}");
    }
    let (status, body) = call_at(api, "browser_tabs", json!({ "session": "three" })).await;
    assert_eq!(status, 429, "{body:#}");
    assert_eq!(body["error"]["code"], "LIMIT");
    assert!(body["error"]["hint"].as_str().unwrap().contains("idle"));
    eventually(
        "idle sessions are closed",
        Duration::from_secs(20),
        || async {
            call_at(api, "browser_tabs", json!({ "session": "three" }))
                .await
                .0
                == 200
        },
    )
    .await;
}

/// `[rate] web_search = "3/min"`: the fourth search within the minute is `LIMIT` (429) with
/// `Retry-After` and a hint naming the quota; other tools are not held back by it.
#[tokio::test]
async fn a_tool_past_its_rate_is_refused_with_retry_after() {
    let harness = common::start_with(|fixtures| {
        let mut config = common::web_fixtures::config(fixtures);
        config.rate = [("web_search".to_string(), "3/min".to_string())].into();
        config
    });
    let search = json!({ "query": "rust", "backend": "duckduckgo" });
    for attempt in 0..3 {
        let (status, body) = call_at(&harness.api, "web_search", search.clone()).await;
        assert_eq!(status, 200, "search {attempt}: {body:#}");
    }
    let response = common::client()
        .post(format!("{}/api/tools/web_search", harness.api))
        .json(&search)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 429);
    let wait = common::retry_after(&response);
    assert!((1..=20).contains(&wait), "Retry-After: {wait}");
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "LIMIT");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("3 calls per minute"),
        "{body:#}"
    );
    assert_eq!(body["error"]["retry_after_secs"], wait);
    let (status, _) = call_at(&harness.api, "browser_tabs", json!({ "session": "rated" })).await;
    assert_eq!(status, 200);
}
