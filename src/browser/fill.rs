//! Filling form controls: typing into text fields, setting the value controls (date, time,
//! month, week, datetime-local, colour, number, range) as a person's pick would, choosing
//! options — and reading back what the control holds once the page has reacted, so a change
//! the page undid or cut short (maxlength, an input mask, a script) is reported, not assumed.

use chromiumoxide::cdp::browser_protocol::input::InsertTextParams;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::formats::{ValueKind, control_value, refusal};
use super::tab::Tab;
use crate::error::{ToolError, ToolResult};

/// Looks at an element about to be filled. A value control is only described (its type and
/// the page's language): nothing is touched before its value is known to be acceptable. Any
/// other editable element is focused for typing; to clear it, everything is selected so the
/// typed text replaces it in one input event, as a person's select-all and typing would; where
/// that cannot be (an email field, or nothing to type) the value is emptied with an input event.
const PREPARE_JS: &str = r#"(el, clear, replace) => {
  const type = el.tagName === 'INPUT' ? el.type : '';
  const other = { checkbox: 'a checkbox', radio: 'a radio button', file: 'a file input',
    button: 'a button', submit: 'a button', reset: 'a button', image: 'a button' };
  if (other[type]) return { problem: other[type] };
  if (el.tagName === 'SELECT') return { problem: 'a select' };
  if (!(el.isContentEditable || ['INPUT', 'TEXTAREA'].includes(el.tagName))) return { problem: 'not editable' };
  if (el.disabled || el.readOnly) return { problem: 'read-only' };
  if (['date', 'time', 'month', 'week', 'datetime-local', 'color', 'number', 'range'].includes(type)) {
    const holder = el.closest('[lang]');
    return { set: type, lang: holder ? holder.lang : '' };
  }
  el.focus();
  const field = !el.isContentEditable;
  const before = field ? el.value : el.innerText;
  if (!clear) {
    if (field) { const end = el.value.length; try { el.setSelectionRange(end, end); } catch (e) { /* no caret */ } }
    return { before };
  }
  if (replace && !field) {
    const range = el.ownerDocument.createRange();
    range.selectNodeContents(el);
    const selection = el.ownerDocument.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    return { before: '' };
  }
  if (replace && el.value === '') return { before: '' };
  if (replace) {
    try { el.select(); } catch (e) { /* not selectable */ }
    if (el.selectionStart === 0 && el.selectionEnd === el.value.length) return { before: '' };
  }
  if (field) {
    const proto = el.tagName === 'INPUT' ? HTMLInputElement.prototype : HTMLTextAreaElement.prototype;
    Object.getOwnPropertyDescriptor(proto, 'value').set.call(el, '');
  } else {
    el.textContent = '';
  }
  el.dispatchEvent(new Event('input', { bubbles: true }));
  return { before: '' };
}"#;

/// Sets a value control as a person's pick does: focus, the element's native value setter (a
/// framework's own setter on the element, like React's value tracker, must not see the write,
/// or it ignores the input event that follows), then bubbling `input` and `change`. A value the
/// control refuses (sanitised away, or outside min/max/step of a non-range control) is put
/// back silently, before any event, and reported.
const SET_VALUE_JS: &str = r#"(el, value) => {
  const set = Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value').set;
  const before = el.value;
  set.call(el, value);
  const v = el.validity;
  const refused = el.value === '' ? 'rejected'
    : el.type === 'range' ? null // a range clamps and steps by itself, as its slider would
    : v.rangeUnderflow ? 'below' : v.rangeOverflow ? 'above' : v.stepMismatch ? 'step' : null;
  if (refused) {
    set.call(el, before);
    return { problem: refused, min: el.min, max: el.max, step: el.step };
  }
  el.focus();
  el.dispatchEvent(new Event('input', { bubbles: true }));
  el.dispatchEvent(new Event('change', { bubbles: true }));
  return {};
}"#;

/// What a field holds against what was asked (`expect`: `text` for fields, `option` for a
/// select's chosen option value; `asked` as the agent wrote it). Password fields show bullets
/// of the same length; long values are cut.
const CHECK_JS: &str = r#"(el, expect) => {
  const SHOWN = 200;
  const hidden = el.type === 'password';
  const show = (s) => { const t = hidden ? '•'.repeat([...s].length) : s; return t.length > SHOWN ? t.slice(0, SHOWN - 1) + '…' : t; };
  const squash = (s) => s.replace(/\s+/g, ' ').trim();
  let now, same, why = null;
  if (el.tagName === 'SELECT') {
    const chosen = Array.from(el.selectedOptions);
    now = chosen.map((o) => o.label).join(', ');
    same = chosen.some((o) => o.value === expect.option);
  } else if (el.tagName === 'INPUT' || el.tagName === 'TEXTAREA') {
    const want = el.tagName === 'TEXTAREA' ? expect.text.replace(/\r\n?/g, '\n') : expect.text;
    now = el.value;
    same = now === want;
    if (!same && el.maxLength > 0 && want.length > el.maxLength && now === want.slice(0, el.maxLength)) why = `maxlength ${el.maxLength}`;
    if (!same && el.type === 'range') why = `clamped to ${el.min || 0}–${el.max || 100}, step ${el.step || 1}`;
  } else {
    now = el.innerText;
    same = squash(now) === squash(expect.text);
  }
  return { value: show(now), mismatch: same ? null : { asked: show(expect.asked), now: show(now), why } };
}"#;

/// What a field holds after an action.
#[derive(Debug, Clone, Deserialize)]
pub struct Filled {
    pub value: String,
    pub mismatch: Option<ValueMismatch>,
}

/// The field holds something other than was asked: a length limit, an input mask, a clamp or
/// a script changed it (or undid it).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ValueMismatch {
    /// What the action asked for.
    pub asked: String,
    /// What the field holds.
    pub now: String,
    /// Why, when known (`maxlength 5`, a range's clamp).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// What an action asked a field to hold, to compare with what it holds once the page reacted.
#[derive(Debug, Clone)]
pub struct FieldCheck {
    ref_id: u32,
    expect: Value,
    /// Read before Enter submitted the form (whatever comes after may have left the page).
    early: Option<Filled>,
}

#[derive(Debug, Deserialize)]
struct Prepared {
    problem: Option<String>,
    set: Option<String>,
    #[serde(default)]
    lang: String,
    #[serde(default)]
    before: String,
    #[serde(default)]
    password: bool,
}

#[derive(Debug, Deserialize)]
struct SetOutcome {
    problem: Option<String>,
    #[serde(default)]
    min: String,
    #[serde(default)]
    max: String,
    #[serde(default)]
    step: String,
}

impl Tab {
    /// Fills the element with `text`: value controls get their value set (converted into the
    /// control's format, or refused), anything else editable is typed into as trusted input.
    /// With `submit`, Enter is pressed after (the value is read before that).
    pub async fn type_text(
        &self,
        ref_id: u32,
        text: &str,
        clear: bool,
        submit: bool,
    ) -> ToolResult<FieldCheck> {
        let replace = clear && !text.is_empty();
        let prepare = format!(
            "(el) => Object.assign(({PREPARE_JS})(el, {clear}, {replace}), {{ password: el.type === 'password' }})"
        );
        let prepared: Prepared = serde_json::from_value(self.on_element(ref_id, &prepare).await?)
            .map_err(|e| {
            ToolError::internal(format!("unexpected answer while focusing: {e}"))
        })?;
        if let Some(problem) = prepared.problem {
            return Err(not_typable(ref_id, &problem));
        }
        if prepared.password {
            // What the page sends with it (a form post, a fetch) must not show it either.
            self.log().remember_secret(text);
        }
        let expected = match prepared.set.as_deref().and_then(ValueKind::of) {
            Some(kind) => {
                let value = control_value(kind, text, &prepared.lang)?;
                self.set_value(ref_id, kind, text, &value).await?;
                value
            }
            None => {
                if !text.is_empty() {
                    self.cdp("typing", self.page.execute(InsertTextParams::new(text)))
                        .await?;
                }
                format!("{}{text}", prepared.before)
            }
        };
        let mut check = FieldCheck {
            ref_id,
            expect: json!({ "text": expected, "asked": text }),
            early: None,
        };
        if submit {
            check.early = self.read_field(&check).await;
            self.press_chord("Enter").await?;
        }
        Ok(check)
    }

    /// Sets a value control to `value` (`text` converted), or says why it refused it.
    async fn set_value(
        &self,
        ref_id: u32,
        kind: ValueKind,
        text: &str,
        value: &str,
    ) -> ToolResult<()> {
        let script = format!(
            "(el) => ({SET_VALUE_JS})(el, {})",
            serde_json::to_string(value).unwrap_or_default()
        );
        let outcome: SetOutcome = serde_json::from_value(self.on_element(ref_id, &script).await?)
            .map_err(|e| {
            ToolError::internal(format!("unexpected answer while setting: {e}"))
        })?;
        match outcome.problem.as_deref() {
            None => Ok(()),
            Some("rejected") => Err(refusal(kind, text, "the control refused it")),
            Some(problem) => Err(out_of_bounds(ref_id, text, problem, &outcome)),
        }
    }

    /// Selects an option of a `<select>` by value or visible label and fires `input`/`change`;
    /// returns the option chosen and what to check afterwards.
    pub async fn select(&self, ref_id: u32, option: &str) -> ToolResult<(Value, FieldCheck)> {
        let script = format!(
            "(el) => {{ if (el.tagName !== 'SELECT') return {{ problem: 'it is not a select' }}; \
             const want = {want}; const norm = (s) => s.replace(/\\s+/g, ' ').trim().toLowerCase(); \
             const opts = Array.from(el.options); \
             const o = opts.find((o) => o.value === want) || opts.find((o) => o.label === want || o.text === want) \
               || opts.find((o) => norm(o.label) === norm(want)) || opts.find((o) => norm(o.label).includes(norm(want))); \
             if (!o) return {{ problem: 'no option matches', options: opts.map((o) => o.label).slice(0, 30) }}; \
             if (o.disabled) return {{ problem: 'that option is disabled' }}; \
             el.focus(); o.selected = true; \
             el.dispatchEvent(new Event('input', {{ bubbles: true }})); \
             el.dispatchEvent(new Event('change', {{ bubbles: true }})); \
             return {{ value: o.value, label: o.label }}; }}",
            want = serde_json::to_string(option).unwrap_or_default()
        );
        let outcome = self.on_element(ref_id, &script).await?;
        if let Some(problem) = outcome.get("problem").and_then(Value::as_str) {
            let mut error =
                ToolError::invalid(format!("cannot select {option:?} in [{ref_id}]: {problem}"));
            if let Some(options) = outcome.get("options") {
                error = error.with_hint(format!("options are: {options}"));
            }
            return Err(error);
        }
        let check = FieldCheck {
            ref_id,
            expect: json!({ "option": outcome["value"], "asked": option }),
            early: None,
        };
        Ok((outcome, check))
    }

    /// What the field holds now against what the action asked; `None` when it cannot be read
    /// any more (the action took the page elsewhere).
    pub async fn check_field(&self, check: &FieldCheck) -> Option<Filled> {
        match &check.early {
            Some(filled) => Some(filled.clone()),
            None => self.read_field(check).await,
        }
    }

    async fn read_field(&self, check: &FieldCheck) -> Option<Filled> {
        let script = format!("(el) => ({CHECK_JS})(el, {})", check.expect);
        let value = self.on_element(check.ref_id, &script).await.ok()?;
        serde_json::from_value(value).ok()
    }
}

/// The error for typing into something that takes no typing, saying what does.
fn not_typable(ref_id: u32, problem: &str) -> ToolError {
    let hint = match problem {
        "a checkbox" | "a radio button" | "a button" => "click it instead",
        "a select" => "use action=select with the option's value or label",
        "a file input" => "use action=upload with paths or files",
        _ => "type into a textbox, searchbox or editable element from mode=elements",
    };
    ToolError::invalid(format!("cannot type into [{ref_id}]: it is {problem}")).with_hint(hint)
}

/// A number, date or time outside the control's min, max or step: refused, not clamped (a
/// range clamps by itself, and says so through the value check).
fn out_of_bounds(ref_id: u32, text: &str, problem: &str, limits: &SetOutcome) -> ToolError {
    let step = match limits.step.as_str() {
        "" => "its default step (whole numbers, minutes of a time, days of a date)".to_string(),
        step => format!("its step {step}"),
    };
    let why = match problem {
        "below" => format!("below its min {}", limits.min),
        "above" => format!("above its max {}", limits.max),
        _ => format!("not on {step}"),
    };
    let range = match (limits.min.as_str(), limits.max.as_str()) {
        ("", "") => String::new(),
        (min, "") => format!(" from {min}"),
        ("", max) => format!(" up to {max}"),
        (min, max) => format!(" from {min} to {max}"),
    };
    ToolError::invalid(format!("refused {text:?} for [{ref_id}]: {why}")).with_hint(format!(
        "nothing was changed; give a value{range} on {step}"
    ))
}
