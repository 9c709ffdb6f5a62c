//! Reading a tab's content: rendered HTML or text of the page, a subtree or one element, and
//! text search with the refs of the elements near each match.

use serde::{Deserialize, Serialize};

use super::tab::Tab;
use crate::error::{ToolError, ToolResult};

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
    /// `outerHTML` of the rendered DOM.
    Html,
    /// `innerText`: what a reader sees.
    Text,
    /// HTML prepared for Markdown: scripts, styles, hidden parts and (with `main`) navigation
    /// chrome removed; links and images made absolute.
    Readable { main: bool },
}

/// Picks the main content root (with `main`), clones it and strips what a reader never sees.
const READABLE_JS: &str = r#"(el, main) => {
  if (main && (el === document.documentElement || el === document.body)) {
    const articles = Array.from(document.querySelectorAll('article'))
      .sort((a, b) => b.innerText.length - a.innerText.length);
    el = document.querySelector('main, [role=main]') || articles[0] || document.body || el;
  }
  const hidden = new Set();
  el.querySelectorAll('*').forEach((n) => { if (n.checkVisibility && !n.checkVisibility()) hidden.add(n); });
  const clone = el.cloneNode(true);
  const originals = [el, ...el.querySelectorAll('*')];
  const copies = [clone, ...clone.querySelectorAll('*')];
  copies.forEach((c, i) => {
    const o = originals[i];
    if (hidden.has(o) && o.tagName !== 'OPTION') { c.setAttribute('data-wp-drop', ''); return; }
    if (o.tagName === 'A' && o.hasAttribute('href')) c.setAttribute('href', o.href);
    if (o.tagName === 'IMG' && o.getAttribute('src')) c.setAttribute('src', o.src);
  });
  const junk = 'script,style,noscript,template,[data-wp-drop]' + (main ? ',nav,aside,footer,[role=navigation],[role=contentinfo]' : '');
  clone.querySelectorAll(junk).forEach((n) => n.remove());
  return clone.outerHTML;
}"#;

/// One text match found by `find`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FindHit {
    pub context: String,
    /// Refs of the elements holding or nearest to the match.
    pub refs: Vec<u32>,
}

impl Tab {
    /// The rendered HTML or text of the page, a subtree matching a selector, or one element.
    pub async fn content(&self, scope: &Scope, form: Form) -> ToolResult<String> {
        let readable;
        let read = match form {
            Form::Html => "(el) => el.outerHTML",
            Form::Text => "(el) => el.innerText ?? el.textContent",
            Form::Readable { main } => {
                readable = format!("((el) => ({READABLE_JS})(el, {main}))");
                readable.as_str()
            }
        };
        let value = match scope {
            Scope::Ref(ref_id) => self.on_element(*ref_id, read).await?,
            Scope::Page => {
                let root = match form {
                    Form::Text => "(document.body || document.documentElement)",
                    _ => "document.documentElement",
                };
                self.evaluate_raw(&format!("({read})({root})"), None)
                    .await?
            }
            Scope::Selector(selector) => {
                let call = format!(
                    "(() => {{ const el = document.querySelector({}); return el ? ({read})(el) : null; }})()",
                    serde_json::to_string(selector).unwrap_or_default()
                );
                let value = self
                    .evaluate_raw(&call, None)
                    .await
                    .map_err(|_| bad_selector(selector))?;
                if value.is_null() {
                    return Err(bad_selector(selector));
                }
                value
            }
        };
        Ok(value.as_str().unwrap_or_default().to_string())
    }

    /// Up to `limit` matches of `query` (case-insensitive) with surrounding text and refs.
    /// Numbers elements first so every hit can name its neighbours.
    pub async fn find(&mut self, query: &str, limit: usize) -> ToolResult<Vec<FindHit>> {
        self.elements(None).await?;
        let call = format!(
            "__wp.find({}, {limit})",
            serde_json::to_string(query).unwrap_or_default()
        );
        self.agent_call(&call, None).await
    }
}

/// Which of the page conditions fail: `text` must be shown, `selector` must match, `not_text`
/// must not be shown. Each failure is described in words.
const CONDITIONS_JS: &str = r#"(c) => {
  const body = document.body ? document.body.innerText : '';
  const failed = [];
  if (c.text && !body.includes(c.text)) failed.push('text ' + JSON.stringify(c.text) + ' not found');
  if (c.selector) {
    let hit = null;
    try { hit = document.querySelector(c.selector); } catch (e) { hit = null; }
    if (!hit) failed.push('selector ' + JSON.stringify(c.selector) + ' not found');
  }
  if (c.notText && body.includes(c.notText)) failed.push('found ' + JSON.stringify(c.notText));
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
            .evaluate_raw(&format!("({CONDITIONS_JS})({conditions})"), None)
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
