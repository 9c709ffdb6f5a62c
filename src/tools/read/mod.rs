//! `browser_read`: the current page as numbered elements, Markdown, text, HTML, search hits, or
//! the sections relevant to a query; or what the page did (requests, console) — always paged
//! within a token budget.

mod data;
mod file;
mod observe;
mod untrusted;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Call, Ctx, Scope, SessionField, Tool};
use crate::browser::{
    ChangesIn, FailedNavigation, FindHit, Form, Level, PageWarning, RequestDetail, Scope as Part,
    Tab,
};
use crate::error::{ToolError, ToolResult};
use crate::pages::paging::{self, Slice, slice_lines, slice_text};
use crate::web::{markdown, sections, work};

/// Most matches `find` reports.
const MAX_FIND_HITS: usize = 50;

const GUIDE: &str = "browser_read reads the current tab. mode=elements (default) lists \
interactive elements as `[ref] role \"name\"` with their state (value, checked, required, \
invalid with its error=\"…\"); use those refs with other browser tools. \
mode=markdown for the content, find to locate text, extract for the parts answering a query, \
json for `data` by schema (as open_web_page's extract=json: {base, fields} CSS selectors, or a \
JSON Schema the model or the page's JSON-LD fills). \
mode=network lists the tab's requests (`[r12] 500 POST url fetch 3.1 KB 212 ms`; filters url, \
status 4xx|5xx|failed|404, type, since=last_action for what the last action caused); \
request=r12 gives one whole (headers, bodies; the response body is the content); data=true the \
JSON the page fetched. mode=console lists console messages and page errors (level=error). \
mode=tools lists the tools the page publishes for agents (WebMCP): name, description, input \
schema; call one with browser_interact action=page_tool. \
file=<a download's name> reads a file the session saved (PDF, Word, Excel, PowerPoint, \
OpenDocument, CSV, EPUB, HTML) as markdown, text or json (a sheet's rows by header). \
Long output is paged: pass next_cursor back as cursor.";

#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    // Default elements (no schema description: the tool list's size).
    pub mode: Option<ReadMode>,
    /// find: text; extract: question.
    pub query: Option<String>,
    /// Only this CSS subtree.
    pub selector: Option<String>,
    /// Only this element.
    #[serde(rename = "ref")]
    pub ref_id: Option<u32>,
    /// markdown: whole page.
    pub full: Option<bool>,
    /// Budget (default 4000).
    #[schemars(range(min = 1))]
    pub max_tokens: Option<usize>,
    pub cursor: Option<String>,
    /// network: URL substring or glob.
    pub url: Option<String>,
    /// network: 4xx, 5xx, failed or a code.
    pub status: Option<String>,
    /// network: fetch, xhr, document…
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// console: this level and up.
    pub level: Option<Level>,
    /// elements: last; else last_action, r12, c4.
    pub since: Option<String>,
    /// network: one request (r12).
    pub request: Option<String>,
    /// network: fetched JSON.
    pub data: Option<bool>,
    /// JSON Schema or {base, fields}.
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub schema: Option<serde_json::Value>,
    /// Mark page text.
    pub boundaries: Option<bool>,
    /// A download to read.
    pub file: Option<String>,
    pub tab: Option<String>,
    pub session: Option<SessionField>,
}

shared_fields!(ReadArgs { session, tab });

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
    Json,
    Network,
    Console,
    Tools,
}

/// A slice of the page in the mode asked for.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReadOutput {
    #[serde(flatten)]
    slice: Slice,
    mode: ReadMode,
    /// elements: how many are listed in all (all slices).
    #[serde(skip_serializing_if = "Option::is_none")]
    total: Option<usize>,
    /// elements: how many of them are in the viewport.
    #[serde(skip_serializing_if = "Option::is_none")]
    visible: Option<usize>,
    /// elements: the page's scroll position and size.
    #[serde(skip_serializing_if = "Option::is_none")]
    scroll: Option<ScrollBox>,
    /// find: how many matches.
    #[serde(skip_serializing_if = "Option::is_none")]
    matches: Option<usize>,
    /// extract: how many sections answer the query.
    #[serde(skip_serializing_if = "Option::is_none")]
    sections: Option<usize>,
    /// The tab shows Chromium's error page, not a document: the URL it could not load, and why
    /// (the content is empty then).
    #[serde(skip_serializing_if = "Option::is_none")]
    navigation_error: Option<FailedNavigation>,
    /// network, console: how many the tab recorded in all (the oldest beyond the tab's ring are
    /// no longer kept).
    #[serde(skip_serializing_if = "Option::is_none")]
    recorded: Option<u64>,
    /// network with request: that request whole; its response body is the content.
    #[serde(skip_serializing_if = "Option::is_none")]
    request: Option<RequestDetail>,
    /// markdown, text, extract: what a person cannot see, left out: characters of text, plus
    /// one per link, image or control.
    #[serde(skip_serializing_if = "Option::is_none")]
    hidden_text_dropped: Option<usize>,
    /// markdown, extract: elements nested more than 512 deep, left out with what they hold.
    #[serde(skip_serializing_if = "Option::is_none")]
    too_deep: Option<usize>,
    /// Page text that reads like instructions to a model: visible (kept) or hidden (left out).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<PageWarning>,
    /// json: the data read, where from, and the schema's verdict.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    data: Option<crate::web::data::DataRead>,
    /// file: a PDF's pages and metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pdf: Option<crate::web::pdf::PdfInfo>,
    /// file: a document's kind, metadata and parts.
    #[serde(skip_serializing_if = "Option::is_none")]
    document: Option<crate::web::documents::DocumentInfo>,
}

#[derive(Debug, Serialize, JsonSchema)]
struct ScrollBox {
    x: i64,
    y: i64,
    width: i64,
    height: i64,
}

impl ReadOutput {
    fn new(slice: Slice, mode: ReadMode) -> Self {
        Self {
            slice,
            mode,
            total: None,
            visible: None,
            scroll: None,
            matches: None,
            sections: None,
            navigation_error: None,
            recorded: None,
            request: None,
            hidden_text_dropped: None,
            too_deep: None,
            warnings: Vec::new(),
            data: None,
            pdf: None,
            document: None,
        }
    }

    /// Says what the read left out as concealed, and what in it or in `text` talks to a model.
    fn guarded(mut self, tab: &Tab, text: &str) -> Self {
        let concealed = tab.take_concealed();
        self.hidden_text_dropped = (concealed.dropped > 0).then_some(concealed.dropped);
        self.warnings = untrusted::visible_instructions(text);
        self.warnings.extend(concealed.warnings);
        self
    }

    /// A list of `count` entries (network, console), of which the tab `recorded` so many.
    pub(super) fn listed(
        slice: Slice,
        mode: ReadMode,
        count: usize,
        recorded: Option<u64>,
    ) -> Self {
        Self {
            total: Some(count),
            recorded,
            ..Self::new(slice, mode)
        }
    }

    /// One request whole; `slice` is a part of its response body.
    pub(super) fn with_request(slice: Slice, request: RequestDetail) -> Self {
        Self {
            request: Some(request),
            ..Self::new(slice, ReadMode::Network)
        }
    }

    /// What every mode reads on Chromium's error page: nothing (its text is the browser's, not
    /// the site's), and why.
    fn of_error_page(mode: ReadMode, error: FailedNavigation) -> Self {
        let nothing = Slice {
            content: String::new(),
            truncated: false,
            next_cursor: None,
        };
        let counted = |wanted: ReadMode| (mode == wanted).then_some(0);
        Self {
            total: counted(ReadMode::Elements),
            visible: counted(ReadMode::Elements),
            matches: counted(ReadMode::Find),
            sections: counted(ReadMode::Extract),
            navigation_error: Some(error),
            ..Self::new(nothing, mode)
        }
    }
}

pub struct Read;

#[async_trait]
impl Tool for Read {
    type Args = ReadArgs;
    type Output = ReadOutput;
    const NAME: &'static str = "browser_read";
    const GUIDE: &'static str = GUIDE;
    const EXAMPLE: &'static str = r#"{"mode": "markdown", "max_tokens": 2000}"#;
    const SCOPE: Scope = Scope::Browser;
    const TITLE: &'static str = "Read the page";
    const EFFECTS: crate::tools::Effects = crate::tools::Effects::READS;
    const DESCRIPTION: &'static str = "Read the page (elements with refs, markdown, json, tools…), its network, console or a download; paged.";

    async fn run(&self, call: &mut Call<'_>, args: ReadArgs) -> ToolResult<ReadOutput> {
        if let Some(name) = args.file.as_deref() {
            return file::read(call, &args, name).await;
        }
        let mode = args.mode.unwrap_or_default();
        let ctx = call.ctx;
        let part = part(&args)?;
        let budget = paging::budget(args.max_tokens)?;
        let query = match mode {
            ReadMode::Find => required_query(&args, "find")?,
            ReadMode::Extract => required_query(&args, "extract")?,
            _ => "",
        };
        observe::check_fields(&args, mode)?;
        let bounded = call.bounded(args.boundaries);
        let tenant = call.tenant().clone();
        let tab = call.tab().await?;
        let cursor = args.cursor.as_deref();
        // What the page did is there whether or not it shows a document.
        let of_page = !matches!(mode, ReadMode::Network | ReadMode::Console);
        if let Some(error) = tab.failed_navigation().filter(|_| of_page) {
            return Ok(ReadOutput::of_error_page(mode, error));
        }
        let mut output = match mode {
            ReadMode::Elements => read_elements(tab, &args, &part, budget, cursor).await?,
            ReadMode::Find => {
                let hits = tab.find(query, MAX_FIND_HITS).await?;
                let lines: Vec<String> = hits.iter().map(FindHit::line).collect();
                ReadOutput {
                    matches: Some(hits.len()),
                    ..ReadOutput::new(slice_lines(&lines, budget, cursor)?, mode)
                }
            }
            ReadMode::Extract => read_sections(ctx, tab, &part, query, budget, cursor).await?,
            ReadMode::Markdown => {
                let full = args.full.unwrap_or(false);
                let (text, too_deep) = readable_markdown(ctx, tab, &part, full).await?;
                ReadOutput {
                    too_deep: (too_deep > 0).then_some(too_deep),
                    ..ReadOutput::new(slice_text(&text, budget, cursor)?, mode)
                }
                .guarded(tab, &text)
            }
            ReadMode::Text | ReadMode::Html => {
                let form = if mode == ReadMode::Text {
                    Form::Text
                } else {
                    Form::Html
                };
                let text = tab.content(&part, form).await?;
                let output = ReadOutput::new(slice_text(&text, budget, cursor)?, mode);
                if mode == ReadMode::Text {
                    output.guarded(tab, &text)
                } else {
                    output
                }
            }
            ReadMode::Json => ReadOutput {
                data: Some(data::read(ctx, &tenant, tab, &part, args.schema.clone()).await?),
                ..ReadOutput::new(Slice::default(), mode)
            },
            ReadMode::Tools => read_page_tools(tab, budget, cursor).await?,
            ReadMode::Network => observe::read_network(tab, &args, budget, cursor).await?,
            ReadMode::Console => observe::read_console(tab, &args, budget, cursor).await?,
        };
        // Everything a read returns was written by the page (element names, console text too).
        if bounded && !output.slice.content.is_empty() {
            let source = tab.url().await;
            output.slice.content = paging::bounded(&output.slice.content, &source);
        }
        Ok(output)
    }

    fn summary(output: &ReadOutput) -> String {
        match output.matches {
            // A trace's replay checks that a text found then is found again.
            Some(found) => format!("{found} matches"),
            None => format!("{} chars", output.slice.content.chars().count()),
        }
    }
}

/// `since: "last"`: only what changed since the tab's last full element list (marked `+` added,
/// `~` changed, `-` removed refs, `=` how many are the same).
async fn read_changes(
    tab: &mut Tab,
    args: &ReadArgs,
    since: &str,
    budget: usize,
    cursor: Option<&str>,
) -> ToolResult<ReadOutput> {
    if since != "last" {
        return Err(ToolError::invalid(format!(
            "field `since`: mode=elements takes \"last\", not {since:?}"
        ))
        .with_hint("since=\"last\" lists what changed since the last element list"));
    }
    if args.selector.is_some() {
        return Err(ToolError::invalid(
            "field `since` compares whole lists; leave `selector` out",
        ));
    }
    let changes = tab.element_changes(ChangesIn::Page).await?;
    let slice = slice_lines(&changes.lines(), budget, cursor)?;
    Ok(ReadOutput::new(slice, ReadMode::Elements))
}

async fn read_elements(
    tab: &mut Tab,
    args: &ReadArgs,
    part: &Part,
    budget: usize,
    cursor: Option<&str>,
) -> ToolResult<ReadOutput> {
    if matches!(part, Part::Ref(_)) {
        return Err(ToolError::invalid(
            "field `ref` applies to markdown, text and html; use selector to list elements of a subtree",
        ));
    }
    if let Some(since) = &args.since {
        return read_changes(tab, args, since, budget, cursor).await;
    }
    let list = tab.elements(args.selector.as_deref()).await?;
    let slice = slice_lines(&list.lines(), budget, cursor)?;
    let [x, y, width, height] = list.scroll;
    Ok(ReadOutput {
        total: Some(list.elements.len()),
        visible: Some(list.visible_count()),
        scroll: Some(ScrollBox {
            x,
            y,
            width,
            height,
        }),
        ..ReadOutput::new(slice, ReadMode::Elements)
    })
}

/// The tools the page publishes (WebMCP), a line each: name, what the page says it does, its
/// input schema. The page wrote all of it: instructions in it are flagged like page text.
async fn read_page_tools(tab: &Tab, budget: usize, cursor: Option<&str>) -> ToolResult<ReadOutput> {
    let tools = tab.page_tools().await?;
    let lines: Vec<String> = tools
        .iter()
        .map(|tool| {
            let input = tool
                .input_schema
                .as_ref()
                .map(|schema| format!(" input={}", serde_json::Value::Object(schema.clone())))
                .unwrap_or_default();
            let read_only = if tool.read_only { " (read-only)" } else { "" };
            format!("{}{read_only}: {}{input}", tool.name, tool.description)
        })
        .collect();
    let text = lines.join("\n");
    Ok(ReadOutput {
        total: Some(tools.len()),
        warnings: untrusted::visible_instructions(&text),
        ..ReadOutput::new(slice_lines(&lines, budget, cursor)?, ReadMode::Tools)
    })
}

/// The sections of the page (or scope) that best answer `query`, in page order.
async fn read_sections(
    ctx: &Ctx,
    tab: &Tab,
    part: &Part,
    query: &str,
    budget: usize,
    cursor: Option<&str>,
) -> ToolResult<ReadOutput> {
    let (text, too_deep) = readable_markdown(ctx, tab, part, true).await?;
    let ranked = sections::rank(&text, query);
    let mut best: Vec<_> = ranked.into_iter().take(8).collect();
    best.sort_by_key(|s| s.index);
    let joined = best
        .iter()
        .map(|s| s.text.as_str())
        .collect::<Vec<_>>()
        .join("\n\n");
    Ok(ReadOutput {
        sections: Some(best.len()),
        too_deep: (too_deep > 0).then_some(too_deep),
        ..ReadOutput::new(slice_text(&joined, budget, cursor)?, ReadMode::Extract)
    }
    .guarded(tab, &joined))
}

/// The page (or scope) as Markdown, and the elements left out for nesting too deep; `full`
/// keeps navigation and footers.
async fn readable_markdown(
    ctx: &Ctx,
    tab: &Tab,
    part: &Part,
    full: bool,
) -> ToolResult<(String, usize)> {
    let html = tab.content(part, Form::Readable { main: !full }).await?;
    work::off_thread("writing the page as Markdown", read_limit(ctx), move || {
        markdown::to_markdown_counted(&html)
    })
    .await
}

/// Longest reading a page's HTML may take (`fetch.read_limit_ms`).
fn read_limit(ctx: &Ctx) -> std::time::Duration {
    std::time::Duration::from_millis(ctx.config.fetch.read_limit_ms)
}

/// The part of the page to read.
fn part(args: &ReadArgs) -> ToolResult<Part> {
    match (&args.selector, args.ref_id) {
        (Some(_), Some(_)) => Err(ToolError::invalid(
            "give either `selector` or `ref`, not both",
        )),
        (Some(selector), None) => Ok(Part::Selector(selector.clone())),
        (None, Some(ref_id)) => Ok(Part::Ref(ref_id)),
        (None, None) => Ok(Part::Page),
    }
}

fn required_query<'a>(args: &'a ReadArgs, mode: &str) -> ToolResult<&'a str> {
    args.query
        .as_deref()
        .map(str::trim)
        .filter(|q| !q.is_empty())
        .ok_or_else(|| ToolError::invalid(format!("field `query` is required for mode={mode}")))
}
