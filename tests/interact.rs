//! browser_interact against real Chromium: acting by ref, and what the result reports.

mod common;

use std::time::Duration;

use common::{element_lines, fails, harness, ok, open, ref_of};
use serde_json::json;

async fn act(session: &str, args: serde_json::Value) -> serde_json::Value {
    let mut args = args;
    args["session"] = json!(session);
    ok("browser_interact", args).await
}

#[tokio::test]
async fn click_add_to_cart_updates_the_count_without_extra_waits() {
    let s = "act-cart";
    open(s, "spa.html").await;
    let add = ref_of(&element_lines(s).await, "Add Item 07 to cart");
    let result = act(s, json!({ "action": "click", "ref": add })).await;
    assert!(result["navigated"].is_null(), "not navigated: {result:#}");
    assert!(common::page_text(s).await.contains("Cart: 1 item"));
}

#[tokio::test]
async fn type_with_submit_filters_the_list() {
    let s = "act-type";
    open(s, "spa.html").await;
    let search = ref_of(&element_lines(s).await, "searchbox \"Search items\"");
    let result = act(
        s,
        json!({ "action": "type", "ref": search, "text": "Item 4", "submit": true }),
    )
    .await;
    assert!(
        result["elements_removed"].as_u64().unwrap() >= 40,
        "{result:#}"
    );
    assert!(
        common::page_text(s)
            .await
            .contains("Showing 10 of 50 items")
    );
    let lines = element_lines(s).await;
    assert!(
        lines.iter().any(|l| l.contains("value=\"Item 4\"")),
        "{lines:#?}"
    );
}

#[tokio::test]
async fn select_by_label_runs_the_onchange_handler() {
    let s = "act-select";
    open(s, "form.html").await;
    let country = ref_of(&element_lines(s).await, "combobox \"Country\"");
    let options = act(s, json!({ "action": "options", "ref": country })).await;
    assert_eq!(options["options"].as_array().unwrap().len(), 4);
    let result = act(
        s,
        json!({ "action": "select", "ref": country, "option": "Germany" }),
    )
    .await;
    assert_eq!(result["selected"]["value"], "de");
    assert!(common::page_text(s).await.contains("Chose: de"));
    let error = fails(
        "browser_interact",
        json!({ "session": s, "action": "select", "ref": country, "option": "Atlantis" }),
        "INVALID_ARGUMENT",
    )
    .await;
    assert!(error["error"]["hint"].as_str().unwrap().contains("France"));
}

#[tokio::test]
async fn send_keys_tab_and_enter_drive_a_form() {
    let s = "act-keys";
    open(s, "form.html").await;
    let first = ref_of(&element_lines(s).await, "textbox \"First name\"");
    act(s, json!({ "action": "type", "ref": first, "text": "Ada" })).await;
    act(s, json!({ "action": "send_keys", "keys": "Tab" })).await;
    act(s, json!({ "action": "send_keys", "keys": "L o v e" })).await;
    act(s, json!({ "action": "send_keys", "keys": "Enter" })).await;
    assert!(
        common::page_text(s).await.contains("Submitted: Ada / Love"),
        "{}",
        common::page_text(s).await
    );
}

#[tokio::test]
async fn upload_shows_the_file_name_and_size() {
    let s = "act-upload";
    // Uploads come from the files root only (`<data dir>/files/` here), by relative path.
    let root = harness().app.config.data_dir.join("files");
    std::fs::write(root.join("notes.txt"), b"twelve bytes").unwrap();
    open(s, "form.html").await;
    let input = ref_of(&element_lines(s).await, "Attachment");
    act(
        s,
        json!({ "action": "upload", "ref": input, "paths": ["notes.txt"] }),
    )
    .await;
    assert!(
        common::page_text(s)
            .await
            .contains("Picked notes.txt (12 bytes)")
    );
    // Server files outside the root never reach the page, whatever the path says.
    std::fs::write(harness().app.config.data_dir.join("secret.txt"), b"secret").unwrap();
    for outside in [
        "/no/such/file",
        "/etc/passwd",
        "../secret.txt",
        "/dev/zero",
        ".",
    ] {
        let args = json!({ "session": s, "action": "upload", "ref": input, "paths": [outside] });
        common::invalid("browser_interact", args, "paths").await;
    }
    assert!(
        common::page_text(s)
            .await
            .contains("Picked notes.txt (12 bytes)"),
        "the refused uploads changed nothing"
    );
    // Past files.max_bytes (50 MB): a 60 MB file is refused before anything is read.
    let huge = std::fs::File::create(root.join("huge.bin")).unwrap();
    huge.set_len(60 * 1024 * 1024).unwrap();
    let args = json!({ "session": s, "action": "upload", "ref": input, "paths": ["huge.bin"] });
    let refused = common::fails("browser_interact", args, "TOO_LARGE").await;
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("files.max_bytes"),
        "{refused:#}"
    );
}

/// A caller without access to the server's files sends the file with the call; the page reads
/// exactly those bytes.
#[tokio::test]
async fn upload_takes_files_sent_inline() {
    use base64::Engine;
    let s = "act-upload-inline";
    open(s, "form.html").await;
    let input = ref_of(&element_lines(s).await, "Attachment");
    let content = base64::engine::general_purpose::STANDARD.encode("sent with the call");
    act(
        s,
        json!({ "action": "upload", "ref": input,
                "files": [{ "name": "inline.txt", "base64": content }] }),
    )
    .await;
    common::eventually(
        "the page reads the file",
        Duration::from_secs(10),
        || async {
            common::page_text(s)
                .await
                .contains("Picked inline.txt (18 bytes), reading sent with the call")
        },
    )
    .await;
    for (bad, field) in [
        (
            json!([{ "name": "../escape.txt", "base64": content }]),
            "files",
        ),
        (
            json!([{ "name": "x.txt", "base64": "not base64!" }]),
            "files",
        ),
        (json!([{ "name": "x.txt" }]), "files[0]"),
    ] {
        let args = json!({ "session": s, "action": "upload", "ref": input, "files": bad });
        common::invalid("browser_interact", args, field).await;
    }
    let neither = json!({ "session": s, "action": "upload", "ref": input });
    common::invalid("browser_interact", neither, "paths or files").await;
}

#[tokio::test]
async fn hover_reveals_a_menu() {
    let s = "act-hover";
    open(s, "form.html").await;
    let lines = element_lines(s).await;
    assert!(!lines.iter().any(|l| l.contains("Laptops")));
    let products = ref_of(&lines, "button \"Products\"");
    let result = act(s, json!({ "action": "hover", "ref": products })).await;
    assert!(
        result["added"]
            .as_str()
            .unwrap_or("")
            .contains("link \"Laptops\""),
        "{result:#}"
    );
}

#[tokio::test]
async fn scroll_loads_more_items_on_an_infinite_page() {
    let s = "act-scroll";
    open(s, "scroll.html").await;
    assert!(common::page_text(s).await.contains("20 posts loaded"));
    for _ in 0..3 {
        act(
            s,
            json!({ "action": "scroll", "direction": "down", "amount": 2000 }),
        )
        .await;
    }
    let text = common::page_text(s).await;
    assert!(
        !text.contains("20 posts loaded"),
        "more posts should load: {}",
        &text[text.len() - 40..]
    );
}

/// A scroll lists only what came into view (new or scrolled to): not what was in view already,
/// nor the posts the feed fetched below the fold, which are only counted.
#[tokio::test]
async fn a_scroll_lists_only_what_came_into_view() {
    let s = "act-scroll-view";
    open(s, "feed.html").await;
    common::eventually("the first posts", Duration::from_secs(5), || async {
        common::page_text(s).await.contains("20 posts")
    })
    .await;
    let in_view = |lines: &[String]| -> Vec<String> {
        lines
            .iter()
            .take_while(|l| !l.starts_with("-- off-screen"))
            .cloned()
            .collect()
    };
    let before = element_lines(s).await;
    let fetched_before = common::page_fixtures::received()
        .iter()
        .filter(|(path, _)| path == "/feed")
        .count();
    let scrolled = act(
        s,
        json!({ "action": "scroll", "direction": "down", "amount": 600 }),
    )
    .await;
    let after = element_lines(s).await;
    assert!(
        common::page_fixtures::received()[..]
            .iter()
            .filter(|(path, _)| path == "/feed")
            .count()
            > fetched_before,
        "the feed fetched its next page"
    );
    let (seen_before, seen_after) = (in_view(&before), in_view(&after));
    let came: Vec<&str> = seen_after
        .iter()
        .filter(|line| !seen_before.contains(line))
        .map(String::as_str)
        .collect();
    let added: Vec<&str> = scrolled["added"].as_str().unwrap_or("").lines().collect();
    assert!(!came.is_empty(), "{after:#?}");
    assert_eq!(added, came, "{scrolled:#}");
    assert!(
        scrolled["elements_added"].is_null(),
        "the lines are all there, their count is not said again: {scrolled:#}"
    );
    let offscreen_new = scrolled["elements_offscreen_added"].as_u64().unwrap_or(0);
    assert!(offscreen_new > 0, "the fetched posts below: {scrolled:#}");
    assert!(
        !scrolled["added"].as_str().unwrap().contains("Post 40\""),
        "{scrolled:#}"
    );
    assert!(
        scrolled["elements_unchanged"].is_null(),
        "what stayed is not news after a scroll: {scrolled:#}"
    );
}

#[tokio::test]
async fn wait_for_text_that_appears_after_a_second() {
    let s = "act-wait";
    open(s, "form.html").await;
    let start = ref_of(&element_lines(s).await, "Start timer");
    act(s, json!({ "action": "click", "ref": start })).await;
    let waited = act(
        s,
        json!({ "action": "wait", "until": "Arrived after a second" }),
    )
    .await;
    assert!(waited["waited_ms"].is_u64(), "{waited:#}");
    assert!(
        common::page_text(s)
            .await
            .contains("Arrived after a second")
    );
    fails(
        "browser_interact",
        json!({ "session": s, "action": "wait", "until": "Never comes", "timeout_ms": 300 }),
        "TIMEOUT",
    )
    .await;
}

#[tokio::test]
async fn dialogs_are_reported_and_answered_as_asked() {
    let s = "act-dialogs";
    open(s, "dialogs.html").await;
    let lines = element_lines(s).await;
    let alert = act(
        s,
        json!({ "action": "click", "ref": ref_of(&lines, "Alert me") }),
    )
    .await;
    assert_eq!(
        alert["dialogs"][0]["message"], "Just so you know",
        "{alert:#}"
    );
    act(s, json!({ "action": "dialog", "accept": false })).await;
    act(
        s,
        json!({ "action": "click", "ref": ref_of(&lines, "Confirm me") }),
    )
    .await;
    assert!(common::page_text(s).await.contains("confirm=false"));
    act(
        s,
        json!({ "action": "dialog", "accept": true, "prompt_text": "Grace" }),
    )
    .await;
    let prompt = act(
        s,
        json!({ "action": "click", "ref": ref_of(&lines, "Prompt me") }),
    )
    .await;
    assert_eq!(prompt["dialogs"][0]["type"], "prompt");
    assert!(common::page_text(s).await.contains("prompt=Grace"));
}

#[tokio::test]
async fn clicking_a_link_reports_the_navigation_and_new_tabs() {
    let s = "act-links";
    open(s, "links.html").await;
    let lines = element_lines(s).await;
    let blank = act(
        s,
        json!({ "action": "click", "ref": ref_of(&lines, "New tab link") }),
    )
    .await;
    assert_eq!(
        blank["new_tabs"].as_array().map(Vec::len),
        Some(1),
        "{blank:#}"
    );
    let go = act(
        s,
        json!({ "action": "click", "ref": ref_of(&lines, "Go to B") }),
    )
    .await;
    assert_eq!(go["navigated"], true, "{go:#}");
    assert_eq!(go["title"], "History B");
    common::stale(
        "browser_interact",
        json!({ "session": s, "action": "click", "ref": ref_of(&lines, "Go to B") }),
    )
    .await;
}

#[tokio::test]
async fn bad_refs_and_covered_targets_are_clear_errors() {
    let s = "act-errors";
    open(s, "form.html").await;
    let lines = element_lines(s).await;
    fails(
        "browser_interact",
        json!({ "session": s, "action": "click", "ref": 99999 }),
        "NO_SUCH_REF",
    )
    .await;
    let covered = fails(
        "browser_interact",
        json!({ "session": s, "action": "click", "ref": ref_of(&lines, "Under the overlay") }),
        "INVALID_ARGUMENT",
    )
    .await;
    assert!(
        covered["error"]["message"]
            .as_str()
            .unwrap()
            .contains("covered by <div#overlay>"),
        "{covered:#}"
    );
    let missing = fails(
        "browser_interact",
        json!({ "session": s, "action": "type", "ref": 1 }),
        "INVALID_ARGUMENT",
    )
    .await;
    let message = missing["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("`text`") && message.contains("type"),
        "{message}"
    );
    let thrown = fails(
        "browser_interact",
        json!({ "session": s, "action": "evaluate", "script": "throw new Error('boom here')" }),
        "INVALID_ARGUMENT",
    )
    .await;
    assert!(
        thrown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("boom here")
    );
    let value = ok(
        "browser_interact",
        json!({ "session": s, "action": "evaluate", "script": "() => document.title + '!'" }),
    )
    .await;
    assert_eq!(value["value"], "Form!");
    let _ = harness();
}

/// A form submit only plans its navigation; Chromium starts it (and fires `beforeunload`) in a
/// later task, which a busy renderer may run after our readiness probes. The page must count as
/// leaving from the submit on, or a click on "Sign in" can be reported as settled, not navigated.
#[tokio::test]
async fn a_planned_form_submission_counts_as_leaving_until_it_starts() {
    let s = "act-submit";
    let leaving_after = |submit: &str| {
        format!(
            "() => {{ const form = document.querySelector('form'); \
             form.username.value = 'alice'; form.password.value = 'wonderland'; {submit}; \
             return __wp.state(null).leavingMs; }}"
        )
    };
    let cases = [
        ("form.requestSubmit()", true),
        ("form.submit()", true),
        (
            "form.addEventListener('submit', (e) => e.preventDefault()); form.requestSubmit()",
            false,
        ),
        ("form.target = '_blank'; form.requestSubmit()", false),
    ];
    for (submit, leaves) in cases {
        open(s, "login").await;
        let state = act(
            s,
            json!({ "action": "evaluate", "script": leaving_after(submit) }),
        )
        .await;
        assert_eq!(state["value"].is_number(), leaves, "{submit}: {state:#}");
    }
    // And end to end: the real click navigates, and the result says so.
    open(s, "login").await;
    let lines = element_lines(s).await;
    act(
        s,
        json!({ "action": "type", "ref": ref_of(&lines, "Username"), "text": "alice" }),
    )
    .await;
    act(
        s,
        json!({ "action": "type", "ref": ref_of(&lines, "Password"), "text": "wonderland" }),
    )
    .await;
    let signed_in = act(
        s,
        json!({ "action": "click", "ref": ref_of(&lines, "Sign in") }),
    )
    .await;
    assert_eq!(signed_in["navigated"], true, "{signed_in:#}");
    assert_eq!(signed_in["title"], "Account", "{signed_in:#}");
}

/// On a page that never finishes loading (a pixel whose server never answers): acting waits
/// only for what the action started. A `fetch` whose answer nobody reads counts until its
/// response arrives, not until its body (which the server keeps open for seconds) ends.
#[tokio::test]
async fn actions_wait_only_for_what_they_started() {
    let s = "act-busy";
    let opened = ok(
        "browser_navigate",
        json!({ "session": s, "target": harness().page("busy.html"), "wait_for": "Notes" }),
    )
    .await;
    assert_eq!(opened["ready"]["by"], "wait_for", "{opened:#}");
    // Nothing to wait for: the pending pixel and the document's own load are not the action's.
    let title = act(
        s,
        json!({ "action": "evaluate", "script": "document.title" }),
    )
    .await;
    assert_eq!(title["value"], "Notes");
    // Quiet, not settled by the cap or the time limit: the never-ending pixel was not waited for.
    assert!(common::ready_by(&title).starts_with("quiet"), "{title:#}");

    let save = ref_of(&element_lines(s).await, "button \"Save\"");
    let saved = act(s, json!({ "action": "click", "ref": save })).await;
    assert!(common::ready_by(&saved).starts_with("quiet"), "{saved:#}");
    let elapsed = saved["elapsed_ms"].as_u64().unwrap();
    let answer = common::page_fixtures::SLOW_POST_MS;
    assert!(
        (answer..answer + 500).contains(&elapsed),
        "the click took {elapsed} ms for a {answer} ms answer: {saved:#}"
    );
    assert!(common::page_text(s).await.contains("Saved"));
    assert!(
        common::page_fixtures::received().contains(&("/slow-post".into(), "Buy milk".into())),
        "the server got the note"
    );
}

/// Work a click schedules through messages — a MessageChannel, as React's scheduler uses, or
/// window.postMessage — is waited for like timers: the result shows what it rendered.
#[tokio::test]
async fn work_scheduled_through_messages_is_waited_for() {
    let s = "act-messages";
    open(s, "scheduler.html").await;
    for how in ["channel", "window"] {
        let lines = element_lines(s).await;
        let button = ref_of(
            &lines,
            if how == "channel" {
                "Build on a channel"
            } else {
                "Build on window messages"
            },
        );
        let built = act(s, json!({ "action": "click", "ref": button })).await;
        let added = built["added"].as_str().unwrap_or_default();
        assert!(
            added.contains(&format!("Download {how} report")),
            "{how}: {built:#}"
        );
    }
}

/// Typing with `clear` replaces what a field holds the way a person's select-all and typing
/// would: one input event with the new text, no intermediate empty value; contenteditable
/// blocks and fields that cannot select (email) end up with just the new text too.
#[tokio::test]
async fn typing_over_a_value_replaces_it_in_one_input_event() {
    let s = "act-replace";
    open(s, "form.html").await;
    let setup = "() => { const seen = []; window.__seen = seen; \
        for (const el of document.querySelectorAll('input[name=first], #email, #note')) \
          el.addEventListener('input', () => seen.push(el.value ?? el.textContent)); \
        document.querySelector('input[name=first]').value = 'Old name'; }";
    let editable = "() => { const email = document.createElement('input'); email.type = 'email'; \
        email.id = 'email'; email.setAttribute('aria-label', 'Email'); email.value = 'old@example.com'; \
        const note = document.createElement('div'); note.id = 'note'; note.contentEditable = 'true'; \
        note.setAttribute('aria-label', 'Note'); note.textContent = 'Old note'; \
        document.body.prepend(email, note); }";
    act(s, json!({ "action": "evaluate", "script": editable })).await;
    act(s, json!({ "action": "evaluate", "script": setup })).await;
    let lines = element_lines(s).await;
    for (field, text) in [
        ("First name", "Ada"),
        ("Email", "ada@example.com"),
        ("Note", "New note"),
    ] {
        act(
            s,
            json!({ "action": "type", "ref": ref_of(&lines, field), "text": text }),
        )
        .await;
    }
    let read = "() => [document.querySelector('input[name=first]').value, \
        document.getElementById('email').value, document.getElementById('note').textContent, window.__seen]";
    let values = act(s, json!({ "action": "evaluate", "script": read })).await["value"].clone();
    assert_eq!(values[0], "Ada");
    assert_eq!(values[1], "ada@example.com");
    assert_eq!(values[2], "New note");
    let seen: Vec<&str> = values[3]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap_or_default())
        .collect();
    assert!(
        seen.starts_with(&["Ada"]),
        "the first field saw one input event with the new text: {seen:?}"
    );
}

/// After an action only what changed is listed: the 20 items a click loaded (and no others),
/// a checkbox's new state, removed refs; the refs of everything else stay as they were.
#[tokio::test]
async fn an_action_lists_only_what_changed_and_refs_stay() {
    let s = "act-diff";
    open(s, "grow.html").await;
    let before = element_lines(s).await;
    let item = |lines: &[String], n: u32| ref_of(lines, &format!("link \"Item {n}\""));
    let first_items: Vec<u32> = (1..=10).map(|n| item(&before, n)).collect();

    let more = ref_of(&before, "button \"Load 20 more\"");
    let loaded = act(s, json!({ "action": "click", "ref": more })).await;
    assert_eq!(
        loaded["added"].as_str().unwrap().lines().count(),
        20,
        "{loaded:#}"
    );
    assert!(loaded["elements_added"].is_null(), "{loaded:#}");
    assert!(
        loaded["elements_removed"].is_null(),
        "none removed, so not said: {loaded:#}"
    );
    let added = loaded["added"].as_str().unwrap();
    assert_eq!(added.lines().count(), 20, "{added}");
    assert!(added.contains("link \"Item 11\"") && added.contains("link \"Item 30\""));
    assert!(!added.contains("link \"Item 10\""), "{added}");
    assert_eq!(
        loaded["elements_unchanged"].as_u64(),
        Some(before.len() as u64),
        "{loaded:#}"
    );
    let after = element_lines(s).await;
    let same: Vec<u32> = (1..=10).map(|n| item(&after, n)).collect();
    assert_eq!(same, first_items, "the refs of what was there stay");

    let subscribe = ref_of(&after, "checkbox \"Subscribe\"");
    let ticked = act(s, json!({ "action": "click", "ref": subscribe })).await;
    let changed = ticked["changed"].as_str().unwrap_or_default();
    assert!(
        changed.starts_with(&format!("[{subscribe}] checkbox \"Subscribe\""))
            && changed.contains("checked"),
        "{ticked:#}"
    );
    assert!(ticked["elements_added"].is_null(), "{ticked:#}");

    // A change the page makes on its own after an action returned, read as a diff of the last
    // list.
    let drop = ref_of(&after, "button \"Remove first 3\"");
    let dropped = act(s, json!({ "action": "click", "ref": drop })).await;
    assert!(dropped["elements_removed"].is_null(), "{dropped:#}");
    common::eventually("the page removed 3", Duration::from_secs(5), || async {
        common::page_text(s).await.contains("Removed 3")
    })
    .await;
    let diff = ok(
        "browser_read",
        json!({ "session": s, "mode": "elements", "since": "last" }),
    )
    .await;
    let content = diff["content"].as_str().unwrap();
    let gone = format!(
        "- [{}] [{}] [{}]",
        first_items[0], first_items[1], first_items[2]
    );
    assert!(content.contains(&gone), "{content}");
    assert!(content.trim_end().ends_with("unchanged"), "{content}");
    assert!(!content.contains("+ "), "{content}");
    fails(
        "browser_read",
        json!({ "session": s, "mode": "elements", "since": "yesterday" }),
        "INVALID_ARGUMENT",
    )
    .await;
}

/// An action's result says only what is new: where the session is when that changed (another
/// session than `default`, a new URL and title after a click that navigates), nothing at its
/// default, and the typed value once; `verbose: true` says where it is in full.
#[tokio::test]
async fn an_action_says_only_what_is_new() {
    let page = harness().page("form.html");
    let arrived = ok("browser_navigate", json!({ "target": page })).await;
    assert_eq!(
        arrived["session"], "default",
        "a navigation says where it is"
    );
    let first = ref_of(&element_lines("default").await, "First name");
    let typed = ok(
        "browser_interact",
        json!({ "action": "type", "ref": first, "text": "Ada" }),
    )
    .await;
    assert_eq!(typed["value"], "Ada", "{typed}");
    let size = typed.to_string().chars().count();
    assert!(size <= 100, "{size} characters: {typed}");
    for repeated in ["session", "tab", "url", "title", "navigated", "changed"] {
        assert!(typed[repeated].is_null(), "{repeated} in {typed}");
    }
    let verbose = ok(
        "browser_interact",
        json!({ "action": "type", "ref": first, "text": "Ada", "verbose": true }),
    )
    .await;
    assert_eq!(verbose["session"], "default", "{verbose}");
    assert_eq!(verbose["url"], page, "{verbose}");
    assert_eq!(verbose["title"], "Form", "{verbose}");
    assert!(verbose["tab"].is_string(), "{verbose}");

    let s = "act-lean";
    open(s, "history-a.html").await;
    let hover = act(
        s,
        json!({ "action": "hover", "ref": ref_of(&element_lines(s).await, "to B") }),
    )
    .await;
    assert_eq!(hover["session"], s, "another session is news: {hover}");
    assert!(
        hover["url"].is_null() && hover["title"].is_null(),
        "{hover}"
    );
    let clicked = act(
        s,
        json!({ "action": "click", "ref": ref_of(&element_lines(s).await, "to B") }),
    )
    .await;
    assert_eq!(clicked["navigated"], true, "{clicked}");
    assert_eq!(
        clicked["url"],
        harness().page("history-b.html"),
        "{clicked}"
    );
    assert_eq!(clicked["title"], "History B", "{clicked}");
}
