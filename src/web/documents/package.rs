//! Zip packages (OpenDocument, EPUB, OOXML) and OLE compound files told apart by their bytes,
//! and a zip's parts read within caps, so a small hostile file cannot make the reader inflate
//! gigabytes: at most `MAX_ENTRIES` entries, `MAX_PART_BYTES` per part, `MAX_PACKAGE_BYTES` in
//! all, and past `RATIO_FLOOR_BYTES` no part inflating more than `MAX_RATIO` times its stored
//! size. The caps count the bytes actually inflated, not what the archive claims.

use std::io::{Cursor, Read};

use zip::ZipArchive;

use super::DocumentKind;

const MAX_ENTRIES: usize = 10_000;
const MAX_PART_BYTES: u64 = 64 * 1024 * 1024;
const MAX_PACKAGE_BYTES: u64 = 256 * 1024 * 1024;
const RATIO_FLOOR_BYTES: u64 = 1024 * 1024;
const MAX_RATIO: u64 = 200;

const ZIP_MAGIC: &[u8] = b"PK\x03\x04";
const OLE_MAGIC: &[u8] = &[0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1];

pub(super) fn is_zip(body: &[u8]) -> bool {
    body.starts_with(ZIP_MAGIC)
}

pub(super) fn is_ole(body: &[u8]) -> bool {
    body.starts_with(OLE_MAGIC)
}

/// The kind a server named, moved to the other generation of the format when the bytes say so
/// (an `.xls` type on an OOXML zip is an `.xlsx`).
pub(super) fn generation(kind: DocumentKind, body: &[u8]) -> DocumentKind {
    use DocumentKind::*;
    match kind {
        Doc if is_zip(body) => Docx,
        Xls if is_zip(body) => Xlsx,
        Ppt if is_zip(body) => Pptx,
        Docx if is_ole(body) => Doc,
        Xlsx if is_ole(body) => Xls,
        Pptx if is_ole(body) => Ppt,
        other => other,
    }
}

/// What a zip package holds: an OpenDocument or EPUB by its `mimetype` part, an OOXML
/// document by its main part.
pub(super) fn zip_kind(body: &[u8]) -> Option<DocumentKind> {
    use DocumentKind::*;
    let mut package = Package::open(body).ok()?;
    if let Ok(mimetype) = package.text("mimetype") {
        return match mimetype.trim() {
            "application/vnd.oasis.opendocument.text" => Some(Odt),
            "application/vnd.oasis.opendocument.spreadsheet" => Some(Ods),
            "application/vnd.oasis.opendocument.presentation" => Some(Odp),
            "application/epub+zip" => Some(Epub),
            _ => None,
        };
    }
    [
        ("word/document.xml", Docx),
        ("xl/workbook.xml", Xlsx),
        ("ppt/presentation.xml", Pptx),
    ]
    .into_iter()
    .find(|(part, _)| package.has(part))
    .map(|(_, kind)| kind)
}

/// An OLE compound file's kind by the stream its application writes (`WordDocument`,
/// `Workbook`/`Book`, `PowerPoint Document`), named in UTF-16 in its directory.
pub(super) fn ole_kind(body: &[u8]) -> Option<DocumentKind> {
    let holds = |name: &str| holds_stream(body, name);
    if holds("WordDocument") {
        Some(DocumentKind::Doc)
    } else if holds("Workbook") || holds("Book") {
        Some(DocumentKind::Xls)
    } else if holds("PowerPoint Document") {
        Some(DocumentKind::Ppt)
    } else {
        None
    }
}

/// Whether an OLE compound file is an encrypted OOXML package (Office's password protection
/// wraps the zip in an `EncryptedPackage` stream).
pub(super) fn is_encrypted(body: &[u8]) -> bool {
    is_ole(body) && holds_stream(body, "EncryptedPackage")
}

/// Whether an OLE compound file's directory names a stream `name` (UTF-16).
fn holds_stream(body: &[u8], name: &str) -> bool {
    let needle: Vec<u8> = name.encode_utf16().flat_map(u16::to_le_bytes).collect();
    body.windows(needle.len()).any(|w| w == needle.as_slice())
}

/// A zip package being read, with what has been inflated from it so far (any zip a caller
/// hands in: documents, trace exports).
pub struct Package<'a> {
    archive: ZipArchive<Cursor<&'a [u8]>>,
    inflated: u64,
}

impl<'a> Package<'a> {
    pub fn open(body: &'a [u8]) -> Result<Self, String> {
        let archive =
            ZipArchive::new(Cursor::new(body)).map_err(|e| format!("not a zip package ({e})"))?;
        if archive.len() > MAX_ENTRIES {
            return Err(format!(
                "it holds {} parts, more than the {MAX_ENTRIES} read",
                archive.len()
            ));
        }
        Ok(Self {
            archive,
            inflated: 0,
        })
    }

    pub fn has(&mut self, name: &str) -> bool {
        self.archive.index_for_name(name).is_some()
    }

    /// A part's bytes, inflated within the caps.
    pub fn bytes(&mut self, name: &str) -> Result<Vec<u8>, String> {
        let mut part = self
            .archive
            .by_name(name)
            .map_err(|_| format!("the part {name} is missing"))?;
        let stored = part.compressed_size().max(1);
        let budget = MAX_PART_BYTES.min(MAX_PACKAGE_BYTES.saturating_sub(self.inflated));
        let mut bytes = Vec::new();
        (&mut part)
            .take(budget + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("the part {name} is damaged ({e})"))?;
        let size = bytes.len() as u64;
        if size > budget {
            return Err(format!(
                "the part {name} inflates past {} MiB (a zip bomb?)",
                budget / (1024 * 1024)
            ));
        }
        if size > RATIO_FLOOR_BYTES && size / stored > MAX_RATIO {
            return Err(format!(
                "the part {name} inflates {} times its stored size (a zip bomb?)",
                size / stored
            ));
        }
        self.inflated += size;
        Ok(bytes)
    }

    /// A part as UTF-8 text.
    pub fn text(&mut self, name: &str) -> Result<String, String> {
        String::from_utf8(self.bytes(name)?).map_err(|_| format!("the part {name} is not UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn zip_of(parts: &[(&str, &[u8])]) -> Vec<u8> {
        let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let deflated = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for (name, bytes) in parts {
            zip.start_file(*name, deflated).unwrap();
            zip.write_all(bytes).unwrap();
        }
        zip.finish().unwrap().into_inner()
    }

    #[test]
    fn kinds_by_mimetype_and_main_part() {
        let odt = zip_of(&[("mimetype", b"application/vnd.oasis.opendocument.text")]);
        assert_eq!(zip_kind(&odt), Some(DocumentKind::Odt));
        let xlsx = zip_of(&[
            ("[Content_Types].xml", b"<x/>"),
            ("xl/workbook.xml", b"<w/>"),
        ]);
        assert_eq!(zip_kind(&xlsx), Some(DocumentKind::Xlsx));
        assert_eq!(zip_kind(&zip_of(&[("a.txt", b"a")])), None);
    }

    #[test]
    fn a_part_inflating_too_far_is_refused() {
        let bomb = vec![0u8; 8 * 1024 * 1024];
        let body = zip_of(&[("content.xml", &bomb)]);
        let mut package = Package::open(&body).unwrap();
        let error = package.bytes("content.xml").unwrap_err();
        assert!(error.contains("zip bomb"), "{error}");
    }
}
