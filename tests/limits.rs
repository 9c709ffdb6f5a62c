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
