//! Many sessions at once: the admission queue makes them wait their turn instead of timing
//! out together, a call whose deadline passes in the queue is `LIMIT` with nothing created,
//! and a tab whose opening outlasts its call is adopted by its session, never leaked.
//! Each test has a service (and a Chromium) of its own: they count the browser's pages.

mod common;

use std::time::{Duration, Instant};

use common::devtools::page_targets;
use common::{Harness, call_at, client, eventually, get_json, metric, retry_after};
use serde_json::{Value, json};
use webpilot::config::Config;

/// A service whose expensive browser steps run `concurrency` at a time.
fn service(concurrency: usize, configure: impl FnOnce(&mut Config)) -> Harness {
    let mut config = Config {
        browser_concurrency: Some(concurrency),
        max_sessions: 40,
        ..common::loopback_config()
    };
    configure(&mut config);
    common::start(config)
}

/// The flow of the load figures: open the light page, list its elements, click "Count up",
/// read the page again. Returns each call's timeout and result.
async fn flow(api: &str, session: &str, page: &str) -> Vec<(u64, Value)> {
    let mut results = Vec::new();
    let mut step = async |tool: &str, args: Value, timeout_ms: u64| {
        let (status, body) = call_at(api, tool, args.clone()).await;
        assert_eq!(status, 200, "{session}: {tool} {args} failed: {body:#}");
        results.push((timeout_ms, body.clone()));
        body
    };
    // Twenty first navigations through two slots take their time in a debug build next to the
    // other tests; what counts is that none overruns its limit.
    let navigate = json!({ "session": session, "target": page, "timeout_ms": 60000 });
    step("browser_navigate", navigate, 60_000).await;
    let read = json!({ "session": session, "mode": "elements" });
    let elements = step("browser_read", read, 15_000).await;
    let lines: Vec<String> = elements["content"]
        .as_str()
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let button = common::ref_of(&lines, "Count up");
    let click = json!({ "session": session, "action": "click", "ref": button });
    step("browser_interact", click, 10_000).await;
    let text = json!({ "session": session, "mode": "text" });
    let after = step("browser_read", text, 15_000).await;
    let content = after["content"].as_str().unwrap();
    assert!(content.contains("Clicks: 1"), "{session}: {content}");
    assert!(content.contains("Ready to count"), "{session}: {content}");
    results
}

/// Tabs of every live session, as `GET /api/sessions` counts them.
async fn tabs_of_all_sessions(api: &str) -> u64 {
    let sessions = get_json(&format!("{api}/api/sessions")).await;
    sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["tabs"].as_u64().unwrap())
        .sum()
}

/// Twenty sessions start at once on a browser that admits two new tabs at a time: every call
/// succeeds within its time limit, and those that waited their turn say so (`queued_ms`).
#[tokio::test]
async fn twenty_sessions_started_at_once_all_run_the_flow() {
    let harness = service(2, |_| {});
    let page = harness.page("light.html");
    let flows: Vec<_> = (0..20)
        .map(|i| {
            let (api, page) = (harness.api.clone(), page.clone());
            tokio::spawn(async move { flow(&api, &format!("crowd-{i}"), &page).await })
        })
        .collect();
    let mut queued = Vec::new();
    for flow in flows {
        for (timeout_ms, result) in flow.await.unwrap() {
            let elapsed = result["elapsed_ms"].as_u64().unwrap();
            assert!(
                elapsed <= timeout_ms,
                "{elapsed} ms > {timeout_ms} ms: {result:#}"
            );
            queued.extend(result["queued_ms"].as_u64());
        }
    }
    assert!(
        queued.iter().all(|ms| *ms >= 100),
        "queued_ms is reported from 100 ms on: {queued:?}"
    );
    assert!(
        !queued.is_empty(),
        "twenty sessions through two slots: some waited"
    );
    let admitted = metric(
        &harness.api,
        None,
        "webpilot_browser_admission_admitted_total",
    )
    .await;
    assert!(admitted >= 20.0, "{admitted}");
    let waited = metric(
        &harness.api,
        None,
        "webpilot_browser_admission_wait_seconds_total",
    )
    .await;
    assert!(waited > 0.0);
    assert_eq!(
        metric(
            &harness.api,
            None,
            "webpilot_browser_admission_queue_length"
        )
        .await,
        0.0
    );
}

/// Both slots held by navigations that never finish: new sessions wait, and when their
/// deadline passes in the queue they get `LIMIT` (429, `Retry-After`), and Chromium has not
/// a single page more for them.
#[tokio::test]
async fn a_deadline_passed_in_the_queue_is_limit_and_creates_nothing() {
    let harness = service(2, |_| {});
    let app = harness.app.clone();
    let blockers: Vec<_> = (1..=2)
        .map(|i| {
            let api = harness.api.clone();
            let args = json!({ "session": format!("hold-{i}"), "target": harness.page("hang"), "timeout_ms": 6000 });
            tokio::spawn(async move { call_at(&api, "browser_navigate", args).await })
        })
        .collect();
    eventually(
        "two navigations hold both slots",
        Duration::from_secs(20),
        || async {
            metric(&harness.api, None, "webpilot_browser_admission_in_use").await == 2.0
                && page_targets(&app).await.len() == 2
        },
    )
    .await;
    let before = page_targets(&app).await.len();
    let waiting: Vec<_> = (1..=4)
        .map(|i| {
            let url = format!("{}/api/tools/browser_navigate", harness.api);
            let args = json!({ "session": format!("wait-{i}"), "target": harness.page("light.html"), "timeout_ms": 700 });
            tokio::spawn(async move {
                let started = Instant::now();
                let response = client().post(url).json(&args).send().await.unwrap();
                let status = response.status().as_u16();
                let wait = retry_after(&response);
                let body: Value = response.json().await.unwrap();
                (status, wait, body, started.elapsed())
            })
        })
        .collect();
    for call in waiting {
        let (status, wait, body, took) = call.await.unwrap();
        assert_eq!(status, 429, "{body:#}");
        assert_eq!(body["error"]["code"], "LIMIT");
        assert!(wait >= 1, "Retry-After {wait}");
        let hint = body["error"]["hint"].as_str().unwrap();
        assert!(hint.contains("nothing was created"), "{hint}");
        assert!(
            took >= Duration::from_millis(650),
            "it waited its turn: {took:?}"
        );
    }
    assert_eq!(
        page_targets(&app).await.len(),
        before,
        "no page for refused calls"
    );
    assert!(
        metric(
            &harness.api,
            None,
            "webpilot_browser_admission_refused_total"
        )
        .await
            >= 4.0
    );
    for blocker in blockers {
        blocker.await.unwrap();
    }
}

/// Thirty sessions start at once with 100 ms each: their tabs outlast their calls. Within the
/// sweep period every page of the browser is some session's tab, and a retried navigate uses
/// that tab instead of opening a second one.
#[tokio::test]
async fn a_tab_whose_opening_outlasts_its_call_is_adopted_not_leaked() {
    let harness = service(32, |config| config.browser_sweep_ms = 300);
    let app = harness.app.clone();
    let page = harness.page("light.html");
    let calls: Vec<_> = (0..30)
        .map(|i| {
            let api = harness.api.clone();
            let session = format!("hasty-{i}");
            let args = json!({ "session": session, "target": page, "timeout_ms": 100 });
            tokio::spawn(async move { (session, call_at(&api, "browser_navigate", args).await) })
        })
        .collect();
    let mut timed_out = Vec::new();
    for call in calls {
        let (session, (status, body)) = call.await.unwrap();
        match status {
            200 => {}
            504 => timed_out.push(session),
            _ => panic!("{session}: {status} {body:#}"),
        }
    }
    assert!(
        !timed_out.is_empty(),
        "thirty tabs at once cannot all open in 100 ms"
    );
    eventually(
        "every page of the browser is a session's tab",
        Duration::from_secs(30),
        || async {
            page_targets(&app).await.len() as u64 == tabs_of_all_sessions(&harness.api).await
        },
    )
    .await;
    for session in &timed_out {
        let args = json!({ "session": session, "target": page, "timeout_ms": 30000 });
        let (status, body) = call_at(&harness.api, "browser_navigate", args).await;
        assert_eq!(status, 200, "{body:#}");
        let (_, tabs) = call_at(&harness.api, "browser_tabs", json!({ "session": session })).await;
        assert_eq!(
            tabs["tabs"].as_array().unwrap().len(),
            1,
            "{session}: {tabs:#}"
        );
    }
    assert_eq!(
        page_targets(&app).await.len() as u64,
        tabs_of_all_sessions(&harness.api).await
    );
}
