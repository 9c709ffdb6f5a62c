//! An action addressed by a recorded element identity instead of a ref (what a replay sends):
//! the element is found again on the page as it is now, and the result says how.

use schemars::JsonSchema;
use serde::Serialize;

use super::InteractArgs;
use crate::browser::{ElementIdentity, Match};
use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::tools::Call;

/// How long an action by identity waits for its element to appear, and how often it looks.
const RECOGNITION_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
const RECOGNITION_POLL: std::time::Duration = std::time::Duration::from_millis(25);

/// How a replay's target was found again.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Seen {
    /// exact (the same attributes), role_name (its attributes changed) or nearest.
    pub how: Match,
    /// The element as it is now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub now: Option<ElementIdentity>,
}

/// Turns `target` into a ref of the page as it is now; nothing to do without one.
pub(super) async fn find_target(
    call: &mut Call<'_>,
    args: &mut InteractArgs,
) -> ToolResult<Option<Seen>> {
    let Some(target) = args.target.take() else {
        return Ok(None);
    };
    if args.ref_id.is_some() {
        return Err(ToolError::invalid(
            "give either `ref` or `target`, not both",
        ));
    }
    // A page still rendering may not show the element yet: wait for it like a person would,
    // taking the nearest candidate only when the time is up.
    let patience = call.time_left().min(RECOGNITION_WAIT);
    let until = tokio::time::Instant::now() + patience;
    let tab = call.tab().await?;
    let found = loop {
        let found = tab.recognize(&target).await?;
        let settled = matches!(&found, Ok(f) if f.how != Match::Nearest);
        if settled || tokio::time::Instant::now() >= until {
            break found;
        }
        tokio::time::sleep(RECOGNITION_POLL).await;
    };
    match found {
        Ok(found) => {
            args.ref_id = Some(found.ref_id);
            Ok(Some(Seen {
                how: found.how,
                now: found.now,
            }))
        }
        Err(candidates) => {
            let closest: Vec<String> = candidates
                .iter()
                .map(|c| format!("{} {:?} ({:.2})", c.role, c.name, c.score))
                .collect();
            Err(ToolError::new(
                ErrorCode::NoSuchRef,
                format!(
                    "no element like {} on the page; closest: {}",
                    target.label(),
                    if closest.is_empty() { "none".to_string() } else { closest.join(", ") }
                ),
            )
            .with_hint("the page changed beyond recognition here: look at it (browser_read) and act by ref"))
        }
    }
}

/// Notes what the action acts on, as it is before it: the session's trace keeps it.
pub(super) async fn note_target(
    call: &mut Call<'_>,
    tab: &str,
    ref_id: Option<u32>,
) -> ToolResult<()> {
    if let Some(ref_id) = ref_id.filter(|_| call.ctx.traces.enabled()) {
        let identity = call.use_tab(tab)?.identify(ref_id).await;
        call.note_target(identity);
    }
    Ok(())
}
