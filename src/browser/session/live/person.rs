//! What a person did through the live view, for the session's trace: each click resolved to the
//! element it reached (its identity, or the frame of another site and the point in it), the
//! text typed into each field (one entry per field, in order), and the keys that do not type.
//! The element is looked up before the input reaches the page, which may change under it.

use std::sync::Mutex;

use chromiumoxide::Page;
use chromiumoxide::cdp::js_protocol::runtime::EvaluateParams;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::remote_input::{Button, KeyKind, MouseKind, RemoteInput};
use crate::browser::ElementIdentity;
use crate::browser::tab::AGENT_JS;
use crate::sync::Locked;

/// Inputs kept until the next step of the trace takes them.
const MAX_INPUTS: usize = 1000;

/// A frame of another site that a person's input went into (its content is not looked into).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct ForeignFrame {
    pub origin: String,
    pub path: String,
    /// Where in the frame (CSS pixels), for a click.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub y: Option<f64>,
}

/// One thing a person did.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PersonInput {
    Click {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target: Option<ElementIdentity>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        frame: Option<ForeignFrame>,
    },
    /// Text typed into one field, as it ended up (Backspace taken into account).
    Type {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target: Option<ElementIdentity>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        frame: Option<ForeignFrame>,
        text: String,
        /// The field is a password's (or in another site's frame): the trace keeps the text as
        /// a named secret, never the text.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        secret: bool,
    },
    /// A key that does not type: Enter, Tab, Escape, arrows…
    Key { key: String },
}

/// What the page's agent says an input reached.
#[derive(Debug, Deserialize)]
struct Reached {
    identity: Option<ElementIdentity>,
    frame: Option<ForeignFrame>,
    #[serde(default)]
    secret: bool,
}

/// The inputs of a session since the trace last took them.
#[derive(Default)]
pub(crate) struct PersonLog {
    inputs: Mutex<Vec<PersonInput>>,
}

impl PersonLog {
    /// Notes `input`, about to be sent to `page`.
    pub(crate) async fn note(&self, page: &Page, input: &RemoteInput) {
        match input {
            RemoteInput::Mouse {
                action: MouseKind::Down,
                button: Button::Left,
                x,
                y,
                ..
            } => {
                let reached = reached(page, &format!("__wp.personAt({x}, {y})")).await;
                self.push(PersonInput::Click {
                    target: reached.as_ref().and_then(|r| r.identity.clone()),
                    frame: reached.and_then(|r| r.frame),
                });
            }
            // Enter and Tab carry a control character as their text: keys, not typing.
            RemoteInput::Key {
                action: KeyKind::Down,
                text: Some(text),
                ..
            }
            | RemoteInput::Text { text }
                if !text.chars().all(char::is_control) =>
            {
                // (An empty text is all control characters: it never gets here.)
                self.typed(page, text).await;
            }
            RemoteInput::Key {
                action: KeyKind::Down,
                key,
                ..
            } => {
                if key == "Backspace" && self.erased() {
                    return;
                }
                if !matches!(
                    key.as_str(),
                    "Shift" | "Control" | "Alt" | "Meta" | "CapsLock"
                ) {
                    self.push(PersonInput::Key { key: key.clone() });
                }
            }
            _ => {}
        }
    }

    /// Everything noted so far, taken.
    pub(crate) fn take(&self) -> Vec<PersonInput> {
        std::mem::take(&mut *self.inputs.locked())
    }

    fn push(&self, input: PersonInput) {
        let mut inputs = self.inputs.locked();
        if inputs.len() < MAX_INPUTS {
            inputs.push(input);
        }
    }

    /// Text into the focused field: added to the last entry when that was the same field.
    async fn typed(&self, page: &Page, text: &str) {
        let reached = reached(page, "__wp.personFocus()").await;
        let (target, frame, secret) = match reached {
            Some(r) => (r.identity, r.frame.clone(), r.secret || r.frame.is_some()),
            None => (None, None, false),
        };
        let mut inputs = self.inputs.locked();
        if let Some(PersonInput::Type {
            target: last_target,
            frame: last_frame,
            text: so_far,
            ..
        }) = inputs.last_mut()
            && *last_target == target
            && last_frame.as_ref().map(|f| (&f.origin, &f.path))
                == frame.as_ref().map(|f| (&f.origin, &f.path))
        {
            so_far.push_str(text);
            return;
        }
        if inputs.len() < MAX_INPUTS {
            inputs.push(PersonInput::Type {
                target,
                frame,
                text: text.to_string(),
                secret,
            });
        }
    }

    /// Backspace right after typing takes back the last character; true if it did.
    fn erased(&self) -> bool {
        match self.inputs.locked().last_mut() {
            Some(PersonInput::Type { text, .. }) if !text.is_empty() => {
                text.pop();
                true
            }
            _ => false,
        }
    }
}

/// Asks the page's agent what `call` reached; the agent is installed in every document, and
/// sent along only when a page has none (about 40 KB: not with every key press).
async fn reached(page: &Page, call: &str) -> Option<Reached> {
    let answer = evaluate(page, format!("window.__wp ? {call} : undefined")).await?;
    let value = match answer {
        serde_json::Value::Null => {
            evaluate(
                page,
                format!("if (!window.__wp) {{\n{AGENT_JS}\n}}\n{call}"),
            )
            .await?
        }
        value => value,
    };
    serde_json::from_value(value).ok()
}

async fn evaluate(page: &Page, script: String) -> Option<serde_json::Value> {
    let mut params = EvaluateParams::new(script);
    params.return_by_value = Some(true);
    let answer = tokio::time::timeout(std::time::Duration::from_secs(2), page.execute(params))
        .await
        .ok()?
        .ok()?;
    Some(answer.result.result.value.unwrap_or_default())
}
