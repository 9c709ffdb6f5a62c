//! `browser_interact`: act on the page by element ref — click, type, keys, select, upload,
//! hover, scroll, wait, evaluate, dialog — then report what changed.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod changes;
mod handoff;
mod replayed;
mod rules;

use crate::browser::live::HandedBack;
use crate::browser::{
    ActionMark, Aftermath, ChangesIn, DialogAnswer, DialogRecord, Downloaded, ElementIdentity,
    FieldCheck, PageEvents, Tab, ValueMismatch, Watch,
};
use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::tools::{Call, PersonTimeoutMs, Scope, SessionField, Tool};

const GUIDE: &str = "browser_interact acts on elements by the refs of browser_read mode=elements: \
click, type (clear, submit; also sets dates 2027-03-15, times 13:45, colours #rrggbb, numbers; \
returns the value the field holds, and value_mismatch when the page cut or changed it), \
send_keys (Enter, Control+A), select (value or label), options, upload, hover, scroll, wait \
(until text/selector, or seconds), evaluate (JS), dialog (answer the next alert/confirm/prompt), download (url, with the session's cookies, into downloads/), page_tool (text: the name of a tool \
the page publishes through WebMCP, input: its arguments; see browser_read mode=tools; its answer \
is the page's, untrusted). It waits while the page is busy and reports what changed. \
When a person must act (a second factor, a CAPTCHA, a consent), handoff with a message returns \
a live_url for them and waits until they press Done, until `until` holds (text, selector or \
url:PATTERN) or timeout_ms (default 10 min); wait:false returns at once, a later wait picks it up.";

/// Longest plain wait an agent may ask for.
const MAX_WAIT_SECONDS: f64 = 30.0;
/// Token budget of the added-elements list in the result.
const ADDED_ELEMENTS_TOKENS: usize = 400;

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InteractArgs {
    pub action: Action,
    /// From browser_read.
    #[serde(rename = "ref")]
    pub ref_id: Option<u32>,
    /// Text, value or page tool.
    pub text: Option<String>,
    /// e.g. "Control+A Enter".
    pub keys: Option<String>,
    /// select: value or label.
    pub option: Option<String>,
    /// upload: server files.
    pub paths: Option<Vec<String>>,
    /// upload: inline files.
    pub files: Option<Vec<InlineFile>>,
    /// Clear first (default true).
    pub clear: Option<bool>,
    /// Press Enter.
    pub submit: Option<bool>,
    /// Scroll without ref.
    pub direction: Option<Direction>,
    /// Pixels.
    pub amount: Option<f64>,
    /// wait/handoff: text, selector or url:GLOB.
    pub until: Option<String>,
    /// handoff: what the person should do.
    pub message: Option<String>,
    /// handoff: false returns now; confirm: waits.
    pub wait: Option<bool>,
    /// Id from NEEDS_CONFIRMATION.
    pub confirmation: Option<String>,
    /// wait: until gone.
    pub gone: Option<bool>,
    /// wait: seconds (max 30).
    pub seconds: Option<f64>,
    /// evaluate: JavaScript.
    pub script: Option<String>,
    /// dialog: accept or dismiss.
    pub accept: Option<bool>,
    /// dialog: prompt() text.
    pub prompt_text: Option<String>,
    /// download: URL.
    pub url: Option<String>,
    /// download: name.
    pub filename: Option<String>,
    /// page_tool: input.
    #[schemars(with = "Option<serde_json::Map<String, Value>>")]
    pub input: Option<Value>,
    /// ms (default 10000).
    pub timeout_ms: Option<PersonTimeoutMs>,
    pub tab: Option<String>,
    pub session: Option<SessionField>,
    /// Replays: the element by the identity a trace recorded, found again on the page (instead
    /// of `ref`). Not in the tool list: agents act by ref.
    #[schemars(skip)]
    pub target: Option<ElementIdentity>,
}

// A file sent with the call; its name's extension gives the type the page sees. (A plain
// comment: a doc comment would add its text to the published tool list.)
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InlineFile {
    pub name: String,
    pub base64: String,
}

impl InteractArgs {
    /// `action` with nothing else set: the service's own calls (a replay's steps) start here.
    pub fn new(action: Action) -> Self {
        Self {
            action,
            ref_id: None,
            text: None,
            keys: None,
            option: None,
            paths: None,
            files: None,
            clear: None,
            submit: None,
            direction: None,
            amount: None,
            until: None,
            message: None,
            wait: None,
            confirmation: None,
            gone: None,
            seconds: None,
            script: None,
            accept: None,
            prompt_text: None,
            url: None,
            filename: None,
            input: None,
            timeout_ms: None,
            tab: None,
            session: None,
            target: None,
        }
    }
}

impl crate::tools::call::Shared for InteractArgs {
    fn session(&self) -> Option<&str> {
        self.session.as_ref().map(|name| name.0.as_str())
    }
    fn tab(&self) -> Option<&str> {
        self.tab.as_deref()
    }
    fn timeout_ms(&self) -> Option<u64> {
        self.timeout_ms.as_ref().map(|ms| ms.0)
    }
    fn waits_for_person(&self) -> bool {
        self.action == Action::Handoff || self.wait == Some(true)
    }
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
    Handoff,
    Download,
    PageTool,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Up,
    Down,
    Left,
    Right,
}

/// What the action did, and what changed on the page after it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct InteractOutput {
    #[serde(flatten)]
    done: Done,
    /// How the page settled after the action (actions that may change it).
    #[serde(flatten)]
    aftermath: Option<Aftermath>,
    /// Elements that appeared since the last list (scroll: that came into view), when more
    /// than `added` lists.
    #[serde(skip_serializing_if = "Option::is_none")]
    elements_added: Option<usize>,
    /// scroll: new elements still off-screen (listed once they come into view).
    #[serde(skip_serializing_if = "Option::is_none")]
    elements_offscreen_added: Option<usize>,
    /// Elements that went away.
    #[serde(skip_serializing_if = "Option::is_none")]
    elements_removed: Option<usize>,
    /// The new elements, `[ref] role "name"` per line.
    #[serde(skip_serializing_if = "Option::is_none")]
    added: Option<String>,
    /// Elements whose state, value or name changed (refs unchanged), a line each as now.
    #[serde(skip_serializing_if = "Option::is_none")]
    changed: Option<String>,
    /// Elements listed as before.
    #[serde(skip_serializing_if = "Option::is_none")]
    elements_unchanged: Option<usize>,
    /// Instead of the changes when the list was re-rendered (they would cost more): the
    /// elements in view now, a line each after one saying so.
    #[serde(skip_serializing_if = "Option::is_none")]
    relisted: Option<String>,
    /// Tabs the action opened (popups, target=_blank).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    new_tabs: Vec<String>,
    /// With `target`: how the element was found again, and what it is now.
    #[serde(skip_serializing_if = "Option::is_none")]
    recognized: Option<replayed::Seen>,
    /// What went wrong while the action ran (console errors, page errors, failed requests);
    /// absent when nothing did.
    #[serde(skip_serializing_if = "Option::is_none")]
    page_events: Option<PageEvents>,
}

/// The action's own result.
#[derive(Debug, Serialize, JsonSchema)]
struct Done {
    action: Action,
    /// select: the option chosen.
    #[serde(skip_serializing_if = "Option::is_none")]
    selected: Option<Value>,
    /// options: the select's options.
    #[serde(skip_serializing_if = "Option::is_none")]
    options: Option<Value>,
    /// upload: how many files.
    #[serde(skip_serializing_if = "Option::is_none")]
    files: Option<usize>,
    /// scroll: how far through its range the box that scrolled is now (`"42%"`, `"100%"` at
    /// the end): the scrolling box under the viewport's centre, else the page.
    #[serde(skip_serializing_if = "Option::is_none")]
    scroll: Option<Value>,
    /// evaluate: the script's value; type, select: what the field holds now (a password as
    /// bullets).
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<Value>,
    /// type, select: the field holds something other than was asked (cut, masked, rewritten).
    #[serde(skip_serializing_if = "Option::is_none")]
    value_mismatch: Option<ValueMismatch>,
    /// What a type or select asked of the field, checked once the page has settled.
    #[serde(skip)]
    check: Option<FieldCheck>,
    /// wait: how long it took.
    #[serde(skip_serializing_if = "Option::is_none")]
    waited_ms: Option<u64>,
    /// dialog: how the next dialog will be answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    next_dialog: Option<String>,
    /// dialog: dialogs answered since the last call.
    #[serde(skip_serializing_if = "Option::is_none")]
    answered: Option<Vec<DialogRecord>>,
    /// handoff: the link for the person (no API token needed).
    #[serde(skip_serializing_if = "Option::is_none")]
    live_url: Option<String>,
    /// handoff: how it ended; absent while the person is still at it (wait: false).
    #[serde(skip_serializing_if = "Option::is_none")]
    handed_back: Option<HandedBack>,
    /// download: the saved file.
    #[serde(skip_serializing_if = "Option::is_none")]
    download: Option<Downloaded>,
}

impl Done {
    /// What a hand-off (or a wait on one) came to.
    fn handed(action: Action, handed: handoff::HandedOff) -> Self {
        Self {
            live_url: Some(handed.live_url),
            waited_ms: handed.waited_ms,
            handed_back: handed.handed_back,
            ..Self::of(action)
        }
    }

    fn of(action: Action) -> Self {
        Self {
            action,
            selected: None,
            options: None,
            files: None,
            scroll: None,
            value: None,
            value_mismatch: None,
            check: None,
            waited_ms: None,
            next_dialog: None,
            answered: None,
            live_url: None,
            handed_back: None,
            download: None,
        }
    }
}

impl InteractOutput {
    fn of(done: Done) -> Self {
        Self {
            done,
            aftermath: None,
            elements_added: None,
            elements_offscreen_added: None,
            elements_removed: None,
            changed: None,
            elements_unchanged: None,
            relisted: None,
            added: None,
            new_tabs: Vec::new(),
            page_events: None,
            recognized: None,
        }
    }
}

impl InteractOutput {
    /// Waits for what the action started, then reads back the field it set and what changed
    /// in the element list, and what went wrong on the page meanwhile.
    async fn watch_aftermath(
        &mut self,
        tab: &mut Tab,
        mark: &ActionMark,
        args: &InteractArgs,
        deadline: Duration,
    ) -> ToolResult<()> {
        let watch = if sets_a_value(args) {
            Watch::Input
        } else {
            Watch::Action
        };
        self.aftermath = Some(tab.settle_after_action(mark, watch, deadline).await?);
        if let Some(check) = self.done.check.take()
            && let Some(filled) = tab.check_field(&check).await
        {
            self.done.value = Some(Value::String(filled.value));
            self.done.value_mismatch = filled.mismatch;
        }
        let seen = if args.action == Action::Scroll {
            ChangesIn::View
        } else {
            ChangesIn::Page
        };
        // The field typed into or selected in is said once: by `value`.
        let said = args.ref_id.filter(|_| self.done.value.is_some());
        // The action has happened; a page too busy to list its elements right now must not
        // turn it into an error.
        if let Ok(changes) = tab.element_changes(seen).await {
            self.report_changes(&changes, seen, said)?;
        }
        self.page_events = tab.page_events().await;
        Ok(())
    }
}

pub struct Interact;

#[async_trait]
impl Tool for Interact {
    type Args = InteractArgs;
    type Output = InteractOutput;
    const NAME: &'static str = "browser_interact";
    const GUIDE: &'static str = GUIDE;
    const EXAMPLE: &'static str = r#"{"action": "click", "ref": 3}"#;
    const SCOPE: Scope = Scope::Browser;
    const TITLE: &'static str = "Act on the page";
    const EFFECTS: crate::tools::Effects = crate::tools::Effects {
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: true,
    };
    const DEFAULT_TIMEOUT_MS: Option<u64> = Some(10_000);
    const DESCRIPTION: &'static str =
        "Act on elements by ref or hand off to a person; reports changes.";

    /// A hand-off is not: the agent was not watching what the person did, and is told where
    /// they left the page.
    fn acts(args: &InteractArgs) -> bool {
        args.action != Action::Handoff
    }

    async fn run(&self, call: &mut Call<'_>, mut args: InteractArgs) -> ToolResult<InteractOutput> {
        let recognized = replayed::find_target(call, &mut args).await?;
        rules::under_rules(call, &args).await?;
        // A hand-off, or a wait while one is open, waits for the person; a person who has
        // control already is who it is for, so it does not wait for their control to end.
        let handing_off = match args.action {
            Action::Handoff => true,
            Action::Wait => call.live_side().await?.pending_handoff().is_some(),
            _ => false,
        };
        if handing_off {
            // The session is taken unless a person has control: then it is theirs at once.
            call.live_side().await?;
            if !call.holds_session() {
                return hand_off_in_control(call, &args).await;
            }
        } else {
            check_required(&args)?;
        }
        if args.action == Action::Download {
            return download(call, &args).await;
        }
        let files = if args.action == Action::Upload {
            upload_files(call, &args).await?
        } else {
            Vec::new()
        };
        let mut id = call.tab().await?.id.clone();
        let tab = call.use_tab(&id)?;
        let watched = changes_page(args.action) || handing_off;
        if changes_page(args.action) {
            tab.bring_to_front().await?;
        }
        if watched {
            tab.mark_action();
        }
        let mark = tab.begin_action(args.ref_id).await;
        let done = if handing_off {
            let done = Done::handed(args.action, handoff::hand_off(call, &args).await?);
            if done.handed_back.is_none() {
                // wait: false. The person is at it; nothing to report yet.
                return Ok(InteractOutput::of(done));
            }
            // The person may have closed the tab the hand-off began in.
            id = call.tab().await?.id.clone();
            done
        } else {
            replayed::note_target(call, &id, args.ref_id).await?;
            let deadline = call.time_left();
            perform(call.use_tab(&id)?, &args, &files, deadline).await?
        };
        let deadline = call.time_left();
        let tab = call.use_tab(&id)?;
        let mut output = InteractOutput::of(done);
        if watched {
            output.watch_aftermath(tab, &mark, &args, deadline).await?;
        }
        output.new_tabs = call.session().await?.sync_tabs().await?;
        output.recognized = recognized;
        Ok(output)
    }
}

/// A hand-off begun while a person has control of the session: it waits for them at once,
/// without the session, then reports the page as they left it (what they did is not watched
/// from before, so there is no `aftermath`).
async fn hand_off_in_control(
    call: &mut Call<'_>,
    args: &InteractArgs,
) -> ToolResult<InteractOutput> {
    let done = Done::handed(args.action, handoff::hand_off(call, args).await?);
    let waited = done.handed_back.is_some();
    let mut output = InteractOutput::of(done);
    if waited {
        call.tab().await?;
        output.new_tabs = call.session().await?.sync_tabs().await?;
    }
    Ok(output)
}

/// The files of an upload: `paths` checked under the files roots, `files` decoded and staged
/// for the session.
async fn upload_files(call: &mut Call<'_>, args: &InteractArgs) -> ToolResult<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in args.paths.iter().flatten() {
        files.push(call.ctx.files.resolve(call.tenant(), path, "paths").await?);
    }
    for file in args.files.iter().flatten() {
        let bytes = call.ctx.files.inline(&file.name, &file.base64, "files")?;
        let session = call.session().await?;
        files.push(session.stage_upload(&file.name, bytes).await?);
    }
    Ok(files)
}

/// Saves a URL with the session's cookies into its downloads folder; the page stays as it is.
async fn download(call: &mut Call<'_>, args: &InteractArgs) -> ToolResult<InteractOutput> {
    let raw = args.url.as_deref().unwrap_or_default();
    crate::policy::check_length(raw, "url")?;
    let url = url::Url::parse(raw.trim())
        .map_err(|e| ToolError::invalid(format!("field `url` is not a URL ({e}): {raw:?}")))?;
    let policy = call.tenant().policy().clone();
    call.ctx.web.client.check_target(&url, &policy).await?;
    let config = call.ctx.config.clone();
    let dir = call.session().await?.downloads_dir(&config.data_dir);
    let tab = call.tab().await?;
    let saved = tab
        .download(
            &url,
            &dir,
            args.filename.as_deref(),
            config.downloads.max_bytes,
        )
        .await?;
    call.wrote(saved.path.clone());
    let mut done = Done::of(Action::Download);
    done.download = Some(saved);
    Ok(InteractOutput::of(done))
}

/// Actions after which the page may change and is watched until it settles.
/// Whether the action only sets a field's value (typed without submitting, selected).
fn sets_a_value(args: &InteractArgs) -> bool {
    match args.action {
        Action::Type => !args.submit.unwrap_or(false),
        Action::Select => true,
        _ => false,
    }
}

fn changes_page(action: Action) -> bool {
    !matches!(action, Action::Options | Action::Wait | Action::Dialog)
}

/// Runs the action itself (`files`: the upload's checked paths); returns its own result.
async fn perform(
    tab: &mut Tab,
    args: &InteractArgs,
    files: &[PathBuf],
    deadline: Duration,
) -> ToolResult<Done> {
    let ref_id = args.ref_id;
    let need_ref = || ref_id.ok_or_else(|| missing("ref", args.action));
    let mut done = Done::of(args.action);
    match args.action {
        Action::Click => tab.click(need_ref()?).await?,
        Action::Hover => tab.hover(need_ref()?).await?,
        Action::Type => {
            let text = args.text.as_deref().unwrap_or_default();
            let (clear, submit) = (args.clear.unwrap_or(true), args.submit.unwrap_or(false));
            done.check = Some(tab.type_text(need_ref()?, text, clear, submit).await?);
        }
        Action::SendKeys => {
            tab.send_keys(args.keys.as_deref().unwrap_or_default(), ref_id)
                .await?;
        }
        Action::Select => {
            let option = args.option.as_deref().unwrap_or_default();
            let (selected, check) = tab.select(need_ref()?, option).await?;
            done.selected = Some(selected);
            done.check = Some(check);
        }
        Action::Options => done.options = Some(tab.options(need_ref()?).await?),
        Action::Upload => {
            tab.upload(need_ref()?, files).await?;
            done.files = Some(files.len());
        }
        Action::Scroll => {
            let (dx, dy) = scroll_delta(tab, args).await?;
            done.scroll = Some(tab.scroll(ref_id, dx, dy).await?);
        }
        Action::Wait => done.waited_ms = Some(wait(tab, args, deadline).await?),
        Action::Evaluate => {
            let script = args.script.as_deref().unwrap_or_default();
            done.value = Some(tab.evaluate_script(script).await?);
        }
        Action::PageTool => {
            let name = args.text.as_deref().unwrap_or_default();
            let input = args
                .input
                .clone()
                .unwrap_or_else(|| Value::Object(Default::default()));
            done.value = Some(tab.call_page_tool(name, &input).await?);
        }
        Action::Handoff | Action::Download => {
            return Err(ToolError::internal(
                "hand-offs and downloads are not actions on the page",
            ));
        }
        Action::Dialog => {
            let accept = args.accept.unwrap_or(true);
            tab.answer_next_dialog(DialogAnswer {
                accept,
                prompt_text: args.prompt_text.clone(),
            });
            done.next_dialog = Some(if accept { "accept" } else { "dismiss" }.to_string());
            done.answered = Some(tab.take_dialogs());
        }
    }
    Ok(done)
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

/// Waits for text or a selector to appear (or go), or a number of seconds; returns the ms
/// waited.
async fn wait(tab: &Tab, args: &InteractArgs, timeout: Duration) -> ToolResult<u64> {
    let started = Instant::now();
    if let Some(seconds) = args.seconds {
        if !(0.0..=MAX_WAIT_SECONDS).contains(&seconds) {
            return Err(ToolError::invalid(format!(
                "field `seconds` must be between 0 and {MAX_WAIT_SECONDS}"
            )));
        }
        tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
        return Ok(started.elapsed().as_millis() as u64);
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
    Ok(started.elapsed().as_millis() as u64)
}

/// Checks at run time that the fields the action needs are there.
fn check_required(args: &InteractArgs) -> ToolResult<()> {
    let action = args.action;
    let present = |field: &str| match field {
        "ref" => args.ref_id.is_some(),
        "text" => args.text.is_some(),
        "keys" => args.keys.as_deref().is_some_and(|k| !k.trim().is_empty()),
        "option" => args.option.is_some(),
        "paths or files" => {
            args.paths.as_ref().is_some_and(|p| !p.is_empty())
                || args.files.as_ref().is_some_and(|f| !f.is_empty())
        }
        "script" => args.script.as_deref().is_some_and(|s| !s.trim().is_empty()),
        "until or seconds" => args.until.is_some() || args.seconds.is_some(),
        "url" => args.url.as_deref().is_some_and(|u| !u.trim().is_empty()),
        _ => true,
    };
    let required: &[&str] = match action {
        Action::Click | Action::Hover | Action::Options => &["ref"],
        Action::Type => &["ref", "text"],
        Action::SendKeys => &["keys"],
        Action::Select => &["ref", "option"],
        Action::Upload => &["ref", "paths or files"],
        Action::Wait => &["until or seconds"],
        Action::Evaluate => &["script"],
        Action::Download => &["url"],
        Action::PageTool => &["text"],
        Action::Scroll | Action::Dialog | Action::Handoff => &[],
    };
    match required.iter().find(|f| !present(f)) {
        Some(field) => Err(missing(field, action)),
        None => Ok(()),
    }
}

fn missing(field: &str, action: Action) -> ToolError {
    let action = serde_json::to_value(action).unwrap_or_default();
    ToolError::invalid(format!(
        "field `{field}` is required for action={}",
        action.as_str().unwrap_or_default()
    ))
    .with_hint("refs come from browser_read mode=elements")
}
