//! Fixture routes for pages built the way real sites are: a payment form posted from a frame
//! of another site, a `fetch` whose response body keeps streaming, and a record of what the
//! server received, so tests assert the server's side and not only the page's.

use std::sync::Mutex;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::post;

/// Requests the page routes below received: (path, body), in arrival order.
static RECEIVED: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());

/// How long `/slow-post` takes before its response headers.
pub const SLOW_POST_MS: u64 = 300;

pub fn routes() -> Router<super::Sites> {
    Router::new()
        .route("/pay", post(pay))
        .route("/slow-post", post(slow_post))
        .route("/live-press", post(live_press))
}

/// What the page routes received so far.
pub fn received() -> Vec<(String, String)> {
    RECEIVED.lock().unwrap().clone()
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
