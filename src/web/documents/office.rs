//! Microsoft Office files, current (OOXML: .docx, .xlsx, .pptx) and legacy (.doc, .xls, .ppt),
//! read with `office_oxide` under its strict limits for untrusted input (zip and memory caps,
//! an incomplete result refused). One conversion to its document model gives the Markdown,
//! the HTML other views are extracted from, the metadata and a legacy workbook's cells. An
//! `.xlsx` workbook is read from its parsed cells instead: the document model stops at 10,000
//! rows a sheet, and a sheet's rows are what a reader of a workbook wants, all of them (within
//! the document's budget of cells and text, as the text of the other formats is).

use std::io::Cursor;

use office_oxide::ir::{Element, inline_to_text};
use office_oxide::options::ParseOptions;
use office_oxide::xlsx::{CellValue, XlsxDocument};
use office_oxide::{Document, DocumentFormat, DocumentIR};

use super::budget::{Budget, Grid, cut_text};
use super::{
    Authorship, DocumentInfo, DocumentKind, Parsed, Sheet, html_document, number_text,
    sheets_markdown,
};

pub(super) fn read(
    bytes: &[u8],
    kind: DocumentKind,
    budget: &mut Budget,
) -> Result<Parsed, String> {
    let format = match kind {
        DocumentKind::Docx => DocumentFormat::Docx,
        DocumentKind::Xlsx => DocumentFormat::Xlsx,
        DocumentKind::Pptx => DocumentFormat::Pptx,
        DocumentKind::Doc => DocumentFormat::Doc,
        DocumentKind::Xls => DocumentFormat::Xls,
        DocumentKind::Ppt => DocumentFormat::Ppt,
        other => return Err(format!("{other:?} is not an Office format")),
    };
    let document =
        Document::from_reader_with(Cursor::new(bytes.to_vec()), format, &ParseOptions::strict())
            .map_err(|e| e.to_string())?;
    if let Some(workbook) = document.as_xlsx() {
        return Ok(workbook_read(workbook, budget));
    }
    let ir = document.to_ir();
    let metadata = &ir.metadata;
    let info = DocumentInfo {
        made: Authorship {
            title: metadata.title.clone(),
            author: metadata.author.clone(),
            created: metadata.created.clone(),
        },
        sections: ir
            .sections
            .iter()
            .filter_map(|section| section.title.clone())
            .collect(),
        macros: metadata.has_macros,
        ..DocumentInfo::new(kind)
    };
    let sheets = if kind.is_spreadsheet() {
        within(sheets(&ir), budget)
    } else {
        Vec::new()
    };
    let (mut html, mut markdown) = (ir.to_html(), ir.to_markdown());
    let left = budget.text_left();
    if !budget.text(markdown.len(), || "its text".to_string()) {
        cut_text(&mut html, left);
        cut_text(&mut markdown, left);
    }
    Ok(Parsed {
        html: Some(html_document(info.made.title.as_deref(), &html)),
        markdown: Some(markdown),
        info,
        sheets,
    })
}

/// An `.xlsx` workbook from its cells: every row of every sheet, a formula's cached result, a
/// date as ISO 8601.
fn workbook_read(workbook: &XlsxDocument, budget: &mut Budget) -> Parsed {
    let sheets: Vec<Sheet> = workbook
        .worksheets
        .iter()
        .map(|sheet| Sheet {
            name: sheet.name.clone(),
            rows: sheet_rows(workbook, sheet, budget),
        })
        .collect();
    let properties = workbook.core_properties.clone().unwrap_or_default();
    let info = DocumentInfo {
        made: Authorship {
            title: properties.title,
            author: properties.creator,
            created: properties.created,
        },
        sections: sheets.iter().map(|sheet| sheet.name.clone()).collect(),
        macros: workbook.has_macros,
        ..DocumentInfo::new(DocumentKind::Xlsx)
    };
    Parsed {
        html: None,
        markdown: Some(sheets_markdown(&sheets)),
        info,
        sheets,
    }
}

/// A worksheet's rows as far as `budget` holds them, a gap of empty rows or cells kept up to
/// 1,000 long.
fn sheet_rows(
    workbook: &XlsxDocument,
    sheet: &office_oxide::xlsx::Worksheet,
    budget: &mut Budget,
) -> Vec<Vec<String>> {
    let (mut rows, mut grid) = (Vec::new(), Grid::default());
    let at = |row| format!("sheet {:?}, row {row}", sheet.name);
    for row in &sheet.rows {
        let gap = (row.index.saturating_sub(1) as usize)
            .saturating_sub(rows.len())
            .min(1_000);
        let gap = budget.rows(&mut grid, (0, 0), gap, at);
        rows.resize(rows.len() + gap, Vec::new());
        // A row past what is left is refused whole below: it grows no further.
        let room = budget.cells_left() + 1;
        let mut cells = Vec::new();
        for cell in &row.cells {
            let column = (cell.reference.col as usize).min(cells.len() + 1_000);
            cells.resize(column.max(cells.len()).min(room), String::new());
            if cells.len() >= room {
                break;
            }
            cells.push(cell_text_of(workbook, &cell.value));
        }
        let text = cells.iter().map(String::len).sum();
        if budget.rows(&mut grid, (cells.len(), text), 1, at) == 0 {
            break;
        }
        rows.push(cells);
    }
    rows
}

/// A cell's value as text: a formula's cached result, a date as ISO 8601.
fn cell_text_of(workbook: &XlsxDocument, value: &CellValue) -> String {
    match value {
        CellValue::Empty => String::new(),
        CellValue::Number(n) => number_text(*n),
        CellValue::String(text) | CellValue::Error(text) => text.clone(),
        CellValue::SharedString(i) => workbook
            .shared_strings
            .get(*i)
            .unwrap_or_default()
            .to_string(),
        CellValue::Boolean(b) => b.to_string(),
        CellValue::Date(date) => date.to_iso_string(),
    }
}

/// `sheets`' rows as far as `budget` holds them: the rest of a sheet and the rows of the sheets
/// after it are left out.
fn within(mut sheets: Vec<Sheet>, budget: &mut Budget) -> Vec<Sheet> {
    for sheet in &mut sheets {
        let (mut grid, name) = (Grid::default(), &sheet.name);
        let at = |row| format!("sheet {name:?}, row {row}");
        let fit = sheet.rows.iter().position(|row| {
            let text = row.iter().map(String::len).sum();
            budget.rows(&mut grid, (row.len(), text), 1, at) == 0
        });
        if let Some(kept) = fit {
            sheet.rows.truncate(kept);
        }
    }
    sheets
}

/// A workbook's sheets: each section's tables, cell text row by row, a merged cell's value in
/// its first column and the columns it spans left empty so the others stay in place.
fn sheets(ir: &DocumentIR) -> Vec<Sheet> {
    ir.sections
        .iter()
        .enumerate()
        .map(|(i, section)| Sheet {
            name: section
                .title
                .clone()
                .unwrap_or_else(|| format!("Sheet{}", i + 1)),
            rows: section
                .elements
                .iter()
                .filter_map(|element| match element {
                    Element::Table(table) => Some(table),
                    _ => None,
                })
                .flat_map(|table| &table.rows)
                .map(|row| {
                    row.cells
                        .iter()
                        .flat_map(|cell| {
                            let spanned = cell.col_span.max(1) as usize - 1;
                            std::iter::once(cell_text(&cell.content))
                                .chain(std::iter::repeat_n(String::new(), spanned))
                        })
                        .collect()
                })
                .collect(),
        })
        .collect()
}

fn cell_text(content: &[Element]) -> String {
    content
        .iter()
        .filter_map(|element| match element {
            Element::Paragraph(paragraph) => Some(inline_to_text(&paragraph.content)),
            Element::Heading(heading) => Some(inline_to_text(&heading.content)),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(" ")
        .trim()
        .to_string()
}
