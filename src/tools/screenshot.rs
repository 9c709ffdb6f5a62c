//! `browser_screenshot`: the viewport, the full page or one element, optionally annotated with
//! numbered boxes whose numbers are the refs of `browser_read mode=elements` — or the whole page
//! printed as a PDF document.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Call, Scope, SessionField, Tool};
use crate::browser::{ImageKind, LegendEntry, Paper, Printing, Shot};
use crate::error::{ToolError, ToolResult};

const PDF_MIME: &str = "application/pdf";

const GUIDE: &str = "browser_screenshot captures the viewport (or full_page, or one element by \
ref). annotate=true draws numbered boxes on interactive elements; the numbers are the refs of \
browser_read mode=elements and the legend lists them. format=pdf prints the whole page as a PDF \
(paper A4 or Letter, landscape).";

#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScreenshotArgs {
    /// Mark refs.
    pub annotate: Option<bool>,
    /// Whole page.
    pub full_page: Option<bool>,
    /// Only this element.
    #[serde(rename = "ref")]
    pub ref_id: Option<u32>,
    /// pdf prints the page.
    pub format: Option<Format>,
    /// pdf (default A4).
    pub paper: Option<Paper>,
    /// PDF: landscape.
    pub landscape: Option<bool>,
    /// JPEG/WebP 1-100 (default 80).
    #[schemars(range(min = 1, max = 100))]
    pub quality: Option<u8>,
    /// Pixels.
    #[schemars(range(min = 16))]
    pub max_width: Option<u32>,
    /// Also save in screenshots/.
    #[schemars(
        length(min = 1, max = 100),
        regex(pattern = r"^[A-Za-z0-9_-][A-Za-z0-9._-]*$")
    )]
    pub save: Option<String>,
    pub tab: Option<String>,
    pub session: Option<SessionField>,
}

shared_fields!(ScreenshotArgs { session, tab });

#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Png,
    Jpeg,
    Webp,
    Pdf,
}

/// The picture or document (beside this object), its size and legend.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ScreenshotOutput {
    /// The file's media type.
    format: &'static str,
    /// Image width (px).
    #[serde(skip_serializing_if = "Option::is_none")]
    width: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    height: Option<u32>,
    /// pdf: its pages.
    #[serde(skip_serializing_if = "Option::is_none")]
    pages: Option<usize>,
    bytes: usize,
    /// annotate: the numbered boxes, numbers = refs.
    #[serde(skip_serializing_if = "Option::is_none")]
    legend: Option<Vec<LegendEntry>>,
    /// save: where the file was written.
    #[serde(skip_serializing_if = "Option::is_none")]
    saved: Option<std::path::PathBuf>,
}

pub struct Screenshot;

#[async_trait]
impl Tool for Screenshot {
    type Args = ScreenshotArgs;
    type Output = ScreenshotOutput;
    const NAME: &'static str = "browser_screenshot";
    const RETURNS_IMAGE: bool = true;
    const GUIDE: &'static str = GUIDE;
    const EXAMPLE: &'static str = r#"{"annotate": true}"#;
    const SCOPE: Scope = Scope::Browser;
    const TITLE: &'static str = "Screenshot";
    const EFFECTS: crate::tools::Effects = crate::tools::Effects::READS;
    const DESCRIPTION: &'static str =
        "Screenshot viewport, page or element (annotate: by ref), or print to PDF.";

    async fn run(&self, call: &mut Call<'_>, args: ScreenshotArgs) -> ToolResult<ScreenshotOutput> {
        if let Some(Format::Pdf) = args.format {
            return print(call, &args).await;
        }
        if args.paper.is_some() || args.landscape.is_some() {
            return Err(ToolError::invalid(
                "`paper` and `landscape` are for format=pdf",
            ));
        }
        let shot = shot(&args)?;
        let save_path = save_path(call, &args, extension(shot.kind))?;
        let picture = call.tab().await?.capture(&shot).await?;
        if let Some(path) = &save_path {
            write_file(path, &picture.bytes)?;
            call.wrote(path.clone());
        }
        let output = ScreenshotOutput {
            format: picture.kind.mime(),
            width: Some(picture.width),
            height: Some(picture.height),
            pages: None,
            bytes: picture.bytes.len(),
            legend: picture.legend,
            saved: save_path,
        };
        call.image(picture.kind.mime(), picture.bytes);
        Ok(output)
    }

    fn summary(output: &ScreenshotOutput) -> String {
        format!("{} image", output.format)
    }
}

/// The page as a PDF document: the whole page, so no element, boxes or image options.
async fn print(call: &mut Call<'_>, args: &ScreenshotArgs) -> ToolResult<ScreenshotOutput> {
    let image_only = [
        (args.annotate.is_some(), "annotate"),
        (args.ref_id.is_some(), "ref"),
        (args.quality.is_some(), "quality"),
        (args.max_width.is_some(), "max_width"),
        (args.full_page == Some(false), "full_page=false"),
    ];
    if let Some((_, field)) = image_only.iter().find(|(given, _)| *given) {
        return Err(ToolError::invalid(format!(
            "`{field}` is for images; format=pdf always prints the whole page"
        )));
    }
    let save_path = save_path(call, args, "pdf")?;
    let printing = Printing {
        paper: args.paper.unwrap_or_default(),
        landscape: args.landscape.unwrap_or(false),
    };
    let document = call.tab().await?.print_pdf(printing).await?;
    if let Some(path) = &save_path {
        write_file(path, &document)?;
        call.wrote(path.clone());
    }
    let output = ScreenshotOutput {
        format: PDF_MIME,
        width: None,
        height: None,
        pages: crate::web::pdf::page_count(document.clone()).await,
        bytes: document.len(),
        legend: None,
        saved: save_path,
    };
    call.image(PDF_MIME, document);
    Ok(output)
}

fn save_path(
    call: &Call<'_>,
    args: &ScreenshotArgs,
    extension: &str,
) -> ToolResult<Option<std::path::PathBuf>> {
    let Some(name) = &args.save else {
        return Ok(None);
    };
    let data_dir = call.tenant().data_dir(&call.ctx.config.data_dir);
    screenshot_path(&data_dir, name, extension).map(Some)
}

fn extension(kind: ImageKind) -> &'static str {
    match kind {
        ImageKind::Png => "png",
        ImageKind::Jpeg => "jpg",
        ImageKind::Webp => "webp",
    }
}

fn shot(args: &ScreenshotArgs) -> ToolResult<Shot> {
    if args.quality.is_some_and(|q| !(1..=100).contains(&q)) {
        return Err(ToolError::invalid(
            "field `quality` must be between 1 and 100",
        ));
    }
    if args.max_width.is_some_and(|w| w < 16) {
        return Err(ToolError::invalid("field `max_width` must be at least 16"));
    }
    if args.full_page == Some(true) && args.ref_id.is_some() {
        return Err(ToolError::invalid(
            "give either `full_page` or `ref`, not both",
        ));
    }
    Ok(Shot {
        full_page: args.full_page.unwrap_or(false),
        ref_id: args.ref_id,
        kind: match args.format {
            None | Some(Format::Png) => ImageKind::Png,
            Some(Format::Jpeg) => ImageKind::Jpeg,
            Some(Format::Webp) => ImageKind::Webp,
            Some(Format::Pdf) => {
                return Err(ToolError::invalid("format=pdf is printed, not captured"));
            }
        },
        quality: args.quality,
        max_width: args.max_width,
        annotate: args.annotate.unwrap_or(false),
    })
}

/// `data_dir/screenshots/NAME` with the format's extension; plain file names only.
fn screenshot_path(
    data_dir: &std::path::Path,
    name: &str,
    extension: &str,
) -> ToolResult<std::path::PathBuf> {
    let valid = !name.is_empty()
        && name.len() <= 100
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && !name.starts_with('.');
    if !valid {
        return Err(ToolError::invalid(format!(
            "field `save`: {name:?} must be a plain file name (letters, digits, - _ .)"
        )));
    }
    let file = if name.contains('.') {
        name.to_string()
    } else {
        format!("{name}.{extension}")
    };
    Ok(data_dir.join("screenshots").join(file))
}

fn write_file(path: &std::path::Path, bytes: &[u8]) -> ToolResult<()> {
    let failed =
        |e: std::io::Error| ToolError::internal(format!("cannot save {}: {e}", path.display()));
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(failed)?;
    }
    std::fs::write(path, bytes).map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_names_cannot_escape_the_screenshot_dir() {
        let dir = std::path::Path::new("/data");
        assert_eq!(
            screenshot_path(dir, "home", "png").unwrap(),
            std::path::Path::new("/data/screenshots/home.png")
        );
        for bad in ["../x", "/etc/passwd", "a/b", ".hidden", ""] {
            assert!(screenshot_path(dir, bad, "png").is_err(), "{bad}");
        }
    }
}
