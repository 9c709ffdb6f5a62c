//! A capture as a HAR 1.2 file (what Chrome DevTools and HAR viewers open): one page per tab,
//! one entry per kept request, secrets hidden as in every read. Requests that got no answer
//! have status 0 and their error in `_error`, as Chrome writes them. The document is typed
//! after the HAR 1.2 spec (`fixtures/har-1.2.schema.json` checks it in the tests).

use serde::Serialize;

use super::redact::Redactor;
use super::{Body, Exchange, TabLog};
use crate::tenancy::links::rfc3339_millis;

/// One tab's part of a HAR file.
pub struct HarPage<'a> {
    pub tab: &'a str,
    pub title: &'a str,
    pub capture: &'a TabLog,
}

/// A HAR file.
#[derive(Serialize)]
pub struct Har {
    log: Log,
}

#[derive(Serialize)]
struct Log {
    version: &'static str,
    creator: Creator,
    pages: Vec<Page>,
    entries: Vec<Entry>,
}

#[derive(Serialize)]
struct Creator {
    name: &'static str,
    version: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Page {
    started_date_time: String,
    id: String,
    title: String,
    page_timings: Empty,
}

/// `{}`: what HAR requires where webpilot has nothing to say (page timings, cache).
#[derive(Serialize)]
struct Empty {}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    pageref: String,
    started_date_time: String,
    time: f64,
    request: Request,
    response: Response,
    cache: Empty,
    timings: Timings,
    #[serde(rename = "_resourceType")]
    resource_type: String,
    #[serde(rename = "serverIPAddress", skip_serializing_if = "Option::is_none")]
    server_ip_address: Option<String>,
    #[serde(rename = "_error", skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Serialize)]
struct Timings {
    blocked: f64,
    dns: f64,
    connect: f64,
    ssl: f64,
    send: f64,
    wait: f64,
    receive: f64,
}

/// A header or a query parameter.
#[derive(Serialize)]
struct NameValue {
    name: String,
    value: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Request {
    method: String,
    url: String,
    http_version: String,
    cookies: [(); 0],
    headers: Vec<NameValue>,
    query_string: Vec<NameValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    post_data: Option<PostData>,
    headers_size: i64,
    body_size: i64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PostData {
    mime_type: String,
    text: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Response {
    status: i64,
    status_text: String,
    http_version: String,
    cookies: [(); 0],
    headers: Vec<NameValue>,
    content: Content,
    #[serde(rename = "redirectURL")]
    redirect_url: String,
    headers_size: i64,
    body_size: i64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Content {
    size: u64,
    mime_type: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    comment: Option<String>,
}

/// The HAR document of `pages`; the number of entries beside it.
pub fn document(pages: &[HarPage<'_>]) -> (Har, usize) {
    let mut entries = Vec::new();
    let mut har_pages = Vec::new();
    for page in pages {
        let capture = page.capture;
        let redact = Redactor {
            on: capture.limits().redact,
            secrets: capture.secrets(),
        };
        let started = capture.exchanges().next().map_or(0.0, |e| e.started_at);
        har_pages.push(Page {
            started_date_time: rfc3339_millis(started),
            id: page.tab.to_string(),
            title: redact.text(page.title),
            page_timings: Empty {},
        });
        entries.extend(capture.exchanges().map(|e| entry(e, page.tab, &redact)));
    }
    entries.sort_by(|a, b| a.started_date_time.cmp(&b.started_date_time));
    let count = entries.len();
    let log = Log {
        version: "1.2",
        creator: Creator {
            name: "webpilot",
            version: env!("CARGO_PKG_VERSION"),
        },
        pages: har_pages,
        entries,
    };
    (Har { log }, count)
}

fn entry(e: &Exchange, tab: &str, redact: &Redactor<'_>) -> Entry {
    let answer = e.answer.clone().unwrap_or_default();
    let [blocked, dns, connect, ssl, send, wait] = answer.phases;
    let total = e.duration_ms.unwrap_or(0.0).max(0.0);
    let known: f64 = [blocked, dns, connect, send, wait]
        .iter()
        .filter(|t| **t > 0.0)
        .sum();
    let version = answer
        .protocol
        .clone()
        .map_or_else(|| "HTTP/1.1".to_string(), |p| p.to_ascii_uppercase());
    let server_ip_address = answer.remote.as_ref().map(|remote| {
        let address = remote
            .rsplit_once(':')
            .map_or(remote.as_str(), |(ip, _)| ip);
        address.trim_matches(['[', ']']).to_string()
    });
    Entry {
        pageref: tab.to_string(),
        started_date_time: rfc3339_millis(e.started_at),
        time: total,
        request: request(e, redact, &version),
        response: response(e, redact, &version),
        cache: Empty {},
        timings: Timings {
            blocked,
            dns,
            connect,
            ssl,
            send: send.max(0.0),
            wait: wait.max(0.0),
            receive: (total - known).max(0.0),
        },
        resource_type: e.kind.clone(),
        server_ip_address,
        error: e.failure.clone(),
    }
}

fn request(e: &Exchange, redact: &Redactor<'_>, version: &str) -> Request {
    let url = redact.url(&e.url);
    let query_string = url::Url::parse(&url)
        .map(|u| u.query_pairs().map(|(n, v)| name_value(&n, &v)).collect())
        .unwrap_or_default();
    let (post_data, body_size) = match &e.request_body {
        None => (None, -1),
        Some(body) => {
            let mime = e
                .request_headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case("content-type"))
                .map_or("", |(_, v)| v.as_str());
            let (text, size) = match body {
                Body::Text { text, size, .. } => (redact.body(text, mime), *size as i64),
                Body::Binary { size, .. } => (String::new(), *size as i64),
                Body::Missing(_) => (String::new(), -1),
            };
            let mime_type = mime.to_string();
            (Some(PostData { mime_type, text }), size)
        }
    };
    Request {
        method: e.method.clone(),
        url,
        http_version: version.to_string(),
        cookies: [],
        headers: headers(&redact.headers(&e.request_headers)),
        query_string,
        post_data,
        headers_size: -1,
        body_size,
    }
}

fn response(e: &Exchange, redact: &Redactor<'_>, version: &str) -> Response {
    let Some(answer) = &e.answer else {
        return Response {
            status: 0,
            status_text: String::new(),
            http_version: version.to_string(),
            cookies: [],
            headers: Vec::new(),
            content: Content {
                size: 0,
                mime_type: "x-unknown".into(),
                text: None,
                comment: None,
            },
            redirect_url: String::new(),
            headers_size: -1,
            body_size: -1,
        };
    };
    let (text, comment) = match &e.body {
        Some(Body::Text {
            text, truncated, ..
        }) => (
            Some(redact.text(text)),
            truncated.then(|| "cut at [network] max_body_bytes".to_string()),
        ),
        Some(Body::Binary { sha256, .. }) => (None, Some(format!("binary, sha256 {sha256}"))),
        Some(Body::Missing(why)) => (None, Some(why.to_string())),
        None => (None, None),
    };
    let redirect_url = answer
        .headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("location"))
        .map_or(String::new(), |(_, v)| redact.url(v));
    Response {
        status: answer.status,
        status_text: answer.status_text.clone(),
        http_version: version.to_string(),
        cookies: [],
        headers: headers(&redact.headers(&answer.headers)),
        content: Content {
            size: e.decoded_bytes,
            mime_type: answer.mime.clone(),
            text,
            comment,
        },
        redirect_url,
        headers_size: -1,
        body_size: e.encoded_bytes.map_or(-1, |b| b as i64),
    }
}

fn name_value(name: &str, value: &str) -> NameValue {
    NameValue {
        name: name.to_string(),
        value: value.to_string(),
    }
}

fn headers(headers: &[(String, String)]) -> Vec<NameValue> {
    headers.iter().map(|(n, v)| name_value(n, v)).collect()
}
