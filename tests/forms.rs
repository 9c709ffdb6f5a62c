//! Forms against real Chromium: every kind of control filled with browser_interact and checked
//! by what the server received, what a result says a field holds, and the form state (required,
//! invalid, error text) the element list shows — on the page, in shadow roots and in a frame of
//! another site.

mod common;

use std::time::Duration;

use common::{element_lines, fails, harness, ok, open, ref_of};
use serde_json::{Value, json};

async fn act(session: &str, args: Value) -> Value {
    let mut args = args;
    args["session"] = json!(session);
    ok("browser_interact", args).await
}

async fn evaluate(session: &str, script: &str) -> Value {
    act(session, json!({ "action": "evaluate", "script": script })).await["value"].clone()
}

fn line_of<'a>(lines: &'a [String], needle: &str) -> &'a str {
    lines
        .iter()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?}: {lines:#?}"))
}

/// What fixtures/fields.html sends once filled by `fill_every_field`, in document order.
fn expected_fields(marker: &str) -> Vec<(String, String)> {
    [
        ("text", marker),
        ("reference", "WP-42"),
        ("search", "analytical engine"),
        ("email", "ada@example.com"),
        ("url", "https://example.com/notes"),
        ("tel", "+44 20 7946 0958"),
        ("password", "s3cret!"),
        ("number", "7"),
        ("range", "30"),
        ("color", "#1e90ff"),
        ("date", "2027-03-15"),
        ("time", "13:45"),
        ("month", "2027-03"),
        ("week", "2027-W11"),
        ("meeting", "2027-03-15T13:45"),
        ("terms", "yes"),
        ("size", "l"),
        ("country", "jp"),
        ("toppings", "olives"),
        ("toppings", "basil"),
        ("comment", "line one\r\nline two"),
        ("story", "Once upon a time"),
        ("attachment", "notes.txt"),
        ("nickname", "Countess"),
        ("code", "ABCDE"),
        ("shout", "HELLO"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// The fields form's submissions the server received whose text field is `marker`.
fn received_fields(marker: &str) -> Vec<Vec<(String, String)>> {
    common::page_fixtures::received()
        .into_iter()
        .filter(|(path, _)| path == "/fields")
        .map(|(_, body)| {
            url::form_urlencoded::parse(body.as_bytes())
                .into_owned()
                .collect::<Vec<_>>()
        })
        .filter(|fields| fields.first() == Some(&("text".to_string(), marker.to_string())))
        .collect()
}

/// Fills every field of fields.html (on the page or in a frame) through browser_interact,
/// checking what each result says the field holds, then presses Send.
async fn fill_every_field(s: &str, marker: &str) {
    std::fs::write(
        harness()
            .app
            .config
            .data_dir
            .join("files")
            .join("notes.txt"),
        b"twelve bytes",
    )
    .unwrap();
    let lines = element_lines(s).await;
    let field = |name: &str| ref_of(&lines, &format!("\"{name}\""));
    let typed = [
        ("Text", marker, marker),
        ("Search", "analytical engine", "analytical engine"),
        ("Email", "ada@example.com", "ada@example.com"),
        (
            "Website",
            "https://example.com/notes",
            "https://example.com/notes",
        ),
        ("Phone", "+44 20 7946 0958", "+44 20 7946 0958"),
        ("Password", "s3cret!", "•••••••"),
        ("Quantity", "7", "7"),
        ("Volume", "30", "30"),
        ("Colour", "#1E90FF", "#1e90ff"),
        ("Day", "2027-03-15", "2027-03-15"),
        ("Time", "13:45", "13:45"),
        ("Month", "2027-03", "2027-03"),
        ("Week", "2027-W11", "2027-W11"),
        ("Meeting", "2027-03-15T13:45", "2027-03-15T13:45"),
        ("Comment", "line one\nline two", "line one\nline two"),
        ("Story", "Once upon a time", "Once upon a time"),
        ("Nickname", "Countess", "Countess"),
    ];
    for (name, text, holds) in typed {
        let done = act(
            s,
            json!({ "action": "type", "ref": field(name), "text": text }),
        )
        .await;
        assert_eq!(done["value"], holds, "{name}: {done:#}");
        assert!(done.get("value_mismatch").is_none(), "{name}: {done:#}");
    }
    // A field that cuts what is typed, and one whose script rewrites it: the result says so.
    let cut = act(
        s,
        json!({ "action": "type", "ref": field("Code"), "text": "ABCDEFGH" }),
    )
    .await;
    assert_eq!(cut["value"], "ABCDE", "{cut:#}");
    assert_eq!(
        cut["value_mismatch"],
        json!({ "asked": "ABCDEFGH", "now": "ABCDE", "why": "maxlength 5" })
    );
    let shouted = act(
        s,
        json!({ "action": "type", "ref": field("Shout"), "text": "hello" }),
    )
    .await;
    assert_eq!(
        shouted["value_mismatch"],
        json!({ "asked": "hello", "now": "HELLO" }),
        "{shouted:#}"
    );
    for name in ["Accept terms", "Large"] {
        act(s, json!({ "action": "click", "ref": field(name) })).await;
    }
    let country = act(
        s,
        json!({ "action": "select", "ref": field("Country"), "option": "Japan" }),
    )
    .await;
    assert_eq!(country["value"], "Japan", "{country:#}");
    for (option, holds) in [("Olives", "Olives"), ("basil", "Olives, Basil")] {
        let chosen = act(
            s,
            json!({ "action": "select", "ref": field("Toppings"), "option": option }),
        )
        .await;
        assert_eq!(chosen["value"], holds, "{chosen:#}");
    }
    act(
        s,
        json!({ "action": "upload", "ref": field("Attachment"), "paths": ["notes.txt"] }),
    )
    .await;
    // The element list shows what the value controls hold.
    let now = element_lines(s).await;
    for (name, shown) in [
        ("Day", "value=\"2027-03-15\" type=date"),
        ("Colour", "value=\"#1e90ff\" type=color"),
        ("Volume", "value=\"30\" type=range"),
        ("Meeting", "value=\"2027-03-15T13:45\" type=datetime-local"),
        ("Accept terms", "checked"),
        ("Email", "type=email required"),
        ("Reference", "value=\"WP-42\" readonly"),
    ] {
        let line = line_of(&now, &format!("\"{name}\""));
        assert!(line.contains(shown), "{line}");
        assert!(!line.contains("invalid"), "{line}");
    }
    act(s, json!({ "action": "click", "ref": field("Send") })).await;
}

/// Every input type of the HTML standard, a controlled input that ignores writes without an
/// input event, a rich editor, a file, a cut field and a rewriting one: the server receives
/// exactly what was asked (or what the result said the field held).
#[tokio::test]
async fn every_kind_of_field_is_filled_and_the_server_receives_it() {
    let s = "forms-every-field";
    open(s, "fields.html").await;
    // The controlled fields really undo a value written without the native setter.
    let naive = "() => { const el = document.getElementById('nickname'); el.value = 'Naive'; \
        el.dispatchEvent(new Event('input', { bubbles: true })); return el.value; }";
    assert_eq!(evaluate(s, naive).await, "");
    fill_every_field(s, "Ada top").await;
    common::eventually(
        "the server receives the form",
        Duration::from_secs(10),
        || async { !received_fields("Ada top").is_empty() },
    )
    .await;
    assert_eq!(received_fields("Ada top"), vec![expected_fields("Ada top")]);
}

/// The same form in a frame of another site (run in a process of its own): a refused submit
/// shows the browser's validation error on the field's line, then everything is filled.
#[tokio::test]
async fn a_form_in_another_sites_frame_is_filled_the_same_way() {
    let s = "forms-frame";
    open(s, "fields-frame.html").await;
    let lines = element_lines(s).await;
    let in_frame = format!("(in frame {})", harness().cross_site);
    assert!(
        line_of(&lines, "\"Day\"").ends_with(&in_frame),
        "{lines:#?}"
    );
    let email = line_of(&lines, "\"Email\"");
    assert!(
        email.contains("required") && !email.contains("invalid"),
        "an untouched field is not in error: {email}"
    );
    act(
        s,
        json!({ "action": "click", "ref": ref_of(&lines, "\"Send\"") }),
    )
    .await;
    let refused = element_lines(s).await;
    let email = line_of(&refused, "\"Email\"");
    assert!(
        email.contains("required invalid error=\"Please fill out this field.\""),
        "{email}"
    );
    assert!(!line_of(&refused, "\"Phone\"").contains("invalid"));

    fill_every_field(s, "Ada frame").await;
    common::eventually(
        "the server receives the framed form",
        Duration::from_secs(10),
        || async { !received_fields("Ada frame").is_empty() },
    )
    .await;
    assert_eq!(
        received_fields("Ada frame"),
        vec![expected_fields("Ada frame")]
    );
}

/// Values a control cannot take are refused with the format it expects and change nothing;
/// unambiguous spellings are converted; a range clamps and says so.
#[tokio::test]
async fn malformed_values_are_refused_and_change_nothing() {
    let s = "forms-malformed";
    open(s, "fields.html").await;
    let lines = element_lines(s).await;
    let field = |name: &str| ref_of(&lines, &format!("\"{name}\""));
    let refuse = |name: &str, text: &str| {
        let args = json!({ "session": s, "action": "type", "ref": field(name), "text": text });
        async move { fails("browser_interact", args, "INVALID_ARGUMENT").await["error"].clone() }
    };
    for text in ["2027-13-45", "next Tuesday", "2027-02-30"] {
        let error = refuse("Day", text).await;
        let message = error["message"].as_str().unwrap();
        assert!(message.contains("YYYY-MM-DD"), "{error:#}");
        assert!(error["hint"].as_str().unwrap().contains("2027-03-15"));
    }
    let values = "() => ['date', 'number', 'time', 'color'].map((n) => document.querySelector(`[name=${n}]`).value)";
    assert_eq!(evaluate(s, values).await, json!(["", "", "", "#000000"]));
    let bounds = refuse("Quantity", "42").await;
    let message = bounds["message"].as_str().unwrap();
    assert!(
        message.starts_with("refused \"42\"") && message.ends_with("above its max 10"),
        "{bounds:#}"
    );
    assert!(bounds["hint"].as_str().unwrap().contains("from 1 to 10"));
    refuse("Quantity", "ten").await;
    refuse("Time", "25:00").await;
    let colour = refuse("Colour", "blue").await;
    assert!(colour["message"].as_str().unwrap().contains("#rrggbb"));
    assert_eq!(evaluate(s, values).await, json!(["", "", "", "#000000"]));
    let checkbox = refuse("Accept terms", "yes").await;
    assert!(checkbox["hint"].as_str().unwrap().contains("click"));
    let fixed = refuse("Reference", "WP-43").await;
    assert!(
        fixed["message"]
            .as_str()
            .unwrap()
            .ends_with("it is read-only")
    );

    // The page is en-US: 03/04/2027 is the 4th of March; worded dates need no language.
    for (text, holds) in [
        ("03/04/2027", "2027-03-04"),
        ("15 March 2027", "2027-03-15"),
    ] {
        let done = act(
            s,
            json!({ "action": "type", "ref": field("Day"), "text": text }),
        )
        .await;
        assert_eq!(done["value"], holds, "{done:#}");
        assert!(done.get("value_mismatch").is_none(), "{done:#}");
    }
    let clamped = act(
        s,
        json!({ "action": "type", "ref": field("Volume"), "text": "75" }),
    )
    .await;
    assert_eq!(clamped["value"], "50", "{clamped:#}");
    assert_eq!(clamped["value_mismatch"]["asked"], "75");
    assert!(
        clamped["value_mismatch"]["why"]
            .as_str()
            .unwrap()
            .starts_with("clamped to 0–50"),
        "{clamped:#}"
    );
}

/// A date set nine times in a row, between typings into a text field: each lands whole, as a
/// person's pick would set it, and the text field keeps its own value. (What a date fill costs
/// against typing is a speed question: printed here, judged in the benches.)
#[tokio::test]
async fn a_date_set_again_and_again_lands_whole_each_time() {
    let s = "forms-cost";
    open(s, "fields.html").await;
    let lines = element_lines(s).await;
    let (day, text) = (ref_of(&lines, "\"Day\""), ref_of(&lines, "\"Text\""));
    let (mut date_ms, mut text_ms) = (Vec::new(), Vec::new());
    for round in 0..9 {
        let date = format!("2027-03-{:02}", 10 + round);
        let started = std::time::Instant::now();
        let set = act(s, json!({ "action": "type", "ref": day, "text": date })).await;
        date_ms.push(started.elapsed().as_millis());
        assert_eq!(set["value"], date.as_str(), "{set:#}");
        assert!(set["value_mismatch"].is_null(), "{set:#}");
        let started = std::time::Instant::now();
        let typed = act(
            s,
            json!({ "action": "type", "ref": text, "text": "abcdefghij" }),
        )
        .await;
        text_ms.push(started.elapsed().as_millis());
        assert_eq!(typed["value"], "abcdefghij", "{typed:#}");
    }
    eprintln!("date fills {date_ms:?} ms, ten-character typings {text_ms:?} ms");
}

/// A wizard's failed step: the element lines of the fields in error (on the page and in a
/// shadow root) say `invalid` with their error text, the annotated screenshot's legend too; once
/// fixed, the lines lose both and the description comes back.
#[tokio::test]
async fn a_failed_wizard_step_shows_its_errors_on_the_right_lines_until_fixed() {
    let s = "forms-wizard";
    open(s, "wizard.html").await;
    let lines = element_lines(s).await;
    assert!(line_of(&lines, "\"Full name\"").ends_with("\"Full name\" required"));
    assert!(
        line_of(&lines, "\"Email\"").ends_with("desc=\"We only use it for receipts\""),
        "{lines:#?}"
    );
    let field = |name: &str| ref_of(&lines, &format!("\"{name}\""));
    act(
        s,
        json!({ "action": "type", "ref": field("Promo code"), "text": "ABC" }),
    )
    .await;
    act(s, json!({ "action": "click", "ref": field("Next") })).await;

    let failed = element_lines(s).await;
    for (name, error) in [
        (
            "Full name",
            "required invalid error=\"Enter your full name\"",
        ),
        (
            "Email",
            "invalid error=\"Enter an email address like ada@example.com\"",
        ),
        ("Promo code", "invalid error=\"Codes have 6 letters\""),
    ] {
        let line = line_of(&failed, &format!("\"{name}\""));
        assert!(line.ends_with(error), "{line}");
    }
    assert!(!line_of(&failed, "\"Next\"").contains("invalid"));
    let shot = ok(
        "browser_screenshot",
        json!({ "session": s, "annotate": true }),
    )
    .await;
    let legend = shot["legend"].as_array().unwrap();
    let entry = legend
        .iter()
        .find(|e| e["name"] == "Full name")
        .expect("the name field is in the legend");
    assert_eq!(entry["state"], "required invalid", "{entry:#}");
    assert_eq!(entry["note"], "Enter your full name");

    for (name, text) in [
        ("Full name", "Ada Lovelace"),
        ("Email", "ada@example.com"),
        ("Promo code", "SPRING"),
    ] {
        act(
            s,
            json!({ "action": "type", "ref": field(name), "text": text }),
        )
        .await;
    }
    let fixed = element_lines(s).await;
    assert!(
        !fixed
            .iter()
            .any(|l| l.contains("invalid") || l.contains("error=")),
        "{fixed:#?}"
    );
    assert!(line_of(&fixed, "\"Email\"").ends_with("desc=\"We only use it for receipts\""));
    act(s, json!({ "action": "click", "ref": field("Next") })).await;
    assert!(common::page_text(s).await.contains("Welcome aboard"));
}
