//! Live-view speed, measured as a person's browser sees it (a WebSocket client on the live view):
//! - first frame: WebSocket open → first frame, on a still 1280×720 page, a fresh screencast
//!   each time (the previous viewer gone and its screencast stopped);
//! - input to screen: a click sent in control mode → the first frame showing its effect (the
//!   page's colour flips), decoded and checked pixel by pixel;
//! - idle CPU: the whole service (this process and its Chromium) over a still page, watched by
//!   a viewer and not watched, in % of one core.
//!
//! `cargo bench --bench live [-- --reps N --idle-secs S --out FILE.json]`
//! Under `cargo test --all-targets` (no `--bench`) it runs once, briefly: a smoke test.

use std::time::{Duration, Instant};

use axum::Router;
use axum::response::Html;
use axum::routing::{get, post};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use webpilot::App;
use webpilot::config::Config;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A page with nothing that moves (no caret, no animation): frames come only on change.
const STILL: &str = "<!doctype html><title>Still</title><style>html,body{margin:0;height:100%;\
background:#2a6fdb}</style><h1 style=\"color:#fff;margin:0;padding:2em\">Nothing moves here</h1>";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let full = args.iter().any(|a| a == "--bench");
    let option = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse::<u64>().ok())
    };
    let reps = option("--reps").unwrap_or(if full { 30 } else { 1 }) as usize;
    let idle = Duration::from_secs(option("--idle-secs").unwrap_or(if full { 10 } else { 1 }));
    let out = args
        .iter()
        .position(|a| a == "--out")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let report = runtime.block_on(run(reps, idle));
    println!("{}", markdown(&report));
    if let Some(out) = out {
        std::fs::write(&out, serde_json::to_string_pretty(&report).unwrap()).expect("--out");
    }
}

struct Service {
    app: App,
    api: String,
    fixtures: String,
    _data: tempfile::TempDir,
}

async fn start() -> Service {
    let fixtures_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let fixtures = format!("http://{}", fixtures_listener.local_addr().unwrap());
    let pages = Router::new()
        .route(
            "/live.html",
            get(|| async { Html(include_str!("../fixtures/live.html")) }),
        )
        .route("/still.html", get(|| async { Html(STILL) }))
        .route("/live-press", post(|| async { "ok" }));
    tokio::spawn(async move { axum::serve(fixtures_listener, pages).await });
    let data = tempfile::tempdir().unwrap();
    let mut config = Config {
        data_dir: data.path().to_path_buf(),
        port: 0,
        ..Config::default()
    };
    config.fetch.allow = vec!["127.0.0.1".into()];
    let app = App::new(config).await.expect("service");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let api = format!("http://{}", listener.local_addr().unwrap());
    let stop = app.stop.clone();
    tokio::spawn(webpilot::server::serve(
        app.clone(),
        listener,
        stop.cancelled_owned(),
    ));
    Service {
        app,
        api,
        fixtures,
        _data: data,
    }
}

async fn tool(service: &Service, name: &str, args: Value) -> Value {
    let response = reqwest::Client::new()
        .post(format!("{}/api/tools/{name}", service.api))
        .json(&args)
        .send()
        .await
        .expect("webpilot answers");
    assert!(response.status().is_success(), "{name} {args}");
    response.json().await.unwrap()
}

async fn connect(service: &Service, link: &str) -> Socket {
    let (page, query) = link.split_once('?').unwrap();
    let url = format!("{}/ws?{query}", page.replacen("http://", "ws://", 1));
    let mut request = url.into_client_request().unwrap();
    request
        .headers_mut()
        .insert("origin", service.api.parse().unwrap());
    tokio_tungstenite::connect_async(request)
        .await
        .expect("the live view's socket")
        .0
}

/// The next message of the socket.
async fn next(socket: &mut Socket) -> Message {
    tokio::time::timeout(Duration::from_secs(20), socket.next())
        .await
        .expect("a message within 20 s")
        .expect("the socket stays open")
        .expect("a message")
}

async fn next_frame(socket: &mut Socket) -> Vec<u8> {
    loop {
        if let Message::Binary(jpeg) = next(socket).await {
            return jpeg.to_vec();
        }
    }
}

/// The colour of a frame where the fixture's block shows (away from the button and field).
fn block_colour(jpeg: &[u8]) -> [u8; 3] {
    let frame = image::load_from_memory(jpeg).expect("a JPEG").to_rgb8();
    frame.get_pixel(100, 600).0
}

/// The fixture's block colour, and after a press (`fixtures/live.html`).
const BLOCK: [u8; 3] = [0xe0, 0x21, 0x8a];
const PRESSED: [u8; 3] = [0x21, 0xe0, 0x8a];

fn close(a: [u8; 3], b: [u8; 3]) -> bool {
    a.iter().zip(b).all(|(x, y)| x.abs_diff(y) < 40)
}

async fn screencasts_stopped(service: &Service) {
    let stats = service.app.browser.live_stats();
    let deadline = Instant::now() + Duration::from_secs(10);
    while stats.screencasts.load(std::sync::atomic::Ordering::Relaxed) > 0 {
        assert!(
            Instant::now() < deadline,
            "a screencast outlived its viewer"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn first_frames(service: &Service, link: &str, reps: usize) -> Vec<f64> {
    let mut times = Vec::new();
    for _ in 0..reps {
        screencasts_stopped(service).await;
        let mut socket = connect(service, link).await;
        let opened = Instant::now();
        next_frame(&mut socket).await;
        times.push(opened.elapsed().as_secs_f64() * 1000.0);
        socket.close(None).await.ok();
    }
    times
}

async fn input_to_screen(service: &Service, link: &str, reps: usize) -> Vec<f64> {
    let mut socket = connect(service, link).await;
    socket
        .send(Message::text(json!({ "type": "take" }).to_string()))
        .await
        .unwrap();
    let mut colour = None;
    // In control once the state says so; the newest frame gives the colour before the click.
    while colour.is_none() {
        match next(&mut socket).await {
            Message::Text(text) => {
                let state: Value = serde_json::from_str(&text).unwrap();
                if state["control"] == "you" {
                    colour = Some(block_colour(&next_frame(&mut socket).await));
                }
            }
            Message::Binary(_) | Message::Ping(_) | Message::Pong(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    let mut before = colour.unwrap();
    let mut times = Vec::new();
    for _ in 0..reps {
        // Frames already on their way (the caret blinking in the focused field) are no answer.
        if let Some(latest) = quiet(&mut socket).await {
            before = block_colour(&latest);
        }
        let expected = if close(before, BLOCK) { PRESSED } else { BLOCK };
        let click = |action: &str| {
            let event = json!({ "kind": "mouse", "action": action, "x": 640, "y": 360,
                "button": "left", "buttons": if action == "down" { 1 } else { 0 }, "clicks": 1 });
            Message::text(json!({ "type": "input", "event": event }).to_string())
        };
        let sent = Instant::now();
        socket.send(click("down")).await.unwrap();
        socket.send(click("up")).await.unwrap();
        loop {
            let shown = block_colour(&next_frame(&mut socket).await);
            if close(shown, expected) {
                times.push(sent.elapsed().as_secs_f64() * 1000.0);
                before = shown;
                break;
            }
        }
    }
    socket.close(None).await.ok();
    times
}

/// Reads what the socket has until it is quiet for a moment; returns the newest frame.
async fn quiet(socket: &mut Socket) -> Option<Vec<u8>> {
    let mut latest = None;
    while let Ok(message) = tokio::time::timeout(Duration::from_millis(150), socket.next()).await {
        if let Some(Ok(Message::Binary(jpeg))) = message {
            latest = Some(jpeg.to_vec());
        }
    }
    latest
}

/// CPU time (user + system) of this process and its descendants (Chromium), in clock ticks.
fn tree_ticks() -> u64 {
    let own = std::process::id();
    let mut parents = std::collections::HashMap::new();
    let mut ticks = std::collections::HashMap::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the command name (which may hold spaces and parentheses).
        let Some(rest) = stat.rsplit_once(')').map(|(_, rest)| rest) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let field = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<u64>().ok())
                .unwrap_or(0)
        };
        parents.insert(pid, field(1) as u32);
        ticks.insert(pid, field(11) + field(12));
    }
    let in_tree = |mut pid: u32| {
        while pid > 1 {
            if pid == own {
                return true;
            }
            pid = parents.get(&pid).copied().unwrap_or(0);
        }
        false
    };
    ticks
        .iter()
        .filter(|(pid, _)| in_tree(**pid))
        .map(|(_, t)| t)
        .sum()
}

/// The service's CPU over `window`, in % of one core.
async fn cpu_percent(window: Duration) -> f64 {
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let before = tree_ticks();
    tokio::time::sleep(window).await;
    let used = tree_ticks().saturating_sub(before) as f64 / hz;
    used / window.as_secs_f64() * 100.0
}

async fn idle_cpu(service: &Service, link: &str, window: Duration) -> (f64, f64, u64) {
    screencasts_stopped(service).await;
    // The page settled, the browser's own start-up work over.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let unwatched = cpu_percent(window).await;
    let mut socket = connect(service, link).await;
    next_frame(&mut socket).await;
    let frames = &service.app.browser.live_stats().frames;
    let counted = frames.load(std::sync::atomic::Ordering::Relaxed);
    // The socket must be read (as a browser would) for the measurement to be honest.
    let reader = tokio::spawn(async move { while let Some(Ok(_)) = socket.next().await {} });
    let watched = cpu_percent(window).await;
    let idle_frames = frames.load(std::sync::atomic::Ordering::Relaxed) - counted;
    reader.abort();
    (unwatched, watched, idle_frames)
}

async fn run(reps: usize, idle: Duration) -> Value {
    let service = start().await;
    tool(
        &service,
        "browser_navigate",
        json!({ "session": "still", "target": format!("{}/still.html", service.fixtures) }),
    )
    .await;
    let still = tool(
        &service,
        "browser_tabs",
        json!({ "session": "still", "action": "live" }),
    )
    .await;
    let still = still["live_url"].as_str().unwrap().to_string();
    tool(
        &service,
        "browser_navigate",
        json!({ "session": "press", "target": format!("{}/live.html", service.fixtures) }),
    )
    .await;
    let press = tool(
        &service,
        "browser_tabs",
        json!({ "session": "press", "action": "live" }),
    )
    .await;
    let press = press["live_url"].as_str().unwrap().to_string();

    // One untimed round first: Chromium's first screencast warms its encoder.
    first_frames(&service, &still, 1).await;
    let first = first_frames(&service, &still, reps).await;
    let input = input_to_screen(&service, &press, reps).await;
    let (unwatched, watched, idle_frames) = idle_cpu(&service, &still, idle).await;
    service.app.shutdown().await;
    json!({
        "reps": reps,
        "first_frame_ms": summary(&first),
        "input_to_screen_ms": summary(&input),
        "idle_seconds": idle.as_secs(),
        "idle_cpu_percent": { "unwatched": round(unwatched), "watched": round(watched) },
        "idle_frames": idle_frames,
    })
}

fn round(value: f64) -> f64 {
    (value * 10.0).round() / 10.0
}

fn summary(values: &[f64]) -> Value {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize];
    json!({
        "median": round(at(0.5)),
        "p90": round(at(0.9)),
        "min": round(sorted[0]),
        "max": round(sorted[sorted.len() - 1]),
    })
}

fn markdown(report: &Value) -> String {
    let row = |name: &str, key: &str, target: &str| {
        let s = &report[key];
        format!(
            "| {name} | {} | {} | {} – {} | {target} |",
            s["median"], s["p90"], s["min"], s["max"]
        )
    };
    let cpu = &report["idle_cpu_percent"];
    [
        format!("Live view, {} repetitions:", report["reps"]),
        String::new(),
        "| measure (ms) | median | p90 | range | target |".into(),
        "|---|---|---|---|---|".into(),
        row(
            "first frame after the WebSocket opens",
            "first_frame_ms",
            "≤ 300",
        ),
        row(
            "click → frame showing it",
            "input_to_screen_ms",
            "median ≤ 150",
        ),
        String::new(),
        format!(
            "Idle still page over {} s: service CPU {} % of a core watched, {} % unwatched \
             (target ≤ 5 %); {} frames sent while idle.",
            report["idle_seconds"], cpu["watched"], cpu["unwatched"], report["idle_frames"]
        ),
    ]
    .join("\n")
}
