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

/// The CSP sources that let only `page`'s own inline scripts run (each by its hash): markup
/// injected into the page could not run any.
pub(super) fn own_script(page: &str) -> String {
    let mut sources = Vec::new();
    let mut rest = page;
    while let Some((script, after)) = rest
        .split_once("<script>")
        .and_then(|(_, rest)| rest.split_once("</script>"))
    {
        let hash =
            base64::engine::general_purpose::STANDARD.encode(Sha256::digest(script.as_bytes()));
        sources.push(format!("'sha256-{hash}'"));
        rest = after;
    }
    if sources.is_empty() {
        return "'none'".into();
    }
    sources.join(" ")
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

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(script: &str) -> String {
        let digest = Sha256::digest(script.as_bytes());
        format!(
            "'sha256-{}'",
            base64::engine::general_purpose::STANDARD.encode(digest)
        )
    }

    #[test]
    fn every_inline_script_of_the_page_is_allowed_by_its_hash() {
        let page =
            "<head><script>let a = 1;</script></head><body><p>x</p>\n<script>\na(2);\n</script>";
        assert_eq!(
            own_script(page),
            format!("{} {}", hash("let a = 1;"), hash("\na(2);\n"))
        );
        assert_eq!(own_script("<p>no script</p>"), "'none'");
        // The console's own: its early requests in the head and the rest at the end.
        assert_eq!(PAGE.matches("<script>").count(), 2);
        assert_eq!(own_script(PAGE).matches("'sha256-").count(), 2);
    }
}
