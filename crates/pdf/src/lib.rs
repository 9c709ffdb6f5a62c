//! webpilot's PDF reader: a PDF as Markdown per page (headings from font sizes, paragraphs
//! re-flowed, tables as pipe tables) with `<!-- page N -->` markers, the document's metadata,
//! its link annotations, and a clear answer for what cannot be read (encrypted, broken).
//!
//! It runs as a process of its own (`webpilot-pdf`, see `main.rs`) that webpilot starts and
//! keeps for a few documents: a PDF is whatever a stranger's server sent, and a parser that
//! loops, panics or eats memory on one is killed with its process, not left inside the service.
//! Between documents it forgets what pdf_oxide caches across them (fonts, character maps), so
//! one document never shapes how another reads. It also keeps pdf_oxide (the largest crate of
//! the build) out of the service's build, so a first run serves before the reader is built.
//!
//! `pdf_oxide` parses. It was compared with `pdf-extract` on PDFs printed by Chromium from
//! webpilot's fixtures: `pdf-extract` split words at kerning (`N otes`), lost a table row and
//! every heading; `pdf_oxide` kept headings, reading order across columns and tables. Pages
//! convert in parallel (a document's pages share only the parsed file), and tables are looked
//! for only on pages that draw lines or boxes.

use std::panic::AssertUnwindSafe;

use pdf_oxide::PdfDocument;
use pdf_oxide::annotations::LinkAction;
use pdf_oxide::converters::ConversionOptions;
use pdf_oxide::object::Object;

pub use webpilot_pdf_wire::{Answer, Document, Job};

/// Does `job` on `bytes`, then forgets the document.
pub fn run(job: &Job, bytes: Vec<u8>) -> Answer {
    let answer = match job.pages_only {
        true => page_count(bytes),
        false => read(bytes, job),
    };
    forget();
    answer
}

/// Drops what pdf_oxide keeps from one document for the next (parsed fonts and character maps,
/// keyed by hashes a crafted document could aim at).
pub fn forget() {
    pdf_oxide::fonts::global_cache::clear_global_font_cache();
    pdf_oxide::fonts::cmap::clear_cmap_cache();
}

/// The pages of a PDF.
pub fn page_count(bytes: Vec<u8>) -> Answer {
    guarded(|| {
        let document = PdfDocument::from_bytes(bytes).map_err(|e| e.to_string())?;
        document
            .page_count()
            .map(Answer::Pages)
            .map_err(|e| e.to_string())
    })
}

/// Reads a PDF as asked.
pub fn read(bytes: Vec<u8>, job: &Job) -> Answer {
    guarded(|| read_document(bytes, job))
}

/// The parser is fed whatever a server sent; a panic deep in it is a broken document.
fn guarded(read: impl FnOnce() -> Result<Answer, String>) -> Answer {
    std::panic::catch_unwind(AssertUnwindSafe(read))
        .unwrap_or_else(|_| Err("the parser gave up on its structure".into()))
        .unwrap_or_else(Answer::Broken)
}

fn read_document(bytes: Vec<u8>, job: &Job) -> Result<Answer, String> {
    let document = PdfDocument::from_bytes(bytes).map_err(|e| e.to_string())?;
    if document.is_encrypted() && !document.is_authenticated() {
        return Ok(Answer::Encrypted);
    }
    let pages = document.page_count().map_err(|e| e.to_string())?;
    let mut read = Document {
        pages,
        title: info_string(&document, "Title"),
        author: info_string(&document, "Author"),
        created: info_string(&document, "CreationDate").and_then(|date| rfc3339(&date)),
        ..Document::default()
    };
    if job.with_links {
        read.links = link_uris(&document, pages)
            .into_iter()
            .map(|(uri, _)| uri)
            .collect();
    }
    read.content = if job.links_only {
        links(&document, pages)
    } else {
        let texts = pages_in_parallel(&document, pages, job.text)?;
        read.no_text_layer = pages > 0 && texts.iter().all(|text| text.trim().is_empty());
        join_pages(&texts)
    };
    read.title = read.title.or_else(|| first_heading(&read.content));
    Ok(Answer::Document(read))
}

/// The machine's cores, read once per process (a reader reads many documents, and the standard
/// library reads cgroup files to count them).
static CORES: std::sync::LazyLock<usize> =
    std::sync::LazyLock::new(|| std::thread::available_parallelism().map_or(1, usize::from));

/// Each page's text, converted on as many threads as the machine has cores.
fn pages_in_parallel(
    document: &PdfDocument,
    pages: usize,
    plain_text: bool,
) -> Result<Vec<String>, String> {
    let with_tables = ConversionOptions {
        detect_headings: true,
        extract_tables: true,
        include_images: false,
        ..Default::default()
    };
    // Table detection is half the work of a page; a page that draws no lines or boxes has no
    // ruled table, and its text reads as well without it.
    let without_tables = ConversionOptions {
        extract_tables: false,
        ..with_tables.clone()
    };
    let threads = (*CORES).min(pages.max(1));
    let convert = |page: usize| {
        let draws = document
            .extract_paths(page)
            .map_or(true, |paths| !paths.is_empty());
        let options = if draws { &with_tables } else { &without_tables };
        let text = if plain_text {
            document.to_plain_text(page, options)
        } else {
            document.to_markdown(page, options)
        };
        // One unreadable page leaves a gap, not an unreadable document.
        text.map(|text| tidy(&text)).unwrap_or_default()
    };
    let chunk = pages.div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..pages)
            .step_by(chunk)
            .map(|start| {
                let convert = &convert;
                scope.spawn(move || (start..(start + chunk).min(pages)).map(convert).collect())
            })
            .collect();
        let mut texts = Vec::with_capacity(pages);
        for worker in workers {
            let part: Vec<String> = worker
                .join()
                .map_err(|_| "the parser gave up on a page".to_string())?;
            texts.extend(part);
        }
        Ok(texts)
    })
}
/// Soft hyphens are where a word may break, not text; a line that ends in a hyphen inside a
/// word continues on the next.
fn tidy(text: &str) -> String {
    let text = text.replace('\u{ad}', "");
    let mut out = String::with_capacity(text.len());
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let next_starts_lower = lines
            .peek()
            .and_then(|next| next.trim_start().chars().next())
            .is_some_and(char::is_lowercase);
        let before_hyphen = line.trim_end().strip_suffix('-');
        match before_hyphen {
            Some(stem)
                if next_starts_lower && stem.chars().last().is_some_and(char::is_alphabetic) =>
            {
                out.push_str(stem);
                if let Some(next) = lines.next() {
                    out.push_str(next.trim_start());
                    out.push('\n');
                }
            }
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out.trim_end().to_string()
}

fn join_pages(texts: &[String]) -> String {
    let mut out = String::new();
    for (index, text) in texts.iter().enumerate() {
        if index > 0 {
            out.push_str("\n\n");
        }
        out.push_str(&format!("<!-- page {} -->\n\n", index + 1));
        out.push_str(text.trim());
    }
    out
}

/// Every link annotation's target, once per URL, with the page it is on.
fn links(document: &PdfDocument, pages: usize) -> String {
    let lines: Vec<String> = link_uris(document, pages)
        .into_iter()
        .map(|(uri, page)| format!("- [{uri}]({uri}) (page {page})"))
        .collect();
    lines.join("\n")
}

/// The URIs the document's link annotations lead to, once each, with the page (from 1) of the
/// first.
fn link_uris(document: &PdfDocument, pages: usize) -> Vec<(String, usize)> {
    let mut seen = std::collections::HashSet::new();
    let mut uris = Vec::new();
    for page in 0..pages {
        for annotation in document.get_annotations(page).unwrap_or_default() {
            if let Some(LinkAction::Uri(uri)) = annotation.action
                && seen.insert(uri.clone())
            {
                uris.push((uri, page + 1));
            }
        }
    }
    uris
}

fn first_heading(markdown: &str) -> Option<String> {
    markdown
        .lines()
        .find_map(|line| line.strip_prefix("# "))
        .map(|heading| heading.trim().to_string())
        .filter(|heading| !heading.is_empty())
}

/// A string of the document's Info dictionary (UTF-16 with its mark, else PDFDocEncoding,
/// which matches Latin-1 for text).
fn info_string(document: &PdfDocument, key: &str) -> Option<String> {
    let info = document
        .resolve_object(document.trailer().as_dict()?.get("Info")?)
        .ok()?;
    let value = document.resolve_object(info.as_dict()?.get(key)?).ok()?;
    let Object::String(bytes) = value else {
        return None;
    };
    let text = match bytes.strip_prefix(&[0xFE, 0xFF]) {
        Some(utf16) => {
            let units: Vec<u16> = utf16
                .chunks_exact(2)
                .map(|pair| u16::from_be_bytes([pair[0], pair[1]]))
                .collect();
            String::from_utf16_lossy(&units)
        }
        None => bytes.iter().map(|&b| char::from(b)).collect(),
    };
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// `D:YYYYMMDDHHmmSSOHH'mm` (later parts optional) as RFC 3339.
fn rfc3339(date: &str) -> Option<String> {
    let digits = date.strip_prefix("D:").unwrap_or(date);
    let part = |range: std::ops::Range<usize>, default: &'static str| {
        digits
            .get(range)
            .filter(|s| s.chars().all(|c| c.is_ascii_digit()))
            .unwrap_or(default)
    };
    let year = digits
        .get(0..4)
        .filter(|y| y.chars().all(|c| c.is_ascii_digit()))?;
    let zone = match digits.get(14..15) {
        Some("+" | "-") => {
            let sign = &digits[14..15];
            let hours = digits.get(15..17).unwrap_or("00");
            let minutes = digits.get(18..20).unwrap_or("00");
            format!("{sign}{hours}:{minutes}")
        }
        _ => "Z".into(),
    };
    Some(format!(
        "{year}-{}-{}T{}:{}:{}{zone}",
        part(4..6, "01"),
        part(6..8, "01"),
        part(8..10, "00"),
        part(10..12, "00"),
        part(12..14, "00"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pdf_dates_become_rfc3339() {
        assert_eq!(
            rfc3339("D:20261201233800+01'00'").as_deref(),
            Some("2026-12-01T23:38:00+01:00")
        );
        assert_eq!(rfc3339("D:2026").as_deref(), Some("2026-01-01T00:00:00Z"));
        assert_eq!(rfc3339("yesterday"), None);
    }

    #[test]
    fn words_broken_at_line_ends_are_joined() {
        assert_eq!(
            tidy("compre\u{ad}hensive docu-\nmentation of\nwell-\nKnown"),
            "comprehensive documentation of\nwell-\nKnown"
        );
    }

    #[test]
    fn garbage_is_broken_not_a_panic() {
        for bytes in [
            Vec::new(),
            b"%PDF-1.7\n".to_vec(),
            b"%PDF-1.4\n1 0 obj << /Type /Catalog".to_vec(),
        ] {
            assert!(matches!(
                read(bytes.clone(), &Job::default()),
                Answer::Broken(_) | Answer::Document(_)
            ));
            assert!(matches!(
                page_count(bytes),
                Answer::Broken(_) | Answer::Pages(_)
            ));
        }
    }
}
