//! CSV and TSV files: the encoding found as for pages (a byte-order mark, else UTF-8 when the
//! bytes are valid UTF-8, else windows-1252, what spreadsheet programs write), the delimiter
//! sniffed from the first records (the one that splits them into the same number of fields,
//! most of them), quoted fields as RFC 4180 has them, with the `csv` crate.

use super::{DocumentInfo, DocumentKind, Parsed, Sheet, sheets_markdown};
use crate::web::charset;

/// How many records the delimiter is judged on.
const SNIFF_RECORDS: usize = 20;

pub(super) fn read(bytes: &[u8], kind: DocumentKind) -> Result<Parsed, String> {
    let (text, _) = charset::decode(bytes, None, false);
    let delimiter = match kind {
        DocumentKind::Tsv => b'\t',
        _ => sniff_delimiter(&text),
    };
    let rows = records(&text, delimiter, usize::MAX);
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

fn records(text: &str, delimiter: u8, limit: usize) -> Vec<Vec<String>> {
    csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .has_headers(false)
        .flexible(true)
        .from_reader(text.as_bytes())
        .records()
        .take(limit)
        .map_while(Result::ok)
        .map(|record| {
            record
                .iter()
                .map(|field| field.trim().to_string())
                .collect()
        })
        .collect()
}

/// The delimiter whose records have the most fields in the same number, among the usual four.
fn sniff_delimiter(text: &str) -> u8 {
    [b',', b';', b'\t', b'|']
        .into_iter()
        .max_by_key(|&delimiter| {
            let widths: Vec<usize> = records(text, delimiter, SNIFF_RECORDS)
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
        let parsed = read(bytes, DocumentKind::Csv).unwrap();
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
        let parsed = read(b"word\nalpha\nbeta\n", DocumentKind::Csv).unwrap();
        assert_eq!(parsed.sheets[0].rows.len(), 3);
    }
}
