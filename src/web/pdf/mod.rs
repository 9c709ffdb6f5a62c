//! PDF documents read like pages, by webpilot's PDF reader (`crates/pdf`, the `webpilot-pdf`
//! program): Markdown per page with `<!-- page N -->` markers, the document's metadata, its link
//! annotations for `extract=links`, and a clear answer for what cannot be read (encrypted, no
//! text layer, broken).
//!
//! The reader runs as a process of its own (`reader.rs`), under limits on memory and CPU, kept
//! for a few documents and killed when its caller stops waiting: a PDF is whatever a stranger's
//! server sent, and a parser that loops or eats memory on one must not stay inside the service.

mod reader;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::documents::Authorship;
use super::extract::{ExtractKind, Extracted, TextFormat};
use crate::error::{ErrorCode, ToolError, ToolResult};
use reader::{Answer, Document, Job};

/// Longest a page count may take (it parses the page tree only).
const PAGE_COUNT_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// What is known of a PDF document.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PdfInfo {
    pub pages: usize,
    #[serde(flatten)]
    pub made: Authorship,
    /// No page has text (a scan): the content is empty, not lost.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_text_layer: bool,
    /// The URLs its link annotations lead to (when asked for, for a crawl that follows them).
    #[serde(skip)]
    #[schemars(skip)]
    pub links: Vec<String>,
}

/// Whether a response is a PDF: by its media type, or by the `%PDF-` header the format puts in
/// its first kilobyte.
pub fn is_pdf(mime: &str, body: &[u8]) -> bool {
    let declared_text = mime.starts_with("text/")
        || ["html", "xml", "json", "javascript"]
            .iter()
            .any(|kind| mime.contains(kind));
    matches!(mime, "application/pdf" | "application/x-pdf")
        || (!declared_text
            && body[..body.len().min(1024)]
                .windows(5)
                .any(|window| window == b"%PDF-"))
}

/// The pages of a PDF, if it parses within `PAGE_COUNT_LIMIT` (and the reader is there).
pub async fn page_count(bytes: Vec<u8>) -> Option<usize> {
    let job = Job {
        pages_only: true,
        ..Job::default()
    };
    let counting = reader::ask(job, bytes);
    match tokio::time::timeout(PAGE_COUNT_LIMIT, counting)
        .await
        .ok()?
        .ok()?
    {
        Answer::Pages(pages) => Some(pages),
        _ => None,
    }
}

/// Reads a PDF as `kind` in `format`. Dropping the future kills the reader.
pub async fn read(
    bytes: Vec<u8>,
    kind: ExtractKind,
    format: TextFormat,
    with_links: bool,
) -> ToolResult<(Extracted, PdfInfo)> {
    let job = Job {
        text: format == TextFormat::Text,
        links_only: kind == ExtractKind::Links,
        with_links,
        ..Job::default()
    };
    match reader::ask(job, bytes).await? {
        Answer::Document(document) => Ok(read_as_page(document)),
        Answer::Encrypted => Err(ToolError::new(
            ErrorCode::Upstream,
            "the PDF is encrypted with a password; its text cannot be read",
        )
        .with_hint(
            "download it (browser_interact action=download) and open it where the password is known",
        )),
        Answer::Broken(why) => Err(broken(&why)),
        Answer::Pages(_) => Err(ToolError::internal("the PDF reader answered a page count")),
    }
}

fn read_as_page(document: Document) -> (Extracted, PdfInfo) {
    let extracted = Extracted {
        title: document.title.clone().unwrap_or_default(),
        content: document.content,
        ..Extracted::default()
    };
    let info = PdfInfo {
        pages: document.pages,
        made: Authorship {
            title: document.title,
            author: document.author,
            created: document.created,
        },
        no_text_layer: document.no_text_layer,
        links: document.links,
    };
    (extracted, info)
}

fn broken(why: &str) -> ToolError {
    ToolError::new(
        ErrorCode::Upstream,
        format!("the response is a PDF that cannot be read: {why}"),
    )
    .with_hint("the file is damaged or incomplete; download it with browser_interact action=download to keep the bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pdfs_are_known_by_type_or_header() {
        assert!(is_pdf("application/pdf", b""));
        assert!(is_pdf("application/octet-stream", b"\n%PDF-1.7\n"));
        assert!(!is_pdf("text/html", b"<html>"));
        assert!(!is_pdf("text/html", b"<p>a %PDF-1.7 header</p>"));
    }
}
