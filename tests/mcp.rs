//! The MCP front, driven by the official MCP Python SDK over stdio and streamable HTTP.

mod common;

use std::path::PathBuf;

use common::python::python;
use common::{client, get_json, harness};
use serde_json::{Value, json};

/// Runs tests/mcp_client.py against the shared service's pages and returns its report.
async fn drive(transport: &str, target: &str) -> Value {
    drive_on(transport, target, &harness().page("spa.html")).await
}

/// Runs tests/mcp_client.py with `spa` as its page and returns its report.
async fn drive_on(transport: &str, target: &str, spa: &str) -> Value {
    let data = tempfile::tempdir().unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py");
    let output = tokio::process::Command::new(python())
        .arg(script)
        .args([transport, target, spa])
        .env("WEBPILOT_DATA_DIR", data.path())
        .env("WEBPILOT_FETCH_ALLOW", "127.0.0.1")
        .env("TMPDIR", data.path())
        .output()
        .await
        .expect("the MCP client runs");
    assert!(
        output.status.success(),
        "MCP client failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("a JSON report")
}

async fn rest_tools() -> Vec<Value> {
    let tools = get_json(&format!("{}/api/tools", harness().api)).await;
    tools.as_array().unwrap().clone()
}

/// Where a schema has a property whose schema is a bare `true` or `false`: valid JSON Schema,
/// but the TypeScript SDK's clients refuse the whole tool list over it.
fn boolean_properties(schema: &Value, path: &str, found: &mut Vec<String>) {
    let Some(object) = schema.as_object() else {
        return;
    };
    for (key, value) in object {
        match (key.as_str(), value) {
            ("properties", Value::Object(properties)) => {
                for (name, property) in properties {
                    let here = format!("{path}.{name}");
                    if property.is_boolean() {
                        found.push(here.clone());
                    }
                    boolean_properties(property, &here, found);
                }
            }
            (_, Value::Object(_)) => boolean_properties(value, &format!("{path}/{key}"), found),
            (_, Value::Array(items)) => {
                for item in items {
                    boolean_properties(item, &format!("{path}/{key}[]"), found);
                }
            }
            _ => {}
        }
    }
}

async fn check(report: &Value) {
    assert_eq!(report["server"], "webpilot");
    let mut boolean = Vec::new();
    for (name, tool) in report["tools"].as_object().unwrap() {
        boolean_properties(&tool["parameters"], &format!("{name} input"), &mut boolean);
        boolean_properties(
            &tool["output_schema"],
            &format!("{name} output"),
            &mut boolean,
        );
    }
    assert!(
        boolean.is_empty(),
        "property schemas that are booleans: {boolean:?}"
    );
    let tools = report["tools"].as_object().unwrap();
    let rest = rest_tools().await;
    assert_eq!(tools.len(), rest.len());
    for definition in &rest {
        let function = &definition["function"];
        let name = function["name"].as_str().unwrap();
        assert_eq!(tools[name]["parameters"], function["parameters"], "{name}");
        assert_eq!(
            tools[name]["description"], function["description"],
            "{name}"
        );
        // A title, and what the tool does to the world, for clients that confirm risky calls.
        let hints = &tools[name]["annotations"];
        assert!(
            tools[name]["title"].as_str().is_some_and(|t| !t.is_empty()),
            "{name}"
        );
        for hint in [
            "readOnlyHint",
            "destructiveHint",
            "idempotentHint",
            "openWorldHint",
        ] {
            assert!(hints[hint].is_boolean(), "{name}: {hint} in {hints}");
        }
        let reads = matches!(
            name,
            "browser_read" | "browser_screenshot" | "web_search" | "open_web_page" | "crawl_status"
        );
        assert_eq!(hints["readOnlyHint"], reads, "{name}");
        if name == "browser_interact" {
            assert_eq!(hints["destructiveHint"], true);
        }
        let output = &tools[name]["output_schema"];
        assert_eq!(output["type"], "object", "{name}: {output:#}");
        assert!(
            output["properties"]["elapsed_ms"].is_object(),
            "{name}: {output:#}"
        );
    }
    // Every successful call came with structured content matching its tool's outputSchema.
    let structured = report["structured"].as_array().unwrap();
    let checked: std::collections::HashSet<&str> = structured
        .iter()
        .map(|s| s["tool"].as_str().unwrap())
        .collect();
    for tool in [
        "browser_navigate",
        "browser_read",
        "browser_interact",
        "browser_screenshot",
        "browser_tabs",
        "browser_cookies",
        "open_web_page",
        "crawl_batch",
        "crawl_status",
    ] {
        assert!(checked.contains(tool), "{tool} not checked: {report:#}");
    }
    for call in structured {
        assert_eq!(call["problems"], serde_json::json!([]), "{call:#}");
    }
    assert_eq!(report["navigate_error"], false, "{report:#}");
    assert_eq!(report["click_error"], false, "{report:#}");
    assert_eq!(report["cart_after_click"], true, "{report:#}");
    assert_eq!(report["image_mime"], "image/png");
    assert_eq!(report["image_is_png"], true);
    assert!(
        report["screenshot_text"]["legend"].is_array() || report["screenshot_text"].is_object()
    );
    let paging = &report["paging"];
    assert_eq!(paging["truncated"], true, "{paging:#}");
    assert!(paging["cursor"].is_string(), "{paging:#}");
    let last_of_first = paging["first"].as_array().unwrap().last().unwrap().as_u64();
    let first_of_second = paging["second"][0].as_u64();
    assert_eq!(
        first_of_second,
        last_of_first.map(|r| r + 1),
        "the next slice continues the list: {paging:#}"
    );
    assert_eq!(report["bad_error"], true);
    assert_eq!(
        report["bad"]["error"]["code"], "INVALID_ARGUMENT",
        "{report:#}"
    );
    assert_eq!(
        report["after_bad_error"], false,
        "the connection stays usable"
    );
    assert!(
        report["session"].as_str().unwrap().starts_with("mcp-"),
        "{report:#}"
    );
    assert_eq!(
        report["explicit_session"], "shared-on-purpose",
        "a session argument still selects the session"
    );
    // crawl_status with `wait` returns once the task ended, its progress told on the way.
    let waited = &report["crawl_waited"];
    assert_eq!(waited["status"], "completed", "{waited:#}");
    assert_eq!(waited["progress"], 6, "{waited:#}");
    let notes = report["crawl_progress"].as_array().unwrap();
    assert!(!notes.is_empty(), "no progress notifications: {report:#}");
    let counts: Vec<f64> = notes
        .iter()
        .map(|n| n["progress"].as_f64().unwrap())
        .collect();
    assert!(counts.windows(2).all(|w| w[0] < w[1]), "{counts:?}");
    assert!(notes.iter().all(|n| n["total"] == 6.0), "{notes:#?}");
    assert!(
        notes
            .iter()
            .all(|n| n["message"].as_str().unwrap().contains(" of 6 URLs: http")),
        "{notes:#?}"
    );
    // The hand-off's wait is reported (every 5 s, from its start) with the link in the message.
    let handoff = &report["handoff"];
    assert_eq!(handoff["handed_back"], "timeout", "{report:#}");
    let link = handoff["live_url"].as_str().unwrap();
    assert!(
        link.starts_with("http://127.0.0.1:") && link.contains("/live/mcp-"),
        "{link}"
    );
    let progress = report["handoff_progress"].as_array().unwrap();
    assert!(progress.len() >= 2, "{progress:#?}");
    for note in progress {
        let message = note["message"].as_str().unwrap();
        assert!(
            message.contains("Approve the login") && message.contains(link),
            "{message}"
        );
    }
    assert!(progress[1]["progress"].as_f64() > progress[0]["progress"].as_f64());
    check_prompts_logging_and_cancellation(report);
}

/// completion/complete offers the tenant's saved profiles and this connection's sessions, by
/// what was typed, and nothing for free text.
fn check_completions(report: &Value) {
    assert_eq!(report["profile_exported"], true, "{report:#}");
    assert_eq!(
        report["complete_profile"],
        json!(["shop-login"]),
        "{report:#}"
    );
    assert_eq!(report["complete_profile_unknown"], json!([]), "{report:#}");
    // The connection's own session and the one it named.
    let mut sessions: Vec<&str> = report["complete_session"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    sessions.sort_unstable();
    assert_eq!(sessions.len(), 2, "{report:#}");
    assert!(sessions[0].starts_with("mcp-"), "{report:#}");
    assert_eq!(sessions[1], "shared-on-purpose", "{report:#}");
    assert_eq!(
        report["complete_session_typed"],
        json!(["shared-on-purpose"]),
        "{report:#}"
    );
    assert_eq!(report["complete_url"], json!([]), "{report:#}");
}

fn check_prompts_logging_and_cancellation(report: &Value) {
    // Every tool's guide and the workflows, rendered with their arguments.
    let prompts: Vec<&str> = report["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    for name in [
        "browser_read_guide",
        "crawl_batch_guide",
        "read_javascript_app",
        "log_in_once",
        "check_page_errors",
    ] {
        assert!(prompts.contains(&name), "{name} missing: {prompts:?}");
    }
    let text = report["prompt_text"].as_str().unwrap();
    assert!(
        text.contains("spa.html with browser_navigate") && !text.contains("{url}"),
        "{text}"
    );
    let missing = report["prompt_missing_argument"].as_str().unwrap();
    assert!(
        missing.contains("profile"),
        "a missing argument is refused: {missing}"
    );
    check_completions(report);
    // At info: the readiness decision and the end, not the debug start line.
    let info = report["log_at_info"].as_array().unwrap();
    let events: Vec<(&str, &str)> = info
        .iter()
        .map(|l| {
            (
                l["level"].as_str().unwrap(),
                l["data"]["event"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        events,
        vec![("info", "ready"), ("info", "done")],
        "{info:#?}"
    );
    assert_eq!(info[0]["data"]["tool"], "browser_navigate");
    // At error: the failed calls only, not the one between them that worked.
    let errors = report["log_at_error"].as_array().unwrap();
    assert_eq!(errors.len(), 2, "{errors:#?}");
    for line in errors {
        assert_eq!(line["level"], "error");
        assert_eq!(line["data"]["event"], "failed");
        assert_eq!(line["data"]["error"]["code"], "INVALID_ARGUMENT");
    }
    // A cancelled navigation ends at once (its failed line says so), and the session goes on
    // without waiting for the page that never answers.
    let cancelled = &report["cancelled"];
    let line = &cancelled["log"][0]["data"];
    assert_eq!(line["event"], "failed", "{cancelled:#}");
    let message = line["error"]["message"].as_str().unwrap();
    assert!(message.contains("cancelled"), "{cancelled:#}");
    let ended = cancelled["ended_after_ms"].as_i64().unwrap();
    // At once, not at its 30 s limit (a loaded machine still answers within seconds).
    assert!(
        ended <= 5_000,
        "the cancelled call ended {ended} ms after the notification"
    );
    assert_eq!(cancelled["next_call_error"], false, "{cancelled:#}");
    assert!(cancelled["next_title"].is_string(), "{cancelled:#}");
    let next = cancelled["next_call_ms"].as_i64().unwrap();
    assert!(
        next < 15_000,
        "the next call waited {next} ms for the cancelled one"
    );
}

/// Saved files as resources: linked from the results that saved them, listed, read byte for
/// byte; a crawl task read as JSON and updated while a subscriber watches.
fn check_resources(report: &Value) {
    let r = &report["resources"];
    let link = r["download_link"]
        .as_str()
        .expect("a resource_link to the download");
    assert!(
        link.starts_with("webpilot://downloads/mcp-") && link.ends_with("/pattern.bin"),
        "{r:#}"
    );
    assert_eq!(r["download_link_mime"], "application/octet-stream");
    assert_eq!(r["download_sha_matches"], true, "{r:#}");
    let shot = r["screenshot_link"]
        .as_str()
        .expect("a link to the saved screenshot");
    assert_eq!(shot, "webpilot://screenshots/mcp-shot.png");
    let listed: Vec<&str> = r["listed"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        listed.contains(&link) && listed.contains(&shot),
        "{listed:?}"
    );
    assert!(
        listed
            .iter()
            .any(|uri| uri.starts_with("webpilot://crawls/")),
        "{listed:?}"
    );
    assert_eq!(
        r["templates"],
        serde_json::json!([
            "webpilot://crawls/{task_id}",
            "webpilot://downloads/{session}/{file}",
            "webpilot://screenshots/{file}",
            "webpilot://traces/{session}"
        ])
    );
    assert!(
        r["missing_read"].as_str().unwrap().contains("no resource"),
        "{r:#}"
    );
    assert!(r["crawl_updates"].as_u64().unwrap() >= 1, "{r:#}");
    assert_eq!(r["crawl_resource"]["status"], "completed", "{r:#}");
    assert_eq!(r["crawl_resource"]["results"].as_array().unwrap().len(), 4);
}

/// crawl_batch as a 2025-11-25 task: advertised, created, polled, its result fetched with the
/// related-task mark, listed; cancelled while it runs, after which the site is asked for no
/// more of its pages; unknown tasks and tools without task support are protocol errors.
fn check_tasks(report: &Value) {
    assert_eq!(
        report["tasks_capability"],
        serde_json::json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
        "{report:#}"
    );
    let tools = report["tools"].as_object().unwrap();
    assert_eq!(
        tools["crawl_batch"]["execution"],
        serde_json::json!({"taskSupport": "optional"})
    );
    assert_eq!(tools["browser_navigate"]["execution"], Value::Null);
    let t = &report["tasks"];
    let created = &t["created"];
    assert!(
        matches!(created["status"].as_str(), Some("working" | "completed")),
        "{t:#}"
    );
    assert!(
        created["createdAt"].as_str().unwrap().ends_with('Z'),
        "{t:#}"
    );
    assert!(created["pollInterval"].as_u64().unwrap() > 0, "{t:#}");
    let polled = t["polled"].as_array().unwrap();
    assert_eq!(polled.last().unwrap(), "completed", "{t:#}");
    assert_eq!(t["result_error"], false, "{t:#}");
    assert_eq!(t["result"]["status"], "completed", "{t:#}");
    assert_eq!(t["result"]["results"].as_array().unwrap().len(), 3, "{t:#}");
    let task_id = created["taskId"].as_str().unwrap();
    assert_eq!(t["result"]["task_id"], task_id);
    assert_eq!(
        t["result_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task_id
    );
    assert!(
        t["listed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|id| id == task_id),
        "{t:#}"
    );
    assert_eq!(t["slow_status"], "working", "{t:#}");
    assert_eq!(t["cancelled"], "cancelled", "{t:#}");
    assert_eq!(t["after_cancel"], "cancelled", "{t:#}");
    assert!(
        t["cancel_again"]
            .as_str()
            .unwrap()
            .contains("already cancelled"),
        "{t:#}"
    );
    assert!(
        t["unknown_task"]
            .as_str()
            .unwrap()
            .contains("no crawl task"),
        "{t:#}"
    );
    assert!(
        t["not_a_task_tool"]
            .as_str()
            .unwrap()
            .contains("browser_tabs"),
        "{t:#}"
    );
    let slow = &t["slow_report"];
    assert_eq!(slow["status"], "cancelled", "{slow:#}");
    assert_eq!(slow["progress"], slow["total"], "{slow:#}");
    let cancelled = slow["skipped"].as_array().unwrap();
    assert!(cancelled.len() >= 4, "{slow:#}");
    assert!(
        cancelled.iter().all(|s| s["reason"] == "cancelled"),
        "{slow:#}"
    );
    // The server saw at most the page being read when the task was cancelled (none if the
    // cancel came first), perhaps a second that had started, and nothing after.
    let token = t["slow_token"].as_str().unwrap();
    let asked = common::web_fixtures::SLOW_ASKED.lock().unwrap().clone();
    let fetched = asked.iter().filter(|name| name.starts_with(token)).count();
    assert!(fetched <= 2, "{asked:?}");
}

/// A hand-off to a client that opens links: the live view by URL elicitation, Done pressed by
/// the person it opened the link for, the completion for the same id; a decline ends the next.
fn check_url_elicitation(report: &Value) {
    let elicited = report["elicited"].as_array().unwrap();
    assert_eq!(elicited.len(), 2, "{report:#}");
    assert_eq!(elicited[0]["mode"], "url");
    assert_eq!(elicited[0]["message"], "Sign in for me");
    let accepted = &report["accepted"];
    assert_eq!(accepted["handed_back"], "person", "{report:#}");
    assert_eq!(report["person"], "pressed", "{report:#}");
    assert_eq!(elicited[0]["url"], accepted["live_url"], "{report:#}");
    let first = elicited[0]["id"].as_str().unwrap();
    let completed = report["completed"].as_array().unwrap();
    assert_eq!(completed[0], first, "{report:#}");
    assert_ne!(elicited[1]["id"], elicited[0]["id"]);
    assert_eq!(report["declined"]["handed_back"], "declined", "{report:#}");
    assert!(
        report["declined_ms"].as_u64().unwrap() < 10_000,
        "a decline ends the hand-off at once: {report:#}"
    );
    assert_eq!(completed.len(), 2, "{report:#}");
}

#[tokio::test]
async fn stdio_serves_the_same_tools() {
    let report = drive("stdio", env!("CARGO_BIN_EXE_webpilot")).await;
    check(&report).await;
    check_resources(&report);
    check_tasks(&report);
}

#[tokio::test]
async fn streamable_http_serves_the_same_tools_and_isolates_clients() {
    let endpoint = format!("{}/mcp", harness().api);
    let (first, second) = tokio::join!(drive("http", &endpoint), drive("http", &endpoint));
    check(&first).await;
    check(&second).await;
    check_resources(&first);
    check_tasks(&first);
    check_tasks(&second);
    check_url_elicitation(&first["url_elicitation"]);
    assert_ne!(
        first["session"], second["session"],
        "each connection has its own session"
    );
}

/// The status of an MCP `initialize` sent with extra headers.
async fn initialize_with(headers: &[(&str, &str)]) -> u16 {
    let mut request = client()
        .post(format!("{}/mcp", harness().api))
        .header("accept", "application/json, text/event-stream")
        .json(&serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap().status().as_u16()
}

#[tokio::test]
async fn foreign_hosts_and_origins_are_refused() {
    assert_eq!(initialize_with(&[("host", "attacker.example")]).await, 403);
    assert_eq!(
        initialize_with(&[("origin", "https://attacker.example")]).await,
        403,
        "a cross-site page"
    );
    assert_eq!(
        initialize_with(&[("origin", "http://localhost:3000")]).await,
        200,
        "a local page"
    );
    assert_eq!(initialize_with(&[]).await, 200, "a client without Origin");
}

#[tokio::test]
async fn the_official_conformance_suite_passes_all_it_can_run_against_a_browser_service() {
    let endpoint = format!("{}/mcp", harness().api);
    let baseline = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_conformance.yaml");
    let results = tempfile::tempdir().unwrap();
    let mut command = common::node::conformance_command();
    command
        .args(["server", "--url", &endpoint, "--expected-failures"])
        .arg(&baseline)
        .arg("--output-dir")
        .arg(results.path());
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .expect("the conformance suite runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("Baseline check passed"), "{stdout}");
}

/// A confirmation the operator's rules require, asked of a client that opens links: the link
/// goes by URL elicitation, the person allows it in a browser of their own, the held download
/// runs and the server serves it; the completion names the elicitation; a decline ends the
/// next call's wait at once.
#[tokio::test]
async fn a_confirmation_goes_to_the_user_by_url_elicitation() {
    let mut config = common::loopback_config();
    config.actions.confirm = vec!["download".into()];
    let ruled = common::start(config);
    let endpoint = format!("{}/mcp", ruled.api);
    let report = drive_on("confirm-http", &endpoint, &ruled.page("spa.html")).await;
    let elicited = report["elicited"].as_array().unwrap();
    assert_eq!(elicited.len(), 2, "{report:#}");
    assert_eq!(elicited[0]["mode"], "url");
    let url = elicited[0]["url"].as_str().unwrap();
    assert!(url.contains("/live/") && url.contains("confirm="), "{url}");
    assert!(
        elicited[0]["message"]
            .as_str()
            .unwrap()
            .starts_with("Allow? "),
        "{report:#}"
    );
    assert!(
        report["person_allowed"]
            .as_str()
            .is_some_and(|line| line.contains("Allow")),
        "{report:#}"
    );
    assert_eq!(report["allowed_error"], false, "{report:#}");
    assert_eq!(report["allowed"]["download"]["bytes"], 1234, "{report:#}");
    assert_eq!(report["declined_error"], true, "{report:#}");
    let error = &report["declined"]["error"];
    assert_eq!(error["code"], "NEEDS_CONFIRMATION", "{report:#}");
    assert!(
        error["message"].as_str().unwrap().contains("declined"),
        "{report:#}"
    );
    assert!(
        report["declined_ms"].as_u64().unwrap() < 5_000,
        "{report:#}"
    );
    let completed = report["completed"].as_array().unwrap();
    let ids: Vec<&Value> = elicited.iter().map(|e| &e["id"]).collect();
    assert_eq!(completed.iter().collect::<Vec<_>>(), ids, "{report:#}");
}
