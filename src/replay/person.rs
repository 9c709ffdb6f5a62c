//! Replaying what a person did through the live view during the recording (a hand-off): each
//! click, text and key again, by element, as `--handoff` says — or leaving it out, or failing
//! there because the run needs a person.

use serde_json::{Value, json};

use super::{HandoffMode, Options, Outcome, Status, fill_secrets, healed};
use crate::browser::live::PersonInput;
use crate::tools::interact::{Action, InteractArgs};
use crate::tools::{Caller, Registry, arguments_of};
use crate::trace::Step;

/// The login saved after a hand-off: the name of the first profile the trace exported later.
pub(super) fn saved_after(later: &[Step]) -> Option<&str> {
    later
        .iter()
        .find(|s| s.ok && s.tool == "browser_cookies" && s.args["action"] == "export")
        .and_then(|s| s.args["name"].as_str())
}

/// Replays what a person did in `step` into `outcome` (passed, healed, failed or skipped):
/// loading `saved`, the login exported after it, when there is one.
pub(super) async fn replay(
    registry: &Registry,
    caller: &Caller,
    (step, saved): (&Step, Option<&str>),
    options: &Options,
    outcome: &mut Outcome,
) {
    match options.handoff {
        HandoffMode::Ask => return ask(registry, caller, step, outcome).await,
        HandoffMode::Replay if saved.is_some() => {
            let name = saved.unwrap_or_default();
            let load = json!({ "action": "load", "name": name });
            (outcome.status, outcome.detail) =
                match registry.call("browser_cookies", load, caller).await {
                    Ok(_) => (
                        Status::Passed,
                        Some(format!("loaded the login saved after it ({name})")),
                    ),
                    Err(error) => (
                        Status::Failed,
                        Some(format!(
                            "loading the login saved after it ({name}): {}: {}",
                            error.code.name(),
                            error.message
                        )),
                    ),
                };
            return;
        }
        HandoffMode::Skip => {
            outcome.detail = Some("a person's part: left out (--handoff skip)".into());
            return;
        }
        HandoffMode::Fail => {
            outcome.status = Status::Failed;
            outcome.detail =
                Some("a person did this part; the run needs one (--handoff fail)".into());
            return;
        }
        HandoffMode::Replay => {}
    }
    if step.person.is_empty() {
        outcome.detail = Some("no input of the person was recorded".into());
        return;
    }
    outcome.status = Status::Passed;
    let mut healings = Vec::new();
    for input in &step.person {
        let arguments = match arguments(input, step, options) {
            Ok(arguments) => arguments,
            Err(why) => {
                outcome.status = Status::Failed;
                outcome.detail = Some(why);
                return;
            }
        };
        match registry.call("browser_interact", arguments, caller).await {
            Ok(output) => {
                let seen = &output.json["recognized"];
                if seen.is_object() && seen["how"] != "exact" {
                    healings.push(healed(target_of(input), seen));
                }
            }
            Err(error) => {
                outcome.status = Status::Failed;
                outcome.detail = Some(format!(
                    "the person's {}: {}: {}",
                    what(input),
                    error.code.name(),
                    error.message
                ));
                return;
            }
        }
    }
    if !healings.is_empty() {
        outcome.status = Status::Healed;
        outcome.detail = Some(healings.join("; "));
    }
}

/// Asks a person to do the step again through the replay's live view, as it was asked then.
async fn ask(registry: &Registry, caller: &Caller, step: &Step, outcome: &mut Outcome) {
    let mut arguments = InteractArgs::new(Action::Handoff);
    if let Some(recorded) = super::typed::<InteractArgs>(&step.args) {
        arguments.message = recorded.message;
        arguments.until = recorded.until;
        arguments.timeout_ms = recorded.timeout_ms;
    }
    (outcome.status, outcome.detail) = match registry
        .call_with("browser_interact", &arguments, caller)
        .await
    {
        Ok(output) if output.json["handed_back"] == "timeout" => {
            (Status::Failed, Some("nobody did it in time".to_string()))
        }
        Ok(output) => (
            Status::Passed,
            Some(format!(
                "a person did it (handed back: {})",
                output.json["handed_back"].as_str().unwrap_or("done")
            )),
        ),
        Err(error) => (
            Status::Failed,
            Some(format!("{}: {}", error.code.name(), error.message)),
        ),
    };
}

fn target_of(input: &PersonInput) -> Option<&crate::browser::ElementIdentity> {
    match input {
        PersonInput::Click { target, .. } | PersonInput::Type { target, .. } => target.as_ref(),
        PersonInput::Key { .. } => None,
    }
}

/// `click on button "Accept"`, `typing into textbox "Code"`, `key Enter`.
fn what(input: &PersonInput) -> String {
    let on = |target: Option<&crate::browser::ElementIdentity>| {
        target.map_or_else(|| "an element".to_string(), |t| t.label())
    };
    match input {
        PersonInput::Click { target, .. } => format!("click on {}", on(target.as_ref())),
        PersonInput::Type { target, .. } => format!("typing into {}", on(target.as_ref())),
        PersonInput::Key { key } => format!("key {key}"),
    }
}

/// The `browser_interact` call doing `input` again.
fn arguments(input: &PersonInput, step: &Step, options: &Options) -> Result<Value, String> {
    let in_frame = |frame: &Option<crate::browser::live::ForeignFrame>| {
        let frame = frame
            .as_ref()
            .map_or_else(String::new, |f| format!("{}{}", f.origin, f.path));
        format!(
            "the person's {} went into another site's frame ({frame}), which a replay cannot follow; use --handoff skip or a saved login",
            what(input)
        )
    };
    let mut arguments = match input {
        PersonInput::Click {
            target: Some(target),
            ..
        } => InteractArgs {
            target: Some(target.clone()),
            ..InteractArgs::new(Action::Click)
        },
        PersonInput::Type {
            target: Some(target),
            text,
            ..
        } => InteractArgs {
            target: Some(target.clone()),
            text: Some(text.clone()),
            ..InteractArgs::new(Action::Type)
        },
        PersonInput::Key { key } => InteractArgs {
            keys: Some(key.clone()),
            ..InteractArgs::new(Action::SendKeys)
        },
        PersonInput::Click { frame, .. } | PersonInput::Type { frame, .. } => {
            return Err(in_frame(frame));
        }
    };
    arguments.tab = super::typed::<InteractArgs>(&step.args).and_then(|recorded| recorded.tab);
    let mut arguments = arguments_of("browser_interact", &arguments).map_err(|e| e.message)?;
    if let Value::Object(map) = &mut arguments {
        fill_secrets(map, &step.secrets, options)?;
    }
    Ok(arguments)
}
