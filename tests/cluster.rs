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
use common::{call_at, eventually, get_json, postgres, spawn_service_with};
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
        let (data, tmp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let config = data.path().join("webpilot.toml");
        std::fs::write(
            &config,
            format!(
                "[crawl]\nper_host = 4\nlease_secs = 2\nmax_urls = 500\n\n[fetch]\nuser_agent = \"{agent}\"\n"
            ),
        )
        .unwrap();
        let env = [
            ("WEBPILOT_DATABASE_URL", database),
            ("WEBPILOT_CONFIG", config.to_str().unwrap()),
        ];
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
    let Some(database) = postgres::database() else {
        return;
    };
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

    eventually("the task completes", Duration::from_secs(90), || {
        let (a, id) = (a.clone(), id.clone());
        async move {
            call_at(&a, "crawl_status", json!({ "task_id": id }))
                .await
                .1["status"]
                == "completed"
        }
    })
    .await;
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
