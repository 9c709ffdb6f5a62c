//! The test's own view of the service's Chromium: the pages it has (its DevTools `/json/list`)
//! and its renderer processes (`/proc`), to kill one as the out-of-memory killer would.
//! (`Page.crash` would not do: Chromium reports such a crash only seconds later.)

use std::sync::Arc;

use serde_json::Value;
use webpilot::App;
use webpilot::browser::BrowserHandle;

/// The service's running browser.
async fn browser(app: &App) -> Arc<BrowserHandle> {
    app.browser
        .pool
        .existing()
        .await
        .expect("a browser is running")
}

/// The browser's DevTools WebSocket address.
pub async fn devtools_ws(app: &App) -> String {
    browser(app).await.devtools_address().to_string()
}

/// Every page target of the browser (all contexts), as `/json/list` describes them.
pub async fn page_targets(app: &App) -> Vec<Value> {
    let ws = url::Url::parse(&devtools_ws(app).await).unwrap();
    let list = format!(
        "http://{}:{}/json/list",
        ws.host_str().unwrap(),
        ws.port().unwrap()
    );
    let targets: Vec<Value> = super::client()
        .get(list)
        .send()
        .await
        .expect("DevTools answers")
        .json()
        .await
        .unwrap();
    targets
        .into_iter()
        .filter(|t| t["type"] == "page")
        .collect()
}

/// The page target showing `url_part`, as `/json/list` describes it.
async fn page_showing(app: &App, url_part: &str) -> Value {
    let pages = page_targets(app).await;
    pages
        .iter()
        .find(|p| p["url"].as_str().is_some_and(|u| u.contains(url_part)))
        .cloned()
        .unwrap_or_else(|| panic!("no page shows {url_part}: {pages:#?}"))
}

/// The target id of the page showing `url_part`.
pub async fn target_showing(app: &App, url_part: &str) -> String {
    page_showing(app, url_part).await["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The browser's renderer process using the most memory: its pid and resident set in kB.
pub async fn biggest_renderer(app: &App) -> (u32, u64) {
    let root = browser(app).await.pid().expect("a launched browser");
    descendants(root)
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains("--type=renderer"))
        })
        .map(|pid| (pid, resident_kb(pid)))
        .max_by_key(|(_, kb)| *kb)
        .expect("a renderer runs")
}

/// Kills (SIGKILL, as the out-of-memory killer does) the renderer using the most memory.
pub async fn kill_biggest_renderer(app: &App) {
    let (pid, _) = biggest_renderer(app).await;
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
}

fn descendants(root: u32) -> Vec<u32> {
    let parent_of = |pid: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit_once(") ")?
            .1
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    let all: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| Some((pid, parent_of(pid)?)))
        .collect();
    let mut found = vec![root];
    let mut index = 0;
    while index < found.len() {
        let parent = found[index];
        found.extend(
            all.iter()
                .filter(|(_, p)| *p == parent)
                .map(|(pid, _)| *pid),
        );
        index += 1;
    }
    found.remove(0);
    found
}

fn resident_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
            line.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}

/// The page showing `url_part`, captured as PNG by a bare `Page.captureScreenshot` over a
/// DevTools connection of the test's own: Chromium's pixels with no tool in between.
pub async fn bare_capture(app: &App, url_part: &str) -> Vec<u8> {
    use base64::Engine;
    let page = page_showing(app, url_part).await;
    let address = page["webSocketDebuggerUrl"]
        .as_str()
        .expect("a page socket");
    let params = serde_json::json!({ "format": "png" });
    let answer = cdp_call(address, "Page.captureScreenshot", params).await;
    let data = answer["data"].as_str().expect("an image");
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .unwrap()
}

/// The switches the service's Chromium was started with, as the browser itself reports them.
pub async fn browser_command_line(app: &App) -> Vec<String> {
    let address = devtools_ws(app).await;
    let answer = cdp_call(&address, "Browser.getBrowserCommandLine", Value::Null).await;
    serde_json::from_value(answer["arguments"].clone()).expect("the command line")
}

/// One CDP command over a DevTools connection of the test's own: its result.
async fn cdp_call(address: &str, method: &str, params: Value) -> Value {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let (mut socket, _) = tokio_tungstenite::connect_async(address)
        .await
        .expect("DevTools accepts a second client");
    let mut ask = serde_json::json!({ "id": 1, "method": method });
    if !params.is_null() {
        ask["params"] = params;
    }
    socket.send(Message::text(ask.to_string())).await.unwrap();
    while let Some(message) = socket.next().await {
        let Message::Text(text) = message.expect("a DevTools message") else {
            continue;
        };
        let answer: Value = serde_json::from_str(&text).unwrap();
        if answer["id"] == 1 {
            assert!(answer["error"].is_null(), "{method}: {answer}");
            return answer["result"].clone();
        }
    }
    panic!("DevTools closed before answering {method}")
}
