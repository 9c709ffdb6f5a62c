//! Bytes → text: the encoding comes from a byte-order mark, else the `Content-Type` charset,
//! else a `<meta>` declaration near the top of an HTML document, else UTF-8 when the bytes are
//! valid UTF-8 and windows-1252 (what browsers assume) when they are not.

use encoding_rs::{Encoding, UTF_8, WINDOWS_1252};

/// How far into a document `<meta charset>` is looked for (browsers look at 1024 bytes; real
/// pages put long `<head>` scripts first, so look further).
const META_SCAN_BYTES: usize = 8 * 1024;

/// Decodes `bytes`, returning the text and the encoding used.
pub fn decode(bytes: &[u8], content_type: Option<&str>, html: bool) -> (String, &'static str) {
    let encoding = Encoding::for_bom(bytes)
        .map(|(encoding, _)| encoding)
        .or_else(|| content_type.and_then(header_charset))
        .or_else(|| html.then(|| meta_charset(bytes)).flatten())
        .unwrap_or_else(|| {
            if std::str::from_utf8(bytes).is_ok() {
                UTF_8
            } else {
                WINDOWS_1252
            }
        });
    // `decode` strips a BOM and replaces malformed sequences rather than failing.
    let (text, used, _) = encoding.decode(bytes);
    (text.into_owned(), used.name())
}

fn header_charset(content_type: &str) -> Option<&'static Encoding> {
    content_type.split(';').skip(1).find_map(|param| {
        let (name, value) = param.split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| label(value))
            .flatten()
    })
}

/// `<meta charset="…">` or `<meta http-equiv="Content-Type" content="…; charset=…">`.
fn meta_charset(bytes: &[u8]) -> Option<&'static Encoding> {
    let head = &bytes[..bytes.len().min(META_SCAN_BYTES)];
    let head = String::from_utf8_lossy(head).to_ascii_lowercase();
    let mut rest = head.as_str();
    while let Some(start) = rest.find("<meta") {
        let tag_and_after = &rest[start + 5..];
        let tag = &tag_and_after[..tag_and_after.find('>').unwrap_or(tag_and_after.len())];
        if let Some(position) = tag.find("charset") {
            let value = tag[position + 7..].trim_start();
            if let Some(value) = value.strip_prefix('=') {
                let value = value.trim_start().trim_start_matches(['"', '\'']);
                let end = value
                    .find(|c: char| {
                        c == '"' || c == '\'' || c == ';' || c == '/' || c.is_whitespace()
                    })
                    .unwrap_or(value.len());
                if let Some(encoding) = label(&value[..end]) {
                    return Some(encoding);
                }
            }
        }
        rest = tag_and_after;
    }
    None
}

/// An encoding label; a document claiming UTF-16 in ASCII-compatible bytes is really UTF-8.
fn label(value: &str) -> Option<&'static Encoding> {
    let value = value.trim().trim_matches(['"', '\'']);
    let encoding = Encoding::for_label(value.as_bytes())?;
    Some(
        if encoding.is_single_byte() || encoding.output_encoding() == encoding {
            encoding
        } else {
            encoding.output_encoding()
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_wins_over_meta_and_bom_over_both() {
        let cyrillic = encoding_rs::WINDOWS_1251.encode("Привет").0.into_owned();
        let (text, used) = decode(&cyrillic, Some("text/html; charset=windows-1251"), true);
        assert_eq!((text.as_str(), used), ("Привет", "windows-1251"));

        let mut page = b"<html><head><meta charset=\"windows-1251\"></head><body>".to_vec();
        page.extend_from_slice(&cyrillic);
        let (text, used) = decode(&page, Some("text/html"), true);
        assert!(text.contains("Привет"), "{text}");
        assert_eq!(used, "windows-1251");

        let bom = [&[0xEF, 0xBB, 0xBF][..], "héllo".as_bytes()].concat();
        let (text, used) = decode(&bom, Some("text/html; charset=iso-8859-1"), true);
        assert_eq!((text.as_str(), used), ("héllo", "UTF-8"));
    }

    #[test]
    fn http_equiv_and_fallbacks() {
        let sjis = encoding_rs::SHIFT_JIS.encode("日本語").0.into_owned();
        let mut page =
            b"<meta http-equiv='Content-Type' content='text/html; charset=Shift_JIS'>".to_vec();
        page.extend_from_slice(&sjis);
        assert!(decode(&page, None, true).0.contains("日本語"));
        assert_eq!(decode("é".as_bytes(), None, true).1, "UTF-8");
        assert_eq!(decode(&[0xE9], None, true), ("é".into(), "windows-1252"));
    }
}
