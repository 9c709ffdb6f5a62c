//! `browser_interact`: act on the page by element ref — click, type, keys, select, upload,
//! hover, scroll, wait, evaluate, dialog — then report what changed.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{Ctx, Tool, ToolOutput, browser_fields, merge, session_name};
use crate::browser::{DialogAnswer, Tab};
use crate::error::{ErrorCode, ToolError, ToolResult};

const GUIDE: &str = "browser_interact acts on elements by the refs of browser_read mode=elements: \
click, type (clear, submit), send_keys (Enter, Control+A), select (value or label), options, \
upload, hover, scroll, wait (until text/selector, or seconds), evaluate (JS), dialog (answer the \
next alert/confirm/prompt). It waits while the page is busy and reports what changed.";

/// Default time limit for waiting after an action or for `wait`.
const DEFAULT_TIMEOUT_MS: u64 = 10_000;
/// Longest plain wait an agent may ask for.
const MAX_WAIT_SECONDS: f64 = 30.0;
/// Token budget of the added-elements list in the result.
const ADDED_ELEMENTS_TOKENS: usize = 400;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InteractArgs {
    /// What to do.
    pub action: Action,
    /// Element ref from browser_read mode=elements.
    #[serde(rename = "ref")]
    pub ref_id: Option<u32>,
    /// Text to type.
    pub text: Option<String>,
    /// e.g. "Enter", "Control+A" (space-separated for several).
    pub keys: Option<String>,
    /// select: value or label.
    pub option: Option<String>,
    /// Local file paths (upload).
    pub paths: Option<Vec<String>>,
    /// Clear before typing (default true).
    pub clear: Option<bool>,
    /// Press Enter after typing.
    pub submit: Option<bool>,
    /// Scroll without ref.
    pub direction: Option<Direction>,
    /// Pixels to scroll (default 80% of the viewport).
    pub amount: Option<f64>,
    /// wait: text or CSS selector to wait for.
    pub until: Option<String>,
    /// wait: wait for `until` to disappear instead.
    pub gone: Option<bool>,
    /// wait: seconds to wait (max 30).
    pub seconds: Option<f64>,
    /// evaluate: JavaScript.
    pub script: Option<String>,
    /// dialog: accept (true) or dismiss the next one.
    pub accept: Option<bool>,
    /// dialog: text for the next prompt().
    pub prompt_text: Option<String>,
    /// Time limit in ms (default 10000).
    pub timeout_ms: Option<u64>,
    /// Default: the active tab.
    pub tab: Option<String>,
    /// Default "default".
    pub session: Option<String>,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Click,
    Type,
    SendKeys,
    Select,
    Options,
    Upload,
    Hover,
    Scroll,
    Wait,
    Evaluate,
    Dialog,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Up,
    Down,
    Left,
    Right,
}

pub struct Interact;

#[async_trait]
impl Tool for Interact {
    type Args = InteractArgs;
    const NAME: &'static str = "browser_interact";
    const GUIDE: &'static str = GUIDE;
    const DESCRIPTION: &'static str = "Act by element ref (from browser_read). Waits while the page is busy; reports what changed (navigation, new tabs, dialogs, added elements).";

    async fn run(&self, ctx: &Ctx, args: InteractArgs) -> ToolResult<ToolOutput> {
        check_required(&args)?;
        let timeout = Duration::from_millis(
            args.timeout_ms
                .unwrap_or(DEFAULT_TIMEOUT_MS)
                .clamp(100, 120_000),
        );
        let mut session = ctx.browser.session(session_name(&args.session)).await?;
        let name = session.name().to_string();
        let tab = session.tab_or_active(args.tab.as_deref()).await?;
        let tab_id = tab.id.clone();
        let mark = tab.begin_action(args.ref_id).await;
        let mut extra = perform(tab, &args, timeout).await?;
        if changes_page(args.action) {
            let aftermath = tab.settle_after_action(&mark, timeout).await?;
            // The action has happened; a page too busy to list its elements right now must
            // not turn it into an error.
            let changes = tab.element_changes().await.ok();
            extra["navigated"] = json!(aftermath.navigated);
            extra["ready"] = json!(aftermath.ready);
            if !aftermath.dialogs.is_empty() {
                extra["dialogs"] = json!(aftermath.dialogs);
            }
            if !aftermath.downloads.is_empty() {
                extra["downloads"] = json!(aftermath.downloads);
            }
            if let Some(blocked) = aftermath.blocked {
                extra["blocked"] = json!(blocked);
            }
            if let Some(changes) = changes {
                extra["elements_added"] = json!(changes.added.len());
                extra["elements_removed"] = json!(changes.removed);
                if !changes.added.is_empty() {
                    let slice =
                        super::paging::slice_lines(&changes.added, ADDED_ELEMENTS_TOKENS, None)?;
                    extra["added"] = json!(slice.content);
                }
            }
        }
        let tab = session.tab(&tab_id)?;
        let mut fields = browser_fields(&name, tab).await;
        let new_tabs = session.sync_tabs().await?;
        if !new_tabs.is_empty() {
            fields.insert("new_tabs".into(), json!(new_tabs));
        }
        Ok(ToolOutput::json(merge(fields, extra)))
    }
}

/// Actions after which the page may change and is watched until it settles.
fn changes_page(action: Action) -> bool {
    !matches!(action, Action::Options | Action::Wait | Action::Dialog)
}

/// Runs the action itself; returns action-specific result fields.
async fn perform(tab: &mut Tab, args: &InteractArgs, timeout: Duration) -> ToolResult<Value> {
    let ref_id = args.ref_id;
    let need_ref = || ref_id.ok_or_else(|| missing("ref", args.action));
    Ok(match args.action {
        Action::Click => {
            tab.click(need_ref()?).await?;
            json!({ "action": "click" })
        }
        Action::Hover => {
            tab.hover(need_ref()?).await?;
            json!({ "action": "hover" })
        }
        Action::Type => {
            let text = args.text.as_deref().unwrap_or_default();
            tab.type_text(
                need_ref()?,
                text,
                args.clear.unwrap_or(true),
                args.submit.unwrap_or(false),
            )
            .await?;
            json!({ "action": "type" })
        }
        Action::SendKeys => {
            tab.send_keys(args.keys.as_deref().unwrap_or_default(), ref_id)
                .await?;
            json!({ "action": "send_keys" })
        }
        Action::Select => {
            let chosen = tab
                .select(need_ref()?, args.option.as_deref().unwrap_or_default())
                .await?;
            json!({ "action": "select", "selected": chosen })
        }
        Action::Options => {
            json!({ "action": "options", "options": tab.options(need_ref()?).await? })
        }
        Action::Upload => {
            let paths: Vec<PathBuf> = args.paths.iter().flatten().map(PathBuf::from).collect();
            tab.upload(need_ref()?, &paths).await?;
            json!({ "action": "upload", "files": paths.len() })
        }
        Action::Scroll => {
            let (dx, dy) = scroll_delta(tab, args).await?;
            let position = tab.scroll(ref_id, dx, dy).await?;
            json!({ "action": "scroll", "scroll": position })
        }
        Action::Wait => wait(tab, args, timeout).await?,
        Action::Evaluate => {
            let value = tab
                .evaluate_script(args.script.as_deref().unwrap_or_default())
                .await?;
            json!({ "action": "evaluate", "value": value })
        }
        Action::Dialog => {
            let accept = args.accept.unwrap_or(true);
            tab.answer_next_dialog(DialogAnswer {
                accept,
                prompt_text: args.prompt_text.clone(),
            });
            let dialogs = tab.take_dialogs();
            json!({ "action": "dialog", "next_dialog": if accept { "accept" } else { "dismiss" }, "answered": dialogs })
        }
    })
}

async fn scroll_delta(tab: &Tab, args: &InteractArgs) -> ToolResult<(f64, f64)> {
    if args.ref_id.is_some() {
        return Ok((0.0, 0.0));
    }
    let amount = match args.amount {
        Some(amount) if amount > 0.0 => amount,
        Some(_) => {
            return Err(ToolError::invalid(
                "field `amount` must be a positive number of pixels",
            ));
        }
        None => {
            let height = tab
                .evaluate_script("innerHeight")
                .await?
                .as_f64()
                .unwrap_or(720.0);
            (height * 0.8).round()
        }
    };
    Ok(match args.direction.unwrap_or(Direction::Down) {
        Direction::Down => (0.0, amount),
        Direction::Up => (0.0, -amount),
        Direction::Right => (amount, 0.0),
        Direction::Left => (-amount, 0.0),
    })
}

/// Waits for text or a selector to appear (or go), or a number of seconds.
async fn wait(tab: &Tab, args: &InteractArgs, timeout: Duration) -> ToolResult<Value> {
    let started = Instant::now();
    if let Some(seconds) = args.seconds {
        if !(0.0..=MAX_WAIT_SECONDS).contains(&seconds) {
            return Err(ToolError::invalid(format!(
                "field `seconds` must be between 0 and {MAX_WAIT_SECONDS}"
            )));
        }
        tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
        return Ok(json!({ "action": "wait", "waited_ms": started.elapsed().as_millis() as u64 }));
    }
    let until = args.until.as_deref().unwrap_or_default();
    let gone = args.gone.unwrap_or(false);
    let found = tab.wait_for_text(until, gone, timeout).await?;
    if !found {
        let state = if gone { "disappear" } else { "appear" };
        return Err(ToolError::new(
            ErrorCode::Timeout,
            format!(
                "{until:?} did not {state} within {} ms",
                timeout.as_millis()
            ),
        )
        .with_hint("check the text with browser_read mode=find, or wait longer with timeout_ms"));
    }
    Ok(json!({ "action": "wait", "waited_ms": started.elapsed().as_millis() as u64 }))
}

/// Checks at run time that the fields the action needs are there.
fn check_required(args: &InteractArgs) -> ToolResult<()> {
    let action = args.action;
    let present = |field: &str| match field {
        "ref" => args.ref_id.is_some(),
        "text" => args.text.is_some(),
        "keys" => args.keys.as_deref().is_some_and(|k| !k.trim().is_empty()),
        "option" => args.option.is_some(),
        "paths" => args.paths.as_ref().is_some_and(|p| !p.is_empty()),
        "script" => args.script.as_deref().is_some_and(|s| !s.trim().is_empty()),
        "until or seconds" => args.until.is_some() || args.seconds.is_some(),
        _ => true,
    };
    let required: &[&str] = match action {
        Action::Click | Action::Hover | Action::Options => &["ref"],
        Action::Type => &["ref", "text"],
        Action::SendKeys => &["keys"],
        Action::Select => &["ref", "option"],
        Action::Upload => &["ref", "paths"],
        Action::Wait => &["until or seconds"],
        Action::Evaluate => &["script"],
        Action::Scroll | Action::Dialog => &[],
    };
    match required.iter().find(|f| !present(f)) {
        Some(field) => Err(missing(field, action)),
        None => Ok(()),
    }
}

fn missing(field: &str, action: Action) -> ToolError {
    ToolError::invalid(format!(
        "field `{field}` is required for action={}",
        json!(action).as_str().unwrap_or_default()
    ))
    .with_hint("refs come from browser_read mode=elements")
}
