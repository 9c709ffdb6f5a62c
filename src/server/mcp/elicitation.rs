//! Hand-offs by URL elicitation: to a client that declared `elicitation.url`, a hand-off's
//! live-view link goes as `elicitation/create` (mode `url`, the message, an id); its user's
//! decline ends the hand-off, and `notifications/elicitation/complete` says when it is over
//! (Done, `until`, the time limit). Other clients keep the progress notifications alone.

use std::time::Duration;

use rmcp::model::{CustomNotification, ElicitationAction, ServerNotification};
use rmcp::service::{ElicitationMode, Peer, RoleServer};
use serde_json::json;

use crate::tools::{LinkAnswer, LinkOpener};

/// Longest a client may take to say whether its user opens the link (a person may read the
/// request a while before answering; the hand-off's own time limit ends the wait first).
const ANSWER_WAIT: Duration = Duration::from_secs(30 * 60);

/// A connected client that opens links for its user.
pub struct UrlElicitation {
    peer: Peer<RoleServer>,
}

impl UrlElicitation {
    /// The client behind `peer`, if it declared URL elicitation.
    pub fn of(peer: &Peer<RoleServer>) -> Option<Self> {
        peer.supported_elicitation_modes()
            .contains(&ElicitationMode::Url)
            .then(|| Self { peer: peer.clone() })
    }
}

#[async_trait::async_trait]
impl LinkOpener for UrlElicitation {
    async fn open(&self, id: &str, message: &str, url: &str) -> LinkAnswer {
        let Ok(url) = url::Url::parse(url) else {
            return LinkAnswer::Failed;
        };
        let asked = self
            .peer
            .elicit_url_with_timeout(message, url, id, Some(ANSWER_WAIT))
            .await;
        match asked {
            Ok(ElicitationAction::Accept) => LinkAnswer::Accepted,
            // Decline, Cancel (and what later revisions add): the user will not open it.
            Ok(_) => LinkAnswer::Declined,
            Err(error) => {
                tracing::debug!("URL elicitation failed: {error}");
                LinkAnswer::Failed
            }
        }
    }

    async fn finished(&self, id: &str) {
        let complete = CustomNotification::new(
            "notifications/elicitation/complete",
            Some(json!({"elicitationId": id})),
        );
        let sent = self
            .peer
            .send_notification(ServerNotification::CustomNotification(complete))
            .await;
        if let Err(error) = sent {
            tracing::debug!("the elicitation's completion was not sent: {error}");
        }
    }
}
