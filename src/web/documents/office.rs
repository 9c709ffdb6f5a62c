//! Microsoft Office files, current (OOXML: .docx, .xlsx, .pptx) and legacy (.doc, .xls, .ppt),
//! read with `office_oxide` under its strict limits for untrusted input (zip and memory caps,
//! an incomplete result refused). One conversion to its document model gives the Markdown,
//! the HTML other views are extracted from, the metadata and a legacy workbook's cells. An
//! `.xlsx` workbook is read from its parsed cells instead: the document model stops at 10,000
//! rows a sheet, and a sheet's rows are what a reader of a workbook wants, all of them.

use std::io::Cursor;

use office_oxide::ir::{Element, inline_to_text};
use office_oxide::options::ParseOptions;
use office_oxide::xlsx::{CellValue, XlsxDocument};
use office_oxide::{Document, DocumentFormat, DocumentIR};

use super::{
    Authorship, DocumentInfo, DocumentKind, Parsed, Sheet, html_document, number_text,
    sheets_markdown,
};

pub(super) fn read(bytes: &[u8], kind: DocumentKind) -> Result<Parsed, String> {
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
        return Ok(workbook_read(workbook));
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
        sheets(&ir)
    } else {
        Vec::new()
    };
    Ok(Parsed {
        html: Some(html_document(info.made.title.as_deref(), &ir.to_html())),
        markdown: Some(ir.to_markdown()),
        info,
        sheets,
    })
}

/// An `.xlsx` workbook from its cells: every row of every sheet, a formula's cached result, a
/// date as ISO 8601.
fn workbook_read(workbook: &XlsxDocument) -> Parsed {
    let strings = &workbook.shared_strings;
    let sheets: Vec<Sheet> = workbook
        .worksheets
        .iter()
        .map(|sheet| {
            let mut rows: Vec<Vec<String>> = Vec::with_capacity(sheet.rows.len());
            for row in &sheet.rows {
                let at = row.index.saturating_sub(1) as usize;
                if at >= rows.len() {
                    rows.resize(at.min(rows.len() + 1_000), Vec::new());
                }
                let mut cells = Vec::new();
                for cell in &row.cells {
                    let column = cell.reference.col as usize;
                    if column >= cells.len() {
                        cells.resize(column.min(cells.len() + 1_000), String::new());
                    }
                    cells.push(match &cell.value {
                        CellValue::Empty => String::new(),
                        CellValue::Number(n) => number_text(*n),
                        CellValue::String(text) | CellValue::Error(text) => text.clone(),
                        CellValue::SharedString(i) => {
                            strings.get(*i).unwrap_or_default().to_string()
                        }
                        CellValue::Boolean(b) => b.to_string(),
                        CellValue::Date(date) => date.to_iso_string(),
                    });
                }
                rows.push(cells);
            }
            Sheet {
                name: sheet.name.clone(),
                rows,
            }
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
