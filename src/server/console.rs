//! The console at `GET /`: one page compiled into the binary (`console.html`, no build step, no
//! CDN) to talk to the agent, watch its tool calls, follow crawls and look into sessions. It
//! asks for the token when the service wants one; everything it shows comes from the API.

use std::sync::LazyLock;

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use base64::Engine;
use sha2::{Digest, Sha256};

const PAGE: &str = include_str!("console.html");

/// The page's validator and its policy, computed once: the page never changes at run time.
struct Served {
    etag: HeaderValue,
    policy: HeaderValue,
}

static SERVED: LazyLock<Served> = LazyLock::new(|| {
    let digest = Sha256::digest(PAGE.as_bytes());
    let etag = format!("\"{}\"", data_encoding::HEXLOWER.encode(&digest));
    let policy = format!(
        "default-src 'none'; script-src {}; style-src 'unsafe-inline'; \
         img-src 'self' blob:; connect-src 'self'; frame-src 'self'; frame-ancestors 'none'; \
         base-uri 'none'; form-action 'none'",
        own_script(PAGE)
    );
    Served {
        etag: HeaderValue::from_str(&etag).expect("a hex ETag"),
        policy: HeaderValue::from_str(&policy).expect("an ASCII policy"),
    }
});

/// The CSP source that lets only `page`'s one inline script run (by its hash): markup injected
/// into the page could not run any.
pub(super) fn own_script(page: &str) -> String {
    let script = page
        .split_once("<script>")
        .and_then(|(_, rest)| rest.split_once("</script>"))
        .map_or("", |(script, _)| script);
    let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(script.as_bytes()));
    format!("'sha256-{hash}'")
}

pub(super) fn routes() -> Router {
    Router::new().route("/", get(console))
}

async fn console(headers: HeaderMap) -> Response {
    let served = &*SERVED;
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .is_some_and(|tag| tag == served.etag);
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        Html(PAGE).into_response()
    };
    let set = response.headers_mut();
    set.insert(header::ETAG, served.etag.clone());
    set.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    set.insert(header::CONTENT_SECURITY_POLICY, served.policy.clone());
    set.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    set.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}
