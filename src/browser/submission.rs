//! Where acting on an element would send a form: a click on a submit button (or on something
//! inside one), or Enter in a form's field. The operator's `submit_cross_site` rule asks this
//! before the action, so that a form posting to another site can be held for a person.

use serde::Deserialize;

use super::tab::Tab;
use crate::error::ToolResult;

/// A form submission an action would make.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Submission {
    /// The absolute URL the form goes to (a submit button's `formaction` over the form's).
    pub action: String,
    /// `get`, `post` or `dialog`.
    pub method: String,
}

/// How the action would submit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubmitBy {
    /// A click on the element.
    Click,
    /// Enter pressed in the element.
    Enter,
}

// The submit control a click reaches, else none; Enter submits a field's form implicitly
// (not from a textarea). `formAction` reads as the document's URL when the attribute is absent,
// so the form's own action is taken unless the button names one.
const SUBMISSION_JS: &str = r#"(el, enter) => {
  let control = null, form = null;
  if (enter) {
    if (el.tagName === 'TEXTAREA' || el.isContentEditable) return null;
    form = el.form || (el.closest && el.closest('form'));
  } else {
    control = el.closest && el.closest('button, input[type=submit], input[type=image]');
    if (!control || (control.tagName === 'BUTTON' && control.type !== 'submit')) return null;
    form = control.form;
  }
  if (!form) return null;
  const named = control && control.hasAttribute('formaction') && control.getAttribute('formaction') !== '';
  const action = named ? control.formAction : form.action;
  const method = (control && control.hasAttribute('formmethod')) ? control.formMethod : form.method;
  return { action: String(action), method: String(method || 'get').toLowerCase() };
}"#;

impl Tab {
    /// The form submission acting on `ref_id` this way would make, if any.
    pub async fn submission(&self, ref_id: u32, by: SubmitBy) -> ToolResult<Option<Submission>> {
        let function = format!("(el) => ({SUBMISSION_JS})(el, {})", by == SubmitBy::Enter);
        let value = self.on_element(ref_id, &function).await?;
        Ok(serde_json::from_value(value).ok())
    }
}
