//! Tenants: each key of the keys file opens a tenant whose sessions, profiles, crawl tasks,
//! server files and downloads the other tenants cannot see (404, never 403), with its own quotas,
//! call rates and domain rules that narrow the operator's; health details and metrics stay the
//! operator's. `webpilot keys add` writes a key's hash, never the key.

mod common;

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Duration;

use common::{Harness, Trap};
use reqwest::Method;
use serde_json::{Value, json};
use webpilot::config::KeyEntry;
use webpilot::tenancy::key_hash_hex;

const ALICE: &str = "alice-key-5d1f0c9a7e3b2468";
const BOB: &str = "bob-key-8c2e4a6f1b3d5790";
/// A tenant with a session quota of one and a call rate, used by one test only.
const CAROL: &str = "carol-key-3f7a9c1e5b2d4680";
/// Bob's key to his own model server.
const BOB_MODEL_KEY: &str = "bob-model-key-71c3";
/// The operator's token (`--token`), beside the tenants' keys.
const OPERATOR: &str = "operator-token-6e4c2a0f8d1b3957";

fn key(tenant: &str, key: &str) -> KeyEntry {
    KeyEntry {
        tenant: tenant.into(),
        sha256: key_hash_hex(key),
        ..KeyEntry::default()
    }
}

fn service() -> &'static Harness {
    static SERVICE: OnceLock<Harness> = OnceLock::new();
    SERVICE.get_or_init(|| {
        common::start_with(|fixtures| {
            let mut config = common::loopback_config();
            // `*.localhost` names resolve to both loopback addresses.
            config.fetch.allow.push("::1".into());
            config.fetch.deny_domains = vec!["*.operator-denied.localhost".into()];
            let alice = KeyEntry {
                deny_domains: vec!["*.denied.localhost".into(), "localhost".into()],
                ..key("alice", ALICE)
            };
            let carol = KeyEntry {
                max_sessions: Some(1),
                rate: HashMap::from([("crawl_status".to_string(), "2/min".to_string())]),
                ..key("carol", CAROL)
            };
            // Bob's pages are read into data by a model of his own; the operator has none.
            let bob = KeyEntry {
                llm: Some(webpilot::config::LlmConfig {
                    base_url: format!("{fixtures}/v1"),
                    api_key: Some(BOB_MODEL_KEY.into()),
                    model: "scripted".into(),
                    ..Default::default()
                }),
                ..key("bob", BOB)
            };
            config.keys = vec![alice, bob, carol];
            config.token = Some(OPERATOR.into());
            config
        })
    })
}

/// `method path` with `key` as the bearer key: status and JSON body (null when empty).
async fn request(
    key: Option<&str>,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = common::client().request(method, format!("{}{path}", service().api));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("request to webpilot");
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn call_as(key: &str, tool: &str, args: Value) -> (u16, Value) {
    request(
        Some(key),
        Method::POST,
        &format!("/api/tools/{tool}"),
        Some(args),
    )
    .await
}

async fn ok_as(key: &str, tool: &str, args: Value) -> Value {
    let (status, body) = call_as(key, tool, args.clone()).await;
    assert_eq!(status, 200, "{tool} {args}: {body:#}");
    body
}

fn page(path: &str) -> String {
    service().page(path)
}

/// The fixture server under another host name (`*.localhost` is loopback to the egress proxy).
fn named(host: &str, path: &str) -> String {
    let port = service().fixtures.rsplit(':').next().unwrap().to_string();
    format!("http://{host}:{port}/{path}")
}

#[tokio::test]
async fn only_a_known_key_gets_in() {
    let (status, body) = request(None, Method::GET, "/api/sessions", None).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (401, &json!("UNAUTHORIZED"))
    );
    let (status, _) = request(Some("alice-key-wrong"), Method::GET, "/api/sessions", None).await;
    assert_eq!(status, 401);
    // The hash the file holds is not a key.
    let (status, _) = request(Some(&key_hash_hex(ALICE)), Method::GET, "/api/tools", None).await;
    assert_eq!(status, 401);
    let (status, _) = request(Some(ALICE), Method::GET, "/api/tools", None).await;
    assert_eq!(status, 200);
}

/// `GET path` with `key`: status and body as text.
async fn get_as(key: Option<&str>, path: &str) -> (u16, String) {
    let mut request = common::client().get(format!("{}{path}", service().api));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.expect("request to webpilot");
    (response.status().as_u16(), response.text().await.unwrap())
}

/// A liveness probe and a tenant learn only that the service is up; the operator's token gets
/// the details and `/metrics`, which no tenant's key opens.
#[tokio::test]
async fn health_details_and_metrics_are_the_operators() {
    for key in [None, Some(ALICE)] {
        let (status, body) = get_as(key, "/healthz").await;
        assert_eq!(status, 200, "{key:?}");
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body, json!({ "ok": true }), "{key:?}");
    }
    let (status, body) = get_as(Some(OPERATOR), "/healthz").await;
    assert_eq!(status, 200);
    let details: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(details["ok"], true);
    assert!(details["sessions"].is_u64(), "{details:#}");
    // A key sent to /healthz is checked: it answers no guesses.
    let (status, _) = get_as(Some("operator-token-guess"), "/healthz").await;
    assert_eq!(status, 401);

    for key in [ALICE, BOB] {
        let (status, body) = get_as(Some(key), "/metrics").await;
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            (status, &body["error"]["code"]),
            (401, &json!("UNAUTHORIZED"))
        );
        let hint = body["error"]["hint"].as_str().unwrap();
        assert!(hint.contains("operator"), "{body:#}");
    }
    let (status, text) = get_as(Some(OPERATOR), "/metrics").await;
    assert_eq!(status, 200);
    assert!(text.contains("webpilot_browser_sessions "), "{text}");
}

/// Each tenant reads server files (`import` and `upload` paths) under `<root>/<tenant>/` only;
/// neither `..`, an absolute path nor a symlink reaches another tenant's or the operator's.
#[tokio::test]
async fn a_tenant_reads_files_only_from_its_own_folder_of_the_root() {
    let root = service().app.config.data_dir.join("files");
    let cookies = |value: &str| {
        format!("[{{\"name\": \"who\", \"value\": \"{value}\", \"domain\": \"example.com\"}}]")
    };
    for tenant in ["alice", "bob"] {
        std::fs::create_dir_all(root.join(tenant)).unwrap();
        std::fs::write(root.join(tenant).join("jar.json"), cookies(tenant)).unwrap();
    }
    std::fs::write(root.join("operators.json"), cookies("operator")).unwrap();
    let peek = root.join("alice").join("peek.json");
    let _ = std::fs::remove_file(&peek);
    std::os::unix::fs::symlink(root.join("bob").join("jar.json"), &peek).unwrap();
    let import = |path: &str| json!({ "action": "import", "name": "jar", "path": path });

    let imported = ok_as(ALICE, "browser_cookies", import("jar.json")).await;
    assert_eq!(imported["cookies"], 1, "{imported:#}");
    ok_as(BOB, "browser_cookies", import("jar.json")).await;
    let elsewhere = [
        "../bob/jar.json".to_string(),
        "../operators.json".to_string(),
        "peek.json".to_string(),
        root.join("bob/jar.json").display().to_string(),
        root.join("operators.json").display().to_string(),
    ];
    for path in &elsewhere {
        let (status, body) = call_as(ALICE, "browser_cookies", import(path)).await;
        assert_eq!(
            (status, &body["error"]["code"]),
            (400, &json!("INVALID_ARGUMENT")),
            "{path}: {body:#}"
        );
        let upload = json!({ "session": "uploads", "action": "upload", "ref": 1,
            "paths": [path] });
        let (status, body) = call_as(ALICE, "browser_interact", upload).await;
        assert_eq!(status, 400, "{path}: {body:#}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("field `paths`"), "{path}: {body:#}");
    }
    // The operator keeps the whole root, the tenants' folders included.
    ok_as(OPERATOR, "browser_cookies", import("alice/jar.json")).await;
    ok_as(OPERATOR, "browser_cookies", import("operators.json")).await;
}

#[tokio::test]
async fn sessions_of_one_name_are_each_tenants_own() {
    // Both use the same session name, and both the default session.
    for session in [Some("work"), None] {
        let with = |path: &str| {
            let mut args = json!({ "target": page(path) });
            if let Some(session) = session {
                args["session"] = json!(session);
            }
            args
        };
        ok_as(
            ALICE,
            "browser_navigate",
            with("cookies.html?set=owner=alice"),
        )
        .await;
        ok_as(BOB, "browser_navigate", with("history-a.html")).await;
        ok_as(BOB, "browser_navigate", with("cookies.html")).await;
        let mut read = json!({ "mode": "text" });
        if let Some(session) = session {
            read["session"] = json!(session);
        }
        let bobs = ok_as(BOB, "browser_read", read.clone()).await;
        assert!(
            bobs["content"].as_str().unwrap().contains("cookies: []"),
            "bob sees alice's cookie: {bobs:#}"
        );
        let alices = ok_as(ALICE, "browser_read", read).await;
        assert!(
            alices["content"].as_str().unwrap().contains("owner=alice"),
            "{alices:#}"
        );
    }

    // A private session: listed for its tenant only, and only its tenant can close it.
    let (status, created) = request(Some(ALICE), Method::POST, "/api/sessions", None).await;
    assert_eq!(status, 200, "{created:#}");
    let private = created["session"].as_str().unwrap().to_string();
    ok_as(
        ALICE,
        "browser_navigate",
        json!({ "session": private, "target": page("history-a.html") }),
    )
    .await;
    let listed = |key: &'static str| async move {
        let (_, body) = request(Some(key), Method::GET, "/api/sessions", None).await;
        body["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["session"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert!(listed(ALICE).await.contains(&private));
    assert!(!listed(BOB).await.contains(&private));
    // Bob naming it, over REST or MCP, is told there is no such session; none is made for him.
    let args = json!({ "session": private });
    let (status, body) = call_as(BOB, "browser_tabs", args.clone()).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (404, &json!("NO_SUCH_SESSION")),
        "{body:#}"
    );
    let hint = body["error"]["hint"].as_str().unwrap();
    assert!(hint.contains("POST /api/sessions"), "{body:#}");
    let navigate = json!({ "session": private, "target": page("cookies.html") });
    let over_mcp = mcp_result(BOB, "browser_navigate", navigate).await;
    assert_eq!(over_mcp["isError"], true, "{over_mcp:#}");
    let error: Value =
        serde_json::from_str(over_mcp["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(error["error"]["code"], "NO_SUCH_SESSION", "{over_mcp:#}");
    assert!(!listed(BOB).await.contains(&private));
    let path = format!("/api/sessions/{private}");
    let (status, body) = request(Some(CAROL), Method::DELETE, &path, None).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (404, &json!("NO_SUCH_SESSION"))
    );
    assert!(listed(ALICE).await.contains(&private));
    let (status, _) = request(Some(ALICE), Method::DELETE, &path, None).await;
    assert_eq!(status, 204);
    assert!(!listed(ALICE).await.contains(&private));
}

#[tokio::test]
async fn profiles_and_downloads_stay_in_their_tenants_folder() {
    let session = json!("files");
    ok_as(
        ALICE,
        "browser_navigate",
        json!({ "session": session, "target": page("cookies.html?set=login=alice") }),
    )
    .await;
    let saved = ok_as(
        ALICE,
        "browser_cookies",
        json!({ "session": session, "action": "export", "name": "shop" }),
    )
    .await;
    let data_dir = &service().app.config.data_dir;
    let alices = data_dir.join("tenants").join("alice");
    assert!(
        saved["saved"]
            .as_str()
            .unwrap()
            .starts_with(alices.to_str().unwrap()),
        "{saved:#}"
    );
    for other in [BOB, CAROL] {
        let (status, body) = call_as(
            other,
            "browser_cookies",
            json!({ "session": session, "action": "load", "name": "shop" }),
        )
        .await;
        assert_eq!(
            (status, &body["error"]["code"]),
            (404, &json!("NO_SUCH_PROFILE"))
        );
    }

    // A download lands in the tenant's folder, nowhere another tenant's session writes.
    ok_as(
        ALICE,
        "browser_navigate",
        json!({ "session": session, "target": page("links.html") }),
    )
    .await;
    let elements = ok_as(
        ALICE,
        "browser_read",
        json!({ "session": session, "mode": "elements" }),
    )
    .await;
    let link = common::ref_of(&common::content_lines(&elements), "Download report");
    ok_as(
        ALICE,
        "browser_interact",
        json!({ "session": session, "action": "click", "ref": link }),
    )
    .await;
    let file = alices.join("downloads").join("files").join("report.csv");
    common::eventually("the download to land", Duration::from_secs(20), || {
        let file = file.clone();
        async move { file.exists() }
    })
    .await;
    assert!(!data_dir.join("downloads").join("files").exists());
}

#[tokio::test]
async fn crawl_tasks_are_invisible_to_other_tenants() {
    let api = &service().api;
    let args = json!({ "urls": [page("article.html")], "mode": "http" });
    let created = ok_as(ALICE, "crawl_batch", args).await;
    let id = created["task_id"].as_str().unwrap().to_string();
    common::eventually("alice's crawl to finish", Duration::from_secs(30), || {
        let id = id.clone();
        async move {
            let status = ok_as(ALICE, "crawl_status", json!({ "task_id": id })).await;
            status["status"] == "completed"
        }
    })
    .await;
    let (status, body) = call_as(BOB, "crawl_status", json!({ "task_id": id })).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (404, &json!("NO_SUCH_TASK"))
    );
    for path in [
        format!("/api/crawler/tasks/{id}"),
        format!("/api/crawler/tasks/{id}/events"),
    ] {
        let (status, _) = request(Some(BOB), Method::GET, &path, None).await;
        assert_eq!(status, 404, "{path}");
        let (status, _) = request(Some(ALICE), Method::GET, &path, None).await;
        assert_eq!(status, 200, "{path}");
    }
    let list = |key: &'static str| async move {
        request(Some(key), Method::GET, "/api/crawler/tasks", None)
            .await
            .1
            .to_string()
    };
    assert!(list(ALICE).await.contains(&id));
    assert!(!list(BOB).await.contains(&id), "{api}");
}

/// Bob cannot cancel Alice's running crawl (it is as unknown to him as one that never was,
/// and it runs on); Alice can.
#[tokio::test]
async fn only_its_tenant_cancels_a_crawl() {
    let urls: Vec<String> = (0..3)
        .map(|n| page(&format!("crawl/slow/tenants-{n}")))
        .collect();
    let args = json!({ "urls": urls, "mode": "http", "parallel": 1 });
    let created = ok_as(ALICE, "crawl_batch", args).await;
    let id = created["task_id"].as_str().unwrap().to_string();
    let path = format!("/api/crawler/tasks/{id}");
    let (status, body) = request(Some(BOB), Method::DELETE, &path, None).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (404, &json!("NO_SUCH_TASK")),
        "{body:#}"
    );
    let running = ok_as(ALICE, "crawl_status", json!({ "task_id": id })).await;
    assert!(
        matches!(running["status"].as_str(), Some("pending" | "running")),
        "{running:#}"
    );
    let (status, body) = request(Some(ALICE), Method::DELETE, &path, None).await;
    assert_eq!(
        (status, &body["status"]),
        (200, &json!("cancelled")),
        "{body:#}"
    );
}

#[tokio::test]
async fn a_tenants_quota_and_rate_are_its_own() {
    ok_as(CAROL, "browser_tabs", json!({ "session": "one" })).await;
    let (status, body) = call_as(CAROL, "browser_tabs", json!({ "session": "two" })).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (429, &json!("LIMIT")),
        "{body:#}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("of yours")
    );

    // Carol's rate: 2 crawl_status calls a minute; bob's calls are not counted against it.
    let unknown = json!({ "task_id": "crawl-none" });
    for _ in 0..2 {
        let (status, _) = call_as(CAROL, "crawl_status", unknown.clone()).await;
        assert_eq!(status, 404);
    }
    let response = common::client()
        .post(format!("{}/api/tools/crawl_status", service().api))
        .bearer_auth(CAROL)
        .json(&unknown)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 429);
    let wait = common::retry_after(&response);
    assert!((1..=60).contains(&wait), "{wait}");
    for _ in 0..3 {
        let (status, _) = call_as(BOB, "crawl_status", unknown.clone()).await;
        assert_eq!(status, 404);
    }
}

#[tokio::test]
async fn a_tenants_domain_rules_narrow_the_operators() {
    // Browserless fetches resolve names with the system's resolver: `localhost` it knows.
    let local = named("localhost", "article.html");
    let (status, body) = call_as(ALICE, "open_web_page", json!({ "url": local })).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!("BLOCKED_URL"))
    );
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("tenant \"alice\"") && message.contains("\"localhost\""),
        "{message}"
    );
    ok_as(BOB, "open_web_page", json!({ "url": local })).await;
    let denied = named("shop.denied.localhost", "article.html");
    // The operator's rules hold for every tenant.
    let operators = named("x.operator-denied.localhost", "article.html");
    for key in [ALICE, BOB] {
        let (_, body) = call_as(key, "open_web_page", json!({ "url": operators })).await;
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("fetch.deny_domains"),
            "{body:#}"
        );
    }
    let (_, body) = call_as(
        ALICE,
        "browser_navigate",
        json!({ "session": "rules", "target": denied }),
    )
    .await;
    assert_eq!(body["error"]["code"], "BLOCKED_URL", "{body:#}");

    // A frame on a host alice's rules deny never reaches its server; bob's does.
    let trap = Trap::on("127.0.0.1:0");
    let port = trap.host_port().rsplit(':').next().unwrap().to_string();
    let frame = format!("http://ads.denied.localhost:{port}/");
    let framed = format!("framed.html?frame={frame}");
    let opened = ok_as(
        ALICE,
        "browser_navigate",
        json!({ "session": "rules", "target": page(&framed) }),
    )
    .await;
    let read = ok_as(
        ALICE,
        "browser_read",
        json!({ "session": "rules", "mode": "text" }),
    )
    .await;
    let reported = common::blocked_entries(&[&opened, &read]);
    assert!(
        reported.iter().any(|b| b["target"]
            .as_str()
            .unwrap()
            .starts_with("ads.denied.localhost:")),
        "{reported:#?}"
    );
    trap.untouched("alice's frame");
    let bobs = ok_as(
        BOB,
        "browser_navigate",
        json!({ "session": "rules", "target": page(&framed) }),
    )
    .await;
    assert!(bobs["blocked"].is_null(), "{bobs:#}");
    common::eventually(
        "bob's frame to connect",
        Duration::from_secs(20),
        || async { trap.touched() },
    )
    .await;
}

/// `webpilot keys add NAME` on `data_dir`, with `database` as `WEBPILOT_DATABASE_URL` if given.
fn keys_add(
    data_dir: &std::path::Path,
    name: &str,
    database: Option<&str>,
) -> std::process::Output {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_webpilot"));
    // Keys are made before a service off loopback can start (it needs them).
    command
        .args(["--bind", "0.0.0.0", "--data-dir"])
        .arg(data_dir)
        .args(["keys", "add", name])
        .env_remove("WEBPILOT_TOKEN")
        .env_remove("WEBPILOT_DATABASE_URL");
    if let Some(database) = database {
        command.env("WEBPILOT_DATABASE_URL", database);
    }
    command.output().unwrap()
}

/// `webpilot keys add` prints a key once and writes its hash; a service started on that data
/// dir lets the key in.
#[tokio::test]
async fn keys_add_writes_the_hash_and_the_key_opens_the_service() {
    let data_dir = tempfile::tempdir().unwrap();
    let add = |name: &str| keys_add(data_dir.path(), name, None);
    let added = add("dave");
    assert!(added.status.success(), "{added:?}");
    let key = String::from_utf8(added.stdout).unwrap().trim().to_string();
    let file = data_dir.path().join("keys.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains(&key_hash_hex(&key)), "{text}");
    assert!(!text.contains(&key), "the key itself was written: {text}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let again = add("dave");
    assert!(!again.status.success());
    assert!(add("Not A Name").status.code() != Some(0));

    let tmp = tempfile::tempdir().unwrap();
    let (mut child, api) = common::spawn_service(data_dir.path(), tmp.path());
    let sessions = |key: Option<String>| {
        let api = api.clone();
        async move {
            let mut request = common::client().get(format!("{api}/api/sessions"));
            if let Some(key) = key {
                request = request.bearer_auth(key);
            }
            request.send().await.unwrap().status().as_u16()
        }
    };
    assert_eq!(sessions(Some(key.clone())).await, 200);
    assert_eq!(sessions(None).await, 401);
    child.kill().unwrap();
    child.wait().unwrap();
}

/// With `--database-url`, `webpilot keys add` puts the hash in PostgreSQL, not in a file, and
/// two instances with data dirs of their own both let the key in (and refuse a wrong one); a key
/// added while they run opens them within seconds.
#[tokio::test]
async fn keys_added_to_postgresql_open_every_instance() {
    let database = common::postgres::database();
    let data_dir = tempfile::tempdir().unwrap();
    let add = |name: &str| keys_add(data_dir.path(), name, Some(&database));
    let added = add("erin");
    assert!(added.status.success(), "{added:?}");
    let key = String::from_utf8(added.stdout).unwrap().trim().to_string();
    assert!(!data_dir.path().join("keys.toml").exists());
    assert!(!add("erin").status.success(), "one key per tenant");

    let env = [("WEBPILOT_DATABASE_URL", database.as_str())];
    let mut instances = Vec::new();
    for _ in 0..2 {
        let (data, tmp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (child, api) = common::spawn_service_with(data.path(), tmp.path(), &env);
        instances.push((child, api, data, tmp));
    }
    let status = |api: &str, key: &str| {
        let request = common::client()
            .get(format!("{api}/api/sessions"))
            .bearer_auth(key)
            .send();
        async move { request.await.unwrap().status().as_u16() }
    };
    for (_, api, _, _) in &instances {
        assert_eq!(status(api, &key).await, 200, "{api}");
        assert_eq!(status(api, "not-erins-key-at-all").await, 401, "{api}");
    }
    // A key added while they run opens them too, without a restart.
    let added = add("frank");
    assert!(added.status.success(), "{added:?}");
    let frank = String::from_utf8(added.stdout).unwrap().trim().to_string();
    for (_, api, _, _) in &instances {
        common::eventually(
            "frank's key opens the instance",
            Duration::from_secs(10),
            || {
                let (api, frank) = (api.clone(), frank.clone());
                async move { status(&api, &frank).await == 200 }
            },
        )
        .await;
    }
    for (mut child, ..) in instances {
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

/// One tool call over streamable HTTP MCP with `key`; the call's `structuredContent`.
async fn mcp_call(key: &str, tool: &str, arguments: Value) -> Value {
    mcp_result(key, tool, arguments).await["structuredContent"].clone()
}

/// One tool call over streamable HTTP MCP with `key`, as raw JSON-RPC; the call's result.
async fn mcp_result(key: &str, tool: &str, arguments: Value) -> Value {
    let params = json!({"name": tool, "arguments": arguments});
    let message = common::mcp_request(&service().api, Some(key), "tools/call", params).await;
    message["result"].clone()
}

#[tokio::test]
async fn an_mcp_connection_works_for_its_keys_tenant() {
    let args = json!({ "urls": [page("article.html")], "mode": "http" });
    let started = mcp_call(ALICE, "crawl_batch", args).await;
    let id = started["task_id"].as_str().expect("a task id").to_string();
    let status = json!({ "task_id": id });
    ok_as(ALICE, "crawl_status", status.clone()).await;
    let (code, _) = call_as(BOB, "crawl_status", status).await;
    assert_eq!(code, 404);
}

/// Renders start in browser contexts made ahead, one tenant's never handed to another: Bob's
/// renders leave warm contexts behind, yet Alice's render of a page embedding a site her keys
/// deny (`localhost`) still has that frame refused — her context's lane is under her rules.
#[tokio::test]
async fn warm_render_contexts_stay_with_their_tenant() {
    let page = service().page("policy-frames.html");
    for _ in 0..2 {
        let bob = ok_as(
            BOB,
            "open_web_page",
            json!({ "url": page, "mode": "browser" }),
        )
        .await;
        assert_eq!(bob["via"], "browser", "{bob:#}");
        assert!(bob.get("blocked").is_none(), "{bob:#}");
    }
    let app = service().app.clone();
    common::eventually(
        "a warm context waits for Bob's next render",
        Duration::from_secs(10),
        || {
            let app = app.clone();
            async move { app.browser.warm_sessions() > 0 }
        },
    )
    .await;
    let alice = ok_as(
        ALICE,
        "open_web_page",
        json!({ "url": page, "mode": "browser" }),
    )
    .await;
    let refused: Vec<&str> = alice["blocked"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["target"].as_str())
        .collect();
    assert!(
        refused.iter().any(|t| t.starts_with("localhost:")),
        "Alice's render reached a site her keys deny: {alice:#}"
    );
}

#[tokio::test]
async fn a_tenant_reads_pages_into_data_with_its_own_model() {
    let page = "<!doctype html><title>Kettle</title><main><h1>Steel kettle</h1>\
        <p>Price: €1,299.00</p></main>";
    let url = common::serve_document_at(
        &service().fixtures,
        "tenant-kettle.html",
        page.as_bytes().to_vec(),
        "text/html",
    )
    .await;
    let schema = json!({"type": "object", "required": ["name", "price"], "properties": {
        "name": {"type": "string"}, "price": {"type": "number"}, "currency": {"type": "string"}}});
    let args = json!({"url": url, "mode": "http", "schema": schema});
    let (status, bob) = call_as(BOB, "open_web_page", args.clone()).await;
    assert_eq!(status, 200, "{bob:#}");
    assert_eq!(bob["data_source"], "model", "{bob:#}");
    assert_eq!(bob["data"]["name"], "Steel kettle");
    // The model server saw Bob's key to it.
    let requests = common::web_fixtures::EXTRACTIONS.lock().unwrap().clone();
    let bobs = requests
        .iter()
        .find(|r| r.to_string().contains("tenant-kettle"))
        .expect("the model was asked");
    assert_eq!(bobs["authorization"], format!("Bearer {BOB_MODEL_KEY}"));
    // Alice has no model of her own and the operator none: she is told how to get one.
    let (status, alice) = call_as(ALICE, "open_web_page", args).await;
    assert_eq!(status, 200, "{alice:#}");
    assert_ne!(alice["data_source"], "model", "{alice:#}");
    assert_eq!(alice["valid"], false, "{alice:#}");
    let asked = common::web_fixtures::EXTRACTIONS.lock().unwrap().clone();
    let kettles = asked
        .iter()
        .filter(|r| r.to_string().contains("tenant-kettle"))
        .count();
    assert_eq!(
        kettles,
        requests
            .iter()
            .filter(|r| r.to_string().contains("tenant-kettle"))
            .count()
    );
}

#[tokio::test]
async fn mcp_resources_are_the_tenants_own() {
    // Alice saves a screenshot and a download; their URIs are hers alone.
    let session = "alice-resources";
    ok_as(
        ALICE,
        "browser_navigate",
        json!({"session": session, "target": page("links.html")}),
    )
    .await;
    ok_as(
        ALICE,
        "browser_screenshot",
        json!({"session": session, "save": "alices-view"}),
    )
    .await;
    let mine = "webpilot://screenshots/alices-view.png";
    let read = common::mcp_request(
        &service().api,
        Some(ALICE),
        "resources/read",
        json!({"uri": mine}),
    )
    .await;
    assert_eq!(
        read["result"]["contents"][0]["mimeType"], "image/png",
        "{read:#}"
    );
    let theirs = common::mcp_request(
        &service().api,
        Some(BOB),
        "resources/read",
        json!({"uri": mine}),
    )
    .await;
    assert_eq!(
        theirs["error"]["code"], -32002,
        "not found for Bob: {theirs:#}"
    );
    let listed = common::mcp_request(&service().api, Some(BOB), "resources/list", json!({})).await;
    assert!(!listed.to_string().contains("alices-view"), "{listed:#}");
}
