//! `browser_interact action=handoff`: asks a person to act in the session's live view and waits
//! for them without holding the session (they take it), reporting to the front every few
//! seconds so that a chat UI can show the link and an MCP client keeps waiting.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::InteractArgs;
use crate::browser::live::{HandedBack, Handoff, LiveHub, Until};
use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::tools::{Call, HandoffProgress, LinkOpener, SentLink};

/// How often a waiting hand-off reports to the front (MCP clients that reset their timeout on
/// progress need one at least every 10 s).
const REPORT_EVERY: Duration = Duration::from_secs(5);
/// Time given past the call's limit to take the session back and report on it.
const REPORT_GRACE: Duration = Duration::from_secs(5);
/// The message when the agent gives none.
const DEFAULT_MESSAGE: &str = "Please take control, do what the page asks, then press Done.";

/// What the hand-off came to.
pub(super) struct HandedOff {
    pub live_url: String,
    /// None: it is still open (`wait: false`).
    pub handed_back: Option<HandedBack>,
    pub waited_ms: Option<u64>,
}

/// Opens a hand-off (`handoff`) or picks up the open one (`wait`, or a second `handoff`), and
/// waits for it unless `wait: false`; a person who has control already is not waited for first.
/// When it returns having waited, the call holds the session again.
pub(super) async fn hand_off(call: &mut Call<'_>, args: &InteractArgs) -> ToolResult<HandedOff> {
    let hub = call.live_side().await?;
    let link = call.live_link()?;
    let open = hub.pending_handoff();
    let handoff = match open {
        // `wait`, or a second `handoff` without a message of its own: the open one goes on.
        Some(open) if args.message.is_none() || args.action == super::Action::Wait => open,
        _ => hub.begin_handoff(Handoff {
            message: args
                .message
                .clone()
                .filter(|m| !m.trim().is_empty())
                .unwrap_or_else(|| DEFAULT_MESSAGE.to_string()),
            until: args.until.as_deref().map(Until::parse),
            started: Instant::now().into(),
            ends: call.ends().into(),
        }),
    };
    let session = call.session_name().to_string();
    let progress = |waited: Duration| HandoffProgress {
        session: session.clone(),
        message: handoff.message.clone(),
        live_url: link.live_url.clone(),
        waited_ms: waited.as_millis() as u64,
    };
    call.report(progress(Duration::ZERO));
    if args.wait == Some(false) {
        return Ok(HandedOff {
            live_url: link.live_url,
            handed_back: None,
            waited_ms: None,
        });
    }
    let started = Instant::now();
    let asked = call
        .link_opener()
        .map(|opener| ask_to_open(opener, &hub, &handoff.message, &link.live_url));
    call.release_session();
    let outcome = loop {
        let next = (Instant::now() + REPORT_EVERY).min(call.ends());
        if let Some((_, outcome)) = hub.await_handoff(next.into()).await {
            break Some(outcome);
        }
        if hub.pending_handoff().is_none() || Instant::now() >= call.ends() {
            break None;
        }
        call.report(progress(started.elapsed()));
    };
    let waited_ms = Some(started.elapsed().as_millis() as u64);
    if let Some(asked) = asked {
        asked.finish().await;
    }
    let handed_back = match outcome {
        Some(outcome) => outcome,
        // Only a `wait` on a hand-off that runs longer than the wait ends here.
        None if args.action == super::Action::Wait => {
            return Err(ToolError::new(
                ErrorCode::Timeout,
                format!("the person has not finished yet ({})", handoff.message),
            )
            .with_hint(format!(
                "wait again, or send them the link again: {}",
                link.live_url
            )));
        }
        None => HandedBack::Timeout,
    };
    call.extend(REPORT_GRACE);
    call.session().await?;
    Ok(HandedOff {
        live_url: link.live_url,
        handed_back: Some(handed_back),
        waited_ms,
    })
}

/// A hand-off's link sent to a client that opens links for its user: a decline ends the
/// hand-off.
fn ask_to_open(
    opener: Arc<dyn LinkOpener>,
    hub: &Arc<LiveHub>,
    message: &str,
    url: &str,
) -> SentLink {
    let hub = hub.clone();
    let declined = move || hub.declined();
    SentLink::send(opener, "handoff-", message.into(), url.into(), declined)
}
