//! The Playwright export's own tests: a checkout's steps as the spec's lines.

use super::*;
use serde_json::{Value, json};

fn step(seq: u64, tool: &str, args: Value, target: Option<ElementIdentity>) -> Step {
    Step {
        seq,
        at: String::new(),
        tool: tool.into(),
        args,
        target,
        tab: Some("t1".into()),
        url: Some("http://shop.test/cart".into()),
        ok: true,
        summary: String::new(),
        elapsed_ms: 1,
        page_events: None,
        events: None,
        screenshot: None,
        person: Vec::new(),
        secrets: Vec::new(),
    }
}

fn element(role: &str, name: &str, origin: &str, path: &str) -> ElementIdentity {
    ElementIdentity {
        role: role.into(),
        name: name.into(),
        nth: 0,
        tag: "input".into(),
        attributes: Default::default(),
        origin: origin.into(),
        path: path.into(),
        in_frame: origin != "http://shop.test",
    }
}

#[test]
fn a_checkout_becomes_role_locators_with_frames_secrets_and_expectations() {
    let mut password = step(
        2,
        "browser_interact",
        json!({ "action": "type", "text": "{{password}}", "submit": true }),
        Some(element("textbox", "Password", "http://shop.test", "/cart")),
    );
    password.secrets = vec!["password".into()];
    let mut handoff = step(5, "browser_interact", json!({ "action": "handoff" }), None);
    handoff.person = vec![
        PersonInput::Click {
            target: Some(element("button", "I am human", "http://shop.test", "/cart")),
            frame: None,
        },
        PersonInput::Key {
            key: "Enter".into(),
        },
    ];
    let steps = vec![
        step(
            1,
            "browser_navigate",
            json!({ "target": "http://shop.test/cart?x=`1`" }),
            None,
        ),
        password,
        step(3, "browser_read", json!({ "mode": "markdown" }), None),
        step(
            4,
            "browser_interact",
            json!({ "action": "click" }),
            Some(element("button", "Pay \"now\"", "http://pay.test", "/form")),
        ),
        handoff,
    ];
    let expect = Expectations {
        text: vec!["Paid".into()],
        url: Some("/done*".into()),
        no_console_errors: true,
        no_failed_requests: false,
    };
    let spec = playwright_spec(&steps, "checkout", Some("http://staging.test/"), &expect);
    for line in [
        "const BASE_URL = process.env.BASE_URL ?? \"http://staging.test\";",
        "const secret_password = process.env.WEBPILOT_SECRET_PASSWORD ?? '';",
        "await page.goto(`${BASE_URL}/cart?x=\\`1\\``);",
        "await page.getByRole(\"textbox\", { name: \"Password\", exact: true }).fill(secret_password);",
        "await page.getByRole(\"textbox\", { name: \"Password\", exact: true }).press('Enter');",
        "await page.frameLocator(\"iframe[src*=\\\"/form\\\"]\").getByRole(\"button\", { name: \"Pay \\\"now\\\"\", exact: true }).click();",
        "await expect(page.getByText(\"Paid\").first()).toBeVisible();",
        "await expect(page).toHaveURL(new RegExp(\"\\\\/done.*\"));",
        "expect(consoleErrors).toEqual([]);",
        "await page.getByRole(\"button\", { name: \"I am human\", exact: true }).click();",
        "await page.keyboard.press(\"Enter\");",
    ] {
        assert!(spec.contains(line), "{line}\n---\n{spec}");
    }
    assert!(!spec.contains("failedRequests"), "{spec}");
}

#[test]
fn elements_without_an_aria_role_are_found_by_their_attributes() {
    let mut odd = element("StaticText", "", "http://shop.test", "/cart");
    odd.attributes.insert("data-testid".into(), "total".into());
    assert_eq!(by_role(&odd), None);
    assert_eq!(by_attributes(&odd), "getByTestId(\"total\")");
    odd.attributes.clear();
    odd.attributes.insert("name".into(), "q\"x".into());
    assert_eq!(
        by_attributes(&odd),
        "locator(\"[name=\\\"q\\\\\\\"x\\\"]\")"
    );
}

/// Recorded arguments are read as the tools' own types: a mode, a direction, a key list as the
/// tool took them; arguments the tool no longer takes are said to be left out, not guessed at.
#[test]
fn steps_are_read_in_the_tools_own_argument_types() {
    let steps = vec![
        step(1, "browser_navigate", json!({ "mode": "back" }), None),
        step(
            2,
            "browser_interact",
            json!({ "action": "scroll", "direction": "up", "amount": 300 }),
            None,
        ),
        step(
            3,
            "browser_interact",
            json!({ "action": "send_keys", "keys": "Tab Enter", "verbose": true }),
            None,
        ),
        step(
            4,
            "browser_interact",
            json!({ "action": "click", "reff": 3 }),
            None,
        ),
    ];
    let spec = playwright_spec(&steps, "typed", None, &Expectations::default());
    for line in [
        "await page.goBack();",
        "await page.mouse.wheel(0, -300);",
        "await page.keyboard.press(\"Tab\");",
        "await page.keyboard.press(\"Enter\");",
        "// not exported: its arguments are not what browser_interact takes now",
    ] {
        assert!(spec.contains(line), "{line}\n---\n{spec}");
    }
    assert!(!spec.contains("page.goto"), "{spec}");
}
