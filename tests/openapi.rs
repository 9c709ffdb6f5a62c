//! The OpenAPI description at `/api/openapi.json`: it covers every route and tool, and
//! schemathesis, generating requests from it against the running service, finds no 5xx and no
//! response that contradicts it.

mod common;

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use common::python::python;
use common::web_fixtures::config;
use common::{Harness, crawl_until_finished, get_json, ok_at, start_with};
use serde_json::{Value, json};
use webpilot::tools::STANDARD_FORMATS;

fn service() -> &'static Harness {
    static SERVICE: OnceLock<Harness> = OnceLock::new();
    SERVICE.get_or_init(|| start_with(config))
}

#[tokio::test]
async fn describes_every_route_and_every_tool_with_its_argument_schema() {
    let description = get_json(&format!("{}/api/openapi.json", service().api)).await;
    assert_eq!(description["openapi"], "3.1.0");
    let paths = description["paths"].as_object().unwrap();
    for (path, method) in [
        ("/healthz", "get"),
        ("/api/tools", "get"),
        ("/api/tools/prompt", "get"),
        ("/api/openapi.json", "get"),
        ("/metrics", "get"),
        ("/api/chat", "post"),
        ("/api/crawler/tasks", "post"),
        ("/api/crawler/tasks", "get"),
        ("/api/crawler/tasks/{id}", "get"),
        ("/api/crawler/tasks/{id}/events", "get"),
    ] {
        assert!(paths[path][method].is_object(), "{method} {path} missing");
    }
    let tools = get_json(&format!("{}/api/tools", service().api)).await;
    let tools = tools.as_array().unwrap();
    let schemas = &description["components"]["schemas"];
    for tool in tools {
        let name = tool["function"]["name"].as_str().unwrap();
        let operation = &paths[&format!("/api/tools/{name}")]["post"];
        assert_eq!(operation["operationId"], name);
        let reference = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            .as_str()
            .unwrap();
        let arguments = &schemas[reference.trim_start_matches("#/components/schemas/")];
        let described: Vec<&String> = arguments["properties"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        let listed: Vec<&String> = tool["function"]["parameters"]["properties"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(
            described, listed,
            "{name}: the same arguments as GET /api/tools"
        );
        assert_eq!(
            arguments["required"], tool["function"]["parameters"]["required"],
            "{name}"
        );
        let responses = operation["responses"].as_object().unwrap();
        for status in ["200", "400", "404", "502", "504"] {
            assert!(
                responses.contains_key(status),
                "{name}: {status} undocumented"
            );
        }
    }
    let screenshot = &paths["/api/tools/browser_screenshot"]["post"]["responses"]["200"]["content"];
    assert!(screenshot["image/png"].is_object(), "{screenshot:#}");
    assert_eq!(
        schemas["ErrorBody"]["properties"]["error"]["$ref"],
        "#/components/schemas/ToolError"
    );
}

/// Every `format` string in `value`, wherever it is.
fn formats(value: &Value, found: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(format)) = map.get("format") {
                found.push(format.clone());
            }
            map.values().for_each(|child| formats(child, found));
        }
        Value::Array(items) => items.iter().for_each(|child| formats(child, found)),
        _ => {}
    }
}

/// Asserts `schema` is a valid 2020-12 schema naming only the formats that draft defines.
fn standard(what: &str, schema: &Value) {
    if let Err(error) = jsonschema::draft202012::meta::validate(schema) {
        panic!("{what}: not a valid JSON Schema 2020-12: {error}\n{schema:#}");
    }
    let mut found = Vec::new();
    formats(schema, &mut found);
    found.retain(|format| !STANDARD_FORMATS.contains(&format.as_str()));
    assert!(found.is_empty(), "{what}: non-standard formats {found:?}");
}

/// The tools as MCP's `tools/list` describes them, over streamable HTTP.
async fn mcp_tools(api: &str) -> Vec<Value> {
    let message = common::mcp_request(api, None, "tools/list", json!({})).await;
    message["result"]["tools"]
        .as_array()
        .expect("tools")
        .clone()
}

/// Every schema published (REST tool list, API description, MCP `tools/list`) is valid JSON
/// Schema 2020-12 and names no format outside that draft.
#[tokio::test]
async fn every_published_schema_uses_only_json_schema_2020_12() {
    let api = service().api.as_str();
    let tools = get_json(&format!("{api}/api/tools")).await;
    for tool in tools.as_array().unwrap() {
        let name = tool["function"]["name"].as_str().unwrap();
        standard(
            &format!("GET /api/tools {name}"),
            &tool["function"]["parameters"],
        );
    }
    let description = get_json(&format!("{api}/api/openapi.json")).await;
    for (name, schema) in description["components"]["schemas"].as_object().unwrap() {
        standard(&format!("component {name}"), schema);
    }
    let mut found = Vec::new();
    formats(&description, &mut found);
    found.retain(|format| !STANDARD_FORMATS.contains(&format.as_str()));
    assert!(found.is_empty(), "the API description: {found:?}");
    let listed = mcp_tools(api).await;
    assert_eq!(listed.len(), tools.as_array().unwrap().len());
    for tool in &listed {
        let name = tool["name"].as_str().unwrap();
        standard(&format!("MCP {name} inputSchema"), &tool["inputSchema"]);
        standard(&format!("MCP {name} outputSchema"), &tool["outputSchema"]);
    }
}

/// Every tool, called for real with typical arguments, returns what its published result
/// schema describes (`ok_at` validates each result against `/api/openapi.json`).
#[tokio::test]
async fn every_tool_result_matches_its_published_result_schema() {
    let api = service().api.as_str();
    let page = |name: &str| format!("{}/{name}", service().fixtures);
    let s = "schema-walk";
    let calls: Vec<(&str, Value)> = vec![
        (
            "browser_navigate",
            json!({ "session": s, "target": page("spa.html") }),
        ),
        ("browser_read", json!({ "session": s })),
        (
            "browser_read",
            json!({ "session": s, "mode": "markdown", "max_tokens": 50 }),
        ),
        (
            "browser_read",
            json!({ "session": s, "mode": "find", "query": "cart" }),
        ),
        (
            "browser_read",
            json!({ "session": s, "mode": "extract", "query": "cart" }),
        ),
        (
            "browser_interact",
            json!({ "session": s, "action": "scroll" }),
        ),
        (
            "browser_interact",
            json!({ "session": s, "action": "evaluate", "script": "[1, 'a']" }),
        ),
        (
            "browser_interact",
            json!({ "session": s, "action": "wait", "seconds": 0.1 }),
        ),
        (
            "browser_interact",
            json!({ "session": s, "action": "dialog", "accept": false }),
        ),
        (
            "browser_screenshot",
            json!({ "session": s, "annotate": true }),
        ),
        (
            "browser_tabs",
            json!({ "session": s, "action": "new", "url": page("article.html") }),
        ),
        ("browser_tabs", json!({ "session": s })),
        (
            "browser_cookies",
            json!({ "session": s, "action": "export", "name": "walk" }),
        ),
        (
            "browser_cookies",
            json!({ "session": s, "action": "load", "name": "walk" }),
        ),
        ("browser_cookies", json!({ "session": s, "action": "list" })),
        (
            "browser_cookies",
            json!({ "session": s, "action": "ensure_login",
            "check": { "url": page("article.html"), "not_text": "Sign in to continue" } }),
        ),
        (
            "browser_cookies",
            json!({ "session": s, "action": "clear" }),
        ),
        (
            "browser_cookies",
            json!({ "action": "import", "name": "walk-import",
            "content": "[{\"name\": \"a\", \"value\": \"b\", \"domain\": \"example.com\"}]" }),
        ),
        (
            "web_search",
            json!({ "query": "graph database", "backend": "duckduckgo" }),
        ),
        (
            "open_web_page",
            json!({ "url": page("article.html"), "extract": "structured" }),
        ),
        (
            "open_web_page",
            json!({ "url": page("article.html"), "max_tokens": 20 }),
        ),
    ];
    let mut called: Vec<&str> = Vec::new();
    for (tool, args) in calls {
        ok_at(api, tool, args).await;
        called.push(tool);
    }
    let urls = [page("article.html"), page("missing-page.html")];
    let args = json!({ "urls": urls, "max_tokens": 50 });
    let id = crawl_until_finished(api, args, Duration::from_secs(60)).await;
    let status = ok_at(api, "crawl_status", json!({ "task_id": id })).await;
    assert_eq!(status["results"].as_array().unwrap().len(), 1, "{status:#}");
    assert_eq!(status["errors"].as_array().unwrap().len(), 1, "{status:#}");
    called.extend(["crawl_batch", "crawl_status"]);
    let tools = get_json(&format!("{api}/api/tools")).await;
    for tool in tools.as_array().unwrap() {
        let name = tool["function"]["name"].as_str().unwrap();
        assert!(called.contains(&name), "{name} was not called");
    }
}

/// Bounded: a fixed seed, a few examples per operation and the phases that need no state.
#[tokio::test]
async fn schemathesis_finds_no_server_error_and_no_response_off_the_description() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let reports = tempfile::tempdir().unwrap();
    let schemathesis = python().with_file_name("schemathesis");
    let output = tokio::process::Command::new(schemathesis)
        .arg("run")
        .arg(format!("{}/api/openapi.json", service().api))
        .args([
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,\
             response_schema_conformance,negative_data_rejection",
            "--phases",
            "examples,coverage,fuzzing",
            "--max-examples",
            "6",
            "--seed",
            "20261130",
            "--workers",
            "1",
            "--request-timeout",
            "60",
            "--generation-database",
            "none",
            "--no-color",
            "--report-dir",
        ])
        .arg(reports.path())
        .env("SCHEMATHESIS_HOOKS", "schemathesis_hooks")
        .env("PYTHONPATH", root.join("tests"))
        .env("WEBPILOT_FIXTURES", &service().fixtures)
        .current_dir(reports.path())
        .output()
        .await
        .expect("schemathesis runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "schemathesis found problems:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let (generated, passed) = case_counts(&stdout);
    assert!(generated >= 500, "too few cases to mean much:\n{stdout}");
    assert_eq!(generated, passed, "{stdout}");
}

/// `(generated, passed)` from the summary line "N generated, M passed".
fn case_counts(summary: &str) -> (usize, usize) {
    let line = summary
        .lines()
        .find(|l| l.contains(" generated, "))
        .unwrap_or_else(|| panic!("no case counts in:\n{summary}"));
    let numbers: Vec<usize> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect();
    (numbers[0], numbers[1])
}
