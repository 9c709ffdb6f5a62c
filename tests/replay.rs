//! Record once, replay without a model. A shop in three versions, each on a port of its own
//! with its card form in a frame of another site (`localhost`): an agent's run on version 1 is
//! recorded (a password typed, a cart, a payment in the frame), exported from the session's
//! trace, and replayed — on version 1 through the CLI (JUnit report, exit status), on version 2
//! (new ids, test ids and layout, the same buttons by role and name: healed), on version 3 (no
//! Pay button: the step fails, naming it). What each server saw is asserted, secrets included.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use axum::Router;
use axum::extract::State;
use axum::response::Html;
use axum::routing::{get, post};
use common::{Harness, content_lines, ok_at, ref_of};
use serde_json::{Value, json};

/// What each version's server received: (version, path, body).
static SEEN: Mutex<Vec<(u8, String, String)>> = Mutex::new(Vec::new());

fn seen(version: u8) -> Vec<(String, String)> {
    SEEN.lock()
        .unwrap()
        .iter()
        .filter(|(v, _, _)| *v == version)
        .map(|(_, path, body)| (path.clone(), body.clone()))
        .collect()
}

#[derive(Clone)]
struct Version {
    number: u8,
    port: u16,
}

struct World {
    harness: Harness,
    ports: HashMap<u8, u16>,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let harness = common::start_with(|_| {
            let mut config = common::loopback_config();
            config.fetch.allow = vec!["127.0.0.1".into(), "localhost".into()];
            // Steps keep their pictures; a failed replay step shows them.
            config.trace.screenshot_quality = 50;
            config
        });
        let mut ports = HashMap::new();
        for number in 1..=3u8 {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.set_nonblocking(true).unwrap();
            let port = listener.local_addr().unwrap().port();
            ports.insert(number, port);
            let version = Version { number, port };
            harness.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                tokio::spawn(async move { axum::serve(listener, routes(version)).await });
            });
        }
        World { harness, ports }
    })
}

fn routes(version: Version) -> Router {
    Router::new()
        .route("/shop", get(shop))
        .route("/pay", get(pay_form))
        .route("/api/{what}", post(api))
        .with_state(version)
}

async fn api(
    State(version): State<Version>,
    axum::extract::Path(what): axum::extract::Path<String>,
    body: String,
) -> &'static str {
    SEEN.lock()
        .unwrap()
        .push((version.number, format!("/api/{what}"), body));
    "ok"
}

const SCRIPT: &str = r#"<script>
const say = (text) => { document.getElementById('state').textContent = text; };
async function post(path, body) { await fetch(path, { method: 'POST', body }); }
document.addEventListener('click', async (event) => {
  const button = event.target.closest('button');
  if (!button) return;
  if (button.textContent === 'Sign in') {
    const [user, password] = [...document.querySelectorAll('input')].map((i) => i.value);
    await post('/api/login', `${user}:${password}`);
    say(`Signed in as ${user}`);
  }
  if (button.textContent === 'Add to cart') { await post('/api/cart', 'lamp'); say('1 in cart'); }
});
</script>"#;

/// The shop: version 2 has other ids, test ids and order; the same roles and names.
async fn shop(State(version): State<Version>) -> Html<String> {
    let frame = format!(
        r#"<iframe src="http://localhost:{}/pay" title="payment" width="400" height="200"></iframe>"#,
        version.port
    );
    let body = match version.number {
        2 => format!(
            r#"<main class="v2"><p id="state"></p>
<div class="cart"><button id="cart-button-x" data-testid="add-v2">Add to cart</button></div>
<section><input id="login-name" aria-label="User"><input id="login-secret" type="password" aria-label="Password">
<button id="go">Sign in</button></section>{frame}</main>"#
        ),
        _ => format!(
            r#"<p id="state"></p>
<input id="user" aria-label="User"><input id="password" type="password" aria-label="Password">
<button id="signin">Sign in</button>
<button id="add" data-testid="add-1">Add to cart</button>{frame}"#
        ),
    };
    Html(format!(
        "<!doctype html><title>Shop v{}</title>{body}{SCRIPT}",
        version.number
    ))
}

/// The card form in the frame; version 2 puts Pay first, version 3 has none.
async fn pay_form(State(version): State<Version>) -> Html<String> {
    let card = r#"<input id="card" aria-label="Card number">"#;
    let form = match version.number {
        1 => format!(r#"{card}<button id="pay">Pay</button>"#),
        2 => format!(r#"<button id="pay-now" class="primary">Pay</button><br>{card}"#),
        _ => card.to_string(),
    };
    Html(format!(
        r#"<!doctype html>{form}<p id="paid"></p><script>
document.addEventListener('click', async (event) => {{
  if (event.target.textContent !== 'Pay') return;
  await fetch('/api/pay', {{ method: 'POST', body: document.getElementById('card').value }});
  document.getElementById('paid').textContent = 'Paid';
}});
</script>"#
    ))
}

fn shop_url(version: u8) -> String {
    format!("http://127.0.0.1:{}/shop", world().ports[&version])
}

async fn call(tool: &str, args: Value) -> Value {
    ok_at(&world().harness.api, tool, args).await
}

/// Acts on the element whose line has `label`, once the page lists it (the frame loads late).
async fn act(session: &str, action: &str, label: &str, extra: Value) -> Value {
    let read = || async {
        let read = call(
            "browser_read",
            json!({ "session": session, "max_tokens": 100000 }),
        )
        .await;
        content_lines(&read)
    };
    common::eventually(label, std::time::Duration::from_secs(10), || async {
        read().await.iter().any(|line| line.contains(label))
    })
    .await;
    let lines = read().await;
    let mut args = json!({ "session": session, "action": action, "ref": ref_of(&lines, label) });
    args.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    call("browser_interact", args).await
}

/// An agent's run on version 1, recorded in `session`'s trace; its export.
async fn recorded_run(session: &str) -> Vec<u8> {
    call(
        "browser_navigate",
        json!({ "session": session, "target": shop_url(1) }),
    )
    .await;
    act(
        session,
        "type",
        "textbox \"User\"",
        json!({ "text": "ann" }),
    )
    .await;
    act(
        session,
        "type",
        "textbox \"Password\"",
        json!({ "text": "hunter2-typed" }),
    )
    .await;
    act(session, "click", "button \"Sign in\"", json!({})).await;
    act(session, "click", "button \"Add to cart\"", json!({})).await;
    act(
        session,
        "type",
        "textbox \"Card number\"",
        json!({ "text": "4242" }),
    )
    .await;
    act(session, "click", "button \"Pay\"", json!({})).await;
    common::eventually(
        "the payment",
        std::time::Duration::from_secs(10),
        || async { seen(1).contains(&("/api/pay".into(), "4242".into())) },
    )
    .await;
    // The agent looks for what it expects: a replay checks it again.
    let found = call(
        "browser_read",
        json!({ "session": session, "mode": "find", "query": "1 in cart" }),
    )
    .await;
    assert_eq!(found["matches"], 1, "{found:#}");
    let response = common::client()
        .get(format!(
            "{}/api/sessions/{session}/trace",
            world().harness.api
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/zip");
    response.bytes().await.unwrap().to_vec()
}

/// `webpilot replay TRACE --base-url <version's shop>` in a data dir of its own.
fn replay_cli(
    dir: &std::path::Path,
    trace: &std::path::Path,
    version: u8,
) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_webpilot"));
    command
        .arg("--data-dir")
        .arg(dir)
        .args(["--fetch-allow", "127.0.0.1,localhost", "replay"])
        .arg(trace)
        .args([
            "--base-url",
            &format!("http://127.0.0.1:{}", world().ports[&version]),
        ])
        .env("TMPDIR", dir)
        .stderr(std::process::Stdio::null());
    command
}

/// The trace once per test binary.
async fn trace() -> &'static [u8] {
    static TRACE: tokio::sync::OnceCell<Vec<u8>> = tokio::sync::OnceCell::const_new();
    TRACE.get_or_init(|| recorded_run("rec")).await
}

#[tokio::test]
async fn the_trace_holds_every_step_with_its_element_and_no_password() {
    let zip = trace().await;
    let steps = webpilot::trace::read_steps(zip).unwrap();
    let tools: Vec<&str> = steps.iter().map(|s| s.tool.as_str()).collect();
    assert_eq!(
        tools.iter().filter(|t| **t == "browser_interact").count(),
        6,
        "{tools:?}"
    );
    let seqs: Vec<u64> = steps.iter().map(|s| s.seq).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    let password = steps
        .iter()
        .find(|s| s.secrets == vec!["password".to_string()])
        .expect("the password step names its secret");
    assert_eq!(password.args["text"], "{{password}}");
    let pay = steps
        .iter()
        .find(|s| s.target.as_ref().is_some_and(|t| t.name == "Pay"))
        .expect("the Pay click has its element");
    let target = pay.target.as_ref().unwrap();
    assert_eq!(target.role, "button");
    assert!(target.in_frame, "{target:?}");
    assert_eq!(target.attributes["id"], "pay");
    assert!(target.origin.starts_with("http://localhost:"), "{target:?}");
    // Every step that showed another page has its picture in the export, a JPEG.
    for step in &steps {
        let acted = matches!(step.tool.as_str(), "browser_navigate" | "browser_interact");
        assert_eq!(step.screenshot.is_some(), acted, "{step:?}");
        if let Some(name) = &step.screenshot {
            let picture = webpilot::trace::read_image(zip, name).expect(name);
            assert!(picture.starts_with(&[0xFF, 0xD8]), "{name} is no JPEG");
        }
    }
    // What the page did during the sign-in click: the login request it sent.
    let sign_in = steps
        .iter()
        .find(|s| s.target.as_ref().is_some_and(|t| t.name == "Sign in"))
        .unwrap();
    let events = sign_in.events.as_ref().expect("the click's events");
    assert!(
        events
            .requests
            .iter()
            .any(|line| line.contains("200 POST") && line.contains("/api/login")),
        "{events:?}"
    );
    // Nowhere in the export (a zip deflates, so the text is read back from it).
    let text: String = steps
        .iter()
        .map(|s| serde_json::to_string(s).unwrap())
        .collect();
    assert!(!text.contains("hunter2-typed"), "{text}");
    // Another tenant's or an unknown session's trace is not there.
    let missing = common::client()
        .get(format!("{}/api/sessions/nobody/trace", world().harness.api))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
}

#[tokio::test]
async fn the_cli_replays_version_1_as_recorded_and_writes_junit() {
    let zip = trace().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("run.zip");
    std::fs::write(&file, zip).unwrap();
    let junit = dir.path().join("report.xml");
    let before = seen(1).len();
    let output = replay_cli(dir.path(), &file, 1)
        .args(["--expect-text", "1 in cart", "--expect-no-console-errors"])
        .args(["--secret", "password=hunter2-typed", "--junit"])
        .arg(&junit)
        .output()
        .await
        .unwrap();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(output.status.code(), Some(0), "{report:#}");
    assert_eq!(report["healed"], 0, "{report:#}");
    let checked = report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["what"] == "check text \"1 in cart\"")
        .expect("the agent's find became a check");
    assert_eq!(checked["status"], "passed", "{report:#}");
    let saw: Vec<(String, String)> = seen(1)[before..].to_vec();
    assert!(
        saw.contains(&("/api/login".into(), "ann:hunter2-typed".into())),
        "{saw:?}"
    );
    assert!(saw.contains(&("/api/pay".into(), "4242".into())), "{saw:?}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    let parsed = std::process::Command::new("python3")
        .args(["-c", "import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); print(r.get('tests'), r.get('failures'))"])
        .arg(&junit)
        .output()
        .unwrap();
    assert!(parsed.status.success(), "{xml}");
    let counts = String::from_utf8(parsed.stdout).unwrap();
    assert!(counts.trim().ends_with(" 0"), "{counts}\n{xml}");
}

async fn replay_on(
    version: u8,
    expect: webpilot::replay::Expectations,
) -> webpilot::replay::Report {
    let steps = webpilot::trace::read_steps(trace().await).unwrap();
    let options = webpilot::replay::Options {
        base_url: Some(format!("http://127.0.0.1:{}", world().ports[&version])),
        secrets: [("password".to_string(), "hunter2-typed".to_string())].into(),
        expect,
        ..Default::default()
    };
    let app = &world().harness.app;
    let tenant: Arc<_> = app.tenants.operator().clone();
    webpilot::replay::run(&app.registry, tenant, &steps, &options).await
}

#[tokio::test]
async fn version_2_passes_and_names_the_elements_it_healed() {
    let expect = webpilot::replay::Expectations {
        text: vec!["1 in cart".into()],
        url: Some("/shop".into()),
        no_console_errors: true,
        no_failed_requests: true,
    };
    let report = replay_on(2, expect).await;
    assert!(report.passed, "{report:#?}");
    let healed: Vec<&webpilot::replay::Outcome> = report
        .steps
        .iter()
        .filter(|s| s.status == webpilot::replay::Status::Healed)
        .collect();
    let what: Vec<&str> = healed.iter().map(|s| s.what.as_str()).collect();
    assert!(
        what.contains(&"click button \"Add to cart\""),
        "{report:#?}"
    );
    assert!(what.contains(&"click button \"Pay\""), "{report:#?}");
    let pay = healed.iter().find(|s| s.what.contains("Pay")).unwrap();
    let detail = pay.detail.as_deref().unwrap();
    assert!(
        detail.contains("\"pay\"") && detail.contains("pay-now"),
        "{detail}"
    );
    assert!(
        seen(2).contains(&("/api/pay".into(), "4242".into())),
        "{:?}",
        seen(2)
    );
}

#[tokio::test]
async fn version_3_fails_at_the_missing_pay_button_and_names_it() {
    let report = replay_on(3, Default::default()).await;
    assert!(!report.passed, "{report:#?}");
    let last = report.steps.last().unwrap();
    assert_eq!(last.status, webpilot::replay::Status::Failed, "{report:#?}");
    assert_eq!(last.what, "click button \"Pay\"");
    let detail = last.detail.as_deref().unwrap();
    assert!(
        detail.contains("no element like button \"Pay\""),
        "{detail}"
    );
    assert!(detail.contains("closest"), "{detail}");
    assert!(!seen(3).iter().any(|(path, _)| path == "/api/pay"));
    // The page before the step as recorded, and as the replay found it.
    let then = last.then.as_deref().expect("the recorded picture");
    assert!(webpilot::trace::read_image(trace().await, then).is_some());
    assert!(
        last.now
            .as_ref()
            .is_some_and(|p| p.starts_with(&[0xFF, 0xD8]))
    );
}

#[tokio::test]
async fn the_cli_writes_the_pictures_of_a_failed_step_beside_its_junit_failure() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("run.zip");
    std::fs::write(&file, trace().await).unwrap();
    let (junit, pictures) = (dir.path().join("report.xml"), dir.path().join("pictures"));
    let output = replay_cli(dir.path(), &file, 3)
        .args(["--secret", "password=hunter2-typed", "--junit"])
        .arg(&junit)
        .arg("--artifacts")
        .arg(&pictures)
        .output()
        .await
        .unwrap();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(output.status.code(), Some(1), "{report:#}");
    let failed = report["steps"].as_array().unwrap().last().unwrap();
    let seq = failed["seq"].as_u64().unwrap();
    for when in ["then", "now"] {
        let picture = std::fs::read(pictures.join(format!("step-{seq}-{when}.jpg"))).unwrap();
        assert!(picture.starts_with(&[0xFF, 0xD8]), "{when}");
    }
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("failures=\"1\""), "{xml}");
    assert!(
        xml.contains(&format!("[[ATTACHMENT|{}", pictures.display())),
        "{xml}"
    );
}

#[tokio::test]
async fn an_expectation_that_does_not_hold_fails_the_replay_and_says_why() {
    let expect = webpilot::replay::Expectations {
        text: vec!["Refunded".into()],
        ..Default::default()
    };
    let report = replay_on(1, expect).await;
    assert!(!report.passed, "{report:#?}");
    let last = report.steps.last().unwrap();
    assert_eq!(last.what, "expect text \"Refunded\"");
    assert_eq!(last.status, webpilot::replay::Status::Failed);
    assert_eq!(last.detail.as_deref(), Some("the page does not show it"));
}

#[tokio::test]
async fn the_exported_playwright_test_passes_on_version_1_with_debians_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("checkout.zip");
    std::fs::write(&file, trace().await).unwrap();
    let output = replay_cli(dir.path(), &file, 1)
        .args(["--export", "playwright"])
        .args(["--expect-text", "1 in cart", "--expect-url", "/shop"])
        .args(["--expect-no-console-errors", "--expect-no-failed-requests"])
        .output()
        .await
        .unwrap();
    assert!(output.status.success());
    let spec = String::from_utf8(output.stdout).unwrap();
    for line in [
        "getByRole(\"button\", { name: \"Sign in\", exact: true }).click();",
        ".fill(secret_password);",
        "page.frameLocator(\"iframe[src*=\\\"/pay\\\"]\").getByRole(\"button\", { name: \"Pay\", exact: true }).click();",
    ] {
        assert!(spec.contains(line), "{line}\n---\n{spec}");
    }
    assert!(!spec.contains("hunter2-typed"), "{spec}");
    let before = seen(1).len();
    let (passed, report) = tokio::task::spawn_blocking(move || {
        common::node::run_spec(&spec, &[("WEBPILOT_SECRET_PASSWORD", "hunter2-typed")])
    })
    .await
    .unwrap();
    assert!(passed, "{report}");
    let saw: Vec<(String, String)> = seen(1)[before..].to_vec();
    assert!(
        saw.contains(&("/api/login".into(), "ann:hunter2-typed".into())),
        "{saw:?}"
    );
    assert!(saw.contains(&("/api/pay".into(), "4242".into())), "{saw:?}");
}

#[tokio::test]
async fn post_api_replays_runs_a_session_s_trace_in_the_background_and_streams_its_steps() {
    trace().await;
    let api = &world().harness.api;
    let created: Value = common::client()
        .post(format!("{api}/api/replays"))
        .json(&json!({
            "session": "rec",
            "base_url": format!("http://127.0.0.1:{}", world().ports[&2]),
            "secrets": { "password": "hunter2-typed" },
            "expect_text": ["1 in cart"],
            "expect_no_failed_requests": true,
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().expect("an id").to_string();
    assert!(created["steps_total"].as_u64().unwrap() >= 7, "{created:#}");
    let stream = common::get_text(&format!("{api}/api/replays/{id}/events"), None).await;
    let events = common::sse_events(&stream);
    let (last, report) = events.last().unwrap();
    assert_eq!(last, "done", "{stream}");
    assert_eq!(report["passed"], true, "{report:#}");
    assert!(report["healed"].as_u64().unwrap() >= 2, "{report:#}");
    // Every step reached the stream, in order, and the run reads the same afterwards.
    let steps: Vec<u64> = events
        .iter()
        .filter(|(name, _)| name == "step")
        .map(|(_, step)| step["seq"].as_u64().unwrap())
        .collect();
    let reported = report["steps"].as_array().unwrap().len();
    let run: Value = common::client()
        .get(format!("{api}/api/replays/{id}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(run["status"], "passed", "{run:#}");
    assert_eq!(run["steps"].as_array().unwrap().len(), reported);
    assert!(steps.len() <= reported && !steps.is_empty(), "{stream}");
    // Unknown runs, and asking without a trace.
    let missing = common::client()
        .get(format!("{api}/api/replays/rp-nothing"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let neither = common::client()
        .post(format!("{api}/api/replays"))
        .json(&json!({ "base_url": "http://127.0.0.1:1" }))
        .send()
        .await
        .unwrap();
    assert_eq!(neither.status(), 400);
}

#[tokio::test]
async fn an_inline_trace_replayed_over_http_needs_its_secrets_in_the_request() {
    let trace = data_encoding::BASE64.encode(trace().await);
    let api = &world().harness.api;
    let created: Value = common::client()
        .post(format!("{api}/api/replays"))
        .json(&json!({
            "trace": trace,
            "base_url": format!("http://127.0.0.1:{}", world().ports[&1]),
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().expect("an id").to_string();
    let stream = common::get_text(&format!("{api}/api/replays/{id}/events"), None).await;
    let (_, report) = common::sse_events(&stream).pop().unwrap();
    assert_eq!(report["passed"], false, "{report:#}");
    let failed = report["steps"].as_array().unwrap().last().unwrap().clone();
    assert!(
        failed["detail"]
            .as_str()
            .unwrap()
            .contains("secret \"password\" is not given"),
        "{failed:#}"
    );
}
