//! browser_cookies: saved logins survive a restart, ensure_login, isolation, imports.

mod common;

use std::process::Child;

use common::{call_at, element_lines, fails, harness, ok, open, ref_of};
use serde_json::{Value, json};

/// Logs session `s` in through the form and the token app, the way a person would.
async fn log_in_by_hand(s: &str) {
    open(s, "login").await;
    let lines = element_lines(s).await;
    let act = |args: Value| async move {
        let mut args = args;
        args["session"] = json!(s);
        ok("browser_interact", args).await
    };
    act(json!({ "action": "type", "ref": ref_of(&lines, "Username"), "text": "alice" })).await;
    act(json!({ "action": "type", "ref": ref_of(&lines, "Password"), "text": "wonderland" })).await;
    let submitted = act(json!({ "action": "click", "ref": ref_of(&lines, "Sign in") })).await;
    assert_eq!(submitted["navigated"], true, "{submitted:#}");
    open(s, "token-app.html").await;
    let button = ref_of(&element_lines(s).await, "Log in");
    act(json!({ "action": "click", "ref": button })).await;
    let text = ok("browser_read", json!({ "session": s, "mode": "text" })).await;
    assert!(
        text["content"]
            .as_str()
            .unwrap()
            .contains("Welcome back, alice")
    );
}

fn account_check() -> Value {
    json!({ "url": harness().page("account"), "text": "Welcome, alice" })
}

fn token_check() -> Value {
    json!({ "url": harness().page("token-app.html"), "text": "Welcome back, alice" })
}

fn spawn_service(data_dir: &std::path::Path) -> (Child, String) {
    common::spawn_service(data_dir, data_dir)
}

fn stop(mut child: Child) {
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    child.wait().unwrap();
}

#[tokio::test]
async fn an_exported_login_survives_a_restart() {
    let data = tempfile::tempdir().unwrap();
    let (first, api) = spawn_service(data.path());
    // Log in by hand on the first service.
    let s = json!("hand");
    let go = |target: String| {
        call_at(
            &api,
            "browser_navigate",
            json!({ "session": s, "target": target }),
        )
    };
    go(harness().page("login")).await;
    let read = |api: String| async move {
        let (_, body) = call_at(
            &api,
            "browser_read",
            json!({ "session": "hand", "max_tokens": 10000 }),
        )
        .await;
        body["content"]
            .as_str()
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let lines = read(api.clone()).await;
    for (needle, text) in [("Username", "alice"), ("Password", "wonderland")] {
        call_at(
            &api,
            "browser_interact",
            json!({ "session": s, "action": "type", "ref": ref_of(&lines, needle), "text": text }),
        )
        .await;
    }
    call_at(
        &api,
        "browser_interact",
        json!({ "session": s, "action": "click", "ref": ref_of(&lines, "Sign in") }),
    )
    .await;
    go(harness().page("token-app.html")).await;
    let lines = read(api.clone()).await;
    call_at(
        &api,
        "browser_interact",
        json!({ "session": s, "action": "click", "ref": ref_of(&lines, "Log in") }),
    )
    .await;
    let (status, saved) = call_at(
        &api,
        "browser_cookies",
        json!({ "session": s, "action": "export", "name": "site" }),
    )
    .await;
    assert_eq!(status, 200, "{saved:#}");
    assert_eq!(
        saved["action"], "export",
        "results name their action: {saved:#}"
    );
    assert_eq!(saved["http_only"], 1, "{saved:#}");
    let file = std::path::Path::new(saved["saved"].as_str().unwrap());
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(file).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    stop(first);

    let (second, api) = spawn_service(data.path());
    for check in [account_check(), token_check()] {
        let (status, result) = call_at(
            &api,
            "browser_cookies",
            json!({ "session": "fresh", "action": "ensure_login", "name": "site", "check": check }),
        )
        .await;
        assert_eq!(status, 200, "{result:#}");
        assert_eq!(result["action"], "ensure_login", "{result:#}");
        assert_eq!(result["logged_in"], true, "{result:#}");
    }
    stop(second);
}

#[tokio::test]
async fn ensure_login_does_nothing_when_logged_in_and_explains_failures() {
    let s = "ck-ensure";
    log_in_by_hand(s).await;
    ok(
        "browser_cookies",
        json!({ "session": s, "action": "export", "name": "ensure" }),
    )
    .await;
    let again = ok("browser_cookies", json!({ "session": s, "action": "ensure_login", "name": "ensure", "check": account_check() })).await;
    assert_eq!(again["logged_in"], true);
    assert!(
        again["did"].to_string().contains("nothing loaded"),
        "{again:#}"
    );

    // A profile whose session is unknown to the server does not log in, and says so.
    let wrong = "127.0.0.1\tFALSE\t/\tFALSE\t0\tsession\tforged\n";
    ok(
        "browser_cookies",
        json!({ "action": "import", "name": "wrong", "content": wrong }),
    )
    .await;
    let result = ok("browser_cookies", json!({ "session": "ck-wrong", "action": "ensure_login", "name": "wrong", "check": account_check() })).await;
    assert_eq!(result["logged_in"], false);
    assert!(
        result["reason"]
            .as_str()
            .unwrap()
            .contains("Welcome, alice"),
        "{result:#}"
    );

    // Expired cookies are reported, not loaded.
    let expired = json!([{ "name": "session", "value": "old", "domain": "127.0.0.1", "path": "/", "expirationDate": 1000.0, "hostOnly": true }]);
    ok(
        "browser_cookies",
        json!({ "action": "import", "name": "expired", "content": expired.to_string() }),
    )
    .await;
    let result = ok("browser_cookies", json!({ "session": "ck-expired", "action": "ensure_login", "name": "expired", "check": account_check() })).await;
    assert_eq!(result["logged_in"], false);
    assert!(
        result["reason"].as_str().unwrap().contains("expired"),
        "{result:#}"
    );
    fails("browser_cookies", json!({ "session": "ck-expired", "action": "ensure_login", "name": "no-such", "check": account_check() }), "NO_SUCH_PROFILE").await;
}

#[tokio::test]
async fn sessions_stay_isolated_when_a_profile_is_loaded() {
    log_in_by_hand("ck-source").await;
    ok(
        "browser_cookies",
        json!({ "session": "ck-source", "action": "export", "name": "iso" }),
    )
    .await;
    ok(
        "browser_cookies",
        json!({ "session": "ck-a", "action": "load", "name": "iso" }),
    )
    .await;
    open("ck-a", "account").await;
    open("ck-b", "account").await;
    let a = ok("browser_read", json!({ "session": "ck-a", "mode": "text" })).await;
    let b = ok("browser_read", json!({ "session": "ck-b", "mode": "text" })).await;
    assert!(a["content"].as_str().unwrap().contains("Welcome, alice"));
    assert!(b["content"].as_str().unwrap().contains("Not signed in"));
    let listed = ok(
        "browser_cookies",
        json!({ "session": "ck-a", "action": "list" }),
    )
    .await;
    assert_eq!(listed["count"], 1);
    assert!(
        listed["cookies"][0]["value"]
            .as_str()
            .unwrap()
            .contains("hidden")
    );
    let cleared = ok(
        "browser_cookies",
        json!({ "session": "ck-a", "action": "clear", "domain": "127.0.0.1" }),
    )
    .await;
    assert_eq!(cleared["removed"], 1);
}

#[tokio::test]
async fn every_import_format_logs_in_and_bad_files_change_nothing() {
    log_in_by_hand("ck-export").await;
    let exported = ok("browser_cookies", json!({ "session": "ck-export", "action": "export", "name": "orig", "format": "storage_state" })).await;
    let state = exported["storage_state"].clone();
    let cookie = state["cookies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "session")
        .unwrap()
        .clone();
    let netscape = format!(
        "# Netscape HTTP Cookie File\n#HttpOnly_{}\tFALSE\t/\tFALSE\t0\tsession\t{}\n",
        cookie["domain"].as_str().unwrap(),
        cookie["value"].as_str().unwrap()
    );
    let array = json!([{ "name": "session", "value": cookie["value"], "domain": cookie["domain"], "path": "/", "httpOnly": true, "hostOnly": true }]);
    for (name, content) in [
        ("from-state", state.to_string()),
        ("from-txt", netscape),
        ("from-json", array.to_string()),
    ] {
        ok(
            "browser_cookies",
            json!({ "action": "import", "name": name, "content": content }),
        )
        .await;
        let session = format!("ck-{name}");
        let result = ok("browser_cookies", json!({ "session": session, "action": "ensure_login", "name": name, "check": account_check() })).await;
        assert_eq!(result["logged_in"], true, "{name}: {result:#}");
    }
    let token = ok("browser_cookies", json!({ "session": "ck-state-token", "action": "ensure_login", "name": "from-state", "check": token_check() })).await;
    assert_eq!(
        token["logged_in"], true,
        "localStorage comes along in storageState: {token:#}"
    );

    let bad = fails("browser_cookies", json!({ "action": "import", "name": "from-txt", "content": "# header\nnot\tenough\tfields\n" }), "INVALID_ARGUMENT").await;
    assert!(
        bad["error"]["message"].as_str().unwrap().contains("line 2"),
        "{bad:#}"
    );
    let still = ok("browser_cookies", json!({ "session": "ck-after-bad", "action": "ensure_login", "name": "from-txt", "check": account_check() })).await;
    assert_eq!(still["logged_in"], true, "the old profile is untouched");
    fails(
        "browser_cookies",
        json!({ "action": "import", "name": "../escape", "content": "[]" }),
        "INVALID_ARGUMENT",
    )
    .await;
}

#[tokio::test]
async fn a_kill_during_a_write_never_leaves_a_corrupt_profile() {
    let data = tempfile::tempdir().unwrap();
    let cookies: Vec<Value> = (0..3000)
        .map(|i| json!({ "name": format!("c{i}"), "value": "v".repeat(500), "domain": "example.com", "path": "/" }))
        .collect();
    let content = json!({ "cookies": cookies, "origins": [] }).to_string();
    let path = data.path().join("profiles/big.json");
    for (round, delay_ms) in [40u64, 60, 150].into_iter().enumerate() {
        let (child, api) = spawn_service(data.path());
        let writer = {
            let (api, content) = (api.clone(), content.clone());
            tokio::spawn(async move {
                for _ in 0..50 {
                    if call_at_quiet(
                        &api,
                        json!({ "action": "import", "name": "big", "content": content }),
                    )
                    .await
                    .is_err()
                    {
                        break;
                    }
                }
            })
        };
        if round == 0 {
            // The first round kills only once a version exists, so there is something to lose.
            common::eventually(
                "the first profile is written",
                std::time::Duration::from_secs(60),
                || {
                    let exists = path.exists();
                    async move { exists }
                },
            )
            .await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(delay_ms)).await;
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        let mut child = child;
        child.wait().unwrap();
        let _ = writer.await;
        let profile: Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).expect("a complete profile");
        assert_eq!(
            profile["cookies"].as_array().unwrap().len(),
            3000,
            "round {round}"
        );
    }
}

/// Like `call_at`, but a dropped connection (the server was killed) is an `Err`, not a panic.
async fn call_at_quiet(api: &str, args: Value) -> Result<Value, reqwest::Error> {
    common::client()
        .post(format!("{api}/api/tools/browser_cookies"))
        .json(&args)
        .send()
        .await?
        .json()
        .await
}

/// `import` reads a file from the files root only; anything else (server files, a FIFO that
/// would block a reader forever, a device) is refused at once, and ten parallel FIFO imports
/// leave the service answering.
#[tokio::test]
async fn import_reads_only_regular_files_of_the_files_root() {
    // The browser is up first: /healthz below should wait for nothing but the file checks.
    ok("browser_tabs", json!({ "session": "ck-files" })).await;
    let root = harness().app.config.data_dir.join("files");
    let state = json!({ "cookies": [{ "name": "a", "value": "b", "domain": "example.com", "path": "/" }], "origins": [] });
    std::fs::write(root.join("state.json"), state.to_string()).unwrap();
    let imported = ok(
        "browser_cookies",
        json!({ "action": "import", "name": "from-file", "path": "state.json" }),
    )
    .await;
    assert_eq!(imported["cookies"], 1, "{imported:#}");

    let fifo = root.join("import.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    for refused in [
        "/etc/passwd",
        "../webpilot.db",
        "/dev/zero",
        "import.fifo",
        ".",
    ] {
        let args = json!({ "action": "import", "name": "refused", "path": refused });
        common::invalid("browser_cookies", args, "path").await;
    }
    let imports = (0..10).map(|_| {
        common::call(
            "browser_cookies",
            json!({ "action": "import", "name": "fifo", "path": "import.fifo" }),
        )
    });
    let health = async {
        let started = std::time::Instant::now();
        common::health(&harness().api).await;
        started.elapsed()
    };
    let (results, answered_in) = tokio::join!(futures::future::join_all(imports), health);
    assert!(
        results.iter().all(|(status, _)| *status == 400),
        "{results:?}"
    );
    assert!(
        answered_in < std::time::Duration::from_secs(5),
        "/healthz took {answered_in:?} during the FIFO imports"
    );
}

/// An export killed mid-write leaves a temp file with plaintext cookies; the next start
/// removes it (its process is gone) and keeps the saved profiles.
#[tokio::test]
async fn a_start_removes_temp_files_of_unfinished_exports() {
    let data = tempfile::tempdir().unwrap();
    let profiles = data.path().join("profiles");
    std::fs::create_dir_all(&profiles).unwrap();
    let abandoned = profiles.join(".site.4000000000.tmp");
    std::fs::write(
        &abandoned,
        br#"{"cookies": [{"name": "session", "value": "secret"}]}"#,
    )
    .unwrap();
    let kept = profiles.join("site.json");
    std::fs::write(&kept, b"{}").unwrap();
    let (service, _api) = spawn_service(data.path());
    stop(service);
    assert!(
        !abandoned.exists(),
        "the abandoned temp file is still there"
    );
    assert!(kept.exists());
}
