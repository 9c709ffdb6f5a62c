//! Test harness: one webpilot service (and so one Chromium) per test binary, running on its own
//! runtime thread so it outlives each `#[tokio::test]` runtime, plus fixture servers on
//! 127.0.0.1 serving `fixtures/`.
#![allow(dead_code)]

pub mod devtools;
pub mod node;
pub mod page_fixtures;
pub mod postgres;
pub mod process;
pub mod python;
pub mod web_fixtures;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};
use webpilot::App;
use webpilot::config::Config;

/// A running service and its fixture servers.
pub struct Harness {
    /// Base URL of the webpilot REST API.
    pub api: String,
    /// Base URL of the main fixture server.
    pub fixtures: String,
    /// Base URL of a second fixture server (another origin of the same site).
    pub second: String,
    /// The second fixture server under another host name, `localhost`: another site, whose
    /// frames Chromium runs in a process of their own.
    pub cross_site: String,
    /// A third fixture server on 127.0.0.2: a third site.
    pub third_site: String,
    pub app: App,
    runtime: tokio::runtime::Handle,
    _data_dir: tempfile::TempDir,
}

static HARNESS: OnceLock<Harness> = OnceLock::new();

/// The binary's shared harness, started on first use.
pub fn harness() -> &'static Harness {
    HARNESS.get_or_init(|| start(loopback_config()))
}

/// The default configuration with the fixture servers' addresses allowed (127.0.0.1, also
/// named `localhost`, and 127.0.0.2): the URL policy refuses loopback targets otherwise, to
/// fetches and browser documents alike. Tests of the policy use 127.0.0.3.
pub fn loopback_config() -> Config {
    let mut config = Config {
        // A test binary's tests run side by side, each in sessions of its own; the limit
        // itself is tested in tests/limits.rs.
        max_sessions: 32,
        ..Config::default()
    };
    config.fetch.allow = vec!["127.0.0.1".into(), "localhost".into(), "127.0.0.2".into()];
    config
}

/// Every service started by this test binary; their browsers are killed when it exits, since
/// the harnesses live in statics that are never dropped.
static STARTED: std::sync::Mutex<Vec<App>> = std::sync::Mutex::new(Vec::new());

fn register_for_exit(app: &App) {
    let mut started = STARTED.lock().unwrap();
    if started.is_empty() {
        unsafe { libc::atexit(kill_browsers_at_exit) };
    }
    started.push(app.clone());
}

extern "C" fn kill_browsers_at_exit() {
    if let Ok(apps) = STARTED.lock() {
        apps.iter().for_each(|app| app.browser.pool.kill_now());
    }
}

/// Starts a service with `config` (data dir, port and bind are set here).
pub fn start(config: Config) -> Harness {
    start_with(move |_| config)
}

/// Starts a service whose configuration may point at the fixture server (`configure` receives
/// its base URL), e.g. search backends served locally.
pub fn start_with(configure: impl FnOnce(&str) -> Config + Send + 'static) -> Harness {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("test runtime");
        runtime.block_on(async move {
            let fixtures_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let fixtures = format!("http://{}", fixtures_listener.local_addr().unwrap());
            let second_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let second = format!("http://{}", second_listener.local_addr().unwrap());
            let cross_site = format!(
                "http://localhost:{}",
                second_listener.local_addr().unwrap().port()
            );
            let third_listener = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
            let third_site = format!("http://{}", third_listener.local_addr().unwrap());
            let mut config = configure(&fixtures);
            let data_dir = tempfile::tempdir().expect("data dir");
            config.data_dir = data_dir.path().to_path_buf();
            config.port = 0;
            let app = App::new(config).await.expect("service");
            register_for_exit(&app);
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind api");
            let api = format!("http://{}", listener.local_addr().unwrap());
            let sites = |other: &str| Sites {
                other_origin: other.to_string(),
                cross_site: cross_site.clone(),
                third_site: third_site.clone(),
            };
            tokio::spawn(serve_fixtures(fixtures_listener, sites(&second)));
            tokio::spawn(serve_fixtures(second_listener, sites(&fixtures)));
            tokio::spawn(serve_fixtures(third_listener, sites(&fixtures)));
            tokio::spawn(webpilot::server::serve(
                app.clone(),
                listener,
                std::future::pending(),
            ));
            tx.send(Harness {
                api,
                fixtures,
                second,
                cross_site,
                third_site,
                app,
                runtime: tokio::runtime::Handle::current(),
                _data_dir: data_dir,
            })
            .unwrap();
            std::future::pending::<()>().await;
        });
    });
    rx.recv().expect("harness started")
}

pub(crate) fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// The other places a fixture page may point at, written into its HTML where it says
/// `__SECOND_ORIGIN__`, `__CROSS_SITE__` or `__THIRD_SITE__`.
#[derive(Clone)]
pub struct Sites {
    other_origin: String,
    cross_site: String,
    third_site: String,
}

/// Never answers; noted in `page_fixtures::received()` as it starts, so a test can tell the
/// request is in flight.
async fn hang() -> &'static str {
    page_fixtures::note("/hang", "");
    std::future::pending().await
}

/// Serves `fixtures/` with the sites above replaced, plus `/hang` (never answers),
/// `/status/{code}` and the routes of `page_fixtures` and `web_fixtures`.
async fn serve_fixtures(listener: tokio::net::TcpListener, sites: Sites) {
    let router = Router::new()
        .route("/hang", get(hang))
        .route("/status/{code}", get(status_page))
        .route("/login", get(login_form).post(login))
        .route("/account", get(account))
        .route("/download/{name}", get(download))
        .route("/members/{name}", get(members_document))
        .merge(web_fixtures::routes())
        .merge(page_fixtures::routes())
        .route("/{*path}", get(fixture_file))
        .with_state(sites);
    axum::serve(listener, router).await.unwrap();
}

/// Session ids the login fixture handed out (shared by every fixture server of the process).
static LOGINS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

async fn login_form(sites: State<Sites>) -> Response {
    fixture_file(sites, Path("login.html".into())).await
}

/// `alice` / `wonderland` gets an httpOnly `session` cookie and a redirect to /account.
async fn login(body: String) -> Response {
    let fields: Vec<(String, String)> = url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect();
    let field = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    if field("username") != Some("alice") || field("password") != Some("wonderland") {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::CONTENT_TYPE, "text/html")],
            "<h1>Wrong password</h1>",
        )
            .into_response();
    }
    let id = format!(
        "s{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    LOGINS.lock().unwrap().push(id.clone());
    (
        StatusCode::SEE_OTHER,
        [
            (header::LOCATION, "/account".to_string()),
            (
                header::SET_COOKIE,
                format!("session={id}; Path=/; HttpOnly; SameSite=Lax; Max-Age=3600"),
            ),
        ],
    )
        .into_response()
}

/// Whether the request carries a session cookie the login fixture handed out.
fn logged_in(headers: &axum::http::HeaderMap) -> bool {
    let cookie = headers
        .get(header::COOKIE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    cookie
        .split(';')
        .filter_map(|c| c.trim().strip_prefix("session="))
        .any(|id| LOGINS.lock().unwrap().iter().any(|known| known == id))
}

/// A stored document for logged-in visitors only; others get a 404, as sites hide what they
/// protect.
async fn members_document(headers: axum::http::HeaderMap, Path(name): Path<String>) -> Response {
    let document = page_fixtures::stored(&name).filter(|_| logged_in(&headers));
    match document {
        Some(bytes) => (
            [
                (header::CONTENT_TYPE, "application/pdf".to_string()),
                (
                    header::CONTENT_DISPOSITION,
                    format!("attachment; filename=\"members-{name}\""),
                ),
            ],
            bytes,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "<h1>Not found</h1>").into_response(),
    }
}

async fn account(headers: axum::http::HeaderMap) -> Response {
    let (status, body) = if logged_in(&headers) {
        (
            StatusCode::OK,
            "<!doctype html><title>Account</title><h1>Welcome, alice</h1>",
        )
    } else {
        (
            StatusCode::UNAUTHORIZED,
            "<!doctype html><title>Account</title><h1>Not signed in</h1>",
        )
    };
    (status, [(header::CONTENT_TYPE, "text/html")], body).into_response()
}

/// A small CSV sent as an attachment, so the browser downloads it.
async fn download(Path(name): Path<String>) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/csv".to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{name}\""),
            ),
        ],
        "month,total\njan,42\n",
    )
        .into_response()
}

async fn status_page(Path(code): Path<u16>) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST);
    (
        status,
        [(header::CONTENT_TYPE, "text/html")],
        format!("<!doctype html><title>Status {code}</title><h1>Status {code}</h1>"),
    )
        .into_response()
}

pub(crate) async fn fixture_file(State(sites): State<Sites>, Path(path): Path<String>) -> Response {
    if path.contains("..") {
        return StatusCode::BAD_REQUEST.into_response();
    }
    let Ok(bytes) = tokio::fs::read(fixtures_dir().join(&path)).await else {
        return (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "text/html")],
            "<h1>Not found</h1>",
        )
            .into_response();
    };
    let mime = match path.rsplit('.').next() {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript",
        Some("css") => "text/css",
        Some("json") => "application/json",
        _ => "application/octet-stream",
    };
    let body = if mime.starts_with("text/html") {
        String::from_utf8_lossy(&bytes)
            .replace("__SECOND_ORIGIN__", &sites.other_origin)
            .replace("__CROSS_SITE__", &sites.cross_site)
            .replace("__THIRD_SITE__", &sites.third_site)
            .into_bytes()
    } else {
        bytes
    };
    ([(header::CONTENT_TYPE, mime)], body).into_response()
}

impl Harness {
    /// URL of a fixture page on the main fixture server.
    pub fn page(&self, path: &str) -> String {
        format!("{}/{}", self.fixtures, path.trim_start_matches('/'))
    }

    /// Runs a future on the harness's runtime (for direct access to `app`).
    pub fn block_on<F: Future + Send + 'static>(&self, future: F) -> F::Output
    where
        F::Output: Send + 'static,
    {
        let (tx, rx) = std::sync::mpsc::channel();
        self.runtime.spawn(async move {
            let _ = tx.send(future.await);
        });
        rx.recv().expect("harness task finished")
    }
}

/// `GET url`, asserting 200, as JSON.
pub async fn get_json(url: &str) -> Value {
    let response = client().get(url).send().await.expect("request to webpilot");
    assert_eq!(response.status(), 200, "GET {url}");
    response.json().await.expect("JSON body")
}

/// The HTTP status and JSON body of `POST /api/tools/{tool}`.
pub async fn call(tool: &str, args: Value) -> (u16, Value) {
    call_at(&harness().api, tool, args).await
}

pub async fn call_at(api: &str, tool: &str, args: Value) -> (u16, Value) {
    let response = client()
        .post(format!("{api}/api/tools/{tool}"))
        .json(&args)
        .send()
        .await
        .expect("request to webpilot");
    let status = response.status().as_u16();
    let body = response.json().await.expect("JSON body");
    (status, body)
}

/// Calls a tool and asserts it succeeded.
pub async fn ok(tool: &str, args: Value) -> Value {
    ok_at(&harness().api, tool, args).await
}

/// `ok` on another service. Every successful result is also checked against the result schema
/// the service publishes for the tool.
pub async fn ok_at(api: &str, tool: &str, args: Value) -> Value {
    let (status, body) = call_at(api, tool, args.clone()).await;
    assert_eq!(status, 200, "{tool} {args} failed: {body:#}");
    conforms(api, tool, &body).await;
    body
}

/// Asserts that `result` of `tool` matches the result schema of `/api/openapi.json`.
pub async fn conforms(api: &str, tool: &str, result: &Value) {
    let schema = result_schema(api, tool).await;
    let validator = jsonschema::draft202012::new(&schema)
        .unwrap_or_else(|e| panic!("{tool}: the published result schema is invalid: {e}"));
    let problems: Vec<String> = validator
        .iter_errors(result)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        problems.is_empty(),
        "{tool}: the result does not match its published schema: {problems:#?}\n{result:#}"
    );
}

/// The published result schema of `tool` (the API description is read once per service).
pub async fn result_schema(api: &str, tool: &str) -> Value {
    static DESCRIPTIONS: Mutex<Option<HashMap<String, Value>>> = Mutex::new(None);
    let known = DESCRIPTIONS
        .lock()
        .unwrap()
        .get_or_insert_with(HashMap::new)
        .get(api)
        .cloned();
    let description = match known {
        Some(description) => description,
        None => {
            let fetched = get_json(&format!("{api}/api/openapi.json")).await;
            let mut cache = DESCRIPTIONS.lock().unwrap();
            let cache = cache.get_or_insert_with(HashMap::new);
            cache.insert(api.to_string(), fetched.clone());
            fetched
        }
    };
    let schema = description["components"]["schemas"][format!("{tool}_result")].clone();
    assert!(schema.is_object(), "no result schema for {tool}");
    schema
}

/// Starts a crawl with `args` on service `api` and waits (up to `deadline`) until it finished;
/// returns its task id. Needs the browser only for pages that do.
pub async fn crawl_until_finished(api: &str, args: Value, deadline: Duration) -> String {
    let created = ok_at(api, "crawl_batch", args).await;
    let id = created["task_id"].as_str().unwrap().to_string();
    task_reaches(api, &id, &["completed", "failed"], deadline).await;
    id
}

/// Waits until crawl task `id` on the service at `api` has one of `statuses`.
pub async fn task_reaches(api: &str, id: &str, statuses: &[&str], deadline: Duration) {
    eventually("the crawl task to finish", deadline, || async move {
        let status = call_at(api, "crawl_status", json!({ "task_id": id }))
            .await
            .1;
        statuses.iter().any(|s| status["status"] == *s)
    })
    .await;
}

/// A new private session on the service at `api` (`POST /api/sessions`).
pub async fn new_session(api: &str) -> String {
    let created: Value = client()
        .post(format!("{api}/api/sessions"))
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    created["session"].as_str().expect("a session").to_string()
}

/// Calls a tool and asserts it failed with `code`.
pub async fn fails(tool: &str, args: Value, code: &str) -> Value {
    let (status, body) = call(tool, args.clone()).await;
    assert_eq!(body["error"]["code"], code, "{tool} {args}: {body:#}");
    assert!(
        (400..500).contains(&status)
            || code == "BROWSER_UNAVAILABLE"
            || code == "NAVIGATION_FAILED"
            || code == "UPSTREAM"
            || code == "TIMEOUT",
        "{tool}: unexpected status {status}"
    );
    assert!(
        body["error"]["hint"]
            .as_str()
            .is_some_and(|h| !h.is_empty()),
        "hint missing: {body}"
    );
    body
}

/// Calls a tool that must fail with `INVALID_ARGUMENT` naming field `field` in its message.
pub async fn invalid(tool: &str, args: Value, field: &str) -> Value {
    let error = fails(tool, args.clone(), "INVALID_ARGUMENT").await;
    let message = error["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!("field `{field}`")),
        "{tool} {args}: {error:#}"
    );
    error
}

/// Calls a tool with a ref that must be `STALE_REF`, whose hint sends the agent to take a new
/// element list.
pub async fn stale(tool: &str, args: Value) -> Value {
    let body = fails(tool, args, "STALE_REF").await;
    let hint = body["error"]["hint"].as_str().unwrap_or_default();
    assert!(hint.contains("browser_read mode=elements"), "{body:#}");
    body
}

/// The image of a `browser_screenshot` result.
pub fn decode(result: &Value) -> image::DynamicImage {
    use base64::Engine;
    let data = base64::engine::general_purpose::STANDARD
        .decode(result["image"].as_str().expect("image in the result"))
        .unwrap();
    image::load_from_memory(&data).expect("a decodable image")
}

/// A fresh client: a pooled connection must not outlive the test runtime that opened it.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(90))
        .build()
        .unwrap()
}

/// Navigates session `session` to fixture `path` and returns the result.
pub async fn open(session: &str, path: &str) -> Value {
    ok(
        "browser_navigate",
        json!({ "session": session, "target": harness().page(path) }),
    )
    .await
}

/// The element lines of the session's active tab (whole list).
pub async fn element_lines(session: &str) -> Vec<String> {
    let read = ok(
        "browser_read",
        json!({ "session": session, "mode": "elements", "max_tokens": 100000 }),
    )
    .await;
    content_lines(&read)
}

/// The lines of a read result's `content`.
pub fn content_lines(read: &Value) -> Vec<String> {
    read["content"]
        .as_str()
        .unwrap_or_else(|| panic!("no content: {read:#}"))
        .lines()
        .map(str::to_string)
        .collect()
}

/// The ref of the element whose line contains `needle`.
pub fn ref_of(lines: &[String], needle: &str) -> u32 {
    let line = lines
        .iter()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no element line contains {needle:?}: {lines:#?}"));
    line[1..line.find(']').unwrap()].parse().unwrap()
}

/// A listener on an address the URL policy refuses (127.0.0.3 unless told): any connection
/// Chromium made to it would wait in its backlog, so `untouched` can tell that none was made.
pub struct Trap {
    listener: std::net::TcpListener,
}

impl Trap {
    pub fn new() -> Self {
        Self::on("127.0.0.3:0")
    }

    /// A trap on `address` (`[::1]:0`, `127.0.0.2:0`…).
    pub fn on(address: &str) -> Self {
        let listener = std::net::TcpListener::bind(address).unwrap();
        listener.set_nonblocking(true).unwrap();
        Self { listener }
    }

    /// `host:port`, IPv6 in brackets.
    pub fn host_port(&self) -> String {
        self.listener.local_addr().unwrap().to_string()
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.host_port())
    }

    /// Whether something connected (taking that connection).
    pub fn touched(&self) -> bool {
        self.listener.accept().is_ok()
    }

    /// Asserts that nothing has connected so far (`step` says when).
    pub fn untouched(&self, step: &str) {
        let reached = self.listener.accept().map(|(_, peer)| peer);
        assert!(
            reached
                .as_ref()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock),
            "{step}: something connected to the refused address: {reached:?}"
        );
    }
}

/// A gauge or counter of the `/metrics` of the service at `api` (with `token` when it needs one).
pub async fn metric(api: &str, token: Option<&str>, name: &str) -> f64 {
    let mut request = client().get(format!("{api}/metrics"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let text = request.send().await.unwrap().text().await.unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /metrics:\n{text}"))
}

/// A new conversation on the service at `api` that the agent has answered `question` in (the
/// whole SSE stream read, up to its `done`); returns its id.
pub async fn answered_conversation(api: &str, question: &str) -> String {
    let created: Value = client()
        .post(format!("{api}/api/conversations"))
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().unwrap().to_string();
    ask(api, &id, question).await;
    id
}

/// The events of a server-sent event stream read whole: each one's name and its data (JSON).
pub fn sse_events(stream: &str) -> Vec<(String, Value)> {
    stream
        .split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let field = |name: &str| {
                block
                    .lines()
                    .find_map(|line| line.strip_prefix(name))
                    .unwrap_or_else(|| panic!("no {name} in {block:?}"))
                    .trim()
                    .to_string()
            };
            let data = serde_json::from_str(&field("data:")).unwrap();
            (field("event:"), data)
        })
        .collect()
}

/// Sends `question` to conversation `id` and reads its event stream to `done`.
pub async fn ask(api: &str, id: &str, question: &str) {
    let answer = client()
        .post(format!("{api}/api/conversations/{id}/messages"))
        .json(&json!({ "content": question }))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(answer.contains("event: done"), "{answer}");
}

/// How a result's readiness was decided: an action's short `"quiet 12 ms"` or a verdict's `by`.
pub fn ready_by(result: &Value) -> String {
    match &result["ready"] {
        Value::String(short) => short.clone(),
        whole => whole["by"].as_str().unwrap_or_default().to_string(),
    }
}

/// Polls `check` until it returns true or the deadline passes.
pub async fn eventually<F, Fut>(what: &str, deadline: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    while start.elapsed() < deadline {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what} did not happen within {deadline:?}");
}

/// A `webpilot serve` process on a free port with `data_dir` and `tmp_dir` (its TMPDIR), and
/// its API address (read from its log).
pub fn spawn_service(
    data_dir: &std::path::Path,
    tmp_dir: &std::path::Path,
) -> (std::process::Child, String) {
    spawn_service_with(data_dir, tmp_dir, &[])
}

/// `spawn_service` with extra environment variables.
pub fn spawn_service_with(
    data_dir: &std::path::Path,
    tmp_dir: &std::path::Path,
    env: &[(&str, &str)],
) -> (std::process::Child, String) {
    let (child, api, _log) = spawn_service_logged(data_dir, tmp_dir, env);
    (child, api)
}

/// The log lines of a spawned service, read until it exits.
pub struct ServiceLog(std::thread::JoinHandle<Vec<String>>);

impl ServiceLog {
    /// Every line the service logged; waits for it to close its log (to exit).
    pub fn lines(self) -> Vec<String> {
        self.0.join().expect("the log reader")
    }
}

/// `spawn_service_with`, keeping what the service logs.
pub fn spawn_service_logged(
    data_dir: &std::path::Path,
    tmp_dir: &std::path::Path,
    env: &[(&str, &str)],
) -> (std::process::Child, String, ServiceLog) {
    use std::io::{BufRead, BufReader};
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_webpilot"))
        .args(["--port", "0", "--data-dir"])
        .arg(data_dir)
        .arg("serve")
        .env("TMPDIR", tmp_dir)
        .env("WEBPILOT_LOG", "info")
        .env("WEBPILOT_FETCH_ALLOW", "127.0.0.1")
        .envs(env.iter().copied())
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("webpilot starts");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let api = loop {
        let line = lines.next().expect("webpilot printed its address").unwrap();
        if let Some(at) = line.find("http://") {
            break line[at..].trim().to_string();
        }
    };
    let log = std::thread::spawn(move || lines.map_while(Result::ok).collect());
    (child, api, ServiceLog(log))
}

/// Stores `bytes` on the fixture server under `name`; the URL it returns serves them as `mime`.
pub async fn serve_document(name: &str, bytes: Vec<u8>, mime: &str) -> String {
    serve_document_at(&harness().fixtures, name, bytes, mime).await
}

/// `serve_document` on the fixture server at `fixtures` (another harness's).
pub async fn serve_document_at(fixtures: &str, name: &str, bytes: Vec<u8>, mime: &str) -> String {
    let response = client()
        .post(format!("{fixtures}/docs/{name}"))
        .body(bytes)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success());
    format!("{fixtures}/docs/{name}?type={}", mime.replace('+', "%2B"))
}

/// `GET /healthz` of a service.
pub async fn health(api: &str) -> Value {
    client()
        .get(format!("{api}/healthz"))
        .send()
        .await
        .expect("healthz answers")
        .json()
        .await
        .expect("healthz is JSON")
}

/// The visible text of the session's active tab.
pub async fn page_text(session: &str) -> String {
    let read = ok(
        "browser_read",
        json!({ "session": session, "mode": "text", "max_tokens": 100000 }),
    )
    .await;
    read["content"].as_str().expect("text content").to_string()
}

/// The `Retry-After` seconds of a response.
pub fn retry_after(response: &reqwest::Response) -> u64 {
    response.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// The `blocked` entries of browser tool results, all together.
pub fn blocked_entries<'a>(results: &[&'a Value]) -> Vec<&'a Value> {
    results
        .iter()
        .flat_map(|r| r["blocked"].as_array().into_iter().flatten())
        .collect()
}

/// The body of `GET url` as text, with `key` as the bearer key if given.
pub async fn get_text(url: &str, key: Option<&str>) -> String {
    let mut request = client().get(url);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    request.send().await.unwrap().text().await.unwrap()
}

/// Clicks `link` in `session` of service `api` and asserts the page it led to was refused, the
/// refusal naming `needle`.
pub async fn assert_click_refused(api: &str, session: &str, link: u32, needle: &str) {
    let clicked = ok_at(
        api,
        "browser_interact",
        json!({ "session": session, "action": "click", "ref": link }),
    )
    .await;
    assert!(
        clicked["blocked_document"]
            .as_str()
            .is_some_and(|b| b.contains(needle)),
        "{clicked:#}"
    );
}

/// Word tokens as the corpus scorer counts them: runs of letters and digits, case-folded.
pub fn word_tokens(text: &str) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        *counts.entry(word.to_lowercase()).or_insert(0) += 1;
    }
    counts
}

/// Word F1 of `output` against `truth`, as multisets.
pub fn word_f1(truth: &str, output: &str) -> f64 {
    let (truth, output) = (word_tokens(truth), word_tokens(output));
    let common: usize = truth
        .iter()
        .map(|(w, n)| (*n).min(*output.get(w).unwrap_or(&0)))
        .sum();
    let (t, o): (usize, usize) = (truth.values().sum(), output.values().sum());
    if common == 0 {
        return 0.0;
    }
    let (precision, recall) = (common as f64 / o as f64, common as f64 / t as f64);
    2.0 * precision * recall / (precision + recall)
}

/// One JSON-RPC request over MCP's streamable HTTP at `{api}/mcp`, as a client with `key` (if
/// any) makes it: initialize, the initialized notification, then `method` with `params`; the
/// message answering it.
pub async fn mcp_request(api: &str, key: Option<&str>, method: &str, params: Value) -> Value {
    let endpoint = format!("{api}/mcp");
    let post = |session: Option<String>, body: Value| {
        let mut request = client()
            .post(&endpoint)
            .header("accept", "application/json, text/event-stream")
            .json(&body);
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        request.send()
    };
    let hello = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "tests", "version": "1"}}});
    let opened = post(None, hello).await.unwrap();
    assert_eq!(opened.status(), 200);
    let session = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    post(Some(session.clone()), initialized).await.unwrap();
    let request = json!({"jsonrpc": "2.0", "id": 2, "method": method, "params": params});
    let answer = post(Some(session), request)
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // An SSE stream (or one JSON body): the message whose id is 2.
    answer
        .lines()
        .map(|line| line.strip_prefix("data:").unwrap_or(line))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .find(|message| message["id"] == 2)
        .unwrap_or_else(|| panic!("no answer to {method}: {answer}"))
}

/// `webpilot crawl ARGS -o FILE` with a data dir of its own, loopback fetches allowed: its exit
/// code and the JSON lines it wrote.
pub async fn crawl_command(args: &[String]) -> (Option<i32>, Vec<Value>) {
    let data = tempfile::tempdir().unwrap();
    let out = data.path().join("out.jsonl");
    let status = tokio::process::Command::new(env!("CARGO_BIN_EXE_webpilot"))
        .arg("--data-dir")
        .arg(data.path())
        .arg("crawl")
        .args(args)
        .arg("-o")
        .arg(&out)
        .env("WEBPILOT_FETCH_ALLOW", "127.0.0.1")
        .env("TMPDIR", data.path())
        .stderr(std::process::Stdio::null())
        .status()
        .await
        .unwrap();
    let lines = std::fs::read_to_string(&out)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    (status.code(), lines)
}
