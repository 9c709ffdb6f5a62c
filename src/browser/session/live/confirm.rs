//! Confirmations: an action the operator's rules hold until a person allows it. The agent's
//! call asks (its answer links to the live view, which shows what the action would do); a
//! person allows or refuses it there or in the console; the agent's repeated call, or its
//! waiting one, takes the answer, once.

use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;
use tokio::sync::watch;
use tokio::time::Instant;

/// How long a person has to answer.
pub const CONFIRMATION_LIFETIME: Duration = Duration::from_secs(600);
/// Most questions one session keeps open (an agent asking again and again replaces none).
const MAX_OPEN: usize = 16;

/// One action waiting for a person.
#[derive(Debug)]
pub struct Confirmation {
    /// Unguessable: the agent repeats its call with it.
    pub id: String,
    /// What the action would do, for the person.
    pub what: String,
    /// The rule that holds it (`download`, `submit_cross_site`).
    pub rule: String,
    /// The call it is for: the answer serves only the same call again.
    fingerprint: u64,
    pub expires: Instant,
}

/// A person's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Answer {
    Pending,
    Allowed,
    Refused,
}

/// What a viewer is shown of an open question.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq, utoipa::ToSchema)]
pub struct Question {
    pub id: String,
    pub what: String,
    pub rule: String,
}

/// A session's questions and their answers.
pub struct Confirmations {
    state: watch::Sender<Vec<(Arc<Confirmation>, Answer)>>,
}

impl Default for Confirmations {
    fn default() -> Self {
        Self {
            state: watch::channel(Vec::new()).0,
        }
    }
}

impl Confirmations {
    /// Asks about a call, or finds the question already asked about the same call.
    pub fn ask(&self, what: String, rule: String, fingerprint: u64) -> Arc<Confirmation> {
        let mut asked = None;
        self.state.send_modify(|state| {
            let now = Instant::now();
            state.retain(|(c, _)| c.expires > now);
            if let Some((c, _)) = state
                .iter()
                .find(|(c, a)| c.fingerprint == fingerprint && *a == Answer::Pending)
            {
                asked = Some(c.clone());
                return;
            }
            if state.len() >= MAX_OPEN {
                state.remove(0);
            }
            let confirmation = Arc::new(Confirmation {
                id: crate::ids::unguessable("c-"),
                what,
                rule,
                fingerprint,
                expires: now + CONFIRMATION_LIFETIME,
            });
            state.push((confirmation.clone(), Answer::Pending));
            asked = Some(confirmation);
        });
        asked.expect("asked above")
    }

    /// A person's answer to question `id`; false when it is not open (answered, expired,
    /// unknown).
    pub fn answer(&self, id: &str, allow: bool) -> bool {
        self.state.send_if_modified(|state| {
            let now = Instant::now();
            match state
                .iter_mut()
                .find(|(c, a)| c.id == id && *a == Answer::Pending && c.expires > now)
            {
                Some((_, answer)) => {
                    *answer = if allow {
                        Answer::Allowed
                    } else {
                        Answer::Refused
                    };
                    true
                }
                None => false,
            }
        })
    }

    /// The open questions, oldest first.
    pub fn open(&self) -> Vec<Question> {
        let now = Instant::now();
        self.state
            .borrow()
            .iter()
            .filter(|(c, a)| *a == Answer::Pending && c.expires > now)
            .map(|(c, _)| Question {
                id: c.id.clone(),
                what: c.what.clone(),
                rule: c.rule.clone(),
            })
            .collect()
    }

    /// The answer to `id` for the call `fingerprint`: taken (forgotten) once allowed or
    /// refused. None when there is no such question for that call.
    pub fn take(&self, id: &str, fingerprint: u64) -> Option<(Arc<Confirmation>, Answer)> {
        let mut taken = None;
        self.state.send_if_modified(|state| {
            let Some(at) = state
                .iter()
                .position(|(c, _)| c.id == id && c.fingerprint == fingerprint)
            else {
                return false;
            };
            let (confirmation, answer) = state[at].clone();
            taken = Some((confirmation.clone(), answer));
            if answer != Answer::Pending {
                state.remove(at);
                return true;
            }
            false
        });
        taken.filter(|(c, a)| *a != Answer::Pending || c.expires > Instant::now())
    }

    /// Waits until question `id` is answered or `deadline` passes; what it is then.
    pub async fn answered(&self, id: &str, deadline: Instant) -> Answer {
        let mut changes = self.state.subscribe();
        loop {
            let answer = changes
                .borrow_and_update()
                .iter()
                .find(|(c, _)| c.id == id)
                .map(|(c, a)| (c.expires, *a));
            match answer {
                Some((_, Answer::Pending)) => {}
                Some((_, answer)) => return answer,
                // Expired and forgotten: no answer came.
                None => return Answer::Pending,
            }
            let until = deadline.min(answer.map(|(expires, _)| expires).unwrap_or(deadline));
            match tokio::time::timeout_at(until, changes.changed()).await {
                Ok(Ok(())) => continue,
                _ => return Answer::Pending,
            }
        }
    }

    /// Changes of the questions, for viewers.
    pub fn subscribe(&self) -> watch::Receiver<Vec<(Arc<Confirmation>, Answer)>> {
        self.state.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_answer_serves_the_same_call_once() {
        let confirmations = Confirmations::default();
        let asked = confirmations.ask("download x".into(), "download".into(), 7);
        let again = confirmations.ask("download x".into(), "download".into(), 7);
        assert_eq!(asked.id, again.id);
        assert_eq!(confirmations.open().len(), 1);
        assert_eq!(confirmations.take(&asked.id, 7).unwrap().1, Answer::Pending);
        assert!(confirmations.take(&asked.id, 8).is_none(), "another call");
        assert!(confirmations.answer(&asked.id, true));
        assert!(!confirmations.answer(&asked.id, false), "answered once");
        let soon = Instant::now() + Duration::from_millis(10);
        assert_eq!(
            confirmations.answered(&asked.id, soon).await,
            Answer::Allowed
        );
        assert_eq!(confirmations.take(&asked.id, 7).unwrap().1, Answer::Allowed);
        assert!(confirmations.take(&asked.id, 7).is_none(), "taken once");
        assert!(confirmations.open().is_empty());
    }
}
