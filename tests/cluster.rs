//! Several webpilot processes on one PostgreSQL: a crawl shared by three instances under one
//! per-host limit, one of them killed mid-crawl; what the fixture server saw is the evidence.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, header};
use axum::response::Html;
use axum::routing::get;
use common::{call_at, client, eventually, get_json, postgres, spawn_service_with};
use serde_json::{Value, json};

/// What the crawled site saw: requests in flight now and at most, and every request's page and
/// user agent (each instance has its own), in arrival order.
#[derive(Default)]
struct Seen {
    in_flight: AtomicUsize,
    peak: AtomicUsize,
    requests: Mutex<Vec<(u32, String)>>,
}

/// Counts a request in flight until it ends, answered or dropped with its connection.
struct InFlight(Arc<Seen>);

impl InFlight {
    fn enter(seen: &Arc<Seen>) -> Self {
        let now = seen.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        seen.peak.fetch_max(now, Ordering::SeqCst);
        Self(seen.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A page that takes 100 ms, as a real site's would.
async fn page(
    State(seen): State<Arc<Seen>>,
    headers: HeaderMap,
    Path(n): Path<u32>,
) -> Html<String> {
    let agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    seen.requests.lock().unwrap().push((n, agent));
    let _counted = InFlight::enter(&seen);
    tokio::time::sleep(Duration::from_millis(100)).await;
    Html(format!(
        "<!doctype html><title>Page {n}</title><article><h1>Page {n}</h1>\
         <p>Page number {n} of a site crawled by three instances at once, with enough words to \
         be read as the page's main content by an extractor looking for prose.</p></article>"
    ))
}

async fn site(seen: Arc<Seen>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let app = Router::new().route("/page/{n}", get(page)).with_state(seen);
    tokio::spawn(async move { axum::serve(listener, app).await });
    origin
}

/// A `webpilot serve` process on `database` named by its user agent, with crawl leases of two
/// seconds; its child process, API and data dirs (kept alive with it).
struct Instance {
    child: std::process::Child,
    api: String,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

impl Instance {
    fn start(database: &str, agent: &str) -> Self {
        Self::start_with(database, agent, &[])
    }

    fn start_with(database: &str, agent: &str, extra: &[(&str, &str)]) -> Self {
        Self::launch(database, agent, "", extra)
    }

    /// With `crawl` (TOML lines) added to the `[crawl]` table.
    fn launch(database: &str, agent: &str, crawl: &str, extra: &[(&str, &str)]) -> Self {
        let (data, tmp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let config = data.path().join("webpilot.toml");
        std::fs::write(
            &config,
            format!(
                "[crawl]\nper_host = 4\nlease_secs = 2\nmax_urls = 500\n{crawl}\n[fetch]\nuser_agent = \"{agent}\"\n"
            ),
        )
        .unwrap();
        let mut env = vec![
            ("WEBPILOT_DATABASE_URL", database),
            ("WEBPILOT_CONFIG", config.to_str().unwrap()),
        ];
        env.extend_from_slice(extra);
        let (child, api) = spawn_service_with(data.path(), tmp.path(), &env);
        Self {
            child,
            api,
            _dirs: (data, tmp),
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Three instances crawl one task of 300 URLs with per_host = 4; one is killed with SIGKILL
/// mid-crawl. Every URL is recorded exactly once, the site never has more than 4 requests in
/// flight, every instance read some, and what the killed one held is read again by the others
/// once its leases end. Progress streams from an instance other than the one that took the task.
#[tokio::test]
async fn three_instances_share_a_crawl_and_survive_one_killed() {
    let database = postgres::database();
    let seen = Arc::new(Seen::default());
    let origin = site(seen.clone()).await;
    let agents = ["instance-a", "instance-b", "instance-c"];
    let mut instances: Vec<Instance> = agents
        .iter()
        .map(|agent| Instance::start(&database, agent))
        .collect();
    let (a, b) = (instances[0].api.clone(), instances[1].api.clone());
    let urls: Vec<String> = (0..300).map(|n| format!("{origin}/page/{n}")).collect();
    let (status, created) = call_at(
        &a,
        "crawl_batch",
        json!({ "urls": urls, "parallel": 8, "mode": "http" }),
    )
    .await;
    assert_eq!(status, 200, "{created:#}");
    let id = created["task_id"].as_str().unwrap().to_string();
    let stream = format!("{b}/api/crawler/tasks/{id}/events");
    let events = tokio::spawn(async move { common::get_text(&stream, None).await });

    let held_by_c = |seen: &Seen| {
        seen.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, agent)| agent == "instance-c")
            .count()
    };
    eventually("instance c reads pages", Duration::from_secs(30), || {
        let seen = seen.clone();
        async move { held_by_c(&seen) >= 10 }
    })
    .await;
    let mut killed = instances.pop().unwrap();
    unsafe { libc::kill(killed.child.id() as i32, libc::SIGKILL) };
    killed.child.wait().unwrap();
    let requested_before_kill = seen.requests.lock().unwrap().len();

    common::task_reaches(&a, &id, &["completed"], Duration::from_secs(90)).await;
    let report = get_json(&format!("{a}/api/crawler/tasks/{id}")).await;
    let results = report["results"].as_array().unwrap();
    assert_eq!(report["errors"], json!([]), "{report:#}");
    assert_eq!(
        (report["progress"].as_u64(), results.len()),
        (Some(300), 300)
    );
    let indices: HashSet<u64> = results
        .iter()
        .map(|r| r["index"].as_u64().unwrap())
        .collect();
    assert_eq!(
        indices,
        (0..300).collect(),
        "every URL recorded exactly once"
    );
    for result in results {
        let index = result["index"].as_u64().unwrap();
        assert_eq!(result["result"]["title"], format!("Page {index}"));
    }

    let peak = seen.peak.load(Ordering::SeqCst);
    assert!((2..=4).contains(&peak), "{peak} requests in flight at once");
    let requests = seen.requests.lock().unwrap().clone();
    let by_agent: HashMap<&str, usize> =
        requests
            .iter()
            .fold(HashMap::new(), |mut counts, (_, agent)| {
                *counts.entry(agent.as_str()).or_default() += 1;
                counts
            });
    for agent in agents {
        assert!(
            by_agent.get(agent).is_some_and(|n| *n > 0),
            "{agent} read nothing: {by_agent:?}"
        );
    }
    // Pages the killed instance requested and never recorded were requested again, after the
    // kill, by the others.
    let read_by_c: HashSet<u32> = requests[..requested_before_kill]
        .iter()
        .filter(|(_, agent)| agent == "instance-c")
        .map(|(n, _)| *n)
        .collect();
    let read_again: HashSet<u32> = requests[requested_before_kill..]
        .iter()
        .filter(|(n, _)| read_by_c.contains(n))
        .map(|(n, _)| *n)
        .collect();
    assert!(
        !read_again.is_empty(),
        "nothing the killed instance held was read again"
    );

    let events = events.await.unwrap();
    let progress: Vec<u64> = events
        .split("\n\n")
        .filter(|block| block.contains("event: progress"))
        .filter_map(|block| {
            let data = block.lines().find_map(|l| l.strip_prefix("data:"))?;
            serde_json::from_str::<Value>(data.trim()).ok()?["progress"].as_u64()
        })
        .collect();
    assert!(events.contains("event: done"), "{events}");
    assert!(
        !progress.is_empty() && progress.windows(2).all(|w| w[0] < w[1]),
        "{progress:?}"
    );
    assert_eq!(progress.last(), Some(&300));
}

/// A linked site for a site crawl: `/` links ten sections, each section twelve pages (and back,
/// and to itself with a tracking parameter); every request is logged with its user agent.
async fn linked_site(seen: Arc<Seen>) -> String {
    async fn linked(
        State(seen): State<Arc<Seen>>,
        headers: HeaderMap,
        uri: axum::http::Uri,
    ) -> Html<String> {
        let agent = headers
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let path = uri.to_string();
        seen.requests
            .lock()
            .unwrap()
            .push((0, format!("{agent} {path}")));
        let _counted = InFlight::enter(&seen);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let links: Vec<String> = match path.trim_matches('/').split('/').collect::<Vec<_>>()[..] {
            [""] => (0..10).map(|s| format!("/s/{s}")).collect(),
            ["s", s] => (0..12)
                .map(|p| format!("/p/{s}/{p}"))
                .chain(["/".to_string(), format!("/s/{s}?utm_source=loop")])
                .collect(),
            _ => vec!["/".to_string()],
        };
        let anchors: String = links
            .iter()
            .map(|l| format!("<a href=\"{l}\">{l}</a> "))
            .collect();
        Html(format!(
            "<!doctype html><title>{path}</title><article><h1>{path}</h1><p>A page of a site \
             crawled by two instances at once, with enough words to be read as its main \
             content.</p>{anchors}</article>"
        ))
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let app = Router::new().fallback(linked).with_state(seen);
    tokio::spawn(async move { axum::serve(listener, app).await });
    origin
}

/// Two instances share one site crawl: the pages one finds are read by both, and no page is
/// read twice (the site's log is the evidence).
#[tokio::test]
async fn two_instances_share_a_site_crawl_reading_each_page_once() {
    let database = postgres::database();
    let seen = Arc::new(Seen::default());
    let origin = linked_site(seen.clone()).await;
    // Two fetches each at most: the site's four slots are only all used when both take part.
    let instances: Vec<Instance> = ["instance-a", "instance-b"]
        .iter()
        .map(|agent| Instance::launch(&database, agent, "global_parallel = 2\n", &[]))
        .collect();
    let a = instances[0].api.clone();
    let (status, created) = call_at(
        &a,
        "crawl_batch",
        json!({"urls": [format!("{origin}/")], "parallel": 8, "mode": "http",
               "follow": {"depth": 2}}),
    )
    .await;
    assert_eq!(status, 200, "{created:#}");
    let id = created["task_id"].as_str().unwrap().to_string();
    common::task_reaches(&a, &id, &["completed"], Duration::from_secs(90)).await;
    let report = get_json(&format!("{a}/api/crawler/tasks/{id}")).await;
    assert_eq!(report["errors"], json!([]), "{report:#}");
    let results = report["results"].as_array().unwrap();
    assert_eq!(results.len(), 1 + 10 + 120, "{report:#}");
    assert_eq!(report["total"], 131);

    let requests = seen.requests.lock().unwrap().clone();
    let mut pages: HashMap<String, usize> = HashMap::new();
    let mut by_agent: HashMap<String, usize> = HashMap::new();
    for (_, line) in &requests {
        let (agent, path) = line.split_once(' ').unwrap();
        // Each instance asks for robots.txt once per task it works on.
        if path == "/robots.txt" {
            continue;
        }
        *by_agent.entry(agent.to_string()).or_default() += 1;
        *pages.entry(path.to_string()).or_default() += 1;
    }
    let twice: Vec<(&String, &usize)> = pages.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "pages read twice: {twice:?}");
    assert_eq!(pages.len(), 131, "{pages:?}");
    assert!(!pages.keys().any(|p| p.contains("utm_")), "{pages:?}");
    for agent in ["instance-a", "instance-b"] {
        assert!(
            by_agent.get(agent).is_some_and(|n| *n > 0),
            "{agent} read nothing: {by_agent:?}"
        );
    }
    let peak = seen.peak.load(Ordering::SeqCst);
    assert!(peak <= 4, "{peak} requests in flight at once (per_host 4)");
}

/// A task's `parallel` is the task's, not each instance's: with `parallel: 2` on two instances
/// (each of which would run 2), the site never has more than 2 of its pages in flight.
#[tokio::test]
async fn a_task_s_parallel_holds_across_instances() {
    let database = postgres::database();
    let seen = Arc::new(Seen::default());
    let origin = site(seen.clone()).await;
    let instances = [
        Instance::start(&database, "instance-a"),
        Instance::start(&database, "instance-b"),
    ];
    let urls: Vec<String> = (0..40).map(|n| format!("{origin}/page/{n}")).collect();
    let id = common::crawl_until_finished(
        &instances[1].api,
        json!({ "urls": urls, "parallel": 2, "mode": "http" }),
        Duration::from_secs(60),
    )
    .await;
    let report = get_json(&format!("{}/api/crawler/tasks/{id}", instances[0].api)).await;
    assert_eq!(report["status"], "completed", "{report:#}");
    assert_eq!(report["progress"], 40);
    assert_eq!(
        seen.requests.lock().unwrap().len(),
        40,
        "each page read once"
    );
    let peak = seen.peak.load(Ordering::SeqCst);
    assert_eq!(peak, 2, "{peak} requests in flight at once");
}

/// The names of the sessions an instance lists as its own.
async fn sessions_of(api: &str) -> Vec<String> {
    get_json(&format!("{api}/api/sessions")).await["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["session"].as_str().unwrap().to_string())
        .collect()
}

/// A session made through instance A is used through instance B — a navigation, a raw PNG
/// screenshot, a streamed chat — and each runs in A's browser. Once A is killed, the session
/// answers BROWSER_UNAVAILABLE through B at once, and the next call of that name starts afresh
/// on B.
#[tokio::test]
async fn a_session_made_on_one_instance_answers_through_another() {
    let database = postgres::database();
    let sites = common::harness();
    let model = format!("{}/v1", sites.fixtures);
    let llm = [
        ("WEBPILOT_LLM_BASE_URL", model.as_str()),
        ("WEBPILOT_LLM_MODEL", "scripted"),
    ];
    let mut a = Instance::start_with(&database, "a", &llm);
    let b = Instance::start_with(&database, "b", &llm);
    let session = common::new_session(&a.api).await;

    let page = sites.page("article.html");
    let (status, navigated) = call_at(
        &b.api,
        "browser_navigate",
        json!({ "session": session, "target": page }),
    )
    .await;
    assert_eq!(status, 200, "{navigated:#}");
    // A caller claiming to be an instance is routed all the same.
    let forged = client()
        .post(format!("{}/api/tools/browser_read", b.api))
        .header("x-webpilot-forwarded", "an instance, honestly")
        .json(&json!({ "session": session, "mode": "text" }))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 200);
    assert_eq!(sessions_of(&a.api).await, std::slice::from_ref(&session));
    assert!(sessions_of(&b.api).await.is_empty(), "B opened no session");
    let listed = get_json(&format!("{}/api/sessions", b.api)).await;
    assert_eq!(
        listed["elsewhere"][0]["session"], session,
        "B lists the session A holds: {listed:#}"
    );

    let shot = client()
        .post(format!("{}/api/tools/browser_screenshot", b.api))
        .header("accept", "image/png")
        .json(&json!({ "session": session }))
        .send()
        .await
        .unwrap();
    assert_eq!(shot.status(), 200);
    assert_eq!(shot.headers()["content-type"], "image/png");
    assert!(
        shot.bytes()
            .await
            .unwrap()
            .starts_with(b"\x89PNG\r\n\x1a\n")
    );
    // The session's trace is on A's disk; B fetches it from there.
    let trace = client()
        .get(format!("{}/api/sessions/{session}/trace", b.api))
        .send()
        .await
        .unwrap();
    assert_eq!(trace.status(), 200);
    let steps = webpilot::trace::read_steps(&trace.bytes().await.unwrap()).unwrap();
    assert_eq!(steps[0].tool, "browser_navigate", "{steps:?}");

    let chat = client()
        .post(format!("{}/api/chat", b.api))
        .json(&json!({
            "messages": [{ "role": "user", "content": "look" }],
            "session": session,
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(chat.headers()["content-type"], "text/event-stream");
    let events = chat.text().await.unwrap();
    let result = events
        .split("\n\n")
        .find(|block| block.starts_with("event: tool_result"))
        .unwrap_or_else(|| panic!("no tool_result: {events}"));
    assert!(
        result.contains(&page),
        "the screenshot was of A's page: {result}"
    );
    assert!(events.contains("event: done"), "{events}");

    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let asked = std::time::Instant::now();
    let (status, gone) = call_at(&b.api, "browser_read", json!({ "session": session })).await;
    assert_eq!(
        (status, gone["error"]["code"].as_str()),
        (503, Some("BROWSER_UNAVAILABLE")),
        "{gone:#}"
    );
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "{:?}",
        asked.elapsed()
    );
    assert!(
        gone["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("new session")
    );
    // Its name is not made again, on any instance: a new private session takes its place.
    let (status, gone) = call_at(
        &b.api,
        "browser_navigate",
        json!({ "session": session, "target": page }),
    )
    .await;
    assert_eq!(
        (status, gone["error"]["code"].as_str()),
        (404, Some("NO_SUCH_SESSION")),
        "{gone:#}"
    );
    assert!(sessions_of(&b.api).await.is_empty(), "B made a session");
    let listed = get_json(&format!("{}/api/sessions", b.api)).await;
    assert!(
        listed.get("elsewhere").is_none_or(|e| e == &json!([])),
        "{listed:#}"
    );
    let fresh = common::new_session(&b.api).await;
    let (status, navigated) = call_at(
        &b.api,
        "browser_navigate",
        json!({ "session": fresh, "target": page }),
    )
    .await;
    assert_eq!(status, 200, "{navigated:#}");
    assert_eq!(sessions_of(&b.api).await, [fresh]);
}

/// What one instance saves, every instance reads: a login exported through A loads through B
/// (sealed with the profile key, in PostgreSQL); a conversation started and answered on A
/// takes its next message through B, which runs where its session is; a live-view link
/// asked for through B, for a session A holds, names B and streams A's frames through B.
#[tokio::test]
async fn saved_logins_conversations_and_live_links_work_through_any_instance() {
    let database = postgres::database();
    let sites = common::harness();
    let model = format!("{}/v1", sites.fixtures);
    let env = [
        ("WEBPILOT_LLM_BASE_URL", model.as_str()),
        ("WEBPILOT_LLM_MODEL", "scripted"),
        ("WEBPILOT_PROFILE_KEY", "ab".repeat(32).leak() as &str),
    ];
    let a = Instance::start_with(&database, "a", &env);
    let b = Instance::start_with(&database, "b", &env);

    let on_a = common::new_session(&a.api).await;
    let (status, _) = call_at(
        &a.api,
        "browser_navigate",
        json!({ "session": on_a, "target": sites.page("crawl/shell/7") }),
    )
    .await;
    assert_eq!(status, 200);
    let (status, saved) = call_at(
        &a.api,
        "browser_cookies",
        json!({ "session": on_a, "action": "export", "name": "shared" }),
    )
    .await;
    assert_eq!(status, 200, "{saved:#}");
    assert_eq!(saved["saved"], "postgresql:profiles/shared");
    let on_b = common::new_session(&b.api).await;
    let (status, loaded) = call_at(
        &b.api,
        "browser_cookies",
        json!({ "session": on_b, "action": "load", "name": "shared" }),
    )
    .await;
    assert_eq!(status, 200, "{loaded:#}");
    let (_, listed) = call_at(
        &b.api,
        "browser_cookies",
        json!({ "session": on_b, "action": "list", "show_values": true }),
    )
    .await;
    assert!(
        listed.to_string().contains("shell-7"),
        "B's browser has A's cookie: {listed:#}"
    );
    assert_eq!(sessions_of(&b.api).await, std::slice::from_ref(&on_b));

    let created = client()
        .post(format!("{}/api/conversations", a.api))
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    let id = created["id"].as_str().unwrap().to_string();
    let chat_session = created["session"].as_str().unwrap().to_string();
    for api in [&a.api, &b.api] {
        common::ask(api, &id, "look each time").await;
    }
    let shown = get_json(&format!("{}/api/conversations/{id}", a.api)).await;
    let messages = shown["messages"].as_array().unwrap();
    let count = |role: &str| {
        messages
            .iter()
            .filter(|m| m["message"]["role"] == role && m["message"]["content"].is_string())
            .count()
    };
    assert_eq!(
        (count("user"), count("tool")),
        (2, 2),
        "questions and looks: {shown:#}"
    );
    assert!(
        sessions_of(&a.api).await.contains(&chat_session),
        "both messages looked in one session, on A"
    );
    assert!(!sessions_of(&b.api).await.contains(&chat_session));

    let (status, _) = call_at(
        &a.api,
        "browser_navigate",
        json!({ "session": on_a, "target": sites.page("live.html") }),
    )
    .await;
    assert_eq!(status, 200);
    let (status, live) = call_at(
        &b.api,
        "browser_tabs",
        json!({ "session": on_a, "action": "live" }),
    )
    .await;
    assert_eq!(status, 200, "{live:#}");
    let link = live["live_url"].as_str().unwrap();
    assert!(
        link.starts_with(&format!("{}/live/", b.api)),
        "the link names the instance asked: {link}"
    );
    let page = client().get(link).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let (page_url, query) = link.split_once('?').unwrap();
    let ws = format!("{}/ws?{query}", page_url.replacen("http://", "ws://", 1));
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = ws.into_client_request().unwrap();
    request
        .headers_mut()
        .insert("origin", b.api.parse().unwrap());
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let (mut state, mut frame) = (None, None);
    tokio::time::timeout(Duration::from_secs(15), async {
        use futures::StreamExt;
        while state.is_none() || frame.is_none() {
            match socket.next().await {
                Some(Ok(tokio_tungstenite::tungstenite::Message::Binary(jpeg))) => {
                    frame = Some(jpeg.to_vec());
                }
                Some(Ok(tokio_tungstenite::tungstenite::Message::Text(text))) => {
                    let message: Value = serde_json::from_str(text.as_str()).unwrap();
                    if message["type"] == "state" {
                        state = Some(message);
                    }
                }
                Some(Ok(_)) => {}
                other => panic!("the relayed socket ended: {other:?}"),
            }
        }
    })
    .await
    .expect("a state and a frame through B within 15 s");
    assert!(frame.unwrap().starts_with(&[0xff, 0xd8]), "a JPEG frame");
    assert!(
        state.unwrap().to_string().contains("live.html"),
        "the state lists A's tab"
    );
}

/// nginx (Debian's) round-robin in front of two instances: 20 sessions, 5 calls each, all at
/// once, every call answered, the sessions spread over both instances.
#[tokio::test]
async fn twenty_sessions_through_a_round_robin_nginx() {
    let database = postgres::database();
    let nginx = ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .into_iter()
        .find(|path| std::path::Path::new(path).exists())
        .expect("nginx is not installed: `scripts/setup --test` installs Debian's nginx");
    let sites = common::harness();
    let (a, b) = (
        Instance::start(&database, "a"),
        Instance::start(&database, "b"),
    );
    let dir = tempfile::tempdir().unwrap();
    // Its workers run as nobody when the tests run as root.
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (here, upstream_a, upstream_b) = (
        dir.path().display(),
        a.api.trim_start_matches("http://"),
        b.api.trim_start_matches("http://"),
    );
    let conf = dir.path().join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            "worker_processes 1;\nerror_log {here}/error.log;\npid {here}/nginx.pid;\nevents {{}}\n\
             http {{\n  access_log off;\n  client_body_temp_path {here}/body;\n  proxy_temp_path {here}/proxy;\n\
             fastcgi_temp_path {here}/fastcgi;\n  uwsgi_temp_path {here}/uwsgi;\n  scgi_temp_path {here}/scgi;\n\
             upstream webpilot {{ server {upstream_a}; server {upstream_b}; }}\n\
             server {{\n    listen 127.0.0.1:{port};\n    location / {{\n      proxy_pass http://webpilot;\n\
             proxy_http_version 1.1;\n      proxy_set_header Connection \"\";\n      proxy_buffering off;\n\
             proxy_read_timeout 120s;\n    }}\n  }}\n}}\n"
        ),
    )
    .unwrap();
    // One process (no master and worker), ended with the test whatever happens: a worker left
    // behind would outlive the test binary and hold its output pipe open.
    let _server = Reaped(
        std::process::Command::new(nginx)
            .args(["-p"])
            .arg(dir.path())
            .arg("-c")
            .arg(&conf)
            .args(["-g", "daemon off; master_process off;"])
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("nginx starts"),
    );
    let front = format!("http://127.0.0.1:{port}");
    eventually("nginx answers", Duration::from_secs(10), || {
        let front = front.clone();
        async move {
            client()
                .get(format!("{front}/healthz"))
                .send()
                .await
                .is_ok()
        }
    })
    .await;

    let page = sites.page("article.html");
    let sessions = (0..20).map(|_| {
        let (front, page) = (front.clone(), page.clone());
        tokio::spawn(async move {
            let session = common::new_session(&front).await;
            let calls = [
                (
                    "browser_navigate",
                    json!({ "session": session, "target": page }),
                ),
                (
                    "browser_read",
                    json!({ "session": session, "mode": "elements" }),
                ),
                ("browser_read", json!({ "session": session })),
                ("browser_screenshot", json!({ "session": session })),
                ("browser_tabs", json!({ "session": session })),
            ];
            for (tool, args) in calls {
                let (status, answer) = call_at(&front, tool, args).await;
                assert_eq!(status, 200, "{tool} in {session}: {answer:#}");
            }
        })
    });
    for session in sessions.collect::<Vec<_>>() {
        session.await.unwrap();
    }
    let (on_a, on_b) = (
        sessions_of(&a.api).await.len(),
        sessions_of(&b.api).await.len(),
    );
    assert_eq!(on_a + on_b, 20, "{on_a} + {on_b}");
    assert!(on_a > 0 && on_b > 0, "{on_a} on A, {on_b} on B");
}

/// A child process killed (and waited for) when it goes out of scope, a failed assertion too.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A headless Chromium of its own with its DevTools endpoint on a free port, as a browser host
/// would run it; killed when dropped.
struct RemoteChromium {
    child: std::process::Child,
    url: String,
    _profile: tempfile::TempDir,
}

impl RemoteChromium {
    async fn start() -> Self {
        let profile = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = std::process::Command::new("/usr/bin/chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--remote-debugging-address=127.0.0.1",
            ])
            .arg(format!("--remote-debugging-port={port}"))
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("chromium starts");
        let url = format!("http://127.0.0.1:{port}");
        let version = format!("{url}/json/version");
        eventually(
            "chromium's DevTools answer",
            Duration::from_secs(30),
            || {
                let version = version.clone();
                async move { client().get(&version).send().await.is_ok() }
            },
        )
        .await;
        Self {
            child,
            url,
            _profile: profile,
        }
    }

    /// The page targets this browser has open at `url`.
    async fn pages_at(&self, url: &str) -> usize {
        let targets = get_json(&format!("{}/json/list", self.url)).await;
        targets
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["type"] == "page" && t["url"] == url)
            .count()
    }
}

impl Drop for RemoteChromium {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sessions of the service at `api` by the browser they live in.
async fn sessions_by_browser(api: &str) -> HashMap<String, Vec<String>> {
    let listed = get_json(&format!("{api}/api/sessions")).await;
    let mut by_browser: HashMap<String, Vec<String>> = HashMap::new();
    for session in listed["sessions"].as_array().unwrap() {
        by_browser
            .entry(session["browser"].as_str().unwrap_or("local").to_string())
            .or_default()
            .push(session["session"].as_str().unwrap().to_string());
    }
    by_browser
}

/// Two CDP endpoints (two Chromium processes): ten sessions spread five and five, each browser
/// holding its five sessions' pages; one browser killed: its sessions answer
/// BROWSER_UNAVAILABLE at once and leave, and every new session goes to the other browser.
#[tokio::test]
async fn sessions_spread_over_two_browsers_and_leave_with_a_dead_one() {
    let (first, second) = (RemoteChromium::start().await, RemoteChromium::start().await);
    let endpoints = format!("{},{}", first.url, second.url);
    let harness = common::start_with(move |_| {
        let mut config = common::loopback_config();
        config.browser_url = Some(endpoints);
        config
    });
    let api = harness.api.clone();
    let page = harness.page("article.html");
    for n in 0..10 {
        let args = json!({ "session": format!("spread-{n}"), "target": page });
        let (status, answer) = call_at(&api, "browser_navigate", args).await;
        assert_eq!(status, 200, "{answer:#}");
    }
    let spread = sessions_by_browser(&api).await;
    let on_first = spread[&first.url].clone();
    assert_eq!(
        (on_first.len(), spread[&second.url].len()),
        (5, 5),
        "{spread:?}"
    );
    assert_eq!(first.pages_at(&page).await, 5);
    assert_eq!(second.pages_at(&page).await, 5);

    let mut killed = first;
    killed.child.kill().unwrap();
    killed.child.wait().unwrap();
    for session in &on_first {
        // A call already under way when the browser died fails with it; the session leaves at
        // the first call that finds its browser gone. Every answer is quick.
        for attempt in 0.. {
            let asked = std::time::Instant::now();
            let (status, answer) =
                call_at(&api, "browser_read", json!({ "session": session })).await;
            assert_eq!(
                (status, answer["error"]["code"].as_str()),
                (503, Some("BROWSER_UNAVAILABLE")),
                "{answer:#}"
            );
            assert!(
                asked.elapsed() < Duration::from_secs(5),
                "{:?}",
                asked.elapsed()
            );
            let message = answer["error"]["message"].as_str().unwrap();
            if message.contains("does not answer") {
                assert!(
                    answer["error"]["hint"]
                        .as_str()
                        .unwrap()
                        .contains("new session")
                );
                break;
            }
            assert!(attempt < 2, "{session} did not leave: {answer:#}");
        }
    }
    for n in 10..15 {
        let args = json!({ "session": format!("spread-{n}"), "target": page });
        let (status, answer) = call_at(&api, "browser_navigate", args).await;
        assert_eq!(status, 200, "{answer:#}");
    }
    let spread = sessions_by_browser(&api).await;
    assert_eq!(spread.get(&killed.url), None, "{spread:?}");
    assert_eq!(spread[&second.url].len(), 10, "{spread:?}");
    assert_eq!(second.pages_at(&page).await, 10);
}
