//! The console (`GET /`) and the conversations API, driven like a person would: a session of the
//! same service opens the console in Chromium and uses it by its accessible names, against a
//! scripted OpenAI-compatible model speaking real SSE.

mod common;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::web_fixtures::config;
use common::{Harness, client, eventually, ref_of, start_with};
use serde_json::{Value, json};

fn service() -> &'static Harness {
    static SERVICE: OnceLock<Harness> = OnceLock::new();
    SERVICE.get_or_init(|| {
        start_with(|sites| {
            let mut config = config(sites);
            // The timeline shows each step's picture.
            config.trace.screenshot_quality = 50;
            config
        })
    })
}

async fn tool(tool: &str, args: Value) -> Value {
    let (status, body) = common::call_at(&service().api, tool, args.clone()).await;
    assert_eq!(status, 200, "{tool} {args}: {body:#}");
    body
}

/// Opens the console in `person`'s browser and waits until it has loaded.
async fn open_console(person: &str, path: &str) {
    tool(
        "browser_navigate",
        json!({ "session": person, "target": format!("{}{path}", service().api) }),
    )
    .await;
    ref_in(person, "button \"New conversation\"").await;
}

async fn elements(person: &str) -> Vec<String> {
    let read = tool(
        "browser_read",
        json!({ "session": person, "mode": "elements", "max_tokens": 100000 }),
    )
    .await;
    common::content_lines(&read)
}

/// The ref of the element whose line has `needle`, once the console shows it.
async fn ref_in(person: &str, needle: &str) -> u32 {
    let started = Instant::now();
    loop {
        let lines = elements(person).await;
        if lines.iter().any(|l| l.contains(needle)) {
            return ref_of(&lines, needle);
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "the console never offered {needle}: {lines:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn click(person: &str, needle: &str) {
    let target = ref_in(person, needle).await;
    tool(
        "browser_interact",
        json!({ "session": person, "action": "click", "ref": target }),
    )
    .await;
}

async fn text_of(person: &str) -> String {
    let read = tool(
        "browser_read",
        json!({ "session": person, "mode": "text", "max_tokens": 100000 }),
    )
    .await;
    read["content"].as_str().unwrap().to_string()
}

async fn says(person: &str, text: &str) {
    let started = Instant::now();
    loop {
        let shown = text_of(person).await;
        if shown.contains(text) {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "the console never said {text:?}; it shows:\n{shown}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn evaluate(person: &str, script: &str) -> Value {
    tool(
        "browser_interact",
        json!({ "session": person, "action": "evaluate", "script": script }),
    )
    .await["value"]
        .clone()
}

/// Types `text` in the Message box and sends it with Enter.
async fn ask(person: &str, text: &str) {
    let message = ref_in(person, "textbox \"Message\"").await;
    tool(
        "browser_interact",
        json!({ "session": person, "action": "type", "ref": message, "text": text, "submit": true }),
    )
    .await;
}

#[tokio::test]
async fn a_conversation_streams_shows_its_tool_calls_and_survives_a_reload() {
    let person = "console-flow";
    open_console(person, "/").await;
    click(person, "button \"New conversation\"").await;
    // The live cards are replaced by the stored ones once the answer is done: keep their history.
    evaluate(
        person,
        "window.__cards = []; new MutationObserver((changes) => { for (const c of changes) \
         for (const n of c.removedNodes) if (n.classList && n.classList.contains('tool')) \
         window.__cards.push(n.querySelector('.name').textContent + ': ' + n.dataset.statuses); }) \
         .observe(document.getElementById('log'), { childList: true }); true",
    )
    .await;
    ask(person, "search and open").await;
    says(person, "Night trains cost from 29 euros.").await;
    // Each card went through its states in order: pending when the model asked for the call,
    // running when it started, completed (a fast tool may finish before a paint).
    eventually(
        "the stored cards replace the live ones",
        Duration::from_secs(10),
        || async { evaluate(person, "window.__cards.length").await == json!(2) },
    )
    .await;
    let cards = evaluate(person, "window.__cards").await;
    for tool in ["web_search", "open_web_page"] {
        assert!(
            cards
                .as_array()
                .unwrap()
                .contains(&json!(format!("{tool}: pending running completed"))),
            "{cards}"
        );
    }
    let shown = text_of(person).await;
    assert!(shown.contains("web_search"), "{shown}");
    assert!(shown.contains("completed"), "{shown}");

    // Reload: the conversation and its cards come back from the database.
    let hash = evaluate(person, "location.hash").await;
    open_console(person, &format!("/{}", hash.as_str().unwrap())).await;
    says(person, "Night trains cost from 29 euros.").await;
    let shown = text_of(person).await;
    assert!(shown.contains("search and open"), "{shown}");
    assert!(
        shown.matches("completed").count() >= 2,
        "both cards, completed: {shown}"
    );
    // The picture for the README: `CONSOLE_SCREENSHOT=docs/console.png cargo test --test console`.
    let shot = tool(
        "browser_screenshot",
        json!({ "session": person, "max_width": 960 }),
    )
    .await;
    let png = common::decode(&shot);
    assert_eq!(png.width(), 960);
    if let Ok(path) = std::env::var("CONSOLE_SCREENSHOT") {
        png.save(path).unwrap();
    }
}

#[tokio::test]
async fn a_screenshot_a_tool_took_shows_in_its_card_from_the_stored_file() {
    let person = "console-look";
    open_console(person, "/").await;
    click(person, "button \"New conversation\"").await;
    ask(person, "look").await;
    eventually("the screenshot in its card", Duration::from_secs(15), || async {
        evaluate(
            person,
            "[...document.querySelectorAll('.tool img')].some((i) => i.complete && i.naturalWidth === 1280)",
        )
        .await
            == json!(true)
    })
    .await;
}

#[tokio::test]
async fn tool_and_model_errors_show_and_the_console_stays_usable() {
    let person = "console-errors";
    open_console(person, "/").await;
    click(person, "button \"New conversation\"").await;
    ask(person, "malformed").await;
    says(person, "I will fix my arguments.").await;
    let shown = text_of(person).await;
    assert!(
        shown.contains("error") && shown.contains("INVALID_ARGUMENT"),
        "{shown}"
    );

    click(person, "button \"New conversation\"").await;
    ask(person, "unauthorized").await;
    says(person, "UPSTREAM").await;
    // Still usable: another question in another conversation is answered.
    click(person, "button \"New conversation\"").await;
    ask(person, "busy").await;
    says(person, "Answered after a retry.").await;
}

#[tokio::test]
async fn a_late_reload_of_the_previous_conversation_does_not_take_the_new_one_back() {
    let person = "console-race";
    open_console(person, "/").await;
    // The reload of the previous conversation (what the console does after each answer) is held
    // by the page's own fetch until "New conversation" has finished, then let through.
    let outcome = evaluate(
        person,
        "(async () => { \
           const previous = (await newConversation()).id; \
           let release; const gate = new Promise((r) => { release = r; }); \
           const realFetch = window.fetch; \
           window.fetch = (url, options) => String(url).endsWith('/api/conversations/' + previous) \
             ? gate.then(() => realFetch(url, options)) : realFetch(url, options); \
           const reload = openConversation(previous); \
           const created = (await newConversation()).id; \
           release(); await reload; window.fetch = realFetch; \
           return { previous, created, current, \
             marked: document.querySelector('#conversations li[aria-current=\"true\"]')?.dataset.id }; })()",
    )
    .await;
    assert_ne!(outcome["previous"], outcome["created"], "{outcome}");
    assert_eq!(outcome["current"], outcome["created"], "{outcome}");
    assert_eq!(outcome["marked"], outcome["created"], "{outcome}");
    // And the next message goes to the new conversation.
    ask(person, "busy").await;
    says(person, "Answered after a retry.").await;
    let id = outcome["created"].as_str().unwrap();
    let stored = client()
        .get(format!("{}/api/conversations/{id}", service().api))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(
        stored["messages"][0]["message"]["content"], "busy",
        "{stored:#}"
    );
}

#[tokio::test]
async fn markup_in_page_titles_and_answers_is_shown_as_text() {
    let person = "console-xss";
    open_console(person, "/").await;
    click(person, "button \"New conversation\"").await;
    ask(person, "show me markup").await;
    says(person, "<script>top.__pwned='script'</script> bold").await;
    let shown = text_of(person).await;
    assert!(
        shown.contains("The title is <img src=x onerror="),
        "{shown}"
    );
    assert!(
        shown.contains("<script>top.__pwned='script'</script>"),
        "{shown}"
    );
    // The tool result (the page's title) is there as text too, folded.
    let result = evaluate(
        person,
        "[...document.querySelectorAll('.tool pre')].map((p) => p.textContent).join('\\n')",
    )
    .await;
    assert!(
        result.as_str().unwrap().contains("<img src=x onerror="),
        "{result}"
    );
    assert_eq!(evaluate(person, "typeof top.__pwned").await, "undefined");
    let links = evaluate(
        person,
        "[...document.querySelectorAll('#log a')].map((a) => a.href)",
    )
    .await;
    assert_eq!(links, json!([]), "no javascript: link");
}

#[tokio::test]
async fn a_crawl_started_from_the_panel_shows_its_progress_and_results() {
    let person = "console-crawl";
    open_console(person, "/").await;
    let urls: Vec<String> = (0..20)
        .map(|i| format!("{}/web/article.html?n={i}", service().fixtures))
        .collect();
    let field = ref_in(person, "\"URLs to crawl\"").await;
    tool(
        "browser_interact",
        json!({ "session": person, "action": "type", "ref": field, "text": urls.join("\n") }),
    )
    .await;
    click(person, "\"Start crawl\"").await;
    says(person, "completed 20/20").await;
    let task = evaluate(
        person,
        "document.querySelector('#tasks li button').textContent",
    )
    .await;
    click(person, &format!("\"{}\"", task.as_str().unwrap())).await;
    eventually("the task's results", Duration::from_secs(10), || async {
        text_of(person).await.matches("article.html?n=").count() >= 20
    })
    .await;
}

#[tokio::test]
async fn a_running_crawl_is_cancelled_from_the_panel() {
    let person = "console-cancel";
    let urls: Vec<String> = (0..10)
        .map(|n| service().page(&format!("crawl/slow/console-cancel-{n}")))
        .collect();
    let (status, created) = common::call_at(
        &service().api,
        "crawl_batch",
        json!({ "urls": urls, "mode": "http", "parallel": 1 }),
    )
    .await;
    assert_eq!(status, 200, "{created:#}");
    let id = created["task_id"].as_str().unwrap().to_string();
    open_console(person, "/").await;
    click(person, &format!("\"Cancel {id}\"")).await;
    says(person, "cancelled").await;
    let (_, report) =
        common::call_at(&service().api, "crawl_status", json!({ "task_id": id })).await;
    assert_eq!(report["status"], "cancelled", "{report:#}");
    click(person, &format!("\"{id}\"")).await;
    says(person, "skipped: cancelled").await;
}

/// A map started from the panel (a link depth and "Map only") shows what it listed (the links'
/// text) and what it skipped, with why; the task the service holds is a map of that depth.
#[tokio::test]
async fn a_map_started_from_the_panel_shows_what_it_listed_and_skipped() {
    let person = "console-map";
    open_console(person, "/").await;
    let page = format!("{}/web/article.html?map", service().fixtures);
    let field = ref_in(person, "\"URLs to crawl\"").await;
    let typed = json!({ "session": person, "action": "type", "ref": field, "text": page });
    tool("browser_interact", typed).await;
    let depth = ref_in(person, "\"Link depth\"").await;
    let typed = json!({ "session": person, "action": "type", "ref": depth, "text": "1" });
    tool("browser_interact", typed).await;
    click(person, "\"Map only\"").await;
    click(person, "\"Start crawl\"").await;
    says(person, "completed").await;
    let listed = common::get_json(&format!("{}/api/crawler/tasks", service().api)).await;
    let task = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["options"]["seeds"][0] == page.as_str())
        .unwrap_or_else(|| panic!("the map's task: {listed:#}"));
    assert_eq!(task["options"]["follow"]["depth"], 1, "{task:#}");
    assert_eq!(task["options"]["follow"]["map"], true, "{task:#}");
    let id = task["task_id"].as_str().unwrap();
    click(person, &format!("\"{id}\"")).await;
    says(person, "/news — listed: News").await;
    says(person, "operator.example/faq — skipped: scope").await;
}

#[tokio::test]
async fn the_sessions_panel_lists_tabs_thumbnails_and_closes() {
    let person = "console-sessions";
    tool(
        "browser_navigate",
        json!({ "session": "console-watched", "target": service().page("article.html") }),
    )
    .await;
    open_console(person, "/").await;
    click(person, "\"Refresh sessions\"").await;
    click(person, "\"Tabs of console-watched\"").await;
    says(person, "article.html").await;
    click(person, "\"Screenshot of console-watched\"").await;
    eventually("a thumbnail", Duration::from_secs(10), || async {
        evaluate(
            person,
            "[...document.querySelectorAll('#sessions img')].some((i) => i.complete && i.naturalWidth === 320)",
        )
        .await
            == json!(true)
    })
    .await;
    click(person, "\"Close console-watched\"").await;
    eventually("the session closed", Duration::from_secs(10), || async {
        let sessions = common::get_json(&format!("{}/api/sessions", service().api)).await;
        !sessions.to_string().contains("console-watched")
    })
    .await;
}

#[tokio::test]
async fn the_sessions_panel_shows_a_tabs_failed_requests_and_errors_and_a_request_whole() {
    let person = "console-problems";
    let troubled = "console-troubled";
    let opened = tool(
        "browser_navigate",
        json!({ "session": troubled, "target": service().page("console-problems.html") }),
    )
    .await;
    let tab = opened["tab"]
        .as_str()
        .expect("the tab in the reply")
        .to_string();
    // The page's fetch may be answered after its load: the console is asked once the tab has
    // recorded both problems.
    let recorded = |args: Value| async move {
        let read = tool("browser_read", args).await;
        read["content"].as_str().unwrap_or_default().to_string()
    };
    eventually(
        "the page's 500 and error",
        Duration::from_secs(10),
        || async {
            let network =
                json!({ "session": troubled, "tab": tab, "mode": "network", "status": "5xx" });
            let console =
                json!({ "session": troubled, "tab": tab, "mode": "console", "level": "error" });
            recorded(network).await.contains("/status/500")
                && recorded(console).await.contains("broken on purpose")
        },
    )
    .await;
    open_console(person, "/").await;
    click(person, "\"Refresh sessions\"").await;
    click(person, &format!("\"Tabs of {troubled}\"")).await;
    click(person, &format!("\"Problems of {troubled} {tab}\"")).await;
    says(person, "error: broken on purpose").await;
    let problems = evaluate(
        person,
        &format!(
            "document.querySelector('[aria-label=\"problems of {troubled} {tab}\"]').innerText"
        ),
    )
    .await;
    let problems = problems.as_str().unwrap_or_default();
    assert!(
        problems.contains("500 GET") && problems.contains("/status/500"),
        "{problems}"
    );
    assert!(problems.contains("error: broken on purpose"), "{problems}");
    // The request's line opens it whole: status, headers, the body the server sent, as text.
    click(person, "500 GET").await;
    says(person, "Internal Server Error").await;
    let detail = evaluate(person, "document.querySelector('.request pre').textContent").await;
    let detail = detail.as_str().unwrap_or_default();
    assert!(detail.starts_with("GET http://"), "{detail}");
    assert!(detail.contains("<h1>Status 500</h1>"), "{detail}");
}

#[tokio::test]
async fn a_session_s_timeline_shows_each_step_with_its_picture_and_what_failed() {
    let person = "console-timeline";
    let traced = "console-traced";
    tool(
        "browser_navigate",
        json!({ "session": traced, "target": service().page("console-problems.html") }),
    )
    .await;
    // An action whose request fails: the step's own problem.
    tool(
        "browser_interact",
        json!({ "session": traced, "action": "evaluate",
                "script": "fetch('/status/404').then((r) => r.status)" }),
    )
    .await;
    open_console(person, "/").await;
    click(person, "\"Refresh sessions\"").await;
    click(person, &format!("\"Timeline of {traced}\"")).await;
    says(person, "evaluate").await;
    let list = format!("[aria-label=\"timeline of {traced}\"]");
    let steps = evaluate(
        person,
        &format!("[...document.querySelectorAll('{list} > li')].map((li) => li.innerText)"),
    )
    .await;
    let steps: Vec<String> = serde_json::from_value(steps).unwrap();
    assert_eq!(steps.len(), 2, "{steps:#?}");
    assert!(steps[0].starts_with("navigate http://"), "{steps:#?}");
    assert!(steps[0].contains("console-problems.html"), "{steps:#?}");
    assert!(
        steps[1].contains("404 GET") && steps[1].contains("/status/404"),
        "{steps:#?}"
    );
    // Each step's picture loads once it is in view.
    evaluate(
        person,
        &format!("document.querySelector('{list} > li:last-child').scrollIntoView()"),
    )
    .await;
    eventually("the pictures", Duration::from_secs(10), || async {
        let loaded = evaluate(
            person,
            &format!(
                "[...document.querySelectorAll('{list} img')].filter((i) => i.complete && i.naturalWidth > 100).length"
            ),
        )
        .await;
        loaded.as_u64() == Some(2)
    })
    .await;
}

#[tokio::test]
async fn the_page_is_small_cached_and_revalidated() {
    let response = client()
        .get(format!("{}/", service().api))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert_eq!(headers["cache-control"], "no-cache");
    let etag = headers["etag"].to_str().unwrap().to_string();
    assert!(
        headers["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("script-src 'sha256-")
    );
    let body = response.bytes().await.unwrap();
    assert!(body.len() <= 150 * 1024, "{} bytes", body.len());
    let again = client()
        .get(format!("{}/", service().api))
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);
}

// The conversations API.

async fn post(path: &str, body: Value) -> reqwest::Response {
    client()
        .post(format!("{}{path}", service().api))
        .json(&body)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn conversations_are_paged_scoped_and_answer_one_message_at_a_time() {
    let mut ids = Vec::new();
    for n in 0..5 {
        let created: Value = post(
            "/api/conversations",
            json!({ "title": format!("paged {n}") }),
        )
        .await
        .json()
        .await
        .unwrap();
        ids.push(created["id"].as_str().unwrap().to_string());
    }
    // Newest first, two at a time, each once.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let url = match &cursor {
            None => format!("{}/api/conversations?limit=2", service().api),
            Some(cursor) => format!(
                "{}/api/conversations?limit=2&cursor={cursor}",
                service().api
            ),
        };
        let page = common::get_json(&url).await;
        let listed = page["conversations"].as_array().unwrap();
        assert!(listed.len() <= 2);
        seen.extend(listed.iter().map(|c| c["id"].as_str().unwrap().to_string()));
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    let mine: Vec<&String> = seen.iter().filter(|id| ids.contains(id)).collect();
    assert_eq!(mine.len(), 5, "{seen:?}");
    assert_eq!(
        seen.len(),
        seen.iter().collect::<std::collections::HashSet<_>>().len()
    );
    let positions: Vec<usize> = ids
        .iter()
        .map(|id| seen.iter().position(|s| s == id).unwrap())
        .collect();
    assert!(
        positions.windows(2).all(|w| w[0] > w[1]),
        "newest first: {positions:?}"
    );

    let missing = client()
        .get(format!("{}/api/conversations/c-nope", service().api))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let body: Value = missing.json().await.unwrap();
    assert_eq!(body["error"]["code"], "NO_SUCH_CONVERSATION");

    // A second message while the first is being answered is refused, clearly.
    let slow = &ids[0];
    let first = post(
        &format!("/api/conversations/{slow}/messages"),
        json!({ "content": "slow" }),
    )
    .await;
    assert_eq!(first.status(), 200);
    let second = post(
        &format!("/api/conversations/{slow}/messages"),
        json!({ "content": "again" }),
    )
    .await;
    assert_eq!(second.status(), 429);
    let body: Value = second.json().await.unwrap();
    assert_eq!(body["error"]["code"], "LIMIT");
    drop(first);
    eventually(
        "the first answer stops with its client",
        Duration::from_secs(10),
        || async {
            let conversation =
                common::get_json(&format!("{}/api/conversations/{slow}", service().api)).await;
            conversation["answering"] == false
        },
    )
    .await;
    let conversation =
        common::get_json(&format!("{}/api/conversations/{slow}", service().api)).await;
    let messages = conversation["messages"].as_array().unwrap();
    assert_eq!(
        messages.len(),
        1,
        "only the question was complete: {conversation:#}"
    );
    assert_eq!(messages[0]["message"]["content"], "slow");
    assert!(
        client()
            .delete(format!("{}/api/conversations/{slow}", service().api))
            .send()
            .await
            .unwrap()
            .status()
            == 204
    );
}

#[tokio::test]
async fn stored_turns_hold_whole_tool_calls_and_survive_a_killed_service() {
    let data = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let model = format!("{}/v1", service().fixtures);
    let env = [
        ("WEBPILOT_LLM_BASE_URL", model.as_str()),
        ("WEBPILOT_LLM_MODEL", "scripted"),
        ("WEBPILOT_FETCH_ALLOW", "127.0.0.1"),
    ];
    let (mut child, api) = common::spawn_service_with(data.path(), tmp.path(), &env);
    let id = common::answered_conversation(&api, "search and open").await;
    let before = common::get_json(&format!("{api}/api/conversations/{id}")).await;
    let roles: Vec<&str> = before["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["message"]["role"].as_str().unwrap())
        .collect();
    // The question, the calls with both results, the answer.
    assert_eq!(
        roles,
        ["user", "assistant", "tool", "tool", "assistant"],
        "{before:#}"
    );
    assert!(before["messages"][2]["summary"].is_string(), "{before:#}");
    assert_eq!(before["title"], "search and open");

    child.kill().unwrap();
    child.wait().unwrap();
    let (mut again, api) = common::spawn_service_with(data.path(), tmp.path(), &env);
    let after = common::get_json(&format!("{api}/api/conversations/{id}")).await;
    assert_eq!(after["messages"], before["messages"]);
    again.kill().unwrap();
    again.wait().unwrap();
}

const TOKEN: &str = "console-test-token-0123456789";

#[tokio::test]
async fn with_a_token_the_console_asks_for_it_first() {
    let guarded = start_with(|fixtures| {
        let mut config = config(fixtures);
        config.token = Some(TOKEN.into());
        config
    });
    let person = "console-token";
    let page = format!("{}/", guarded.api);
    tool(
        "browser_navigate",
        json!({ "session": person, "target": page }),
    )
    .await;
    let token = ref_in(person, "\"Token\"").await;
    let lines = elements(person).await;
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("New conversation") || l.contains("Message")),
        "only the login form: {lines:#?}"
    );
    tool(
        "browser_interact",
        json!({ "session": person, "action": "type", "ref": token, "text": "wrong-token-wrong-token", "submit": true }),
    )
    .await;
    says(person, "That token was refused.").await;
    let token = ref_in(person, "\"Token\"").await;
    tool(
        "browser_interact",
        json!({ "session": person, "action": "type", "ref": token, "text": TOKEN, "submit": true }),
    )
    .await;
    ref_in(person, "button \"New conversation\"").await;
    ref_in(person, "textbox \"Message\"").await;
}

#[tokio::test]
async fn a_handoff_shows_as_a_card_with_the_live_view_inside() {
    let person = "console-handoff";
    // The session the hand-off runs in, opened first: its one second is for waiting.
    tool(
        "browser_tabs",
        json!({ "session": "chat-handoff", "action": "new" }),
    )
    .await;
    open_console(person, "/").await;
    click(person, "button \"New conversation\"").await;
    ask(person, "hand off").await;
    says(person, "The agent asks you: Solve the puzzle").await;
    let frame = evaluate(
        person,
        "(() => { const f = document.querySelector('.handoff iframe'); return f && f.title + ' ' + f.src; })()",
    )
    .await;
    let frame = frame.as_str().unwrap_or_default();
    assert!(
        frame.starts_with("Live view of session chat-handoff http://")
            && frame.contains("/live/chat-handoff?cap="),
        "{frame}"
    );
    says(person, "Nobody finished the hand-off in time.").await;
}

#[tokio::test]
async fn on_a_phone_sized_screen_the_controls_are_all_there_without_sideways_scrolling() {
    // A service whose browser's screens are 390×844, as a phone's.
    let phone = start_with(|fixtures| {
        let mut config = config(fixtures);
        config.viewport_width = 390;
        config.viewport_height = 844;
        config
    });
    let person = "console-phone";
    let (status, _) = common::call_at(
        &phone.api,
        "browser_navigate",
        json!({ "session": person, "target": format!("{}/", phone.api) }),
    )
    .await;
    assert_eq!(status, 200);
    let (status, read) = common::call_at(
        &phone.api,
        "browser_read",
        json!({ "session": person, "mode": "elements", "max_tokens": 100000 }),
    )
    .await;
    assert_eq!(status, 200);
    let lines = common::content_lines(&read);
    for control in [
        "button \"New conversation\"",
        "textbox \"Message\"",
        "button \"Send\"",
        "button \"Start crawl\"",
        "\"Link depth\"",
        "checkbox \"Map only\"",
    ] {
        assert!(
            lines.iter().any(|l| l.contains(control)),
            "{control}: {lines:#?}"
        );
    }
    let (status, width) = common::call_at(
        &phone.api,
        "browser_interact",
        json!({ "session": person, "action": "evaluate",
                "script": "[innerWidth, document.documentElement.scrollWidth]" }),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(width["value"], json!([390, 390]), "{width:#}");
}

#[tokio::test]
async fn a_new_conversation_asked_for_as_an_answer_ends_is_not_taken_back_by_its_reload() {
    let person = "console-race-end";
    open_console(person, "/").await;
    // The page's own fetch holds the end of the answer's stream until "New conversation" has
    // been asked for, and the new conversation's creation until the answer is done (and the
    // console has reloaded what was stored, as it does after each answer).
    let outcome = evaluate(
        person,
        "(async () => { \
           const previous = (await newConversation()).id; \
           let end, created; \
           const ending = new Promise((r) => { end = r; }); \
           const creation = new Promise((r) => { created = r; }); \
           const realFetch = window.fetch; \
           window.fetch = async (url, options = {}) => { \
             if (String(url).endsWith('/api/conversations') && options.method === 'POST') await creation; \
             const response = await realFetch(url, options); \
             if (!String(url).endsWith('/messages')) return response; \
             const reader = response.body.getReader(); \
             const body = new ReadableStream({ async pull(stream) { \
               const { value, done } = await reader.read(); \
               if (done) { await ending; stream.close(); } else stream.enqueue(value); } }); \
             return new Response(body, { status: response.status, headers: response.headers }); }; \
           const answered = send('malformed'); \
           while (!$('log').textContent.includes('I will fix my arguments.')) \
             await new Promise((r) => setTimeout(r, 20)); \
           const creating = newConversation(); \
           end(); await answered; created(); \
           const made = (await creating).id; window.fetch = realFetch; \
           return { previous, created: made, current }; })()",
    )
    .await;
    assert_ne!(outcome["previous"], outcome["created"], "{outcome}");
    assert_eq!(outcome["current"], outcome["created"], "{outcome}");
}
