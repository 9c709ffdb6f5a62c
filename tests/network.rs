//! What the page did underneath, read back through `browser_read` mode=network|console, the
//! `page_events` of an action and a HAR file. The shop here is built like a real one: its data
//! comes from `fetch` with a bearer token, a worker and a partner frame on another site fetch
//! and log, an image is missing, a script's host is down, a pixel points at an address the
//! policy refuses, and "Pay" answers 500 and throws. What the server saw is asserted beside
//! what the reads say, secrets included.

mod common;

use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use common::{Harness, Trap, content_lines, eventually, ok_at, ref_of};
use futures::StreamExt;
use serde_json::{Value, json};

/// What the shop's server received: path, Authorization header, body.
static SEEN: Mutex<Vec<(String, String, String)>> = Mutex::new(Vec::new());

fn seen(path: &str) -> Vec<(String, String)> {
    SEEN.lock()
        .unwrap()
        .iter()
        .filter(|(p, _, _)| p == path)
        .map(|(_, auth, body)| (auth.clone(), body.clone()))
        .collect()
}

/// The shop: its port, a refused address's trap and a port nothing listens on.
#[derive(Clone)]
struct Shop {
    port: u16,
    trap: String,
    dead: u16,
}

struct World {
    harness: Harness,
    shop: Shop,
    trap: Trap,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let trap = Trap::on("127.0.0.2:0");
        let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let dead_port = dead.local_addr().unwrap().port();
        drop(dead);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let shop = Shop {
            port: listener.local_addr().unwrap().port(),
            trap: trap.host_port(),
            dead: dead_port,
        };
        let served = shop.clone();
        let harness = common::start_with(move |_| {
            let mut config = common::loopback_config();
            // 127.0.0.2 is refused here: the shop's pixel there must never connect.
            config.fetch.allow = vec!["127.0.0.1".into(), "localhost".into()];
            config
        });
        harness.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            tokio::spawn(async move { axum::serve(listener, routes(served)).await });
        });
        World {
            harness,
            shop,
            trap,
        }
    })
}

fn routes(shop: Shop) -> Router {
    Router::new()
        .route("/shop", get(shop_page))
        .route("/frame", get(frame_page))
        .route("/worker.js", get(worker_script))
        .route("/api/items", get(items))
        .route("/api/pay", post(pay))
        .route("/api/worker-ping", get(|| async { "pong" }))
        .route(
            "/api/frame-data",
            get(|| async { axum::Json(json!({ "partner": "ok" })) }),
        )
        .route("/login-post", post(login))
        .route("/hop", get(hop))
        .route("/streaming", get(streaming_page))
        .route("/api/stream", get(stream))
        .with_state(shop)
}

fn record(path: &str, headers: &HeaderMap, body: &str) {
    let auth = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    SEEN.lock()
        .unwrap()
        .push((path.to_string(), auth, body.to_string()));
}

async fn shop_page(State(shop): State<Shop>) -> Html<String> {
    Html(format!(
        r#"<!doctype html><title>Shop</title>
<h1>Shop</h1>
<p id="state">Loading</p>
<p id="worker"></p>
<img src="/missing.png" alt="missing">
<img src="http://{trap}/pixel.png" alt="refused">
<script src="http://127.0.0.1:{dead}/lib.js"></script>
<iframe src="http://localhost:{port}/frame" title="partner"></iframe>
<button id="pay">Pay</button>
<form method="post" action="/login-post">
  <input name="user" aria-label="User"><input type="password" name="password" aria-label="Password">
  <button>Sign in</button>
</form>
<script>
const worker = new Worker('/worker.js');
worker.onmessage = (event) => {{ document.getElementById('worker').textContent = event.data; }};
// The token is made, not written down: the page's own source never holds it.
fetch('/api/items', {{ headers: {{ Authorization: 'Bearer ' + ['sekrit', 'token', '123'].join('-') }} }})
  .then((answer) => answer.json())
  .then((items) => {{ document.getElementById('state').textContent = 'Ready: ' + items.length + ' items'; }});
document.getElementById('pay').onclick = async () => {{
  const answer = await fetch('/api/pay', {{ method: 'POST', headers: {{ 'Content-Type': 'application/json' }}, body: JSON.stringify({{ amount: 42 }}) }});
  const problem = await answer.json();
  console.error('payment failed:', problem.error);
  Promise.reject(new Error('rejected pay'));
  setTimeout(() => {{ throw new Error('boom after pay'); }});
  setTimeout(() => {{ document.getElementById('state').textContent = 'Payment failed'; }});
}};
</script>"#,
        trap = shop.trap,
        dead = shop.dead,
        port = shop.port,
    ))
}

async fn frame_page() -> Html<&'static str> {
    Html(
        r#"<!doctype html><p>Partner</p><script>
fetch('/api/frame-data').then((answer) => answer.json()).then((data) => {
  console.warn('frame warns', data.partner);
  document.body.append('Partner ready');
});
</script>"#,
    )
}

async fn worker_script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript")],
        "fetch('/api/worker-ping').then((answer) => answer.text()).then((text) => { \
         console.log('worker got', text); postMessage('worker: ' + text); });",
    )
        .into_response()
}

async fn items(headers: HeaderMap) -> axum::Json<Value> {
    record("/api/items", &headers, "");
    let items: Vec<Value> = (0..1000)
        .map(|n| json!({ "id": n, "name": format!("item {n}") }))
        .collect();
    axum::Json(Value::Array(items))
}

async fn pay(headers: HeaderMap, body: String) -> Response {
    record("/api/pay", &headers, &body);
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        axum::Json(json!({ "error": "card declined", "code": "E_CARD" })),
    )
        .into_response()
}

async fn login(headers: HeaderMap, body: String) -> Html<&'static str> {
    record("/login-post", &headers, &body);
    Html("<!doctype html><title>Welcome</title><p>Welcome back</p>")
}

/// `/hop?n=1` moves itself on to `n+1` until `to`, logging each step, then says so.
async fn hop(Query(query): Query<std::collections::HashMap<String, u32>>) -> Html<String> {
    let n = query.get("n").copied().unwrap_or(1);
    let to = query.get("to").copied().unwrap_or(1000);
    if n >= to {
        return Html(format!("<!doctype html><p>Arrived after {n}</p>"));
    }
    Html(format!(
        "<!doctype html><p>Hop {n}</p><script>console.log('hop {n}'); \
         location.replace('/hop?n={}&to={to}');</script>",
        n + 1
    ))
}

/// A page with an event stream that never ends and a fetch whose body it never reads.
async fn streaming_page() -> Html<&'static str> {
    Html(
        r#"<!doctype html><p id="state">Listening</p><script>
const stream = new EventSource('/api/stream');
let heard = 0;
stream.onmessage = () => { heard += 1; if (heard === 2) document.getElementById('state').textContent = 'Heard 2'; };
fetch('/api/items', { headers: { Authorization: 'Bearer unread' } });
</script>"#,
    )
}

/// Two events, then the stream stays open for ever.
async fn stream(headers: HeaderMap) -> Response {
    use axum::response::sse::{Event, Sse};
    record("/api/stream", &headers, "");
    let events = futures::stream::iter(["first", "second"])
        .map(|data| Ok::<_, std::convert::Infallible>(Event::default().data(data)))
        .chain(futures::stream::pending());
    Sse::new(events).into_response()
}

fn shop_url(path: &str) -> String {
    format!("http://127.0.0.1:{}{path}", world().shop.port)
}

async fn call(tool: &str, args: Value) -> Value {
    ok_at(&world().harness.api, tool, args).await
}

async fn network(session: &str, extra: Value) -> Value {
    let mut args = json!({ "session": session, "mode": "network", "max_tokens": 100000 });
    args.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    call("browser_read", args).await
}

async fn console(session: &str, extra: Value) -> Value {
    let mut args = json!({ "session": session, "mode": "console", "max_tokens": 100000 });
    args.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    call("browser_read", args).await
}

fn line_with<'a>(lines: &'a [String], needle: &str) -> Option<&'a String> {
    lines.iter().find(|line| line.contains(needle))
}

/// Opens the shop in `session` and waits for its data.
async fn open_shop(session: &str) -> Value {
    call(
        "browser_navigate",
        json!({ "session": session, "target": shop_url("/shop"), "wait_for": "Ready: 1000 items" }),
    )
    .await
}

/// Opens the shop and waits until everything it does on its own is done (the frame and the
/// worker fetch after the page is ready), so that what comes next is what an action caused.
async fn open_quiet_shop(session: &str) {
    open_shop(session).await;
    eventually(
        "the shop's own requests",
        Duration::from_secs(10),
        || async {
            let lines = content_lines(&network(session, json!({})).await);
            [
                "/api/frame-data",
                "/api/worker-ping",
                "/pixel.png",
                "/lib.js",
                "/missing.png",
            ]
            .iter()
            .all(|path| line_with(&lines, path).is_some())
                && !lines.iter().any(|line| line.contains("] pending "))
        },
    )
    .await;
}

#[tokio::test]
async fn the_shop_shows_its_requests_from_every_frame_and_worker_with_why_they_failed() {
    let session = "net-shop";
    let opened = open_shop(session).await;
    // The navigation's own account: the missing image, the dead host, the refused pixel.
    let events = &opened["page_events"];
    assert!(
        events["failed_requests"].as_u64().unwrap() >= 3,
        "{opened:#}"
    );
    let port = world().shop.port;
    let partner = format!("frame http://localhost:{port}/frame");
    eventually(
        "the frame's and the worker's requests",
        Duration::from_secs(10),
        || async {
            let lines = content_lines(&network(session, json!({})).await);
            line_with(&lines, "/api/frame-data").is_some()
                && line_with(&lines, "/api/worker-ping").is_some()
        },
    )
    .await;
    let lines = content_lines(&network(session, json!({})).await);
    let items = line_with(&lines, "/api/items").unwrap();
    assert!(
        items.contains("] 200 GET ") && items.contains(" fetch "),
        "{items}"
    );
    let missing = line_with(&lines, "/missing.png").unwrap();
    assert!(
        missing.contains("] 404 GET ") && missing.contains(" image"),
        "{missing}"
    );
    let dead = line_with(&lines, "/lib.js").unwrap();
    assert!(
        dead.contains("failed (net::ERR_CONNECTION_REFUSED"),
        "{dead}"
    );
    let refused = line_with(&lines, "/pixel.png").unwrap();
    assert!(
        refused.contains("failed (blocked by the URL policy"),
        "{refused}"
    );
    world().trap.untouched("the shop loaded");
    let frame = line_with(&lines, "/api/frame-data").unwrap();
    assert!(frame.contains(&format!("by {partner}")), "{frame}");
    let worker = line_with(&lines, "/api/worker-ping").unwrap();
    assert!(worker.contains("by worker http://127.0.0.1"), "{worker}");
    // Filters.
    let failed = content_lines(&network(session, json!({ "status": "failed" })).await);
    assert_eq!(failed.len(), 2, "{failed:#?}");
    let not_found = content_lines(&network(session, json!({ "status": "4xx" })).await);
    assert_eq!(not_found.len(), 1, "{not_found:#?}");
    let fetches = content_lines(&network(session, json!({ "type": "fetch" })).await);
    assert!(fetches.iter().all(|l| l.contains(" fetch")), "{fetches:#?}");
    let api = content_lines(&network(session, json!({ "url": "*/api/*-data" })).await);
    assert_eq!(api.len(), 1, "{api:#?}");
    // Console of the frame and the worker.
    eventually(
        "the frame's and the worker's console",
        Duration::from_secs(10),
        || async {
            let lines = content_lines(&console(session, json!({})).await);
            line_with(&lines, "warning: frame warns ok").is_some()
                && line_with(&lines, "info: worker got pong").is_some()
        },
    )
    .await;
}

#[tokio::test]
async fn pay_reports_its_500_its_errors_and_the_json_it_fetched() {
    let session = "net-pay";
    open_quiet_shop(session).await;
    let lines = content_lines(&call("browser_read", json!({ "session": session })).await);
    let pay = ref_of(&lines, "button \"Pay\"");
    let clicked = call(
        "browser_interact",
        json!({ "session": session, "action": "click", "ref": pay }),
    )
    .await;
    let events = &clicked["page_events"];
    let caused = network(session, json!({ "since": "last_action" })).await;
    assert_eq!(events["failed_requests"], 1, "{clicked:#}\n{caused:#}");
    assert_eq!(events["console_errors"], 1, "{clicked:#}");
    assert_eq!(events["page_errors"], 2, "{clicked:#}");
    let first = events["first"].to_string();
    assert!(first.contains("payment failed: card declined"), "{first}");
    // What the click caused, and only that.
    let caused = content_lines(&network(session, json!({ "since": "last_action" })).await);
    assert_eq!(caused.len(), 1, "{caused:#?}");
    assert!(
        caused[0].contains("] 500 POST ") && caused[0].contains("/api/pay fetch"),
        "{caused:#?}"
    );
    let id = caused[0][1..caused[0].find(']').unwrap()].to_string();
    let whole = network(session, json!({ "request": id })).await;
    let body: Value = serde_json::from_str(whole["content"].as_str().unwrap()).unwrap();
    assert_eq!(body, json!({ "error": "card declined", "code": "E_CARD" }));
    let request = &whole["request"];
    assert_eq!(request["status"], 500, "{whole:#}");
    assert_eq!(
        request["request_body"]["text"], r#"{"amount":42}"#,
        "{whole:#}"
    );
    assert_eq!(
        seen("/api/pay"),
        vec![(String::new(), r#"{"amount":42}"#.to_string())]
    );
    // The data the page fetched: all 1000 items, not the 0 rows the page shows.
    let data = network(session, json!({ "data": true, "url": "/api/items" })).await;
    let text = data["content"].as_str().unwrap();
    assert!(
        text.contains("\"name\":\"item 999\""),
        "{}",
        &text[..200.min(text.len())]
    );
    // Errors and exceptions.
    let errors =
        content_lines(&console(session, json!({ "level": "error", "since": "last_action" })).await);
    let all = errors.join("\n");
    assert!(
        all.contains("error: payment failed: card declined"),
        "{all}"
    );
    assert!(
        all.contains("page error: Uncaught Error: boom after pay"),
        "{all}"
    );
    assert!(
        all.contains("page error: Uncaught (in promise) Error: rejected pay"),
        "{all}"
    );
    assert!(
        !all.contains("Failed to load resource: the server responded with a status of 404"),
        "{all}"
    );
}

#[tokio::test]
async fn secrets_stay_hidden_in_reads_and_har_and_another_session_sees_nothing() {
    let session = "net-secrets";
    open_shop(session).await;
    let lines = content_lines(&call("browser_read", json!({ "session": session })).await);
    let user = ref_of(&lines, "textbox \"User\"");
    let password = ref_of(&lines, "textbox \"Password\"");
    for (target, text) in [(user, "ann"), (password, "hunter2-secret")] {
        call(
            "browser_interact",
            json!({ "session": session, "action": "type", "ref": target, "text": text }),
        )
        .await;
    }
    let sign_in = ref_of(&lines, "button \"Sign in\"");
    call(
        "browser_interact",
        json!({ "session": session, "action": "click", "ref": sign_in }),
    )
    .await;
    assert_eq!(
        seen("/login-post").last().unwrap().1,
        "user=ann&password=hunter2-secret"
    );
    let posted = content_lines(&network(session, json!({ "url": "/login-post" })).await);
    let id = posted[0][1..posted[0].find(']').unwrap()].to_string();
    let whole = network(session, json!({ "request": id })).await;
    assert_eq!(
        whole["request"]["request_body"]["text"], "user=ann&password=[redacted]",
        "{whole:#}"
    );
    let items = content_lines(&network(session, json!({ "url": "/api/items" })).await);
    let id = items[0][1..items[0].find(']').unwrap()].to_string();
    let whole = network(session, json!({ "request": id })).await;
    let headers = whole["request"]["request_headers"].as_array().unwrap();
    let authorization = headers
        .iter()
        .find(|h| {
            h["name"]
                .as_str()
                .unwrap()
                .eq_ignore_ascii_case("authorization")
        })
        .unwrap();
    assert_eq!(authorization["value"], "[redacted]", "{whole:#}");
    assert!(
        seen("/api/items")
            .iter()
            .any(|(auth, _)| auth == "Bearer sekrit-token-123"),
        "the server got the real token"
    );
    // The HAR: valid HAR 1.2, the same requests, no secret.
    let saved = call(
        "browser_tabs",
        json!({ "session": session, "action": "har" }),
    )
    .await;
    let har = &saved["har"];
    let text = std::fs::read_to_string(har["path"].as_str().unwrap()).unwrap();
    for secret in ["sekrit-token-123", "hunter2-secret"] {
        let at = text
            .find(secret)
            .map(|at| &text[at.saturating_sub(300)..at + 40]);
        assert_eq!(at, None, "the HAR shows {secret}");
    }
    let document: Value = serde_json::from_str(&text).unwrap();
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(common::fixtures_dir().join("har-1.2.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::draft6::new(&schema).unwrap();
    let problems: Vec<String> = validator
        .iter_errors(&document)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .take(10)
        .collect();
    assert!(problems.is_empty(), "{problems:#?}");
    let entries = document["log"]["entries"].as_array().unwrap();
    assert_eq!(entries.len() as u64, har["entries"].as_u64().unwrap());
    let urls: Vec<&str> = entries
        .iter()
        .map(|e| e["request"]["url"].as_str().unwrap())
        .collect();
    for path in ["/shop", "/api/items", "/missing.png", "/login-post"] {
        assert!(
            urls.iter().any(|u| u.ends_with(path)),
            "{path} not in {urls:#?}"
        );
    }
    let mode = std::fs::metadata(har["path"].as_str().unwrap()).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
        0o600
    );
    // Over REST, the file itself.
    let raw = common::client()
        .post(format!("{}/api/tools/browser_tabs", world().harness.api))
        .header("Accept", "application/har+json")
        .json(&json!({ "session": session, "action": "har" }))
        .send()
        .await
        .unwrap();
    assert_eq!(raw.headers()["content-type"], "application/har+json");
    let raw: Value = raw.json().await.unwrap();
    assert_eq!(raw["log"]["version"], "1.2");
    // Another session has a log of its own.
    call(
        "browser_navigate",
        json!({ "session": "net-elsewhere", "target": "about:blank" }),
    )
    .await;
    let elsewhere = network("net-elsewhere", json!({})).await;
    assert_eq!(elsewhere["total"], 0, "{elsewhere:#}");
    let elsewhere = console("net-elsewhere", json!({})).await;
    assert_eq!(elsewhere["total"], 0, "{elsewhere:#}");
}

#[tokio::test]
async fn reads_refuse_fields_of_other_modes_and_unknown_ids() {
    let session = "net-errors";
    call(
        "browser_navigate",
        json!({ "session": session, "target": "about:blank" }),
    )
    .await;
    for (args, field) in [
        (json!({ "mode": "markdown", "status": "5xx" }), "status"),
        (json!({ "mode": "console", "request": "r1" }), "request"),
        (json!({ "mode": "network", "level": "error" }), "level"),
        (json!({ "mode": "network", "status": "teapot" }), "status"),
        (json!({ "mode": "network", "since": "yesterday" }), "since"),
        (json!({ "mode": "network", "request": "12" }), "request"),
    ] {
        let mut args = args;
        args["session"] = json!(session);
        let (status, body) =
            common::call_at(&world().harness.api, "browser_read", args.clone()).await;
        assert_eq!(status, 400, "{args}: {body:#}");
        assert_eq!(body["error"]["code"], "INVALID_ARGUMENT", "{body:#}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(field),
            "{body:#}"
        );
        assert!(body["error"]["hint"].is_string(), "{body:#}");
    }
    let (status, body) = common::call_at(
        &world().harness.api,
        "browser_read",
        json!({ "session": session, "mode": "network", "request": "r999999" }),
    )
    .await;
    assert_eq!(status, 400, "{body:#}");
    assert!(
        body["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("mode=network"),
        "{body:#}"
    );
}

#[tokio::test]
async fn a_thousand_navigations_keep_the_tab_log_within_its_ring() {
    let session = "net-hops";
    call(
        "browser_navigate",
        json!({ "session": session, "target": shop_url("/hop?n=1&to=1000"), "wait_for": "Arrived after 1000", "timeout_ms": 120000 }),
    )
    .await;
    let requests = network(session, json!({})).await;
    let kept = requests["total"].as_u64().unwrap();
    let recorded = requests["recorded"].as_u64().unwrap();
    assert!(recorded >= 1000, "{recorded} requests recorded");
    assert_eq!(kept, 1000, "the ring keeps max_requests: {kept}");
    let messages = console(session, json!({})).await;
    assert!(
        messages["recorded"].as_u64().unwrap() >= 999,
        "{messages:#}"
    );
    assert!(messages["total"].as_u64().unwrap() <= 500, "{messages:#}");
}

#[tokio::test]
async fn a_stream_that_never_ends_and_a_body_nobody_reads_are_both_kept() {
    let session = "net-stream";
    let before = seen("/api/stream").len();
    call(
        "browser_navigate",
        json!({ "session": session, "target": shop_url("/streaming"), "wait_for": "Heard 2" }),
    )
    .await;
    assert_eq!(
        seen("/api/stream").len(),
        before + 1,
        "the server saw the stream opened"
    );
    eventually("the unread answer", Duration::from_secs(10), || async {
        let lines = content_lines(&network(session, json!({ "url": "/api/items" })).await);
        lines
            .iter()
            .any(|l| l.contains("] 200 GET ") && l.contains(" KB"))
    })
    .await;
    let lines = content_lines(&network(session, json!({})).await);
    // Answered, and still open: a status, no size and no duration yet.
    let stream = line_with(&lines, "/api/stream").expect("the stream is listed");
    assert!(stream.ends_with("/api/stream eventsource"), "{stream}");
    assert!(stream.contains("] 200 GET "), "{stream}");
    let id = stream[1..stream.find(']').unwrap()].to_string();
    let whole = network(session, json!({ "request": id })).await;
    let body = whole["content"].as_str().unwrap();
    assert!(
        body.contains("data: first") && body.contains("data: second"),
        "{whole:#}"
    );
    // The page never read the answer; the log has it all the same.
    let unread = line_with(&lines, "/api/items").unwrap();
    let id = unread[1..unread.find(']').unwrap()].to_string();
    let whole = network(session, json!({ "request": id })).await;
    assert!(
        whole["content"].as_str().unwrap().contains("\"item 999\""),
        "{}",
        whole["request"]
    );
}
