//! The real binary: SIGTERM shuts down cleanly, leaving no Chromium process and no temp profile.

mod common;

use std::time::{Duration, Instant};

fn process_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| !stat.contains(") Z"))
        .unwrap_or(false)
}

#[tokio::test]
async fn sigterm_leaves_no_chromium_and_no_temp_dirs() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let (mut child, api) = common::spawn_service(data.path(), tmp.path());
    let client = reqwest::Client::new();
    let response = client
        .post(format!("{api}/api/tools/browser_navigate"))
        .json(&serde_json::json!({ "target": "about:blank" }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let health = common::health(&api).await;
    let chromium = health["browser"]["pid"].as_u64().expect("browser pid") as u32;
    assert!(process_alive(chromium));
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        1,
        "one temp profile while running"
    );

    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "webpilot did not exit"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "{status:?}");
    assert!(
        !process_alive(chromium),
        "chromium {chromium} still running"
    );
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "temp dirs left behind: {left:?}");
}
