//! Reading one web page as a service: a guarded HTTP GET, sniffing what came back, main-content
//! extraction and Markdown, paging to a token budget — and a browser render when HTTP alone
//! cannot show the page (a JavaScript shell, an empty body, a challenge page), saying so.
//!
//! `open_web_page` and the crawler both read pages here, with the same `PageOptions`. Each
//! browser render runs in a scratch session of its own (own cookies, closed after), at most
//! `crawl.browser_parallel` at once across all callers.

mod files;
mod markdown;
pub mod paging;
mod sniff;

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;
use url::Url;

use crate::browser::{Blocked, BrowserService, Destination, Form, Scope};
use crate::config::{Config, FetchConfig};
use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::tenancy::Tenant;
use crate::web::client::Fetched;
use crate::web::data::{DataRead, DataRequest, DataSource};
use crate::web::documents::DocumentInfo;
use crate::web::extract::{self, Article, ExtractKind, Extracted, Structured, TextFormat};
use crate::web::llm::LlmClient;
use crate::web::pdf::PdfInfo;
use crate::web::{WebService, shell, work};
use markdown::from_markdown;
pub use markdown::markdown_links;
use paging::slice_text;

use sniff::ContentClass;

/// How to read a page: what to extract, in which format, by which route, how much at once.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PageOptions {
    #[serde(default)]
    pub extract: ExtractKind,
    #[serde(default)]
    pub format: TextFormat,
    #[serde(default)]
    pub mode: FetchMode,
    /// Token budget of one slice; the default when absent.
    #[serde(default)]
    pub max_tokens: Option<usize>,
    /// extract=json: a declarative selector schema (`{base, fields}`), no model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selectors: Option<serde_json::Value>,
    /// extract=json: the JSON Schema the data is shaped by and checked against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<serde_json::Value>,
    /// Collect the page's links (`Page::links`), for a crawl that follows them.
    #[serde(skip)]
    #[schemars(skip)]
    pub links: bool,
}

impl PageOptions {
    /// What `extract=json` reads, from the tools' one `schema` argument (a selector schema or a
    /// JSON Schema): `extract` becomes `json` unless the call named it, and all is checked now,
    /// before anything is fetched.
    pub fn with_data(
        mut self,
        schema: Option<serde_json::Value>,
        extract_named: bool,
    ) -> ToolResult<Self> {
        if schema.is_some() && !extract_named {
            self.extract = ExtractKind::Json;
        }
        (self.selectors, self.schema) = crate::web::data::split_schema(schema);
        Reading::new(&self)?;
        Ok(self)
    }
}

// Which route reads the page: `auto` is HTTP, and the browser only when the page needs it (no
// schema description of its own: the tool list's size).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FetchMode {
    #[default]
    Auto,
    Http,
    Browser,
}

/// Which route produced a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    Http,
    /// The site answered with Markdown of its own (asked for first).
    Markdown,
    Browser,
}

/// One page read: a slice of its content and what is known of it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Page {
    /// The URL asked for.
    pub url: String,
    /// Where redirects ended.
    pub final_url: String,
    /// HTTP status of the document, when known.
    pub status: Option<u16>,
    pub title: String,
    /// This slice of the content.
    pub content: String,
    /// Characters of the whole content.
    pub content_length: usize,
    /// More content follows (`next_cursor`), or the body was cut at the size limit.
    pub truncated: bool,
    pub next_cursor: Option<String>,
    pub via: Via,
    pub extract: ExtractKind,
    pub format: TextFormat,
    /// Why the browser rendered the page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// The HTTP body was longer than the configured limit and was cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_truncated: Option<bool>,
    /// Article metadata (extract=main).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub article: Option<Article>,
    /// Meta tags and headings (extract=structured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<Structured>,
    /// What the page hides from a person, left out: characters of text, plus one per link,
    /// image or control.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden_text_dropped: Option<usize>,
    /// Elements nested more than 512 deep, left out with what they hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub too_deep: Option<usize>,
    /// The response was a PDF document: its pages and metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pdf: Option<PdfInfo>,
    /// The response was another document (Word, Excel, PowerPoint, OpenDocument, EPUB, CSV).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document: Option<DocumentInfo>,
    /// extract=json: the data read — by `selectors`, from what the page publishes (JSON-LD,
    /// microdata, Open Graph) or by the model, shaped by `schema`; a spreadsheet's rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_source: Option<DataSource>,
    /// Whether `data` satisfies `schema`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid: Option<bool>,
    /// What `schema` finds wrong with `data`, or why there is none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data_errors: Vec<String>,
    /// Tokens the model spent on `data`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_tokens: Option<u64>,
    /// The site's `Content-Signal` header: what it allows its content to be used for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_signal: Option<String>,
    /// The page's validators (`ETag`, `Last-Modified`): a later crawl asks whether it changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
    /// The site said the page has not changed since an earlier crawl read it (`304`): this is
    /// that read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unchanged: Option<bool>,
    /// What the URL policy refused while the browser rendered the page (frames, images,
    /// scripts, fetches of private addresses or denied domains).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked: Vec<Blocked>,
    /// The pages it links to, with each link's text (with `PageOptions::links`).
    #[serde(skip)]
    #[schemars(skip)]
    pub links: Vec<(String, String)>,
}

/// A plain file's fetch: its body, none (a 4xx answer), or a failure status.
pub enum Plain {
    Found(Vec<u8>),
    Missing,
    Failed(u16),
}

/// A page's text as one of the two routes produced it.
struct Loaded {
    final_url: Url,
    status: Option<u16>,
    extracted: Extracted,
    via: Via,
    why: Option<String>,
    body_truncated: bool,
    blocked: Vec<Blocked>,
    pdf: Option<PdfInfo>,
    document: Option<DocumentInfo>,
    data: Option<DataRead>,
    content_signal: Option<String>,
    validators: Validators,
    links: Vec<(String, String)>,
}

/// How one page is read, `extract=json`'s request checked: what the readers take.
#[derive(Clone)]
struct Reading {
    kind: ExtractKind,
    format: TextFormat,
    links: bool,
    data: Option<Arc<DataRequest>>,
    /// The model that reads the data (a schema, no selectors), when there is one: what the
    /// page publishes is not looked for then.
    model: Option<Arc<LlmClient>>,
    /// Longest the reading may take (`fetch.read_limit_ms`).
    limit: std::time::Duration,
}

impl Reading {
    fn new(options: &PageOptions) -> ToolResult<Self> {
        let asks_data = options.selectors.is_some() || options.schema.is_some();
        if asks_data && options.extract != ExtractKind::Json {
            return Err(ToolError::invalid(
                "fields `selectors` and `schema` go with extract=json",
            ));
        }
        let data = (options.extract == ExtractKind::Json)
            .then(|| DataRequest::new(options.selectors.as_ref(), options.schema.as_ref()))
            .transpose()?
            .map(Arc::new);
        Ok(Self {
            kind: options.extract,
            format: options.format,
            links: options.links,
            data,
            model: None,
            limit: std::time::Duration::from_millis(FetchConfig::default().read_limit_ms),
        })
    }

    /// This reading within `config`'s read limit.
    fn within(mut self, config: &Config) -> Self {
        self.limit = std::time::Duration::from_millis(config.fetch.read_limit_ms);
        self
    }

    /// An HTML document read as asked, on a reader thread within the read limit.
    async fn html_off_thread(
        &self,
        html: String,
        base: Url,
    ) -> ToolResult<(Extracted, Vec<(String, String)>, Option<DataRead>)> {
        let reading = self.clone();
        work::off_thread("reading the page", self.limit, move || {
            reading.html(&html, &base)
        })
        .await
    }

    /// This reading with the caller's model (if any) taking the data a schema asks for.
    fn with_model(mut self, model: Option<Arc<LlmClient>>) -> Self {
        let wanted = self.data.as_ref().is_some_and(|d| d.wants_model());
        self.model = model.filter(|_| wanted);
        self
    }

    /// An HTML document read as asked: its extraction, its links, its data. Blocking.
    fn html(&self, html: &str, base: &Url) -> (Extracted, Vec<(String, String)>, Option<DataRead>) {
        let links = if self.links {
            extract::link_targets(html, base)
        } else {
            Vec::new()
        };
        let data = self
            .data
            .as_ref()
            .filter(|_| self.model.is_none())
            .map(|request| request.from_html(&extract::shown(html), base));
        (
            extract::extract(html, base, self.kind, self.format),
            links,
            data,
        )
    }
}

/// What a later request asks the site about: has the page changed since?
#[derive(Default)]
struct Validators {
    etag: Option<String>,
    last_modified: Option<String>,
}

/// The page reader: HTTP client, browser and the render limit.
pub struct Pages {
    config: Arc<Config>,
    browser: Arc<BrowserService>,
    web: Arc<WebService>,
    renders: Semaphore,
}

impl Pages {
    pub fn new(config: Arc<Config>, browser: Arc<BrowserService>, web: Arc<WebService>) -> Self {
        let renders = Semaphore::new(config.crawl.browser_parallel);
        Self {
            config,
            browser,
            web,
            renders,
        }
    }

    /// Loads, extracts and pages one URL for `tenant` (under its policy), from `cursor` (a
    /// previous slice's `next_cursor`) on.
    pub async fn open(
        &self,
        tenant: &Arc<Tenant>,
        url: &str,
        options: &PageOptions,
        cursor: Option<&str>,
    ) -> ToolResult<Page> {
        self.open_since(tenant, url, options, cursor, None, || ())
            .await
    }

    /// `open`, calling `release` once HTTP is done with the page, before a browser render
    /// waits for its turn: a caller holding limits of its own (the crawler's per-host and global
    /// fetch permits) lets go of them there, so renders waiting for the render limit do not
    /// hold back plain fetches. With `previous`, an earlier read with validators, it asks first
    /// whether the page changed: when the site answers `304 Not Modified`, that read comes back,
    /// marked `unchanged`.
    pub async fn open_since(
        &self,
        tenant: &Arc<Tenant>,
        url: &str,
        options: &PageOptions,
        cursor: Option<&str>,
        previous: Option<Page>,
        release: impl FnOnce() + Send,
    ) -> ToolResult<Page> {
        crate::policy::check_length(url, "url")?;
        let url = Url::parse(url.trim())
            .map_err(|e| ToolError::invalid(format!("field `url` is not a URL ({e}): {url:?}")))?;
        tenant.policy().check_url(&url)?;
        let budget = paging::budget(options.max_tokens)?;
        let reading = Reading::new(options)?
            .with_model(self.web.model_for(tenant))
            .within(&self.config);
        let loaded = match options.mode {
            FetchMode::Browser => {
                release();
                self.render(tenant, &url, &reading, None).await?
            }
            mode => {
                let conditions = previous.as_ref().map(conditions).unwrap_or_default();
                let headers: Vec<(&str, &str)> =
                    conditions.iter().map(|(k, v)| (*k, v.as_str())).collect();
                let fetched = self
                    .web
                    .client
                    .get_with(&url, tenant.policy(), &headers)
                    .await?;
                if let (304, Some(previous)) = (fetched.status, previous) {
                    return Ok(Page {
                        unchanged: Some(true),
                        ..previous
                    });
                }
                match from_http(fetched, &reading, mode == FetchMode::Auto).await? {
                    Ok(loaded) => loaded,
                    Err(why) => {
                        release();
                        self.render(tenant, &url, &reading, Some(why)).await?
                    }
                }
            }
        };
        self.finish(&url, loaded, &reading, budget, cursor).await
    }

    /// A page loaded, made what was asked: its data (the model reading it when a schema asks)
    /// or one slice of its text from `cursor` on (a spreadsheet's rows are sliced whole).
    async fn finish(
        &self,
        url: &Url,
        mut loaded: Loaded,
        reading: &Reading,
        budget: usize,
        cursor: Option<&str>,
    ) -> ToolResult<Page> {
        if let Some(request) = &reading.data {
            with_model(reading.model.as_deref(), request, &mut loaded).await;
            loaded.extracted.content.clear();
        }
        let text_cursor = if reading.data.is_some() { None } else { cursor };
        let mut slice = slice_text(&loaded.extracted.content, budget, text_cursor)?;
        if let Some(read) = loaded
            .data
            .as_mut()
            .filter(|r| r.source == DataSource::Sheet)
        {
            let (rows, next) = paging::slice_rows(&read.data, budget, cursor)?;
            read.data = rows;
            slice.truncated = next.is_some();
            slice.next_cursor = next;
        }
        Ok(page(url, loaded, slice, reading.kind, reading.format))
    }

    /// The HTTP client's user agent.
    pub fn user_agent(&self) -> &str {
        &self.config.fetch.user_agent
    }

    /// A plain file (a robots.txt) for `tenant`, under its policy.
    pub async fn fetch_plain(&self, tenant: &Arc<Tenant>, url: &Url) -> ToolResult<Plain> {
        let fetched = self.web.client.get(url, tenant.policy()).await?;
        Ok(match fetched.status {
            200..=299 => Plain::Found(fetched.body),
            400..=499 => Plain::Missing,
            status => Plain::Failed(status),
        })
    }

    /// Renders `url` in a scratch session of its own and extracts from the live DOM.
    async fn render(
        &self,
        tenant: &Arc<Tenant>,
        url: &Url,
        reading: &Reading,
        why: Option<String>,
    ) -> ToolResult<Loaded> {
        self.web.client.check_target(url, tenant.policy()).await?;
        let timeout = std::time::Duration::from_millis(self.config.navigation_timeout_ms);
        let ends = tokio::time::Instant::now() + timeout;
        let turn = tokio::time::timeout_at(ends, self.renders.acquire())
            .await
            .map_err(|_| {
                ToolError::new(
                    ErrorCode::Limit,
                    format!(
                        "all {} browser renders stayed busy for {} ms",
                        self.config.crawl.browser_parallel,
                        timeout.as_millis()
                    ),
                )
                .with_hint("call again later, or read the page with mode=http")
            })?
            .map_err(|_| ToolError::internal("the render limit was closed"))?;
        let mut session = self
            .browser
            .scratch_session(tenant, "render", ends.into_std())
            .await?;
        let rendered = async {
            let tab = session.first_tab().await?;
            let left = ends.saturating_duration_since(tokio::time::Instant::now());
            let arrival = tab
                .navigate(Destination::Url(url.to_string()), None, left)
                .await?;
            // What a person sees: concealed text and elements are left out, and counted.
            let html = tab.content(&Scope::Page, Form::Shown).await?;
            let concealed = tab.take_concealed().dropped;
            let final_url = Url::parse(&tab.url().await).unwrap_or_else(|_| url.clone());
            Ok::<_, ToolError>((arrival.status, html, final_url, concealed))
        }
        .await;
        let blocked = session.take_blocked();
        // Closed whatever happened: no render leaves a context, a tab or a cookie behind.
        session.discard().await;
        drop(turn);
        let (status, html, final_url, concealed) = rendered?;
        let (mut extracted, links, data) = reading.html_off_thread(html, final_url.clone()).await?;
        let dropped = extracted.hidden_text_dropped.unwrap_or(0) + concealed;
        extracted.hidden_text_dropped = (dropped > 0).then_some(dropped);
        Ok(Loaded {
            links,
            data,
            final_url,
            status: status.and_then(|s| u16::try_from(s).ok()),
            extracted,
            via: Via::Browser,
            why: Some(why.unwrap_or_else(|| "mode=browser".into())),
            body_truncated: false,
            blocked,
            pdf: None,
            document: None,
            content_signal: None,
            validators: Validators::default(),
        })
    }
}

/// Extracts from an HTTP response; `Err(why)` when `escalate` and the page needs a browser.
async fn from_http(
    fetched: Fetched,
    reading: &Reading,
    escalate: bool,
) -> ToolResult<Result<Loaded, String>> {
    let (kind, format, want_links) = (reading.kind, reading.format, reading.links);
    let mime = fetched.mime();
    let loaded = |extracted| Loaded {
        final_url: fetched.final_url.clone(),
        status: Some(fetched.status),
        extracted,
        via: Via::Http,
        why: None,
        body_truncated: fetched.truncated,
        blocked: Vec::new(),
        pdf: None,
        document: None,
        data: None,
        content_signal: fetched.content_signal.clone(),
        validators: Validators {
            etag: fetched.etag.clone(),
            last_modified: fetched.last_modified.clone(),
        },
        links: Vec::new(),
    };
    if matches!(mime.as_str(), "text/markdown" | "text/x-markdown") {
        let markdown = fetched.text(false);
        let base = fetched.final_url.clone();
        let (extracted, links) =
            work::off_thread("reading the Markdown", reading.limit, move || {
                let links = want_links.then(|| markdown_links(&markdown, &base));
                (from_markdown(markdown, &base, kind, format), links)
            })
            .await?;
        return Ok(Ok(Loaded {
            via: Via::Markdown,
            links: links.unwrap_or_default(),
            ..loaded(extracted)
        }));
    }
    if let Some(file) = files::read(&fetched, &mime, reading).await? {
        return Ok(Ok(Loaded {
            pdf: file.pdf,
            document: file.document,
            data: file.data,
            links: file.links,
            ..loaded(file.extracted)
        }));
    }
    let html = match sniff::content_class(&mime, &fetched.body) {
        ContentClass::Html => fetched.text(true),
        ContentClass::Text => {
            return Ok(Ok(loaded(Extracted {
                content: fetched.text(false),
                ..Extracted::default()
            })));
        }
        ContentClass::Binary => return Err(sniff::not_a_page(&fetched.final_url, &mime)),
    };
    let (base, reading) = (fetched.final_url.clone(), reading.clone());
    let limit = reading.limit;
    let (read, why) = work::off_thread("reading the page", limit, move || {
        let why = escalate.then(|| shell::needs_browser(&html)).flatten();
        (why.is_none().then(|| reading.html(&html, &base)), why)
    })
    .await?;
    Ok(match (read, why) {
        (Some((extracted, links, data)), _) => Ok(Loaded {
            links,
            data,
            ..loaded(extracted)
        }),
        (None, why) => Err(why.unwrap_or_default()),
    })
}

/// `extract=json` with a schema and no selectors: the configured model reads the page's
/// text into data (over what the page publishes). Without a model, what was read stays; a
/// response that gave no data says why.
async fn with_model(model: Option<&LlmClient>, request: &DataRequest, loaded: &mut Loaded) {
    let is_sheet = matches!(&loaded.data, Some(read) if read.source == DataSource::Sheet);
    match model {
        Some(model) if !is_sheet => {
            let text = &loaded.extracted.content;
            let read =
                crate::web::data::model::extract(model, request, &loaded.final_url, text, None);
            loaded.data = Some(read.await);
        }
        _ if loaded.data.is_none() => {
            loaded.data = Some(request.nothing(
                "this response is text or a PDF, with no published data: configure a model \
                 ([llm]) to read it by a schema",
            ));
        }
        _ => {}
    }
}

/// The page as read: one slice of its content, what is known of it, its data.
fn page(
    url: &Url,
    loaded: Loaded,
    slice: paging::Slice,
    kind: ExtractKind,
    format: TextFormat,
) -> Page {
    let data = loaded.data;
    Page {
        url: url.to_string(),
        final_url: loaded.final_url.to_string(),
        status: loaded.status,
        title: loaded.extracted.title,
        content_length: loaded.extracted.content.chars().count(),
        content: slice.content,
        truncated: slice.truncated || loaded.body_truncated,
        next_cursor: slice.next_cursor,
        via: loaded.via,
        extract: kind,
        format,
        why: loaded.why,
        body_truncated: loaded.body_truncated.then_some(true),
        article: loaded.extracted.article,
        structured: loaded.extracted.structured,
        hidden_text_dropped: loaded.extracted.hidden_text_dropped,
        too_deep: loaded.extracted.too_deep,
        pdf: loaded.pdf,
        document: loaded.document,
        data_source: data.as_ref().map(|d| d.source),
        valid: data.as_ref().and_then(|d| d.valid),
        llm_tokens: data.as_ref().and_then(|d| d.llm_tokens),
        data_errors: data.as_ref().map(|d| d.errors.clone()).unwrap_or_default(),
        data: data.map(|d| d.data),
        content_signal: loaded.content_signal,
        etag: loaded.validators.etag,
        last_modified: loaded.validators.last_modified,
        unchanged: None,
        blocked: loaded.blocked,
        links: loaded.links,
    }
}

/// The conditional request headers for an earlier read's validators.
fn conditions(previous: &Page) -> Vec<(&'static str, String)> {
    let mut headers = Vec::new();
    if let Some(etag) = &previous.etag {
        headers.push(("if-none-match", etag.clone()));
    }
    if let Some(modified) = &previous.last_modified {
        headers.push(("if-modified-since", modified.clone()));
    }
    headers
}
