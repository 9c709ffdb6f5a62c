//! Documents that are not web pages, read like pages: Word, Excel and PowerPoint (OOXML and the
//! legacy binary formats), OpenDocument text, spreadsheets and presentations, EPUB books, and
//! CSV/TSV tables — as Markdown or text with their metadata, and a spreadsheet's rows as JSON
//! objects by header.
//!
//! Every reader works on bytes already fetched (size-capped by the client) and treats the file
//! as hostile: zip archives are read within entry-count, size and inflation-ratio caps
//! (`package.rs`), macros are never run (only reported), external links never fetched, a panic
//! deep in a parser is a broken document. `pages` runs `read` on the blocking pool under a time
//! cap.

mod budget;
mod delimited;
mod epub;
mod office;
mod opendocument;
mod package;

pub use package::Package;

use budget::Budget;

use std::borrow::Cow;
use std::panic::AssertUnwindSafe;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use url::Url;

use super::escape_html as escape;
use super::extract::{self, ExtractKind, Extracted, TextFormat};
use crate::error::{ErrorCode, ToolError, ToolResult};

/// The kinds of document read here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DocumentKind {
    Docx,
    Xlsx,
    Pptx,
    Doc,
    Xls,
    Ppt,
    Odt,
    Ods,
    Odp,
    Epub,
    Csv,
    Tsv,
}

impl DocumentKind {
    fn is_spreadsheet(self) -> bool {
        matches!(
            self,
            Self::Xlsx | Self::Xls | Self::Ods | Self::Csv | Self::Tsv
        )
    }
}

/// Who made a document, what it calls itself and when, as it says (PDFs and the others).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Authorship {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    /// When it was made (a PDF's as RFC 3339), as the document says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
}

/// What is known of a document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DocumentInfo {
    pub kind: DocumentKind,
    #[serde(flatten)]
    pub made: Authorship,
    /// Its sheets, slides or chapters, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sections: Vec<String>,
    /// It carries macros (never run).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub macros: bool,
    /// Where reading stopped: the document yields more cells or text than one read takes, and
    /// what follows that place is left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut: Option<String>,
}

impl DocumentInfo {
    fn new(kind: DocumentKind) -> Self {
        Self {
            kind,
            made: Authorship::default(),
            sections: Vec::new(),
            macros: false,
            cut: None,
        }
    }
}

/// One table of a spreadsheet: its name and its cells' text, row by row.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sheet {
    pub name: String,
    pub rows: Vec<Vec<String>>,
}

/// A document read: its content as asked for, what is known of it, and its sheets' cells.
pub struct Document {
    pub extracted: Extracted,
    html: Option<String>,
    pub info: DocumentInfo,
    pub sheets: Vec<Sheet>,
}

impl Document {
    /// Its HTML (for its links, or selectors): a workbook's is written only when asked for.
    pub fn html(&self) -> Cow<'_, str> {
        html_of(self.html.as_deref(), &self.info, &self.sheets)
    }
}

/// A document's HTML: the reader's, or its sheets' tables.
fn html_of<'a>(html: Option<&'a str>, info: &DocumentInfo, sheets: &[Sheet]) -> Cow<'a, str> {
    match html {
        Some(html) => Cow::Borrowed(html),
        None => Cow::Owned(html_document(
            info.made.title.as_deref(),
            &sheets_html(sheets),
        )),
    }
}

/// What a body is, if it is a document read here: by its media type, by the signature and parts
/// of a zip package or an OLE compound file, or by the URL's extension where the server only
/// said "binary".
pub fn kind_of(mime: &str, url: &Url, body: &[u8]) -> Option<DocumentKind> {
    use DocumentKind::*;
    let extension = url
        .path()
        .rsplit('/')
        .next()
        .and_then(|name| name.rsplit_once('.'))
        .map(|(_, ext)| ext.to_ascii_lowercase())
        .unwrap_or_default();
    let by_mime = match mime {
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document" => Some(Docx),
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet" => Some(Xlsx),
        "application/vnd.openxmlformats-officedocument.presentationml.presentation" => Some(Pptx),
        "application/msword" => Some(Doc),
        "application/vnd.ms-excel" => Some(Xls),
        "application/vnd.ms-powerpoint" => Some(Ppt),
        "application/vnd.oasis.opendocument.text" => Some(Odt),
        "application/vnd.oasis.opendocument.spreadsheet" => Some(Ods),
        "application/vnd.oasis.opendocument.presentation" => Some(Odp),
        "application/epub+zip" => Some(Epub),
        "text/csv" | "application/csv" => Some(Csv),
        "text/tab-separated-values" => Some(Tsv),
        _ => None,
    };
    // A server that names the type is believed, except that an OOXML name on an OLE file (or
    // the reverse) is the other generation of the same format.
    if let Some(kind) = by_mime {
        return Some(package::generation(kind, body));
    }
    let generic = matches!(
        mime,
        "" | "application/octet-stream"
            | "binary/octet-stream"
            | "application/zip"
            | "application/x-zip-compressed"
            | "application/download"
            | "application/force-download"
    );
    if package::is_zip(body) && (generic || mime == "application/x-zip") {
        return package::zip_kind(body);
    }
    if package::is_ole(body) && generic {
        return match extension.as_str() {
            "doc" | "dot" => Some(Doc),
            "xls" | "xlt" => Some(Xls),
            "ppt" | "pps" | "pot" => Some(Ppt),
            _ => package::ole_kind(body),
        };
    }
    let plain = generic || mime == "text/plain";
    match extension.as_str() {
        "csv" if plain => Some(Csv),
        "tsv" | "tab" if plain => Some(Tsv),
        _ => None,
    }
}

/// Reads a document as `kind` in `format`; blocking, so call it off the async threads.
/// `extract=main` is the whole document (a document has no boilerplate to drop).
pub fn read(
    bytes: &[u8],
    kind: DocumentKind,
    extract_kind: ExtractKind,
    format: TextFormat,
    base: &Url,
) -> ToolResult<Document> {
    std::panic::catch_unwind(AssertUnwindSafe(|| {
        read_kind(bytes, kind, extract_kind, format, base)
    }))
    .unwrap_or_else(|_| {
        Err(unreadable(
            kind,
            "its structure is broken (the reader gave up)",
        ))
    })
}

fn read_kind(
    bytes: &[u8],
    kind: DocumentKind,
    extract_kind: ExtractKind,
    format: TextFormat,
    base: &Url,
) -> ToolResult<Document> {
    if package::is_encrypted(bytes) {
        return Err(unreadable(kind, "it is encrypted with a password"));
    }
    let mut budget = Budget::default();
    let mut parsed = read_within(bytes, kind, &mut budget).map_err(|why| unreadable(kind, &why))?;
    parsed.info.cut = budget.into_cut();
    Ok(parsed.render(extract_kind, format, base))
}

/// A document read by its kind's reader, within `budget`.
fn read_within(bytes: &[u8], kind: DocumentKind, budget: &mut Budget) -> Result<Parsed, String> {
    match kind {
        DocumentKind::Odt | DocumentKind::Ods | DocumentKind::Odp => {
            opendocument::read(bytes, kind, budget)
        }
        DocumentKind::Epub => epub::read(bytes, budget),
        DocumentKind::Csv | DocumentKind::Tsv => delimited::read(bytes, kind, budget),
        _ => office::read(bytes, kind, budget),
    }
}

/// What a reader makes of a file: its HTML (none for a table: made from its sheets when a view
/// needs it), its Markdown where the reader writes it better, what is known of it, its sheets.
struct Parsed {
    html: Option<String>,
    markdown: Option<String>,
    info: DocumentInfo,
    sheets: Vec<Sheet>,
}

impl Parsed {
    fn render(self, kind: ExtractKind, format: TextFormat, base: &Url) -> Document {
        let kind = match kind {
            ExtractKind::Main => ExtractKind::Full,
            other => other,
        };
        let mut extracted = match self.markdown {
            Some(markdown) if kind == ExtractKind::Full && format == TextFormat::Markdown => {
                Extracted {
                    content: markdown,
                    ..Extracted::default()
                }
            }
            _ => {
                let html = html_of(self.html.as_deref(), &self.info, &self.sheets);
                extract::extract(&html, base, kind, format)
            }
        };
        if let Some(title) = self
            .info
            .made
            .title
            .clone()
            .filter(|t| !t.trim().is_empty())
        {
            extracted.title = title;
        }
        Document {
            extracted,
            html: self.html,
            info: self.info,
            sheets: self.sheets,
        }
    }
}

/// The refusal for a file that cannot be read, naming the kind and why.
fn unreadable(kind: DocumentKind, why: &str) -> ToolError {
    ToolError::new(
        ErrorCode::Upstream,
        format!("the {} document cannot be read: {why}", kind_name(kind)),
    )
    .with_hint(
        "check the URL points at the whole file (not a login or preview page); an encrypted \
         file needs its password removed first",
    )
}

fn kind_name(kind: DocumentKind) -> &'static str {
    match kind {
        DocumentKind::Docx => "Word (.docx)",
        DocumentKind::Xlsx => "Excel (.xlsx)",
        DocumentKind::Pptx => "PowerPoint (.pptx)",
        DocumentKind::Doc => "Word (.doc)",
        DocumentKind::Xls => "Excel (.xls)",
        DocumentKind::Ppt => "PowerPoint (.ppt)",
        DocumentKind::Odt => "OpenDocument text (.odt)",
        DocumentKind::Ods => "OpenDocument spreadsheet (.ods)",
        DocumentKind::Odp => "OpenDocument presentation (.odp)",
        DocumentKind::Epub => "EPUB",
        DocumentKind::Csv => "CSV",
        DocumentKind::Tsv => "TSV",
    }
}

/// A spreadsheet's rows as JSON objects keyed by its header row, per sheet: `[{"sheet": name,
/// "rows": [{header: value}]}]`. The header is the first row at least half as full as the
/// fullest row (a title merged across the columns above it is not). A cell that reads as a
/// number is a JSON number when it prints back the same (`007` stays text); empty cells are
/// left out.
pub fn rows_json(sheets: &[Sheet]) -> Value {
    let filled = |row: &Vec<String>| row.iter().filter(|c| !c.is_empty()).count();
    Value::Array(
        sheets
            .iter()
            .map(|sheet| {
                let widest = sheet.rows.iter().map(filled).max().unwrap_or(0);
                let mut rows = sheet
                    .rows
                    .iter()
                    .skip_while(|row| filled(row) == 0 || filled(row) * 2 < widest);
                let header = headers(rows.next().map(Vec::as_slice).unwrap_or_default());
                let objects = rows
                    .filter(|row| row.iter().any(|cell| !cell.is_empty()))
                    .map(|row| row_object(&header, row))
                    .collect();
                serde_json::json!({"sheet": sheet.name, "rows": Value::Array(objects)})
            })
            .collect(),
    )
}

/// Column names from a header row: blank or repeated ones get their column's letter.
fn headers(row: &[String]) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    (0..row.len())
        .map(|i| {
            let name = row[i].trim();
            if name.is_empty() || !seen.insert(name.to_string()) {
                column_letter(i)
            } else {
                name.to_string()
            }
        })
        .collect()
}

fn row_object(header: &[String], row: &[String]) -> Value {
    let mut object = Map::new();
    for (i, cell) in row.iter().enumerate().filter(|(_, c)| !c.is_empty()) {
        let key = header.get(i).cloned().unwrap_or_else(|| column_letter(i));
        object.insert(key, cell_value(cell));
    }
    Value::Object(object)
}

fn cell_value(cell: &str) -> Value {
    match cell.parse::<f64>() {
        Ok(n) if n.is_finite() && number_text(n) == cell => {
            if n.fract() == 0.0 && n.abs() < 1e15 {
                serde_json::json!(n as i64)
            } else {
                serde_json::json!(n)
            }
        }
        _ => Value::String(cell.to_string()),
    }
}

/// A number as a spreadsheet shows it unformatted: integers without a fraction.
fn number_text(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

/// A column's letter name, as spreadsheets show it: A … Z, AA …
fn column_letter(mut index: usize) -> String {
    let mut name = Vec::new();
    loop {
        name.push(b'A' + (index % 26) as u8);
        if index < 26 {
            break;
        }
        index = index / 26 - 1;
    }
    name.reverse();
    String::from_utf8(name).unwrap_or_default()
}

/// Sheets as HTML tables, each under a heading with its name when it has one.
fn sheets_html(sheets: &[Sheet]) -> String {
    let mut html = String::new();
    for sheet in sheets {
        if !sheet.name.is_empty() {
            html.push_str(&format!("<h2>{}</h2>", escape(&sheet.name)));
        }
        html.push_str(&table_html(&sheet.rows));
    }
    html
}

/// Sheets as Markdown tables under their names, written directly: a 50,000-row sheet through
/// HTML and back would cost more than reading it.
fn sheets_markdown(sheets: &[Sheet]) -> String {
    let mut markdown = String::new();
    for sheet in sheets {
        if !sheet.name.is_empty() {
            markdown.push_str(&format!("## {}\n\n", sheet.name));
        }
        let width = sheet.rows.iter().map(Vec::len).max().unwrap_or(0).max(1);
        for (i, row) in sheet.rows.iter().enumerate() {
            markdown.push('|');
            for column in 0..width {
                let cell = row.get(column).map(String::as_str).unwrap_or_default();
                markdown.push(' ');
                markdown.push_str(&cell.replace('|', "\\|").replace(['\n', '\r'], " "));
                markdown.push_str(" |");
            }
            markdown.push('\n');
            if i == 0 {
                markdown.push_str(&"| --- ".repeat(width));
                markdown.push_str("|\n");
            }
        }
        markdown.push('\n');
    }
    markdown
}

/// Rows of cell text as an HTML table, the first row as its header.
fn table_html(rows: &[Vec<String>]) -> String {
    let width = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut html = String::from("<table>");
    for (i, row) in rows.iter().enumerate() {
        let cell = if i == 0 { "th" } else { "td" };
        html.push_str("<tr>");
        for column in 0..width {
            let value = row.get(column).map(String::as_str).unwrap_or_default();
            html.push_str(&format!("<{cell}>{}</{cell}>", escape(value)));
        }
        html.push_str("</tr>");
    }
    html.push_str("</table>");
    html
}

/// A whole HTML document around a body, titled.
fn html_document(title: Option<&str>, body: &str) -> String {
    format!(
        "<!doctype html><html><head><title>{}</title></head><body>{body}</body></html>",
        escape(title.unwrap_or_default())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sheet(rows: &[&[&str]]) -> Sheet {
        Sheet {
            name: "Prices".into(),
            rows: rows
                .iter()
                .map(|r| r.iter().map(|c| c.to_string()).collect())
                .collect(),
        }
    }

    #[test]
    fn rows_are_objects_by_header_with_numbers_that_print_back() {
        let rows = rows_json(&[sheet(&[
            &["", ""],
            &["item", "price", "", "item"],
            &["apple", "1.5", "x", "007"],
            &["", "", "", ""],
            &["pear", "2"],
        ])]);
        assert_eq!(
            rows,
            serde_json::json!([{"sheet": "Prices", "rows": [
                {"item": "apple", "price": 1.5, "C": "x", "D": "007"},
                {"item": "pear", "price": 2},
            ]}])
        );
    }

    #[test]
    fn column_letters_go_past_z() {
        assert_eq!(column_letter(0), "A");
        assert_eq!(column_letter(25), "Z");
        assert_eq!(column_letter(26), "AA");
        assert_eq!(column_letter(701), "ZZ");
        assert_eq!(column_letter(702), "AAA");
    }

    #[test]
    fn kinds_from_type_signature_and_extension() {
        let url = Url::parse("https://example.com/files/report.csv").unwrap();
        assert_eq!(
            kind_of("text/plain", &url, b"a,b\n1,2"),
            Some(DocumentKind::Csv)
        );
        assert_eq!(kind_of("text/html", &url, b"<html>"), None);
        let tsv = Url::parse("https://example.com/x.tsv").unwrap();
        assert_eq!(
            kind_of("text/tab-separated-values", &tsv, b"a\tb"),
            Some(DocumentKind::Tsv)
        );
        let page = Url::parse("https://example.com/").unwrap();
        assert_eq!(kind_of("application/octet-stream", &page, b"plain"), None);
    }
}
