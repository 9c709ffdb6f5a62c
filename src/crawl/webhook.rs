//! Webhooks: a task's caller told, at a URL it gave, that the task started and how it ended —
//! JSON events signed with HMAC-SHA256 under the task's own secret (derived from the service's
//! webhook secret and the task id, so any instance signs alike and no task's receiver can sign
//! for another), delivered in order and retried with backoff.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use data_encoding::HEXLOWER;
use hmac::{Hmac, KeyInit, Mac};
use serde::Serialize;
use sha2::Sha256;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use url::Url;

use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::ids::TaskId;
use crate::sync::Locked;
use crate::tenancy::Tenant;
use crate::web::WebService;

/// Attempts per event: the first, then retries 1, 2, 4, 8 and 16 s apart.
const ATTEMPTS: u32 = 6;
const FIRST_RETRY: Duration = Duration::from_secs(1);
/// The header carrying `sha256=<hex HMAC of the body>`.
pub const SIGNATURE_HEADER: &str = "x-webpilot-signature";

/// Where one task's events go, and what signs them.
#[derive(Clone)]
struct Hook {
    url: Url,
    /// An address the operator listed: delivered without the URL policy's address checks.
    listed: bool,
    secret: Vec<u8>,
    tenant: Arc<Tenant>,
}

/// Delivers the events of the tasks that asked for them.
pub(super) struct Webhooks {
    secret: Vec<u8>,
    /// URL prefixes the operator allows besides https URLs the policy allows.
    allow: Vec<String>,
    web: Arc<WebService>,
    /// Each task's queue on this instance, delivered one event after another.
    queues: Mutex<HashMap<TaskId, mpsc::UnboundedSender<String>>>,
    stop: CancellationToken,
    tasks: TaskTracker,
}

impl Webhooks {
    pub(super) fn new(
        secret: Vec<u8>,
        allow: Vec<String>,
        web: Arc<WebService>,
        stop: CancellationToken,
        tasks: TaskTracker,
    ) -> Self {
        Self {
            secret,
            allow,
            web,
            queues: Mutex::new(HashMap::new()),
            stop,
            tasks,
        }
    }

    /// Checks a task's webhook URL for `tenant`: an https URL its policy allows, or one the
    /// operator listed in `[crawl] webhook_allow`.
    pub(super) fn check(&self, tenant: &Tenant, url: &str) -> ToolResult<()> {
        let parsed = Url::parse(url).map_err(|e| {
            ToolError::invalid(format!("field `webhook` is not a URL ({e}): {url:?}"))
        })?;
        if self.listed(url) {
            return Ok(());
        }
        if parsed.scheme() != "https" {
            return Err(ToolError::invalid(format!(
                "field `webhook` must be an https URL: {url:?}"
            ))
            .with_hint(
                "give an https URL, or ask the operator to list it in [crawl] webhook_allow",
            ));
        }
        tenant.policy().check_url(&parsed)
    }

    fn listed(&self, url: &str) -> bool {
        self.allow
            .iter()
            .any(|prefix| url.starts_with(prefix.as_str()))
    }

    /// Task `task`'s own signing secret (hex): the key its receiver checks signatures with.
    pub(super) fn task_secret(&self, task: &TaskId) -> String {
        HEXLOWER.encode(&self.derive(task))
    }

    fn derive(&self, task: &TaskId) -> Vec<u8> {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.secret)
            .expect("HMAC takes keys of any length");
        mac.update(b"webpilot crawl webhook\n");
        mac.update(task.as_str().as_bytes());
        mac.finalize().into_bytes().to_vec()
    }

    /// Queues event `name` with `fields` for task `task`'s webhook at `url`, as one JSON object
    /// (`{"event": name, …fields}`); `last` ends the task's queue once it is delivered.
    pub(super) fn send(
        &self,
        (tenant, task): (&Arc<Tenant>, &TaskId),
        url: &str,
        name: &str,
        fields: &impl Serialize,
        last: bool,
    ) {
        let Ok(parsed) = Url::parse(url) else { return };
        let Ok(event) = serde_json::to_string(&Named {
            event: name,
            fields,
        }) else {
            return;
        };
        let mut queues = self.queues.locked();
        let queue = queues.entry(task.clone()).or_insert_with(|| {
            let hook = Hook {
                listed: self.listed(url),
                url: parsed,
                secret: self.task_secret(task).into_bytes(),
                tenant: tenant.clone(),
            };
            let (sender, receiver) = mpsc::unbounded_channel();
            let (web, stop) = (self.web.clone(), self.stop.clone());
            self.tasks.spawn(deliver_all(web, hook, receiver, stop));
            sender
        });
        let _ = queue.send(event);
        if last {
            // Dropping the sender ends the worker once it has delivered what is queued.
            queues.remove(task);
        }
    }
}

/// A webhook event: its name, then its fields.
#[derive(Serialize)]
struct Named<'a, T: Serialize> {
    event: &'a str,
    #[serde(flatten)]
    fields: &'a T,
}

/// `started`: the task began with `total` URLs.
#[derive(Serialize)]
pub(super) struct Started<'a> {
    pub task_id: &'a TaskId,
    pub total: usize,
}

/// The task ended (the event is its status): what became of its URLs.
#[derive(Serialize)]
pub(super) struct Ended<'a> {
    pub task_id: &'a TaskId,
    pub total: usize,
    pub progress: usize,
    pub errors: usize,
    pub skipped: usize,
}

/// Delivers a task's events in order until its queue ends or the service stops.
async fn deliver_all(
    web: Arc<WebService>,
    hook: Hook,
    mut events: mpsc::UnboundedReceiver<String>,
    stop: CancellationToken,
) {
    while let Some(event) = tokio::select! {
        event = events.recv() => event,
        () = stop.cancelled() => None,
    } {
        let body = event;
        let signature = format!("sha256={}", sign(&hook.secret, body.as_bytes()));
        let mut wait = FIRST_RETRY;
        for attempt in 1..=ATTEMPTS {
            match post(&web, &hook, &body, &signature).await {
                Ok(()) => break,
                Err(error) if attempt == ATTEMPTS => {
                    tracing::warn!(url = %hook.url, %error, "webhook event not delivered");
                }
                Err(_) => {
                    tokio::select! {
                        () = tokio::time::sleep(wait) => {}
                        () = stop.cancelled() => return,
                    }
                    wait *= 2;
                }
            }
        }
    }
}

async fn post(web: &WebService, hook: &Hook, body: &str, signature: &str) -> ToolResult<()> {
    let policy = (!hook.listed).then(|| hook.tenant.policy().as_ref());
    let status = web
        .client
        .post_json(&hook.url, policy, body, &[(SIGNATURE_HEADER, signature)])
        .await?;
    if (200..300).contains(&status) {
        Ok(())
    } else {
        Err(ToolError::new(
            ErrorCode::Upstream,
            format!("{} answered HTTP {status}", hook.url),
        ))
    }
}

fn sign(secret: &[u8], body: &[u8]) -> String {
    let mut mac =
        <Hmac<Sha256> as KeyInit>::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(body);
    HEXLOWER.encode(&mac.finalize().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_is_the_hmac_of_the_body_under_the_task_s_secret() {
        // RFC 4231, test case 2.
        assert_eq!(
            sign(b"Jefe", b"what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
