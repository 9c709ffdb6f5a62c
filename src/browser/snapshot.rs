//! The element list: numbered interactive elements of a tab, and resolving those numbers (refs)
//! back to elements.
//!
//! Invariant: a ref is never reused for a different element within a tab. Numbers keep growing
//! across documents, so a ref from an earlier document is recognised (`STALE_REF`) instead of
//! hitting whatever now carries that number.

use std::collections::{HashMap, HashSet};

use chromiumoxide::cdp::browser_protocol::page::FrameId;
use chromiumoxide::cdp::js_protocol::runtime::ExecutionContextId;
use serde::{Deserialize, Serialize};

use super::tab::{AGENT_JS, Tab};
use crate::error::{ErrorCode, ToolError, ToolResult};

/// Ref numbering state of one tab.
#[derive(Debug)]
pub(crate) struct RefBook {
    /// The next number to hand out; anything at or above it was never issued.
    next: u32,
    /// Refs issued inside cross-origin frames, and the frame that owns each.
    frame_refs: HashMap<u32, FrameId>,
    /// Refs of the latest full element list, to tell what an action added or removed.
    last_listed: HashSet<u32>,
}

impl Default for RefBook {
    fn default() -> Self {
        Self {
            next: 1,
            frame_refs: HashMap::new(),
            last_listed: HashSet::new(),
        }
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
    /// Outside the viewport (scroll to reach it).
    #[serde(default)]
    pub offscreen: bool,
    /// CSS pixel box `[x, y, width, height]` in the top viewport; absent inside cross-origin frames.
    #[serde(default, rename = "box", skip_serializing_if = "Option::is_none")]
    pub bounds: Option<[f64; 4]>,
    /// Origin of the cross-origin frame holding the element.
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
        if self.checked == Some(true) {
            line.push_str(" checked");
        }
        if let Some(expanded) = self.expanded {
            line.push_str(if expanded { " expanded" } else { " collapsed" });
        }
        if self.disabled {
            line.push_str(" disabled");
        }
        if let Some(frame) = &self.frame {
            line.push_str(&format!(" (in frame {frame})"));
        }
        line
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

/// How the element list changed since the previous full listing.
#[derive(Debug, Clone, Serialize)]
pub struct ElementChanges {
    /// Lines of elements that were not in the previous list.
    pub added: Vec<String>,
    pub removed: usize,
}

impl Tab {
    /// Lists the elements again and compares with the previous full list.
    pub async fn element_changes(&mut self) -> ToolResult<ElementChanges> {
        let before = self.refs.last_listed.clone();
        let list = self.elements(None).await?;
        let now: HashSet<u32> = list.elements.iter().map(|e| e.ref_id).collect();
        Ok(ElementChanges {
            added: list
                .elements
                .iter()
                .filter(|e| !before.contains(&e.ref_id))
                .map(Element::line)
                .collect(),
            removed: before.difference(&now).count(),
        })
    }
}

/// What the page agent returns for one document.
#[derive(Debug, Deserialize)]
struct FrameSnapshot {
    next: u32,
    #[serde(default)]
    items: Vec<Element>,
    #[serde(default)]
    scroll: Option<[i64; 4]>,
    #[serde(default)]
    error: Option<String>,
}

/// Where a ref lives once resolved: the frame context to evaluate in.
pub(crate) struct RefTarget {
    pub ref_id: u32,
    pub context: Option<ExecutionContextId>,
}

impl Tab {
    /// Lists the interactive elements (optionally under `selector`), numbering new ones.
    pub async fn elements(&mut self, selector: Option<&str>) -> ToolResult<ElementList> {
        let call = format!(
            "__wp.snapshot({}, {})",
            self.refs.next,
            serde_json::to_string(&selector).unwrap_or_else(|_| "null".into())
        );
        let main: FrameSnapshot = self.agent_call(&call, None).await?;
        if main.error.is_some() {
            return Err(ToolError::invalid(format!(
                "selector {:?} matches no element on the page",
                selector.unwrap_or_default()
            )));
        }
        self.refs.next = self.refs.next.max(main.next);
        let mut elements = main.items;
        if selector.is_none() {
            elements.extend(self.cross_origin_frame_elements().await);
        }
        // Visible first; the sort is stable, so document order holds within each group.
        elements.sort_by_key(|e| e.offscreen);
        if selector.is_none() {
            self.refs.last_listed = elements.iter().map(|e| e.ref_id).collect();
        }
        Ok(ElementList {
            elements,
            scroll: main.scroll.unwrap_or_default(),
        })
    }

    /// Elements inside frames the top document cannot script (another origin).
    async fn cross_origin_frame_elements(&mut self) -> Vec<Element> {
        let frames = self.page.frames().await.unwrap_or_default();
        let main_frame = self.page.mainframe().await.ok().flatten();
        let mut found = Vec::new();
        for frame in frames
            .into_iter()
            .filter(|f| Some(f) != main_frame.as_ref())
        {
            let Ok(Some(context)) = self.page.frame_execution_context(frame.clone()).await else {
                continue;
            };
            let call = format!(
                "(() => {{ try {{ void window.parent.document; return null; }} catch (e) {{}} \
                 return window.__wp ? {{ origin: location.origin, snap: __wp.snapshot({}, null) }} : null; }})()",
                self.refs.next
            );
            let Ok(value) = self.evaluate_raw(&call, Some(context)).await else {
                continue;
            };
            #[derive(Deserialize)]
            struct Foreign {
                origin: String,
                snap: FrameSnapshot,
            }
            let Ok(Some(foreign)) = serde_json::from_value::<Option<Foreign>>(value) else {
                continue;
            };
            self.refs.next = self.refs.next.max(foreign.snap.next);
            for mut element in foreign.snap.items {
                self.refs.frame_refs.insert(element.ref_id, frame.clone());
                element.bounds = None;
                element.frame = Some(foreign.origin.clone());
                found.push(element);
            }
        }
        found
    }

    /// Calls the page agent, installing it first if this document does not have it yet
    /// (documents that existed before the tab was attached).
    pub(crate) async fn agent_call<T: serde::de::DeserializeOwned>(
        &self,
        call: &str,
        context: Option<ExecutionContextId>,
    ) -> ToolResult<T> {
        let guarded = format!("window.__wp ? {call} : undefined");
        let value = self.evaluate_raw(&guarded, context).await?;
        let value = if value.is_null() {
            self.evaluate_raw(AGENT_JS, context).await?;
            self.evaluate_raw(call, context).await?
        } else {
            value
        };
        serde_json::from_value(value)
            .map_err(|e| ToolError::internal(format!("unexpected answer from the page agent: {e}")))
    }

    /// Checks that `ref_id` was issued by this tab and finds the frame that owns it.
    pub(crate) async fn locate_ref(&self, ref_id: u32) -> ToolResult<RefTarget> {
        if ref_id == 0 || ref_id >= self.refs.next {
            return Err(ToolError::new(
                ErrorCode::NoSuchRef,
                format!("ref {ref_id} was never issued in tab {}", self.id),
            ));
        }
        let context = match self.refs.frame_refs.get(&ref_id) {
            Some(frame) => match self.page.frame_execution_context(frame.clone()).await {
                Ok(Some(context)) => Some(context),
                _ => return Err(stale(ref_id, "its frame is gone")),
            },
            None => None,
        };
        Ok(RefTarget { ref_id, context })
    }

    /// Runs `function(el)` (JS source) on the element behind `ref_id` and returns its value.
    pub(crate) async fn on_element(
        &self,
        ref_id: u32,
        function: &str,
    ) -> ToolResult<serde_json::Value> {
        let target = self.locate_ref(ref_id).await?;
        let call = format!(
            "(() => {{ const r = __wp.resolve({}); if (r.status !== 'ok') return {{ status: r.status, why: r.why }}; \
             return {{ status: 'ok', value: ({function})(r.el) }}; }})()",
            target.ref_id
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
        let outcome: Outcome = serde_json::from_value(
            self.evaluate_raw(&guarded, target.context).await?,
        )
        .map_err(|e| ToolError::internal(format!("unexpected answer from the page agent: {e}")))?;
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
