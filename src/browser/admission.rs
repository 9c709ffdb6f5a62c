//! Admission control: the browser steps that cost the machine most (a new browser context, a
//! new tab, its first navigation) run at most `capacity` at a time. Callers beyond it wait in
//! a fair (first come, first served) queue, and their wait counts against their own deadline:
//! one whose deadline passes while queued gets `LIMIT` with a `Retry-After`, and nothing was
//! created for it.
//!
//! Without it, fifty sessions starting at once made Chromium start fifty renderers together,
//! every one of them slower than the CDP time limit: all fifty calls failed.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::{ErrorCode, ToolError, ToolResult};

/// A wait shorter than this is not worth reporting in a result (`queued_ms`).
pub const REPORTED_WAIT: Duration = Duration::from_millis(100);

/// The queue and its counters.
pub struct Admission {
    slots: Arc<Semaphore>,
    capacity: usize,
    /// Callers waiting for a slot now.
    waiting: AtomicUsize,
    /// Callers admitted so far, and their total wait.
    admitted: AtomicU64,
    waited_ms: AtomicU64,
    /// Callers whose deadline passed in the queue.
    refused: AtomicU64,
    /// How long a slot was held, on average (exponentially weighted), to tell a refused caller
    /// when to come back.
    mean_hold_ms: AtomicU64,
}

/// A slot of the admission queue, held until dropped.
pub struct Ticket {
    _permit: OwnedSemaphorePermit,
    /// How long the caller waited for it.
    pub queued: Duration,
    taken: Instant,
    admission: Arc<Admission>,
}

/// The queue as `/metrics` reports it.
#[derive(Debug, Clone, Copy)]
pub struct AdmissionStats {
    pub capacity: usize,
    pub in_use: usize,
    pub waiting: usize,
    pub admitted: u64,
    pub waited_seconds: f64,
    pub refused: u64,
}

impl Admission {
    /// `capacity` slots; 0 is taken as 1.
    pub fn new(capacity: usize) -> Arc<Self> {
        let capacity = capacity.max(1);
        Arc::new(Self {
            slots: Arc::new(Semaphore::new(capacity)),
            capacity,
            waiting: AtomicUsize::new(0),
            admitted: AtomicU64::new(0),
            waited_ms: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            mean_hold_ms: AtomicU64::new(500),
        })
    }

    /// Waits for a slot until `deadline`; `what` names the step in the refusal.
    pub async fn admit(self: &Arc<Self>, deadline: Instant, what: &str) -> ToolResult<Ticket> {
        let started = Instant::now();
        let permit = match self.slots.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                self.waiting.fetch_add(1, Ordering::Relaxed);
                let wait = deadline.saturating_duration_since(started);
                let acquired = tokio::time::timeout(wait, self.slots.clone().acquire_owned()).await;
                self.waiting.fetch_sub(1, Ordering::Relaxed);
                match acquired {
                    Ok(Ok(permit)) => permit,
                    Ok(Err(_)) => return Err(ToolError::internal("the admission queue closed")),
                    Err(_) => return Err(self.refusal(started.elapsed(), what)),
                }
            }
        };
        let queued = started.elapsed();
        self.admitted.fetch_add(1, Ordering::Relaxed);
        self.waited_ms
            .fetch_add(queued.as_millis() as u64, Ordering::Relaxed);
        Ok(Ticket {
            _permit: permit,
            queued,
            taken: Instant::now(),
            admission: self.clone(),
        })
    }

    /// `LIMIT` for a caller that waited `waited` in vain, with when to come back: the queue
    /// ahead of it divided among the slots, at the recent time a slot is held.
    fn refusal(&self, waited: Duration, what: &str) -> ToolError {
        self.refused.fetch_add(1, Ordering::Relaxed);
        let ahead = self.waiting.load(Ordering::Relaxed) as u64 + 1;
        let hold_ms = self.mean_hold_ms.load(Ordering::Relaxed).max(1);
        let secs = (ahead * hold_ms / self.capacity as u64)
            .div_ceil(1000)
            .max(1);
        ToolError::new(
            ErrorCode::Limit,
            format!(
                "the browser is busy: {what} waited {} ms for one of its {} slots, the call's \
                 whole time limit",
                waited.as_millis(),
                self.capacity
            ),
        )
        .with_hint(format!(
            "nothing was created; call again in {secs} s, or with a larger timeout_ms"
        ))
        .retry_after(secs)
    }

    pub fn stats(&self) -> AdmissionStats {
        AdmissionStats {
            capacity: self.capacity,
            in_use: self.capacity - self.slots.available_permits(),
            waiting: self.waiting.load(Ordering::Relaxed),
            admitted: self.admitted.load(Ordering::Relaxed),
            waited_seconds: self.waited_ms.load(Ordering::Relaxed) as f64 / 1000.0,
            refused: self.refused.load(Ordering::Relaxed),
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let held = self.taken.elapsed().as_millis() as u64;
        let mean = &self.admission.mean_hold_ms;
        let previous = mean.load(Ordering::Relaxed);
        mean.store((previous * 7 + held) / 8, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn callers_beyond_capacity_wait_in_order_and_a_passed_deadline_is_limit() {
        let admission = Admission::new(1);
        let far = Instant::now() + Duration::from_secs(10);
        let first = admission.admit(far, "opening a tab").await.unwrap();
        assert!(first.queued < REPORTED_WAIT);

        let soon = Instant::now() + Duration::from_millis(50);
        let refused = admission.admit(soon, "opening a tab").await.err().unwrap();
        assert_eq!(refused.code, ErrorCode::Limit);
        assert!(refused.retry_after_secs.unwrap() >= 1);
        assert!(
            refused.message.contains("opening a tab"),
            "{}",
            refused.message
        );

        let queue = admission.clone();
        let second = tokio::spawn(async move { queue.admit(far, "x").await.map(|t| t.queued) });
        while admission.stats().waiting == 0 {
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(Duration::from_millis(120)).await;
        drop(first);
        let waited = second.await.unwrap().unwrap();
        assert!(waited >= Duration::from_millis(100), "{waited:?}");
        let stats = admission.stats();
        assert_eq!((stats.admitted, stats.refused, stats.waiting), (2, 1, 0));
    }
}
