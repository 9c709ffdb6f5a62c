//! web_search against local servers speaking each backend's real wire format (captured
//! responses), including rate limits, CAPTCHAs, timeouts, bad JSON and failover.

mod common;

use std::sync::OnceLock;

use common::web_fixtures::config;
use common::{Harness, call_at, start_with};
use serde_json::{Value, json};

/// The shared service for calls that name their backend (no failover state involved).
fn service() -> &'static Harness {
    static SERVICE: OnceLock<Harness> = OnceLock::new();
    SERVICE.get_or_init(|| start_with(config))
}

async fn search(harness: &Harness, args: Value) -> (u16, Value) {
    call_at(&harness.api, "web_search", args).await
}

async fn found(args: Value) -> Value {
    let (status, body) = search(service(), args.clone()).await;
    assert_eq!(status, 200, "{args}: {body:#}");
    body
}

async fn failed(args: Value, code: &str) -> Value {
    let (status, body) = search(service(), args.clone()).await;
    assert_eq!(body["error"]["code"], code, "{args}: {body:#}");
    assert!(status >= 400, "{status}");
    assert!(
        body["error"]["hint"]
            .as_str()
            .is_some_and(|h| !h.is_empty())
    );
    body
}

fn urls(body: &Value) -> Vec<&str> {
    body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["url"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn duckduckgo_results_are_plain_text_with_decoded_links() {
    let body =
        found(json!({"query": "graph database", "backend": "duckduckgo", "max_results": 10})).await;
    assert_eq!(body["backend"], "duckduckgo");
    let results = body["results"].as_array().unwrap();
    assert_eq!(results.len(), 10, "{body:#}");
    assert_eq!(results[0]["url"], "https://github.com/nxpatterns/gitnexus");
    assert_eq!(
        results[0]["title"],
        "GitHub - nxpatterns/gitnexus: GitNexus: The Zero-Server Code ..."
    );
    for result in results {
        let url = result["url"].as_str().unwrap();
        assert!(
            url.starts_with("http") && !url.contains("duckduckgo.com"),
            "{url}"
        );
        for field in ["title", "snippet"] {
            let text = result[field].as_str().unwrap();
            assert!(
                !text.contains('<') && !text.contains("&amp;") && !text.contains("  "),
                "{text:?}"
            );
        }
    }
    assert!(
        results[0]["snippet"]
            .as_str()
            .unwrap()
            .contains("client-side knowledge graph")
    );
}

#[tokio::test]
async fn duckduckgo_follows_the_next_page_form_for_more_results() {
    let body =
        found(json!({"query": "graph database", "backend": "duckduckgo", "max_results": 20})).await;
    let results = urls(&body);
    assert_eq!(results.len(), 20, "{body:#}");
    // Page 2 (the second captured page) starts where page 1 ends.
    let first_of_second = &results[10];
    assert!(!results[..10].contains(first_of_second));
}

#[tokio::test]
async fn searxng_brave_and_tavily_parse_their_json() {
    let searx = found(json!({"query": "severance", "backend": "searxng", "max_results": 20})).await;
    assert_eq!(urls(&searx).len(), 6, "{searx:#}");
    assert!(
        searx["results"][0]["source"]
            .as_str()
            .unwrap()
            .contains("google cse")
    );

    let brave = found(json!({"query": "hello world", "backend": "brave", "max_results": 20})).await;
    assert_eq!(urls(&brave).len(), 20, "{brave:#}");
    for result in brave["results"].as_array().unwrap() {
        let snippet = result["snippet"].as_str().unwrap();
        assert!(
            !snippet.contains("<strong>") && !snippet.contains("&#x27;"),
            "{snippet}"
        );
    }

    let tavily = found(json!({"query": "iphone", "backend": "tavily", "search_depth": "advanced", "max_results": 3})).await;
    assert_eq!(
        urls(&tavily).len(),
        3,
        "max_results caps the list: {tavily:#}"
    );
    assert_eq!(tavily["total_results"], 10);
    assert!(urls(&tavily).iter().all(|u| u.contains("apple.com")));
}

#[tokio::test]
async fn empty_results_are_a_message_not_an_error() {
    for backend in ["duckduckgo", "searxng"] {
        let body = found(json!({"query": "nothing", "backend": backend})).await;
        assert_eq!(body["results"], json!([]), "{backend}: {body:#}");
        assert!(
            body["message"].as_str().unwrap().contains("nothing"),
            "{body:#}"
        );
    }
}

#[tokio::test]
async fn backend_failures_are_typed_and_explained() {
    let body = failed(
        json!({"query": "forbidden", "backend": "searxng"}),
        "UPSTREAM",
    )
    .await;
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("JSON output is disabled"),
        "{body:#}"
    );
    let body = failed(
        json!({"query": "ratelimit", "backend": "searxng"}),
        "UPSTREAM",
    )
    .await;
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("rate limited"),
        "{body:#}"
    );
    let body = failed(
        json!({"query": "ratelimit", "backend": "duckduckgo"}),
        "UPSTREAM",
    )
    .await;
    assert!(
        body["error"]["message"].as_str().unwrap().contains("202"),
        "{body:#}"
    );
    let body = failed(
        json!({"query": "captcha", "backend": "duckduckgo"}),
        "UPSTREAM",
    )
    .await;
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("CAPTCHA"),
        "{body:#}"
    );
    let body = failed(json!({"query": "broken", "backend": "searxng"}), "UPSTREAM").await;
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not SearXNG JSON"),
        "{body:#}"
    );
    let body = failed(json!({"query": "slow", "backend": "searxng"}), "TIMEOUT").await;
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("timed out"),
        "{body:#}"
    );
}

#[tokio::test]
async fn missing_keys_and_bad_arguments_are_named() {
    let harness = start_with(|fixtures| {
        let mut config = config(fixtures);
        config.search.tavily_key = None;
        config
    });
    let (_, body) = search(&harness, json!({"query": "x", "backend": "tavily"})).await;
    assert_eq!(body["error"]["code"], "NOT_CONFIGURED", "{body:#}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("WEBPILOT_TAVILY_KEY")
    );

    failed(json!({"query": "   "}), "INVALID_ARGUMENT").await;
    failed(json!({"query": "x", "max_results": 50}), "INVALID_ARGUMENT").await;
    failed(json!({"query": "x", "backend": "bing"}), "INVALID_ARGUMENT").await;
}

#[tokio::test]
async fn auto_fails_over_and_rests_failed_backends() {
    let harness = start_with(config);
    // DuckDuckGo answers 202, SearXNG and Brave 429: Tavily, last in the order, answers.
    let (status, body) = search(&harness, json!({"query": "ratelimit"})).await;
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(body["backend"], "tavily");
    let failed: Vec<(&str, &str)> = body["failed_backends"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["name"].as_str().unwrap(), f["reason"].as_str().unwrap()))
        .collect();
    let names: Vec<&str> = failed.iter().map(|f| f.0).collect();
    assert_eq!(names, ["duckduckgo", "searxng", "brave"], "{body:#}");
    assert!(
        failed.iter().all(|f| f.1.contains("rate limited")),
        "{failed:?}"
    );

    // A working query now skips the resting backends instead of asking them again.
    let (status, body) = search(&harness, json!({"query": "trains"})).await;
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(body["backend"], "tavily");
    for failure in body["failed_backends"].as_array().unwrap() {
        assert!(
            failure["reason"]
                .as_str()
                .unwrap()
                .starts_with("skipped for"),
            "{body:#}"
        );
    }
}

#[tokio::test]
async fn auto_uses_the_first_working_backend() {
    let harness = start_with(config);
    let (status, body) = search(
        &harness,
        json!({"query": "graph database", "max_results": 3}),
    )
    .await;
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(body["backend"], "duckduckgo");
    assert_eq!(body["failed_backends"], json!([]));
    assert_eq!(urls(&body).len(), 3);
    assert!(body["search_time_ms"].is_u64());
}
