//! One tab's screencast (`Page.startScreencast`), shared by all its viewers: JPEG frames, each
//! acknowledged at once so Chromium sends the next as soon as the page changes; nothing is sent
//! while the page is still. It runs while at least one `Watching` of it exists.

use crate::sync::Locked;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use base64::Engine;
use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::page::{
    EventScreencastFrame, ScreencastFrameAckParams, StartScreencastFormat, StartScreencastParams,
    StopScreencastParams,
};
use futures::StreamExt;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::LiveStats;
use crate::browser::pool::BrowserHandle;
use crate::error::ToolResult;

/// JPEG quality of the frames: text stays legible, a 1280×720 frame stays near 100 KB.
const JPEG_QUALITY: i64 = 70;
/// Frames a slow viewer may fall behind before it skips to the newest.
const BACKLOG: usize = 2;

/// A frame of the page, and the page's size in CSS pixels (which input coordinates use).
#[derive(Debug)]
pub struct Frame {
    pub jpeg: Vec<u8>,
    pub width: f64,
    pub height: f64,
}

/// What the screencast task and its owners share.
struct Shared {
    frames: broadcast::Sender<Arc<Frame>>,
    /// The newest frame, for a viewer that joins a running screencast.
    last: Mutex<Option<Arc<Frame>>>,
}

pub(super) struct Screencast {
    shared: Arc<Shared>,
    stop: CancellationToken,
}

impl Drop for Screencast {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Screencast {
    pub(super) async fn start(
        page: &Page,
        browser: &Arc<BrowserHandle>,
        (width, height): (u32, u32),
        stats: Arc<LiveStats>,
    ) -> ToolResult<Arc<Self>> {
        let mut events = browser
            .cdp(
                "following the screencast",
                page.event_listener::<EventScreencastFrame>(),
            )
            .await?;
        let params = StartScreencastParams {
            format: Some(StartScreencastFormat::Jpeg),
            quality: Some(JPEG_QUALITY),
            max_width: Some(width.into()),
            max_height: Some(height.into()),
            every_nth_frame: Some(1),
        };
        browser
            .cdp("starting the screencast", page.execute(params))
            .await?;
        stats.screencasts.fetch_add(1, Ordering::Relaxed);
        let shared = Arc::new(Shared {
            frames: broadcast::channel(BACKLOG).0,
            last: Mutex::new(None),
        });
        let stop = CancellationToken::new();
        let cast = Arc::new(Self {
            shared: shared.clone(),
            stop: stop.clone(),
        });
        let (page, browser) = (page.clone(), browser.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = stop.cancelled() => break,
                    event = events.next() => match event {
                        Some(event) => {
                            let ack = ScreencastFrameAckParams::new(event.session_id);
                            let _ = browser.cdp("acknowledging a frame", page.execute(ack)).await;
                            stats.frames.fetch_add(1, Ordering::Relaxed);
                            shared.publish(&event);
                        }
                        // The tab closed.
                        None => break,
                    },
                }
            }
            let _ = browser
                .cdp(
                    "stopping the screencast",
                    page.execute(StopScreencastParams::default()),
                )
                .await;
            stats.screencasts.fetch_sub(1, Ordering::Relaxed);
        });
        Ok(cast)
    }
}

impl Shared {
    fn publish(&self, event: &EventScreencastFrame) {
        let Ok(jpeg) =
            base64::engine::general_purpose::STANDARD.decode(event.data.as_ref() as &str)
        else {
            return;
        };
        let frame = Arc::new(Frame {
            jpeg,
            width: event.metadata.device_width,
            height: event.metadata.device_height,
        });
        *self.last.locked() = Some(frame.clone());
        // No receiver is no error: the viewers may have just left.
        let _ = self.frames.send(frame);
    }
}

/// One viewer's subscription to a tab's frames.
pub struct Watching {
    /// Keeps the screencast running.
    _cast: Arc<Screencast>,
    frames: broadcast::Receiver<Arc<Frame>>,
    /// The newest frame at the time of joining, handed out first.
    first: Option<Arc<Frame>>,
}

impl Watching {
    pub(super) fn of(cast: Arc<Screencast>) -> Self {
        let frames = cast.shared.frames.subscribe();
        let first = cast.shared.last.locked().clone();
        Self {
            _cast: cast,
            frames,
            first,
        }
    }

    /// The next frame to show (the newest, when the viewer fell behind); None once the tab's
    /// screencast has ended.
    pub async fn next(&mut self) -> Option<Arc<Frame>> {
        if let Some(first) = self.first.take() {
            return Some(first);
        }
        loop {
            match self.frames.recv().await {
                Ok(frame) => return Some(frame),
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }
}
