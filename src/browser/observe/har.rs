//! A capture as a HAR 1.2 file (what Chrome DevTools and HAR viewers open): one page per tab,
//! one entry per kept request, secrets hidden as in every read. Requests that got no answer
//! have status 0 and their error in `_error`, as Chrome writes them.

use serde_json::{Value, json};

use super::redact::Redactor;
use super::{Body, Exchange, TabLog};

/// One tab's part of a HAR file.
pub struct HarPage<'a> {
    pub tab: &'a str,
    pub title: &'a str,
    pub capture: &'a TabLog,
}

/// The HAR document of `pages`; the number of entries beside it.
pub fn document(pages: &[HarPage<'_>]) -> (Value, usize) {
    let mut entries = Vec::new();
    let mut har_pages = Vec::new();
    for page in pages {
        let capture = page.capture;
        let redact = Redactor {
            on: capture.limits().redact,
            secrets: capture.secrets(),
        };
        let started = capture.exchanges().next().map_or(0.0, |e| e.started_at);
        har_pages.push(json!({
            "startedDateTime": crate::tenancy::links::rfc3339_millis(started),
            "id": page.tab,
            "title": redact.text(page.title),
            "pageTimings": {},
        }));
        entries.extend(capture.exchanges().map(|e| entry(e, page.tab, &redact)));
    }
    entries.sort_by(|a, b| {
        a["startedDateTime"]
            .as_str()
            .cmp(&b["startedDateTime"].as_str())
    });
    let count = entries.len();
    let har = json!({
        "log": {
            "version": "1.2",
            "creator": { "name": "webpilot", "version": env!("CARGO_PKG_VERSION") },
            "pages": har_pages,
            "entries": entries,
        }
    });
    (har, count)
}

fn entry(e: &Exchange, tab: &str, redact: &Redactor<'_>) -> Value {
    let answer = e.answer.clone().unwrap_or_default();
    let [blocked, dns, connect, ssl, send, wait] = answer.phases;
    let total = e.duration_ms.unwrap_or(0.0).max(0.0);
    let known: f64 = [blocked, dns, connect, send, wait]
        .iter()
        .filter(|t| **t > 0.0)
        .sum();
    let receive = (total - known).max(0.0);
    let version = answer
        .protocol
        .clone()
        .map_or_else(|| "HTTP/1.1".to_string(), |p| p.to_ascii_uppercase());
    let mut entry = json!({
        "pageref": tab,
        "startedDateTime": crate::tenancy::links::rfc3339_millis(e.started_at),
        "time": total,
        "request": request(e, redact, &version),
        "response": response(e, redact, &version),
        "cache": {},
        "timings": {
            "blocked": blocked, "dns": dns, "connect": connect, "ssl": ssl,
            "send": send.max(0.0), "wait": wait.max(0.0), "receive": receive,
        },
        "_resourceType": e.kind,
    });
    if let Some(remote) = &answer.remote {
        let address = remote
            .rsplit_once(':')
            .map_or(remote.as_str(), |(ip, _)| ip);
        entry["serverIPAddress"] = json!(address.trim_matches(['[', ']']));
    }
    if let Some(failure) = &e.failure {
        entry["_error"] = json!(failure);
    }
    entry
}

fn request(e: &Exchange, redact: &Redactor<'_>, version: &str) -> Value {
    let url = redact.url(&e.url);
    let query: Vec<Value> = url::Url::parse(&url)
        .map(|u| {
            u.query_pairs()
                .map(|(name, value)| json!({ "name": name, "value": value }))
                .collect()
        })
        .unwrap_or_default();
    let mut request = json!({
        "method": e.method,
        "url": url,
        "httpVersion": version,
        "cookies": [],
        "headers": headers(&redact.headers(&e.request_headers)),
        "queryString": query,
        "headersSize": -1,
        "bodySize": -1,
    });
    if let Some(body) = &e.request_body {
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
        request["postData"] = json!({ "mimeType": mime, "text": text });
        request["bodySize"] = json!(size);
    }
    request
}

fn response(e: &Exchange, redact: &Redactor<'_>, version: &str) -> Value {
    let Some(answer) = &e.answer else {
        return json!({
            "status": 0, "statusText": "", "httpVersion": version, "cookies": [], "headers": [],
            "content": { "size": 0, "mimeType": "x-unknown" },
            "redirectURL": "", "headersSize": -1, "bodySize": -1,
        });
    };
    let mut content = json!({ "size": e.decoded_bytes, "mimeType": answer.mime });
    match &e.body {
        Some(Body::Text {
            text, truncated, ..
        }) => {
            content["text"] = json!(redact.text(text));
            if *truncated {
                content["comment"] = json!("cut at [network] max_body_bytes");
            }
        }
        Some(Body::Binary { sha256, .. }) => {
            content["comment"] = json!(format!("binary, sha256 {sha256}"));
        }
        Some(Body::Missing(why)) => content["comment"] = json!(why),
        None => {}
    }
    let location = answer
        .headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("location"))
        .map_or(String::new(), |(_, v)| redact.url(v));
    json!({
        "status": answer.status,
        "statusText": answer.status_text,
        "httpVersion": version,
        "cookies": [],
        "headers": headers(&redact.headers(&answer.headers)),
        "content": content,
        "redirectURL": location,
        "headersSize": -1,
        "bodySize": e.encoded_bytes.map_or(-1, |b| b as i64),
    })
}

fn headers(headers: &[(String, String)]) -> Vec<Value> {
    headers
        .iter()
        .map(|(name, value)| json!({ "name": name, "value": value }))
        .collect()
}
