//! What a tab's page did underneath: every request of the page, its frames of any origin and its
//! workers, with its answer, timing and (for documents, `fetch`/XHR and event streams) its body;
//! console messages, uncaught exceptions and unhandled rejections; and the browser's own log
//! entries (CSP violations, interventions). Kept per tab in bounded rings (`[network]`), read by
//! `browser_read` mode=network|console, summed up after each action ([`PageEvents`]) and saved
//! as HAR.
//!
//! `ingest` turns CDP events into records, `view` reads them (filtered, redacted), `har` writes
//! them out, `redact` hides secrets on the way out: the capture itself holds what the page sent.

pub mod har;
pub(crate) mod ingest;
mod redact;
mod view;

use std::collections::{HashMap, VecDeque};

use crate::config::NetworkConfig;

pub use view::{
    ActionLines, ConsoleQuery, Level, MessageLine, NetworkList, NetworkQuery, PageEvents,
    RequestDetail, StatusFilter,
};

/// Where a request or message came from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Origin {
    /// The tab's top document (and frames of its own process).
    Page,
    /// A frame, by frame id (its URL is looked up when read).
    Frame(String),
    /// A worker, by its script URL.
    Worker(String),
}

/// A body as kept.
#[derive(Debug, Clone)]
pub(crate) enum Body {
    Text {
        text: String,
        /// Its size before it was cut at `max_body_bytes`.
        size: usize,
        truncated: bool,
    },
    Binary {
        size: usize,
        sha256: String,
    },
    /// Not kept: why (dropped for the tab's byte cap, too large, the page went away).
    Missing(&'static str),
}

impl Body {
    /// Bytes this body holds in memory.
    fn held(&self) -> usize {
        match self {
            Body::Text { text, .. } => text.len(),
            _ => 0,
        }
    }
}

/// The answer to a request.
#[derive(Debug, Clone, Default)]
pub(crate) struct Answer {
    pub status: i64,
    pub status_text: String,
    pub mime: String,
    pub headers: Vec<(String, String)>,
    pub protocol: Option<String>,
    pub remote: Option<String>,
    pub from_cache: bool,
    /// Phases in ms (HAR's `timings`): blocked, dns, connect, ssl, send, wait; -1 unknown.
    pub phases: [f64; 6],
}

/// A redirect the request went through: the URL that answered, and how.
#[derive(Debug, Clone)]
pub(crate) struct Hop {
    pub url: String,
    pub status: i64,
}

/// One request and what became of it.
#[derive(Debug, Clone)]
pub(crate) struct Exchange {
    /// `r<seq>` to callers; increasing per tab, never reused.
    pub seq: u64,
    key: String,
    pub method: String,
    pub url: String,
    /// CDP's resource type in lower case: document, fetch, xhr, script, image, …
    pub kind: String,
    pub origin: Origin,
    /// Seconds since the epoch when it was sent.
    pub started_at: f64,
    /// CDP's monotonic clock when it was sent (durations are measured on it).
    started_clock: f64,
    pub duration_ms: Option<f64>,
    pub request_headers: Vec<(String, String)>,
    pub request_body: Option<Body>,
    pub answer: Option<Answer>,
    pub body: Option<Body>,
    pub decoded_bytes: u64,
    pub encoded_bytes: Option<u64>,
    pub redirects: Vec<Hop>,
    /// The network error, or why the URL policy refused it.
    pub failure: Option<String>,
    /// The page or the browser gave up on it (a navigation away): not the site's failure.
    pub canceled: bool,
    pub finished: bool,
}

impl Exchange {
    /// A failure worth reporting: a network error (not a cancellation) or a 4xx/5xx answer.
    pub(crate) fn failed(&self) -> bool {
        (self.failure.is_some() && !self.canceled)
            || self.answer.as_ref().is_some_and(|a| a.status >= 400)
    }
}

/// What kind of message.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum MessageKind {
    /// `console.*` from the page.
    Console,
    /// An uncaught exception or unhandled rejection.
    PageError,
    /// The browser's own log (CSP violations, interventions, failed loads).
    Browser,
}

/// One console message, page error or browser log entry.
#[derive(Debug, Clone)]
pub(crate) struct Message {
    /// `c<seq>` to callers.
    pub seq: u64,
    pub kind: MessageKind,
    pub level: Level,
    pub text: String,
    /// `url:line` where it was logged or thrown.
    pub source: Option<String>,
    pub stack: Option<String>,
    /// The browser log's source (network, violation, security, intervention…).
    pub category: Option<String>,
    pub origin: Origin,
}

/// Where the last action started: what it caused is everything from here on.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Mark {
    pub exchange: u64,
    pub message: u64,
}

/// Everything recorded for one tab, bounded by `[network]`.
#[derive(Debug)]
pub struct TabLog {
    limits: NetworkConfig,
    exchanges: VecDeque<Exchange>,
    /// Request keys (`id`, or `<session>/<id>` for other targets) to `seq`.
    by_key: HashMap<String, u64>,
    messages: VecDeque<Message>,
    next_exchange: u64,
    next_message: u64,
    /// Bytes of bodies held.
    body_bytes: usize,
    /// The document URL of each frame seen, by frame id.
    frames: HashMap<String, String>,
    mark: Mark,
    /// Texts typed into password fields of this tab: never shown in a read.
    secrets: Vec<String>,
}

/// Frames whose URL is remembered; a page that makes more frames than this loses the oldest
/// names (its requests still show, as "frame").
const FRAMES_KEPT: usize = 256;
/// Secrets remembered per tab.
const SECRETS_KEPT: usize = 32;

impl TabLog {
    pub(crate) fn new(limits: NetworkConfig) -> Self {
        Self {
            limits,
            exchanges: VecDeque::new(),
            by_key: HashMap::new(),
            messages: VecDeque::new(),
            next_exchange: 1,
            next_message: 1,
            body_bytes: 0,
            frames: HashMap::new(),
            mark: Mark {
                exchange: 1,
                message: 1,
            },
            secrets: Vec::new(),
        }
    }

    pub(crate) fn enabled(&self) -> bool {
        self.limits.capture
    }

    pub(crate) fn limits(&self) -> &NetworkConfig {
        &self.limits
    }

    /// Starts an action: what it causes is what comes after this.
    pub(crate) fn mark(&mut self) {
        self.mark = Mark {
            exchange: self.next_exchange,
            message: self.next_message,
        };
    }

    pub(crate) fn marked(&self) -> Mark {
        self.mark
    }

    /// Remembers a text typed into a password field, so that no read shows it.
    pub(crate) fn remember_secret(&mut self, secret: &str) {
        if secret.len() < 4 || self.secrets.iter().any(|s| s == secret) {
            return;
        }
        if self.secrets.len() == SECRETS_KEPT {
            self.secrets.remove(0);
        }
        self.secrets.push(secret.to_string());
    }

    pub(crate) fn secrets(&self) -> &[String] {
        &self.secrets
    }

    /// Records a new request; the oldest goes when the ring is full.
    fn push_exchange(&mut self, mut exchange: Exchange) -> u64 {
        exchange.seq = self.next_exchange;
        self.next_exchange += 1;
        if self.exchanges.len() >= self.limits.max_requests.max(1) {
            self.evict_oldest_exchange();
        }
        self.by_key.insert(exchange.key.clone(), exchange.seq);
        self.exchanges.push_back(exchange);
        self.next_exchange - 1
    }

    fn evict_oldest_exchange(&mut self) {
        if let Some(gone) = self.exchanges.pop_front() {
            if self.by_key.get(&gone.key) == Some(&gone.seq) {
                self.by_key.remove(&gone.key);
            }
            let held = gone.body.as_ref().map_or(0, Body::held)
                + gone.request_body.as_ref().map_or(0, Body::held);
            self.body_bytes -= held;
        }
    }

    /// The request with this sequence number, if it is still kept.
    pub(crate) fn exchange(&self, seq: u64) -> Option<&Exchange> {
        let first = self.exchanges.front()?.seq;
        self.exchanges
            .get(usize::try_from(seq.checked_sub(first)?).ok()?)
    }

    fn exchange_mut_seq(&mut self, seq: u64) -> Option<&mut Exchange> {
        let first = self.exchanges.front()?.seq;
        self.exchanges
            .get_mut(usize::try_from(seq.checked_sub(first)?).ok()?)
    }

    /// The latest request recorded under a CDP key. A frame's document (or a worker's script)
    /// is requested by the parent's target and answered in the frame's own: its events there
    /// carry the same request id under the frame's session (`<session>/<id>`).
    fn exchange_mut(&mut self, key: &str) -> Option<&mut Exchange> {
        let seq = match self.by_key.get(key) {
            Some(seq) => *seq,
            None => *self.by_key.get(key.rsplit_once('/')?.1)?,
        };
        self.exchange_mut_seq(seq)
    }

    /// Keeps a body of request `seq` (its answer's, or its own data), within the tab's byte
    /// cap: older bodies are dropped first.
    fn keep_body(&mut self, seq: u64, body: Body, request_data: bool) {
        let held = body.held();
        let Some(exchange) = self.exchange_mut_seq(seq) else {
            return;
        };
        let slot = if request_data {
            &mut exchange.request_body
        } else {
            &mut exchange.body
        };
        let replaced = slot.replace(body).as_ref().map_or(0, Body::held);
        self.body_bytes = self.body_bytes + held - replaced;
        let cap = self.limits.max_tab_body_bytes;
        for exchange in self.exchanges.iter_mut() {
            if self.body_bytes <= cap {
                break;
            }
            for slot in [&mut exchange.body, &mut exchange.request_body] {
                let freed = slot.as_ref().map_or(0, Body::held);
                if freed > 0 {
                    *slot = Some(Body::Missing(
                        "dropped to keep the tab's bodies within max_tab_body_bytes",
                    ));
                    self.body_bytes -= freed;
                }
            }
        }
    }

    fn push_message(&mut self, mut message: Message) {
        message.seq = self.next_message;
        self.next_message += 1;
        if self.messages.len() >= self.limits.max_messages.max(1) {
            self.messages.pop_front();
        }
        self.messages.push_back(message);
    }

    fn note_frame(&mut self, frame: &str, url: &str) {
        if self.frames.len() >= FRAMES_KEPT && !self.frames.contains_key(frame) {
            self.frames.clear();
        }
        self.frames.insert(frame.to_string(), url.to_string());
    }

    pub(crate) fn frame_url(&self, frame: &str) -> Option<&str> {
        self.frames.get(frame).map(String::as_str)
    }

    pub(crate) fn exchanges(&self) -> impl DoubleEndedIterator<Item = &Exchange> {
        self.exchanges.iter()
    }

    pub(crate) fn messages(&self) -> impl DoubleEndedIterator<Item = &Message> {
        self.messages.iter()
    }

    /// Requests recorded since the tab opened, kept or not.
    pub(crate) fn recorded(&self) -> (u64, u64) {
        (self.next_exchange - 1, self.next_message - 1)
    }

    /// Bytes of bodies held now.
    #[cfg(test)]
    pub(crate) fn body_bytes(&self) -> usize {
        self.body_bytes
    }
}

/// Whether `text` matches `pattern`, where `*` stands for any run of characters.
pub fn glob_matches(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests;
