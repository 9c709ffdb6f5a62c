//! `--browser-ws`: webpilot drives a Chromium it did not launch.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::ok_at;
use serde_json::json;

/// A Chromium of its own with remote debugging on, and its DevTools WebSocket address.
struct RemoteChromium {
    process: std::process::Child,
    ws: String,
    _profile: tempfile::TempDir,
}

impl RemoteChromium {
    fn start() -> Self {
        let profile = tempfile::tempdir().unwrap();
        let mut process = Command::new("/usr/bin/chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--disable-dev-shm-usage",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(process.stderr.take().unwrap()).lines();
        let ws = loop {
            let line = lines
                .next()
                .expect("chromium printed its DevTools address")
                .unwrap();
            if let Some(at) = line.find("ws://") {
                break line[at..].trim().to_string();
            }
        };
        std::thread::spawn(move || for _ in lines {});
        Self {
            process,
            ws,
            _profile: profile,
        }
    }
}

impl Drop for RemoteChromium {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

#[tokio::test]
async fn a_remote_browser_is_used_through_its_websocket() {
    let chromium = RemoteChromium::start();
    let remote = common::start(webpilot::config::Config {
        browser_ws: Some(chromium.ws.clone()),
        ..common::loopback_config()
    });
    let result = ok_at(
        &remote.api,
        "browser_navigate",
        json!({ "target": remote.page("spa.html"), "session": "remote" }),
    )
    .await;
    assert!(
        result["elements"]
            .as_str()
            .unwrap()
            .contains("Add Item 01 to cart")
    );
    let health = common::health(&remote.api).await;
    assert!(
        health["browser"]["pid"].is_null(),
        "no local process for a remote browser: {health}"
    );
}

/// Some browser services start a browser per WebSocket connection, so webpilot's second
/// connection (for frames of other sites and direct navigation) cannot reach the same browser.
/// Here a proxy passes the first connection through and closes every later one: tabs still
/// work, frames of other sites are just out of reach.
#[tokio::test]
async fn a_browser_that_takes_one_connection_still_works_without_frames_of_other_sites() {
    let chromium = RemoteChromium::start();
    let upstream = url::Url::parse(&chromium.ws).unwrap();
    let upstream = format!(
        "{}:{}",
        upstream.host_str().unwrap(),
        upstream.port().unwrap()
    );
    let proxy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = proxy.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut first = true;
        for client in proxy.incoming().flatten() {
            if !std::mem::take(&mut first) {
                continue; // dropped: closed at once
            }
            let server = std::net::TcpStream::connect(&upstream).unwrap();
            let (mut client_in, mut server_out) =
                (client.try_clone().unwrap(), server.try_clone().unwrap());
            std::thread::spawn(move || std::io::copy(&mut client_in, &mut server_out));
            let (mut server_in, mut client_out) = (server, client);
            std::thread::spawn(move || std::io::copy(&mut server_in, &mut client_out));
        }
    });
    let path = &chromium.ws[chromium.ws.find("/devtools/").unwrap()..];
    let remote = common::start(webpilot::config::Config {
        browser_ws: Some(format!("ws://{address}{path}")),
        ..common::loopback_config()
    });
    let result = ok_at(
        &remote.api,
        "browser_navigate",
        json!({ "target": remote.page("checkout.html"), "session": "single" }),
    )
    .await;
    let elements = result["elements"].as_str().unwrap();
    assert!(elements.contains("Place order"), "{elements}");
    assert!(
        !elements.contains("Card holder"),
        "the other site's frame is out of reach: {elements}"
    );
    let read = ok_at(
        &remote.api,
        "browser_read",
        json!({ "mode": "markdown", "session": "single" }),
    )
    .await;
    assert!(read["content"].as_str().unwrap().contains("42.00 EUR"));
}
