//! The session limit and idle reaping, call rates, the memory watermark, browser recycling and
//! the bound on request bodies read at once, on services configured with small limits.

mod common;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

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

/// `[rate] crawl_status = "1/min"` holds REST's crawl routes as it holds the tool on MCP: one
/// bucket, whichever front takes from it. The first REST status read answers in its shape; the
/// second is `LIMIT` (429) with `Retry-After`, and so are the event stream, the task list and
/// MCP's crawl_status after it.
#[tokio::test]
async fn rest_crawl_routes_take_the_rate_of_crawl_status() {
    let harness = common::start(webpilot::config::Config {
        rate: [("crawl_status".to_string(), "1/min".to_string())].into(),
        ..common::loopback_config()
    });
    let api = &harness.api;
    let args = json!({ "urls": [harness.page("article.html")], "mode": "http" });
    let (status, created) = call_at(api, "crawl_batch", args).await;
    assert_eq!(status, 200, "{created:#}");
    let id = created["task_id"].as_str().unwrap();
    let tasks = format!("{api}/api/crawler/tasks");
    let report = common::get_json(&format!("{tasks}/{id}")).await;
    assert_eq!(
        (&report["task_id"], &report["total"]),
        (&json!(id), &json!(1))
    );
    assert!(
        report["results"].is_array() && report["errors"].is_array(),
        "{report:#}"
    );

    for url in [
        format!("{tasks}/{id}"),
        format!("{tasks}/{id}/events"),
        format!("{tasks}?limit=5"),
    ] {
        let response = common::client().get(&url).send().await.unwrap();
        assert_eq!(response.status(), 429, "GET {url}");
        let wait = common::retry_after(&response);
        assert!((1..=60).contains(&wait), "GET {url}: Retry-After {wait}");
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "LIMIT", "GET {url}: {body:#}");
        assert_eq!(body["error"]["retry_after_secs"], wait);
    }
    let params = json!({ "name": "crawl_status", "arguments": { "task_id": id } });
    let message = common::mcp_request(api, None, "tools/call", params).await;
    let result = &message["result"];
    assert_eq!(result["isError"], true, "{message:#}");
    let text = result["content"][0]["text"].as_str().unwrap();
    let error: serde_json::Value = serde_json::from_str(text).unwrap();
    assert_eq!(error["error"]["code"], "LIMIT", "{error:#}");
}

/// With every session busy and the browser's one admission slot taken, a session past
/// `max_sessions` is refused at once, not after a wait in the queue.
#[tokio::test]
async fn past_max_sessions_a_new_session_is_refused_at_once_while_the_browser_is_busy() {
    let harness = common::start(webpilot::config::Config {
        max_sessions: 2,
        browser_concurrency: Some(1),
        ..common::loopback_config()
    });
    let busy: Vec<_> = ["busy-1", "busy-2"]
        .into_iter()
        .map(|name| {
            let api = harness.api.clone();
            let args =
                json!({ "session": name, "target": harness.page("hang"), "timeout_ms": 5000 });
            tokio::spawn(async move { call_at(&api, "browser_navigate", args).await })
        })
        .collect();
    eventually(
        "both sessions are busy",
        Duration::from_secs(20),
        || async {
            let sessions = common::get_json(&format!("{}/api/sessions", harness.api)).await;
            let sessions = sessions["sessions"].as_array().unwrap().clone();
            sessions.len() == 2 && sessions.iter().all(|s| s["busy"] == true)
        },
    )
    .await;
    let (status, body) = call_at(&harness.api, "browser_read", json!({ "session": "third" })).await;
    assert_eq!(status, 429, "{body:#}");
    assert_eq!(body["error"]["code"], "LIMIT");
    // Refused while both are still busy: it did not wait in the queue for one of them to end.
    let sessions = common::get_json(&format!("{}/api/sessions", harness.api)).await;
    let busy_now = sessions["sessions"].as_array().unwrap().iter();
    assert_eq!(
        busy_now.filter(|s| s["busy"] == true).count(),
        2,
        "{sessions:#}"
    );
    for call in busy {
        call.await.unwrap();
    }
}

/// Over `browser_max_pss_mb`, a new session is refused with a hint while live ones go on, and
/// `/metrics` reports the browser's memory.
#[tokio::test]
async fn over_the_memory_watermark_new_sessions_are_refused_and_live_ones_go_on() {
    let harness = common::start(webpilot::config::Config {
        browser_max_pss_mb: Some(1),
        ..common::loopback_config()
    });
    let api = &harness.api;
    let page = harness.page("light.html");
    let args = json!({ "session": "first", "target": page });
    let (status, body) = call_at(api, "browser_navigate", args).await;
    assert_eq!(
        status, 200,
        "the first session starts the browser: {body:#}"
    );

    let (status, body) = call_at(api, "browser_read", json!({ "session": "second" })).await;
    assert_eq!(status, 429, "{body:#}");
    assert_eq!(body["error"]["code"], "LIMIT");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("browser_max_pss_mb = 1"), "{message}");
    assert!(body["error"]["hint"].as_str().unwrap().contains("close"));

    let (status, body) = call_at(api, "browser_read", json!({ "session": "first" })).await;
    assert_eq!(status, 200, "{body:#}");
    let metrics = common::get_text(&format!("{api}/metrics"), None).await;
    let pss: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("webpilot_browser_pss_bytes ")?.parse().ok())
        .unwrap();
    assert!(
        pss > 50.0 * 1024.0 * 1024.0,
        "a browser with a page uses more: {pss}"
    );
}

/// Once no session has lived for `browser_recycle_idle_secs`, the browser is closed (counted,
/// not as a restart), and the next call starts a fresh one.
#[tokio::test]
async fn an_unused_browser_is_closed_and_the_next_call_starts_a_fresh_one() {
    let harness = common::start(webpilot::config::Config {
        browser_recycle_idle_secs: Some(1),
        ..common::loopback_config()
    });
    let (api, app) = (harness.api.clone(), harness.app.clone());
    let page = harness.page("light.html");
    let args = json!({ "session": "brief", "target": page });
    assert_eq!(call_at(&api, "browser_navigate", args).await.0, 200);
    let pid =
        |app: webpilot::App| async move { app.browser.pool.existing().await.and_then(|b| b.pid()) };
    let first = pid(app.clone()).await.expect("a browser runs");
    let closed = common::client()
        .delete(format!("{api}/api/sessions/brief"))
        .send()
        .await
        .unwrap();
    assert_eq!(closed.status(), 204);
    eventually(
        "the unused browser is closed",
        Duration::from_secs(20),
        || {
            let app = app.clone();
            async move { pid(app).await.is_none() }
        },
    )
    .await;
    let metrics = common::get_text(&format!("{api}/metrics"), None).await;
    assert!(
        metrics.contains("webpilot_browser_recycled_total 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("webpilot_browser_restarts_total 0"),
        "{metrics}"
    );

    let args = json!({ "session": "later", "target": page });
    let (status, body) = call_at(&api, "browser_navigate", args).await;
    assert_eq!(status, 200, "{body:#}");
    assert_ne!(pid(app).await, Some(first), "a fresh browser");
}

/// Where a test sends a held body's chunks.
type Chunks = futures::channel::mpsc::UnboundedSender<Result<Vec<u8>, std::io::Error>>;
/// A request's status, Retry-After and JSON body.
type Answer = tokio::task::JoinHandle<(u16, Option<u64>, serde_json::Value)>;

/// A POST of a body of `length` declared bytes (none: chunked) whose chunks the test sends
/// through the returned sender; the answer arrives on the handle.
fn held_body(api: &str, length: Option<usize>) -> (Chunks, Answer) {
    let (sender, chunks) = futures::channel::mpsc::unbounded();
    let mut request = common::client()
        .post(format!("{api}/api/tools/no_such_tool"))
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(chunks));
    if let Some(length) = length {
        request = request.header("content-length", length);
    }
    let answer = tokio::spawn(async move {
        let response = request.send().await.expect("an answer");
        let status = response.status().as_u16();
        let retry = response
            .headers()
            .get("retry-after")
            .map(|_| common::retry_after(&response));
        (status, retry, response.json().await.unwrap_or_default())
    });
    (sender, answer)
}

/// `length` bytes of a JSON object.
fn json_of(length: usize) -> Vec<u8> {
    format!("{{\"pad\":\"{}\"}}", "x".repeat(length - 10)).into_bytes()
}

/// With `max_body_bytes_in_flight` at 1 MiB, two bodies of 400 KiB being read hold the budget:
/// the next large ones are `BUSY` (503, Retry-After) at once, counted, a chunked body is
/// refused once its chunks pass the budget, and `/healthz` answers meanwhile; once the held
/// bodies arrive, their calls run.
#[tokio::test]
async fn past_the_body_budget_requests_are_busy_and_health_answers() {
    const BODY: usize = 400 * 1024;
    let harness = common::start(webpilot::config::Config {
        max_body_bytes_in_flight: 1024 * 1024,
        ..common::loopback_config()
    });
    let api = harness.api.as_str();
    let reading = || common::metric(api, None, "webpilot_http_body_bytes_reading");
    let refused = || common::metric(api, None, "webpilot_http_bodies_refused_total");
    let held: Vec<_> = (0..2).map(|_| held_body(api, Some(BODY))).collect();
    eventually(
        "two bodies are being read",
        Duration::from_secs(10),
        || async { reading().await == (2 * BODY) as f64 },
    )
    .await;
    let refused_before = refused().await;
    for _ in 0..4 {
        let (_sender, answer) = held_body(api, Some(BODY));
        let (status, retry, body) = answer.await.unwrap();
        assert_eq!(
            (status, &body["error"]["code"]),
            (503, &json!("BUSY")),
            "{body:#}"
        );
        assert!(retry.is_some_and(|secs| secs >= 1), "{retry:?}");
        assert!(!body["error"]["hint"].as_str().unwrap().is_empty());
    }
    // A body without a length takes its chunks as they come: the second passes the budget.
    let (chunked, answer) = held_body(api, None);
    chunked.unbounded_send(Ok(vec![b' '; 64 * 1024])).unwrap();
    eventually("the chunk is held", Duration::from_secs(10), || async {
        reading().await == (2 * BODY + 64 * 1024) as f64
    })
    .await;
    chunked.unbounded_send(Ok(vec![b' '; 256 * 1024])).unwrap();
    let (status, retry, body) = answer.await.unwrap();
    assert_eq!(
        (status, &body["error"]["code"]),
        (503, &json!("BUSY")),
        "{body:#}"
    );
    assert!(retry.is_some());
    assert_eq!(refused().await, refused_before + 5.0);
    let started = Instant::now();
    let health = common::health(api).await;
    assert_eq!(health["ok"], true);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(reading().await, (2 * BODY) as f64);

    for (sender, answer) in held {
        sender.unbounded_send(Ok(json_of(BODY))).unwrap();
        drop(sender);
        let (status, _, body) = answer.await.unwrap();
        assert_eq!(
            (status, &body["error"]["code"]),
            (404, &json!("NO_SUCH_TOOL")),
            "{body:#}"
        );
    }
    assert_eq!(reading().await, 0.0);
}
