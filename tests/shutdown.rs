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

#[tokio::test]
async fn chromium_dies_with_a_killed_webpilot() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let (mut child, api) = common::spawn_service(data.path(), tmp.path());
    let (status, _) = common::call_at(
        &api,
        "browser_navigate",
        serde_json::json!({ "target": "about:blank" }),
    )
    .await;
    assert_eq!(status, 200);
    let chromium = common::health(&api).await["browser"]["pid"]
        .as_u64()
        .expect("browser pid") as u32;
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    common::eventually(
        "chromium exits with webpilot",
        Duration::from_secs(10),
        || {
            let alive = process_alive(chromium);
            async move { !alive }
        },
    )
    .await;
    let profile = tmp.path().to_string_lossy().into_owned();
    common::eventually(
        "no process uses the profile any more",
        Duration::from_secs(10),
        || {
            let left = processes_mentioning(&profile);
            async move { left == 0 }
        },
    )
    .await;
}

/// How many processes have `needle` on their command line.
fn processes_mentioning(needle: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .filter(|cmdline| String::from_utf8_lossy(cmdline).contains(needle))
        .count()
}
