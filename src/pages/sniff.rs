//! What a response is — a page, plain text, or something no reader can use — by its media type,
//! or by its first bytes when the server did not say.

use url::Url;

use crate::error::{ErrorCode, ToolError};

pub(super) enum ContentClass {
    Html,
    Text,
    Binary,
}

/// What a response is, by its media type, or by sniffing when the server did not say.
pub(super) fn content_class(mime: &str, body: &[u8]) -> ContentClass {
    match mime {
        "text/html" | "application/xhtml+xml" => ContentClass::Html,
        "" => {
            let start = String::from_utf8_lossy(&body[..body.len().min(512)]).to_ascii_lowercase();
            if start.contains("<html") || start.contains("<!doctype html") {
                ContentClass::Html
            } else if body.iter().take(1024).any(|&b| b == 0) {
                ContentClass::Binary
            } else {
                ContentClass::Text
            }
        }
        text if text.starts_with("text/")
            || text.ends_with("json")
            || text.ends_with("+xml")
            || text == "application/xml"
            || text == "application/javascript" =>
        {
            ContentClass::Text
        }
        _ => ContentClass::Binary,
    }
}

/// The error for a response that is not a page: what it is, and where to open it instead.
pub(super) fn not_a_page(url: &Url, mime: &str) -> ToolError {
    let what = match mime {
        "application/pdf" => "a PDF document",
        m if m.starts_with("image/") => "an image",
        m if m.starts_with("video/") || m.starts_with("audio/") => "media",
        _ => "binary data",
    };
    ToolError::new(
        ErrorCode::Upstream,
        format!("{url} is {what} ({mime}), not a web page; open_web_page reads HTML and text"),
    )
    .with_hint("open it with browser_navigate to view or download it")
}
