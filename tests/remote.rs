//! `--browser-ws`: webpilot drives a Chromium it did not launch.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::call_at;
use serde_json::json;

#[tokio::test]
async fn a_remote_browser_is_used_through_its_websocket() {
    let profile = tempfile::tempdir().unwrap();
    let mut chromium = Command::new("/usr/bin/chromium")
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
    let mut lines = BufReader::new(chromium.stderr.take().unwrap()).lines();
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

    let remote = common::start(webpilot::config::Config {
        browser_ws: Some(ws),
        ..common::loopback_config()
    });
    let (status, result) = call_at(
        &remote.api,
        "browser_navigate",
        json!({ "target": remote.page("spa.html"), "session": "remote" }),
    )
    .await;
    assert_eq!(status, 200, "{result:#}");
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
    chromium.kill().unwrap();
    chromium.wait().unwrap();
}
