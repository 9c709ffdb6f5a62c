//! The real binary: SIGTERM shuts down cleanly, leaving no Chromium process and no temp profile.

mod common;

use std::time::{Duration, Instant};

fn process_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| !stat.contains(") Z"))
        .unwrap_or(false)
}

/// Opens a blank page on the service at `api` and returns its browser's pid.
async fn browser_started(api: &str) -> u32 {
    let (status, _) = common::call_at(
        api,
        "browser_navigate",
        serde_json::json!({ "target": "about:blank" }),
    )
    .await;
    assert_eq!(status, 200);
    common::health(api).await["browser"]["pid"]
        .as_u64()
        .expect("browser pid") as u32
}

/// Sends SIGTERM and waits (polling, generously) for the exit.
async fn terminate(child: &mut std::process::Child) -> std::process::ExitStatus {
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "webpilot did not exit after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
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

    let status = terminate(&mut child).await;
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
    let chromium = browser_started(&api).await;
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
    no_process_mentions(&profile).await;

    // The killed webpilot could not remove its browser dir; the next start does (its PID is
    // gone), and leaves alone what is not a webpilot browser dir.
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().collect();
    assert_eq!(left.len(), 1, "{left:?}");
    let stranger = tmp.path().join("webpilot-chromium-notapid-x");
    std::fs::create_dir(&stranger).unwrap();
    let (mut next, _api) = common::spawn_service(data.path(), tmp.path());
    let abandoned = left[0].path();
    common::eventually(
        "the next start removes the abandoned browser dir",
        Duration::from_secs(10),
        || {
            let there = abandoned.exists();
            async move { !there }
        },
    )
    .await;
    assert!(stranger.exists());
    assert!(terminate(&mut next).await.success());
}

/// Waits until no process has `profile` on its command line (Chromium's helpers exit a moment
/// after the browser).
async fn no_process_mentions(profile: &str) {
    common::eventually(
        "no process uses the profile any more",
        Duration::from_secs(10),
        || {
            let left = processes_mentioning(profile);
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

/// `webpilot mcp` as an MCP client runs it: a SIGTERM (the clients' escalation after closing
/// stdin) still closes Chromium and removes the temp profile.
#[tokio::test]
async fn mcp_stdio_on_sigterm_closes_chromium() {
    use std::io::{BufRead, BufReader, Write};
    let tmp = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_webpilot"))
        .arg("--data-dir")
        .arg(data.path())
        .arg("mcp")
        .env("TMPDIR", tmp.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("webpilot mcp starts");
    let mut stdin = child.stdin.take().unwrap();
    for message in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"browser_navigate","arguments":{"target":"about:blank"}}}"#,
    ] {
        writeln!(stdin, "{message}").unwrap();
    }
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let navigated = lines
        .find_map(|line| {
            let reply: serde_json::Value = serde_json::from_str(&line.ok()?).ok()?;
            (reply["id"] == 2).then_some(reply)
        })
        .expect("an answer to the navigate call");
    assert_eq!(navigated["result"]["isError"], false, "{navigated:#}");
    let profile = tmp.path().to_string_lossy().into_owned();
    assert!(processes_mentioning(&profile) > 0, "Chromium runs");

    let status = terminate(&mut child).await;
    assert!(
        status.success(),
        "a clean exit, not death by signal: {status:?}"
    );
    no_process_mentions(&profile).await;
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "temp dirs left behind: {left:?}");
    drop(stdin);
}

/// SIGTERM while a navigation waits for a site that never answers: past the grace period the
/// browser closes under the call, which still answers (`BROWSER_UNAVAILABLE`, not a cut
/// connection), and the service exits 0 leaving no Chromium and no temp dir. Chromium was
/// launched once: the closed pool does not launch another for the call.
#[tokio::test]
async fn sigterm_answers_the_call_in_flight_then_exits() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let target = format!("http://{}/", silent.local_addr().unwrap());
    let tmp = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let env = [("WEBPILOT_SHUTDOWN_GRACE_SECS", "1")];
    let (mut child, api, log) = common::spawn_service_logged(data.path(), tmp.path(), &env);
    let chromium = browser_started(&api).await;
    let stuck = {
        let api = api.clone();
        let args = serde_json::json!({ "target": target, "timeout_ms": 60000 });
        tokio::spawn(async move { common::call_at(&api, "browser_navigate", args).await })
    };
    // The navigation is under way once the site has its connection.
    silent.set_nonblocking(true).unwrap();
    let started = Instant::now();
    let _held = loop {
        // Kept open and silent: the page never arrives.
        if let Ok((connection, _)) = silent.accept() {
            break connection;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the site was never reached"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let status = terminate(&mut child).await;
    assert!(status.success(), "{status:?}");
    let (code, body) = stuck.await.unwrap();
    assert_eq!(code, 503, "{body:#}");
    assert_eq!(body["error"]["code"], "BROWSER_UNAVAILABLE", "{body:#}");
    assert!(!process_alive(chromium));
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "temp dirs left"
    );
    let lines = log.lines();
    let launches = lines.iter().filter(|l| l.contains("browser ready")).count();
    assert_eq!(launches, 1, "{lines:#?}");
}
