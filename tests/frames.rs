//! Pages built like real sites: a checkout on 127.0.0.1 embedding a card form from another site
//! (`localhost`: Chromium runs it in a process of its own), which embeds a third site's frame;
//! another frame below the fold. Filled, submitted and read through refs; what the server
//! received is asserted, not only what the page shows.

mod common;

use std::time::Duration;

use common::{element_lines, harness, ok, open, ref_of};
use image::GenericImageView;
use serde_json::{Value, json};

/// The out-of-process frames Chromium runs, from its DevTools target list.
async fn frame_targets() -> Vec<Value> {
    let address = harness()
        .block_on(async {
            harness()
                .app
                .browser
                .pool
                .existing()
                .await
                .map(|browser| browser.devtools_address().to_string())
        })
        .expect("the browser runs");
    let http = address.replacen("ws://", "http://", 1);
    let base = &http[..http.find("/devtools/").expect("a DevTools address")];
    let targets = common::get_json(&format!("{base}/json/list")).await;
    let targets = targets.as_array().expect("a target list");
    targets
        .iter()
        .filter(|t| t["type"] == "iframe")
        .cloned()
        .collect()
}

fn line_of<'a>(lines: &'a [String], needle: &str) -> &'a str {
    lines
        .iter()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line contains {needle:?}: {lines:#?}"))
}

async fn act(session: &str, args: Value) -> Value {
    let mut args = args;
    args["session"] = json!(session);
    ok("browser_interact", args).await
}

async fn read(session: &str, mode: &str, query: Option<&str>) -> Value {
    let mut args = json!({ "session": session, "mode": mode, "max_tokens": 100000 });
    if let Some(query) = query {
        args["query"] = json!(query);
    }
    ok("browser_read", args).await
}

#[tokio::test]
async fn a_card_form_in_another_sites_frame_is_filled_submitted_and_read() {
    let s = "frames-checkout";
    // The session and its tab first: a call's time limit covers opening them too.
    ok("browser_read", json!({ "session": s })).await;
    // Ready as soon as the frames are: their documents are reported by their own targets. A
    // frame document left pending would hold readiness until it counts as long-lived
    // (LONG_REQUEST_MS after it started), so this limit lets only a true settle answer "quiet".
    let arrived = ok(
        "browser_navigate",
        json!({ "session": s, "target": harness().page("checkout.html"),
                "timeout_ms": webpilot::browser::LONG_REQUEST_MS }),
    )
    .await;
    assert_eq!(arrived["ready"]["by"], "quiet", "{arrived:#}");
    let cross = &harness().cross_site;
    let third = &harness().third_site;
    // The test means nothing unless Chromium really runs these frames out of process.
    let targets = frame_targets().await;
    for site in [cross, third] {
        assert!(
            targets
                .iter()
                .any(|t| t["url"].as_str().unwrap().starts_with(site.as_str())),
            "no out-of-process frame of {site}: {targets:#?}"
        );
    }

    let lines = element_lines(s).await;
    let in_pay = format!("(in frame {cross})");
    for control in [
        "textbox \"Card holder\"",
        "checkbox \"I accept the terms\"",
        "combobox \"Plan\"",
        "button \"Pay now\"",
    ] {
        let line = line_of(&lines, control);
        assert!(line.ends_with(&in_pay), "{line}");
    }
    assert!(line_of(&lines, "Verify with bank").ends_with(&format!("(in frame {third})")));
    // In document order: the frame's controls sit between the page's heading and its button.
    let position = |needle: &str| lines.iter().position(|l| l.contains(needle)).unwrap();
    assert!(
        position("Card holder") < position("Place order"),
        "{lines:#?}"
    );
    assert!(line_of(&lines, "Place order").contains("disabled"));

    let holder = ref_of(&lines, "Card holder");
    let terms = ref_of(&lines, "I accept the terms");
    act(
        s,
        json!({ "action": "type", "ref": holder, "text": "Ada Lovelace" }),
    )
    .await;
    act(s, json!({ "action": "click", "ref": terms })).await;
    act(
        s,
        json!({ "action": "select", "ref": ref_of(&lines, "Plan"), "option": "Pro" }),
    )
    .await;
    let checked = element_lines(s).await;
    assert!(
        line_of(&checked, "I accept the terms").contains("checked"),
        "{checked:#?}"
    );
    assert!(line_of(&checked, "Card holder").contains("Ada Lovelace"));

    let paid = act(
        s,
        json!({ "action": "click", "ref": ref_of(&lines, "Pay now") }),
    )
    .await;
    assert!(paid["navigated"].is_null(), "the top page stays: {paid:#}");
    let posted: Vec<String> = common::page_fixtures::received()
        .into_iter()
        .filter(|(path, _)| path == "/pay")
        .map(|(_, body)| body)
        .collect();
    assert_eq!(
        posted,
        vec!["holder=Ada+Lovelace&terms=yes&plan=pro".to_string()],
        "what the frame's server received"
    );

    // The frame's receipt is read in place, in Markdown, text and search.
    let markdown = read(s, "markdown", None).await;
    let content = markdown["content"].as_str().unwrap();
    assert!(
        content.contains("Payment accepted for Ada Lovelace"),
        "{content}"
    );
    assert!(content.contains(&format!("frame {cross}")), "{content}");
    let total = content.find("42.00 EUR").unwrap();
    let receipt = content.find("Payment accepted").unwrap();
    assert!(total < receipt, "the frame sits at its place: {content}");
    let extracted = read(s, "extract", Some("was the payment accepted")).await;
    assert!(
        extracted["content"]
            .as_str()
            .unwrap()
            .contains("Payment accepted for Ada Lovelace"),
        "{extracted:#}"
    );
    let text = read(s, "text", None).await;
    assert!(
        text["content"]
            .as_str()
            .unwrap()
            .contains("Payment accepted for Ada Lovelace")
    );
    let found = read(s, "find", Some("Payment accepted")).await;
    let hit = found["content"].as_str().unwrap();
    assert!(hit.contains("§ Checkout › Payment › Receipt"), "{hit}");
    assert!(hit.contains(&in_pay), "{hit}");

    // The frame's old document is gone: its refs are stale, never retargeted.
    common::stale(
        "browser_interact",
        json!({ "session": s, "action": "type", "ref": holder, "text": "x" }),
    )
    .await;

    // The embedding page heard from the frame: its button works now.
    common::eventually(
        "the order button is enabled",
        Duration::from_secs(10),
        || async { !line_of(&element_lines(s).await, "Place order").contains("disabled") },
    )
    .await;
    let lines = element_lines(s).await;
    act(
        s,
        json!({ "action": "click", "ref": ref_of(&lines, "Place order") }),
    )
    .await;
    assert!(common::page_text(s).await.contains("Order placed"));
}

#[tokio::test]
async fn frames_inside_frames_and_below_the_fold_take_real_input() {
    let s = "frames-nested";
    open(s, "checkout.html").await;
    let lines = element_lines(s).await;
    let verify = ref_of(&lines, "Verify with bank");
    let clicked = act(s, json!({ "action": "click", "ref": verify })).await;
    assert!(
        common::ready_by(&clicked).starts_with("quiet"),
        "{clicked:#}"
    );
    let found = read(s, "find", Some("Bank verified")).await;
    let hit = found["content"].as_str().unwrap();
    assert!(
        hit.contains(&format!("(in frame {})", harness().third_site)),
        "{hit}"
    );
    assert!(hit.contains("§ Checkout › Payment › Pay by card"), "{hit}");

    // The gift card frame is below the fold: listed off-screen, then scrolled to and used.
    let gift = line_of(&lines, "Gift code");
    let offscreen = lines
        .iter()
        .position(|l| l == webpilot::browser::OFFSCREEN_HEADER)
        .expect("an off-screen group");
    assert!(
        lines.iter().position(|l| l == gift).unwrap() > offscreen,
        "{lines:#?}"
    );
    let redeem = ref_of(&lines, "Redeem");
    // An empty code makes the frame alert(): answered, and reported like the page's own.
    let alerted = act(s, json!({ "action": "click", "ref": redeem })).await;
    assert_eq!(
        alerted["dialogs"][0]["message"], "Enter a code first",
        "{alerted:#}"
    );
    act(
        s,
        json!({ "action": "type", "ref": ref_of(&lines, "Gift code"), "text": "SPRING" }),
    )
    .await;
    act(s, json!({ "action": "click", "ref": redeem })).await;
    assert!(common::page_text(s).await.contains("Code SPRING accepted"));
    // The page scrolled to the frame for the click.
    let after = element_lines(s).await;
    let offscreen_now = after
        .iter()
        .position(|l| l == webpilot::browser::OFFSCREEN_HEADER);
    let redeem_now = after.iter().position(|l| l.contains("Redeem")).unwrap();
    assert!(offscreen_now.is_none_or(|o| redeem_now < o), "{after:#?}");
    // A frame that goes away takes its refs with it: stale, never retargeted.
    act(
        s,
        json!({ "action": "evaluate", "script": "document.getElementById('gift').remove()" }),
    )
    .await;
    let gone = common::stale(
        "browser_interact",
        json!({ "session": s, "action": "click", "ref": redeem }),
    )
    .await;
    assert!(
        gone["error"]["message"].as_str().unwrap().contains("frame"),
        "{gone:#}"
    );
}

#[tokio::test]
async fn annotated_screenshots_box_the_controls_of_other_sites_frames() {
    let s = "frames-shot";
    open(s, "checkout.html").await;
    let lines = element_lines(s).await;
    let pay = ref_of(&lines, "Pay now");
    let shot = ok(
        "browser_screenshot",
        json!({ "session": s, "annotate": true }),
    )
    .await;
    let legend = shot["legend"].as_array().expect("a legend");
    let entry = legend
        .iter()
        .find(|e| e["ref"] == pay)
        .unwrap_or_else(|| panic!("no box for [{pay}] Pay now: {legend:#?}"));
    // The box lies inside the payment frame's place on the page.
    let frame = ok(
        "browser_interact",
        json!({ "session": s, "action": "evaluate",
                "script": "() => { const r = document.getElementById('pay').getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; }" }),
    )
    .await["value"]
        .clone();
    let [left, top, right, bottom] = [0, 1, 2, 3].map(|i| frame[i].as_f64().unwrap());
    let [x, y, w, h] = [0, 1, 2, 3].map(|i| entry["box"][i].as_f64().unwrap());
    assert!(
        x > left && y > top && x + w < right && y + h < bottom,
        "{entry} in {frame}"
    );

    // An element of another site's frame below the fold, captured alone: its frame is scrolled
    // into view and the image is the (green) button, not the page around it.
    let redeem = ref_of(&lines, "Redeem");
    let alone =
        common::decode(&ok("browser_screenshot", json!({ "session": s, "ref": redeem })).await);
    // The page as it is now shows the button, where the element list boxes it.
    let now = ok(
        "browser_screenshot",
        json!({ "session": s, "annotate": true }),
    )
    .await;
    let button = now["legend"]
        .as_array()
        .expect("a legend")
        .iter()
        .find(|e| e["ref"] == redeem)
        .unwrap_or_else(|| panic!("[{redeem}] not in view: {now:#}"));
    let (width, height) = alone.dimensions();
    let [w, h] = [2, 3].map(|i| button["box"][i].as_f64().unwrap().round() as u32);
    assert!(
        width.abs_diff(w) <= 1 && height.abs_diff(h) <= 1,
        "{width}x{height} for a box of {w}x{h}"
    );
    let image::Rgb([r, g, b]) = alone.to_rgb8()[(2, height / 2)];
    assert!(
        g > 120 && r < 40 && b < 40,
        "not the button's green: {r},{g},{b}"
    );
}

/// Documents an out-of-process frame opens itself — a frame of its own, its own navigation —
/// are held to the URL policy like the tab's: a listener on a refused address sees nothing.
#[tokio::test]
async fn documents_a_frame_of_another_site_opens_are_held_to_the_policy() {
    let s = "frames-policy";
    let trap = common::Trap::new();
    let untouched = |step: &str| trap.untouched(step);
    let refused = trap.url("/inner");
    let query: String = url::form_urlencoded::byte_serialize(refused.as_bytes()).collect();
    open(s, &format!("policy-frames.html?to={query}")).await;
    let shows = |text: &'static str| async move { common::page_text(s).await.contains(text) };
    common::eventually(
        "the inner frame's load ends",
        Duration::from_secs(10),
        || shows("Inner frame done"),
    )
    .await;
    let lines = element_lines(s).await;
    assert!(
        line_of(&lines, "Go elsewhere").ends_with(&format!("(in frame {})", harness().cross_site)),
        "{lines:#?}"
    );
    untouched("a frame added by the other site's frame");
    act(
        s,
        json!({ "action": "click", "ref": ref_of(&lines, "Go elsewhere") }),
    )
    .await;
    // Refused, the frame shows Chromium's error page instead of its own.
    common::eventually(
        "the frame's navigation ends",
        Duration::from_secs(10),
        || async { !shows("Sneaky frame").await },
    )
    .await;
    untouched("the other site's frame navigating itself");
}
