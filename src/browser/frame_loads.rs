//! Documents loading in a tab's frames below the top one, as CDP reports them (the page's own
//! session for frames of its process, each out-of-process frame's session for its own): an
//! action that navigates a frame is answered once the frame's new document has loaded, and
//! says which frame navigated.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Frames' loads and commits, counted so that a mark taken before an action tells which came
/// after it.
#[derive(Debug, Default)]
pub(crate) struct FrameLoads {
    /// Frames loading now: frame id → the load's number and when it started.
    loading: HashMap<String, (u64, Instant)>,
    /// Loads started so far.
    started: u64,
    /// Documents committed so far, and the URL of the latest.
    commits: u64,
    latest_url: Option<String>,
}

/// Where the counts stood at a moment (before an action).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct FrameMark {
    started: u64,
    commits: u64,
}

impl FrameLoads {
    pub(crate) fn started_loading(&mut self, frame: &str) {
        self.started += 1;
        self.loading
            .insert(frame.to_string(), (self.started, Instant::now()));
    }

    /// The frame finished loading, or went away.
    pub(crate) fn stopped_loading(&mut self, frame: &str) {
        self.loading.remove(frame);
    }

    /// A frame committed a new document at `url` (the blank documents frames start with
    /// are not news).
    pub(crate) fn committed(&mut self, url: &str) {
        if url.starts_with("about:") {
            return;
        }
        self.commits += 1;
        self.latest_url = Some(url.to_string());
    }

    pub(crate) fn mark(&self) -> FrameMark {
        FrameMark {
            started: self.started,
            commits: self.commits,
        }
    }

    /// How many frames are loading a document they began after `mark`, leaving out loads
    /// older than `long` (a frame that never finishes must not hold an answer forever).
    pub(crate) fn loading_since(&self, mark: FrameMark, now: Instant, long: Duration) -> usize {
        self.loading
            .values()
            .filter(|(number, started)| *number > mark.started && now - *started < long)
            .count()
    }

    /// Whether any frame began loading, or committed, a document after `mark`.
    pub(crate) fn begun_since(&self, mark: FrameMark) -> bool {
        self.started > mark.started || self.commits > mark.commits
    }

    /// The URL of the latest document a frame committed after `mark`.
    pub(crate) fn navigated_since(&self, mark: FrameMark) -> Option<&str> {
        (self.commits > mark.commits)
            .then_some(self.latest_url.as_deref())
            .flatten()
    }
}
