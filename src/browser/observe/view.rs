//! Reading a capture: requests as one compact line each (filtered), one request whole, the JSON
//! the page fetched, console messages, and the short account of what an action caused — all
//! with secrets hidden.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::redact::Redactor;
use super::{Body, Exchange, Message, MessageKind, Origin, TabLog};

/// How serious a console message is; a filter keeps this level and above.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Debug,
    Info,
    Warning,
    Error,
}

impl Level {
    fn word(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warning => "warning",
            Level::Error => "error",
        }
    }
}

/// Which answers a network read keeps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StatusFilter {
    /// `4xx`, `5xx`: the hundreds digit.
    Class(i64),
    /// No answer: a network error or a refusal.
    Failed,
    Code(i64),
}

impl StatusFilter {
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim().to_ascii_lowercase();
        if text == "failed" {
            return Some(Self::Failed);
        }
        if let Some(class) = text.strip_suffix("xx") {
            return class
                .parse()
                .ok()
                .filter(|c| (1..=5).contains(c))
                .map(Self::Class);
        }
        text.parse()
            .ok()
            .filter(|c| (100..=599).contains(c))
            .map(Self::Code)
    }

    fn keeps(self, exchange: &Exchange) -> bool {
        let status = exchange.answer.as_ref().map(|a| a.status);
        match self {
            Self::Failed => exchange.failure.is_some() && status.is_none(),
            Self::Class(class) => status.is_some_and(|s| s / 100 == class),
            Self::Code(code) => status == Some(code),
        }
    }
}

/// A network read's filters; `since` is the first sequence number kept.
#[derive(Debug, Clone, Default)]
pub struct NetworkQuery {
    /// A substring of the URL, or a glob (`*` for any run) when it has one.
    pub url: Option<String>,
    pub status: Option<StatusFilter>,
    pub kind: Option<String>,
    pub since: u64,
}

/// A console read's filters.
#[derive(Debug, Clone, Default)]
pub struct ConsoleQuery {
    pub level: Option<Level>,
    pub since: u64,
}

/// The requests a network read shows, one line each.
#[derive(Debug)]
pub struct NetworkList {
    pub lines: Vec<String>,
    /// Requests recorded on the tab so far (older ones beyond `[network] max_requests` are no
    /// longer kept).
    pub recorded: u64,
}

/// Console messages, one line each (stack lines indented below).
#[derive(Debug)]
pub struct MessageLine {
    pub lines: Vec<String>,
    pub recorded: u64,
}

/// What the page did during one action, for a trace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ActionLines {
    /// Requests, as `browser_read mode=network` lists them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<String>,
    /// How many requests there were (the list keeps the first ones).
    #[serde(default)]
    pub request_count: usize,
    /// Console messages and page errors, as `mode=console` lists them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub console: Vec<String>,
    #[serde(default)]
    pub console_count: usize,
}

/// What an action caused that went wrong: only there when something did.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct PageEvents {
    /// console.error calls and browser errors (CSP violations…).
    pub console_errors: usize,
    /// Uncaught exceptions and unhandled rejections.
    pub page_errors: usize,
    /// Requests answered 4xx/5xx or not at all.
    pub failed_requests: usize,
    /// The first of them, one line each (browser_read mode=network|console for all).
    pub first: Vec<String>,
}

/// One header as sent or received.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Header {
    pub name: String,
    pub value: String,
}

/// A body as a read describes it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct BodyView {
    /// Bytes in all (before any cut).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<usize>,
    /// Cut at `[network] max_body_bytes`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// The text (the response's is the read's `content` instead).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// A binary body is kept by its hash only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Why there is no body to show.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing: Option<String>,
}

/// One request whole (browser_read mode=network request=rN); the response body is the read's
/// content.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RequestDetail {
    pub id: String,
    pub method: String,
    pub url: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// Who sent it: page, frame <url>, worker <url>.
    pub by: String,
    pub status: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mime: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// Seconds since the epoch.
    pub started_at: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// Bytes on the wire, and after decoding.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encoded_bytes: Option<u64>,
    pub decoded_bytes: u64,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub from_cache: bool,
    /// The URLs that redirected here, in order, with their status.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub redirects: Vec<String>,
    pub request_headers: Vec<Header>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_body: Option<BodyView>,
    pub response_headers: Vec<Header>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_body: Option<BodyView>,
}

/// At most this many lines in `PageEvents::first`.
const FIRST_EVENTS: usize = 3;
/// A URL in a line is cut here.
const LINE_URL_CHARS: usize = 160;

impl TabLog {
    fn redactor(&self) -> Redactor<'_> {
        Redactor {
            on: self.limits().redact,
            secrets: self.secrets(),
        }
    }

    pub fn network(&self, query: &NetworkQuery) -> NetworkList {
        let lines = self
            .exchanges()
            .filter(|e| e.seq >= query.since && matches(e, query))
            .map(|e| self.exchange_line(e))
            .collect();
        NetworkList {
            lines,
            recorded: self.recorded().0,
        }
    }

    /// One compact line: `[r12] 500 POST /api/pay fetch 3.1 KB 212 ms`.
    pub(crate) fn exchange_line(&self, e: &Exchange) -> String {
        let redact = self.redactor();
        let outcome = match (&e.answer, &e.failure) {
            (_, Some(failure)) if e.canceled => format!("canceled ({failure})"),
            (_, Some(failure)) => format!("failed ({failure})"),
            (Some(answer), None) => answer.status.to_string(),
            (None, None) => "pending".to_string(),
        };
        let mut line = format!(
            "[r{}] {} {} {} {}",
            e.seq,
            outcome,
            e.method,
            shorten(&redact.url(&e.url)),
            e.kind
        );
        if e.answer.is_some() && e.finished {
            line.push_str(&format!(" {}", bytes(e.decoded_bytes)));
        }
        if let Some(ms) = e.duration_ms {
            line.push_str(&format!(" {} ms", ms.round() as u64));
        }
        if e.answer.as_ref().is_some_and(|a| a.from_cache) {
            line.push_str(" (cache)");
        }
        if let Some(first) = e.redirects.first() {
            line.push_str(&format!(
                " (redirected from {})",
                shorten(&redact.url(&first.url))
            ));
        }
        if e.origin != Origin::Page {
            line.push_str(&format!(" by {}", self.origin(&e.origin)));
        }
        line
    }

    fn origin(&self, origin: &Origin) -> String {
        match origin {
            Origin::Page => "page".to_string(),
            Origin::Frame(frame) => match self.frame_url(frame) {
                Some(url) => format!("frame {}", self.redactor().url(url)),
                None => "frame".to_string(),
            },
            Origin::Worker(url) => format!("worker {}", self.redactor().url(url)),
        }
    }

    /// The JSON answers of `fetch`/XHR requests the query keeps, parsed, one block each.
    pub fn fetched_json(&self, query: &NetworkQuery) -> Vec<String> {
        let redact = self.redactor();
        self.exchanges()
            .filter(|e| e.seq >= query.since && matches(e, query))
            .filter(|e| matches!(e.kind.as_str(), "fetch" | "xhr"))
            .filter_map(|e| {
                let Some(Body::Text {
                    text, truncated, ..
                }) = &e.body
                else {
                    return None;
                };
                let value: serde_json::Value = serde_json::from_str(text).ok()?;
                let status = e.answer.as_ref().map_or(0, |a| a.status);
                let cut = if *truncated { " (truncated)" } else { "" };
                Some(format!(
                    "[r{}] {} {} {status}{cut}\n{}",
                    e.seq,
                    e.method,
                    redact.url(&e.url),
                    redact.text(&value.to_string())
                ))
            })
            .collect()
    }

    /// One request whole, and its response body's text (empty when there is none).
    pub fn request_detail(&self, seq: u64) -> Option<(RequestDetail, String)> {
        let e = self.exchange(seq)?;
        let redact = self.redactor();
        let header_list = |headers: &[(String, String)]| {
            redact
                .headers(headers)
                .into_iter()
                .map(|(name, value)| Header { name, value })
                .collect::<Vec<_>>()
        };
        let content_type = header(&e.request_headers, "content-type").unwrap_or_default();
        let request_body = e.request_body.as_ref().map(|body| {
            let mut view = body_view(body);
            view.text = view.text.map(|text| redact.body(&text, content_type));
            view
        });
        let response_text = match &e.body {
            Some(Body::Text { text, .. }) => redact.text(text),
            _ => String::new(),
        };
        let detail = RequestDetail {
            id: format!("r{}", e.seq),
            method: e.method.clone(),
            url: redact.url(&e.url),
            kind: e.kind.clone(),
            by: self.origin(&e.origin),
            status: e.answer.as_ref().map(|a| a.status),
            status_text: e.answer.as_ref().map(|a| a.status_text.clone()),
            mime: e.answer.as_ref().map(|a| a.mime.clone()),
            failure: e.failure.clone(),
            started_at: e.started_at,
            duration_ms: e.duration_ms.map(|ms| ms.round() as u64),
            encoded_bytes: e.encoded_bytes,
            decoded_bytes: e.decoded_bytes,
            from_cache: e.answer.as_ref().is_some_and(|a| a.from_cache),
            redirects: e
                .redirects
                .iter()
                .map(|hop| format!("{} {}", hop.status, redact.url(&hop.url)))
                .collect(),
            request_headers: header_list(&e.request_headers),
            request_body,
            response_headers: e
                .answer
                .as_ref()
                .map(|a| header_list(&a.headers))
                .unwrap_or_default(),
            response_body: e.body.as_ref().map(|body| BodyView {
                text: None,
                ..body_view(body)
            }),
        };
        Some((detail, response_text))
    }

    pub fn console(&self, query: &ConsoleQuery) -> MessageLine {
        let redact = self.redactor();
        let lines = self
            .messages()
            .filter(|m| m.seq >= query.since && query.level.is_none_or(|level| m.level >= level))
            .map(|m| {
                let mut line = redact.text(&message_line(m));
                if let Some(stack) = &m.stack {
                    for frame in stack.lines() {
                        line.push_str(&format!("\n    {}", redact.text(frame)));
                    }
                }
                line
            })
            .collect();
        MessageLine {
            lines,
            recorded: self.recorded().1,
        }
    }

    /// Everything the page did since the last action started, a line each as the network and
    /// console modes write them; at most `max` of each (the first ones), with how many there
    /// were.
    pub fn since_action(&self, max: usize) -> ActionLines {
        let mark = self.marked();
        let own = |e: &&Exchange| !(e.kind == "other" && e.url.ends_with("/favicon.ico"));
        let exchanges: Vec<&Exchange> = self
            .exchanges()
            .filter(|e| e.seq >= mark.exchange)
            .filter(own)
            .collect();
        let redact = self.redactor();
        let messages: Vec<&Message> = self.messages().filter(|m| m.seq >= mark.message).collect();
        ActionLines {
            request_count: exchanges.len(),
            requests: exchanges
                .iter()
                .take(max)
                .map(|e| self.exchange_line(e))
                .collect(),
            console_count: messages.len(),
            console: messages
                .iter()
                .take(max)
                .map(|m| redact.text(&message_line(m)))
                .collect(),
        }
    }

    /// What went wrong since the last action started; `None` when nothing did.
    pub fn page_events(&self) -> Option<PageEvents> {
        let mark = self.marked();
        let mut events = PageEvents {
            console_errors: 0,
            page_errors: 0,
            failed_requests: 0,
            first: Vec::new(),
        };
        let redact = self.redactor();
        for message in self.messages().filter(|m| m.seq >= mark.message) {
            let counted = match message.kind {
                MessageKind::PageError => &mut events.page_errors,
                // Failed loads are counted as requests.
                MessageKind::Browser if message.category.as_deref() == Some("network") => continue,
                _ if message.level == Level::Error => &mut events.console_errors,
                _ => continue,
            };
            *counted += 1;
            if events.first.len() < FIRST_EVENTS {
                events.first.push(redact.text(&message_line(message)));
            }
        }
        // The browser asks for a favicon on its own; a site without one is not the page failing.
        let own = |e: &&Exchange| !(e.kind == "other" && e.url.ends_with("/favicon.ico"));
        for exchange in self
            .exchanges()
            .filter(|e| e.seq >= mark.exchange && e.failed())
            .filter(own)
        {
            events.failed_requests += 1;
            if events.first.len() < FIRST_EVENTS {
                events.first.push(self.exchange_line(exchange));
            }
        }
        (events.console_errors + events.page_errors + events.failed_requests > 0).then_some(events)
    }
}

fn message_line(m: &Message) -> String {
    let what = match m.kind {
        MessageKind::Console => m.level.word().to_string(),
        MessageKind::PageError => "page error".to_string(),
        MessageKind::Browser => format!(
            "{} ({})",
            m.level.word(),
            m.category.as_deref().unwrap_or("browser")
        ),
    };
    let mut line = format!("[c{}] {what}: {}", m.seq, m.text);
    if let Some(source) = &m.source {
        line.push_str(&format!(" — {}", shorten(source)));
    }
    if let Origin::Worker(url) = &m.origin {
        line.push_str(&format!(" (worker {})", shorten(url)));
    }
    line
}

fn matches(e: &Exchange, query: &NetworkQuery) -> bool {
    query.status.is_none_or(|status| status.keeps(e))
        && query
            .kind
            .as_deref()
            .is_none_or(|kind| e.kind.eq_ignore_ascii_case(kind))
        && query.url.as_deref().is_none_or(|pattern| {
            if pattern.contains('*') {
                super::glob_matches(pattern, &e.url)
            } else {
                e.url.contains(pattern)
            }
        })
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

fn body_view(body: &Body) -> BodyView {
    match body {
        Body::Text {
            text,
            size,
            truncated,
        } => BodyView {
            size: Some(*size),
            truncated: *truncated,
            text: Some(text.clone()),
            sha256: None,
            missing: None,
        },
        Body::Binary { size, sha256 } => BodyView {
            size: Some(*size),
            truncated: false,
            text: None,
            sha256: Some(sha256.clone()),
            missing: None,
        },
        Body::Missing(why) => BodyView {
            size: None,
            truncated: false,
            text: None,
            sha256: None,
            missing: Some((*why).to_string()),
        },
    }
}

/// `3.1 KB`, `812 B`, `2.4 MB`.
fn bytes(n: u64) -> String {
    match n {
        0..1024 => format!("{n} B"),
        1024..1_048_576 => format!("{:.1} KB", n as f64 / 1024.0),
        _ => format!("{:.1} MB", n as f64 / 1_048_576.0),
    }
}

fn shorten(text: &str) -> String {
    if text.chars().count() <= LINE_URL_CHARS {
        return text.to_string();
    }
    let kept: String = text.chars().take(LINE_URL_CHARS).collect();
    format!("{kept}…")
}
