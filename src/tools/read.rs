//! `browser_read`: the current page as numbered elements, Markdown, text, HTML, search hits, or
//! the sections relevant to a query — always paged within a token budget.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::paging::{self, Slice, slice_lines, slice_text};
use super::{Ctx, Tool, ToolOutput, browser_fields, merge, session_name};
use crate::browser::{FindHit, Form, Scope, Tab};
use crate::error::{ToolError, ToolResult};
use crate::web::{markdown, sections};

/// Most matches `find` reports.
const MAX_FIND_HITS: usize = 50;

const GUIDE: &str = "browser_read reads the current tab. mode=elements (default) lists \
interactive elements as `[ref] role \"name\"`; use those refs with other browser tools. \
mode=markdown for the content, find to locate text, extract for the parts answering a query. \
Long output is paged: pass next_cursor back as cursor.";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// Default elements.
    pub mode: Option<ReadMode>,
    /// Text to find (find) or question (extract).
    pub query: Option<String>,
    /// Only this CSS subtree.
    pub selector: Option<String>,
    /// Only this element.
    #[serde(rename = "ref")]
    pub ref_id: Option<u32>,
    /// markdown: whole page instead of main content.
    pub full: Option<bool>,
    /// Token budget (default 4000).
    pub max_tokens: Option<usize>,
    /// next_cursor of the previous read.
    pub cursor: Option<String>,
    /// Default: the active tab.
    pub tab: Option<String>,
    /// Default "default".
    pub session: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "lowercase")]
pub enum ReadMode {
    #[default]
    Elements,
    Markdown,
    Text,
    Html,
    Find,
    Extract,
}

pub struct Read;

#[async_trait]
impl Tool for Read {
    type Args = ReadArgs;
    const NAME: &'static str = "browser_read";
    const GUIDE: &'static str = GUIDE;
    const DESCRIPTION: &'static str = "Read the current page: interactive elements with refs, markdown, text, html, find (matches with section and refs) or extract (sections answering query). Paged by max_tokens/cursor.";

    async fn run(&self, ctx: &Ctx, args: ReadArgs) -> ToolResult<ToolOutput> {
        let mode = args.mode.unwrap_or_default();
        let scope = scope(&args)?;
        let budget = args.max_tokens.unwrap_or(paging::DEFAULT_MAX_TOKENS).max(1);
        let mut session = ctx.browser.session(session_name(&args.session)).await?;
        let name = session.name().to_string();
        let tab = session.tab_or_active(args.tab.as_deref()).await?;
        let cursor = args.cursor.as_deref();
        let extra = match mode {
            ReadMode::Elements => read_elements(tab, &args, &scope, budget, cursor).await?,
            ReadMode::Find => {
                let query = required_query(&args, "find")?;
                let hits = tab.find(query, MAX_FIND_HITS).await?;
                let lines: Vec<String> = hits.iter().map(FindHit::line).collect();
                paged(
                    slice_lines(&lines, budget, cursor)?,
                    json!({ "matches": hits.len() }),
                )
            }
            ReadMode::Extract => {
                let query = required_query(&args, "extract")?;
                let text = readable_markdown(tab, &scope, true).await?;
                let ranked = sections::rank(&text, query);
                let mut best: Vec<_> = ranked.into_iter().take(8).collect();
                best.sort_by_key(|s| s.index);
                let joined = best
                    .iter()
                    .map(|s| s.text.as_str())
                    .collect::<Vec<_>>()
                    .join("\n\n");
                paged(
                    slice_text(&joined, budget, cursor)?,
                    json!({ "sections": best.len() }),
                )
            }
            ReadMode::Markdown => {
                let text = readable_markdown(tab, &scope, args.full.unwrap_or(false)).await?;
                paged(slice_text(&text, budget, cursor)?, json!({}))
            }
            ReadMode::Text | ReadMode::Html => {
                let form = if mode == ReadMode::Text {
                    Form::Text
                } else {
                    Form::Html
                };
                let text = tab.content(&scope, form).await?;
                paged(slice_text(&text, budget, cursor)?, json!({}))
            }
        };
        let mut extra = extra;
        extra["mode"] = json!(mode);
        let fields = browser_fields(&name, tab).await;
        Ok(ToolOutput::json(merge(fields, extra)))
    }
}

async fn read_elements(
    tab: &mut Tab,
    args: &ReadArgs,
    scope: &Scope,
    budget: usize,
    cursor: Option<&str>,
) -> ToolResult<Value> {
    if matches!(scope, Scope::Ref(_)) {
        return Err(ToolError::invalid(
            "field `ref` applies to markdown, text and html; use selector to list elements of a subtree",
        ));
    }
    let list = tab.elements(args.selector.as_deref()).await?;
    let slice = slice_lines(&list.lines(), budget, cursor)?;
    let [x, y, width, height] = list.scroll;
    Ok(paged(
        slice,
        json!({
            "total": list.elements.len(),
            "visible": list.visible_count(),
            "scroll": { "x": x, "y": y, "width": width, "height": height },
        }),
    ))
}

/// The page (or scope) as Markdown; `full` keeps navigation and footers.
async fn readable_markdown(tab: &Tab, scope: &Scope, full: bool) -> ToolResult<String> {
    let html = tab.content(scope, Form::Readable { main: !full }).await?;
    tokio::task::spawn_blocking(move || markdown::to_markdown(&html))
        .await
        .map_err(|e| ToolError::internal(format!("markdown conversion failed: {e}")))
}

fn scope(args: &ReadArgs) -> ToolResult<Scope> {
    match (&args.selector, args.ref_id) {
        (Some(_), Some(_)) => Err(ToolError::invalid(
            "give either `selector` or `ref`, not both",
        )),
        (Some(selector), None) => Ok(Scope::Selector(selector.clone())),
        (None, Some(ref_id)) => Ok(Scope::Ref(ref_id)),
        (None, None) => Ok(Scope::Page),
    }
}

fn required_query<'a>(args: &'a ReadArgs, mode: &str) -> ToolResult<&'a str> {
    args.query
        .as_deref()
        .map(str::trim)
        .filter(|q| !q.is_empty())
        .ok_or_else(|| ToolError::invalid(format!("field `query` is required for mode={mode}")))
}

fn paged(slice: Slice, extra: Value) -> Value {
    let mut value = json!(slice);
    if let (Value::Object(target), Value::Object(extra)) = (&mut value, extra) {
        target.extend(extra);
    }
    value
}
