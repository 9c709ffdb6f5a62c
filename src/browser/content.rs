//! Reading a tab's content: rendered HTML or text of the page, a subtree or one element, and
//! text search with each match's heading path and the refs of its section.
//!
//! Text, readable HTML and search include open (and, for scripts' own roots, closed) shadow
//! roots and same-origin frames in place, which the page agent walks; foreign frames leave a
//! mark that is replaced here by the frame's own content, labelled with its origin.

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::frames::Doc;
use super::tab::Tab;
use crate::error::{ToolError, ToolResult};
use crate::sync::Locked;

/// Which part of the page to read.
#[derive(Debug, Clone, Default)]
pub enum Scope {
    #[default]
    Page,
    Selector(String),
    Ref(u32),
}

/// The form of the content.
#[derive(Debug, Clone, Copy)]
pub enum Form {
    /// `outerHTML` of the rendered DOM (the top document, or the ref's own).
    Html,
    /// What a reader sees, like `innerText`, frames and shadow roots included.
    Text,
    /// HTML prepared for Markdown: scripts, styles, hidden parts and (with `main`) navigation
    /// chrome removed; links and images made absolute; frames and shadow roots included.
    Readable { main: bool },
    /// `outerHTML` as a reader extracts from it: the head whole, of the body only what a
    /// person can see (concealed text and elements left out, as the other reads leave them).
    Shown,
}

impl Form {
    /// The agent function reading an element in this form.
    fn reader(self) -> &'static str {
        match self {
            Form::Html => "((el) => el.outerHTML)",
            Form::Shown => "((el) => __wp.shownHtml(el))",
            Form::Text => "((el) => __wp.readText(el))",
            Form::Readable { main: true } => "((el) => __wp.readable(el, true))",
            Form::Readable { main: false } => "((el) => __wp.readable(el, false))",
        }
    }

    /// Whether the reading holds foreign frames' content (their marks filled in).
    fn has_frames(self) -> bool {
        matches!(self, Form::Text | Form::Readable { .. })
    }

    /// Where a reading of the whole document starts.
    fn page_root(self) -> &'static str {
        match self {
            Form::Text => BODY,
            _ => "document.documentElement",
        }
    }

    /// An expression reading `root` in this form: empty when there is no such node (a
    /// document without a body, or even a root element: an error page still loading, one a
    /// script emptied), never a script error.
    fn read_root(self, root: &str) -> String {
        format!(
            "(() => {{ const root = {root}; return root ? {}(root) : ''; }})()",
            self.reader()
        )
    }
}

/// A document's body, else its root element (a frameset, an SVG document).
const BODY: &str = "(document.body || document.documentElement)";

/// One text match found by `find`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct FindHit {
    pub context: String,
    /// Headings above the match, outermost first (a frame's continue its owner's path).
    #[serde(default)]
    pub section: Vec<String>,
    /// Refs of the elements holding the match, else the nearest before and after it within
    /// its section.
    pub refs: Vec<u32>,
    /// Origin of the foreign frame the match is in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frame: Option<String>,
}

impl FindHit {
    /// The compact one-line form, e.g. `§ Configuration › Ports: "…8080…" → refs [12]`.
    pub fn line(&self) -> String {
        let mut line = String::new();
        if !self.section.is_empty() {
            line.push_str(&format!("§ {}: ", self.section.join(" › ")));
        }
        line.push_str(&format!("{:?} → refs {:?}", self.context, self.refs));
        if let Some(frame) = &self.frame {
            line.push_str(&format!(" (in frame {frame})"));
        }
        line
    }
}

/// What the agent's `find` returns for one document.
#[derive(Debug, Deserialize)]
struct DocFind {
    hits: Vec<FindHit>,
    #[serde(default)]
    frames: Vec<FindMark>,
}

/// A foreign frame's place among a document's matches, with the heading path there.
#[derive(Debug, Deserialize)]
struct FindMark {
    key: String,
    at: usize,
    #[serde(default)]
    section: Vec<String>,
}

/// A foreign frame's reading: its origin and content (with marks of its own frames).
#[derive(Debug, Deserialize)]
struct FrameReading {
    origin: String,
    content: Option<String>,
    #[serde(default)]
    concealed: Concealed,
}

/// A whole page's reading, with what it left out.
#[derive(Deserialize)]
struct PageReading {
    content: Option<String>,
    #[serde(default)]
    concealed: Concealed,
}

/// What a read left out because a person cannot see it (hidden, tiny, the colour of its
/// background, clipped or off the page: text, and links, images, controls and frames whole),
/// and what of it reads like instructions to a model.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Concealed {
    /// Characters of text left out, plus one per element.
    pub dropped: usize,
    #[serde(default)]
    pub warnings: Vec<PageWarning>,
}

/// Page text that talks to a model rather than to its reader.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct PageWarning {
    /// `instructions_in_page`.
    pub kind: String,
    pub excerpt: String,
    /// `visible`, or `hidden: <how>` (left out of the content).
    #[serde(rename = "where")]
    pub place: String,
}

impl Concealed {
    fn add(&mut self, other: Concealed) {
        self.dropped += other.dropped;
        self.warnings.extend(other.warnings);
        self.warnings.truncate(MAX_WARNINGS);
    }
}

/// Most warnings one read carries.
const MAX_WARNINGS: usize = 5;

/// Marks the agent leaves where a foreign frame's text or HTML goes.
const TEXT_MARK: (&str, &str) = ("\u{E000}", "\u{E001}");
const HTML_MARK: (&str, &str) = ("<wp-frame data-key=\"", "\"></wp-frame>");

impl Tab {
    /// The rendered HTML or text of the page, a subtree matching a selector, or one element.
    pub async fn content(&self, scope: &Scope, form: Form) -> ToolResult<String> {
        let read = form.reader();
        if form.has_frames() {
            self.tag_foreign_frames(&Doc::Top).await;
        }
        let value = match scope {
            Scope::Ref(ref_id) => self.on_element(*ref_id, read).await?,
            Scope::Page if !matches!(form, Form::Html) => {
                // The read and what it left out, in one round trip.
                let call = format!(
                    "({{ content: {}, concealed: __wp.concealedReport() }})",
                    form.read_root(form.page_root())
                );
                let reading: PageReading = self.agent_call(&Doc::Top, &call).await?;
                *self.concealed.locked() = reading.concealed;
                serde_json::Value::String(reading.content.unwrap_or_default())
            }
            Scope::Page => {
                let call = form.read_root(form.page_root());
                self.agent_call(&Doc::Top, &call).await?
            }
            Scope::Selector(selector) => {
                let call = format!(
                    "(() => {{ const el = document.querySelector({}); return el ? {read}(el) : null; }})()",
                    serde_json::to_string(selector).unwrap_or_default()
                );
                let value: serde_json::Value = self
                    .agent_call(&Doc::Top, &call)
                    .await
                    .map_err(|_| bad_selector(selector))?;
                if value.is_null() {
                    return Err(bad_selector(selector));
                }
                value
            }
        };
        let text = value.as_str().unwrap_or_default().to_string();
        if !matches!(form, Form::Html) && !matches!(scope, Scope::Page) {
            let top: Concealed = self
                .agent_call(&Doc::Top, "__wp.concealedReport()")
                .await
                .unwrap_or_default();
            *self.concealed.locked() = top;
        }
        Ok(self.fill_frames(text, form, 0).await)
    }

    /// What the latest content read left out as concealed (its frames' too), taken.
    pub fn take_concealed(&self) -> Concealed {
        std::mem::take(&mut *self.concealed.locked())
    }

    /// Replaces each foreign frame's mark in `text` with the frame's own content.
    fn fill_frames(&self, text: String, form: Form, depth: usize) -> BoxFuture<'_, String> {
        Box::pin(async move {
            let (open, close) = match form {
                Form::Html | Form::Shown => return text,
                Form::Text => TEXT_MARK,
                Form::Readable { .. } => HTML_MARK,
            };
            let mut filled = String::with_capacity(text.len());
            let mut rest = text.as_str();
            while let Some(start) = rest.find(open) {
                filled.push_str(&rest[..start]);
                let after = &rest[start + open.len()..];
                let Some(end) = after.find(close) else {
                    rest = after;
                    break;
                };
                filled.push_str(&self.frame_content(&after[..end], form, depth).await);
                rest = &after[end + close.len()..];
            }
            filled.push_str(rest);
            filled
        })
    }

    /// A foreign frame's whole content in `form`, labelled with its origin; empty when the
    /// frame is gone or shows nothing.
    async fn frame_content(&self, key: &str, form: Form, depth: usize) -> String {
        let Some(doc) = self.descend(key, depth).await else {
            return String::new();
        };
        // A frame is read whole: "main content" is the top document's notion.
        let form = match form {
            Form::Readable { .. } => Form::Readable { main: false },
            other => other,
        };
        let call = format!(
            "({{ origin: location.origin, content: {}, concealed: __wp.concealedReport() }})",
            form.read_root(BODY)
        );
        let Ok(reading) = self.agent_call::<FrameReading>(&doc, &call).await else {
            return String::new();
        };
        self.concealed.locked().add(reading.concealed);
        let content = self
            .fill_frames(reading.content.unwrap_or_default(), form, depth + 1)
            .await;
        if content.trim().is_empty() {
            return String::new();
        }
        let origin = &reading.origin;
        match form {
            Form::Text => format!("\n[frame {origin}]\n{content}\n[end of frame]\n"),
            _ => format!(
                "<section><p><em>frame {origin}</em></p>{content}<p><em>end of frame</em></p></section>"
            ),
        }
    }

    /// Up to `limit` matches of `query` (case-insensitive) in document order, frames included,
    /// each with its heading path and the refs of its section. Numbers elements first so
    /// every hit can name its neighbours.
    pub async fn find(&mut self, query: &str, limit: usize) -> ToolResult<Vec<FindHit>> {
        self.elements(None).await?;
        let call = format!(
            "__wp.find({}, {limit})",
            serde_json::to_string(query).unwrap_or_default()
        );
        let top: DocFind = self.agent_call(&Doc::Top, &call).await?;
        let mut hits = Vec::new();
        self.gather_hits(top, &call, &[], None, &mut hits, 0).await;
        hits.truncate(limit);
        Ok(hits)
    }

    /// Adds a document's matches to `out`, each foreign frame's at its mark, under `prefix`.
    fn gather_hits<'a>(
        &'a self,
        found: DocFind,
        call: &'a str,
        prefix: &'a [String],
        origin: Option<&'a str>,
        out: &'a mut Vec<FindHit>,
        depth: usize,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let mut marks = found.frames.into_iter().peekable();
            for (index, mut hit) in found.hits.into_iter().enumerate() {
                while let Some(mark) = marks.next_if(|m| m.at <= index) {
                    self.frame_hits(mark, call, prefix, out, depth).await;
                }
                hit.section.splice(0..0, prefix.iter().cloned());
                hit.frame = origin.map(str::to_string);
                out.push(hit);
            }
            for mark in marks {
                self.frame_hits(mark, call, prefix, out, depth).await;
            }
        })
    }

    async fn frame_hits(
        &self,
        mark: FindMark,
        call: &str,
        prefix: &[String],
        out: &mut Vec<FindHit>,
        depth: usize,
    ) {
        let Some(doc) = self.descend(&mark.key, depth).await else {
            return;
        };
        let with_origin = format!("({{ origin: location.origin, found: {call} }})");
        #[derive(Deserialize)]
        struct Found {
            origin: String,
            found: DocFind,
        }
        let Ok(reading) = self.agent_call::<Found>(&doc, &with_origin).await else {
            return;
        };
        let path: Vec<String> = prefix.iter().cloned().chain(mark.section).collect();
        self.gather_hits(
            reading.found,
            call,
            &path,
            Some(&reading.origin),
            out,
            depth + 1,
        )
        .await;
    }
}

/// Which of the page conditions fail: `text` must be shown, `selector` must match, `not_text`
/// must not be shown. Each failure is described in words.
const CONDITIONS_JS: &str = r#"(c) => {
  const shown = (t) => window.__wp ? __wp.hasText(t) : !!(document.body && document.body.innerText.includes(t));
  const failed = [];
  if (c.text && !shown(c.text)) failed.push('text ' + JSON.stringify(c.text) + ' not found');
  if (c.selector) {
    let hit = null;
    try { hit = document.querySelector(c.selector); } catch (e) { hit = null; }
    if (!hit) failed.push('selector ' + JSON.stringify(c.selector) + ' not found');
  }
  if (c.notText && shown(c.notText)) failed.push('found ' + JSON.stringify(c.notText));
  return failed;
}"#;

impl Tab {
    /// The conditions that do not hold on the current page (empty when all hold).
    pub async fn unmet_conditions(
        &self,
        text: Option<&str>,
        selector: Option<&str>,
        not_text: Option<&str>,
    ) -> ToolResult<Vec<String>> {
        let conditions =
            serde_json::json!({ "text": text, "selector": selector, "notText": not_text });
        let value = self
            .evaluate_raw(&format!("({CONDITIONS_JS})({conditions})"))
            .await?;
        Ok(serde_json::from_value(value).unwrap_or_default())
    }
}

fn bad_selector(selector: &str) -> ToolError {
    ToolError::invalid(format!(
        "selector {selector:?} is not valid CSS or matches no element"
    ))
    .with_hint("check the selector, or read the whole page")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_lines_name_the_section_and_frame() {
        let hit = FindHit {
            context: "listens on 8080".into(),
            section: vec!["Configuration".into(), "Ports".into()],
            refs: vec![12],
            frame: Some("http://localhost:9".into()),
        };
        assert_eq!(
            hit.line(),
            "§ Configuration › Ports: \"listens on 8080\" → refs [12] (in frame http://localhost:9)"
        );
        let plain = FindHit {
            context: "x".into(),
            section: Vec::new(),
            refs: vec![],
            frame: None,
        };
        assert_eq!(plain.line(), "\"x\" → refs []");
    }
}
