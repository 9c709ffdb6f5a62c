//! Replaying a trace without a model: the steps that change the page (navigations, actions,
//! tab changes, loaded logins) run again in a fresh session through the same registry, each
//! recorded element found again by its identity — a step that found it only by role and name,
//! or as the nearest candidate, is reported **healed** with its old and new identity. The first
//! step that fails ends the run, naming the step and the closest candidates. `junit` writes the
//! report for CI.

mod checks;
mod junit;
mod person;
mod playwright;
mod runs;

use std::collections::HashMap;
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;

use crate::ids::{SessionName, unguessable};
use crate::tenancy::Tenant;
use crate::tools::interact::{Action, InteractArgs};
use crate::tools::navigate::NavigateArgs;
use crate::tools::{Caller, Registry, ScreenshotArgs, ScreenshotFormat};
use crate::trace::Step;

pub use junit::junit_xml;
pub use playwright::playwright_spec;
pub use runs::{Replays, RunEvent, RunView};

/// How to replay.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Where the recorded site now lives: the origin of the trace's first navigation is
    /// replaced by this one in every URL.
    pub base_url: Option<String>,
    /// Values of the trace's secrets by name (`{{password}}`).
    pub secrets: HashMap<String, String>,
    /// Whether missing secrets are read from `WEBPILOT_SECRET_<NAME>` (the command line; not
    /// for a tenant over HTTP, whose caller does not own the service's environment).
    pub secrets_from_env: bool,
    /// Checked once the steps have passed.
    pub expect: Expectations,
    /// What becomes of the steps a person did through the live view.
    pub handoff: HandoffMode,
    /// Where the caller reached the service (`http://host:port`): a live view's links start there.
    pub origin: Option<String>,
    /// Told when a step waits for a person (`--handoff ask`): the live view's link.
    pub handoff_progress: Option<tokio::sync::mpsc::UnboundedSender<crate::tools::HandoffProgress>>,
}

/// What a replay does with what a person did during the recording (a hand-off).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, serde::Deserialize, utoipa::ToSchema, clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum HandoffMode {
    /// Load the login saved after it (a `browser_cookies export` later in the trace), else do
    /// what the person did: their clicks, typing and keys, by element.
    #[default]
    Replay,
    /// Ask a person again: the step waits for one through the replay's live view.
    Ask,
    /// Leave it out.
    Skip,
    /// Fail there: the run needs a person.
    Fail,
}

/// What must hold at the end of a replay, besides every step passing.
#[derive(Debug, Clone, Default)]
pub struct Expectations {
    /// Texts the page (frames included) must show.
    pub text: Vec<String>,
    /// A substring (or `*` glob) of the final URL.
    pub url: Option<String>,
    /// No console error or page error in the replay's tab.
    pub no_console_errors: bool,
    /// No request of the replay's tab answered 4xx/5xx or failed (the browser's own favicon
    /// request aside).
    pub no_failed_requests: bool,
}

/// What became of one step.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Passed,
    /// Passed, with its element found by role and name or as the nearest candidate.
    Healed,
    Failed,
    /// Not replayed: it only read, or it needs a person.
    Skipped,
}

/// One step of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub seq: u64,
    pub tool: String,
    /// `navigate http://…`, `click button "Pay"`.
    pub what: String,
    pub status: Status,
    /// Why it failed, or how it healed (old → new identity).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    pub elapsed_ms: u64,
    /// A failed step: the trace's picture of the page before it, as recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub then: Option<String>,
    /// A failed step: the page now (a viewport JPEG), to set beside `then`.
    #[serde(skip)]
    pub now: Option<Vec<u8>>,
    /// Files the pictures of a failed step were written to (then, now).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pictures: Vec<String>,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub passed: bool,
    pub healed: usize,
    pub steps: Vec<Outcome>,
    pub elapsed_ms: u64,
}

/// Runs `steps` for `tenant` in a new session of its own, closed at the end.
pub async fn run(
    registry: &Registry,
    tenant: std::sync::Arc<Tenant>,
    steps: &[Step],
    options: &Options,
) -> Report {
    run_watched(registry, tenant, steps, options, None).await
}

/// `run`, telling `progress` of each step (and end check) as it finishes.
async fn run_watched(
    registry: &Registry,
    tenant: std::sync::Arc<Tenant>,
    steps: &[Step],
    options: &Options,
    progress: Option<tokio::sync::mpsc::UnboundedSender<Outcome>>,
) -> Report {
    let tell = |outcome: &Outcome| {
        if let Some(progress) = &progress {
            let _ = progress.send(outcome.clone());
        }
    };
    let started = Instant::now();
    let session = SessionName::parse(&unguessable("replay-")).ok();
    let mut caller = Caller {
        session,
        origin: options.origin.clone(),
        ..Caller::new(tenant)
    };
    if let Some(progress) = &options.handoff_progress {
        caller = caller.reporting(progress.clone());
    }
    let recorded_base = recorded_base(steps);
    let mut outcomes = Vec::new();
    for (index, step) in steps.iter().enumerate() {
        let later = &steps[index + 1..];
        let mut outcome = replay_step(
            registry,
            &caller,
            step,
            later,
            options,
            recorded_base.as_deref(),
        )
        .await;
        let failed = outcome.status == Status::Failed;
        if failed {
            outcome.then = steps[..index]
                .iter()
                .rev()
                .find_map(|earlier| earlier.screenshot.clone());
            outcome.now = page_now(registry, &caller).await;
        }
        tell(&outcome);
        outcomes.push(outcome);
        if failed {
            break;
        }
    }
    if outcomes.iter().all(|o| o.status != Status::Failed) {
        let checked = checks::run(registry, &caller, &options.expect).await;
        checked.iter().for_each(tell);
        outcomes.extend(checked);
    }
    // The replay's session goes with it (its trace stays, like any closed session's).
    if let Some(name) = &caller.session {
        let id = crate::ids::SessionId::new(caller.tenant.name().clone(), name.clone());
        registry.ctx().browser.close_session(&id).await;
    }
    let passed = outcomes.iter().all(|o| o.status != Status::Failed);
    Report {
        passed,
        healed: outcomes
            .iter()
            .filter(|o| o.status == Status::Healed)
            .count(),
        steps: outcomes,
        elapsed_ms: started.elapsed().as_millis() as u64,
    }
}

/// The origin of the trace's first navigation: where the recorded site lived.
fn recorded_base(steps: &[Step]) -> Option<String> {
    steps
        .iter()
        .find(|s| s.tool == "browser_navigate")
        .and_then(|s| typed::<NavigateArgs>(&s.args)?.target)
        .and_then(|url| url::Url::parse(&url).ok())
        .map(|url| url.origin().ascii_serialization())
}

/// A picture of the replay's page as it is now.
async fn page_now(registry: &Registry, caller: &Caller) -> Option<Vec<u8>> {
    let arguments = ScreenshotArgs {
        format: Some(ScreenshotFormat::Jpeg),
        quality: Some(50),
        ..Default::default()
    };
    let output = registry
        .call_with("browser_screenshot", &arguments, caller)
        .await
        .ok()?;
    output.images.into_iter().next().map(|image| image.data)
}

/// The text a recorded `find` read found on the page: a replay checks it is found again.
fn found_then(step: &Step) -> Option<&str> {
    let found = step.tool == "browser_read"
        && step.args["mode"] == "find"
        && step.summary.split(' ').next().is_some_and(|n| n != "0")
        && step.summary.ends_with(" matches");
    found.then(|| step.args["query"].as_str()).flatten()
}

/// A recorded step's arguments in the tool's own argument type (what the call was parsed into
/// when it was made): a field renamed in the tool fails to compile where replay reads it. None
/// for arguments the tool no longer takes.
fn typed<T: serde::de::DeserializeOwned>(args: &Value) -> Option<T> {
    let mut args = args.clone();
    if let Some(fields) = args.as_object_mut() {
        // Said to the call's envelope, not to the tool.
        fields.remove("verbose");
    }
    serde_json::from_value(args).ok()
}

/// Whether a step changes what the page is (and so is replayed).
fn replayed(step: &Step) -> bool {
    let action = step.args["action"].as_str().unwrap_or_default();
    match step.tool.as_str() {
        "browser_navigate" => true,
        // Arguments the tool no longer takes are replayed, to fail there with its error.
        "browser_interact" => typed::<InteractArgs>(&step.args).is_none_or(|args| {
            !matches!(
                args.action,
                Action::Handoff | Action::Options | Action::Download
            )
        }),
        "browser_tabs" => matches!(action, "new" | "switch" | "close"),
        "browser_cookies" => matches!(action, "load" | "import" | "clear" | "ensure_login"),
        _ => false,
    }
}

async fn replay_step(
    registry: &Registry,
    caller: &Caller,
    step: &Step,
    later: &[Step],
    options: &Options,
    recorded_base: Option<&str>,
) -> Outcome {
    let started = Instant::now();
    let mut outcome = Outcome {
        seq: step.seq,
        tool: step.tool.clone(),
        what: describe(step),
        status: Status::Skipped,
        detail: None,
        elapsed_ms: 0,
        then: None,
        now: None,
        pictures: Vec::new(),
    };
    if !step.ok {
        outcome.detail = Some("it failed when recorded".to_string());
        return outcome;
    }
    let handoff = step.tool == "browser_interact"
        && typed::<InteractArgs>(&step.args).is_some_and(|args| args.action == Action::Handoff);
    if handoff || !step.person.is_empty() {
        let saved = handoff.then(|| person::saved_after(later)).flatten();
        person::replay(registry, caller, (step, saved), options, &mut outcome).await;
        if handoff || outcome.status == Status::Failed {
            outcome.elapsed_ms = started.elapsed().as_millis() as u64;
            return outcome;
        }
    }
    if let Some(query) = found_then(step) {
        checks::found_again(registry, caller, query, &mut outcome).await;
        outcome.elapsed_ms = started.elapsed().as_millis() as u64;
        return outcome;
    }
    if !replayed(step) {
        return outcome;
    }
    let arguments = match arguments(step, options, recorded_base) {
        Ok(arguments) => arguments,
        Err(missing) => {
            outcome.status = Status::Failed;
            outcome.detail = Some(missing);
            return outcome;
        }
    };
    let result = registry.call(&step.tool, arguments, caller).await;
    outcome.elapsed_ms = started.elapsed().as_millis() as u64;
    match result {
        Ok(output) => {
            let seen = &output.json["recognized"];
            if seen.is_object() && seen["how"] != "exact" {
                outcome.status = Status::Healed;
                outcome.detail = Some(healed(step.target.as_ref(), seen));
            } else if outcome.status != Status::Healed {
                outcome.status = Status::Passed;
            }
        }
        Err(error) => {
            outcome.status = Status::Failed;
            outcome.detail = Some(format!("{}: {}", error.code.name(), error.message));
        }
    }
    outcome
}

/// The step's arguments for the replay: the element by identity instead of its old ref,
/// secrets filled in, URLs moved to `base_url`.
fn arguments(step: &Step, options: &Options, recorded_base: Option<&str>) -> Result<Value, String> {
    let mut arguments = step.args.clone();
    let Value::Object(map) = &mut arguments else {
        return Ok(arguments);
    };
    if let Some(target) = &step.target {
        map.remove("ref");
        map.insert(
            "target".into(),
            serde_json::to_value(target).unwrap_or_default(),
        );
    }
    fill_secrets(map, &step.secrets, options)?;
    if let (Some(from), Some(to)) = (recorded_base, &options.base_url) {
        let to = to.trim_end_matches('/');
        for key in ["target", "url"] {
            if let Some(Value::String(url)) = map.get_mut(key)
                && url.starts_with(from)
            {
                *url = format!("{to}{}", &url[from.len()..]);
            }
        }
    }
    Ok(arguments)
}

/// Puts the secrets' values in place of their `{{name}}` in the string fields of `map`.
fn fill_secrets(
    map: &mut serde_json::Map<String, Value>,
    secrets: &[String],
    options: &Options,
) -> Result<(), String> {
    for secret in secrets {
        let placeholder = format!("{{{{{secret}}}}}");
        if !map
            .values()
            .any(|v| v.as_str().is_some_and(|t| t.contains(&placeholder)))
        {
            continue;
        }
        let variable = format!("WEBPILOT_SECRET_{}", secret.to_ascii_uppercase());
        let value = options
            .secrets
            .get(secret)
            .cloned()
            .or_else(|| {
                options
                    .secrets_from_env
                    .then(|| std::env::var(&variable).ok())
                    .flatten()
            })
            .ok_or_else(|| {
                format!(
                    "secret {secret:?} is not given: pass --secret {secret}=… or set {variable}"
                )
            })?;
        for field in map.values_mut() {
            if let Value::String(text) = field {
                *text = text.replace(&placeholder, &value);
            }
        }
    }
    Ok(())
}

fn describe(step: &Step) -> String {
    let action = step.args["action"].as_str();
    match (step.tool.as_str(), &step.target) {
        ("browser_navigate", _) => {
            format!("navigate {}", step.args["target"].as_str().unwrap_or(""))
        }
        (_, Some(target)) => format!("{} {}", action.unwrap_or("act on"), target.label()),
        (tool, None) => format!("{tool} {}", action.unwrap_or_default())
            .trim()
            .to_string(),
    }
}

fn healed(target: Option<&crate::browser::ElementIdentity>, seen: &Value) -> String {
    let before = target.map_or_else(String::new, |t| format!("{} {:?}", t.label(), t.attributes));
    let now = &seen["now"];
    format!(
        "found by {}: was {before}, now {} {:?} {}",
        seen["how"].as_str().unwrap_or_default(),
        now["role"].as_str().unwrap_or_default(),
        now["name"].as_str().unwrap_or_default(),
        now["attributes"]
    )
}
