//! CSV and TSV files: the encoding found as for pages (a byte-order mark, else UTF-8 when the
//! bytes are valid UTF-8, else windows-1252, what spreadsheet programs write), the delimiter
//! sniffed from the first records (the one that splits them into the same number of fields,
//! most of them), quoted fields as RFC 4180 has them, with the `csv` crate. Records are taken
//! while the document's budget holds them: a wide or long file is cut, saying where.

use super::budget::{Budget, Grid};
use super::{DocumentInfo, DocumentKind, Parsed, Sheet, sheets_markdown};
use crate::web::charset;

/// How many records the delimiter is judged on.
const SNIFF_RECORDS: usize = 20;

pub(super) fn read(
    bytes: &[u8],
    kind: DocumentKind,
    budget: &mut Budget,
) -> Result<Parsed, String> {
    let (text, _) = charset::decode(bytes, None, false);
    let (text, too_wide) = narrow_enough(&text, budget.cells_left());
    let delimiter = match kind {
        DocumentKind::Tsv => b'\t',
        _ => sniff_delimiter(text),
    };
    let rows = records(text, delimiter, usize::MAX, budget);
    if let Some(line) = too_wide {
        budget.stop(true, || format!("line {line}"));
    }
    let sheet = Sheet {
        name: String::new(),
        rows,
    };
    let sheets = std::slice::from_ref(&sheet);
    Ok(Parsed {
        html: None,
        markdown: Some(sheets_markdown(sheets)),
        info: DocumentInfo::new(kind),
        sheets: vec![sheet],
    })
}

/// The text before its first line with at least `cells` delimiters (of any of the usual four),
/// and that line's number: a record that wide never fits, and the parser would hold a position
/// for each of its fields first.
fn narrow_enough(text: &str, cells: usize) -> (&str, Option<usize>) {
    let mut start = 0;
    for (number, line) in text.split_inclusive('\n').enumerate() {
        let delimiters = line
            .bytes()
            .filter(|b| matches!(b, b',' | b';' | b'\t' | b'|'))
            .count();
        if delimiters >= cells {
            return (&text[..start], Some(number + 1));
        }
        start += line.len();
    }
    (text, None)
}

/// Up to `limit` records, as many as `budget` holds.
fn records(text: &str, delimiter: u8, limit: usize, budget: &mut Budget) -> Vec<Vec<String>> {
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .has_headers(false)
        .flexible(true)
        .from_reader(text.as_bytes());
    let (mut rows, mut grid, mut record) = (Vec::new(), Grid::default(), csv::StringRecord::new());
    while rows.len() < limit && reader.read_record(&mut record).unwrap_or(false) {
        let shape = (record.len(), record.as_slice().len());
        if budget.rows(&mut grid, shape, 1, |row| format!("row {row}")) == 0 {
            break;
        }
        rows.push(
            record
                .iter()
                .map(|field| field.trim().to_string())
                .collect(),
        );
    }
    rows
}

/// The delimiter whose records have the most fields in the same number, among the usual four.
fn sniff_delimiter(text: &str) -> u8 {
    [b',', b';', b'\t', b'|']
        .into_iter()
        .max_by_key(|&delimiter| {
            let mut budget = Budget::default();
            let widths: Vec<usize> = records(text, delimiter, SNIFF_RECORDS, &mut budget)
                .iter()
                .map(Vec::len)
                .collect();
            let Some(&first) = widths.first() else {
                return 0;
            };
            let agreeing = widths.iter().filter(|&&w| w == first).count();
            if first < 2 { 0 } else { agreeing * first }
        })
        .unwrap_or(b',')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn semicolons_quotes_and_windows_1252() {
        let bytes = b"name;price;note\n\"Caf\xe9, large\";3,50;\"says \"\"hi\"\"\"\nTea;2;\n";
        let parsed = read(bytes, DocumentKind::Csv, &mut Budget::default()).unwrap();
        assert_eq!(
            parsed.sheets[0].rows,
            vec![
                vec!["name", "price", "note"],
                vec!["Café, large", "3,50", "says \"hi\""],
                vec!["Tea", "2", ""],
            ]
        );
    }

    #[test]
    fn a_single_column_stays_whole() {
        let parsed = read(
            b"word\nalpha\nbeta\n",
            DocumentKind::Csv,
            &mut Budget::default(),
        )
        .unwrap();
        assert_eq!(parsed.sheets[0].rows.len(), 3);
    }

    #[test]
    fn a_wide_csv_stops_at_the_budget_and_says_where() {
        let mut budget = Budget::new(1_000, 1_000_000);
        let row = format!("{}\n", vec!["x"; 30].join(","));
        let parsed = read(row.repeat(100).as_bytes(), DocumentKind::Csv, &mut budget).unwrap();
        assert_eq!(
            parsed.sheets[0].rows.len(),
            33,
            "33 rows of 30 cells fit 1,000"
        );
        assert_eq!(
            budget.into_cut().unwrap(),
            "at row 34: past the 1000 cells a read takes"
        );
        let mut budget = Budget::new(1_000, 1_000_000);
        let wide = format!("a,b\n{}\n", ",".repeat(5_000));
        let parsed = read(wide.as_bytes(), DocumentKind::Csv, &mut budget).unwrap();
        assert_eq!(parsed.sheets[0].rows, vec![vec!["a", "b"]]);
        assert!(budget.into_cut().unwrap().starts_with("at line 2:"));
    }
}
