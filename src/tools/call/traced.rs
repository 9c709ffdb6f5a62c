//! A browser tool call written into its session's trace (`crate::trace`) once it has ended,
//! secrets masked, with the element it acted on, what the page did meanwhile and a picture of
//! the page after it.

use serde_json::Value;

use super::Call;
use crate::browser::live::PersonInput;
use crate::error::ToolResult;
use crate::tools::ToolOutput;
use crate::trace::{Picture, Step, acts_on_page, mask, mask_person, shows_new_page};

/// Lines of requests and of console messages kept per step.
const EVENT_LINES: usize = 50;

/// Records the call in its session's trace; only calls that reached a session are.
pub(super) async fn record(
    call: &mut Call<'_>,
    tool: &str,
    mut arguments: Value,
    result: &ToolResult<ToolOutput>,
    started: std::time::Instant,
) {
    if !call.opened_session() {
        return;
    }
    let elapsed_ms = started.elapsed().as_millis() as u64;
    let target = call.take_target();
    let (events, picture) = aftermath(call, tool, &arguments).await;
    let mut secrets = mask(tool, &mut arguments, target.as_ref());
    let mut person = call.person_inputs();
    remember_typed_secrets(call, &person);
    mask_person(&mut person, &mut secrets);
    if let Value::Object(map) = &mut arguments {
        // The session is the trace's own; a replay runs in a session of its own.
        map.remove("session");
    }
    let (ok, summary, tab, url, page_events) = match result {
        Ok(output) => (
            true,
            output.summary.clone(),
            output.json["tab"].as_str().map(str::to_string),
            output.json["url"].as_str().map(str::to_string),
            output.json.get("page_events").cloned(),
        ),
        Err(error) => (
            false,
            format!("{}: {}", error.code.name(), error.message),
            None,
            None,
            None,
        ),
    };
    let step = Step {
        seq: 0,
        at: crate::tenancy::links::rfc3339_millis(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs_f64(),
        ),
        tool: tool.to_string(),
        args: arguments,
        target,
        tab,
        url,
        ok,
        summary,
        elapsed_ms,
        page_events,
        events,
        screenshot: None,
        person,
        secrets,
    };
    call.ctx
        .traces
        .record(call.tenant(), call.session_name(), step, picture);
}

/// What the page did during an action, and the picture of the page after a step that showed
/// another (taken while the reply goes out: the call does not wait for it).
async fn aftermath(
    call: &mut Call<'_>,
    tool: &str,
    arguments: &Value,
) -> (Option<crate::browser::ActionLines>, Option<Picture>) {
    let quality = call.ctx.traces.picture_quality();
    let Some(tab) = call.worked_tab() else {
        return (None, None);
    };
    let events = if acts_on_page(tool, arguments) {
        Some(tab.action_lines(EVENT_LINES).await)
    } else {
        None
    };
    let picture = quality
        .filter(|_| shows_new_page(tool, arguments))
        .map(|quality| -> Picture { Box::pin(tab.viewport_jpeg(quality)) });
    (events, picture)
}

/// What a person typed into password fields is hidden in the tab's reads from now on, as an
/// agent's typed passwords are.
fn remember_typed_secrets(call: &mut Call<'_>, person: &[PersonInput]) {
    let Some(tab) = call.worked_tab() else {
        return;
    };
    for input in person {
        if let PersonInput::Type {
            text, secret: true, ..
        } = input
        {
            tab.log().remember_secret(text);
        }
    }
}
