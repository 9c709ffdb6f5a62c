//! Acting on elements by ref: click, keys, upload, hover, scroll, evaluate (typing and
//! choosing options are in `fill.rs`).
//!
//! Pointer actions use real CDP input events at the element's centre after checking that the
//! element is visible, enabled and not covered (a covered target is an error, never a click on
//! whatever lies on top). Elements of foreign frames get the same: the point is carried out
//! through each frame's `<iframe>` (scrolled into view, checked for cover) to the top viewport;
//! only where that cannot be traced do they get DOM events instead.

use std::path::PathBuf;
use std::time::Duration;

use chromiumoxide::cdp::browser_protocol::dom::SetFileInputFilesParams;
use chromiumoxide::cdp::browser_protocol::input::{
    DispatchKeyEventParams, DispatchKeyEventType, DispatchMouseEventParams, DispatchMouseEventType,
    MouseButton,
};
use chromiumoxide::cdp::js_protocol::runtime::{
    CallArgument, CallFunctionOnParams, EvaluateParams, RemoteObjectType,
};
use chromiumoxide::keys::USKEYBOARD_LAYOUT;
use chromiumoxide::layout::Point;
use serde::Deserialize;
use serde_json::{Value, json};

use super::frames::Doc;
use super::tab::{Tab, script_error};
use crate::error::{ErrorCode, ToolError, ToolResult};

#[derive(Debug, Deserialize)]
struct PointerTarget {
    x: Option<f64>,
    y: Option<f64>,
    /// The point is in a foreign frame's own viewport, not the top one.
    #[serde(default)]
    local: bool,
    /// Reaching the point scrolled the document.
    #[serde(default)]
    scrolled: bool,
    problem: Option<String>,
    detail: Option<String>,
}

/// Where a pointer action lands.
enum Aim {
    /// Real input events at these top-viewport coordinates.
    At(Point),
    /// Inside a frame whose place in the top viewport cannot be traced: DOM events on the element.
    Dom,
}

impl Tab {
    async fn aim(&self, ref_id: u32, verb: &str) -> ToolResult<Aim> {
        let doc = self.locate_ref(ref_id).await?;
        let target = self
            .on_element_in(&doc, ref_id, "(el) => __wp.aim(el)")
            .await?;
        let target = pointer_target(target, ref_id, verb, "it")?;
        match (target.x, target.y) {
            (Some(x), Some(y)) if !target.local => Ok(Aim::At(Point { x, y })),
            (Some(x), Some(y)) => Ok(self
                .through_frames(&doc, Point { x, y }, ref_id, verb, Reach::Act)
                .await?
                .map_or(Aim::Dom, Aim::At)),
            _ => Ok(Aim::Dom),
        }
    }

    /// Carries a point of a foreign frame's viewport out through the frames holding it to the
    /// top viewport, scrolling each frame into view and, to act there, checking that nothing
    /// covers it. `None` when a frame's place cannot be traced (its owner sits in another
    /// foreign frame of the page's own process).
    pub(crate) async fn through_frames(
        &self,
        doc: &Doc,
        mut point: Point,
        ref_id: u32,
        verb: &str,
        reach: Reach,
    ) -> ToolResult<Option<Point>> {
        let mut doc = doc.clone();
        let mut scrolled = Vec::new();
        while let Some(key) = doc.key().map(str::to_string) {
            let Some((holder, parent)) = self.frames.parent(&doc) else {
                return Ok(None);
            };
            let Some(owner) = self.frames.tag_owner(&self.browser, &holder, &key).await else {
                return Ok(None);
            };
            let mut call = CallFunctionOnParams::new(
                "function (x, y, reveal) { return window.__wp ? __wp.aimThrough(this, x, y, reveal) : null; }",
            );
            call.object_id = Some(owner.into());
            call.arguments = Some(vec![
                argument(point.x),
                argument(point.y),
                argument(reach == Reach::Reveal),
            ]);
            call.return_by_value = Some(true);
            let answer = self
                .cdp(
                    "finding a frame on the page",
                    self.frames.target(&holder).send(call),
                )
                .await;
            let Ok(answer) = answer else {
                // The owner's document was replaced; tag again next time.
                self.frames.forget_owner(&key);
                return Ok(None);
            };
            let value = answer.result.value.unwrap_or_default();
            if value.is_null() {
                return Ok(None);
            }
            let target = pointer_target(value, ref_id, verb, "its frame")?;
            let (Some(x), Some(y)) = (target.x, target.y) else {
                return Ok(None);
            };
            point = Point { x, y };
            if target.scrolled {
                scrolled.push(parent.clone());
            }
            if target.local && parent == Doc::Top {
                return Ok(None);
            }
            doc = parent;
        }
        // The browser routes input to a frame by what was last drawn: after a scroll, let each
        // scrolled document draw before the pointer goes there.
        for doc in scrolled {
            let _ = self
                .evaluate_in(
                    &doc,
                    NEXT_FRAMES_JS,
                    Some(Duration::from_millis(FRAME_WAIT_MS)),
                )
                .await;
        }
        Ok(Some(point))
    }

    /// Clicks the element with real mouse events at its centre.
    pub async fn click(&self, ref_id: u32) -> ToolResult<()> {
        match self.aim(ref_id, "click").await? {
            Aim::At(point) => {
                self.cdp("clicking", self.page.click(point)).await?;
            }
            Aim::Dom => {
                self.on_element(ref_id, "(el) => { el.focus(); el.click(); }")
                    .await?;
            }
        }
        Ok(())
    }

    /// Moves the mouse over the element.
    pub async fn hover(&self, ref_id: u32) -> ToolResult<()> {
        match self.aim(ref_id, "hover").await? {
            Aim::At(point) => {
                self.cdp("hovering", self.page.move_mouse(point)).await?;
            }
            Aim::Dom => {
                let events = "(el) => ['pointerover', 'mouseover', 'pointerenter', 'mouseenter', 'mousemove']\
                    .forEach((t) => el.dispatchEvent(new MouseEvent(t, { bubbles: !t.endsWith('enter') })))";
                self.on_element(ref_id, events).await?;
            }
        }
        Ok(())
    }

    /// Presses keys: chords like `Control+A` or `Shift+Tab`, several separated by spaces.
    /// With a ref, the element is focused first.
    pub async fn send_keys(&self, keys: &str, ref_id: Option<u32>) -> ToolResult<()> {
        let chords: Vec<&str> = keys.split_whitespace().collect();
        if chords.is_empty() {
            return Err(ToolError::invalid("field `keys` is empty"));
        }
        for chord in &chords {
            parse_chord(chord)?;
        }
        if let Some(ref_id) = ref_id {
            self.on_element(ref_id, "(el) => el.focus()").await?;
        }
        for chord in chords {
            self.press_chord(chord).await?;
        }
        Ok(())
    }

    pub(crate) async fn press_chord(&self, chord: &str) -> ToolResult<()> {
        let (modifiers, key) = parse_chord(chord)?;
        // A single uppercase letter types itself in uppercase, as on a keyboard with Shift.
        let upper = chord.chars().count() == 1 && chord.chars().all(char::is_uppercase);
        let mut held = 0;
        for (name, bit) in &modifiers {
            held |= bit;
            self.key_event(DispatchKeyEventType::RawKeyDown, name, held, None)
                .await?;
        }
        let definition = key_definition(&key).expect("parse_chord checked the key");
        // Text is only produced without Control/Alt/Meta (Shift alone still types).
        let text = (held & !SHIFT == 0)
            .then(|| key_text(&key, upper || held & SHIFT != 0))
            .flatten();
        let down = if text.is_some() {
            DispatchKeyEventType::KeyDown
        } else {
            DispatchKeyEventType::RawKeyDown
        };
        self.key_event(down, definition.key, held, text.as_deref())
            .await?;
        self.key_event(DispatchKeyEventType::KeyUp, definition.key, held, None)
            .await?;
        for (name, bit) in modifiers.iter().rev() {
            held &= !bit;
            self.key_event(DispatchKeyEventType::KeyUp, name, held, None)
                .await?;
        }
        Ok(())
    }

    async fn key_event(
        &self,
        kind: DispatchKeyEventType,
        key: &str,
        modifiers: i64,
        text: Option<&str>,
    ) -> ToolResult<()> {
        let definition = key_definition(key)
            .ok_or_else(|| ToolError::invalid(format!("unknown key {key:?}")))?;
        let params = DispatchKeyEventParams {
            r#type: kind,
            modifiers: Some(modifiers),
            text: text.map(str::to_string),
            unmodified_text: text.map(str::to_string),
            code: Some(definition.code.to_string()),
            key: Some(definition.key.to_string()),
            windows_virtual_key_code: Some(definition.key_code),
            native_virtual_key_code: Some(definition.key_code),
            timestamp: None,
            key_identifier: None,
            auto_repeat: None,
            is_keypad: None,
            is_system_key: None,
            location: None,
            commands: None,
        };
        self.cdp("pressing a key", self.page.execute(params))
            .await?;
        Ok(())
    }

    /// The options of a `<select>` (value, label, selected, disabled).
    pub async fn options(&self, ref_id: u32) -> ToolResult<Value> {
        let script = "(el) => el.tagName !== 'SELECT' ? null : Array.from(el.options).map((o) => \
            ({ value: o.value, label: o.label, selected: o.selected, disabled: o.disabled }))";
        let options = self.on_element(ref_id, script).await?;
        if options.is_null() {
            return Err(ToolError::invalid(format!("[{ref_id}] is not a select")));
        }
        Ok(options)
    }

    /// Puts local files into an `<input type=file>` (fires `input` and `change`).
    /// Sets the files of a file input; `paths` were checked by the caller (files roots).
    pub async fn upload(&self, ref_id: u32, paths: &[PathBuf]) -> ToolResult<()> {
        let is_file_input = self
            .on_element(
                ref_id,
                "(el) => el.tagName === 'INPUT' && el.type === 'file'",
            )
            .await?;
        if is_file_input != json!(true) {
            return Err(ToolError::invalid(format!(
                "[{ref_id}] is not a file input"
            )));
        }
        let doc = self.locate_ref(ref_id).await?;
        let mut find = EvaluateParams::new(format!("__wp.resolve({ref_id}).el"));
        if let Doc::Context { context, .. } = &doc {
            find.context_id = Some(*context);
        }
        let found = self
            .cdp("finding the file input", self.send_to(&doc, find))
            .await?;
        let object_id = found
            .result
            .object_id
            .clone()
            .ok_or_else(|| ToolError::internal("the file input has no object id"))?;
        let files = paths
            .iter()
            .map(|p| {
                std::fs::canonicalize(p)
                    .unwrap_or_else(|_| p.clone())
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        let mut params = SetFileInputFilesParams::new(files);
        params.object_id = Some(object_id);
        self.cdp("setting files", self.send_to(&doc, params))
            .await?;
        Ok(())
    }

    /// Scrolls an element into view, or the page by `dx`/`dy` pixels with a real wheel event;
    /// says how far through its range the box that scrolled now is.
    pub async fn scroll(&self, ref_id: Option<u32>, dx: f64, dy: f64) -> ToolResult<Value> {
        if let Some(ref_id) = ref_id {
            self.on_element(
                ref_id,
                "(el) => el.scrollIntoView({ block: 'center', behavior: 'instant' })",
            )
            .await?;
        } else {
            let size = self.evaluate_raw("[innerWidth, innerHeight]").await?;
            let half = |i: usize| size[i].as_f64().unwrap_or(400.0) / 2.0;
            let mut wheel =
                DispatchMouseEventParams::new(DispatchMouseEventType::MouseWheel, half(0), half(1));
            wheel.delta_x = Some(dx);
            wheel.delta_y = Some(dy);
            wheel.button = Some(MouseButton::None);
            self.cdp("scrolling", self.page.execute(wheel)).await?;
        }
        // The page scrolls, and fires `scroll` (which may load more), when it next draws: let
        // it draw, so what the scroll starts is there for the wait after the action.
        let frames = Duration::from_millis(FRAME_WAIT_MS);
        let _ = self
            .evaluate_in(&Doc::Top, NEXT_FRAMES_JS, Some(frames))
            .await;
        self.evaluate_raw(&format!("({SCROLLED_JS})({})", dx != 0.0))
            .await
    }

    /// Runs a script in the page: an expression or statements (the last value is returned), or a
    /// function literal, which is called. Promises are awaited; the value comes back as JSON.
    pub async fn evaluate_script(&self, script: &str) -> ToolResult<Value> {
        let mut first = EvaluateParams::new(script);
        first.await_promise = Some(true);
        first.return_by_value = Some(false);
        let response = self.cdp("evaluating", self.page.execute(first)).await?;
        let result = &response.result;
        if let Some(details) = &result.exception_details {
            return Err(script_error(details));
        }
        let object = &result.result;
        let Some(object_id) = object.object_id.clone() else {
            return Ok(object.value.clone().unwrap_or(Value::Null));
        };
        let is_function = object.r#type == RemoteObjectType::Function;
        let body = if is_function {
            "function () { return this(); }"
        } else {
            "function () { return this; }"
        };
        let mut call = CallFunctionOnParams::new(body);
        call.object_id = Some(object_id);
        call.await_promise = Some(true);
        call.return_by_value = Some(true);
        let value = self.cdp("evaluating", self.page.execute(call)).await?;
        if let Some(details) = &value.result.exception_details {
            return Err(script_error(details));
        }
        Ok(value.result.result.value.clone().unwrap_or(Value::Null))
    }
}

/// Resolves once the document has drawn a frame after this call (two animation frames).
/// How far through its range the box that scrolled now is (the scrolling box under the
/// viewport's centre, else the page), along the scroll's axis: `"42%"`, `"100%"` at the end.
const SCROLLED_JS: &str = r#"((horizontal) => {
  const page = document.scrollingElement || document.documentElement;
  const room = (el) => horizontal ? el.scrollWidth - el.clientWidth : el.scrollHeight - el.clientHeight;
  let el = document.elementFromPoint(innerWidth / 2, innerHeight / 2);
  for (; el && el !== page && el !== document.body; el = el.parentElement) {
    const style = getComputedStyle(el);
    if (room(el) > 0 && /auto|scroll|overlay/.test(horizontal ? style.overflowX : style.overflowY)) break;
  }
  if (!el || el === document.body) el = page;
  const range = room(el);
  if (!el || range <= 0) return 'nothing to scroll';
  const at = horizontal ? el.scrollLeft : el.scrollTop;
  return (at >= range - 1 ? 100 : Math.floor(100 * at / range)) + '%';
})"#;

const NEXT_FRAMES_JS: &str =
    "new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => done(true))))";
/// Upper bound for that wait (a page that draws no frames must not stall the action).
const FRAME_WAIT_MS: u64 = 500;

/// What a point carried out of a frame is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reach {
    /// Input goes there: nothing may cover it.
    Act,
    /// Only to be in view (a capture).
    Reveal,
}

/// Reads the agent's pointer answer, turning a problem into an error an agent can act on;
/// `what` names the thing that has the problem ("it", "its frame").
fn pointer_target(value: Value, ref_id: u32, verb: &str, what: &str) -> ToolResult<PointerTarget> {
    let target: PointerTarget = serde_json::from_value(value)
        .map_err(|e| ToolError::internal(format!("unexpected pointer target: {e}")))?;
    let Some(problem) = target.problem.as_deref() else {
        return Ok(target);
    };
    let detail = target.detail.clone().unwrap_or_default();
    let (message, hint) = match problem {
        "covered" => (
            format!("cannot {verb} [{ref_id}]: {what} is covered by {detail}"),
            "close or dismiss what covers it (a dialog, banner or overlay), then take a new snapshot",
        ),
        "disabled" => (
            format!("cannot {verb} [{ref_id}]: {what} is disabled"),
            "fill in what the form needs first, then take a new snapshot",
        ),
        _ => (
            format!("cannot {verb} [{ref_id}]: {what} is not visible ({detail})"),
            "open the menu or section that holds it, then take a new snapshot",
        ),
    };
    Err(ToolError::new(ErrorCode::InvalidArgument, message).with_hint(hint))
}

/// A plain value passed to `Runtime.callFunctionOn`.
fn argument(value: impl Into<Value>) -> CallArgument {
    CallArgument {
        value: Some(value.into()),
        unserializable_value: None,
        object_id: None,
    }
}

const ALT: i64 = 1;
const CONTROL: i64 = 2;
const META: i64 = 4;
const SHIFT: i64 = 8;

/// Splits `Control+Shift+K` into its modifiers (with CDP bits) and the key.
fn parse_chord(chord: &str) -> ToolResult<(Vec<(&'static str, i64)>, String)> {
    let parts: Vec<&str> = chord.split('+').collect();
    let (key, modifier_names) = match parts.split_last() {
        // "Control++" and "+" press the plus key itself.
        Some((last, rest)) if last.is_empty() && !rest.is_empty() => ("+", &rest[..rest.len() - 1]),
        Some((last, rest)) => (*last, rest),
        None => return Err(ToolError::invalid("field `keys` is empty")),
    };
    let mut modifiers = Vec::new();
    for name in modifier_names {
        let modifier = match name.to_ascii_lowercase().as_str() {
            "control" | "ctrl" => ("Control", CONTROL),
            "shift" => ("Shift", SHIFT),
            "alt" | "option" => ("Alt", ALT),
            "meta" | "cmd" | "command" | "super" => ("Meta", META),
            _ => return Err(unknown_key(name)),
        };
        modifiers.push(modifier);
    }
    let key = canonical_key(key);
    key_definition(&key).ok_or_else(|| unknown_key(&key))?;
    Ok((modifiers, key))
}

fn unknown_key(name: &str) -> ToolError {
    ToolError::invalid(format!("field `keys`: unknown key {name:?}")).with_hint(
        "use key names like Enter, Tab, Escape, Backspace, ArrowDown, PageDown, a, 1, chords like Control+A",
    )
}

fn canonical_key(key: &str) -> String {
    let alias = match key.to_ascii_lowercase().as_str() {
        "esc" => "Escape",
        "return" => "Enter",
        "space" => " ",
        "up" => "ArrowUp",
        "down" => "ArrowDown",
        "left" => "ArrowLeft",
        "right" => "ArrowRight",
        "del" => "Delete",
        "pgup" => "PageUp",
        "pgdn" => "PageDown",
        _ => "",
    };
    if !alias.is_empty() {
        return alias.to_string();
    }
    // Single letters are named by their lowercase key; Shift makes them uppercase.
    if key.chars().count() == 1 {
        return key.to_lowercase();
    }
    // Named keys are case-insensitive ("enter" = "Enter").
    USKEYBOARD_LAYOUT
        .iter()
        .find(|d| d.key.eq_ignore_ascii_case(key))
        .map_or_else(|| key.to_string(), |d| d.key.to_string())
}

fn key_definition(key: &str) -> Option<&'static chromiumoxide::keys::KeyDefinition> {
    USKEYBOARD_LAYOUT.iter().find(|d| d.key == key)
}

/// The text a key types, if any.
fn key_text(key: &str, shift: bool) -> Option<String> {
    match key {
        "Enter" => Some("\r".into()),
        _ if key.chars().count() == 1 => Some(if shift {
            key.to_uppercase()
        } else {
            key.to_string()
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chords_parse_with_aliases() {
        let (mods, key) = parse_chord("Ctrl+Shift+a").unwrap();
        assert_eq!(mods, vec![("Control", CONTROL), ("Shift", SHIFT)]);
        assert_eq!(key, "a");
        assert_eq!(parse_chord("Control+A").unwrap().1, "a");
        assert_eq!(parse_chord("enter").unwrap().1, "Enter");
        assert_eq!(parse_chord("Esc").unwrap().1, "Escape");
        assert!(parse_chord("Hyper+x").is_err());
        assert!(parse_chord("NoSuchKey").is_err());
    }
}
