//! Everything that speaks CDP (and nothing else does): the Chromium pool, sessions with their
//! browser contexts and tabs, readiness, the element list and its refs, and content reading.
//!
//! Invariants: every CDP call runs under a timeout and fails fast with `BROWSER_UNAVAILABLE`
//! when Chromium dies; a ref is never retargeted to a different element.

mod admission;
mod annotate;
pub use admission::{AdmissionStats, REPORTED_WAIT};
pub use annotate::role_colour;
mod capture;
mod consent;
mod content;
mod download;
mod fill;
mod formats;
mod frame_loads;
mod frame_traffic;
mod frames;
mod guard;
mod identity;
mod input;
mod link;
pub use session::live;
mod memory;
mod navigation;
mod observe;
mod page_tools;
mod pool;
mod print;
mod recognize;
mod session;
mod settle;
mod snapshot;
mod storage;
mod submission;
mod tab;
mod watcher;

pub use crate::egress::Blocked;
pub use capture::{ImageKind, LegendEntry, Picture, Shot};
pub use consent::{ConsentAction, ConsentAnswer};
pub use content::{Concealed, FindHit, Form, PageWarning, Scope};
pub use download::Downloaded;
pub use fill::{FieldCheck, Filled, ValueMismatch};
pub use identity::{ColorScheme, Geolocation, Identity, ViewportSize};
pub use navigation::{Arrival, Destination, FailedNavigation};
pub use observe::glob_matches;
pub use observe::har::HarPage;
pub use observe::{
    ActionLines, ConsoleQuery, Level, MessageLine, NetworkList, NetworkQuery, PageEvents,
    RequestDetail, StatusFilter, TabLog,
};
pub use page_tools::PageTool;
pub use pool::{
    BrowserHandle, BrowserPool, Download, exec_chromium_if_launcher, remove_abandoned_browser_dirs,
    remove_abandoned_uploads,
};
pub use print::{Paper, Printing};
pub use recognize::{Candidate, ElementIdentity, Match, Recognized};
pub use session::{
    BrowserService, SavedHar, SessionExtras, SessionGuard, SessionSummary, SweepStats, TabInfo,
    Told, Turn,
};
pub use settle::{ActionMark, Aftermath, LONG_REQUEST_MS, Readiness, ReadyBy, Watch};
pub use snapshot::{ChangesIn, Element, ElementChanges, ElementList, OFFSCREEN_HEADER};
pub use storage::domain_matches;
pub use submission::{Submission, SubmitBy};
pub use tab::{DialogAnswer, DialogRecord, Tab};
