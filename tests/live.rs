//! The live view and hand-off, with real Chromium on both ends: the person is a second session
//! of the same service that opens the live link the way a person's browser would, and drives
//! the page through it.

mod common;

use std::time::{Duration, Instant};

use common::{call, decode, element_lines, eventually, harness, ok, ref_of};
use serde_json::{Value, json};

/// The fixture's block colour (`fixtures/live.html`), and after a press.
const BLOCK: [u8; 3] = [0xe0, 0x21, 0x8a];
const PRESSED: [u8; 3] = [0x21, 0xe0, 0x8a];

/// Opens the live fixture in `worker` and returns the session's live link.
async fn worker_with_link(worker: &str) -> String {
    ok(
        "browser_navigate",
        json!({ "session": worker, "target": harness().page("live.html") }),
    )
    .await;
    let live = ok(
        "browser_tabs",
        json!({ "session": worker, "action": "live" }),
    )
    .await;
    live["live_url"].as_str().expect("live_url").to_string()
}

/// The share of the viewer's screenshot in (about) `colour`.
async fn share_of(viewer: &str, colour: [u8; 3]) -> f64 {
    let shot = ok("browser_screenshot", json!({ "session": viewer })).await;
    let image = decode(&shot).to_rgb8();
    let near = |a: u8, b: u8| a.abs_diff(b) < 24;
    let matching = image
        .pixels()
        .filter(|p| near(p[0], colour[0]) && near(p[1], colour[1]) && near(p[2], colour[2]))
        .count();
    matching as f64 / f64::from(image.width() * image.height())
}

/// Waits until the viewer shows `colour` over a good part of its screen.
async fn shows(viewer: &str, colour: [u8; 3], within: Duration) {
    eventually("the viewer shows the worker's page", within, || async {
        share_of(viewer, colour).await > 0.2
    })
    .await;
}

#[tokio::test]
async fn the_viewer_shows_the_worker_page() {
    let link = worker_with_link("live-shows").await;
    let opened = Instant::now();
    ok(
        "browser_navigate",
        json!({ "session": "live-shows-viewer", "target": link }),
    )
    .await;
    // How fast is `cargo bench --bench live`'s business; here, that it shows at all.
    shows("live-shows-viewer", BLOCK, Duration::from_secs(10)).await;
    eprintln!("first frame shown after {:?}", opened.elapsed());
    let lines = element_lines("live-shows-viewer").await;
    for name in ["\"Live view\"", "\"Take control\""] {
        assert!(
            lines.iter().any(|l| l.contains(name)),
            "{name} in {lines:#?}"
        );
    }
    // The view follows the session's active tab, and its tab strip shows another one.
    ok(
        "browser_tabs",
        json!({ "session": "live-shows", "action": "new", "url": harness().page("light.html") }),
    )
    .await;
    viewer_ref("live-shows-viewer", "tab \"Light counter\"").await;
    eventually(
        "the viewer follows the new tab",
        Duration::from_secs(5),
        || async { share_of("live-shows-viewer", BLOCK).await < 0.01 },
    )
    .await;
    viewer_click("live-shows-viewer", "tab \"Live fixture\"").await;
    shows("live-shows-viewer", BLOCK, Duration::from_secs(5)).await;
}

/// The ref of the viewer's element whose line contains `needle`, once the viewer shows it.
async fn viewer_ref(viewer: &str, needle: &str) -> u32 {
    let started = Instant::now();
    loop {
        let lines = element_lines(viewer).await;
        if lines.iter().any(|l| l.contains(needle)) {
            return ref_of(&lines, needle);
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the viewer never offered {needle}: {lines:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the viewer's page shows `text`.
async fn viewer_says(viewer: &str, text: &str) {
    eventually(
        &format!("the viewer says {text:?}"),
        Duration::from_secs(10),
        || async { common::page_text(viewer).await.contains(text) },
    )
    .await;
}

async fn viewer_click(viewer: &str, needle: &str) {
    let target = viewer_ref(viewer, needle).await;
    ok(
        "browser_interact",
        json!({ "session": viewer, "action": "click", "ref": target }),
    )
    .await;
}

/// Opens the link in `viewer` and takes control of the worker session.
async fn take_control(viewer: &str, link: &str) {
    ok(
        "browser_navigate",
        json!({ "session": viewer, "target": link }),
    )
    .await;
    viewer_click(viewer, "\"Take control\"").await;
    viewer_ref(viewer, "\"Give back\"").await;
}

/// Keys pressed on the viewer's screen (it has focus, so they go to the worker's page).
async fn viewer_keys(viewer: &str, keys: &str) {
    let screen = viewer_ref(viewer, "\"Live view\"").await;
    ok(
        "browser_interact",
        json!({ "session": viewer, "action": "send_keys", "ref": screen, "keys": keys }),
    )
    .await;
}

/// Text typed on the viewer's screen.
async fn viewer_types(viewer: &str, text: &str) {
    let screen = viewer_ref(viewer, "\"Live view\"").await;
    ok(
        "browser_interact",
        json!({ "session": viewer, "action": "type", "ref": screen, "text": text, "clear": false }),
    )
    .await;
}

fn presses() -> Vec<String> {
    common::page_fixtures::received()
        .into_iter()
        .filter(|(path, _)| path == "/live-press")
        .map(|(_, body)| body)
        .collect()
}

#[tokio::test]
async fn a_person_in_control_clicks_and_types_at_the_right_place() {
    let worker = "live-input";
    let viewer = "live-input-viewer";
    let link = worker_with_link(worker).await;
    take_control(viewer, &link).await;
    // The viewer's screen is smaller than the worker's 1280×720 viewport: a click at its middle
    // must land at the middle of the worker's page, where the button is.
    let before = presses().len();
    viewer_click(viewer, "\"Live view\"").await;
    eventually(
        "the server saw the press",
        Duration::from_secs(5),
        || async { presses().len() > before },
    )
    .await;
    let press = presses().pop().unwrap();
    let field = |name: &str| -> f64 {
        url::form_urlencoded::parse(press.as_bytes())
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.parse().unwrap())
            .unwrap()
    };
    assert!((field("x") - 640.0).abs() < 12.0, "pressed at {press}");
    assert!((field("y") - 360.0).abs() < 12.0, "pressed at {press}");
    shows(viewer, PRESSED, Duration::from_secs(5)).await;

    // The press focused the field: a chord selects its text, typing replaces it.
    viewer_keys(viewer, "Control+A").await;
    viewer_types(viewer, "héllo wörld ✓ 日本").await;
    viewer_keys(viewer, "End Backspace").await;
    // An IME composition and a paste, as the viewer's page receives them from its browser.
    let compose_and_paste = "const s = document.getElementById('screen'); \
        s.dispatchEvent(new CompositionEvent('compositionstart', { data: '' })); \
        s.dispatchEvent(new CompositionEvent('compositionupdate', { data: 'かな' })); \
        s.dispatchEvent(new CompositionEvent('compositionend', { data: '仮名' })); \
        const data = new DataTransfer(); data.setData('text/plain', ' pasted'); \
        s.dispatchEvent(new ClipboardEvent('paste', { clipboardData: data, bubbles: true, cancelable: true }));";
    ok(
        "browser_interact",
        json!({ "session": viewer, "action": "evaluate", "script": compose_and_paste }),
    )
    .await;
    viewer_click(viewer, "\"Give back\"").await;
    viewer_ref(viewer, "\"Take control\"").await;
    let value = ok(
        "browser_interact",
        json!({ "session": worker, "action": "evaluate", "script": "document.getElementById('field').value" }),
    )
    .await;
    assert_eq!(value["value"], "héllo wörld ✓ 日仮名 pasted", "{value:#}");
}

#[tokio::test]
async fn agent_calls_wait_while_a_person_has_control() {
    let worker = "live-waits";
    let viewer = "live-waits-viewer";
    let link = worker_with_link(worker).await;
    take_control(viewer, &link).await;
    // A call whose time runs out while the person drives says so.
    let (status, refused) = call(
        "browser_interact",
        json!({ "session": worker, "action": "evaluate", "script": "1", "timeout_ms": 300 }),
    )
    .await;
    assert_eq!(status, 504, "{refused:#}");
    assert_eq!(refused["error"]["code"], "TIMEOUT");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("a person has control"),
        "{refused:#}"
    );
    // One with time to spare waits, and runs once the viewer is closed.
    let waiting = tokio::spawn(call(
        "browser_interact",
        json!({ "session": worker, "action": "evaluate", "script": "document.title", "timeout_ms": 30000 }),
    ));
    // The viewer still works (and the call still waits) while the person goes on.
    viewer_keys(viewer, "Tab").await;
    assert!(
        !waiting.is_finished(),
        "the agent's call ran while a person had control"
    );
    ok(
        "browser_navigate",
        json!({ "session": viewer, "target": "about:blank" }),
    )
    .await;
    // It ran (within its own 30 s, which would have answered TIMEOUT).
    let (status, read) = waiting.await.unwrap();
    assert_eq!(status, 200, "{read:#}");
}

/// Starts a hand-off on `worker` in the background; returns it and the session's live link.
async fn start_handoff(
    worker: &str,
    args: Value,
) -> (tokio::task::JoinHandle<(u16, Value)>, String) {
    let mut args = args;
    args["session"] = json!(worker);
    args["action"] = json!("handoff");
    let handoff = tokio::spawn(call("browser_interact", args));
    // The waiting hand-off lets go of the session: asking for its link does not wait.
    let live = ok(
        "browser_tabs",
        json!({ "session": worker, "action": "live" }),
    )
    .await;
    (handoff, live["live_url"].as_str().unwrap().to_string())
}

#[tokio::test]
async fn a_person_logs_in_through_the_live_view_and_the_login_is_saved() {
    let worker = "live-login";
    let viewer = "live-login-viewer";
    ok(
        "browser_navigate",
        json!({ "session": worker, "target": harness().page("login") }),
    )
    .await;
    let (handoff, link) = start_handoff(
        worker,
        json!({ "message": "Please sign in as alice", "until": "Welcome, alice", "timeout_ms": 60000 }),
    )
    .await;
    take_control(viewer, &link).await;
    viewer_says(viewer, "Please sign in as alice").await;
    viewer_keys(viewer, "Tab").await;
    viewer_types(viewer, "alice").await;
    viewer_keys(viewer, "Tab").await;
    viewer_types(viewer, "wonderland").await;
    viewer_keys(viewer, "Enter").await;
    let (status, result) = handoff.await.unwrap();
    assert_eq!(status, 200, "{result:#}");
    assert_eq!(result["handed_back"], "until", "{result:#}");
    assert!(
        result["url"].as_str().unwrap().ends_with("/account"),
        "{result:#}"
    );
    assert_eq!(result["navigated"], true, "{result:#}");
    assert!(
        result["live_url"]
            .as_str()
            .unwrap()
            .contains("/live/live-login?cap=")
    );
    // The person's control went with the hand-off: the agent goes on at once.
    viewer_says(viewer, "Handed back to the agent").await;

    ok(
        "browser_cookies",
        json!({ "session": worker, "action": "export", "name": "live-login" }),
    )
    .await;
    let check = json!({ "url": harness().page("account"), "text": "Welcome, alice" });
    let fresh = ok(
        "browser_cookies",
        json!({ "session": "live-login-later", "action": "ensure_login", "name": "live-login", "check": check }),
    )
    .await;
    assert_eq!(fresh["logged_in"], true, "{fresh:#}");
}

#[tokio::test]
async fn a_handoff_ends_with_done_with_its_timeout_or_at_once() {
    let worker = "live-ends";
    let viewer = "live-ends-viewer";
    ok(
        "browser_navigate",
        json!({ "session": worker, "target": harness().page("live.html") }),
    )
    .await;
    // Done, pressed by the person (who need not take control for it).
    let (handoff, link) = start_handoff(worker, json!({ "message": "Check the page" })).await;
    ok(
        "browser_navigate",
        json!({ "session": viewer, "target": link }),
    )
    .await;
    viewer_says(viewer, "Check the page").await;
    viewer_click(viewer, "\"Done\"").await;
    let (status, done) = handoff.await.unwrap();
    assert_eq!(status, 200, "{done:#}");
    assert_eq!(done["handed_back"], "person", "{done:#}");
    assert!(done["navigated"].is_null(), "not navigated: {done:#}");

    // Nobody comes: the hand-off ends with its time limit, and says so.
    let timed_out = ok(
        "browser_interact",
        json!({ "session": worker, "action": "handoff", "message": "Nobody is there", "timeout_ms": 1500 }),
    )
    .await;
    assert_eq!(timed_out["handed_back"], "timeout", "{timed_out:#}");
    assert!(
        timed_out["waited_ms"].as_u64().unwrap() >= 1400,
        "{timed_out:#}"
    );

    // wait: false returns while the hand-off is still open; a later wait picks it up.
    let open = ok(
        "browser_interact",
        json!({ "session": worker, "action": "handoff", "message": "Later, please", "wait": false }),
    )
    .await;
    assert!(open.get("handed_back").is_none(), "{open:#}");
    let link = open["live_url"].as_str().unwrap();
    ok(
        "browser_navigate",
        json!({ "session": viewer, "target": link }),
    )
    .await;
    let (status, early) = call(
        "browser_interact",
        json!({ "session": worker, "action": "wait", "timeout_ms": 300 }),
    )
    .await;
    assert_eq!(status, 504, "{early:#}");
    assert!(
        early["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("/live/live-ends"),
        "{early:#}"
    );
    viewer_click(viewer, "\"Done\"").await;
    let picked = ok(
        "browser_interact",
        json!({ "session": worker, "action": "wait", "timeout_ms": 10000 }),
    )
    .await;
    assert_eq!(picked["handed_back"], "person", "{picked:#}");
    // Picked up once: the session has no hand-off left, a plain wait is a plain wait again.
    let (status, plain) = call(
        "browser_interact",
        json!({ "session": worker, "action": "wait" }),
    )
    .await;
    assert_eq!(status, 400, "{plain:#}");
}

/// A hand-off on `worker` running in the background (asking for the session's link would wait
/// while a person has control).
fn spawn_handoff(worker: &str, args: Value) -> tokio::task::JoinHandle<(u16, Value)> {
    let mut args = args;
    args["session"] = json!(worker);
    args["action"] = json!("handoff");
    tokio::spawn(call("browser_interact", args))
}

/// A person who has control already is who a hand-off is for: it waits for them at once and
/// ends when they press Done, or when `until` holds — not with the TIMEOUT of a call waiting
/// for their control to end.
#[tokio::test]
async fn a_handoff_to_a_person_in_control_waits_for_them_at_once() {
    let worker = "live-held";
    let viewer = "live-held-viewer";
    let link = worker_with_link(worker).await;
    take_control(viewer, &link).await;
    let handoff = spawn_handoff(
        worker,
        json!({ "message": "Carry on, then press Done", "timeout_ms": 60000 }),
    );
    viewer_says(viewer, "Carry on, then press Done").await;
    viewer_click(viewer, "\"Done\"").await;
    let (status, done) = handoff.await.unwrap();
    assert_eq!(status, 200, "{done:#}");
    assert_eq!(done["handed_back"], "person", "{done:#}");
    assert!(
        done["url"].as_str().unwrap().ends_with("/live.html"),
        "{done:#}"
    );

    // Again in control; this time the page itself says the person is done.
    viewer_click(viewer, "\"Take control\"").await;
    viewer_ref(viewer, "\"Give back\"").await;
    let handoff = spawn_handoff(
        worker,
        json!({ "message": "Press the button", "until": "Pressed 1", "timeout_ms": 60000 }),
    );
    viewer_says(viewer, "Press the button").await;
    viewer_click(viewer, "\"Live view\"").await;
    let (status, done) = handoff.await.unwrap();
    assert_eq!(status, 200, "{done:#}");
    assert_eq!(done["handed_back"], "until", "{done:#}");
    // Other calls still wait for a person's control: it went with the hand-off.
    let after = ok(
        "browser_interact",
        json!({ "session": worker, "action": "evaluate", "script": "document.body.className", "timeout_ms": 5000 }),
    )
    .await;
    assert_eq!(after["value"], "pressed", "{after:#}");
}

const TOKEN: &str = "live-view-test-token-0123456789";

/// A service with a token and links that live 3 s, for the tests of access.
fn guarded() -> &'static common::Harness {
    static GUARDED: std::sync::OnceLock<common::Harness> = std::sync::OnceLock::new();
    GUARDED.get_or_init(|| {
        let mut config = common::loopback_config();
        config.token = Some(TOKEN.into());
        config.live_link_secs = 3;
        common::start(config)
    })
}

async fn guarded_call(tool: &str, args: Value) -> Value {
    let response = common::client()
        .post(format!("{}/api/tools/{tool}", guarded().api))
        .bearer_auth(TOKEN)
        .json(&args)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{tool} {args}");
    response.json().await.unwrap()
}

async fn guarded_metric(name: &str) -> f64 {
    common::metric(&guarded().api, Some(TOKEN), name).await
}

/// `GET url` without any token: status and body.
async fn fetch(url: &str) -> (u16, String) {
    let response = common::client().get(url).send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

/// Opens the live view's WebSocket with `origin`.
async fn connect(
    link: &str,
    origin: &str,
) -> Result<Socket, tokio_tungstenite::tungstenite::Error> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let (page, query) = link.split_once('?').unwrap();
    let ws = format!("{}/ws?{query}", page.replacen("http://", "ws://", 1));
    let mut request = ws.into_client_request().unwrap();
    request
        .headers_mut()
        .insert("origin", origin.parse().unwrap());
    tokio_tungstenite::connect_async(request)
        .await
        .map(|(socket, _)| socket)
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The first message of the live view's socket that `pick` takes, within 10 s.
async fn await_message<T>(
    socket: &mut Socket,
    what: &str,
    mut pick: impl FnMut(tokio_tungstenite::tungstenite::Message) -> Option<T>,
) -> T {
    use futures::StreamExt;
    let found = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match socket.next().await {
                Some(Ok(message)) => {
                    if let Some(found) = pick(message) {
                        return found;
                    }
                }
                other => panic!("the live view's socket ended: {other:?}"),
            }
        }
    });
    found.await.unwrap_or_else(|_| panic!("{what} within 10 s"))
}

/// The next frame (a JPEG) of a live view's socket.
async fn next_frame(socket: &mut Socket) -> Vec<u8> {
    await_message(socket, "a frame", |message| match message {
        tokio_tungstenite::tungstenite::Message::Binary(jpeg) => Some(jpeg.to_vec()),
        _ => None,
    })
    .await
}

/// The next renewed capability the live view's socket sends.
async fn renewed_link(socket: &mut Socket) -> String {
    await_message(socket, "a renewed link", |message| {
        let text = message.into_text().ok()?;
        let message: Value = serde_json::from_str(&text).ok()?;
        (message["type"] == "link").then(|| message["cap"].as_str().unwrap().to_string())
    })
    .await
}

#[tokio::test]
async fn links_open_their_own_session_only_for_a_while_and_from_webpilot_pages() {
    let api = &guarded().api;
    for session in ["cap-a", "cap-b"] {
        guarded_call(
            "browser_navigate",
            json!({ "session": session, "target": harness().page("live.html") }),
        )
        .await;
    }
    let live = guarded_call(
        "browser_tabs",
        json!({ "session": "cap-a", "action": "live" }),
    )
    .await;
    let link = live["live_url"].as_str().unwrap().to_string();
    assert!(
        link.starts_with(&format!("{api}/live/cap-a?cap=")),
        "{link}"
    );
    assert!(
        live["expires_at"].as_str().unwrap().ends_with('Z'),
        "{live:#}"
    );
    let (status, page) = fetch(&link).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Live view"));

    let other = link.replacen("/live/cap-a?", "/live/cap-b?", 1);
    let (status, page) = fetch(&other).await;
    assert_eq!(
        (status, page.contains("another session")),
        (403, true),
        "{page}"
    );
    let mut tampered = link.clone();
    let last = tampered.pop().unwrap();
    tampered.push(if last == 'A' { 'B' } else { 'A' });
    let (status, page) = fetch(&tampered).await;
    assert_eq!((status, page.contains("not valid")), (403, true), "{page}");
    for bare in [format!("{api}/live/cap-a"), format!("{api}/live/cap-a/ws")] {
        let (status, page) = fetch(&bare).await;
        assert_eq!(status, 403, "{bare}: {page}");
    }
    // The token still guards everything else.
    let (status, _) = fetch(&format!("{api}/api/tools")).await;
    assert_eq!(status, 401);

    // The socket wants the same link, from webpilot's own origin.
    let refused = connect(&link, "http://evil.example").await.unwrap_err();
    assert!(refused.to_string().contains("403"), "{refused}");
    let refused = connect(&other, api).await.unwrap_err();
    assert!(refused.to_string().contains("403"), "{refused}");
    let mut socket = connect(&link, api).await.expect("the live view's socket");
    let jpeg = next_frame(&mut socket).await;
    let frame = image::load_from_memory(&jpeg).unwrap().to_rgb8();
    assert_eq!((frame.width(), frame.height()), (1280, 720));
    let middle = frame.get_pixel(100, 600);
    assert!(middle[0] > 0xc0 && middle[1] < 0x60, "{middle:?}");
    assert_eq!(guarded_metric("webpilot_live_screencasts").await, 1.0);

    // The last viewer gone, the screencast stops: the page changes, no frame comes.
    drop(socket);
    eventually("the screencast stops", Duration::from_secs(5), || async {
        guarded_metric("webpilot_live_screencasts").await == 0.0
            && guarded_metric("webpilot_live_viewers").await == 0.0
    })
    .await;
    let frames = guarded_metric("webpilot_live_frames_total").await;
    guarded_call(
        "browser_interact",
        json!({ "session": "cap-a", "action": "evaluate", "script": "document.getElementById('press').click()" }),
    )
    .await;
    guarded_call("browser_screenshot", json!({ "session": "cap-a" })).await;
    assert_eq!(guarded_metric("webpilot_live_frames_total").await, frames);

    // Links expire (3 s here); a live view renews its own while it is open.
    let mut socket = connect(&link, api).await.expect("the live view's socket");
    eventually("the link expires", Duration::from_secs(10), || async {
        let (status, page) = fetch(&link).await;
        status == 403 && page.contains("expired")
    })
    .await;
    let renewed = renewed_link(&mut socket).await;
    let (status, page) = fetch(&format!("{api}/live/cap-a?cap={renewed}")).await;
    assert_eq!(status, 200, "the renewed link works: {page}");
}

#[tokio::test]
async fn the_cli_prints_the_live_link_at_once_and_serves_it_while_it_waits() {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let mut cli = tokio::process::Command::new(env!("CARGO_BIN_EXE_webpilot"))
        .args(["--data-dir"])
        .arg(dir.path())
        .args([
            "call",
            "browser_interact",
            r#"{"action": "handoff", "message": "Press Done, please", "timeout_ms": 60000}"#,
        ])
        .env("TMPDIR", dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(cli.stderr.take().unwrap()).lines();
    let link = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = stderr.next_line().await.unwrap() {
            if let Some(link) = line.strip_prefix("Live view: ") {
                return link.to_string();
            }
        }
        panic!("the CLI ended without printing the live link");
    })
    .await
    .expect("the link on stderr while the call waits");
    // The person opens it and presses Done: the call returns.
    let (status, page) = fetch(&link).await;
    assert_eq!(status, 200, "{page}");
    ok(
        "browser_navigate",
        json!({ "session": "live-cli-viewer", "target": link }),
    )
    .await;
    viewer_click("live-cli-viewer", "\"Done\"").await;
    let output = tokio::time::timeout(Duration::from_secs(30), cli.wait_with_output())
        .await
        .expect("the CLI returns once the person is done")
        .unwrap();
    assert!(output.status.success());
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["handed_back"], "person", "{result:#}");
}

#[tokio::test]
async fn a_person_fills_a_form_in_another_sites_frame_through_the_live_view() {
    // The checkout's card form lives in a frame of another site (another renderer process),
    // as payment providers' forms do; the shop's server must receive what the person typed.
    let worker = "live-frame";
    let viewer = "live-frame-viewer";
    ok(
        "browser_navigate",
        json!({ "session": worker, "target": harness().page("checkout.html") }),
    )
    .await;
    let live = ok(
        "browser_tabs",
        json!({ "session": worker, "action": "live" }),
    )
    .await;
    take_control(viewer, live["live_url"].as_str().unwrap()).await;
    // Tab goes from the page into the frame's first field (the order button is disabled).
    viewer_keys(viewer, "Tab").await;
    viewer_types(viewer, "Ada Lovelace ✓").await;
    viewer_keys(viewer, "Enter").await;
    let paid_by = || {
        common::page_fixtures::received()
            .into_iter()
            .filter(|(path, _)| path == "/pay")
            .any(|(_, body)| {
                url::form_urlencoded::parse(body.as_bytes())
                    .any(|(k, v)| k == "holder" && v == "Ada Lovelace ✓")
            })
    };
    eventually(
        "the shop's server got the card holder",
        Duration::from_secs(10),
        || async { paid_by() },
    )
    .await;
}

/// The trace of a hand-off holds what the person did, by element, with their PIN as a named
/// secret; a replay does it again without them (the server sees the same code and PIN), or
/// fails there when told a person is needed.
#[tokio::test]
async fn a_person_s_part_of_a_handoff_is_traced_by_element_and_replayed_without_them() {
    use webpilot::browser::live::PersonInput;
    let worker = "live-traced";
    let viewer = "live-traced-viewer";
    ok(
        "browser_navigate",
        json!({ "session": worker, "target": harness().page("verify.html") }),
    )
    .await;
    let (handoff, link) = start_handoff(
        worker,
        json!({ "message": "Please verify", "until": "Verified", "timeout_ms": 60000 }),
    )
    .await;
    take_control(viewer, &link).await;
    viewer_says(viewer, "Please verify").await;
    // The page's button fills it: the middle of the screen is on it.
    viewer_click(viewer, "\"Live view\"").await;
    viewer_types(viewer, "4711").await;
    viewer_keys(viewer, "Tab").await;
    viewer_types(viewer, "9999").await;
    viewer_keys(viewer, "Enter").await;
    let (status, result) = handoff.await.unwrap();
    assert_eq!(status, 200, "{result:#}");
    assert_eq!(result["handed_back"], "until", "{result:#}");
    let verified = || {
        common::page_fixtures::received()
            .into_iter()
            .filter(|(path, body)| path == "/verify" && body == "4711:9999")
            .count()
    };
    assert_eq!(verified(), 1);

    let zip = common::client()
        .get(format!("{}/api/sessions/{worker}/trace", harness().api))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let steps = webpilot::trace::read_steps(&zip).unwrap();
    let step = steps
        .iter()
        .find(|s| s.args["action"] == "handoff")
        .expect("the hand-off's step");
    let done: Vec<String> = step
        .person
        .iter()
        .map(|input| match input {
            PersonInput::Click { target, .. } => {
                format!("click {}", target.as_ref().unwrap().label())
            }
            PersonInput::Type { target, text, .. } => {
                format!("type {} {text}", target.as_ref().unwrap().label())
            }
            PersonInput::Key { key } => format!("key {key}"),
        })
        .collect();
    assert_eq!(
        done,
        [
            "click button \"I am human\"",
            "type textbox \"Code\" 4711",
            "key Tab",
            "type textbox \"PIN\" {{pin}}",
            "key Enter",
        ],
        "{step:#?}"
    );
    assert_eq!(step.secrets, ["pin"]);
    let text: String = steps
        .iter()
        .map(|s| serde_json::to_string(s).unwrap())
        .collect();
    assert!(!text.contains("9999"), "{text}");
    // Nor in what the tab shows of the request that sent it.
    let listed = ok(
        "browser_read",
        json!({ "session": worker, "mode": "network", "url": "*/verify" }),
    )
    .await;
    let line = listed["content"].as_str().unwrap().to_string();
    let id = &line[1..line.find(']').expect("a request line")];
    let sent = ok(
        "browser_read",
        json!({ "session": worker, "mode": "network", "request": id }),
    )
    .await;
    let sent = sent.to_string();
    assert!(sent.contains("4711") && !sent.contains("9999"), "{sent}");

    let app = &harness().app;
    let replay = |handoff| {
        let options = webpilot::replay::Options {
            secrets: [("pin".to_string(), "9999".to_string())].into(),
            handoff,
            ..Default::default()
        };
        let steps = steps.clone();
        async move {
            webpilot::replay::run(
                &app.registry,
                app.tenants.operator().clone(),
                &steps,
                &options,
            )
            .await
        }
    };
    let report = replay(webpilot::replay::HandoffMode::Replay).await;
    assert!(report.passed, "{report:#?}");
    assert_eq!(verified(), 2, "the replay sent the same code and PIN");
    let report = replay(webpilot::replay::HandoffMode::Fail).await;
    let last = report.steps.last().unwrap();
    assert_eq!(last.status, webpilot::replay::Status::Failed, "{report:#?}");
    assert!(
        last.detail.as_deref().unwrap().contains("needs one"),
        "{report:#?}"
    );

    // Asked again: the replay's hand-off waits for a person, who does it with other values.
    let (progress, mut asked) = tokio::sync::mpsc::unbounded_channel();
    let options = webpilot::replay::Options {
        handoff: webpilot::replay::HandoffMode::Ask,
        handoff_progress: Some(progress),
        origin: Some(harness().api.clone()),
        ..Default::default()
    };
    let replaying = tokio::spawn({
        let steps = steps.clone();
        async move {
            let app = &harness().app;
            webpilot::replay::run(
                &app.registry,
                app.tenants.operator().clone(),
                &steps,
                &options,
            )
            .await
        }
    });
    let link = asked
        .recv()
        .await
        .expect("the replay asks a person")
        .live_url;
    let again = "live-traced-again";
    take_control(again, &link).await;
    viewer_says(again, "Please verify").await;
    viewer_click(again, "\"Live view\"").await;
    viewer_types(again, "1234").await;
    viewer_keys(again, "Tab").await;
    viewer_types(again, "0000").await;
    viewer_keys(again, "Enter").await;
    let report = replaying.await.unwrap();
    assert!(report.passed, "{report:#?}");
    assert!(common::page_fixtures::received().contains(&("/verify".into(), "1234:0000".into())));
}

/// A hand-off followed by a saved login replays by loading that login.
#[tokio::test]
async fn a_handoff_followed_by_a_saved_login_replays_by_loading_it() {
    let worker = "live-saved";
    ok(
        "browser_navigate",
        json!({ "session": worker, "target": harness().page("login") }),
    )
    .await;
    ok(
        "browser_cookies",
        json!({ "session": worker, "action": "export", "name": "live-saved" }),
    )
    .await;
    let page = harness().page("login");
    let trace = [
        json!({ "seq": 1, "at": "", "tool": "browser_navigate", "args": { "target": page },
                "ok": true, "summary": "", "elapsed_ms": 1 }),
        json!({ "seq": 2, "at": "", "tool": "browser_interact",
                "args": { "action": "handoff", "message": "Please sign in" },
                "ok": true, "summary": "", "elapsed_ms": 1 }),
        json!({ "seq": 3, "at": "", "tool": "browser_cookies",
                "args": { "action": "export", "name": "live-saved" },
                "ok": true, "summary": "", "elapsed_ms": 1 }),
    ]
    .map(|step| step.to_string())
    .join("\n");
    let steps = webpilot::trace::read_steps(trace.as_bytes()).unwrap();
    let app = &harness().app;
    let options = webpilot::replay::Options::default();
    let report = webpilot::replay::run(
        &app.registry,
        app.tenants.operator().clone(),
        &steps,
        &options,
    )
    .await;
    assert!(report.passed, "{report:#?}");
    let handoff = &report.steps[1];
    assert_eq!(handoff.status, webpilot::replay::Status::Passed);
    assert_eq!(
        handoff.detail.as_deref(),
        Some("loaded the login saved after it (live-saved)")
    );
}
