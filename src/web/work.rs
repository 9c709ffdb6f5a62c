//! Reading a stranger's input off the async workers. A parse or an extraction runs on a thread
//! of its own whose stack is known (`STACK`: far more than `bounded::MAX_DEPTH` levels of any
//! walker need), so no page can overflow a tokio worker's 2 MiB and abort the process; within a
//! time limit, past which the caller gets `TIMEOUT` naming the stage; and told to stop when its
//! caller goes away: long loops ask `stopped()`, and XPath's tree answers nothing once it is.
//! A panic in a reader is the caller's `INTERNAL`, not the process's end. After a large read
//! the freed memory is handed back to the system.

use std::cell::RefCell;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::error::{ErrorCode, ToolError, ToolResult};

/// Each reader thread's stack: reserved, and touched only as deep as a read goes.
const STACK: usize = 256 * 1024 * 1024;

/// A read taking longer than this probably grew the heap: its memory is trimmed after it.
const TRIM_AFTER: Duration = Duration::from_millis(50);

thread_local! {
    /// The running read's stop flag, on a reader thread.
    static STOP: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// Whether the read running on this thread has been given up by its caller (past its limit or
/// gone). Cheap: a thread-local and an atomic load.
pub fn stopped() -> bool {
    STOP.with(|stop| {
        stop.borrow()
            .as_ref()
            .is_some_and(|s| s.load(Ordering::Relaxed))
    })
}

/// Sets the stop flag when the caller stops waiting, whether it got an answer or not.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Runs `read` on a reader thread within `limit`. `stage` names the work in a `TIMEOUT` (
/// "extracting the page", "the selector schema").
pub async fn off_thread<T: Send + 'static>(
    stage: &str,
    limit: Duration,
    read: impl FnOnce() -> T + Send + 'static,
) -> ToolResult<T> {
    let stop = Arc::new(AtomicBool::new(false));
    let _stop_on_drop = StopOnDrop(stop.clone());
    let (answer, answered) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("webpilot-read".into())
        .stack_size(STACK)
        .spawn(move || {
            STOP.with(|s| *s.borrow_mut() = Some(stop));
            let started = Instant::now();
            let result = std::panic::catch_unwind(AssertUnwindSafe(read));
            let _ = answer.send(result);
            if started.elapsed() >= TRIM_AFTER {
                give_memory_back();
            }
        })
        .map_err(|e| {
            ToolError::new(ErrorCode::Busy, format!("no thread to read on: {e}")).retry_after(1)
        })?;
    match tokio::time::timeout(limit, answered).await {
        Ok(Ok(Ok(value))) => Ok(value),
        Ok(Ok(Err(_))) | Ok(Err(_)) => Err(ToolError::internal(format!("{stage} failed"))),
        Err(_) => Err(timed_out(stage, limit)),
    }
}

/// The `TIMEOUT` of a read past its limit, naming its stage.
pub fn timed_out(stage: &str, limit: Duration) -> ToolError {
    ToolError::new(
        ErrorCode::Timeout,
        format!("{stage} took longer than {} ms", limit.as_millis()),
    )
    .with_hint(
        "the input is too large or too intricate to read this way: read less of it \
         (extract=links, a selector, a simpler schema, a download read page by page) or ask \
         the operator to raise fetch.read_limit_ms",
    )
}

/// Free heap memory held past which the service hands it back (see `hand_back_freed_memory`).
/// Low: glibc keeps what short-lived work freed in arenas it does not trim by itself. Right
/// after the bench's sequences the heap held 10–16 MiB with under 5 MiB live and the service's
/// RSS was 57 MiB; 6 s later, trimmed at this threshold, 46 MiB. A trim runs on a blocking
/// thread, at most every 5 s.
const FREE_HELD_MAX: usize = 4 * 1024 * 1024;

/// Every few seconds, hands freed memory back to the system when the heap holds more than
/// `FREE_HELD_MAX` of it: whatever made the heap grow (a large page, a crawl's robots.txt, an
/// import), idle RSS comes back near where it was.
pub async fn hand_back_freed_memory(stop: tokio_util::sync::CancellationToken) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
        let _ = tokio::task::spawn_blocking(|| {
            if free_memory_held() > FREE_HELD_MAX {
                give_memory_back();
            }
        })
        .await;
    }
}

/// Bytes the heap holds freed (glibc's count; 0 elsewhere).
fn free_memory_held() -> usize {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallinfo2 only reads glibc's arenas' counters.
    unsafe {
        libc::mallinfo2().fordblks
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    0
}

/// Hands the heap's free memory back to the system (glibc keeps it otherwise, and the process
/// stays at its peak after one large page).
pub fn give_memory_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks glibc's own arenas and releases their free pages.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recurse(levels: usize) -> usize {
        let frame = std::hint::black_box([0u8; 1024]);
        if levels == 0 {
            return frame[0] as usize;
        }
        recurse(levels - 1) + std::hint::black_box(frame[1]) as usize
    }

    #[tokio::test]
    async fn a_deep_walk_fits_the_reader_stack() {
        // 100,000 frames of 1 KiB would overflow a tokio worker fifty times over.
        let read = off_thread("a deep walk", Duration::from_secs(20), || recurse(100_000));
        assert_eq!(read.await.unwrap(), 0);
    }

    #[tokio::test]
    async fn past_its_limit_a_read_times_out_and_is_told_to_stop() {
        let (seen, saw) = std::sync::mpsc::channel();
        let read = off_thread("the endless loop", Duration::from_millis(200), move || {
            while !stopped() {
                std::thread::yield_now();
            }
            seen.send(()).unwrap();
        });
        let error = read.await.unwrap_err();
        assert_eq!(error.code, ErrorCode::Timeout);
        assert!(
            error.message.contains("the endless loop"),
            "{}",
            error.message
        );
        saw.recv_timeout(Duration::from_secs(10))
            .expect("the reader stopped");
    }

    #[tokio::test]
    async fn a_panicking_read_is_an_error_not_the_end() {
        let read = off_thread("a broken read", Duration::from_secs(5), || -> u8 {
            panic!("hostile")
        });
        assert_eq!(read.await.unwrap_err().code, ErrorCode::Internal);
    }
}
