//! A trace of every session: each browser tool call in order — its arguments with secrets
//! replaced by named placeholders, the element it acted on (its identity, recorded before the
//! action), what came of it and what went wrong on the page — as JSON Lines in the tenant's data
//! dir (`traces/<session>/trace.jsonl`), exported as a zip, kept by age (`[trace]`).
//!
//! The trace is what a replay runs (`crate::replay`): it needs no model, only the steps.

mod store;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::browser::live::PersonInput;
use crate::browser::{ActionLines, ElementIdentity};

pub use store::{Picture, Traces, read_image, read_steps};

/// The trace file inside a session's folder and an export.
pub const TRACE_FILE: &str = "trace.jsonl";

/// One tool call of a session, as one line of `trace.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Step {
    /// 1, 2, … in the order the calls ended.
    pub seq: u64,
    /// When the call ended (RFC 3339).
    pub at: String,
    pub tool: String,
    /// The arguments as sent, except secrets: a typed password is `{{password}}`, named after
    /// the field (see `secrets`), and inline files are left out.
    pub args: Value,
    /// The element the action acted on, as it was before the action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<ElementIdentity>,
    /// The tab and URL after the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tab: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    pub ok: bool,
    /// The result in a few words, or the error's code and message.
    pub summary: String,
    pub elapsed_ms: u64,
    /// What went wrong on the page while the call ran (console errors, page errors, failed
    /// requests), as the result said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_events: Option<Value>,
    /// Everything the page did during an action (navigations and actions): its requests and
    /// console messages, a line each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<ActionLines>,
    /// The viewport after a step that changed the page, a JPEG in the export (`shots/0004.jpg`);
    /// the page before a step is the latest earlier step's picture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screenshot: Option<String>,
    /// What a person did through the live view since the step before (a hand-off's inputs):
    /// clicks by element, text per field (secrets as `{{name}}`), keys.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub person: Vec<PersonInput>,
    /// Names of the secrets this step's arguments hold as `{{name}}`; a replay takes each from
    /// `--secret name=…` or `WEBPILOT_SECRET_<NAME>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
}

/// Whether a call acts on the page (a navigation or an action): what the page did meanwhile
/// is recorded with its step.
pub fn acts_on_page(tool: &str, args: &Value) -> bool {
    let action = args["action"].as_str().unwrap_or_default();
    match tool {
        "browser_navigate" => true,
        "browser_interact" => !matches!(action, "options" | "wait" | "dialog" | "download"),
        _ => false,
    }
}

/// Whether a step leaves another page to look at: a picture is taken after it.
pub fn shows_new_page(tool: &str, args: &Value) -> bool {
    acts_on_page(tool, args)
        || (tool == "browser_tabs"
            && matches!(args["action"].as_str(), Some("new" | "switch" | "close")))
}

/// A secret's name from the field it was typed into: its accessible name in lower case with
/// `_` for anything else (`Password` → `password`, `Card number` → `card_number`).
pub fn secret_name(field: &str) -> String {
    let mut name = String::new();
    for c in field.trim().chars() {
        if c.is_ascii_alphanumeric() {
            name.push(c.to_ascii_lowercase());
        } else if !name.ends_with('_') && !name.is_empty() {
            name.push('_');
        }
    }
    let name = name.trim_end_matches('_').to_string();
    if name.is_empty() {
        "password".to_string()
    } else {
        name
    }
}

/// Replaces what must not be written down in a call's arguments: text typed into a password
/// field (named after the field) and inline file contents. Returns the secrets' names.
pub fn mask(tool: &str, args: &mut Value, target: Option<&ElementIdentity>) -> Vec<String> {
    let mut secrets = Vec::new();
    let Value::Object(map) = args else {
        return secrets;
    };
    let typed_secret = tool == "browser_interact"
        && map.get("action").and_then(Value::as_str) == Some("type")
        && target.is_some_and(|t| t.attributes.get("type").map(String::as_str) == Some("password"));
    if typed_secret && let Some(text) = map.get_mut("text") {
        let name = secret_name(target.map_or("", |t| t.name.as_str()));
        *text = Value::String(format!("{{{{{name}}}}}"));
        secrets.push(name);
    }
    if let Some(Value::Array(files)) = map.get_mut("files") {
        for file in files.iter_mut() {
            if let Some(file) = file.as_object_mut()
                && let Some(Value::String(data)) = file.remove("base64")
            {
                file.insert("bytes".into(), Value::from(data.len() / 4 * 3));
            }
        }
    }
    // A cookie file's content holds the session's cookies.
    if tool == "browser_cookies" && map.contains_key("content") {
        map.insert("content".into(), Value::String("{{cookies}}".into()));
        secrets.push("cookies".into());
    }
    secrets
}

/// Replaces the text a person typed into password fields (and other sites' frames) with named
/// secrets, as `mask` does for an agent's; adds their names to `secrets`.
pub fn mask_person(inputs: &mut [PersonInput], secrets: &mut Vec<String>) {
    for input in inputs {
        let PersonInput::Type {
            target,
            frame,
            text,
            secret: true,
        } = input
        else {
            continue;
        };
        let field = match (target, frame) {
            (Some(target), _) => target.name.clone(),
            (None, Some(frame)) => format!("{} field", frame.path.trim_matches('/')),
            (None, None) => String::new(),
        };
        let mut name = secret_name(&field);
        let base = name.clone();
        let mut n = 1;
        while secrets.contains(&name) {
            n += 1;
            name = format!("{base}_{n}");
        }
        *text = format!("{{{{{name}}}}}");
        secrets.push(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn typed_passwords_and_files_are_not_written_down() {
        let field = ElementIdentity {
            role: "textbox".into(),
            name: "Card PIN".into(),
            nth: 0,
            tag: "input".into(),
            attributes: [("type".to_string(), "password".to_string())].into(),
            origin: "http://a.test".into(),
            path: "/".into(),
            in_frame: false,
        };
        let mut args = json!({ "action": "type", "ref": 4, "text": "1234" });
        assert_eq!(
            mask("browser_interact", &mut args, Some(&field)),
            vec!["card_pin"]
        );
        assert_eq!(args["text"], "{{card_pin}}");
        let mut upload =
            json!({ "action": "upload", "files": [{ "name": "a.txt", "base64": "aGVsbG8h" }] });
        assert!(mask("browser_interact", &mut upload, None).is_empty());
        assert_eq!(upload["files"][0], json!({ "name": "a.txt", "bytes": 6 }));
        assert_eq!(secret_name("  Password  "), "password");
        assert_eq!(secret_name("***"), "password");
    }
}
