//! A hand-off: the agent asks a person to do something in the live view (a second factor, a
//! CAPTCHA) and waits. It ends when the person presses Done, when `until` holds on the
//! session's active tab, or at its deadline. Its outcome stays until a waiter takes it, so an
//! agent that did not wait (`wait: false`) picks it up later.

use std::sync::Arc;
use std::time::Duration;

use chromiumoxide::cdp::js_protocol::runtime::EvaluateParams;
use schemars::JsonSchema;
use serde::Serialize;
use tokio::sync::watch;
use tokio::time::Instant;

use super::{LiveHub, LiveTab};
use crate::browser::observe::glob_matches;

/// How often `until` is checked.
const UNTIL_POLL: Duration = Duration::from_millis(100);
/// How long one check of `until` may take.
const UNTIL_LIMIT: Duration = Duration::from_secs(2);

/// What the person was asked.
#[derive(Debug)]
pub struct Handoff {
    pub message: String,
    pub until: Option<Until>,
    pub started: Instant,
    pub ends: Instant,
}

/// When the hand-off is done without the person saying so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Until {
    /// The active tab's URL matches this pattern (`*` for any run of characters).
    Url(String),
    /// This text, or an element matching this CSS selector, is on the page.
    Present(String),
}

impl Until {
    /// `url:<pattern>`, else text or selector.
    pub fn parse(until: &str) -> Self {
        match until.strip_prefix("url:") {
            Some(pattern) => Until::Url(pattern.trim().to_string()),
            None => Until::Present(until.to_string()),
        }
    }

    async fn holds(&self, tab: &LiveTab) -> bool {
        match self {
            Until::Url(pattern) => tab
                .url()
                .await
                .is_some_and(|url| glob_matches(pattern, &url)),
            Until::Present(target) => {
                let mut params = EvaluateParams::new(crate::browser::settle::probe_expression(
                    Some(target),
                    None,
                ));
                params.return_by_value = Some(true);
                let Ok(result) = tab
                    .browser
                    .within(
                        UNTIL_LIMIT,
                        "checking the hand-off",
                        tab.page.execute(params),
                    )
                    .await
                else {
                    return false;
                };
                result
                    .result
                    .result
                    .value
                    .as_ref()
                    .and_then(|v| v.get("found"))
                    .and_then(serde_json::Value::as_bool)
                    == Some(true)
            }
        }
    }
}

/// How a hand-off ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HandedBack {
    /// The person pressed Done.
    Person,
    /// `until` held.
    Until,
    /// Its time ran out.
    Timeout,
    /// The agent's client said its user would not open the link (MCP URL elicitation).
    Declined,
}

#[derive(Debug, Clone)]
pub enum HandoffState {
    None,
    Open(Arc<Handoff>),
    /// Ended, and not picked up by a waiter yet.
    Ended(Arc<Handoff>, HandedBack),
}

pub(super) fn begin(hub: &Arc<LiveHub>, handoff: Handoff) -> Arc<Handoff> {
    let handoff = Arc::new(handoff);
    hub.handoff
        .send_replace(HandoffState::Open(handoff.clone()));
    let weak = Arc::downgrade(hub);
    let watched = handoff.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(UNTIL_POLL).await;
            let Some(hub) = weak.upgrade() else { break };
            let open =
                matches!(&*hub.handoff.borrow(), HandoffState::Open(h) if Arc::ptr_eq(h, &watched));
            if !open {
                break;
            }
            if Instant::now() >= watched.ends {
                end(&hub.handoff, HandedBack::Timeout);
                break;
            }
            let Some(until) = &watched.until else {
                continue;
            };
            let tab = hub.tabs.borrow().shown(None).cloned();
            if let Some(tab) = tab
                && until.holds(&tab).await
            {
                end(&hub.handoff, HandedBack::Until);
                break;
            }
        }
    });
    handoff
}

/// Ends the open hand-off, if there is one.
pub(super) fn end(state: &watch::Sender<HandoffState>, outcome: HandedBack) {
    state.send_if_modified(|state| match state {
        HandoffState::Open(handoff) => {
            *state = HandoffState::Ended(handoff.clone(), outcome);
            true
        }
        _ => false,
    });
}

pub(super) async fn wait(
    state: &watch::Sender<HandoffState>,
    deadline: Instant,
) -> Option<(Arc<Handoff>, HandedBack)> {
    let mut changes = state.subscribe();
    loop {
        let current = changes.borrow_and_update().clone();
        match current {
            HandoffState::None => return None,
            HandoffState::Ended(handoff, outcome) => {
                state.send_if_modified(|state| match state {
                    HandoffState::Ended(h, _) if Arc::ptr_eq(h, &handoff) => {
                        *state = HandoffState::None;
                        true
                    }
                    _ => false,
                });
                return Some((handoff, outcome));
            }
            HandoffState::Open(_) => {}
        }
        match tokio::time::timeout_at(deadline, changes.changed()).await {
            Ok(Ok(())) => continue,
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_patterns() {
        assert!(glob_matches(
            "*://app.example.com/home*",
            "https://app.example.com/home?x=1"
        ));
        assert!(glob_matches(
            "*://app.example.com/home*",
            "http://app.example.com/home"
        ));
        assert!(!glob_matches(
            "*://app.example.com/home*",
            "https://evil.com/?app.example.com/home"
        ));
        assert!(glob_matches("http://a/b", "http://a/b"));
        assert!(!glob_matches("http://a/b", "http://a/bc"));
        assert!(glob_matches("*/account", "http://127.0.0.1:9/account"));
        assert!(!glob_matches("a*a", "a"));
        assert!(glob_matches("a*a", "aa"));
        assert_eq!(Until::parse("url: */x*"), Until::Url("*/x*".into()));
        assert_eq!(Until::parse("Welcome"), Until::Present("Welcome".into()));
    }
}
