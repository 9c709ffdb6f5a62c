//! The egress policy holds for everything the browser loads, not only the documents it opens:
//! a hostile page on an allowed site aims every kind of request at listeners on refused
//! addresses (127.0.0.2 and [::1], which this service does not allow) and at the metadata
//! address; the listeners see no connection at all, the page works otherwise, and the results
//! say what was refused.

mod common;

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::Duration;

use common::{Harness, Trap, ok_at};
use serde_json::{Value, json};

/// This binary's service: only 127.0.0.1 and `localhost` (the cross-site fixture) allowed.
fn strict() -> &'static Harness {
    static STRICT: OnceLock<Harness> = OnceLock::new();
    STRICT.get_or_init(|| {
        let mut config = webpilot::config::Config::default();
        config.fetch.allow = vec!["127.0.0.1".into(), "localhost".into()];
        common::start(config)
    })
}

async fn call(tool: &str, args: Value) -> Value {
    ok_at(&strict().api, tool, args).await
}

/// Adds the refusals a result reports to `seen` (target → count).
fn note_blocked(seen: &mut BTreeMap<String, u64>, result: &Value) {
    for blocked in result["blocked"].as_array().into_iter().flatten() {
        let target = blocked["target"].as_str().unwrap().to_string();
        assert!(
            blocked["reason"]
                .as_str()
                .unwrap()
                .contains("private, loopback"),
            "{blocked}"
        );
        *seen.entry(target).or_default() += blocked["count"].as_u64().unwrap();
    }
}

async fn page_text(session: &str, seen: &mut BTreeMap<String, u64>) -> String {
    let read = call(
        "browser_read",
        json!({ "session": session, "mode": "text", "max_tokens": 100000 }),
    )
    .await;
    note_blocked(seen, &read);
    read["content"].as_str().unwrap().to_string()
}

/// Clicks the link whose element line names `label`; returns the result.
async fn click(session: &str, label: &str, seen: &mut BTreeMap<String, u64>) -> Value {
    let read = call(
        "browser_read",
        json!({ "session": session, "mode": "elements", "max_tokens": 100000 }),
    )
    .await;
    note_blocked(seen, &read);
    let target = common::ref_of(&common::content_lines(&read), label);
    let clicked = call(
        "browser_interact",
        json!({ "session": session, "action": "click", "ref": target }),
    )
    .await;
    note_blocked(seen, &clicked);
    clicked
}

/// Listeners on 127.0.0.2 and [::1] (refused here) and the hostile page aimed at them.
fn hostile_page() -> (Trap, Trap, String) {
    let v4 = Trap::on("127.0.0.2:0");
    let v6 = Trap::on("[::1]:0");
    let page = strict().page(&format!(
        "egress.html?v4={}&v6={}",
        v4.host_port(),
        v6.host_port()
    ));
    (v4, v6, page)
}

#[tokio::test]
async fn a_hostile_page_reaches_no_refused_address() {
    let s = "egress-hostile";
    let (v4, v6, page) = hostile_page();
    let mut seen = BTreeMap::new();
    let opened = call(
        "browser_navigate",
        json!({ "session": s, "target": page, "wait_for": "probes done" }),
    )
    .await;
    note_blocked(&mut seen, &opened);
    let text = page_text(s, &mut seen).await;
    assert!(text.contains("probes done, 8 of 8 failed"), "{text}");
    // The page works otherwise: its own fetch, and the frame of another site.
    common::eventually(
        "the page's own fetch and its frame",
        Duration::from_secs(10),
        || {
            let mut seen = BTreeMap::new();
            async move {
                let text = page_text(s, &mut seen).await;
                text.contains("own fetch: 200") && text.contains("Frame of another site")
            }
        },
    )
    .await;

    // The popup opened at load is a tab of the session; its document never left either.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let tabs = call("browser_tabs", json!({ "session": s })).await;
        note_blocked(&mut seen, &tabs);
        if tabs["tabs"].as_array().unwrap().len() == 2 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no popup: {tabs:#}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    for (label, host) in [
        ("A local subdomain", "x.localhost"),
        ("Localhost with a dot", "localhost."),
    ] {
        let reopened = call(
            "browser_navigate",
            json!({ "session": s, "target": page, "wait_for": "probes done" }),
        )
        .await;
        note_blocked(&mut seen, &reopened);
        let clicked = click(s, label, &mut seen).await;
        let reason = clicked["blocked_document"].as_str().unwrap_or_default();
        assert!(reason.contains(host), "{label}: {clicked:#}");
    }
    // image, fetch, socket, worker, prefetch, popup and the nested frame on 127.0.0.2; image,
    // fetch and socket on [::1]; the metadata image. Chromium retries some, hence "at least".
    let all_reported = |seen: &BTreeMap<String, u64>| {
        seen.get(&v4.host_port()).is_some_and(|&n| n >= 7)
            && seen.get(&v6.host_port()).is_some_and(|&n| n >= 3)
            && seen.contains_key("169.254.169.254:80")
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !all_reported(&seen) {
        assert!(
            std::time::Instant::now() < deadline,
            "not every refusal was reported: {seen:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        let tabs = call("browser_tabs", json!({ "session": s })).await;
        note_blocked(&mut seen, &tabs);
    }
    v4.untouched("127.0.0.2");
    v6.untouched("[::1]");

    let metrics = common::get_text(&format!("{}/metrics", strict().api), None).await;
    let refused: f64 = metrics
        .lines()
        .find_map(|line| line.strip_prefix("webpilot_egress_refused_total "))
        .unwrap_or_else(|| panic!("no egress counter: {metrics}"))
        .parse()
        .unwrap();
    assert!(refused >= 11.0, "{metrics}");
}

/// open_web_page renders a page in a browser context of its own; what the policy refused there
/// is reported with the page, and never reaches the refused listeners either.
#[tokio::test]
async fn a_rendered_page_reports_what_was_refused() {
    let (v4, v6, page) = hostile_page();
    let read = call("open_web_page", json!({ "url": page, "mode": "browser" })).await;
    assert_eq!(read["via"], "browser", "{read:#}");
    let targets: Vec<&str> = read["blocked"]
        .as_array()
        .unwrap_or_else(|| panic!("nothing reported: {read:#}"))
        .iter()
        .map(|b| b["target"].as_str().unwrap())
        .collect();
    for expected in [v4.host_port(), "169.254.169.254:80".to_string()] {
        assert!(targets.contains(&expected.as_str()), "{targets:?}");
    }
    v4.untouched("127.0.0.2");
    v6.untouched("[::1]");
}

/// Chromium's autofill asks Google's server about every form a page shows, through the
/// session's egress lane, whatever `--disable-background-networking` says (about 20 requests a
/// second over 8 sessions on form pages): the browser is started with it switched off.
#[tokio::test]
async fn the_browser_asks_no_server_about_the_forms_it_shows() {
    let url = strict().page("form.html");
    call(
        "browser_navigate",
        json!({ "target": url, "session": "forms" }),
    )
    .await;
    let switches = common::devtools::browser_command_line(&strict().app).await;
    let disabled: Vec<&str> = switches
        .iter()
        .filter_map(|s| s.strip_prefix("--disable-features="))
        .flat_map(|features| features.split(','))
        .collect();
    assert!(
        disabled.contains(&"AutofillServerCommunication"),
        "{switches:#?}"
    );
}
