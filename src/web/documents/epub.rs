//! EPUB books: the package file named by `META-INF/container.xml` gives the metadata and the
//! reading order (the spine); each chapter is XHTML, so the chapters' bodies are joined into
//! one HTML document and read as a page is. Only the package's own parts are read: a chapter's
//! links to elsewhere stay links, never fetched.

use std::collections::HashMap;

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

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

pub(super) fn read(bytes: &[u8]) -> Result<Parsed, String> {
    let mut package = Package::open(bytes)?;
    let container = package.text("META-INF/container.xml")?;
    let opf_path = first_attribute(&container, "rootfile", "full-path")
        .ok_or("META-INF/container.xml names no package file")?;
    let opf = read_opf(&package.text(&opf_path)?);
    let folder = opf_path
        .rsplit_once('/')
        .map(|(dir, _)| format!("{dir}/"))
        .unwrap_or_default();
    let mut body = String::new();
    let mut sections = Vec::new();
    for id in &opf.spine {
        let Some(href) = opf.manifest.get(id) else {
            continue;
        };
        let path = resolve_path(&folder, href);
        let Ok(chapter) = package.text(&path) else {
            continue;
        };
        if let Some(title) = chapter_title(&chapter) {
            sections.push(title);
        }
        body.push_str(&format!("<section>{}</section>", body_of(&chapter)));
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
}
