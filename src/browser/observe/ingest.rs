//! CDP's network, runtime and log events turned into a tab's records, from whichever target
//! reports them (the tab's page, an out-of-process frame, a worker), and the bodies fetched
//! once a response has loaded.

use std::sync::{Arc, Mutex};

use base64::Engine;
use chromiumoxide::cdp::browser_protocol::log::LogEntry;
use chromiumoxide::cdp::browser_protocol::network::{
    EventDataReceived, EventEventSourceMessageReceived, EventLoadingFailed, EventLoadingFinished,
    EventRequestWillBeSent, EventResponseReceived, GetResponseBodyParams, Headers, RequestId,
    ResourceTiming, ResourceType, Response,
};
use chromiumoxide::cdp::js_protocol::runtime::{
    ConsoleApiCalledType, EventConsoleApiCalled, EventExceptionThrown, RemoteObject, StackTrace,
};
use sha2::{Digest, Sha256};

use super::view::Level;
use super::{Answer, Body, Exchange, Hop, Message, MessageKind, Origin, TabLog};
use crate::browser::link::CdpTarget;
use crate::egress::Lane;
use crate::sync::Locked;

/// A message's text is cut here; a stack keeps this many lines.
const MESSAGE_CHARS: usize = 2000;
const STACK_LINES: usize = 8;

/// A body to fetch once its response has loaded: which request, and where to ask.
pub(crate) struct BodyToFetch {
    seq: u64,
    request: RequestId,
}

impl BodyToFetch {
    #[cfg(test)]
    pub(crate) fn seq(&self) -> u64 {
        self.seq
    }
}

impl TabLog {
    /// A request was sent (or redirected: the same request goes on to a new URL).
    pub(crate) fn request_sent(
        &mut self,
        key: &str,
        event: &EventRequestWillBeSent,
        origin: Origin,
    ) {
        if !self.enabled() || event.request.url.starts_with("data:") {
            return;
        }
        let kind = event.r#type.as_ref().map_or("other", resource_kind);
        if kind == "document"
            && let Some(frame) = &event.frame_id
        {
            self.note_frame(frame.inner(), &event.request.url);
        }
        if let Some(redirect) = &event.redirect_response
            && let Some(exchange) = self.exchange_mut(key)
        {
            exchange.redirects.push(Hop {
                url: exchange.url.clone(),
                status: redirect.status,
            });
            exchange.url = event.request.url.clone();
            exchange.method = event.request.method.clone();
            exchange.request_headers = headers(&event.request.headers);
            return;
        }
        let request_body = post_data(event, self.limits().max_body_bytes);
        let seq = self.push_exchange(Exchange {
            seq: 0,
            key: key.to_string(),
            method: event.request.method.clone(),
            url: event.request.url.clone(),
            kind: kind.to_string(),
            origin,
            started_at: *event.wall_time.inner(),
            started_clock: *event.timestamp.inner(),
            duration_ms: None,
            request_headers: headers(&event.request.headers),
            request_body: None,
            answer: None,
            body: None,
            decoded_bytes: 0,
            encoded_bytes: None,
            redirects: Vec::new(),
            failure: None,
            canceled: false,
            finished: false,
        });
        if let Some(body) = request_body {
            self.keep_body(seq, body, true);
        }
    }

    pub(crate) fn response_received(&mut self, key: &str, event: &EventResponseReceived) {
        if let Some(exchange) = self.exchange_mut(key) {
            exchange.answer = Some(answer(&event.response));
            exchange.kind = resource_kind(&event.r#type).to_string();
        }
    }

    pub(crate) fn data_received(&mut self, key: &str, event: &EventDataReceived) {
        if let Some(exchange) = self.exchange_mut(key) {
            exchange.decoded_bytes += u64::try_from(event.data_length).unwrap_or(0);
        }
    }

    /// An event stream's message: its body grows by one `data:` block.
    pub(crate) fn event_source_message(
        &mut self,
        key: &str,
        event: &EventEventSourceMessageReceived,
    ) {
        let limit = self.limits().max_body_bytes;
        let Some(exchange) = self.exchange_mut(key) else {
            return;
        };
        let seq = exchange.seq;
        let mut text = match exchange.body.take() {
            Some(Body::Text { text, .. }) => text,
            _ => String::new(),
        };
        if !event.event_name.is_empty() && event.event_name != "message" {
            text.push_str(&format!("event: {}\n", event.event_name));
        }
        text.push_str(&format!("data: {}\n\n", event.data));
        self.keep_body(seq, cut(text, limit), false);
    }

    /// The response has loaded: returns the body to fetch, if this kind keeps one.
    pub(crate) fn loading_finished(
        &mut self,
        key: &str,
        event: &EventLoadingFinished,
    ) -> Option<BodyToFetch> {
        let limit = self.limits().max_body_bytes;
        let exchange = self.exchange_mut(key)?;
        exchange.finished = true;
        exchange.encoded_bytes = Some(event.encoded_data_length as u64);
        exchange.duration_ms = Some((event.timestamp.inner() - exchange.started_clock) * 1000.0);
        if !matches!(exchange.kind.as_str(), "document" | "fetch" | "xhr") {
            return None;
        }
        // A body far past the cap is not worth moving over CDP only to be cut.
        if exchange.decoded_bytes as usize > limit.saturating_mul(8) {
            exchange.body = Some(Body::Missing("larger than max_body_bytes"));
            return None;
        }
        Some(BodyToFetch {
            seq: exchange.seq,
            request: RequestId::new(key.rsplit('/').next().unwrap_or(key)),
        })
    }

    /// The request failed: the browser's error, or what the session's egress lane knows about
    /// the connection (the URL policy's refusal and its reason, nothing listening…).
    pub(crate) fn loading_failed(
        &mut self,
        key: &str,
        event: &EventLoadingFailed,
        lane: Option<&Lane>,
    ) {
        let Some(exchange) = self.exchange_mut(key) else {
            return;
        };
        exchange.finished = true;
        exchange.duration_ms = Some((event.timestamp.inner() - exchange.started_clock) * 1000.0);
        exchange.canceled = event.canceled.unwrap_or(false);
        let url = url::Url::parse(&exchange.url).ok();
        let known = url.as_ref().and_then(|url| {
            let (host, port) = (url.host_str()?, url.port_or_known_default()?);
            let failure = lane?.failure(host, port)?;
            Some(match failure.navigation_error(&format!("{host}:{port}")) {
                Ok(refusal) => format!("blocked by the URL policy: {}", refusal.message),
                Err(error) => error,
            })
        });
        let blocked = event
            .blocked_reason
            .as_ref()
            .map(|reason| format!(" (blocked: {})", reason.as_ref()))
            .unwrap_or_default();
        exchange.failure = Some(known.unwrap_or_else(|| format!("{}{blocked}", event.error_text)));
    }

    /// A `console.*` call.
    pub(crate) fn console_called(&mut self, event: &EventConsoleApiCalled, origin: Origin) {
        if !self.enabled() {
            return;
        }
        let level = match event.r#type {
            ConsoleApiCalledType::Error | ConsoleApiCalledType::Assert => Level::Error,
            ConsoleApiCalledType::Warning => Level::Warning,
            ConsoleApiCalledType::Debug => Level::Debug,
            _ => Level::Info,
        };
        let text: Vec<String> = event.args.iter().map(rendered).collect();
        self.push_message(Message {
            seq: 0,
            kind: MessageKind::Console,
            level,
            text: clip(&text.join(" ")),
            source: event.stack_trace.as_ref().and_then(top_frame),
            stack: None,
            category: None,
            origin,
        });
    }

    /// An uncaught exception or an unhandled rejection.
    pub(crate) fn exception_thrown(&mut self, event: &EventExceptionThrown, origin: Origin) {
        if !self.enabled() {
            return;
        }
        let details = &event.exception_details;
        let description = details.exception.as_ref().and_then(|e| {
            e.description
                .clone()
                .or_else(|| e.value.as_ref().map(|v| v.to_string()))
        });
        let (first, stack) = match description {
            Some(description) => {
                let mut lines = description.lines();
                let first = lines.next().unwrap_or_default().to_string();
                let stack: Vec<&str> = lines.take(STACK_LINES).map(str::trim).collect();
                (first, (!stack.is_empty()).then(|| stack.join("\n")))
            }
            None => (String::new(), None),
        };
        // "Uncaught" or "Uncaught (in promise)", then the error itself.
        let text = [details.text.as_str(), first.as_str()]
            .iter()
            .filter(|part| !part.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(" ");
        let source = details
            .url
            .as_ref()
            .map(|url| format!("{url}:{}", details.line_number + 1))
            .or_else(|| details.stack_trace.as_ref().and_then(top_frame));
        self.push_message(Message {
            seq: 0,
            kind: MessageKind::PageError,
            level: Level::Error,
            text: clip(&text),
            source,
            stack,
            category: None,
            origin,
        });
    }

    /// An entry of the browser's log (CSP violations, interventions, failed loads).
    pub(crate) fn log_entry(&mut self, entry: &LogEntry, origin: Origin) {
        if !self.enabled() {
            return;
        }
        let level = match entry.level.as_ref() {
            "error" => Level::Error,
            "warning" => Level::Warning,
            "verbose" => Level::Debug,
            _ => Level::Info,
        };
        let source = entry.url.as_ref().map(|url| match entry.line_number {
            Some(line) => format!("{url}:{}", line + 1),
            None => url.clone(),
        });
        self.push_message(Message {
            seq: 0,
            kind: MessageKind::Browser,
            level,
            text: clip(&entry.text),
            source,
            stack: None,
            category: Some(entry.source.as_ref().to_string()),
            origin,
        });
    }
}

/// Fetches a loaded response's body from the target that loaded it and keeps it.
pub(crate) async fn fetch_body(
    target: CdpTarget,
    capture: Arc<Mutex<TabLog>>,
    wanted: BodyToFetch,
) {
    let limit = capture.locked().limits().max_body_bytes;
    let fetched = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        target.send(GetResponseBodyParams::new(wanted.request)),
    )
    .await;
    let body = match fetched {
        Ok(Ok(answer)) if answer.base64_encoded => {
            match base64::engine::general_purpose::STANDARD.decode(answer.body.as_bytes()) {
                Ok(bytes) => bytes_body(bytes, limit),
                Err(_) => Body::Missing("the browser sent a body that is not base64"),
            }
        }
        Ok(Ok(answer)) => cut(answer.body, limit),
        // Redirects, 204s and bodies the browser no longer holds (the page went away).
        _ => Body::Missing("the browser no longer holds it"),
    };
    capture.locked().keep_body(wanted.seq, body, false);
}

/// Bytes as text when they are UTF-8, else by size and hash.
fn bytes_body(bytes: Vec<u8>, limit: usize) -> Body {
    match String::from_utf8(bytes) {
        Ok(text) => cut(text, limit),
        Err(error) => {
            let bytes = error.into_bytes();
            Body::Binary {
                size: bytes.len(),
                sha256: data_encoding::HEXLOWER.encode(&Sha256::digest(&bytes)),
            }
        }
    }
}

/// Text cut at `limit` bytes (on a character boundary).
fn cut(mut text: String, limit: usize) -> Body {
    let size = text.len();
    let truncated = size > limit;
    if truncated {
        let mut end = limit;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    Body::Text {
        text,
        size,
        truncated,
    }
}

/// A request's own data (a form's fields, a `fetch` body), when the browser sent it along.
fn post_data(event: &EventRequestWillBeSent, limit: usize) -> Option<Body> {
    let entries = event.request.post_data_entries.as_ref()?;
    let mut bytes = Vec::new();
    for entry in entries {
        let chunk = entry.bytes.as_ref()?;
        bytes.extend(
            base64::engine::general_purpose::STANDARD
                .decode(AsRef::<str>::as_ref(chunk))
                .ok()?,
        );
    }
    Some(bytes_body(bytes, limit))
}

fn answer(response: &Response) -> Answer {
    Answer {
        status: response.status,
        status_text: response.status_text.clone(),
        mime: response.mime_type.clone(),
        headers: headers(&response.headers),
        protocol: response.protocol.clone(),
        remote: response
            .remote_ip_address
            .as_ref()
            .map(|ip| match response.remote_port {
                Some(port) => format!("{ip}:{port}"),
                None => ip.clone(),
            }),
        from_cache: response.from_disk_cache.unwrap_or(false)
            || response.from_prefetch_cache.unwrap_or(false)
            || response.from_service_worker.unwrap_or(false),
        phases: response.timing.as_ref().map_or([-1.0; 6], phases),
    }
}

/// HAR's phases from CDP's timing (offsets in ms from `request_time`; -1 where absent).
fn phases(timing: &ResourceTiming) -> [f64; 6] {
    let span = |start: f64, end: f64| {
        if start >= 0.0 && end >= start {
            end - start
        } else {
            -1.0
        }
    };
    let first = [timing.dns_start, timing.connect_start, timing.send_start]
        .into_iter()
        .find(|t| *t >= 0.0)
        .unwrap_or(0.0);
    [
        first.max(0.0),
        span(timing.dns_start, timing.dns_end),
        span(timing.connect_start, timing.connect_end),
        span(timing.ssl_start, timing.ssl_end),
        span(timing.send_start, timing.send_end),
        span(timing.send_end, timing.receive_headers_end),
    ]
}

/// Header pairs in the order the browser gave them.
fn headers(headers: &Headers) -> Vec<(String, String)> {
    match headers.inner() {
        serde_json::Value::Object(map) => map
            .iter()
            .flat_map(|(name, value)| {
                let value = value
                    .as_str()
                    .map_or_else(|| value.to_string(), str::to_string);
                // Repeated headers (Set-Cookie) arrive joined by newlines.
                value
                    .split('\n')
                    .map(|one| (name.clone(), one.to_string()))
                    .collect::<Vec<_>>()
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn resource_kind(kind: &ResourceType) -> &'static str {
    match kind {
        ResourceType::Document => "document",
        ResourceType::Stylesheet => "stylesheet",
        ResourceType::Image => "image",
        ResourceType::Media => "media",
        ResourceType::Font => "font",
        ResourceType::Script => "script",
        ResourceType::Xhr => "xhr",
        ResourceType::Fetch => "fetch",
        ResourceType::EventSource => "eventsource",
        ResourceType::WebSocket => "websocket",
        ResourceType::Manifest => "manifest",
        ResourceType::Ping => "ping",
        ResourceType::Preflight => "preflight",
        ResourceType::Prefetch => "prefetch",
        _ => "other",
    }
}

/// A console argument as DevTools prints it, roughly: strings bare, values as JSON, objects by
/// their description.
fn rendered(arg: &RemoteObject) -> String {
    match &arg.value {
        Some(serde_json::Value::String(text)) => text.clone(),
        Some(value) => value.to_string(),
        None => arg
            .unserializable_value
            .as_ref()
            .map(|v| v.inner().clone())
            .or_else(|| arg.description.clone())
            .unwrap_or_else(|| arg.r#type.as_ref().to_string()),
    }
}

fn top_frame(stack: &StackTrace) -> Option<String> {
    let frame = stack.call_frames.first()?;
    Some(format!("{}:{}", frame.url, frame.line_number + 1))
}

fn clip(text: &str) -> String {
    if text.chars().count() <= MESSAGE_CHARS {
        return text.to_string();
    }
    let kept: String = text.chars().take(MESSAGE_CHARS).collect();
    format!("{kept}…")
}
