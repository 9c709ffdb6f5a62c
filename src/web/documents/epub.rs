//! EPUB books: the package file named by `META-INF/container.xml` gives the metadata and the
//! reading order (the spine); each chapter is XHTML, so the chapters' bodies are joined into
//! one HTML document and read as a page is. Only the package's own parts are read: a chapter's
//! links to elsewhere stay links, never fetched. Each part is read once, however often the spine
//! lists it, and the chapters' text draws on the document's budget: past it, reading stops.

use std::collections::{HashMap, HashSet};

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

use super::budget::{Budget, cut_text};
use super::package::Package;
use super::{Authorship, DocumentInfo, DocumentKind, Parsed, html_document};

/// The package file: metadata, the manifest (id → path, type) and the spine.
#[derive(Default)]
struct Opf {
    title: Option<String>,
    author: Option<String>,
    date: Option<String>,
    manifest: HashMap<String, String>,
    spine: Vec<String>,
}

pub(super) fn read(bytes: &[u8], budget: &mut Budget) -> Result<Parsed, String> {
    let mut package = Package::open(bytes)?;
    let container = package.text("META-INF/container.xml")?;
    let opf_path = first_attribute(&container, "rootfile", "full-path")
        .ok_or("META-INF/container.xml names no package file")?;
    let opf = read_opf(&package.text(&opf_path)?);
    let folder = opf_path
        .rsplit_once('/')
        .map(|(dir, _)| format!("{dir}/"))
        .unwrap_or_default();
    let (mut body, mut sections, mut read) = (String::new(), Vec::new(), HashSet::new());
    for (number, id) in opf.spine.iter().enumerate() {
        let Some(href) = opf.manifest.get(id) else {
            continue;
        };
        let path = resolve_path(&folder, href);
        if budget.is_cut() || !read.insert(path.clone()) {
            continue;
        }
        let Ok(chapter) = package.text(&path) else {
            continue;
        };
        let mut text = body_of(&chapter).to_string();
        let left = budget.text_left();
        if !budget.text(text.len(), || format!("chapter {} ({path})", number + 1)) {
            cut_text(&mut text, left);
        }
        if let Some(title) = chapter_title(&chapter) {
            sections.push(title);
        }
        body.push_str(&format!("<section>{text}</section>"));
    }
    if body.is_empty() {
        return Err("its spine names no chapter the package holds".into());
    }
    let info = DocumentInfo {
        made: Authorship {
            title: opf.title,
            author: opf.author,
            created: opf.date,
        },
        sections,
        ..DocumentInfo::new(DocumentKind::Epub)
    };
    Ok(Parsed {
        html: Some(html_document(info.made.title.as_deref(), &body)),
        markdown: None,
        info,
        sheets: Vec::new(),
    })
}

fn read_opf(xml: &str) -> Opf {
    let mut opf = Opf::default();
    let mut reader = Reader::from_str(xml);
    let mut open: Vec<String> = Vec::new();
    while let Ok(event) = reader.read_event() {
        match event {
            Event::Start(e) => {
                item(&e, &mut opf);
                open.push(e.local_name().as_ref().to_string());
            }
            Event::Empty(e) => item(&e, &mut opf),
            Event::End(_) => {
                open.pop();
            }
            Event::Text(text) => {
                let value = Some(text.xml10_content().trim().to_string()).filter(|v| !v.is_empty());
                let slot = match open.last().map(String::as_str) {
                    Some("title") => &mut opf.title,
                    Some("creator") => &mut opf.author,
                    Some("date") => &mut opf.date,
                    _ => continue,
                };
                if slot.is_none() {
                    *slot = value;
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    opf
}

/// A manifest item or a spine reference, into the package file's model.
fn item(e: &BytesStart, opf: &mut Opf) {
    let get = |name: &str| {
        e.try_get_attribute(name).ok().flatten().and_then(|a| {
            a.normalized_value(quick_xml::XmlVersion::Implicit1_0)
                .ok()
                .map(|v| v.into_owned())
        })
    };
    match e.local_name().as_ref() {
        "item" => {
            if let (Some(id), Some(href)) = (get("id"), get("href")) {
                opf.manifest.insert(id, href);
            }
        }
        "itemref" => opf.spine.extend(get("idref")),
        _ => {}
    }
}

/// The first `name` attribute of an element called `element` in `xml`.
fn first_attribute(xml: &str, element: &str, name: &str) -> Option<String> {
    let mut reader = Reader::from_str(xml);
    while let Ok(event) = reader.read_event() {
        match event {
            Event::Start(e) | Event::Empty(e) if e.local_name().as_ref() == element => {
                return e.try_get_attribute(name).ok().flatten().and_then(|a| {
                    a.normalized_value(quick_xml::XmlVersion::Implicit1_0)
                        .ok()
                        .map(|v| v.into_owned())
                });
            }
            Event::Eof => return None,
            _ => {}
        }
    }
    None
}

/// A manifest `href` (relative to the package file, percent-encoded) as a path in the zip.
fn resolve_path(folder: &str, href: &str) -> String {
    let href = href.split('#').next().unwrap_or_default();
    let decoded = percent_encoding::percent_decode_str(href).decode_utf8_lossy();
    let mut parts: Vec<&str> = folder.split('/').filter(|p| !p.is_empty()).collect();
    for part in decoded.split('/') {
        match part {
            ".." => {
                parts.pop();
            }
            "." | "" => {}
            part => parts.push(part),
        }
    }
    parts.join("/")
}

/// What is inside a chapter's `<body>`, or the whole chapter when it has none.
fn body_of(chapter: &str) -> &str {
    let lower = chapter.to_ascii_lowercase();
    let start = lower
        .find("<body")
        .and_then(|at| lower[at..].find('>').map(|end| at + end + 1));
    let end = lower.rfind("</body>");
    match (start, end) {
        (Some(start), Some(end)) if start <= end => &chapter[start..end],
        _ => chapter,
    }
}

/// A chapter's `<title>`, when it has a non-empty one.
fn chapter_title(chapter: &str) -> Option<String> {
    let lower = chapter.to_ascii_lowercase();
    let start = lower.find("<title")?;
    let open_end = start + lower[start..].find('>')? + 1;
    let close = open_end + lower[open_end..].find("</title>")?;
    let title = chapter[open_end..close].trim();
    (!title.is_empty()).then(|| title.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_paths_resolve_against_the_package_folder() {
        assert_eq!(
            resolve_path("OEBPS/", "text/ch%201.xhtml#top"),
            "OEBPS/text/ch 1.xhtml"
        );
        assert_eq!(
            resolve_path("OEBPS/text/", "../ch2.xhtml"),
            "OEBPS/ch2.xhtml"
        );
        assert_eq!(resolve_path("", "ch3.xhtml"), "ch3.xhtml");
    }

    /// A book of `chapters` (id, file, text) in `spine` order.
    fn book(chapters: &[(&str, &str, &str)], spine: &[&str]) -> Vec<u8> {
        use std::io::Write;
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default();
        let manifest: String = chapters
            .iter()
            .map(|(id, file, _)| format!(r#"<item id="{id}" href="{file}"/>"#))
            .collect();
        let spine: String = spine
            .iter()
            .map(|id| format!(r#"<itemref idref="{id}"/>"#))
            .collect();
        let mut parts = vec![
            (
                "META-INF/container.xml".to_string(),
                r#"<container><rootfiles><rootfile full-path="content.opf"/></rootfiles></container>"#
                    .to_string(),
            ),
            (
                "content.opf".to_string(),
                format!("<package><manifest>{manifest}</manifest><spine>{spine}</spine></package>"),
            ),
        ];
        for (_, file, text) in chapters {
            let xhtml = format!(
                "<html><head><title>{file}</title></head><body><p>{text}</p></body></html>"
            );
            parts.push((file.to_string(), xhtml));
        }
        for (name, text) in parts {
            zip.start_file(name, options).unwrap();
            zip.write_all(text.as_bytes()).unwrap();
        }
        zip.finish().unwrap().into_inner()
    }

    #[test]
    fn a_chapter_listed_again_is_read_once_and_the_text_stops_at_the_budget() {
        let long = "word ".repeat(100);
        let chapters = [
            ("a", "a.xhtml", long.as_str()),
            ("b", "b.xhtml", long.as_str()),
            ("c", "c.xhtml", long.as_str()),
        ];
        let again = book(&chapters, &["a", "a", "b", "a", "b"]);
        let parsed = read(&again, &mut Budget::default()).unwrap();
        assert_eq!(parsed.info.sections, ["a.xhtml", "b.xhtml"]);

        let mut budget = Budget::new(10, 1_000);
        let parsed = read(&book(&chapters, &["a", "b", "c"]), &mut budget).unwrap();
        assert_eq!(
            parsed.info.sections,
            ["a.xhtml", "b.xhtml"],
            "c is past the budget"
        );
        assert_eq!(
            budget.into_cut().unwrap(),
            "at chapter 2 (b.xhtml): past the 1000 bytes of text a read takes"
        );
        let html = parsed.html.unwrap();
        assert!(html.len() < 1_200, "{} bytes", html.len());
    }
}
