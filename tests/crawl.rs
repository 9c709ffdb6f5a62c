//! crawl_batch / crawl_status and the crawler REST API against local pages: progress in order,
//! complete results and errors, per-host caps, and a restart that loses and repeats nothing.

mod common;

use std::collections::HashSet;
use std::sync::OnceLock;
use std::time::Duration;

use common::web_fixtures::{config, peak_load};
use common::{
    Harness, call_at, client, eventually, get_json, postgres, spawn_service_with, start_with,
};
use serde_json::{Value, json};

/// A service for the crawl tests, its tasks in SQLite or, with `database`, in PostgreSQL.
fn crawl_service(database: Option<String>) -> Harness {
    start_with(move |fixtures| {
        let mut config = config(fixtures);
        config.database_url = database;
        config.crawl.per_host = 2;
        // The webhook receivers of these tests listen on plain http on loopback.
        config.crawl.webhook_allow = vec!["http://127.0.0.1:".into()];
        config.crawl.max_urls = 40;
        // The slow page takes two seconds before its headers: slow, not stalled.
        config.fetch.read_timeout_ms = 5_000;
        config
    })
}

fn service() -> &'static Harness {
    static SERVICE: OnceLock<Harness> = OnceLock::new();
    SERVICE.get_or_init(|| crawl_service(None))
}

/// The shared service on PostgreSQL.
fn postgres_service() -> &'static Harness {
    static SERVICE: OnceLock<Harness> = OnceLock::new();
    SERVICE.get_or_init(|| crawl_service(Some(postgres::database())))
}

/// Starts a crawl with `args`, waits (up to `limit`) until it completed, returns its task id.
async fn crawl_to_completion(api: &str, args: Value, limit: Duration) -> String {
    let (status, created) = call_at(api, "crawl_batch", args).await;
    assert_eq!(status, 200, "{created:#}");
    let id = created["task_id"].as_str().unwrap().to_string();
    common::task_reaches(api, &id, &["completed"], limit).await;
    id
}

/// crawl_status followed through its cursors: the pages, each checked, in order.
async fn all_pages(api: &str, id: &str) -> Vec<Value> {
    let mut pages: Vec<Value> = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let (status, page) = call_at(
            api,
            "crawl_status",
            json!({"task_id": id, "cursor": cursor}),
        )
        .await;
        assert_eq!(status, 200, "{page:#}");
        let skipped = page["skipped"].as_array().map_or(0, Vec::len);
        let items = page["results"].as_array().unwrap().len()
            + page["errors"].as_array().unwrap().len()
            + skipped;
        assert!(items > 0, "every page carries at least one URL: {page:#}");
        cursor = page["next_cursor"].as_str().map(str::to_string);
        assert_eq!(page["truncated"], cursor.is_some(), "{page:#}");
        pages.push(page);
        if cursor.is_none() {
            return pages;
        }
        assert!(pages.len() < 100, "cursors do not end");
    }
}

/// Results of all pages, in order.
fn results_of(pages: &[Value]) -> Vec<Value> {
    pages
        .iter()
        .flat_map(|p| p["results"].as_array().unwrap().clone())
        .collect()
}

fn host_of(url: &str) -> String {
    url.trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn thirty_urls_finish_in_order_with_results_errors_and_host_caps() {
    // Its own fixture servers, so the per-host load counts only this test's requests.
    thirty_urls(&crawl_service(None)).await;
}

#[tokio::test]
async fn thirty_urls_finish_in_order_on_postgresql() {
    thirty_urls(&crawl_service(Some(postgres::database()))).await;
}

async fn thirty_urls(harness: &Harness) {
    let mut urls: Vec<String> = (0..24)
        .map(|i| {
            let origin = if i % 2 == 0 {
                &harness.fixtures
            } else {
                &harness.second
            };
            format!("{origin}/crawl/page/{i}")
        })
        .collect();
    urls.push(harness.page("crawl/slow"));
    urls.extend((0..4).map(|i| harness.page(&format!("status/404?{i}"))));
    urls.push("http://169.254.169.254/latest/meta-data/".into());
    let created: Value = client()
        .post(format!("{}/api/crawler/tasks", harness.api))
        .json(&json!({"urls": urls, "parallel": 4, "extract": "main"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["task_id"].as_str().expect("task id").to_string();
    assert_eq!(created["total"], 30);

    let events = common::get_text(
        &format!("{}/api/crawler/tasks/{id}/events", harness.api),
        None,
    )
    .await;
    let mut seen = Vec::new();
    let mut done = None;
    for (name, data) in common::sse_events(&events) {
        match name.as_str() {
            "progress" => seen.push(data["progress"].as_u64().unwrap()),
            "done" => done = Some(data),
            _ => {}
        }
    }
    assert!(!seen.is_empty());
    assert!(
        seen.windows(2).all(|w| w[1] == w[0] + 1),
        "progress out of order: {seen:?}"
    );
    assert_eq!(*seen.last().unwrap(), 30);
    let done = done.expect("a done event");
    assert_eq!(
        (done["status"].as_str(), done["errors"].as_u64()),
        (Some("completed"), Some(5))
    );

    let status = get_json(&format!("{}/api/crawler/tasks/{id}", harness.api)).await;
    assert_eq!(
        (status["progress"].as_u64(), status["total"].as_u64()),
        (Some(30), Some(30))
    );
    let results = status["results"].as_array().unwrap();
    let errors = status["errors"].as_array().unwrap();
    assert_eq!((results.len(), errors.len()), (25, 5), "{status:#}");
    let finished: HashSet<&str> = results
        .iter()
        .chain(errors)
        .map(|i| i["url"].as_str().unwrap())
        .collect();
    assert_eq!(finished.len(), 30);
    assert!(results.iter().any(|r| {
        r["result"]["content"]
            .as_str()
            .unwrap()
            .contains("slow page answered")
    }));
    assert!(results.iter().all(|r| r["result"]["via"] == "http"));
    let codes: Vec<&str> = errors
        .iter()
        .map(|e| e["error"]["code"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes.iter().filter(|c| **c == "UPSTREAM").count(),
        4,
        "{codes:?}"
    );
    assert!(codes.contains(&"BLOCKED_URL"), "{codes:?}");

    for origin in [&harness.fixtures, &harness.second] {
        let peak = peak_load(&host_of(origin));
        assert!((1..=2).contains(&peak), "{origin}: {peak} at once");
    }
    assert_eq!(
        peak_load(&host_of(&harness.fixtures)).max(peak_load(&host_of(&harness.second))),
        2
    );

    let listed = get_json(&format!(
        "{}/api/crawler/tasks?status=completed&limit=10",
        harness.api
    ))
    .await;
    assert!(
        listed["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["task_id"] == id.as_str())
    );
}

#[tokio::test]
async fn tools_check_their_arguments() {
    arguments_checked(service()).await;
}

#[tokio::test]
async fn tools_check_their_arguments_on_postgresql() {
    arguments_checked(postgres_service()).await;
}

async fn arguments_checked(harness: &Harness) {
    let api = &harness.api;
    let args = json!({"urls": [harness.page("crawl/page/1")], "parallel": 2});
    let id = crawl_to_completion(api, args, Duration::from_secs(20)).await;
    let (_, status) = call_at(api, "crawl_status", json!({"task_id": id})).await;
    assert_eq!(status["results"][0]["result"]["title"], "Page 1");

    for (args, code) in [
        (json!({"urls": []}), "INVALID_ARGUMENT"),
        (json!({"urls": ["ftp://x.org/"]}), "INVALID_ARGUMENT"),
        (
            json!({"urls": [harness.page("a")], "parallel": 99}),
            "INVALID_ARGUMENT",
        ),
        (json!({"urls": vec![harness.page("a"); 41]}), "LIMIT"),
    ] {
        let (_, body) = call_at(api, "crawl_batch", args.clone()).await;
        assert_eq!(body["error"]["code"], code, "{args}: {body:#}");
    }
    // An unknown id, and text that is no id at all, are the same unknown task.
    for id in ["crawl-nope", "x' OR '1'='1", "crawl-../../etc"] {
        let (status, body) = call_at(api, "crawl_status", json!({"task_id": id})).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (404, Some("NO_SUCH_TASK")),
            "{id}: {body:#}"
        );
    }
    // An unknown state filter is the caller's mistake, not an empty list.
    let listed = common::client()
        .get(format!("{api}/api/crawler/tasks?status=bogus"))
        .send()
        .await
        .unwrap();
    assert_eq!(listed.status(), 400);
    let body: serde_json::Value = listed.json().await.unwrap();
    assert_eq!(body["error"]["code"], "INVALID_ARGUMENT", "{body:#}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("status")
    );
}

/// Starts a crawl task on the service at `api` and waits until `done` of its URLs finished.
async fn crawl_under_way(api: &str, args: Value, done: u64) -> String {
    let (status, created) = call_at(api, "crawl_batch", args).await;
    assert_eq!(status, 200, "{created:#}");
    let id = created["task_id"].as_str().unwrap().to_string();
    eventually("some URLs to finish", Duration::from_secs(30), || {
        let (api, id) = (api.to_string(), id.clone());
        async move {
            call_at(&api, "crawl_status", json!({"task_id": id}))
                .await
                .1["progress"]
                .as_u64()
                >= Some(done)
        }
    })
    .await;
    id
}

/// Starts the service again on `data`, waits until task `id` completes, and returns its pages.
async fn resumed_pages(data: &std::path::Path, tmp: &std::path::Path, id: &str) -> Vec<Value> {
    let env = [("WEBPILOT_FETCH_ALLOW", "127.0.0.1")];
    let (mut service, api) = spawn_service_with(data, tmp, &env);
    common::task_reaches(&api, id, &["completed"], Duration::from_secs(60)).await;
    let pages = all_pages(&api, id).await;
    service.kill().unwrap();
    service.wait().unwrap();
    pages
}

#[tokio::test]
async fn a_killed_service_resumes_its_task_without_losing_or_repeating_urls() {
    let harness = service();
    let data = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let env = [("WEBPILOT_FETCH_ALLOW", "127.0.0.1")];
    let (mut first, api) = spawn_service_with(data.path(), tmp.path(), &env);
    let urls: Vec<String> = (100..130)
        .map(|i| harness.page(&format!("crawl/page/{i}")))
        .collect();
    let id = crawl_under_way(&api, json!({"urls": urls, "parallel": 2}), 6).await;
    first.kill().unwrap();
    first.wait().unwrap();

    let pages = resumed_pages(data.path(), tmp.path(), &id).await;
    let results = &results_of(&pages);
    assert!(pages.iter().all(|p| p["errors"] == json!([])), "{pages:#?}");
    assert_eq!(results.len(), 30);
    let indices: HashSet<u64> = results
        .iter()
        .map(|r| r["index"].as_u64().unwrap())
        .collect();
    assert_eq!(indices, (0..30).collect::<HashSet<u64>>());
    for result in results {
        let index = result["index"].as_u64().unwrap();
        assert_eq!(result["result"]["title"], format!("Page {}", 100 + index));
    }
}

/// SIGTERM in the middle of a browser crawl: the service exits 0 within the grace period,
/// leaving no Chromium; the URLs in flight are not failed (with the closing browser) but stay
/// pending, and the next start completes the task with every URL read and none in error.
#[tokio::test]
async fn a_terminated_service_leaves_its_crawl_pending_not_failed() {
    let harness = service();
    let data = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let env = [("WEBPILOT_FETCH_ALLOW", "127.0.0.1")];
    let (mut first, api) = spawn_service_with(data.path(), tmp.path(), &env);
    let mut urls: Vec<String> = (200..229)
        .map(|i| harness.page(&format!("crawl/page/{i}")))
        .collect();
    urls.insert(10, harness.page("crawl/slow"));
    let args = json!({"urls": urls, "parallel": 4, "mode": "browser"});
    let id = crawl_under_way(&api, args, 4).await;
    let chromium = common::health(&api).await["browser"]["pid"]
        .as_u64()
        .expect("a browser renders the crawl") as i32;
    let signalled = std::time::Instant::now();
    unsafe { libc::kill(first.id() as i32, libc::SIGTERM) };
    let exit = loop {
        if let Some(exit) = first.try_wait().unwrap() {
            break exit;
        }
        assert!(
            signalled.elapsed() < Duration::from_secs(20),
            "no exit within the grace period"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(exit.success(), "{exit:?}");
    eventually("Chromium exits", Duration::from_secs(10), || async move {
        unsafe { libc::kill(chromium, 0) != 0 }
    })
    .await;

    let pages = resumed_pages(data.path(), tmp.path(), &id).await;
    assert!(pages.iter().all(|p| p["errors"] == json!([])), "{pages:#?}");
    assert_eq!(results_of(&pages).len(), 30);
}

#[tokio::test]
async fn the_crawl_command_writes_json_lines() {
    let harness = service();
    let args = [
        "--parallel".to_string(),
        "2".into(),
        harness.page("crawl/page/7"),
        harness.page("crawl/page/8"),
        harness.page("status/404"),
    ];
    let (code, lines) = common::crawl_command(&args).await;
    assert_eq!(code, Some(1), "one URL failed, so the exit code says so");
    assert_eq!(lines.len(), 3);
    let titles: HashSet<&str> = lines
        .iter()
        .filter_map(|l| l["result"]["title"].as_str())
        .collect();
    assert_eq!(titles, HashSet::from(["Page 7", "Page 8"]));
    assert!(lines.iter().any(|l| l["error"]["code"] == "UPSTREAM"));
}

/// Long results come in pages of about 4000 tokens: every URL exactly once, in URL order, and a
/// cursor that is not one is refused.
#[tokio::test]
async fn crawl_status_pages_long_results() {
    long_results_paged(service()).await;
}

#[tokio::test]
async fn crawl_status_pages_long_results_on_postgresql() {
    long_results_paged(postgres_service()).await;
}

async fn long_results_paged(harness: &Harness) {
    let api = &harness.api;
    let urls: Vec<String> = (0..4)
        .map(|n| harness.page(&format!("article.html?copy={n}")))
        .collect();
    let id = crawl_to_completion(api, json!({"urls": urls}), Duration::from_secs(30)).await;
    let pages = all_pages(api, &id).await;
    assert!(pages.len() > 1, "four long articles do not fit one page");
    assert!(pages.iter().all(|page| page["total"] == 4));
    let indices: Vec<u64> = results_of(&pages)
        .iter()
        .map(|r| r["index"].as_u64().unwrap())
        .collect();
    assert_eq!(indices, [0, 1, 2, 3]);
    let (status, body) = call_at(api, "crawl_status", json!({"task_id": id, "cursor": "L3"})).await;
    assert_eq!(status, 400, "{body:#}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cursor")
    );
}

/// A page waiting for its browser render holds no fetch permit: with one global fetch at a time
/// and one render at a time, a task of JavaScript shells does not hold back another task's plain
/// page, which finishes while the shells are still rendering one after the other.
#[tokio::test]
async fn pages_waiting_for_a_render_do_not_hold_back_plain_fetches() {
    let harness = start_with(|fixtures| {
        let mut config = config(fixtures);
        config.crawl.global_parallel = 1;
        config.crawl.browser_parallel = 1;
        config
    });
    let api = harness.api.as_str();
    let shells: Vec<String> = (500..503)
        .map(|n| format!("{}/crawl/shell/{n}", harness.fixtures))
        .collect();
    let (status, renders) =
        call_at(api, "crawl_batch", json!({ "urls": shells, "parallel": 3 })).await;
    assert_eq!(status, 200, "{renders:#}");
    let plain = json!({ "urls": [format!("{}/crawl/page/500", harness.fixtures)] });
    let plain = crawl_to_completion(api, plain, Duration::from_secs(60)).await;
    let renders = call_at(
        api,
        "crawl_status",
        json!({ "task_id": renders["task_id"] }),
    )
    .await
    .1;
    assert_ne!(
        renders["status"], "completed",
        "the plain page should finish before three renders in a row: {renders:#}"
    );
    assert_eq!(
        call_at(api, "crawl_status", json!({ "task_id": plain }))
            .await
            .1["results"][0]["result"]["via"],
        "http"
    );
}

/// A site with a robots.txt the way sites write it: a group for everyone that shuts the site,
/// and one for webpilot that keeps a folder out and asks for a pause between fetches.
struct PoliteSite {
    origin: String,
    /// (path, when it arrived), in arrival order.
    log: std::sync::Arc<std::sync::Mutex<Vec<(String, std::time::Instant)>>>,
}

const ROBOTS: &str = "User-agent: *\nDisallow: /\n\n\
    User-agent: webpilot\nDisallow: /private/\nCrawl-delay: 0.5\n";

impl PoliteSite {
    async fn start() -> Self {
        use axum::extract::{Request, State};
        type Log = std::sync::Arc<std::sync::Mutex<Vec<(String, std::time::Instant)>>>;
        async fn serve(State(log): State<Log>, request: Request) -> axum::response::Response {
            use axum::response::IntoResponse;
            let path = request.uri().path().to_string();
            log.lock()
                .unwrap()
                .push((path.clone(), std::time::Instant::now()));
            if path == "/robots.txt" {
                return ([("content-type", "text/plain")], ROBOTS).into_response();
            }
            let page = format!(
                "<html><head><title>{path}</title></head><body><main><h1>{path}</h1>\
                 <p>What this page says, at some length, so that it is read as an article.</p></main></body></html>"
            );
            axum::response::Html(page).into_response()
        }
        let log: Log = Default::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let origin = format!("http://{}", listener.local_addr().unwrap());
        let app = axum::Router::new().fallback(serve).with_state(log.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { origin, log }
    }

    fn requested(&self) -> Vec<(String, std::time::Instant)> {
        self.log.lock().unwrap().clone()
    }
}

/// robots.txt is read once per host per task, in webpilot's own group: a disallowed URL is
/// reported with the rule and never requested, and the crawl delay spaces the fetches.
#[tokio::test]
async fn a_site_s_robots_txt_is_obeyed_and_its_crawl_delay_kept() {
    let site = PoliteSite::start().await;
    let paths = ["/docs/a", "/private/secret", "/docs/b", "/docs/c"];
    let urls: Vec<String> = paths
        .iter()
        .map(|p| format!("{}{p}", site.origin))
        .collect();
    let api = &service().api;
    let id = crawl_to_completion(
        api,
        json!({"urls": urls, "parallel": 4, "mode": "http"}),
        Duration::from_secs(30),
    )
    .await;
    let pages = all_pages(api, &id).await;
    let read: Vec<String> = results_of(&pages)
        .iter()
        .map(|r| r["url"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(read.len(), 3, "{pages:#?}");
    assert!(read.iter().all(|u| u.contains("/docs/")), "{read:?}");
    let errors: Vec<Value> = pages
        .iter()
        .flat_map(|p| p["errors"].as_array().unwrap().clone())
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    let skipped: Vec<Value> = pages
        .iter()
        .flat_map(|p| p["skipped"].as_array().cloned().unwrap_or_default())
        .collect();
    assert_eq!(skipped.len(), 1, "{pages:#?}");
    assert_eq!(skipped[0]["url"], urls[1]);
    assert_eq!(skipped[0]["reason"], "robots");
    let rule = skipped[0]["rule"].as_str().unwrap();
    assert!(
        rule.contains("robots.txt disallows /private/secret for webpilot"),
        "{rule}"
    );
    assert_eq!(pages.last().unwrap()["status"], "completed");

    let requested = site.requested();
    let robots = requested.iter().filter(|(p, _)| p == "/robots.txt").count();
    assert_eq!(
        robots, 1,
        "robots.txt once per host per task: {requested:?}"
    );
    assert!(
        !requested.iter().any(|(p, _)| p.starts_with("/private/")),
        "a disallowed URL is never requested: {requested:?}"
    );
    let docs: Vec<std::time::Instant> = requested
        .iter()
        .filter(|(p, _)| p.starts_with("/docs/"))
        .map(|(_, at)| *at)
        .collect();
    assert_eq!(docs.len(), 3, "{requested:?}");
    for pair in docs.windows(2) {
        let gap = pair[1] - pair[0];
        // The delay is kept between fetches as webpilot starts them (the server may see them a
        // little closer together when one connection opens faster than another).
        assert!(
            gap >= Duration::from_millis(450),
            "fetches {gap:?} apart: {requested:?}"
        );
    }
}

/// Where the operator ignores robots.txt, a tenant whose key says `crawl_robots = "obey"` still
/// obeys it: its crawl skips the disallowed URL (never requested for it), the operator's reads it.
#[tokio::test]
async fn a_tenant_can_obey_robots_txt_where_the_operator_does_not() {
    use webpilot::config::{KeyEntry, RobotsRule};
    const DORA: &str = "dora-key-9b1c7e3a5d2f4068";
    const OPERATOR: &str = "operator-token-1d9e5b3c7a2f4860";
    let harness = start_with(|fixtures| {
        let mut config = config(fixtures);
        config.crawl.robots = RobotsRule::Ignore;
        config.keys = vec![KeyEntry {
            tenant: "dora".into(),
            sha256: webpilot::tenancy::key_hash_hex(DORA),
            crawl_robots: Some(RobotsRule::Obey),
            ..KeyEntry::default()
        }];
        config.token = Some(OPERATOR.into());
        config
    });
    let site = PoliteSite::start().await;
    let url = format!("{}/private/secret", site.origin);
    let mut outcomes = Vec::new();
    for key in [DORA, OPERATOR] {
        let call = |tool: &str, args: Value| {
            client()
                .post(format!("{}/api/tools/{tool}", harness.api))
                .bearer_auth(key)
                .json(&args)
                .send()
        };
        let created: Value = call("crawl_batch", json!({"urls": [url], "mode": "http"}))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let id = created["task_id"].as_str().expect("a task").to_string();
        let report: Value = call("crawl_status", json!({"task_id": id, "wait": 30}))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        outcomes.push(report);
    }
    let (dora, operator) = (&outcomes[0], &outcomes[1]);
    assert_eq!(dora["skipped"][0]["reason"], "robots", "{dora:#}");
    assert_eq!(dora["status"], "failed", "nothing read: {dora:#}");
    assert_eq!(operator["results"][0]["url"], url, "{operator:#}");
    let secret_requests = site
        .requested()
        .iter()
        .filter(|(path, _)| path == "/private/secret")
        .count();
    assert_eq!(secret_requests, 1, "only the operator's crawl read it");
}

/// A webhook receiver: records each delivery (its event, body and signature) and answers the
/// first `failures` with 500.
struct Receiver {
    url: String,
    deliveries: std::sync::Arc<std::sync::Mutex<Vec<(u16, String, String)>>>,
}

impl Receiver {
    async fn start(failures: usize) -> Self {
        use axum::extract::State;
        use axum::http::{HeaderMap, StatusCode};
        type Seen = std::sync::Arc<std::sync::Mutex<Vec<(u16, String, String)>>>;
        async fn hook(
            State((seen, failures)): State<(Seen, usize)>,
            headers: HeaderMap,
            body: String,
        ) -> StatusCode {
            let mut seen = seen.lock().unwrap();
            let status = if seen.len() < failures { 500 } else { 200 };
            let signature = headers
                .get("x-webpilot-signature")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            seen.push((status, body, signature));
            StatusCode::from_u16(status).unwrap()
        }
        let deliveries: Seen = Default::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hooks/crawl", listener.local_addr().unwrap());
        let app = axum::Router::new()
            .route("/hooks/crawl", axum::routing::post(hook))
            .with_state((deliveries.clone(), failures));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, deliveries }
    }

    fn deliveries(&self) -> Vec<(u16, String, String)> {
        self.deliveries.lock().unwrap().clone()
    }
}

/// The caller of a crawl with a webhook gets its events signed with the task's secret, in order,
/// and an event the receiver failed is sent again.
#[tokio::test]
async fn a_webhook_gets_signed_events_in_order_and_a_failed_one_again() {
    use hmac::{KeyInit, Mac};
    let receiver = Receiver::start(1).await;
    let harness = service();
    let urls: Vec<String> = (0..3)
        .map(|i| harness.page(&format!("crawl/page/{i}")))
        .collect();
    let (status, created) = call_at(
        &harness.api,
        "crawl_batch",
        json!({"urls": urls, "webhook": receiver.url}),
    )
    .await;
    assert_eq!(status, 200, "{created:#}");
    let id = created["task_id"].as_str().unwrap().to_string();
    let secret = created["webhook_secret"].as_str().unwrap().to_string();
    common::task_reaches(&harness.api, &id, &["completed"], Duration::from_secs(30)).await;
    eventually("the completed event", Duration::from_secs(10), || async {
        receiver.deliveries().len() >= 3
    })
    .await;
    let deliveries = receiver.deliveries();
    let events: Vec<(u16, String)> = deliveries
        .iter()
        .map(|(status, body, _)| {
            let event: Value = serde_json::from_str(body).unwrap();
            assert_eq!(event["task_id"], id.as_str(), "{body}");
            (*status, event["event"].as_str().unwrap().to_string())
        })
        .collect();
    assert_eq!(
        events,
        [
            (500, "started".to_string()),
            (200, "started".into()),
            (200, "completed".into())
        ]
    );
    let completed: Value = serde_json::from_str(&deliveries[2].1).unwrap();
    assert_eq!(
        (completed["progress"].as_u64(), completed["errors"].as_u64()),
        (Some(3), Some(0))
    );
    for (_, body, signature) in &deliveries {
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(body.as_bytes());
        let expected: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(signature, &format!("sha256={expected}"), "{body}");
    }

    let (status, refused) = call_at(
        &harness.api,
        "crawl_batch",
        json!({"urls": urls, "webhook": "http://hooks.example/crawl"}),
    )
    .await;
    assert_eq!(status, 400, "{refused:#}");
    assert_eq!(refused["error"]["code"], "INVALID_ARGUMENT");
}

/// With `webhook_pages`, the webhook also hears of every URL as it finishes, between `started`
/// and `completed`, each event signed like the others; `webhook_pages` alone is refused.
#[tokio::test]
async fn a_webhook_can_hear_of_every_page() {
    let receiver = Receiver::start(0).await;
    let harness = service();
    let urls: Vec<String> = (0..4)
        .map(|i| harness.page(&format!("crawl/page/{i}")))
        .collect();
    let (status, created) = call_at(
        &harness.api,
        "crawl_batch",
        json!({"urls": urls, "webhook": receiver.url, "webhook_pages": true, "parallel": 2}),
    )
    .await;
    assert_eq!(status, 200, "{created:#}");
    let id = created["task_id"].as_str().unwrap().to_string();
    common::task_reaches(&harness.api, &id, &["completed"], Duration::from_secs(30)).await;
    eventually("the completed event", Duration::from_secs(10), || async {
        receiver.deliveries().len() >= 6
    })
    .await;
    let events: Vec<Value> = receiver
        .deliveries()
        .iter()
        .map(|(status, body, signature)| {
            assert_eq!(*status, 200);
            assert!(signature.starts_with("sha256="), "{signature}");
            serde_json::from_str(body).unwrap()
        })
        .collect();
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["started", "page", "page", "page", "page", "completed"]
    );
    let progress: Vec<u64> = events[1..5]
        .iter()
        .map(|e| e["progress"].as_u64().unwrap())
        .collect();
    assert_eq!(progress, [1, 2, 3, 4], "{events:#?}");
    let pages: HashSet<&str> = events[1..5]
        .iter()
        .map(|e| e["url"].as_str().unwrap())
        .collect();
    assert_eq!(pages, urls.iter().map(String::as_str).collect());
    assert!(
        events[1..5]
            .iter()
            .all(|e| e["ok"] == true && e["total"] == 4)
    );

    let (status, refused) = call_at(
        &harness.api,
        "crawl_batch",
        json!({"urls": urls, "webhook_pages": true}),
    )
    .await;
    assert_eq!(status, 400, "{refused:#}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("webhook")
    );
}

/// A re-crawl asks whether pages an earlier task read have changed (`If-None-Match` with their
/// `ETag`) and, when the site says they have not, keeps the earlier read, marked `unchanged`.
#[tokio::test]
async fn a_re_crawl_asks_what_changed_and_marks_the_rest_unchanged() {
    re_crawl(service(), 0).await;
}

#[tokio::test]
async fn a_re_crawl_asks_what_changed_on_postgresql() {
    re_crawl(postgres_service(), 10).await;
}

/// Crawls pages `first..first + 3` twice with `harness`.
async fn re_crawl(harness: &Harness, first: u32) {
    use common::web_fixtures::CONDITIONAL;
    let urls: Vec<String> = (first..first + 3)
        .map(|i| harness.page(&format!("crawl/etag/{i}")))
        .collect();
    let args = json!({"urls": urls, "mode": "http"});
    let earlier = crawl_to_completion(&harness.api, args.clone(), Duration::from_secs(30)).await;
    let before = results_of(&all_pages(&harness.api, &earlier).await);
    assert!(
        before
            .iter()
            .all(|r| r["result"].get("unchanged").is_none()),
        "{before:#?}"
    );
    assert_eq!(
        before[0]["result"]["etag"],
        format!("\"v1-{first}\""),
        "{before:#?}"
    );

    let again = crawl_to_completion(&harness.api, args, Duration::from_secs(30)).await;
    let after = results_of(&all_pages(&harness.api, &again).await);
    assert_eq!(after.len(), 3, "{after:#?}");
    for (was, now) in before.iter().zip(&after) {
        assert_eq!(now["result"]["unchanged"], true, "{now:#}");
        assert_eq!(now["result"]["content"], was["result"]["content"]);
    }
    let asked: Vec<(String, String)> = CONDITIONAL.lock().unwrap().clone();
    for i in first..first + 3 {
        let path = format!("/crawl/etag/{i}");
        let seen: Vec<&str> = asked
            .iter()
            .filter(|(p, _)| *p == path)
            .map(|(_, tag)| tag.as_str())
            .collect();
        assert_eq!(seen, ["", &format!("\"v1-{i}\"")[..]], "{asked:?}");
    }
}

#[tokio::test]
async fn a_cancelled_task_fetches_nothing_more() {
    cancelled(service(), "sqlite").await;
}

#[tokio::test]
async fn a_cancelled_task_fetches_nothing_more_on_postgresql() {
    cancelled(postgres_service(), "postgresql").await;
}

/// Six slow pages read one at a time, cancelled while the first is read: the rest are skipped
/// as cancelled, the page being read is not recorded, and the site is asked for nothing more,
/// not even once the page in flight has answered; the webhook hears `started`, then
/// `cancelled`, and nothing after.
async fn cancelled(harness: &Harness, store: &str) {
    use common::web_fixtures::{SLOW_ANSWERED, SLOW_ASKED};
    let api = &harness.api;
    let receiver = Receiver::start(0).await;
    let token = format!("{store}-{}", std::process::id());
    let urls: Vec<String> = (0..6)
        .map(|n| harness.page(&format!("crawl/slow/{token}-{n}")))
        .collect();
    let (status, created) = call_at(
        api,
        "crawl_batch",
        json!({"urls": urls, "mode": "http", "parallel": 1, "webhook": receiver.url}),
    )
    .await;
    assert_eq!(status, 200, "{created:#}");
    let id = created["task_id"].as_str().unwrap().to_string();
    let first = format!("{token}-0");
    let asked = |name: String| async move { SLOW_ASKED.lock().unwrap().contains(&name) };
    eventually("the first page asked for", Duration::from_secs(10), || {
        asked(first.clone())
    })
    .await;
    let tasks = format!("{api}/api/crawler/tasks/{id}");
    let response = client().delete(&tasks).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let summary: Value = response.json().await.unwrap();
    assert_eq!(summary["status"], "cancelled", "{summary:#}");
    let again = client().delete(&tasks).send().await.unwrap();
    assert_eq!(again.status(), 400);
    let again: Value = again.json().await.unwrap();
    assert_eq!(again["error"]["code"], "INVALID_ARGUMENT");
    assert!(
        again["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already cancelled"),
        "{again:#}"
    );
    // The page in flight answers; a task that went on would ask for the next one at once, so
    // a whole task read after that would see it asked.
    let answered = |name: String| async move { SLOW_ANSWERED.lock().unwrap().contains(&name) };
    eventually(
        "the page in flight answered",
        Duration::from_secs(10),
        || answered(first.clone()),
    )
    .await;
    let after = json!({"urls": [harness.page("crawl/page/77")], "mode": "http"});
    crawl_to_completion(api, after, Duration::from_secs(20)).await;
    let fetched: Vec<String> = SLOW_ASKED
        .lock()
        .unwrap()
        .iter()
        .filter(|name| name.starts_with(&token))
        .cloned()
        .collect();
    assert_eq!(fetched, [first], "only the page in flight was fetched");
    let (_, report) = call_at(api, "crawl_status", json!({"task_id": id})).await;
    assert_eq!(report["status"], "cancelled", "{report:#}");
    assert_eq!(report["progress"], report["total"], "{report:#}");
    assert_eq!(report["results"], json!([]), "{report:#}");
    let skipped = report["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 6, "{report:#}");
    assert!(
        skipped.iter().all(|s| s["reason"] == "cancelled"),
        "{report:#}"
    );
    eventually("the cancelled event", Duration::from_secs(10), || async {
        receiver.deliveries().len() >= 2
    })
    .await;
    let events: Vec<Value> = receiver
        .deliveries()
        .iter()
        .map(|(_, body, _)| serde_json::from_str(body).unwrap())
        .collect();
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["started", "cancelled"], "{events:#?}");
    assert_eq!(events[1]["skipped"], 6, "{events:#?}");
    let listed = get_json(&format!("{api}/api/crawler/tasks?status=cancelled")).await;
    assert!(
        listed["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["task_id"] == id.as_str()),
        "{listed:#}"
    );
}
