//! Fixture routes for the browserless tools: search backends speaking their real wire formats
//! (captured responses from `fixtures/search/`, chosen failures keyed by the query), and pages
//! that exercise the guarded client (charsets, huge and slow bodies, redirects, content types).

use std::time::Duration;

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

pub fn routes() -> Router<String> {
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

/// A configuration whose browserless side talks to this fixture server: search backends at
/// `fixtures`, 127.0.0.1 (only) allowed for fetches, short timeouts.
pub fn config(fixtures: &str) -> webpilot::config::Config {
    let mut config = webpilot::config::Config::default();
    config.fetch.allow = vec!["127.0.0.1".into()];
    config.fetch.read_timeout_ms = 1_000;
    config.fetch.total_timeout_ms = 8_000;
    config.search.duckduckgo_url = format!("{fixtures}/ddg/html/");
    config.search.searxng_url = Some(format!("{fixtures}/searxng"));
    config.search.tavily_url = format!("{fixtures}/tavily");
    config.search.tavily_key = Some(TEST_KEY.into());
    config.search.brave_url = format!("{fixtures}/brave");
    config.search.brave_key = Some(TEST_KEY.into());
    config.search.timeout_ms = 1_500;
    config
}
