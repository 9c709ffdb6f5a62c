//! What webpilot and its PDF reader (`webpilot-pdf serve`) say to each other: a `Job` as a line
//! of JSON followed by the document's bytes, and an `Answer` as a line of JSON. A crate of its
//! own so that the service speaks it without building the reader's parser.

use serde::{Deserialize, Serialize};

/// One document's job: a line of JSON, then `bytes` bytes of PDF.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    /// Only the page count.
    #[serde(default)]
    pub pages_only: bool,
    /// Plain text instead of Markdown.
    #[serde(default)]
    pub text: bool,
    /// The content is the list of link targets, not the pages' text.
    #[serde(default)]
    pub links_only: bool,
    /// Also answer the link targets (for a crawl that follows them).
    #[serde(default)]
    pub with_links: bool,
    pub bytes: usize,
}

/// The answer for one document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    Document(Document),
    /// Its page count alone.
    Pages(usize),
    /// Encrypted with a password nobody gave.
    Encrypted,
    /// Not a PDF that parses, and why.
    Broken(String),
}

/// A read document.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Document {
    pub pages: usize,
    /// The Info dictionary's title, else the first heading.
    pub title: Option<String>,
    pub author: Option<String>,
    /// When it was made, as RFC 3339.
    pub created: Option<String>,
    /// No page has text (a scan): the content is empty, not lost.
    pub no_text_layer: bool,
    pub content: String,
    /// The link annotations' targets, once each (when asked for).
    pub links: Vec<String>,
}
