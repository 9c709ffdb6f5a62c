//! The REST front: tool definitions, error shapes and statuses, auth, metrics.

mod common;

use common::{call_at, client, get_json, harness};
use serde_json::{Value, json};

async fn post_raw(path: &str, body: &'static str) -> (u16, Value) {
    let response = client()
        .post(format!("{}{path}", harness().api))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (
        status,
        response.json().await.expect("error bodies are JSON"),
    )
}

#[tokio::test]
async fn tool_list_is_valid_openai_function_definitions_and_small() {
    let response = client()
        .get(format!("{}/api/tools", harness().api))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    assert!(text.len() <= 10_000, "tool list is {} chars", text.len());
    let tools: Vec<Value> = serde_json::from_str(&text).unwrap();
    let names: Vec<&str> = tools
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    for expected in ["browser_navigate", "browser_read", "browser_tabs"] {
        assert!(names.contains(&expected), "{names:?}");
    }
    let prompt = client()
        .get(format!("{}/api/tools/prompt", harness().api))
        .send()
        .await
        .unwrap();
    let prompt = prompt.text().await.unwrap();
    for name in &names {
        assert!(prompt.contains(name), "the prompt has no guide for {name}");
    }
    for tool in &tools {
        assert_eq!(tool["type"], "function");
        let function = &tool["function"];
        assert!(
            function["description"]
                .as_str()
                .is_some_and(|d| d.len() > 20)
        );
        assert_eq!(function["parameters"]["type"], "object");
        for (name, property) in function["parameters"]["properties"].as_object().unwrap() {
            // The fields every browser tool shares are explained once, in the prompt.
            let shared = ["session", "tab", "cursor"].contains(&name.as_str())
                && prompt.contains(&format!("`{name}`"));
            // An enum names its own choices.
            let listed = property.get("enum").is_some();
            assert!(
                shared || listed || property.get("description").is_some(),
                "{name} of {} lacks a description",
                function["name"]
            );
            assert!(
                property.get("type").is_some() || property.get("enum").is_some(),
                "{name}: {property}"
            );
        }
    }
}

#[tokio::test]
async fn bad_bodies_get_4xx_with_the_error_shape() {
    let cases: [(&str, &str, u16, &str); 7] = [
        ("/api/tools/browser_navigate", "{not json", 400, "JSON"),
        ("/api/tools/browser_navigate", "[1,2]", 400, "object"),
        ("/api/tools/browser_tabs", "null", 400, "not null"),
        (
            "/api/tools/browser_navigate",
            r#"{"target": 42}"#,
            400,
            "target",
        ),
        (
            "/api/tools/browser_navigate",
            r#"{"target": "http://x", "bogus": 1}"#,
            400,
            "bogus",
        ),
        (
            "/api/tools/browser_read",
            r#"{"mode": "poetry"}"#,
            400,
            "mode",
        ),
        ("/api/tools/no_such_tool", "{}", 404, "no_such_tool"),
    ];
    for (path, body, status, mention) in cases {
        let (got, json) = post_raw(path, body).await;
        assert_eq!(got, status, "{path} {body}: {json:#}");
        let error = &json["error"];
        assert!(
            error["code"].is_string() && error["hint"].is_string(),
            "{json:#}"
        );
        assert!(
            error["message"].as_str().unwrap().contains(mention),
            "{body}: {json:#}"
        );
    }
    let response = client()
        .get(format!("{}/api/tools/browser_read", harness().api))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 405);
    let json: Value = response.json().await.unwrap();
    assert_eq!(json["error"]["code"], "INVALID_ARGUMENT");
    let (status, json) = post_raw(
        "/api/tools/browser_read",
        r#"{"max_tokens": 18446744073709551615}"#,
    )
    .await;
    assert!(status < 500, "the largest budget is no crash: {json:#}");
}

/// Oversized requests are the caller's to fix, in the error shape: a body over the endpoint's
/// limit is 413 `TOO_LARGE` (not 429, which says "retry later"), a request target over hyper's
/// limit 414, a URL argument over 32 KiB `INVALID_ARGUMENT` naming it (not the site's failure).
#[tokio::test]
async fn oversized_requests_are_refused_with_the_error_shape() {
    let api = &harness().api;
    let chat_body = format!(
        r#"{{"messages": [{{"role": "user", "content": "{}"}}]}}"#,
        "a".repeat(3 << 20)
    );
    // A tool call takes an inline file of files.max_bytes (50 MB) in base64, and no more.
    let tool_body = format!(r#"{{"target": "{}"}}"#, "a".repeat(70 << 20));
    for (path, body) in [
        ("/api/chat", chat_body),
        ("/api/tools/browser_navigate", tool_body),
    ] {
        let response = client()
            .post(format!("{api}{path}"))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 413, "{path}");
        let json: Value = response.json().await.unwrap();
        assert_eq!(json["error"]["code"], "TOO_LARGE", "{json:#}");
    }
    // Past what an HTTP client library even builds (64 KiB): sent by hand.
    let answer = {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let address = api.trim_start_matches("http://");
        let mut socket = tokio::net::TcpStream::connect(address).await.unwrap();
        let request = format!(
            "GET /api/tools?q={} HTTP/1.1\r\nHost: x\r\n\r\n",
            "a".repeat(100_000)
        );
        socket.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        socket.read_to_string(&mut answer).await.unwrap();
        answer
    };
    assert!(answer.starts_with("HTTP/1.1 414 "), "{answer}");
    let json: Value = serde_json::from_str(answer.split_once("\r\n\r\n").unwrap().1).unwrap();
    assert_eq!(json["error"]["code"], "INVALID_ARGUMENT", "{json:#}");
    assert!(
        json["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("JSON body")
    );

    let long_url = format!("https://example.org/?q={}", "a".repeat(100_000));
    for (tool, field) in [("open_web_page", "url"), ("browser_navigate", "target")] {
        let (status, body) = call_at(api, tool, json!({ field: long_url })).await;
        assert_eq!(status, 400, "{tool}");
        assert_eq!(body["error"]["code"], "INVALID_ARGUMENT", "{tool}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("field `{field}`")) && message.len() < 200,
            "{tool}"
        );
    }
}

/// A client that never finishes its request head holds no connection forever, and many of
/// them do not keep others out.
#[tokio::test]
async fn half_sent_requests_do_not_hold_the_service() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = harness().api.trim_start_matches("http://").to_string();
    let mut stalled = Vec::new();
    for _ in 0..50 {
        let mut socket = tokio::net::TcpStream::connect(&address).await.unwrap();
        socket
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        stalled.push(socket);
    }
    let health = get_json(&format!("{}/healthz", harness().api)).await;
    assert_eq!(health["ok"], true);
    // Answered while the stalled connections were still open: they did not hold it up until
    // the header timeout closed them.
    let mut peek = [0u8; 1];
    assert!(
        matches!(stalled[0].try_read(&mut peek), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "a stalled connection was already closed when /healthz answered"
    );
    // The header read timeout (15 s) closes them, with no answer; likewise a connection that
    // never sends a byte (its protocol is not even known).
    let silent = tokio::net::TcpStream::connect(&address).await.unwrap();
    for mut connection in [stalled.swap_remove(0), silent] {
        let mut rest = [0u8; 64];
        let waited = std::time::Duration::from_secs(40);
        let read = tokio::time::timeout(waited, connection.read(&mut rest))
            .await
            .expect("the stalled connection is closed within the header timeout");
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    }
}

#[tokio::test]
async fn session_header_selects_the_session() {
    let response = client()
        .post(format!("{}/api/tools/browser_tabs", harness().api))
        .header("x-webpilot-session", "from-header")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    let text = response.text().await.unwrap();
    let body: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(body["session"], "from-header", "{body:#}");
    // A header that is not a session name is refused, not folded into the shared default.
    let bytes = axum::http::HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap();
    for value in [bytes, axum::http::HeaderValue::from_static("two words")] {
        let response = client()
            .post(format!("{}/api/tools/browser_tabs", harness().api))
            .header("x-webpilot-session", value.clone())
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{value:?}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "INVALID_ARGUMENT", "{body:#}");
    }
}

#[tokio::test]
async fn a_token_is_required_when_configured() {
    let config = webpilot::config::Config {
        token: Some("s3cret".into()),
        ..common::loopback_config()
    };
    let secured = common::start(config);
    let url = format!("{}/api/tools", secured.api);
    assert_eq!(client().get(&url).send().await.unwrap().status(), 401);
    let wrong = client().get(&url).bearer_auth("nope").send().await.unwrap();
    assert_eq!(wrong.status(), 401);
    let body: Value = wrong.json().await.unwrap();
    assert_eq!(body["error"]["code"], "UNAUTHORIZED");
    let right = client()
        .get(&url)
        .bearer_auth("s3cret")
        .send()
        .await
        .unwrap();
    assert_eq!(right.status(), 200);
    let description: Value = client()
        .get(format!("{}/api/openapi.json", secured.api))
        .bearer_auth("s3cret")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        description["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    let list = &description["paths"]["/api/tools"]["get"];
    assert_eq!(list["security"][0]["bearer"], serde_json::json!([]));
    assert!(list["responses"]["401"].is_object(), "{list:#}");
    assert!(description["paths"]["/healthz"]["get"]["security"].is_null());
    let health = client()
        .get(format!("{}/healthz", secured.api))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);

    // Failures are counted, and an address that keeps failing is refused for a while, right
    // token or not (10 failures a minute).
    let metrics = common::get_text(&format!("{}/metrics", secured.api), Some("s3cret")).await;
    assert!(
        metrics.contains("webpilot_auth_failures_total 2"),
        "{metrics}"
    );
    for _ in 0..8 {
        let guess = client()
            .get(&url)
            .bearer_auth("guess")
            .send()
            .await
            .unwrap();
        assert_eq!(guess.status(), 401);
    }
    let locked = client()
        .get(&url)
        .bearer_auth("s3cret")
        .send()
        .await
        .unwrap();
    assert_eq!(locked.status(), 429);
    assert!(locked.headers().contains_key("retry-after"));
    let body: Value = locked.json().await.unwrap();
    assert_eq!(body["error"]["code"], "LIMIT", "{body:#}");
}

/// Behind a trusted proxy, a client that keeps failing is locked out by the address the
/// proxy's `X-Forwarded-For` names, not every client with it; an untrusted peer's
/// `X-Forwarded-For` is its own word and changes nothing.
#[tokio::test]
async fn failures_count_against_the_client_a_trusted_proxy_names() {
    const TOKEN: &str = "behind-a-proxy-token";
    let service = |proxies: Vec<String>| {
        common::start(webpilot::config::Config {
            token: Some(TOKEN.into()),
            trusted_proxies: proxies,
            ..common::loopback_config()
        })
    };
    let tools = |api: &str, key: &'static str, client: &'static str| {
        client_request(format!("{api}/api/tools"), key, client)
    };
    // The tests' own address, 127.0.0.1, is the proxy.
    let proxied = service(vec!["127.0.0.0/8".into()]);
    for _ in 0..10 {
        let status = tools(&proxied.api, "guess", "198.51.100.7, 203.0.113.7").await;
        assert_eq!(status, 401);
    }
    let locked = tools(&proxied.api, TOKEN, "203.0.113.7").await;
    assert_eq!(locked, 429, "the guessing client is locked out");
    let other = tools(&proxied.api, TOKEN, "198.51.100.7, 203.0.113.8").await;
    assert_eq!(other, 200, "a client it did not name is not");

    let direct = service(Vec::new());
    for _ in 0..10 {
        assert_eq!(tools(&direct.api, "guess", "203.0.113.7").await, 401);
    }
    let same_peer = tools(&direct.api, TOKEN, "203.0.113.8").await;
    assert_eq!(same_peer, 429, "without trust, the peer is the client");
}

/// `GET url` with `key` and `X-Forwarded-For: forwarded_for`: the status.
async fn client_request(url: String, key: &str, forwarded_for: &str) -> u16 {
    client()
        .get(url)
        .bearer_auth(key)
        .header("x-forwarded-for", forwarded_for)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn metrics_count_the_calls_made() {
    let api = &harness().api;
    let (status, _) = call_at(api, "crawl_status", json!({"task_id": "crawl-none"})).await;
    assert_eq!(status, 404);
    let (status, _) = call_at(api, "crawl_status", json!({"task": 1})).await;
    assert_eq!(status, 400);
    let response = client().get(format!("{api}/metrics")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = response.text().await.unwrap();
    let mut samples = std::collections::HashMap::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(comment) = line.strip_prefix('#') {
            assert!(
                comment.starts_with(" HELP ") || comment.starts_with(" TYPE "),
                "{line}"
            );
            continue;
        }
        let (name, value) = line.rsplit_once(' ').expect("a sample line");
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("not a number: {line}"));
        samples.insert(name.to_string(), value);
    }
    let calls = |outcome: &str| {
        samples
            .get(&format!(
                "webpilot_tool_calls_total{{tool=\"crawl_status\",outcome=\"{outcome}\"}}"
            ))
            .copied()
            .unwrap_or(0.0)
    };
    assert!(
        calls("NO_SUCH_TASK") >= 1.0 && calls("INVALID_ARGUMENT") >= 1.0,
        "{text}"
    );
    assert!(samples["webpilot_tool_call_duration_seconds_count{tool=\"crawl_status\"}"] >= 2.0);
    assert!(samples.contains_key("webpilot_browser_sessions"));
    assert!(samples.contains_key("webpilot_browser_restarts_total"));
}

/// `webpilot skill` describes every tool with an example call its argument schema accepts, and
/// every error code with its hint.
#[tokio::test]
async fn the_skill_file_covers_every_tool_with_a_valid_example() {
    let dir = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_webpilot"))
        .arg("--data-dir")
        .arg(dir.path())
        .arg("skill")
        .output()
        .unwrap();
    assert!(output.status.success());
    let skill = String::from_utf8(output.stdout).unwrap();
    let front_matter = skill
        .strip_prefix("---\nname: webpilot\ndescription: ")
        .unwrap();
    assert!(front_matter.split_once("\n---\n").is_some(), "{skill}");
    let description = get_json(&format!("{}/api/openapi.json", harness().api)).await;
    let tools = get_json(&format!("{}/api/tools", harness().api)).await;
    for tool in tools.as_array().unwrap() {
        let name = tool["function"]["name"].as_str().unwrap();
        let call = format!("webpilot call {name} '");
        let example = skill
            .lines()
            .find_map(|line| line.strip_prefix(&call))
            .and_then(|rest| rest.strip_suffix('\''))
            .unwrap_or_else(|| panic!("no example for {name}:\n{skill}"));
        let example: Value = serde_json::from_str(example).unwrap();
        let schema = &description["components"]["schemas"][format!("{name}_arguments")];
        let validator = jsonschema::draft202012::new(schema).unwrap();
        assert!(
            validator.is_valid(&example),
            "{name}: {example} does not fit {schema:#}"
        );
    }
    for code in ["INVALID_ARGUMENT", "STALE_REF", "BLOCKED_URL", "TIMEOUT"] {
        assert!(skill.contains(&format!("- `{code}`: ")), "{code} missing");
    }
}

/// Where a call's time went is in the standard `Server-Timing` header, not in the result the
/// agent pays for: the total, each CDP round trip by purpose, the readiness wait.
#[tokio::test]
async fn server_timing_says_where_a_calls_time_went() {
    let session = "server-timing";
    let url = harness().page("scroll.html");
    let response = client()
        .post(format!("{}/api/tools/browser_navigate", harness().api))
        .json(&json!({ "session": session, "target": url }))
        .send()
        .await
        .unwrap();
    let timing = response
        .headers()
        .get("server-timing")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body: Value = response.json().await.unwrap();
    assert!(body["ready"].is_object(), "{body:#}");
    let stages: Vec<&str> = timing
        .split(", ")
        .map(|stage| stage.split(';').next().unwrap_or_default())
        .collect();
    assert_eq!(stages.first(), Some(&"total"), "{timing}");
    for stage in ["settle", "elements", "cdp-evaluating-in-the-page"] {
        assert!(stages.contains(&stage), "{stage} in {timing}");
    }
    assert!(
        !body.to_string().contains("dur="),
        "nothing of it in the result: {body:#}"
    );
}
