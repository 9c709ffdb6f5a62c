//! A trace written as a Playwright Test file: the steps that change the page as role-based
//! locator calls (`getByRole('button', { name: 'Pay', exact: true })`, frame locators for the
//! frames of other sites), the agent's waits and the replay's expectations as `expect`s, secrets
//! read from the environment — so a QA team keeps the run in the tool it already uses.

use std::fmt::Write;

use super::{Expectations, recorded_base, replayed};
use crate::browser::ElementIdentity;
use crate::browser::live::PersonInput;
use crate::tools::interact::{Action, Direction, InteractArgs};
use crate::tools::navigate::{Mode, NavigateArgs};
use crate::trace::Step;

/// ARIA roles `getByRole` takes; an element of another role is found by its attributes.
const ARIA_ROLES: &[&str] = &[
    "alert",
    "alertdialog",
    "application",
    "article",
    "banner",
    "blockquote",
    "button",
    "caption",
    "cell",
    "checkbox",
    "code",
    "columnheader",
    "combobox",
    "complementary",
    "contentinfo",
    "definition",
    "deletion",
    "dialog",
    "directory",
    "document",
    "emphasis",
    "feed",
    "figure",
    "form",
    "generic",
    "grid",
    "gridcell",
    "group",
    "heading",
    "img",
    "insertion",
    "link",
    "list",
    "listbox",
    "listitem",
    "log",
    "main",
    "marquee",
    "math",
    "meter",
    "menu",
    "menubar",
    "menuitem",
    "menuitemcheckbox",
    "menuitemradio",
    "navigation",
    "none",
    "note",
    "option",
    "paragraph",
    "presentation",
    "progressbar",
    "radio",
    "radiogroup",
    "region",
    "row",
    "rowgroup",
    "rowheader",
    "scrollbar",
    "search",
    "searchbox",
    "separator",
    "slider",
    "spinbutton",
    "status",
    "strong",
    "subscript",
    "superscript",
    "switch",
    "tab",
    "table",
    "tablist",
    "tabpanel",
    "term",
    "textbox",
    "time",
    "timer",
    "toolbar",
    "tooltip",
    "tree",
    "treegrid",
    "treeitem",
];

/// The spec file for `steps`, named `title`; `base_url` is where the site lives by default
/// (`BASE_URL` in the environment overrides it).
pub fn playwright_spec(
    steps: &[Step],
    title: &str,
    base_url: Option<&str>,
    expect: &Expectations,
) -> String {
    let recorded = recorded_base(steps);
    let mut spec = Spec {
        out: String::new(),
        recorded: recorded.clone(),
        page_url: None,
    };
    spec.header(base_url.or(recorded.as_deref()), steps);
    let _ = writeln!(
        spec.out,
        "test({}, async ({{ page, context }}) => {{",
        js(title)
    );
    spec.watchers(expect);
    for step in steps {
        spec.step(step);
        if step.url.is_some() {
            spec.page_url.clone_from(&step.url);
        }
    }
    spec.expectations(expect);
    spec.out.push_str("});\n");
    spec.out
}

struct Spec {
    out: String,
    /// The origin of the recorded run's first navigation: URLs there move to `BASE_URL`.
    recorded: Option<String>,
    /// The page's URL before the step being written.
    page_url: Option<String>,
}

impl Spec {
    fn header(&mut self, base_url: Option<&str>, steps: &[Step]) {
        let out = &mut self.out;
        out.push_str(
            "// Exported by `webpilot replay --export playwright` from a webpilot trace.\n",
        );
        out.push_str("import { test, expect, type Page } from '@playwright/test';\n\n");
        let base = base_url.unwrap_or("http://localhost").trim_end_matches('/');
        let _ = writeln!(
            out,
            "const BASE_URL = process.env.BASE_URL ?? {};",
            js(base)
        );
        let mut secrets: Vec<&String> = steps.iter().flat_map(|s| &s.secrets).collect();
        secrets.sort();
        secrets.dedup();
        for secret in secrets {
            let _ = writeln!(
                out,
                "const {} = process.env.{} ?? '';",
                secret_const(secret),
                secret_env(secret)
            );
        }
        out.push('\n');
    }

    /// Listeners the expectations about console errors and failed requests read at the end.
    fn watchers(&mut self, expect: &Expectations) {
        let out = &mut self.out;
        out.push_str("  const tabs: Record<string, Page> = { t1: page };\n");
        if expect.no_console_errors {
            out.push_str("  const consoleErrors: string[] = [];\n");
            // A resource that failed to load is a failed request (as the replay counts it).
            out.push_str("  page.on('console', (m) => { if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) consoleErrors.push(m.text()); });\n");
            out.push_str("  page.on('pageerror', (e) => consoleErrors.push(e.message));\n");
        }
        if expect.no_failed_requests {
            out.push_str("  const failedRequests: string[] = [];\n");
            out.push_str("  page.on('response', (r) => { if (r.status() >= 400 && !r.url().endsWith('/favicon.ico')) failedRequests.push(`${r.status()} ${r.url()}`); });\n");
            out.push_str(
                "  page.on('requestfailed', (r) => failedRequests.push(`failed ${r.url()}`));\n",
            );
        }
    }

    fn step(&mut self, step: &Step) {
        let action = step.args["action"].as_str().unwrap_or_default();
        let _ = writeln!(
            self.out,
            "\n  // {}. {}",
            step.seq,
            comment(&super::describe(step))
        );
        if !step.ok {
            self.out
                .push_str("  // (it failed when recorded: left out)\n");
            return;
        }
        let mut lines = self.person(step);
        lines.extend(match step.tool.as_str() {
            "browser_navigate" => match super::typed::<NavigateArgs>(&step.args) {
                Some(args) => self.navigate(&args),
                None => unreadable(step),
            },
            "browser_interact" => match super::typed::<InteractArgs>(&step.args) {
                Some(args) if args.action == Action::Handoff => Vec::new(),
                Some(args) => self.interact(step, &args, action),
                None => unreadable(step),
            },
            "browser_tabs" => tabs(step, action),
            _ if replayed(step) => vec![format!(
                "// not exported: {} {action} (load the login with test.use({{ storageState }}))",
                step.tool
            )],
            _ => vec!["// a read: nothing to do".to_string()],
        });
        for line in lines {
            let _ = writeln!(self.out, "  {line}");
        }
    }

    /// What a person did through the live view before or during the step (a hand-off).
    fn person(&self, step: &Step) -> Vec<String> {
        if step.person.is_empty() {
            return Vec::new();
        }
        let mut lines = vec!["// What a person did through the live view:".to_string()];
        for input in &step.person {
            lines.push(match input {
                PersonInput::Click {
                    target: Some(target),
                    ..
                } => format!("await {}.click();", self.locator(target)),
                PersonInput::Type {
                    target: Some(target),
                    text,
                    ..
                } => format!(
                    "await {}.fill({});",
                    self.locator(target),
                    self.text(text, &step.secrets)
                ),
                PersonInput::Key { key } => format!("await page.keyboard.press({});", js(key)),
                PersonInput::Click { frame, .. } | PersonInput::Type { frame, .. } => format!(
                    "// not exported: input into another site's frame {}",
                    frame
                        .as_ref()
                        .map_or(String::new(), |f| format!("{}{}", f.origin, f.path))
                ),
            });
        }
        lines
    }

    fn navigate(&self, args: &NavigateArgs) -> Vec<String> {
        let mut lines = Vec::new();
        match (args.mode.unwrap_or_default(), args.target.as_deref()) {
            (Mode::Back, _) => lines.push("await page.goBack();".into()),
            (Mode::Forward, _) => lines.push("await page.goForward();".into()),
            (Mode::Reload, _) => lines.push("await page.reload();".into()),
            (Mode::Url, Some(url)) => lines.push(format!("await page.goto({});", self.url(url))),
            (Mode::Search, Some(query)) => {
                lines.push(format!("// not exported: a search for {}", comment(query)));
            }
            (_, None) => {}
        }
        if let Some(text) = &args.wait_for {
            lines.push(wait_for_text(text, false));
        }
        lines
    }

    fn interact(&self, step: &Step, args: &InteractArgs, action: &str) -> Vec<String> {
        let text =
            |value: &Option<String>| self.text(value.as_deref().unwrap_or_default(), &step.secrets);
        let Some(target) = &step.target else {
            return page_action(args, action);
        };
        let locator = self.locator(target);
        let mut lines = Vec::new();
        match args.action {
            Action::Click => lines.push(format!("await {locator}.click();")),
            Action::Hover => lines.push(format!("await {locator}.hover();")),
            Action::Type => {
                let text = text(&args.text);
                if args.clear == Some(false) {
                    lines.push(format!("await {locator}.pressSequentially({text});"));
                } else {
                    lines.push(format!("await {locator}.fill({text});"));
                }
                if args.submit == Some(true) {
                    lines.push(format!("await {locator}.press('Enter');"));
                }
            }
            Action::Select => {
                let option = text(&args.option);
                lines.push(format!("await {locator}.selectOption({option});"));
            }
            Action::SendKeys => {
                for key in args.keys.as_deref().unwrap_or_default().split_whitespace() {
                    lines.push(format!("await {locator}.press({});", js(key)));
                }
            }
            Action::Scroll => lines.push(format!("await {locator}.scrollIntoViewIfNeeded();")),
            Action::Upload => lines.push(upload(&locator, args)),
            _ => lines.push(format!("// not exported: {action} on {}", target.label())),
        }
        lines
    }

    /// `page.getByRole(…)`, inside a frame locator when the element was in a frame.
    fn locator(&self, target: &ElementIdentity) -> String {
        let within = if self.in_frame(target) {
            format!("page.frameLocator({})", js(&frame_selector(target)))
        } else {
            "page".to_string()
        };
        let found = by_role(target).unwrap_or_else(|| by_attributes(target));
        if target.nth > 0 {
            format!("{within}.{found}.nth({})", target.nth)
        } else {
            format!("{within}.{found}")
        }
    }

    /// Whether the element's document is a frame: another site's, or one whose address is not
    /// the page's.
    fn in_frame(&self, target: &ElementIdentity) -> bool {
        if target.in_frame {
            return true;
        }
        let Some(page) = self
            .page_url
            .as_deref()
            .and_then(|u| url::Url::parse(u).ok())
        else {
            return false;
        };
        page.origin().ascii_serialization() != target.origin || page.path() != target.path
    }

    /// A URL of the recorded site as one under `BASE_URL`.
    fn url(&self, url: &str) -> String {
        match &self.recorded {
            Some(base) if url.starts_with(base.as_str()) => {
                format!("`${{BASE_URL}}{}`", template(&url[base.len()..]))
            }
            _ => js(url),
        }
    }

    /// A typed text, its secrets read from the environment.
    fn text(&self, text: &str, secrets: &[String]) -> String {
        for secret in secrets {
            if text == format!("{{{{{secret}}}}}") {
                return secret_const(secret);
            }
        }
        js(text)
    }

    fn expectations(&mut self, expect: &Expectations) {
        let mut lines = Vec::new();
        for text in &expect.text {
            lines.push(wait_for_text(text, false));
        }
        if let Some(url) = &expect.url {
            let pattern = regex_source(url);
            lines.push(format!(
                "await expect(page).toHaveURL(new RegExp({}));",
                js(&pattern)
            ));
        }
        if expect.no_console_errors {
            lines.push("expect(consoleErrors).toEqual([]);".into());
        }
        if expect.no_failed_requests {
            lines.push("expect(failedRequests).toEqual([]);".into());
        }
        if !lines.is_empty() {
            self.out.push_str("\n  // What must hold at the end.\n");
        }
        for line in lines {
            let _ = writeln!(self.out, "  {line}");
        }
    }
}

/// An action without an element: keys to the page, a wheel, a wait, a dialog's answer.
fn page_action(args: &InteractArgs, action: &str) -> Vec<String> {
    match args.action {
        Action::SendKeys => args
            .keys
            .as_deref()
            .unwrap_or_default()
            .split_whitespace()
            .map(|key| format!("await page.keyboard.press({});", js(key)))
            .collect(),
        Action::Scroll => {
            let amount = args.amount.unwrap_or(600.0);
            let (x, y) = match args.direction {
                Some(Direction::Up) => (0.0, -amount),
                Some(Direction::Left) => (-amount, 0.0),
                Some(Direction::Right) => (amount, 0.0),
                Some(Direction::Down) | None => (0.0, amount),
            };
            vec![format!("await page.mouse.wheel({x}, {y});")]
        }
        Action::Wait => match (args.until.as_deref(), args.seconds) {
            (Some(until), _) => match until.strip_prefix("url:") {
                Some(glob) => vec![format!("await page.waitForURL({});", js(glob))],
                None => vec![wait_for_text(until, args.gone == Some(true))],
            },
            (None, Some(seconds)) => {
                vec![format!(
                    "await page.waitForTimeout({});",
                    (seconds * 1000.0).round()
                )]
            }
            _ => Vec::new(),
        },
        Action::Dialog => {
            let answer = if args.accept == Some(false) {
                "d.dismiss()".to_string()
            } else {
                match args.prompt_text.as_deref() {
                    Some(text) => format!("d.accept({})", js(text)),
                    None => "d.accept()".to_string(),
                }
            };
            vec![format!("page.once('dialog', (d) => {answer});")]
        }
        Action::Evaluate => vec![format!(
            "await page.evaluate({});",
            js(args.script.as_deref().unwrap_or_default())
        )],
        _ => vec![format!("// not exported: {action}")],
    }
}

/// A step whose recorded arguments the tools no longer take (a trace from another version).
fn unreadable(step: &Step) -> Vec<String> {
    vec![format!(
        "// not exported: its arguments are not what {} takes now",
        step.tool
    )]
}

fn tabs(step: &Step, action: &str) -> Vec<String> {
    let tab = step.tab.as_deref().unwrap_or("t1");
    match action {
        "new" => vec![
            "page = await context.newPage();".into(),
            format!("tabs[{}] = page;", js(tab)),
        ],
        "switch" | "close" => {
            let mut lines = Vec::new();
            if action == "close" {
                lines.push("await page.close();".into());
            }
            lines.push(format!("page = tabs[{}];", js(tab)));
            lines.push("await page.bringToFront();".into());
            lines
        }
        _ => vec!["// a read: nothing to do".into()],
    }
}

fn upload(locator: &str, args: &InteractArgs) -> String {
    let paths: Vec<String> = args.paths.iter().flatten().map(|p| js(p)).collect();
    if paths.is_empty() {
        return "// not exported: an upload of inline files (give their paths)".into();
    }
    format!("await {locator}.setInputFiles([{}]);", paths.join(", "))
}

fn wait_for_text(text: &str, gone: bool) -> String {
    let state = if gone { "toBeHidden" } else { "toBeVisible" };
    format!(
        "await expect(page.getByText({}).first()).{state}();",
        js(text)
    )
}

/// `getByRole('button', { name: 'Pay', exact: true })` for an ARIA role with a name.
fn by_role(target: &ElementIdentity) -> Option<String> {
    if !ARIA_ROLES.contains(&target.role.as_str()) {
        return None;
    }
    let role = js(&target.role);
    if target.name.is_empty() {
        return (target.attributes.is_empty()).then(|| format!("getByRole({role})"));
    }
    // A name cut short in the trace is matched by its start.
    Some(match target.name.strip_suffix('…') {
        Some(start) => format!(
            "getByRole({role}, {{ name: new RegExp({}) }})",
            js(&format!("^{}", regex_escape(start)))
        ),
        None => format!(
            "getByRole({role}, {{ name: {}, exact: true }})",
            js(&target.name)
        ),
    })
}

/// The element by its stable attributes, the most specific first.
fn by_attributes(target: &ElementIdentity) -> String {
    let attributes = &target.attributes;
    if let Some(id) = attributes.get("data-testid") {
        return format!("getByTestId({})", js(id));
    }
    for name in ["id", "name", "aria-label", "href"] {
        if let Some(value) = attributes.get(name) {
            return format!(
                "locator({})",
                js(&format!("[{name}={}]", css_string(value)))
            );
        }
    }
    let tag = if target.tag.is_empty() {
        "*"
    } else {
        &target.tag
    };
    format!("locator({})", js(tag))
}

/// The iframe holding an element: by the path of its document (or, for `/`, its origin).
fn frame_selector(target: &ElementIdentity) -> String {
    if target.path.len() > 1 {
        format!("iframe[src*={}]", css_string(&target.path))
    } else {
        format!("iframe[src^={}]", css_string(&target.origin))
    }
}

/// A JavaScript string literal.
fn js(text: &str) -> String {
    // A JSON string is a JavaScript string literal.
    serde_json::to_string(text).unwrap_or_else(|_| "''".into())
}

/// Text inside a template literal.
fn template(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('`', "\\`")
        .replace("${", "\\${")
}

/// A CSS string (double quotes).
fn css_string(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// A line comment's text (no line breaks).
fn comment(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

fn regex_escape(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if "\\^$.|?*+()[]{}/".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `--expect-url`'s substring, or `*` glob, as a regular expression's source.
fn regex_source(url: &str) -> String {
    url.split('*')
        .map(regex_escape)
        .collect::<Vec<_>>()
        .join(".*")
}

fn secret_const(secret: &str) -> String {
    format!("secret_{secret}")
}

fn secret_env(secret: &str) -> String {
    format!("WEBPILOT_SECRET_{}", secret.to_ascii_uppercase())
}

#[cfg(test)]
#[path = "playwright_tests.rs"]
mod tests;
