//! The bound on request body bytes being read at once, across all requests. A tool call's body
//! (up to ~67 MiB, an inline file in base64) is read whole before the call starts; without a
//! bound, a burst of them could take all the machine's memory. Each request takes its
//! `Content-Length` from one budget of `max_body_bytes_in_flight` bytes before its body is read
//! (a body without a length takes each chunk as it arrives) and gives it back once its body is
//! read or dropped. A request the budget cannot hold now is answered `BUSY` (503, Retry-After)
//! at once rather than queued, and counted in `/metrics`; requests without a body (health
//! probes) never touch the budget.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper::body::{Frame, SizeHint};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::{ErrorCode, ToolError};
use crate::tools::Registry;

/// What a refused client is told to wait: bodies in flight are read within seconds, or time
/// out (`BODY_READ_TIMEOUT`).
const RETRY_AFTER_SECS: u64 = 1;

/// The budget every request body draws from.
#[derive(Clone)]
pub(super) struct BodyBudget {
    /// One permit per byte; a body holds its bytes' permits while it is read.
    bytes: Arc<Semaphore>,
    /// The whole budget: a body larger than it takes all of it (and meets its route's limit).
    capacity: u32,
    /// For the counters in its metrics.
    registry: Arc<Registry>,
}

impl BodyBudget {
    pub(super) fn new(max_bytes: u64, registry: Arc<Registry>) -> Self {
        // Permits are taken in u32 counts: a budget past 4 GiB is 4 GiB.
        let capacity = u32::try_from(max_bytes).unwrap_or(u32::MAX).max(1);
        Self {
            bytes: Arc::new(Semaphore::new(capacity as usize)),
            capacity,
            registry,
        }
    }

    /// `bytes` of the budget (all of it at most), if they are free now.
    fn take(&self, bytes: u64) -> Option<Held> {
        let bytes = u32::try_from(bytes).map_or(self.capacity, |b| b.min(self.capacity));
        let permit = self.bytes.clone().try_acquire_many_owned(bytes).ok()?;
        self.registry.metrics().body_bytes_taken(u64::from(bytes));
        Some(Held {
            permit: Some(permit),
            registry: self.registry.clone(),
        })
    }

    fn refused(&self) -> Response {
        self.registry.metrics().body_refused();
        let error = ToolError::new(
            ErrorCode::Busy,
            "the service is reading as many request bodies as it may at once",
        )
        .with_hint(format!(
            "send the request again in {RETRY_AFTER_SECS} s; large inline files are best \
             sent one at a time"
        ))
        .retry_after(RETRY_AFTER_SECS);
        error.into_response()
    }
}

/// Bytes of the budget a body holds; given back when dropped.
struct Held {
    /// Always `Some` but after `merge` took it.
    permit: Option<OwnedSemaphorePermit>,
    registry: Arc<Registry>,
}

impl Held {
    /// Holds `other`'s bytes too (given back with these).
    fn merge(&mut self, mut other: Held) {
        let Some(more) = other.permit.take() else {
            return;
        };
        match &mut self.permit {
            Some(permit) => permit.merge(more),
            None => self.permit = Some(more),
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(permit) = &self.permit {
            let bytes = permit.num_permits() as u64;
            self.registry.metrics().body_bytes_given(bytes);
        }
    }
}

/// The middleware: takes the body's bytes from the budget, or answers `BUSY`.
pub(super) async fn bound(
    State(budget): State<BodyBudget>,
    request: Request,
    next: Next,
) -> Response {
    // The body's own size hint (and end) are not kept through the body timeout's wrapper: a
    // request without `Content-Length` (a GET too) is metered chunk by chunk, taking nothing
    // when it has no chunks.
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let (parts, body) = request.into_parts();
    if declared == Some(0) {
        return next.run(Request::from_parts(parts, body)).await;
    }
    let refused = Arc::new(AtomicBool::new(false));
    let metered = match declared {
        Some(bytes) => match budget.take(bytes) {
            Some(held) => Metered::declared(body, held),
            None => return budget.refused(),
        },
        None => Metered::chunked(body, budget.clone(), refused.clone()),
    };
    let response = next
        .run(Request::from_parts(parts, Body::new(metered)))
        .await;
    // The handler saw a failed body read; the reason is the budget, not the client.
    if refused.load(Ordering::Relaxed) {
        return budget.refused();
    }
    response
}

/// A request body that holds its bytes of the budget until it is read whole or dropped.
struct Metered {
    inner: Body,
    held: Option<Held>,
    /// Takes each chunk from the budget as it arrives (a body of unknown length).
    chunks: Option<(BodyBudget, Arc<AtomicBool>)>,
}

impl Metered {
    fn declared(inner: Body, held: Held) -> Self {
        Self {
            inner,
            held: Some(held),
            chunks: None,
        }
    }

    fn chunked(inner: Body, budget: BodyBudget, refused: Arc<AtomicBool>) -> Self {
        Self {
            inner,
            held: None,
            chunks: Some((budget, refused)),
        }
    }

    /// Takes a chunk's bytes from the budget; false when it cannot.
    fn take_chunk(&mut self, bytes: usize) -> bool {
        let Some((budget, refused)) = &self.chunks else {
            return true;
        };
        match budget.take(bytes as u64) {
            Some(taken) => {
                match &mut self.held {
                    Some(held) => held.merge(taken),
                    None => self.held = Some(taken),
                }
                true
            }
            None => {
                refused.store(true, Ordering::Relaxed);
                false
            }
        }
    }
}

/// The error a body of unknown length ends with when the budget cannot take its next chunk.
#[derive(Debug, thiserror::Error)]
#[error("the request bodies being read hold the whole budget")]
struct BudgetSpent;

impl HttpBody for Metered {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        let frame = ready!(Pin::new(&mut this.inner).poll_frame(cx));
        let bytes = match &frame {
            Some(Ok(frame)) => frame.data_ref().map_or(0, Bytes::len),
            _ => 0,
        };
        if bytes > 0 && !this.take_chunk(bytes) {
            this.held = None;
            return Poll::Ready(Some(Err(axum::Error::new(BudgetSpent))));
        }
        if !matches!(frame, Some(Ok(_))) {
            // Read whole, or failed: the bytes go back at once, not when the request ends.
            this.held = None;
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
