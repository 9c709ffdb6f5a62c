//! Domain rules (`fetch.allow_domains`, `fetch.deny_domains`) hold wherever the URL policy does:
//! browserless fetches and each redirect hop, browser navigations, link clicks and frames. The
//! hosts are names of the fixture server's own address (`*.localhost` is loopback for webpilot's
//! egress proxy, as for Chromium), so only the rules tell them apart.

mod common;

use std::sync::OnceLock;

use common::{Harness, ok_at};
use serde_json::{Value, json};

fn ruled() -> &'static Harness {
    static RULED: OnceLock<Harness> = OnceLock::new();
    RULED.get_or_init(|| {
        let mut config = webpilot::config::Config::default();
        config.fetch.allow = vec!["127.0.0.1".into(), "::1".into(), "localhost".into()];
        config.fetch.allow_domains = vec!["localhost".into(), "*.localhost".into()];
        config.fetch.deny_domains = vec!["*.denied.localhost".into(), "exact.localhost".into()];
        common::start(config)
    })
}

/// The fixture server's address under another host name.
fn named(host: &str, path: &str) -> String {
    let port = ruled().fixtures.rsplit(':').next().unwrap().to_string();
    format!("http://{host}:{port}/{path}")
}

async fn refused(tool: &str, args: Value, rule: &str) {
    let (status, body) = common::call_at(&ruled().api, tool, args.clone()).await;
    assert_eq!(status, 400, "{tool} {args}: {body:#}");
    assert_eq!(body["error"]["code"], "BLOCKED_URL", "{body:#}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains(rule), "{tool} {args}: {message}");
    assert!(
        body["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("allow_domains")
    );
}

#[tokio::test]
async fn open_web_page_follows_the_rules_at_every_hop() {
    let api = &ruled().api;
    let article = ok_at(
        api,
        "open_web_page",
        json!({ "url": named("localhost", "article.html") }),
    )
    .await;
    assert!(article["content"].as_str().unwrap().len() > 100);
    let denied = named("a.denied.localhost", "article.html");
    refused(
        "open_web_page",
        json!({ "url": denied }),
        "*.denied.localhost",
    )
    .await;
    let redirect = named(
        "localhost",
        &format!(
            "web/redirect?to={}",
            url::form_urlencoded::byte_serialize(denied.as_bytes()).collect::<String>()
        ),
    );
    refused(
        "open_web_page",
        json!({ "url": redirect }),
        "*.denied.localhost",
    )
    .await;
    let elsewhere = json!({ "url": "http://example.org/" });
    refused("open_web_page", elsewhere, "not in fetch.allow_domains").await;
}

#[tokio::test]
async fn the_browser_follows_the_rules_for_pages_links_and_frames() {
    let (api, s) = (&ruled().api, "domains-browser");
    let opened = ok_at(
        api,
        "browser_navigate",
        json!({ "session": s, "target": named("ok.localhost", "domains.html") }),
    )
    .await;
    assert_eq!(opened["status"], 200, "{opened:#}");
    // The frame on an allowed name loads; the one on a denied name is reported.
    let read = ok_at(
        api,
        "browser_read",
        json!({ "session": s, "mode": "text", "max_tokens": 100000 }),
    )
    .await;
    let text = read["content"].as_str().unwrap();
    assert!(text.contains("Same-origin frame"), "{text}");
    let reported = common::blocked_entries(&[&opened, &read]);
    assert!(
        reported.iter().any(|b| b["target"]
            .as_str()
            .unwrap()
            .starts_with("exact.localhost:")
            && b["reason"].as_str().unwrap().contains("exact.localhost")),
        "{reported:#?}"
    );

    let elements = ok_at(
        api,
        "browser_read",
        json!({ "session": s, "mode": "elements", "max_tokens": 100000 }),
    )
    .await;
    let link = common::ref_of(&common::content_lines(&elements), "A denied site");
    common::assert_click_refused(api, s, link, "*.denied.localhost").await;
    for (target, rule) in [
        (named("x.denied.localhost", ""), "*.denied.localhost"),
        (named("exact.localhost", ""), "exact.localhost"),
        (
            "http://example.org/".to_string(),
            "not in fetch.allow_domains",
        ),
    ] {
        refused(
            "browser_navigate",
            json!({ "session": s, "target": target }),
            rule,
        )
        .await;
    }
}
