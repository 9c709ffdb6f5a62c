//! Fixture routes for the browserless tools: search backends speaking their real wire formats
//! (captured responses from `fixtures/search/`, chosen failures keyed by the query), and pages
//! that exercise the guarded client (charsets, huge and slow bodies, redirects, content types).

use std::time::{Duration, Instant};

use axum::Json;
use axum::Router;
use axum::body::Body;
use axum::extract::{Form, Path, Query};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::fixtures_dir;

/// The key the test configuration gives Tavily and Brave.
pub const TEST_KEY: &str = "test-key";

pub fn routes() -> Router<super::Sites> {
    Router::new()
        .route("/ddg/html/", post(duckduckgo))
        .route("/searxng/search", get(searxng))
        .route("/tavily/search", post(tavily))
        .route("/brave/res/v1/web/search", get(brave))
        .route("/web/charset/{case}", get(charset_page))
        .route("/web/big", get(big_body))
        .route("/web/drip", get(drip))
        .route("/web/redirect", get(redirect_to))
        .route("/web/loop/{n}", get(redirect_loop))
        .route("/web/typed/{kind}", get(typed))
        .route("/web/negotiated", get(negotiated))
        .merge(model_routes())
        .merge(crawl_routes())
}

fn sample(path: &str) -> Vec<u8> {
    std::fs::read(fixtures_dir().join("search").join(path)).expect("search sample")
}

fn html(status: StatusCode, body: impl Into<Body>) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body.into(),
    )
        .into_response()
}

fn json_body(status: StatusCode, body: impl Into<Body>) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.into(),
    )
        .into_response()
}

/// A query word that asks for a failure: ratelimit, captcha, nothing, forbidden, slow, broken.
fn failure(query: &str) -> Option<&'static str> {
    [
        "ratelimit",
        "captcha",
        "nothing",
        "forbidden",
        "slow",
        "broken",
    ]
    .into_iter()
    .find(|word| query.split_whitespace().any(|w| w == *word))
}

async fn hang() -> Response {
    tokio::time::sleep(Duration::from_secs(3600)).await;
    StatusCode::GATEWAY_TIMEOUT.into_response()
}

async fn duckduckgo(Form(form): Form<Vec<(String, String)>>) -> Response {
    let field = |name: &str| {
        form.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let query = field("q").unwrap_or_default();
    match failure(query) {
        Some("ratelimit") => {
            return html(
                StatusCode::ACCEPTED,
                "<html><body>ratelimited</body></html>",
            );
        }
        Some("captcha") => {
            return html(
                StatusCode::OK,
                "<html><body><div class=\"anomaly-modal__title\">Unfortunately, bots use \
                 DuckDuckGo too.</div><form id=\"challenge-form\"></form></body></html>",
            );
        }
        Some("nothing") => {
            return html(
                StatusCode::OK,
                "<html><body><div id=\"links\" class=\"results\"><div class=\"result results_links \
                 no-results\"><div class=\"result__body\">No results.</div></div></div></body></html>",
            );
        }
        Some("slow") => return hang().await,
        _ => {}
    }
    // Page 2 is asked for with the hidden fields of page 1's "Next" form (vqd, s, dc).
    let page = if field("vqd").is_some() && field("s") == Some("10") {
        "duckduckgo/html_results_indexeddb-wrapper.html"
    } else {
        "duckduckgo/html_results_client-side-graph-database.html"
    };
    html(StatusCode::OK, sample(page))
}

async fn searxng(Query(query): Query<Vec<(String, String)>>) -> Response {
    let field = |name: &str| {
        query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    if field("format") != Some("json") {
        return html(StatusCode::OK, "<html>html output</html>");
    }
    match failure(field("q").unwrap_or_default()) {
        Some("forbidden") => html(StatusCode::FORBIDDEN, "<h1>403 Forbidden</h1>"),
        Some("ratelimit") => html(StatusCode::TOO_MANY_REQUESTS, "Too Many Requests"),
        Some("broken") => json_body(StatusCode::OK, "{\"results\": [ {\"url\": "),
        Some("nothing") => json_body(
            StatusCode::OK,
            json!({"query": "nothing", "results": [], "unresponsive_engines": []}).to_string(),
        ),
        Some("slow") => hang().await,
        _ => json_body(StatusCode::OK, sample("searxng/search_format_json.json")),
    }
}

async fn tavily(headers: HeaderMap, body: String) -> Response {
    if headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        != Some(&format!("Bearer {TEST_KEY}"))
    {
        return json_body(
            StatusCode::UNAUTHORIZED,
            json!({"detail": {"error": "Unauthorized: missing or invalid API key."}}).to_string(),
        );
    }
    // Tavily is the backend that always works: failover tests end there.
    let request: Value = serde_json::from_str(&body).unwrap_or_default();
    assert!(request["query"].is_string(), "Tavily needs a query: {body}");
    json_body(StatusCode::OK, sample("tavily/search_advanced.json"))
}

async fn brave(headers: HeaderMap, Query(query): Query<Vec<(String, String)>>) -> Response {
    if headers
        .get("x-subscription-token")
        .and_then(|v| v.to_str().ok())
        != Some(TEST_KEY)
    {
        return json_body(
            StatusCode::UNAUTHORIZED,
            json!({"type": "ErrorResponse", "error": {"status": 401, "code": "SUBSCRIPTION_TOKEN_INVALID", "detail": "The provided subscription token is invalid."}}).to_string(),
        );
    }
    let q = query
        .iter()
        .find(|(k, _)| k == "q")
        .map(|(_, v)| v.as_str())
        .unwrap_or_default();
    match failure(q) {
        Some("ratelimit") => json_body(
            StatusCode::TOO_MANY_REQUESTS,
            json!({"type": "ErrorResponse", "error": {"status": 429, "code": "RATE_LIMITED", "detail": "Request rate limit exceeded."}}).to_string(),
        ),
        _ => json_body(StatusCode::OK, sample("brave/web_search.json")),
    }
}

/// Pages in legacy encodings, declared by header, by `<meta>`, or by a byte-order mark.
async fn charset_page(Path(case): Path<String>) -> Response {
    let (text, encoding, content_type, meta) = match case.as_str() {
        "shift_jis-header" => (
            "日本語のページです。東京駅",
            encoding_rs::SHIFT_JIS,
            "text/html; charset=Shift_JIS",
            "",
        ),
        "windows-1251-header" => (
            "Привет, мир! Москва",
            encoding_rs::WINDOWS_1251,
            "text/html; charset=windows-1251",
            "",
        ),
        "windows-1251-meta" => (
            "Привет, мир! Москва",
            encoding_rs::WINDOWS_1251,
            "text/html",
            "<meta charset=\"windows-1251\">",
        ),
        "utf-8-bom" => ("Grüße aus Zürich", encoding_rs::UTF_8, "text/html", ""),
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    let page = format!(
        "<!doctype html><html><head>{meta}<title>{text}</title></head><body><main><p>{text}</p></main></body></html>"
    );
    let mut bytes = encoding.encode(&page).0.into_owned();
    if case == "utf-8-bom" {
        bytes.splice(0..0, [0xEF, 0xBB, 0xBF]);
    }
    ([(header::CONTENT_TYPE, content_type)], bytes).into_response()
}

/// 20 MB of HTML, streamed.
async fn big_body() -> Response {
    let chunk = format!("<p>{}</p>\n", "lorem ipsum dolor sit amet ".repeat(40));
    let chunks = (20 * 1024 * 1024) / chunk.len() + 1;
    let stream = futures::stream::iter(
        std::iter::once("<!doctype html><html><head><title>Big</title></head><body>".to_string())
            .chain(std::iter::repeat_n(chunk, chunks))
            .map(Ok::<_, std::io::Error>),
    );
    (
        [(header::CONTENT_TYPE, "text/html")],
        Body::from_stream(stream),
    )
        .into_response()
}

/// Headers at once, then one byte every two seconds, forever.
async fn drip() -> Response {
    let stream = futures::stream::unfold(0u64, |n| async move {
        if n > 0 {
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        Some((Ok::<_, std::io::Error>(vec![b'x']), n + 1))
    });
    (
        [(header::CONTENT_TYPE, "text/html")],
        Body::from_stream(stream),
    )
        .into_response()
}

/// `?to=URL&hops=N`: N redirects through this route, then one to `to`.
async fn redirect_to(Query(query): Query<Vec<(String, String)>>) -> Response {
    let field = |name: &str| {
        query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let to = field("to").unwrap_or_default();
    let hops: u32 = field("hops").and_then(|h| h.parse().ok()).unwrap_or(0);
    let location = if hops == 0 {
        to
    } else {
        let encoded: String = url::form_urlencoded::byte_serialize(to.as_bytes()).collect();
        format!("/web/redirect?hops={}&to={encoded}", hops - 1)
    };
    (StatusCode::FOUND, [(header::LOCATION, location)]).into_response()
}

/// A redirect loop: 1 → 2 → … → 10 → 1.
async fn redirect_loop(Path(n): Path<u32>) -> Response {
    let next = n % 10 + 1;
    (
        StatusCode::FOUND,
        [(header::LOCATION, format!("/web/loop/{next}"))],
    )
        .into_response()
}

/// Non-HTML responses: plain text, JSON, a PDF.
async fn typed(Path(kind): Path<String>) -> Response {
    match kind.as_str() {
        "text" => (
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "line one\nline two — ünïcode\n",
        )
            .into_response(),
        "json" => json_body(StatusCode::OK, "{\"name\": \"webpilot\", \"tools\": 8}"),
        "pdf" => (
            [(header::CONTENT_TYPE, "application/pdf")],
            b"%PDF-1.7\n%\xE2\xE3\xCF\xD3\n1 0 obj\n".to_vec(),
        )
            .into_response(),
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

/// The `Accept` headers `/web/negotiated` received, in order.
pub static NEGOTIATED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// A page served the way Cloudflare's Markdown for Agents serves it: Markdown to a client that
/// prefers it (with the site's `Content-Signal`), HTML with navigation chrome to anyone else.
async fn negotiated(headers: HeaderMap) -> Response {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    NEGOTIATED.lock().unwrap().push(accept.clone());
    let markdown_first = accept
        .split(',')
        .next()
        .is_some_and(|first| first.trim().starts_with("text/markdown"));
    if markdown_first {
        let markdown = "---\ntitle: Pricing\n---\n\n# Pricing plans\n\nStarter is free. \
            [Compare plans](/plans) or [talk to sales](https://sales.example/contact).\n";
        return (
            [
                (header::CONTENT_TYPE, "text/markdown; charset=utf-8"),
                (header::VARY, "Accept"),
                (
                    header::HeaderName::from_static("content-signal"),
                    "ai-train=no, search=yes, ai-input=yes",
                ),
            ],
            markdown,
        )
            .into_response();
    }
    html(
        StatusCode::OK,
        "<html><head><title>Pricing | Example</title></head><body><nav>Home Docs Blog</nav>\
         <main><h1>Pricing plans</h1><p>Starter is free.</p></main></body></html>",
    )
}

/// A configuration whose browserless side talks to this fixture server: search backends at
/// `fixtures`, 127.0.0.1 (only) allowed, short timeouts.
pub fn config(fixtures: &str) -> webpilot::config::Config {
    let mut config = super::loopback_config();
    config.fetch.read_timeout_ms = 1_000;
    config.fetch.total_timeout_ms = 8_000;
    config.search.duckduckgo_url = format!("{fixtures}/ddg/html/");
    config.search.searxng_url = Some(format!("{fixtures}/searxng"));
    config.search.tavily_url = format!("{fixtures}/tavily");
    config.search.tavily_key = Some(TEST_KEY.into());
    config.search.brave_url = format!("{fixtures}/brave");
    config.search.brave_key = Some(TEST_KEY.into());
    config.search.timeout_ms = 1_500;
    config.llm.base_url = format!("{fixtures}/v1");
    config.llm.model = "scripted".into();
    config.llm.timeout_ms = 3_000;
    config
}

/// Requests the scripted model has received, per scenario.
pub static MODEL_CALLS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
/// Extraction requests (no tools: `extract=json` with a schema) the scripted model received.
pub static EXTRACTIONS: std::sync::Mutex<Vec<Value>> = std::sync::Mutex::new(Vec::new());
/// Set when the "slow" scenario's stream was dropped before it finished (client went away).
pub static SLOW_STREAM_DROPPED: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

pub fn model_routes() -> Router<super::Sites> {
    Router::new().route("/v1/chat/completions", post(scripted_model))
}

/// One SSE `data:` line of a chat completion chunk.
fn chunk(delta: Value, finish: Option<&str>) -> String {
    let body = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "scripted",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {body}\n\n")
}

fn tool_call_chunks(index: usize, id: &str, name: &str, arguments: &str) -> Vec<String> {
    // The name and the arguments arrive in separate chunks, the arguments split mid-token.
    let (head, tail) = arguments.split_at(arguments.len() / 2);
    vec![
        chunk(
            json!({"tool_calls": [{"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": index, "function": {"arguments": head}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": index, "function": {"arguments": tail}}]}),
            None,
        ),
    ]
}

fn finished(mut pieces: Vec<String>, reason: &str) -> Vec<String> {
    pieces.push(chunk(json!({}), Some(reason)));
    pieces.push(format!(
        "data: {}\n\n",
        json!({"id": "chatcmpl-1", "choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}})
    ));
    pieces.push("data: [DONE]\n\n".into());
    pieces
}

fn answer(text: &[&str]) -> Vec<String> {
    let mut pieces = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    pieces.extend(text.iter().map(|t| chunk(json!({"content": t}), None)));
    finished(pieces, "stop")
}

/// Streams `pieces`, re-cut at arbitrary byte positions so lines straddle network chunks.
fn sse(pieces: Vec<String>) -> Response {
    let joined = pieces.concat().into_bytes();
    let cut: Vec<Vec<u8>> = joined.chunks(37).map(<[u8]>::to_vec).collect();
    let stream = futures::stream::iter(cut.into_iter().map(Ok::<_, std::io::Error>));
    (
        [(header::CONTENT_TYPE, "text/event-stream")],
        Body::from_stream(stream),
    )
        .into_response()
}

/// A model reading a page into data: a product page's first answer is not JSON, the answer
/// after the validation errors is; a page it has nothing for gets `{}`.
fn extraction(headers: &HeaderMap, mut request: Value) -> Response {
    // What the server saw of the caller: its key, kept beside the request.
    request["authorization"] = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map_or(Value::Null, |v| json!(v));
    EXTRACTIONS.lock().unwrap().push(request.clone());
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let page = messages
        .iter()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    let retried = messages.iter().any(|m| {
        m["role"] == "user"
            && m["content"]
                .as_str()
                .is_some_and(|c| c.contains("does not satisfy"))
    });
    if page.contains("Open roles") {
        return sse(answer(&[&role_by_ref(page)]));
    }
    let text = match (page.contains("Steel kettle"), retried) {
        (true, false) => "Sure! The product is {name: Steel kettle".to_string(),
        (true, true) => {
            json!({"name": "Steel kettle", "price": 1299.0, "currency": "EUR"}).to_string()
        }
        (false, _) => "{}".to_string(),
    };
    sse(answer(&[&text]))
}

/// The open role as a model reads it from a tab: its title from the text, its apply link by
/// the ref webpilot's element list gives it.
fn role_by_ref(page: &str) -> String {
    let elements = page
        .split_once("<elements>")
        .map(|(_, rest)| rest)
        .unwrap_or_default();
    let apply = elements
        .lines()
        .find(|line| line.contains("Apply for Rust engineer"))
        .and_then(|line| line.strip_prefix('['))
        .and_then(|line| line.split(']').next())
        .and_then(|n| n.parse::<u64>().ok());
    json!({"title": "Rust engineer", "apply": apply}).to_string()
}

struct DropFlag;

impl Drop for DropFlag {
    fn drop(&mut self) {
        SLOW_STREAM_DROPPED.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// An OpenAI-compatible `/v1/chat/completions` whose answers are scripted by the first user
/// message (the scenario) and the number of tool results already in the conversation.
async fn scripted_model(headers: HeaderMap, Json(request): Json<Value>) -> Response {
    if request["tools"].is_null() {
        return extraction(&headers, request);
    }
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let scenario = messages
        .iter()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string();
    let tool_results: Vec<&str> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str())
        .collect();
    let calls_so_far = {
        let mut calls = MODEL_CALLS.lock().unwrap();
        calls.push(scenario.clone());
        calls.iter().filter(|c| **c == scenario).count()
    };
    assert!(
        request["stream"] == true && request["tools"].is_array(),
        "{request}"
    );
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    match (scenario.as_str(), tool_results.len()) {
        ("search and open", 0) => {
            let mut pieces = tool_call_chunks(0, "call_search", "web_search", r#"{"query": "graph database", "backend": "duckduckgo", "max_results": 3}"#);
            pieces.extend(tool_call_chunks(1, "call_open", "open_web_page", &format!(r#"{{"url": "http://{host}/web/article.html"}}"#)));
            sse(finished(pieces, "tool_calls"))
        }
        ("search and open", _) => {
            // The agent loop hands page text over in marked blocks, and its prompt says why.
            let bounded = tool_results.iter().any(|t| t.contains("<<<page-content "))
                && messages[0]["content"].as_str().is_some_and(|p| p.contains("<<<page-content"));
            let saw = tool_results.iter().any(|t| t.contains("gitnexus"))
                && tool_results.iter().any(|t| t.contains("139 euros"))
                && bounded;
            let mut pieces = vec![chunk(json!({"role": "assistant", "reasoning_content": "Both tools answered."}), None)];
            pieces.extend(answer(&[if saw { "Night trains " } else { "MISSING " }, "cost from 29 euros."]));
            sse(pieces)
        }
        ("malformed", 0) => sse(finished(tool_call_chunks(0, "call_bad", "web_search", r#"{"query": "#), "tool_calls")),
        ("malformed", _) => {
            let fixed = tool_results[0].contains("INVALID_ARGUMENT");
            sse(answer(&[if fixed { "I will fix my arguments." } else { "no error seen" }]))
        }
        ("unknown tool", 0) => sse(finished(tool_call_chunks(0, "call_x", "teleport", r#"{"to": "mars"}"#), "tool_calls")),
        ("unknown tool", _) => {
            let told = tool_results[0].contains("NO_SUCH_TOOL");
            sse(answer(&[if told { "That tool does not exist." } else { "no error seen" }]))
        }
        // Every question is answered by looking at the page again.
        ("look each time", _)
            if messages.last().is_some_and(|m| m["role"] == "user" && m["content"].is_string()) =>
        {
            sse(finished(tool_call_chunks(0, "call_look", "browser_screenshot", "{}"), "tool_calls"))
        }
        ("look each time", _) => sse(answer(&["I looked."])),
        ("look", 0) => sse(finished(tool_call_chunks(0, "call_look", "browser_screenshot", "{}"), "tool_calls")),
        ("look", _) => {
            // A vision model gets the picture as an image part of a user message.
            let pictured = messages.iter().any(|m| {
                m["role"] == "user"
                    && m["content"].as_array().is_some_and(|parts| {
                        parts.iter().any(|p| p["type"] == "image_url" && p["image_url"]["url"].as_str().is_some_and(|u| u.starts_with("data:image/png;base64,")))
                    })
            });
            sse(answer(&[if pictured { "I see the page." } else { "I see nothing." }]))
        }
        ("show me markup", 0) => sse(finished(tool_call_chunks(0, "call_markup", "open_web_page", &format!(r#"{{"url": "http://{host}/xss.html"}}"#)), "tool_calls")),
        ("show me markup", _) => sse(answer(&["The title is <img src=x onerror=\"top.__pwned='answer'\"> and ", "<script>top.__pwned='script'</script> **bold** [a link](javascript:top.__pwned='link')"])),
        ("hand off", 0) => sse(finished(tool_call_chunks(0, "call_person", "browser_interact", r#"{"action": "handoff", "message": "Solve the puzzle", "timeout_ms": 1000, "session": "chat-handoff"}"#), "tool_calls")),
        ("hand off", _) => {
            let timed_out = tool_results[0].contains(r#""handed_back":"timeout""#);
            sse(answer(&[if timed_out { "Nobody solved it." } else { "no timeout seen" }]))
        }
        ("forever", n) => sse(finished(tool_call_chunks(0, &format!("call_{n}"), "web_search", r#"{"query": "graph database", "backend": "duckduckgo", "max_results": 1}"#), "tool_calls")),
        ("busy", _) if calls_so_far == 1 => (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::RETRY_AFTER, "0")],
            Json(json!({"error": {"message": "Rate limit reached", "type": "requests"}})),
        )
            .into_response(),
        ("busy", _) => sse(answer(&["Answered after a retry."])),
        ("unauthorized", _) => (
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}})),
        )
            .into_response(),
        ("stall", _) => {
            // Headers, then silence longer than the configured model timeout.
            let stream = futures::stream::unfold(0u32, |n| async move {
                if n > 0 {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                }
                Some((Ok::<_, std::io::Error>(chunk(json!({"role": "assistant", "content": ""}), None)), n + 1))
            });
            ([(header::CONTENT_TYPE, "text/event-stream")], Body::from_stream(stream)).into_response()
        }
        ("cut", _) => {
            let pieces = [chunk(json!({"role": "assistant", "content": "Half an ans"}), None)];
            sse(pieces.to_vec())
        }
        ("slow", _) => {
            let guard = DropFlag;
            let stream = futures::stream::unfold((0u32, guard), |(n, guard)| async move {
                if n >= 600 {
                    std::mem::forget(guard);
                    return None;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                Some((Ok::<_, std::io::Error>(chunk(json!({"content": "tick "}), None)), (n + 1, guard)))
            });
            ([(header::CONTENT_TYPE, "text/event-stream")], Body::from_stream(stream)).into_response()
        }
        _ => sse(answer(&["I have no script for this."])),
    }
}

/// Requests in flight and the most seen at once, per `Host` header, for crawl pages.
pub static CRAWL_LOAD: std::sync::Mutex<Vec<(String, usize, usize)>> =
    std::sync::Mutex::new(Vec::new());

pub fn crawl_routes() -> Router<super::Sites> {
    Router::new()
        .route("/crawl/page/{n}", get(crawl_page))
        .route("/crawl/etag/{n}", get(crawl_etag))
        .route("/crawl/slow", get(crawl_slow))
        .route("/crawl/slow/{name}", get(crawl_slow_named))
        .route("/crawl/shell/{n}", get(crawl_shell))
        .route("/crawl/shell-data/{n}", get(crawl_shell_data))
}

/// The `If-None-Match` each request to `/crawl/etag/{n}` carried ("" when none), by path.
pub static CONDITIONAL: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());

/// A page with an `ETag`, answering `304 Not Modified` to a request that names it.
async fn crawl_etag(Path(n): Path<u32>, headers: HeaderMap) -> Response {
    let etag = format!("\"v1-{n}\"");
    let asked = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    CONDITIONAL
        .lock()
        .unwrap()
        .push((format!("/crawl/etag/{n}"), asked.clone()));
    if asked == etag {
        return (StatusCode::NOT_MODIFIED, [(header::ETAG, etag)]).into_response();
    }
    let body = format!(
        "<html><head><title>Versioned {n}</title></head><body><main><h1>Versioned {n}</h1>\
         <p>This page changes rarely; its version is {etag}.</p></main></body></html>"
    );
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8".to_string()),
            (header::ETAG, etag),
        ],
        body,
    )
        .into_response()
}

/// One request to a JavaScript-shell page or its data, as the server saw it.
#[derive(Debug, Clone)]
pub struct ShellRequest {
    pub path: String,
    pub cookie: String,
    /// A browser navigation (`Sec-Fetch-Mode: navigate`), not the HTTP client's GET.
    pub navigation: bool,
    /// When the request arrived, and when its response was sent.
    pub arrived: Instant,
    pub answered: Instant,
}

pub static SHELL_REQUESTS: std::sync::Mutex<Vec<ShellRequest>> = std::sync::Mutex::new(Vec::new());

fn record_shell_request(path: String, headers: &HeaderMap, arrived: Instant) {
    let header = |name| {
        headers
            .get(name)
            .and_then(|v: &axum::http::HeaderValue| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    SHELL_REQUESTS.lock().unwrap().push(ShellRequest {
        path,
        cookie: header(header::COOKIE.as_str()),
        navigation: header("sec-fetch-mode") == "navigate",
        arrived,
        answered: Instant::now(),
    });
}

/// A single-page-app shell, built like a real one: an empty root, a script that fetches its
/// data and renders about 300 ms later. The server sets a cookie on the page, the script sets
/// another and shows the cookies it found: a shared cookie jar would show (and send) them.
async fn crawl_shell(headers: HeaderMap, Path(n): Path<u32>) -> Response {
    record_shell_request(format!("/crawl/shell/{n}"), &headers, Instant::now());
    let page = format!(
        r#"<!doctype html><html><head><title>Shell {n}</title></head><body>
<div id="root"></div>
<script>
  const before = document.cookie || "none";
  document.cookie = "rendered_by=shell-{n}; path=/";
  setTimeout(async () => {{
    const data = await (await fetch("/crawl/shell-data/{n}")).json();
    document.getElementById("root").innerHTML =
      "<article><h1>" + data.title + "</h1><p>" + data.text + "</p><p>Cookies before: " + before + ".</p></article>";
  }}, 300);
</script></body></html>"#
    );
    let mut response = html(StatusCode::OK, page);
    if let Ok(value) = format!("visit=shell-{n}; Path=/").parse() {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// The shell's data, after 100 ms (a real API takes a while too).
async fn crawl_shell_data(headers: HeaderMap, Path(n): Path<u32>) -> Response {
    let arrived = Instant::now();
    tokio::time::sleep(Duration::from_millis(100)).await;
    record_shell_request(format!("/crawl/shell-data/{n}"), &headers, arrived);
    let text = format!(
        "Rendered page number {n}: this article text exists only after the script ran, so only \
         a browser can read it, and it is long enough to count as the page's main content."
    );
    Json(json!({ "title": format!("Rendered {n}"), "text": text })).into_response()
}

fn crawl_load(host: &str, change: isize) {
    let mut load = CRAWL_LOAD.lock().unwrap();
    let index = match load.iter().position(|(h, _, _)| h == host) {
        Some(index) => index,
        None => {
            load.push((host.to_string(), 0, 0));
            load.len() - 1
        }
    };
    let entry = &mut load[index];
    entry.1 = (entry.1 as isize + change) as usize;
    entry.2 = entry.2.max(entry.1);
}

/// The most requests one host saw at once.
pub fn peak_load(host: &str) -> usize {
    CRAWL_LOAD
        .lock()
        .unwrap()
        .iter()
        .find(|(h, _, _)| h == host)
        .map_or(0, |e| e.2)
}

/// An article page that takes 100 ms, counted per host.
async fn crawl_page(headers: HeaderMap, Path(n): Path<u32>) -> Response {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default()
        .to_string();
    crawl_load(&host, 1);
    tokio::time::sleep(Duration::from_millis(100)).await;
    crawl_load(&host, -1);
    html(
        StatusCode::OK,
        format!(
            "<!doctype html><html><head><title>Page {n}</title></head><body><article><h1>Page {n}</h1>\
             <p>This is page number {n} of the crawl fixture. It has enough words in one paragraph to be \
             read as the article of the page by any main-content extractor that looks for prose.</p>\
             <p>A second paragraph, so the page reads like a short article about the number {n}.</p>\
             </article></body></html>"
        ),
    )
}

/// The names `/crawl/slow/{name}` was asked for, in order: what a crawl really fetched.
pub static SLOW_ASKED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// The names whose slow page was answered, in order.
pub static SLOW_ANSWERED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// The slow page under a name the server notes when the request arrives and when it answers.
async fn crawl_slow_named(Path(name): Path<String>) -> Response {
    SLOW_ASKED.lock().unwrap().push(name.clone());
    let page = crawl_slow().await;
    SLOW_ANSWERED.lock().unwrap().push(name);
    page
}

async fn crawl_slow() -> Response {
    tokio::time::sleep(Duration::from_secs(2)).await;
    html(
        StatusCode::OK,
        "<!doctype html><title>Slow</title><article><p>Finally, the slow page answered after two seconds of waiting.</p></article>",
    )
}
