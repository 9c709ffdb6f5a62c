//! The element list: numbered interactive elements of a tab, and resolving those numbers (refs)
//! back to elements.
//!
//! Invariant: a ref is never reused for a different element within a tab. Numbers keep growing
//! across documents, so a ref from an earlier document is recognised (`STALE_REF`) instead of
//! hitting whatever now carries that number.

use std::collections::{HashMap, HashSet};

use chromiumoxide::cdp::browser_protocol::page::FrameId;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use super::frames::Doc;
use super::tab::{AGENT_JS, Tab};
use crate::error::{ErrorCode, ToolError, ToolResult};

/// Ref numbering state of one tab.
#[derive(Debug)]
pub(crate) struct RefBook {
    /// The next number to hand out; anything at or above it was never issued.
    next: u32,
    /// Refs issued inside foreign frames, and the frame (its key) that owns each.
    frame_refs: HashMap<u32, String>,
    /// The latest full element list by ref, to tell what an action added, changed or removed,
    /// and what a scroll brought into view.
    last_listed: HashMap<u32, Listed>,
}

/// How an element was last listed.
#[derive(Debug, PartialEq)]
struct Listed {
    line: String,
    offscreen: bool,
}

impl Default for RefBook {
    fn default() -> Self {
        Self {
            next: 1,
            frame_refs: HashMap::new(),
            last_listed: HashMap::new(),
        }
    }
}

impl RefBook {
    /// The foreign frames (by key) whose elements hold refs.
    pub(crate) fn frame_keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.frame_refs.values().cloned().collect();
        keys.sort();
        keys.dedup();
        keys
    }
}

/// One interactive element as listed to agents.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Element {
    #[serde(rename = "ref")]
    pub ref_id: u32,
    pub role: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub href: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "type")]
    pub input_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expanded: Option<bool>,
    #[serde(default)]
    pub disabled: bool,
    #[serde(default)]
    pub required: bool,
    #[serde(default)]
    pub readonly: bool,
    /// Marked invalid (`aria-invalid`), or failing its constraints once a person edited it or
    /// the form was submitted (`:user-invalid`).
    #[serde(default)]
    pub invalid: bool,
    /// Its description, or when invalid its error message (`aria-describedby`,
    /// `aria-errormessage`, else the browser's validation message), shortened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Outside the viewport (scroll to reach it).
    #[serde(default)]
    pub offscreen: bool,
    /// CSS pixel box `[x, y, width, height]` in the top viewport.
    #[serde(default, rename = "box", skip_serializing_if = "Option::is_none")]
    pub bounds: Option<[f64; 4]>,
    /// Origin of the foreign (cross-origin) frame holding the element.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frame: Option<String>,
}

impl Element {
    /// The compact one-line form, e.g. `[14] link "Docs" → /docs`.
    pub fn line(&self) -> String {
        let mut line = format!("[{}] {} {:?}", self.ref_id, self.role, self.name);
        if let Some(href) = &self.href {
            line.push_str(" → ");
            line.push_str(href);
        }
        match (&self.value, self.options) {
            (Some(value), Some(options)) => {
                line.push_str(&format!(" = {value:?} ({options} options)"))
            }
            (Some(value), None) if !value.is_empty() => line.push_str(&format!(" value={value:?}")),
            _ => {}
        }
        if let Some(kind) = &self.input_type {
            line.push_str(&format!(" type={kind}"));
        }
        for flag in self.flags() {
            line.push(' ');
            line.push_str(flag);
        }
        if let Some(note) = &self.note {
            let label = if self.invalid { "error" } else { "desc" };
            line.push_str(&format!(" {label}={note:?}"));
        }
        if let Some(frame) = &self.frame {
            line.push_str(&format!(" (in frame {frame})"));
        }
        line
    }

    /// Its state, only what is set: `checked`, `expanded`/`collapsed`, `disabled`, `required`,
    /// `readonly`, `invalid`.
    pub fn flags(&self) -> Vec<&'static str> {
        let expanded = self
            .expanded
            .map(|open| if open { "expanded" } else { "collapsed" });
        [
            (self.checked == Some(true)).then_some("checked"),
            expanded,
            self.disabled.then_some("disabled"),
            self.required.then_some("required"),
            self.readonly.then_some("readonly"),
            self.invalid.then_some("invalid"),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

/// The interactive elements of a tab, visible ones first, in document order within each group.
#[derive(Debug, Clone, Serialize)]
pub struct ElementList {
    pub elements: Vec<Element>,
    /// `[scrollX, scrollY, scrollWidth, scrollHeight]` of the top document.
    pub scroll: [i64; 4],
}

/// Line printed before the off-screen elements.
pub const OFFSCREEN_HEADER: &str = "-- off-screen (scroll to reach) --";

impl ElementList {
    /// One line per element, with a header before the off-screen group.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = Vec::with_capacity(self.elements.len() + 1);
        let mut in_offscreen = false;
        for element in &self.elements {
            if element.offscreen && !in_offscreen {
                lines.push(OFFSCREEN_HEADER.to_string());
                in_offscreen = true;
            }
            lines.push(element.line());
        }
        lines
    }

    pub fn visible_count(&self) -> usize {
        self.elements.iter().filter(|e| !e.offscreen).count()
    }
}

/// How the element list changed since the previous full listing. Refs are the same for the
/// same element, so an element whose line differs changed (its state, value or name).
#[derive(Debug, Clone, Default, Serialize)]
pub struct ElementChanges {
    /// Lines of elements that were not in the previous list (`ChangesIn::View`: elements in view
    /// now that were not, new or scrolled to).
    pub added: Vec<String>,
    /// Lines of elements whose line is not what it was.
    pub changed: Vec<String>,
    /// Refs of elements gone since, in order.
    pub removed: Vec<u32>,
    /// Elements listed the same as before.
    pub unchanged: usize,
    /// `ChangesIn::View`: new elements still off-screen, not listed until they come into view.
    pub offscreen_added: usize,
    /// The elements in view now, a line each: the list itself, for when it is shorter than
    /// its changes.
    pub in_view: Vec<String>,
    /// Elements off-screen now.
    pub offscreen: usize,
}

/// The role and name of a listed line (`[3] link "Row 7"` of `[3] link "Row 7" → /r/7`): what
/// the element is, as opposed to its state.
fn name_of(line: &str) -> &str {
    let start = line.find("] ").map_or(0, |at| at + 2);
    let rest = &line[start..];
    // The name is a quoted string right after the role; it ends at the first unescaped quote.
    let Some(open) = rest.find('"') else {
        return rest;
    };
    let mut escaped = false;
    for (at, c) in rest[open + 1..].char_indices() {
        match c {
            '\\' if !escaped => escaped = true,
            '"' if !escaped => return &rest[..open + 1 + at + 1],
            _ => escaped = false,
        }
    }
    rest
}

/// Where changes are worth telling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangesIn {
    /// Every element's: after an action that may change the page.
    Page,
    /// Only what is in view: after a scroll, what came into view (new or scrolled to) and what
    /// changed there; the rest is counted.
    View,
}

impl ElementChanges {
    /// One line per change, marked: `+ [ref] …` added, `~ [ref] …` changed, then `- [3] [4]`
    /// removed and `= 180 unchanged`.
    pub fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self.added.iter().map(|l| format!("+ {l}")).collect();
        lines.extend(self.changed.iter().map(|l| format!("~ {l}")));
        if !self.removed.is_empty() {
            let refs: Vec<String> = self.removed.iter().map(|r| format!("[{r}]")).collect();
            lines.push(format!("- {}", refs.join(" ")));
        }
        if self.offscreen_added > 0 {
            lines.push(format!("+ {} more off-screen", self.offscreen_added));
        }
        lines.push(format!("= {} unchanged", self.unchanged));
        lines
    }

    /// Sorts one element of the new list against how it was listed before, and keeps its line
    /// when it is in view.
    fn note(&mut self, element: &Element, before: Option<&Listed>, scope: ChangesIn) {
        let line = element.line();
        if element.offscreen {
            self.offscreen += 1;
        } else {
            self.in_view.push(line.clone());
        }
        let was_in_view = before.is_some_and(|b| !b.offscreen);
        match (scope, before) {
            (ChangesIn::View, _) if element.offscreen => match before {
                None => self.offscreen_added += 1,
                Some(_) => self.unchanged += 1,
            },
            (ChangesIn::View, _) if !was_in_view => self.added.push(line),
            // A node a virtual list reused for another row: what came into view is the row.
            (ChangesIn::View, Some(was)) if name_of(&was.line) != name_of(&line) => {
                self.added.push(line)
            }
            (_, None) => self.added.push(line),
            (_, Some(was)) if was.line != line => self.changed.push(line),
            _ => self.unchanged += 1,
        }
    }
}

impl Tab {
    /// Lists the elements again and compares with the previous full list.
    pub async fn element_changes(&mut self, scope: ChangesIn) -> ToolResult<ElementChanges> {
        let before = std::mem::take(&mut self.refs.last_listed);
        let list = match self.elements(None).await {
            Ok(list) => list,
            Err(error) => {
                self.refs.last_listed = before;
                return Err(error);
            }
        };
        let mut changes = ElementChanges::default();
        let now: HashSet<u32> = list.elements.iter().map(|e| e.ref_id).collect();
        for element in &list.elements {
            changes.note(element, before.get(&element.ref_id), scope);
        }
        changes.removed = before
            .keys()
            .filter(|r| !now.contains(r))
            .copied()
            .collect();
        changes.removed.sort_unstable();
        Ok(changes)
    }
}

/// What the page agent returns for one document.
#[derive(Debug, Deserialize)]
struct DocSnapshot {
    next: u32,
    #[serde(default)]
    origin: String,
    #[serde(default)]
    items: Vec<Element>,
    /// Where foreign frames sit among the items.
    #[serde(default)]
    frames: Vec<FrameMark>,
    #[serde(default)]
    scroll: Option<[i64; 4]>,
    #[serde(default)]
    error: Option<String>,
}

/// A foreign frame's place in its parent's element list: before item `at`, its content box at
/// `x`, `y` and its visible window `view`, in the parent's viewport.
#[derive(Debug, Deserialize)]
struct FrameMark {
    key: String,
    at: usize,
    x: f64,
    y: f64,
    view: [f64; 4],
}

/// How a document's boxes map into the top viewport.
#[derive(Debug, Clone)]
struct Placement {
    dx: f64,
    dy: f64,
    /// The window of the top viewport through which the document is seen (`None`: all of it).
    view: Option<[f64; 4]>,
}

/// Frames inside frames are followed this deep (a page framing itself stops here).
const MAX_FRAME_DEPTH: usize = 8;

impl Tab {
    /// Lists the interactive elements (optionally under `selector`), numbering new ones; the
    /// elements of foreign frames sit at their frame's place.
    pub async fn elements(&mut self, selector: Option<&str>) -> ToolResult<ElementList> {
        let _stage = crate::timing::stage("elements");
        self.tag_foreign_frames(&Doc::Top).await;
        let top: DocSnapshot = self
            .agent_call(&Doc::Top, &snapshot_call(self.refs.next, selector))
            .await?;
        if top.error.is_some() {
            return Err(ToolError::invalid(format!(
                "selector {:?} matches no element on the page",
                selector.unwrap_or_default()
            )));
        }
        let scroll = top.scroll.unwrap_or_default();
        let mut elements = Vec::new();
        let whole = Placement {
            dx: 0.0,
            dy: 0.0,
            view: None,
        };
        self.splice(top, &Doc::Top, whole, &mut elements, 0).await;
        // Visible first; the sort is stable, so document order holds within each group.
        elements.sort_by_key(|e| e.offscreen);
        if selector.is_none() {
            self.refs.last_listed = elements
                .iter()
                .map(|e| {
                    let listed = Listed {
                        line: e.line(),
                        offscreen: e.offscreen,
                    };
                    (e.ref_id, listed)
                })
                .collect();
        }
        Ok(ElementList { elements, scroll })
    }

    /// Adds a document's elements to `out` in order, each foreign frame's at its mark.
    fn splice<'a>(
        &'a mut self,
        snap: DocSnapshot,
        doc: &'a Doc,
        place: Placement,
        out: &'a mut Vec<Element>,
        depth: usize,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            self.refs.next = self.refs.next.max(snap.next);
            let mut marks = snap.frames.into_iter().peekable();
            for (index, mut element) in snap.items.into_iter().enumerate() {
                while let Some(mark) = marks.next_if(|m| m.at <= index) {
                    self.splice_frame(mark, &place, out, depth).await;
                }
                if let Some(key) = doc.key() {
                    self.refs.frame_refs.insert(element.ref_id, key.to_string());
                    element.frame = Some(snap.origin.clone());
                    place.apply(&mut element);
                }
                out.push(element);
            }
            for mark in marks {
                self.splice_frame(mark, &place, out, depth).await;
            }
        })
    }

    /// Lists a foreign frame's elements into `out`, placed by its mark in the parent.
    async fn splice_frame(
        &mut self,
        mark: FrameMark,
        parent: &Placement,
        out: &mut Vec<Element>,
        depth: usize,
    ) {
        let Some(doc) = self.descend(&mark.key, depth).await else {
            return;
        };
        let call = snapshot_call(self.refs.next, None);
        let Ok(snap) = self.agent_call::<DocSnapshot>(&doc, &call).await else {
            return;
        };
        let [x, y, w, h] = mark.view;
        let seen = [x + parent.dx, y + parent.dy, w, h];
        let place = Placement {
            dx: parent.dx + mark.x,
            dy: parent.dy + mark.y,
            view: Some(parent.view.map_or(seen, |outer| intersect(outer, seen))),
        };
        self.splice(snap, &doc, place, out, depth + 1).await;
    }

    /// The foreign frame with this key: an out-of-process frame, or a frame of the page's own
    /// process with a document. `None` once it is gone.
    pub(crate) async fn foreign_doc(&self, key: &str) -> Option<Doc> {
        if let Some(remote) = self.frames.remote(key) {
            return Some(remote);
        }
        let context = self
            .page
            .frame_execution_context(FrameId::new(key))
            .await
            .ok()??;
        Some(Doc::Context {
            frame: key.to_string(),
            context,
        })
    }

    /// The foreign frame `key` to read at `depth` (none past `MAX_FRAME_DEPTH`, or once gone),
    /// with its own foreign frames tagged.
    pub(crate) async fn descend(&self, key: &str, depth: usize) -> Option<Doc> {
        if depth >= MAX_FRAME_DEPTH {
            return None;
        }
        let doc = self.foreign_doc(key).await?;
        self.tag_foreign_frames(&doc).await;
        Some(doc)
    }

    /// Tags the `<iframe>` elements of `doc`'s foreign frames with their keys, so that the
    /// documents holding them can mark their place. Frames of the page's own process are tagged
    /// with the top document (their owners may sit in any of its frames).
    pub(crate) async fn tag_foreign_frames(&self, doc: &Doc) {
        let (holder, mut frames) = match doc {
            Doc::Top => {
                let main = self.page.mainframe().await.ok().flatten();
                let own: Vec<String> = self
                    .page
                    .frames()
                    .await
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|frame| Some(frame) != main.as_ref())
                    .map(|frame| frame.inner().clone())
                    .collect();
                self.frames.keep_owners_of(&own);
                (None, own)
            }
            Doc::Remote { session, .. } => (Some(session.clone()), Vec::new()),
            Doc::Context { .. } => return,
        };
        frames.extend(
            self.frames
                .remote_children(&holder)
                .iter()
                .filter_map(|child| child.key().map(str::to_string)),
        );
        frames.sort();
        frames.dedup();
        let tags = frames
            .iter()
            .map(|frame| self.frames.tag_owner(&self.browser, &holder, frame));
        futures::future::join_all(tags).await;
    }

    /// Calls the page agent in `doc`, installing it first if that document does not have it
    /// yet (documents that existed before the tab or frame was attached).
    pub(crate) async fn agent_call<T: serde::de::DeserializeOwned>(
        &self,
        doc: &Doc,
        call: &str,
    ) -> ToolResult<T> {
        let guarded = format!("window.__wp ? {call} : undefined");
        let value = self.evaluate_in(doc, &guarded, None).await?;
        let value = if value.is_null() {
            self.evaluate_in(doc, AGENT_JS, None).await?;
            self.evaluate_in(doc, call, None).await?
        } else {
            value
        };
        serde_json::from_value(value)
            .map_err(|e| ToolError::internal(format!("unexpected answer from the page agent: {e}")))
    }

    /// Checks that `ref_id` was issued by this tab and finds the document that holds it.
    pub(crate) async fn locate_ref(&self, ref_id: u32) -> ToolResult<Doc> {
        if ref_id == 0 || ref_id >= self.refs.next {
            return Err(ToolError::new(
                ErrorCode::NoSuchRef,
                format!("ref {ref_id} was never issued in tab {}", self.id),
            ));
        }
        match self.refs.frame_refs.get(&ref_id) {
            Some(key) => self
                .foreign_doc(key)
                .await
                .ok_or_else(|| stale(ref_id, "its frame is gone")),
            None => Ok(Doc::Top),
        }
    }

    /// Runs `function(el)` (JS source) on the element behind `ref_id` and returns its value.
    pub(crate) async fn on_element(
        &self,
        ref_id: u32,
        function: &str,
    ) -> ToolResult<serde_json::Value> {
        let doc = self.locate_ref(ref_id).await?;
        self.on_element_in(&doc, ref_id, function).await
    }

    /// `on_element` where the ref's document is known.
    pub(crate) async fn on_element_in(
        &self,
        doc: &Doc,
        ref_id: u32,
        function: &str,
    ) -> ToolResult<serde_json::Value> {
        let call = format!(
            "(() => {{ const r = __wp.resolve({ref_id}); if (r.status !== 'ok') return {{ status: r.status, why: r.why }}; \
             return {{ status: 'ok', value: ({function})(r.el) }}; }})()"
        );
        #[derive(Deserialize)]
        struct Outcome {
            status: String,
            why: Option<String>,
            value: Option<serde_json::Value>,
        }
        let guarded = format!(
            "window.__wp ? {call} : {{ status: 'stale', why: 'the page has loaded a new document since' }}"
        );
        let outcome: Outcome = serde_json::from_value(self.evaluate_in(doc, &guarded, None).await?)
            .map_err(|e| {
                ToolError::internal(format!("unexpected answer from the page agent: {e}"))
            })?;
        match outcome.status.as_str() {
            "ok" => Ok(outcome.value.unwrap_or_default()),
            "unknown" => Err(ToolError::new(
                ErrorCode::NoSuchRef,
                format!("ref {ref_id} is not known in this document"),
            )),
            _ => Err(stale(
                ref_id,
                outcome.why.as_deref().unwrap_or("the page changed"),
            )),
        }
    }
}

impl Placement {
    /// Moves a frame's element into the top viewport; it is off-screen when the frame's
    /// visible window does not show it.
    fn apply(&self, element: &mut Element) {
        if let Some([x, y, w, h]) = element.bounds {
            let moved = [x + self.dx, y + self.dy, w, h];
            element.bounds = Some(moved);
            if let Some(view) = self.view {
                let shown = intersect(view, moved);
                element.offscreen |= shown[2] <= 0.0 || shown[3] <= 0.0;
            }
        }
    }
}

/// The overlap of two `[x, y, width, height]` rectangles (zero-sized when they do not meet).
fn intersect(a: [f64; 4], b: [f64; 4]) -> [f64; 4] {
    let x = a[0].max(b[0]);
    let y = a[1].max(b[1]);
    let right = (a[0] + a[2]).min(b[0] + b[2]);
    let bottom = (a[1] + a[3]).min(b[1] + b[3]);
    [x, y, (right - x).max(0.0), (bottom - y).max(0.0)]
}

fn snapshot_call(next: u32, selector: Option<&str>) -> String {
    format!(
        "__wp.snapshot({next}, {})",
        serde_json::to_string(&selector).unwrap_or_else(|_| "null".into())
    )
}

fn stale(ref_id: u32, why: &str) -> ToolError {
    ToolError::new(ErrorCode::StaleRef, format!("ref {ref_id} is stale: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn element(ref_id: u32, role: &str, name: &str) -> Element {
        serde_json::from_value(serde_json::json!({"ref": ref_id, "role": role, "name": name}))
            .unwrap()
    }

    #[test]
    fn lines_are_compact_and_carry_state() {
        let mut link = element(14, "link", "Docs");
        link.href = Some("/docs".into());
        assert_eq!(link.line(), "[14] link \"Docs\" → /docs");
        let mut select = element(15, "combobox", "Country");
        select.value = Some("France".into());
        select.options = Some(3);
        assert_eq!(
            select.line(),
            "[15] combobox \"Country\" = \"France\" (3 options)"
        );
        let mut check = element(16, "checkbox", "Remember me");
        check.checked = Some(true);
        check.disabled = true;
        assert_eq!(
            check.line(),
            "[16] checkbox \"Remember me\" checked disabled"
        );
        let mut email = element(17, "textbox", "Email");
        email.input_type = Some("email".into());
        email.required = true;
        email.note = Some("Use your work address".into());
        assert_eq!(
            email.line(),
            "[17] textbox \"Email\" type=email required desc=\"Use your work address\""
        );
        email.invalid = true;
        email.note = Some("Enter an email address".into());
        assert_eq!(
            email.line(),
            "[17] textbox \"Email\" type=email required invalid error=\"Enter an email address\""
        );
    }

    #[test]
    fn a_lines_name_is_its_role_and_quoted_name_without_its_state() {
        let mut row = element(3, "link", "Row \"7\" of 9");
        row.href = Some("/r/7".into());
        assert_eq!(name_of(&row.line()), "link \"Row \\\"7\\\" of 9\"");
        row.checked = Some(true);
        assert_eq!(name_of(&row.line()), "link \"Row \\\"7\\\" of 9\"");
        assert_ne!(
            name_of(&element(3, "link", "Row 8").line()),
            name_of(&row.line())
        );
    }

    #[test]
    fn offscreen_elements_come_after_a_header() {
        let mut below = element(2, "button", "Below");
        below.offscreen = true;
        let list = ElementList {
            elements: vec![element(1, "button", "Top"), below],
            scroll: [0; 4],
        };
        assert_eq!(
            list.lines(),
            vec![
                "[1] button \"Top\"",
                OFFSCREEN_HEADER,
                "[2] button \"Below\""
            ]
        );
    }
}
