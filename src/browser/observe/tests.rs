//! The tab log's bookkeeping on CDP events as Chromium sends them (JSON), without a browser:
//! rings stay bounded, bodies stay within the tab's cap, marks split what an action caused.

use serde_json::json;

use super::*;
use crate::browser::observe::view::{NetworkQuery, StatusFilter};
use chromiumoxide::cdp::browser_protocol::network::{
    EventLoadingFailed, EventLoadingFinished, EventRequestWillBeSent, EventResponseReceived,
};
use chromiumoxide::cdp::js_protocol::runtime::EventExceptionThrown;

fn sent(id: &str, url: &str, kind: &str, redirect: Option<i64>) -> EventRequestWillBeSent {
    let mut event = json!({
        "requestId": id, "loaderId": "L", "documentURL": url,
        "request": { "url": url, "method": "GET", "headers": { "Authorization": "Bearer t0ken" },
                     "initialPriority": "High", "referrerPolicy": "no-referrer" },
        "timestamp": 100.0, "wallTime": 1_800_000_000.5, "initiator": { "type": "other" },
        "redirectHasExtraInfo": false, "type": kind, "frameId": "F",
    });
    if let Some(status) = redirect {
        event["redirectResponse"] = response(status, "text/html");
    }
    serde_json::from_value(event).unwrap()
}

fn response(status: i64, mime: &str) -> serde_json::Value {
    json!({
        "url": "http://a.test/", "status": status, "statusText": "", "headers": {},
        "mimeType": mime, "charset": "", "connectionReused": false, "connectionId": 1.0,
        "encodedDataLength": 10.0, "securityState": "neutral",
    })
}

fn answered(id: &str, status: i64, kind: &str) -> EventResponseReceived {
    serde_json::from_value(json!({
        "requestId": id, "loaderId": "L", "timestamp": 100.1, "type": kind,
        "response": response(status, "application/json"), "hasExtraInfo": false,
    }))
    .unwrap()
}

fn finished(id: &str) -> EventLoadingFinished {
    serde_json::from_value(
        json!({ "requestId": id, "timestamp": 100.25, "encodedDataLength": 99.0 }),
    )
    .unwrap()
}

fn limits(requests: usize, tab_bytes: usize) -> NetworkConfig {
    NetworkConfig {
        max_requests: requests,
        max_messages: 3,
        max_tab_body_bytes: tab_bytes,
        max_body_bytes: 100,
        ..NetworkConfig::default()
    }
}

#[test]
fn the_rings_and_the_body_bytes_stay_bounded() {
    let mut log = TabLog::new(limits(50, 1000));
    for n in 0..10_000 {
        let id = format!("R{n}");
        log.request_sent(
            &id,
            &sent(&id, "http://a.test/api", "Fetch", None),
            Origin::Page,
        );
        log.response_received(&id, &answered(&id, 200, "Fetch"));
        let wanted = log
            .loading_finished(&id, &finished(&id))
            .expect("fetch bodies are kept");
        log.keep_body(
            wanted.seq(),
            Body::Text {
                text: "x".repeat(100),
                size: 150,
                truncated: true,
            },
            false,
        );
        let thrown: EventExceptionThrown = serde_json::from_value(json!({
            "timestamp": 1.0,
            "exceptionDetails": { "exceptionId": n, "text": "Uncaught", "lineNumber": 0, "columnNumber": 0 },
        }))
        .unwrap();
        log.exception_thrown(&thrown, Origin::Page);
    }
    assert_eq!(log.exchanges().count(), 50);
    assert_eq!(log.messages().count(), 3);
    assert_eq!(log.by_key.len(), 50);
    assert!(log.body_bytes() <= 1000, "{}", log.body_bytes());
    assert_eq!(log.recorded(), (10_000, 10_000));
    let newest = log.exchange(10_000).unwrap();
    assert!(matches!(
        newest.body,
        Some(Body::Text {
            truncated: true,
            ..
        })
    ));
    let oldest_kept = log.exchanges().next().unwrap();
    assert!(matches!(oldest_kept.body, Some(Body::Missing(_))));
    assert_eq!(log.exchange(1).map(|e| e.seq), None);
    assert_eq!(newest.duration_ms.map(|ms| ms.round()), Some(250.0));
}

#[test]
fn a_mark_splits_what_an_action_caused_and_redirects_stay_one_request() {
    let mut log = TabLog::new(NetworkConfig::default());
    log.request_sent(
        "A",
        &sent("A", "http://a.test/old", "Document", None),
        Origin::Page,
    );
    log.mark();
    assert_eq!(log.page_events(), None);
    log.request_sent(
        "A",
        &sent("A", "http://a.test/new", "Document", Some(302)),
        Origin::Page,
    );
    log.request_sent(
        "B",
        &sent("B", "http://a.test/api", "Fetch", None),
        Origin::Page,
    );
    log.response_received("B", &answered("B", 503, "Fetch"));
    let failed: EventLoadingFailed = serde_json::from_value(json!({
        "requestId": "C", "timestamp": 101.0, "type": "Script", "errorText": "net::ERR_ABORTED", "canceled": true,
    }))
    .unwrap();
    log.request_sent(
        "C",
        &sent("C", "http://a.test/gone.js", "Script", None),
        Origin::Page,
    );
    log.loading_failed("C", &failed, None);
    let events = log.page_events().expect("the 503 is reported");
    assert_eq!(
        (
            events.failed_requests,
            events.console_errors,
            events.page_errors
        ),
        (1, 0, 0)
    );
    assert!(
        events.first[0].contains("] 503 GET http://a.test/api fetch"),
        "{events:?}"
    );
    // The redirected document is one request, listed before the mark, with its hop.
    assert_eq!(log.exchanges().count(), 3);
    let document = log.exchange(1).unwrap();
    assert_eq!(document.url, "http://a.test/new");
    assert_eq!(document.redirects[0].url, "http://a.test/old");
    let since = NetworkQuery {
        since: log.marked().exchange,
        ..NetworkQuery::default()
    };
    assert_eq!(log.network(&since).lines.len(), 2);
    let served = NetworkQuery {
        status: StatusFilter::parse("5xx"),
        ..NetworkQuery::default()
    };
    assert_eq!(log.network(&served).lines.len(), 1);
    let canceled = log.network(&NetworkQuery::default()).lines[2].clone();
    assert!(
        canceled.contains("canceled (net::ERR_ABORTED)"),
        "{canceled}"
    );
    // Credentials are hidden in the detail.
    let (detail, _) = log.request_detail(2).unwrap();
    assert_eq!(detail.request_headers[0].value, "[redacted]");
}

#[test]
fn a_disabled_capture_records_nothing() {
    let mut log = TabLog::new(NetworkConfig {
        capture: false,
        ..NetworkConfig::default()
    });
    log.request_sent(
        "A",
        &sent("A", "http://a.test/", "Document", None),
        Origin::Page,
    );
    assert_eq!(log.exchanges().count(), 0);
}

#[test]
fn status_filters_parse_what_agents_write() {
    assert_eq!(StatusFilter::parse("5xx"), Some(StatusFilter::Class(5)));
    assert_eq!(StatusFilter::parse("4XX"), Some(StatusFilter::Class(4)));
    assert_eq!(StatusFilter::parse("failed"), Some(StatusFilter::Failed));
    assert_eq!(StatusFilter::parse("404"), Some(StatusFilter::Code(404)));
    assert_eq!(StatusFilter::parse("teapot"), None);
    assert_eq!(StatusFilter::parse("9xx"), None);
}
