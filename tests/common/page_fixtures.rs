//! Fixture routes for pages built the way real sites are: a payment form posted from a frame
//! of another site, a `fetch` whose response body keeps streaming, documents a test stores and
//! the server serves (as any type), and a record of what the server received, so tests assert
//! the server's side and not only the page's.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

/// Requests the page routes below received: (path, body), in arrival order.
static RECEIVED: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());

/// Documents stored by tests (`POST /docs/{name}`), by name.
static DOCUMENTS: Mutex<Option<HashMap<String, Vec<u8>>>> = Mutex::new(None);

/// How long `/slow-post` takes before its response headers.
pub const SLOW_POST_MS: u64 = 300;

pub fn routes() -> Router<super::Sites> {
    Router::new()
        .route("/pay", post(pay))
        .route("/fields", post(fields))
        .route("/slow-post", post(slow_post))
        .route("/live-press", post(live_press))
        .route("/verify", post(verify))
        .route("/docs/{name}", post(store_document).get(serve_document))
        .route("/bytes/{count}", get(bytes))
        .route("/whoami", get(whoami))
        .route("/index.html", get(sourcepoint_message))
        .route("/consent", post(consent))
        .route("/feed", get(feed))
}

/// Records who the request says it is from (user agent, languages, `X-Acting-For`), and shows
/// a page to read the browser's side from.
async fn whoami(headers: axum::http::HeaderMap) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let seen = format!(
        "{}|{}|{}",
        header("user-agent"),
        header("accept-language"),
        header("x-acting-for")
    );
    record("/whoami", &seen);
    let page = "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Who am I</title></head>\
         <body><h1>Who am I</h1></body></html>";
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response()
}

/// A document stored by a test, if any.
pub fn stored(name: &str) -> Option<Vec<u8>> {
    DOCUMENTS.lock().unwrap().as_ref()?.get(name).cloned()
}

async fn store_document(Path(name): Path<String>, body: axum::body::Bytes) -> &'static str {
    DOCUMENTS
        .lock()
        .unwrap()
        .get_or_insert_with(HashMap::new)
        .insert(name, body.to_vec());
    "stored"
}

/// A stored document as `?type=` says (default `application/pdf`), 404 when there is none.
async fn serve_document(
    Path(name): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    record("/docs", &name);
    let Some(bytes) = stored(&name) else {
        return axum::http::StatusCode::NOT_FOUND.into_response();
    };
    let mime = query
        .get("type")
        .cloned()
        .unwrap_or_else(|| "application/pdf".into());
    ([(header::CONTENT_TYPE, mime)], bytes).into_response()
}

/// `count` bytes of a repeating pattern, streamed in 64 KiB chunks.
async fn bytes(Path(count): Path<usize>) -> Response {
    record("/bytes", &count.to_string());
    const CHUNK: usize = 64 * 1024;
    let chunks = futures::stream::iter((0..count).step_by(CHUNK).map(move |start| {
        let chunk: Vec<u8> = (start..(start + CHUNK).min(count))
            .map(|i| (i % 251) as u8)
            .collect();
        Ok::<_, std::io::Error>(chunk)
    }));
    (
        [(header::CONTENT_TYPE, "application/octet-stream")],
        Body::from_stream(chunks),
    )
        .into_response()
}

/// Sourcepoint's message frame is served at `/index.html?message_id=…`, where its rules look.
async fn sourcepoint_message() -> Response {
    let page = include_str!("../../fixtures/sp-message.html");
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response()
}

/// The consent fixtures' pages tell what was chosen.
async fn consent(body: String) -> &'static str {
    record("/consent", &body);
    "ok"
}

#[derive(serde::Deserialize)]
struct FeedPage {
    from: usize,
    count: usize,
}

/// A feed's next posts as JSON, the way an infinite-scroll page fetches them.
async fn feed(Query(page): Query<FeedPage>) -> Response {
    record("/feed", &page.from.to_string());
    let posts: Vec<serde_json::Value> = (page.from + 1..=page.from + page.count.min(50))
        .map(|n| serde_json::json!({ "id": n, "title": format!("Post {n}") }))
        .collect();
    axum::Json(posts).into_response()
}

/// What the page routes received so far.
pub fn received() -> Vec<(String, String)> {
    RECEIVED.lock().unwrap().clone()
}

/// Notes a request a route of another file received, for `received()`.
pub fn note(path: &str, body: &str) {
    record(path, body);
}

fn record(path: &str, body: &str) {
    RECEIVED
        .lock()
        .unwrap()
        .push((path.to_string(), body.to_string()));
}

/// The live-view fixture's button reports each press (and where it was clicked).
async fn live_press(body: String) -> &'static str {
    record("/live-press", &body);
    "ok"
}

/// The verify fixture's code and PIN, as `code:pin`.
async fn verify(body: String) -> &'static str {
    record("/verify", &body);
    "ok"
}

/// The card form's target: a receipt naming what was sent, which tells the embedding page.
async fn pay(body: String) -> Response {
    record("/pay", &body);
    let fields: Vec<(String, String)> = url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect();
    let holder = fields
        .iter()
        .find(|(name, _)| name == "holder")
        .map(|(_, value)| value.clone())
        .unwrap_or_default();
    let page = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Receipt</title></head>\
         <body><h1>Receipt</h1><p>Payment accepted for {holder}.</p>\
         <script>parent.postMessage('paid', '*');</script></body></html>"
    );
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response()
}

/// The every-field form's target (fixtures/fields.html): records the body, as sent.
async fn fields(body: String) -> Response {
    record("/fields", &body);
    let page = "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Received</title></head>\
         <body><h1>Received</h1></body></html>";
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response()
}

/// Answers after `SLOW_POST_MS`, then keeps the body open for seconds: a page that never reads
/// it must not wait for it.
async fn slow_post(body: String) -> Response {
    record("/slow-post", &body);
    tokio::time::sleep(Duration::from_millis(SLOW_POST_MS)).await;
    let chunks = futures::stream::unfold(0, |sent| async move {
        match sent {
            0 => Some((Ok::<_, std::io::Error>("{\"saved\":".to_string()), 1)),
            1 => {
                tokio::time::sleep(Duration::from_secs(5)).await;
                Some((Ok("true}".to_string()), 2))
            }
            _ => None,
        }
    });
    (
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(chunks),
    )
        .into_response()
}
