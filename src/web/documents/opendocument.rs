//! OpenDocument files (.odt text, .ods spreadsheets, .odp presentations): `content.xml` walked
//! once with `quick-xml` into HTML (headings by outline level, paragraphs, lists, links,
//! footnotes gathered at the end, tables, slides under their names with their notes) and a
//! spreadsheet's cells; `meta.xml` gives title, author and date. No crate reads ODF text well,
//! and the format is plain XML in a zip.
//!
//! Spreadsheets repeat rows and columns by count (`number-columns-repeated`): a sheet's
//! trailing empty cells are often "repeated" to column 16,384 and row 1,048,576, so empty
//! repeats count only when a value follows them, and a repeat is capped. Every copy draws on the
//! document's budget of cells and text (rows times columns, however they are repeated): a
//! few hundred bytes asking for a billion cells are read up to the budget and cut there.

use quick_xml::Reader;
use quick_xml::events::{BytesRef, BytesStart, Event};

use super::budget::{Budget, Grid};
use super::package::Package;
use super::{
    DocumentInfo, DocumentKind, Parsed, Sheet, escape, html_document, sheets_markdown, table_html,
};

/// Most copies made of one repeated row or cell that holds a value.
const MAX_REPEAT: usize = 1_000;

pub(super) fn read(
    bytes: &[u8],
    kind: DocumentKind,
    budget: &mut Budget,
) -> Result<Parsed, String> {
    let mut package = Package::open(bytes)?;
    let content = package.text("content.xml")?;
    let mut info = DocumentInfo::new(kind);
    if let Ok(meta) = package.text("meta.xml") {
        read_meta(&meta, &mut info);
    }
    let mut walker = Walker {
        spreadsheet: kind == DocumentKind::Ods,
        budget: std::mem::take(budget),
        ..Walker::default()
    };
    let walked = walker.walk(&content);
    *budget = std::mem::take(&mut walker.budget);
    walked?;
    info.sections = std::mem::take(&mut walker.sections);
    let body = walker.finish();
    Ok(Parsed {
        html: Some(html_document(info.made.title.as_deref(), &body)),
        // A spreadsheet's Markdown is its sheets' tables, written directly as a workbook's is.
        markdown: (kind == DocumentKind::Ods).then(|| sheets_markdown(&walker.sheets)),
        info,
        sheets: walker.sheets,
    })
}

fn read_meta(meta: &str, info: &mut DocumentInfo) {
    let mut reader = Reader::from_str(meta);
    let mut open = Vec::new();
    while let Ok(event) = reader.read_event() {
        match event {
            Event::Start(e) => open.push(e.local_name().as_ref().to_string()),
            Event::End(_) => {
                open.pop();
            }
            Event::Text(text) => {
                let value = Some(text.xml10_content().trim().to_string()).filter(|v| !v.is_empty());
                match open.last().map(String::as_str) {
                    Some("title") => info.made.title = info.made.title.take().or(value),
                    Some("initial-creator") | Some("creator") => {
                        info.made.author = info.made.author.take().or(value)
                    }
                    Some("creation-date") => info.made.created = info.made.created.take().or(value),
                    _ => {}
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
}

/// A table being read: its rows so far, the row being read, and empty rows and cells waiting
/// for a value after them.
#[derive(Default)]
struct TableState {
    sheet: Sheet,
    /// The rows' shape as the budget counts it.
    grid: Grid,
    row: Vec<String>,
    /// Bytes of text in `row`.
    row_text: usize,
    row_repeat: usize,
    empty_rows: usize,
    empty_cells: usize,
    cell_repeat: usize,
    cell_value: Option<String>,
}

impl TableState {
    /// A cell ended: its value (or its text) `cell_repeat` times after the empty cells before
    /// it. A row grows no further once it alone is past what `budget` has left: it is refused
    /// whole when it ends.
    fn end_cell(&mut self, text: String, budget: &Budget) {
        let value = self
            .cell_value
            .take()
            .unwrap_or_else(|| text.trim().to_string());
        if value.is_empty() {
            self.empty_cells = self.empty_cells.saturating_add(self.cell_repeat);
            return;
        }
        let room = (budget.cells_left() + 1).saturating_sub(self.row.len());
        if room == 0 || self.row_text > budget.text_left() {
            return;
        }
        let pending = std::mem::take(&mut self.empty_cells)
            .min(MAX_REPEAT)
            .min(room);
        self.row.extend(std::iter::repeat_n(String::new(), pending));
        let text_room = (budget.text_left() - self.row_text) / value.len() + 1;
        let copies = self
            .cell_repeat
            .min(MAX_REPEAT)
            .min(room - pending)
            .min(text_room);
        self.row_text += value.len() * copies;
        self.row.extend(std::iter::repeat_n(value, copies));
    }

    /// A row ended: the empty rows before it, then it `row_repeat` times, as many as `budget`
    /// holds.
    fn end_row(&mut self, budget: &mut Budget) {
        self.empty_cells = 0;
        let row = std::mem::take(&mut self.row);
        let text = std::mem::take(&mut self.row_text);
        if row.is_empty() {
            self.empty_rows = self.empty_rows.saturating_add(self.row_repeat);
            return;
        }
        let name = &self.sheet.name;
        let at = |row| format!("table {name:?}, row {row}");
        let pending = std::mem::take(&mut self.empty_rows).min(MAX_REPEAT);
        let pending = budget.rows(&mut self.grid, (0, 0), pending, at);
        let copies = self.row_repeat.min(MAX_REPEAT);
        let copies = budget.rows(&mut self.grid, (row.len(), text), copies, at);
        let rows = &mut self.sheet.rows;
        rows.extend(std::iter::repeat_n(Vec::new(), pending));
        rows.extend(std::iter::repeat_n(row, copies));
    }
}

/// `content.xml` read into HTML: `buffers` holds where text goes now (the body, a footnote, a
/// cell), `closers` what each open element writes when it ends.
#[derive(Default)]
struct Walker {
    spreadsheet: bool,
    buffers: Vec<String>,
    closers: Vec<Closer>,
    tables: Vec<TableState>,
    notes: Vec<String>,
    sheets: Vec<Sheet>,
    sections: Vec<String>,
    /// Inside a comment or tracked deletions: their text is not the document's.
    skipping: usize,
    /// What the document may yield; text outside tables is counted as it is written.
    budget: Budget,
    /// Paragraphs and headings begun, to say where the text was cut.
    paragraphs: usize,
}

enum Closer {
    Tag(&'static str),
    Heading(u8),
    Note,
    Cell,
    Row,
    Table,
    Skip,
}

impl Walker {
    fn walk(&mut self, content: &str) -> Result<(), String> {
        self.buffers.push(String::new());
        let mut reader = Reader::from_str(content);
        loop {
            match reader
                .read_event()
                .map_err(|e| format!("content.xml is not XML ({e})"))?
            {
                Event::Start(e) => self.start(&e),
                Event::Empty(e) => self.empty(&e),
                Event::End(_) => self.end(),
                Event::Text(text) => self.write_text(&text.xml10_content()),
                Event::GeneralRef(reference) => self.write_text(&resolve(&reference)),
                Event::Eof => return Ok(()),
                _ => {}
            }
        }
    }

    fn in_cell(&self) -> bool {
        matches!(
            self.closers
                .iter()
                .rev()
                .find(|c| matches!(c, Closer::Cell | Closer::Note)),
            Some(Closer::Cell)
        )
    }

    /// Writes where text goes now, counting it against the budget unless it is a cell's (a
    /// table's cells are counted with their rows).
    fn write(&mut self, html: &str) {
        if self.skipping > 0 {
            return;
        }
        let paragraph = self.paragraphs;
        if !self.in_cell()
            && !self
                .budget
                .text(html.len(), || format!("paragraph {paragraph}"))
        {
            return;
        }
        self.write_counted(html);
    }

    /// Writes text already counted.
    fn write_counted(&mut self, html: &str) {
        if let Some(buffer) = self.buffers.last_mut().filter(|_| self.skipping == 0) {
            buffer.push_str(html);
        }
    }

    fn write_text(&mut self, text: &str) {
        if self.in_cell() {
            self.write(text);
        } else {
            self.write(&escape(text));
        }
    }

    fn start(&mut self, e: &BytesStart) {
        let closer = self.open(e);
        self.closers.push(closer);
    }

    fn open(&mut self, e: &BytesStart) -> Closer {
        let cell = self.in_cell();
        let name = e.local_name();
        if !cell && matches!(name.as_ref(), "p" | "h") {
            self.paragraphs += 1;
        }
        match name.as_ref() {
            "h" if !cell => {
                let level = attribute(e, "text:outline-level")
                    .and_then(|l| l.parse::<u8>().ok())
                    .unwrap_or(1)
                    .clamp(1, 6);
                self.write(&format!("<h{level}>"));
                Closer::Heading(level)
            }
            "p" | "h" if cell => Closer::Tag(" "),
            "p" => self.tag("<p>", "</p>"),
            "list" if !cell => self.tag("<ul>", "</ul>"),
            "list-item" if !cell => self.tag("<li>", "</li>"),
            "a" if !cell => {
                let href = attribute(e, "xlink:href").unwrap_or_default();
                self.write(&format!("<a href=\"{}\">", escape(&href)));
                Closer::Tag("</a>")
            }
            "note-citation" => self.tag("<sup>[", "]</sup>"),
            "note-body" => {
                self.buffers.push(String::new());
                Closer::Note
            }
            "table" => {
                self.tables.push(TableState {
                    sheet: Sheet {
                        name: attribute(e, "table:name").unwrap_or_default(),
                        rows: Vec::new(),
                    },
                    ..TableState::default()
                });
                Closer::Table
            }
            "table-row" => {
                if let Some(table) = self.tables.last_mut() {
                    table.row_repeat = repeat(e, "table:number-rows-repeated");
                }
                Closer::Row
            }
            "table-cell" | "covered-table-cell" => {
                if let Some(table) = self.tables.last_mut() {
                    table.cell_repeat = repeat(e, "table:number-columns-repeated");
                    table.cell_value = cell_value(e);
                }
                self.buffers.push(String::new());
                Closer::Cell
            }
            "page" => {
                let name = attribute(e, "draw:name").unwrap_or_default();
                self.write(&format!("<h2>{}</h2>", escape(&name)));
                self.sections.push(name);
                Closer::Tag("")
            }
            "notes" => self.tag("<blockquote>", "</blockquote>"),
            "annotation" | "tracked-changes" => {
                self.skipping += 1;
                Closer::Skip
            }
            _ => Closer::Tag(""),
        }
    }

    fn tag(&mut self, open: &str, close: &'static str) -> Closer {
        self.write(open);
        Closer::Tag(close)
    }

    fn empty(&mut self, e: &BytesStart) {
        match e.local_name().as_ref() {
            "s" => {
                let count = attribute(e, "text:c")
                    .and_then(|c| c.parse().ok())
                    .unwrap_or(1usize);
                self.write(&" ".repeat(count.min(100)));
            }
            "tab" => self.write(" "),
            "line-break" => {
                let html = if self.in_cell() { " " } else { "<br>" };
                self.write(html);
            }
            "table-cell" | "covered-table-cell" | "table-row" | "table" => {
                self.start(e);
                self.end();
            }
            _ => {}
        }
    }

    fn end(&mut self) {
        match self.closers.pop() {
            Some(Closer::Tag(close)) => self.write(close),
            Some(Closer::Heading(level)) => self.write(&format!("</h{level}>")),
            Some(Closer::Note) => {
                let note = self.buffers.pop().unwrap_or_default();
                self.notes.push(note);
            }
            Some(Closer::Cell) => {
                let text = self.buffers.pop().unwrap_or_default();
                if let Some(table) = self.tables.last_mut() {
                    table.end_cell(text, &self.budget);
                }
            }
            Some(Closer::Row) => {
                if let Some(table) = self.tables.last_mut() {
                    table.end_row(&mut self.budget);
                }
            }
            Some(Closer::Table) => self.end_table(),
            Some(Closer::Skip) => self.skipping = self.skipping.saturating_sub(1),
            None => {}
        }
    }

    fn end_table(&mut self) {
        let Some(table) = self.tables.pop() else {
            return;
        };
        let sheet = table.sheet;
        if self.spreadsheet {
            self.write(&format!("<h2>{}</h2>", escape(&sheet.name)));
            self.sections.push(sheet.name.clone());
        }
        // Its cells were counted row by row.
        let html = table_html(&sheet.rows);
        self.write_counted(&html);
        if self.spreadsheet {
            self.sheets.push(sheet);
        }
    }

    /// The body, with the footnotes after it.
    fn finish(&mut self) -> String {
        let mut body = self.buffers.drain(..).next().unwrap_or_default();
        if !self.notes.is_empty() {
            body.push_str("<h2>Notes</h2><ol>");
            for note in &self.notes {
                body.push_str(&format!("<li>{note}</li>"));
            }
            body.push_str("</ol>");
        }
        body
    }
}

fn attribute(e: &BytesStart, name: &str) -> Option<String> {
    e.try_get_attribute(name).ok().flatten().and_then(|a| {
        a.normalized_value(quick_xml::XmlVersion::Implicit1_0)
            .ok()
            .map(|v| v.into_owned())
    })
}

fn repeat(e: &BytesStart, name: &str) -> usize {
    attribute(e, name)
        .and_then(|n| n.parse().ok())
        .unwrap_or(1usize)
        .max(1)
}

/// A number cell's value as stored (not as its format shows it): a formula's cached result, a
/// currency without its symbol.
fn cell_value(e: &BytesStart) -> Option<String> {
    match attribute(e, "office:value-type").as_deref() {
        Some("float" | "percentage" | "currency") => attribute(e, "office:value"),
        _ => None,
    }
}

/// The text an entity or character reference stands for.
fn resolve(reference: &BytesRef) -> String {
    if let Ok(Some(c)) = reference.resolve_char_ref() {
        return c.to_string();
    }
    match reference.xml10_content().as_ref() {
        "lt" => "<",
        "gt" => ">",
        "amp" => "&",
        "quot" => "\"",
        "apos" => "'",
        _ => "",
    }
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spreadsheet(rows: &str) -> String {
        format!(
            r#"<office:document-content xmlns:office="o" xmlns:table="t" xmlns:text="x"><office:body><office:spreadsheet><table:table table:name="S">{rows}</table:table></office:spreadsheet></office:body></office:document-content>"#
        )
    }

    fn walk(content: &str, budget: Budget) -> (Walker, Option<String>) {
        let mut walker = Walker {
            spreadsheet: true,
            budget,
            ..Walker::default()
        };
        walker.walk(content).unwrap();
        let cut = std::mem::take(&mut walker.budget).into_cut();
        (walker, cut)
    }

    #[test]
    fn repeated_rows_and_columns_draw_on_one_budget() {
        let row = r#"<table:table-row table:number-rows-repeated="1000000"><table:table-cell table:number-columns-repeated="1000000" office:value-type="float" office:value="7"/></table:table-row>"#;
        let (walker, cut) = walk(
            &spreadsheet(&row.repeat(50)),
            Budget::new(10_000, 1_000_000),
        );
        let rows = &walker.sheets[0].rows;
        // Rows of 1,000 cells (the repeat cap): ten of them fill 10,000 cells.
        assert_eq!(rows.len(), 10);
        assert!(rows.iter().all(|r| r.len() == 1_000));
        assert_eq!(
            cut.as_deref(),
            Some("at table \"S\", row 11: past the 10000 cells a read takes")
        );
    }

    #[test]
    fn text_past_the_budget_is_left_out() {
        let body = "<text:p>twenty bytes of text</text:p>".repeat(100);
        let content = format!(
            r#"<office:document-content xmlns:office="o" xmlns:text="x"><office:body><office:text>{body}</office:text></office:body></office:document-content>"#
        );
        let mut walker = Walker {
            budget: Budget::new(10, 500),
            ..Walker::default()
        };
        walker.walk(&content).unwrap();
        let html = walker.finish();
        assert!(html.len() <= 500, "{}", html.len());
        assert!(html.contains("twenty bytes"));
        let cut = std::mem::take(&mut walker.budget).into_cut().unwrap();
        assert!(cut.starts_with("at paragraph "), "{cut}");
    }
}
