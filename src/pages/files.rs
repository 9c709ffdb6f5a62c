//! Responses that are files rather than pages — PDFs and office documents, books, tables — read
//! like pages within the read limit (`fetch.read_limit_ms`): past it the caller gets an answer.
//! A PDF's reader is a process, killed then; the other parsers run on a reader thread
//! (`work::off_thread`), told to stop.

use std::path::Path;

use url::Url;

use super::{Page, PageOptions, Pages, Reading, paging};
use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::tenancy::Tenant;
use crate::web::client::Fetched;
use crate::web::data::DataRead;
use crate::web::documents::{self, DocumentInfo, DocumentKind};
use crate::web::extract::{self, ExtractKind, Extracted};
use crate::web::pdf::{self, PdfInfo};
use crate::web::work;

/// A file read: its content, what is known of it, its data (`extract=json`) and its links (for
/// a crawl that follows them).
pub(super) struct FileRead {
    pub extracted: Extracted,
    pub pdf: Option<PdfInfo>,
    pub document: Option<DocumentInfo>,
    pub data: Option<DataRead>,
    pub links: Vec<(String, String)>,
}

impl Pages {
    /// A file saved on this machine (a session's download) read like a fetched page: by its
    /// signature and name, at most `[files] max_bytes` of it, from `cursor` on, for `tenant` (whose
    /// model reads its data).
    pub async fn read_file(
        &self,
        tenant: &Tenant,
        path: &Path,
        options: &PageOptions,
        cursor: Option<&str>,
    ) -> ToolResult<Page> {
        let budget = paging::budget(options.max_tokens)?;
        let reading = Reading::new(options)?
            .with_model(self.web.model_for(tenant))
            .within(&self.config);
        let url = Url::from_file_path(path).map_err(|()| {
            ToolError::internal(format!("{} is not an absolute path", path.display()))
        })?;
        let body = read_capped(path, self.config.files.max_bytes).await?;
        let fetched = Fetched {
            final_url: url.clone(),
            status: 200,
            content_type: None,
            content_signal: None,
            etag: None,
            last_modified: None,
            body,
            truncated: false,
        };
        // Without escalation the reader never asks for a browser.
        let mut loaded = super::from_http(fetched, &reading, false)
            .await?
            .map_err(ToolError::internal)?;
        loaded.status = None;
        self.finish(&url, loaded, &reading, budget, cursor).await
    }
}

impl Page {
    /// What `extract=json` read, whole again.
    pub fn data_read(&self) -> Option<DataRead> {
        Some(DataRead {
            data: self.data.clone().unwrap_or_default(),
            source: self.data_source?,
            valid: self.valid,
            errors: self.data_errors.clone(),
            llm_tokens: self.llm_tokens,
        })
    }
}

/// A file's bytes, refused past `max_bytes`.
async fn read_capped(path: &Path, max_bytes: u64) -> ToolResult<Vec<u8>> {
    let size = tokio::fs::metadata(path)
        .await
        .map_err(|e| ToolError::invalid(format!("{}: {e}", path.display())))?
        .len();
    if size > max_bytes {
        return Err(ToolError::new(
            ErrorCode::TooLarge,
            format!(
                "{} holds {size} bytes, more than the {max_bytes} a file read takes",
                path.display()
            ),
        )
        .with_hint("raise [files] max_bytes to read it"));
    }
    tokio::fs::read(path)
        .await
        .map_err(|e| ToolError::internal(format!("reading {}: {e}", path.display())))
}

/// A fetched file read, when the response is one: a PDF, or a document `documents` reads.
pub(super) async fn read(
    fetched: &Fetched,
    mime: &str,
    reading: &Reading,
) -> ToolResult<Option<FileRead>> {
    if pdf::is_pdf(mime, &fetched.body) {
        return pdf(fetched, reading).await.map(Some);
    }
    match documents::kind_of(mime, &fetched.final_url, &fetched.body) {
        Some(kind) => document(fetched, kind, reading).await.map(Some),
        None => Ok(None),
    }
}

/// A fetched PDF read, with the absolute targets of its link annotations when asked for.
async fn pdf(fetched: &Fetched, reading: &Reading) -> ToolResult<FileRead> {
    let (kind, format, with_links) = (text_kind(reading.kind), reading.format, reading.links);
    let read = pdf::read(fetched.body.clone(), kind, format, with_links);
    let read = tokio::time::timeout(reading.limit, read)
        .await
        .map_err(|_| {
            work::timed_out(
                &format!("reading the PDF at {}", fetched.final_url),
                reading.limit,
            )
        });
    let (extracted, mut info) = cut_body_explained(fetched, "PDF", read.flatten())?;
    let base = &fetched.final_url;
    let links = std::mem::take(&mut info.links)
        .into_iter()
        .filter_map(|uri| {
            base.join(&uri)
                .ok()
                .map(|url| (url.to_string(), String::new()))
        })
        .collect();
    Ok(FileRead {
        extracted,
        pdf: Some(info),
        document: None,
        data: None,
        links,
    })
}

/// A fetched document read as `kind`; with `extract=json`, its data (a spreadsheet's rows as
/// objects by header, or what selectors pick from its HTML).
async fn document(
    fetched: &Fetched,
    kind: DocumentKind,
    reading: &Reading,
) -> ToolResult<FileRead> {
    let (extract_kind, format, with_links) = (reading.kind, reading.format, reading.links);
    let request = reading.data.clone();
    let bytes = fetched.body.clone();
    let base = fetched.final_url.clone();
    let stage = format!("reading the document at {}", fetched.final_url);
    let read = work::off_thread(&stage, reading.limit, move || {
        let document = documents::read(&bytes, kind, text_kind(extract_kind), format, &base)?;
        let links = with_links.then(|| extract::link_targets(&document.html(), &base));
        let data = request.map(|request| {
            let rows =
                (!document.sheets.is_empty()).then(|| documents::rows_json(&document.sheets));
            request.from_document(&document.html(), &base, rows)
        });
        Ok((document, links, data))
    })
    .await;
    let (document, links, data) = cut_body_explained(fetched, "document", read.flatten())?;
    Ok(FileRead {
        extracted: document.extracted,
        pdf: None,
        document: Some(document.info),
        data,
        links: links.unwrap_or_default(),
    })
}

/// What text a file's `extract=json` read carries beside its data: the whole content.
fn text_kind(kind: ExtractKind) -> ExtractKind {
    match kind {
        ExtractKind::Json => ExtractKind::Main,
        other => other,
    }
}

/// A file's read, where a body cut at the fetch cap that does not read says so.
fn cut_body_explained<T>(fetched: &Fetched, what: &str, read: ToolResult<T>) -> ToolResult<T> {
    match read {
        Err(error) if fetched.truncated && error.code == ErrorCode::Upstream => Err(ToolError::new(
            ErrorCode::Upstream,
            format!(
                "{} is a {what} larger than the {} bytes a fetch reads, and its first part cannot be read alone",
                fetched.final_url,
                fetched.body.len()
            ),
        )
        .with_hint("download it with browser_interact action=download (larger cap) and read it with browser_read file=<its name>, or raise fetch.max_bytes")),
        read => read,
    }
}
