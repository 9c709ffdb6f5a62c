//! The agent loop against a scripted OpenAI-compatible server speaking real SSE (tool-call
//! deltas split across chunks, two calls in one turn), with the real tools behind it.

mod common;

use std::sync::OnceLock;
use std::time::Duration;

use common::web_fixtures::{MODEL_CALLS, SLOW_STREAM_DROPPED, config};
use common::{Harness, client, eventually, start_with};
use serde_json::{Value, json};

fn service() -> &'static Harness {
    static SERVICE: OnceLock<Harness> = OnceLock::new();
    SERVICE.get_or_init(|| start_with(config))
}

/// Posts a chat and returns the SSE events as (name, data).
async fn chat_events(body: Value) -> Vec<(String, Value)> {
    let response = client()
        .post(format!("{}/api/chat", service().api))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    parse_sse(&response.text().await.unwrap())
}

fn parse_sse(text: &str) -> Vec<(String, Value)> {
    text.split("\n\n")
        .filter_map(|block| {
            let mut name = None;
            let mut data = String::new();
            for line in block.lines() {
                if let Some(n) = line.strip_prefix("event:") {
                    name = Some(n.trim().to_string());
                } else if let Some(d) = line.strip_prefix("data:") {
                    data.push_str(d.trim_start());
                }
            }
            Some((name?, serde_json::from_str(&data).unwrap()))
        })
        .collect()
}

fn user(text: &str) -> Value {
    json!({"messages": [{"role": "user", "content": text}]})
}

fn names(events: &[(String, Value)]) -> Vec<&str> {
    events.iter().map(|(n, _)| n.as_str()).collect()
}

fn last<'a>(events: &'a [(String, Value)], name: &str) -> &'a Value {
    &events
        .iter()
        .rev()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no {name}: {events:#?}"))
        .1
}

#[tokio::test]
async fn a_conversation_searches_opens_and_answers() {
    let events = chat_events(user("search and open")).await;
    let sequence: Vec<&str> = names(&events).into_iter().fold(Vec::new(), |mut acc, n| {
        if acc.last() != Some(&n) {
            acc.push(n);
        }
        acc
    });
    assert_eq!(
        sequence,
        [
            "tool_call",
            "tool_started",
            "tool_result",
            "thinking",
            "message",
            "done"
        ],
        "{events:#?}"
    );
    let calls: Vec<&Value> = events
        .iter()
        .filter(|(n, _)| n == "tool_call")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["name"], "web_search");
    assert_eq!(calls[0]["arguments"]["query"], "graph database");
    assert_eq!(calls[1]["name"], "open_web_page");
    let summaries: Vec<&str> = events
        .iter()
        .filter(|(n, _)| n == "tool_result")
        .map(|(_, d)| d["summary"].as_str().unwrap())
        .collect();
    assert!(
        summaries.contains(&"web_search \"graph database\" → 3 results"),
        "{summaries:?}"
    );
    assert!(
        summaries
            .iter()
            .any(|s| s.starts_with("open_web_page \"http") && s.ends_with("chars")),
        "{summaries:?}"
    );
    let text: String = events
        .iter()
        .filter(|(n, _)| n == "message")
        .map(|(_, d)| d["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Night trains cost from 29 euros.");
    let done = last(&events, "done");
    assert_eq!(done["message"], "Night trains cost from 29 euros.");
    assert_eq!(done["iterations"], 2);
    assert_eq!(done["stopped"], "answered");
    assert_eq!(done["usage"]["total_tokens"], 220);
}

#[tokio::test]
async fn malformed_arguments_and_unknown_tools_go_back_to_the_model() {
    let events = chat_events(user("malformed")).await;
    let result = last(&events, "tool_result");
    assert_eq!(
        result["result"]["error"]["code"], "INVALID_ARGUMENT",
        "{events:#?}"
    );
    assert_eq!(last(&events, "done")["message"], "I will fix my arguments.");

    let events = chat_events(user("unknown tool")).await;
    assert_eq!(
        last(&events, "tool_result")["result"]["error"]["code"],
        "NO_SUCH_TOOL"
    );
    assert_eq!(
        last(&events, "done")["message"],
        "That tool does not exist."
    );
}

#[tokio::test]
async fn max_iterations_ends_the_loop_and_says_so() {
    let events = chat_events(
        json!({"messages": [{"role": "user", "content": "forever"}], "max_iterations": 3}),
    )
    .await;
    let done = last(&events, "done");
    assert_eq!(done["stopped"], "max_iterations");
    assert_eq!(done["iterations"], 3);
    assert!(done["message"].as_str().unwrap().contains("max_iterations"));
    assert_eq!(events.iter().filter(|(n, _)| n == "tool_call").count(), 3);
}

#[tokio::test]
async fn rate_limits_are_retried_and_other_failures_are_error_events() {
    let events = chat_events(user("busy")).await;
    assert_eq!(
        last(&events, "done")["message"],
        "Answered after a retry.",
        "{events:#?}"
    );
    assert_eq!(
        MODEL_CALLS
            .lock()
            .unwrap()
            .iter()
            .filter(|c| *c == "busy")
            .count(),
        2
    );

    let events = chat_events(user("unauthorized")).await;
    let error = last(&events, "error");
    assert_eq!(error["status"], 401, "{events:#?}");
    // The contract's error: a code, and a hint that names what to change.
    assert_eq!(error["code"], "UPSTREAM", "{error}");
    assert!(
        error["hint"].as_str().unwrap().contains("--llm-api-key"),
        "{error}"
    );
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("Incorrect API key")
    );
    assert!(!names(&events).contains(&"done"));
    // Without streaming, the same error in the error shape, hint included.
    let mut unstreamed = user("unauthorized");
    unstreamed["stream"] = json!(false);
    let response = client()
        .post(format!("{}/api/chat", service().api))
        .json(&unstreamed)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 502);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "UPSTREAM", "{body:#}");
    assert!(
        body["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("--llm-api-key"),
        "{body:#}"
    );

    let started = std::time::Instant::now();
    let events = chat_events(user("stall")).await;
    assert!(
        last(&events, "error")["message"]
            .as_str()
            .unwrap()
            .contains("timed out"),
        "{events:#?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );

    let events = chat_events(user("cut")).await;
    assert_eq!(names(&events), ["message", "error"], "{events:#?}");
    assert!(
        last(&events, "error")["message"]
            .as_str()
            .unwrap()
            .contains("ended before")
    );
}

#[tokio::test]
async fn without_streaming_the_answer_and_transcript_come_as_json() {
    // Sent the way `curl -d` sends it: JSON under a form content type.
    let body = json!({"messages": [{"role": "user", "content": "search and open"}], "stream": false, "tools": ["web_search", "open_web_page"]});
    let response = client()
        .post(format!("{}/api/chat", service().api))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["message"], "Night trains cost from 29 euros.");
    assert_eq!(body["tool_calls"], 2);
    let roles: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "tool", "assistant"]
    );
    assert!(
        body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("open_web_page reads a URL")
    );
}

#[tokio::test]
async fn bad_requests_are_typed_errors() {
    for (body, field) in [
        (json!({"messages": []}), "messages"),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "tools": ["nope"]}),
            "tools",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}], "max_iterations": 0}),
            "max_iterations",
        ),
        (json!({"message": "x"}), "bad chat request"),
    ] {
        let response = client()
            .post(format!("{}/api/chat", service().api))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{body}");
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["error"]["code"], "INVALID_ARGUMENT");
        assert!(
            error["error"]["message"].as_str().unwrap().contains(field),
            "{error}"
        );
    }
}

#[tokio::test]
async fn a_client_that_disconnects_stops_the_loop() {
    let mut response = client()
        .post(format!("{}/api/chat", service().api))
        .json(&user("slow"))
        .send()
        .await
        .unwrap();
    let first = response.chunk().await.unwrap().expect("a first event");
    assert!(
        String::from_utf8_lossy(&first).contains("tick"),
        "{first:?}"
    );
    drop(response);
    eventually(
        "the model stream to be dropped",
        Duration::from_secs(10),
        || async { SLOW_STREAM_DROPPED.load(std::sync::atomic::Ordering::SeqCst) },
    )
    .await;
    assert_eq!(
        MODEL_CALLS
            .lock()
            .unwrap()
            .iter()
            .filter(|c| *c == "slow")
            .count(),
        1
    );
}

/// The vision path: a vision model gets the screenshot as a PNG image part after the tool result;
/// a text-only model gets only the result, which says the image was not shown.
#[tokio::test]
async fn a_handoff_is_announced_with_its_link_before_the_call_waits() {
    // The session (and the browser) first: the hand-off's one second is for waiting.
    let opened = client()
        .post(format!("{}/api/tools/browser_tabs", service().api))
        .json(&json!({ "session": "chat-handoff", "action": "new" }))
        .send()
        .await
        .unwrap();
    assert_eq!(opened.status(), 200);
    let events = chat_events(user("hand off")).await;
    let result = &last(&events, "tool_result")["result"];
    assert_eq!(result["handed_back"], "timeout", "{result:#}");
    let order = names(&events);
    let at = |name: &str| {
        order
            .iter()
            .position(|n| *n == name)
            .unwrap_or_else(|| panic!("no {name}: {order:?}"))
    };
    assert!(
        at("tool_call") < at("handoff") && at("handoff") < at("tool_result"),
        "{order:?}"
    );
    let handoff = last(&events, "handoff");
    assert_eq!(handoff["session"], "chat-handoff");
    assert_eq!(handoff["message"], "Solve the puzzle");
    let link = handoff["live_url"].as_str().unwrap();
    assert!(
        link.starts_with(&format!("{}/live/chat-handoff?cap=", service().api)),
        "{link}"
    );
    // The link works while the call waits, and after: it is the person's way in.
    let page = client().get(link).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let done = last(&events, "done");
    assert_eq!(done["handoff_timed_out"], true, "{done:#}");
    assert_eq!(done["message"], "Nobody solved it.");
}

#[tokio::test]
async fn screenshots_reach_a_vision_model_as_images_and_a_text_model_as_a_note() {
    use base64::Engine;
    let harness = service();
    for vision in [true, false] {
        let llm = webpilot::config::LlmConfig {
            vision,
            ..harness.app.config.llm.clone()
        };
        let agent = webpilot::agent::Agent::new(&llm, harness.app.registry.clone()).unwrap();
        let request: webpilot::agent::ChatRequest = serde_json::from_value(json!({
            "messages": [{"role": "user", "content": "look"}],
            "session": format!("chat-look-{vision}"),
        }))
        .unwrap();
        let operator = harness.app.tenants.operator();
        let transcript = harness.block_on(async move {
            let (events, _seen) = tokio::sync::mpsc::unbounded_channel();
            agent.run(request, operator, None, events).await
        });
        let tool_result = transcript.iter().find(|m| m["role"] == "tool").unwrap();
        let note = if vision {
            "attached below"
        } else {
            "not shown (text-only model)"
        };
        assert!(
            tool_result["content"].as_str().unwrap().contains(note),
            "{tool_result:#}"
        );
        let images: Vec<&str> = transcript
            .iter()
            .filter(|m| m["role"] == "user")
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .filter_map(|part| part["image_url"]["url"].as_str())
            .collect();
        assert_eq!(images.len(), usize::from(vision), "{transcript:#?}");
        if let Some(url) = images.first() {
            let data = url.strip_prefix("data:image/png;base64,").unwrap();
            let png = base64::engine::general_purpose::STANDARD
                .decode(data)
                .unwrap();
            assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
        }
        let answer = transcript.last().unwrap();
        assert_eq!(answer["role"], "assistant");
        let expected = if vision {
            "I see the page."
        } else {
            "I see nothing."
        };
        assert_eq!(answer["content"], expected, "{answer:#}");
    }
}
