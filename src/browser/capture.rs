//! Screenshots: the viewport, the full page, or one element; PNG, JPEG or WebP; scaled to a
//! maximum width; optionally annotated with the element refs.
//!
//! Full-page and element captures use a clip with `captureBeyondViewport`, which leaves the
//! viewport's device metrics alone (a plain full-page capture would reset them, CHROMIUM.md).

use chromiumoxide::cdp::browser_protocol::page::{
    CaptureScreenshotFormat, CaptureScreenshotParams, Viewport,
};
use chromiumoxide::layout::Point;
use image::codecs::jpeg::JpegEncoder;
use image::codecs::png::{CompressionType, FilterType, PngEncoder};
use image::codecs::webp::WebPEncoder;
use image::{ImageEncoder, RgbImage};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::annotate::{self, Mark};
use super::frames::Doc;
use super::input::Reach;
use super::tab::Tab;
use crate::error::{ToolError, ToolResult};

/// JPEG/WebP quality when none is given.
pub const DEFAULT_QUALITY: u8 = 80;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ImageKind {
    #[default]
    Png,
    Jpeg,
    Webp,
}

impl ImageKind {
    pub fn mime(self) -> &'static str {
        match self {
            ImageKind::Png => "image/png",
            ImageKind::Jpeg => "image/jpeg",
            ImageKind::Webp => "image/webp",
        }
    }
}

/// What to capture.
#[derive(Debug, Clone, Default)]
pub struct Shot {
    pub full_page: bool,
    pub ref_id: Option<u32>,
    pub kind: ImageKind,
    pub quality: Option<u8>,
    pub max_width: Option<u32>,
    pub annotate: bool,
}

/// One legend entry of an annotated capture.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LegendEntry {
    #[serde(rename = "ref")]
    pub ref_id: u32,
    pub role: String,
    pub name: String,
    /// Its state as the element list shows it (`checked`, `disabled`, `required`, `invalid`…).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub state: String,
    /// Its description or, when invalid, its error message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Where the box is drawn, `[x, y, width, height]` in image pixels.
    #[serde(rename = "box")]
    pub bounds: [i32; 4],
}

/// A captured image.
#[derive(Debug, Clone)]
pub struct Picture {
    pub bytes: Vec<u8>,
    pub kind: ImageKind,
    pub width: u32,
    pub height: u32,
    pub legend: Option<Vec<LegendEntry>>,
}

/// The captured area in CSS pixels of the page, and the scroll position at capture time.
#[derive(Debug, Clone, Copy, Deserialize)]
struct Area {
    x: f64,
    y: f64,
    width: f64,
    height: f64,
    #[serde(rename = "scrollX")]
    scroll_x: f64,
    #[serde(rename = "scrollY")]
    scroll_y: f64,
}

const VIEWPORT_AREA_JS: &str =
    "({ x: scrollX, y: scrollY, width: innerWidth, height: innerHeight, scrollX, scrollY })";
const PAGE_AREA_JS: &str = "({ x: 0, y: 0, width: Math.max(document.documentElement.scrollWidth, innerWidth), \
    height: Math.max(document.documentElement.scrollHeight, innerHeight), scrollX, scrollY })";
/// The element's box in page coordinates (scrolled into view first), in the top document or a
/// frame it can script.
const ELEMENT_AREA_JS: &str = r#"(el) => {
  const view = el.ownerDocument.defaultView;
  let r = el.getBoundingClientRect();
  if (r.top < 0 || r.bottom > view.innerHeight) { el.scrollIntoView({ block: 'center', behavior: 'instant' }); r = el.getBoundingClientRect(); }
  let ox = 0, oy = 0;
  for (let w = view; w !== w.parent; w = w.parent) {
    let frame = null;
    try { frame = w.frameElement; } catch (e) { frame = null; }
    if (!frame) return null;
    const fr = frame.getBoundingClientRect();
    ox += fr.left + frame.clientLeft; oy += fr.top + frame.clientTop;
  }
  const top = window.top;
  return { x: r.left + ox + top.scrollX, y: r.top + oy + top.scrollY, width: r.width, height: r.height,
           scrollX: top.scrollX, scrollY: top.scrollY };
}"#;

/// Brings the element into view in its own document when it is not; its centre in that
/// document's viewport.
const SCROLL_INTO_VIEW_JS: &str = r#"(el) => {
  const view = el.ownerDocument.defaultView;
  let r = el.getBoundingClientRect();
  if (r.top < 0 || r.bottom > view.innerHeight || r.left < 0 || r.right > view.innerWidth) {
    el.scrollIntoView({ block: 'center', inline: 'center', behavior: 'instant' });
    r = el.getBoundingClientRect();
  }
  return { x: r.left + r.width / 2, y: r.top + r.height / 2 };
}"#;

impl Tab {
    /// A JPEG of the viewport as it is, for a trace. It asks for no clip and no scale: those
    /// re-emulate the viewport for the capture, and an input sent right after could then miss
    /// a frame of another site that has not yet followed. The future owns what it needs, so
    /// the caller may let it finish on its own.
    pub fn viewport_jpeg(
        &self,
        quality: u8,
    ) -> impl std::future::Future<Output = ToolResult<Vec<u8>>> + Send + 'static {
        let (page, liveness) = (self.page.clone(), self.liveness.clone());
        let params = CaptureScreenshotParams {
            format: Some(CaptureScreenshotFormat::Jpeg),
            quality: Some(i64::from(quality.clamp(1, 100))),
            optimize_for_speed: Some(true),
            ..Default::default()
        };
        async move {
            let captured = liveness.cdp("capturing", page.execute(params)).await?;
            base64_decode(captured.result.data.as_ref())
        }
    }

    /// Captures the tab as asked. With `annotate`, numbers are the refs of the element list of
    /// the same page state (listed right before the capture).
    pub async fn capture(&mut self, shot: &Shot) -> ToolResult<Picture> {
        let area = self.area_to_capture(shot).await?;
        let scale = match (&area, shot.max_width) {
            (Some(area), Some(max)) => (f64::from(max) / area.width).min(1.0),
            _ => 1.0,
        };
        let params = capture_params(shot, area.as_ref(), scale);
        let (page, liveness) = (self.page.clone(), self.liveness.clone());
        let capture = async move { liveness.cdp("capturing", page.execute(params)).await };
        // The element list first, then the pixels: side by side, the listing waited for the
        // renderer the capture holds (52 ms on the SPA against 5.5 alone).
        let elements = match shot.annotate {
            true => Some(self.elements(None).await?),
            false => None,
        };
        let captured = capture.await?;
        let bytes = base64_decode(captured.result.data.as_ref())?;
        let (Some(list), Some(area)) = (elements, area) else {
            let (width, height) = image_size(&bytes)?;
            return Ok(Picture {
                bytes,
                kind: shot.kind,
                width,
                height,
                legend: None,
            });
        };
        let (marks, legend) = marks_for(&list.elements, &area, scale);
        let (kind, quality) = (shot.kind, shot.quality.unwrap_or(DEFAULT_QUALITY));
        let _stage = crate::timing::stage("annotate and encode");
        tokio::task::spawn_blocking(move || {
            let mut image = image::load_from_memory(&bytes)
                .map_err(|e| ToolError::internal(format!("cannot decode the capture: {e}")))?
                .into_rgb8();
            annotate::draw(&mut image, &marks);
            let (width, height) = image.dimensions();
            let bytes = encode(image, kind, quality)?;
            Ok(Picture {
                bytes,
                kind,
                width,
                height,
                legend: Some(legend),
            })
        })
        .await
        .map_err(|e| ToolError::internal(format!("annotation failed: {e}")))?
    }

    /// The box to capture, taken first: capturing an element may scroll it into view, and the
    /// element list must describe the page as captured. A plain capture of the viewport is the
    /// viewport: it needs no box.
    async fn area_to_capture(&mut self, shot: &Shot) -> ToolResult<Option<Area>> {
        let plain_viewport =
            !shot.full_page && shot.ref_id.is_none() && shot.max_width.is_none() && !shot.annotate;
        if plain_viewport {
            return Ok(None);
        }
        let area = self.capture_area(shot).await?;
        if area.width < 1.0 || area.height < 1.0 {
            return Err(ToolError::invalid(
                "the element has no visible area to capture",
            ));
        }
        Ok(Some(area))
    }

    async fn capture_area(&mut self, shot: &Shot) -> ToolResult<Area> {
        let value = match (shot.ref_id, shot.full_page) {
            (Some(ref_id), _) => match self.locate_ref(ref_id).await? {
                Doc::Top => {
                    let value = self.on_element(ref_id, ELEMENT_AREA_JS).await?;
                    if value.is_null() {
                        return Err(ToolError::invalid(format!(
                            "[{ref_id}] is inside a frame whose place on the page cannot be traced; capture the viewport instead"
                        )));
                    }
                    value
                }
                doc => return self.foreign_element_area(&doc, ref_id).await,
            },
            (None, true) => self.evaluate_raw(PAGE_AREA_JS).await?,
            (None, false) => self.evaluate_raw(VIEWPORT_AREA_JS).await?,
        };
        area_of(value)
    }

    /// The box of an element in a frame the top document cannot script: scrolled into view in
    /// its frame and each frame in the one holding it, then placed in the top viewport the way
    /// the element list places it, cut to what its frames show.
    async fn foreign_element_area(&mut self, doc: &Doc, ref_id: u32) -> ToolResult<Area> {
        let centre = self.on_element_in(doc, ref_id, SCROLL_INTO_VIEW_JS).await?;
        let centre = Point {
            x: centre["x"].as_f64().unwrap_or_default(),
            y: centre["y"].as_f64().unwrap_or_default(),
        };
        self.through_frames(doc, centre, ref_id, "capture", Reach::Reveal)
            .await?;
        let list = self.elements(None).await?;
        let bounds = list
            .elements
            .iter()
            .find(|element| element.ref_id == ref_id)
            .and_then(|element| element.bounds)
            .ok_or_else(|| {
                ToolError::invalid(format!(
                    "[{ref_id}] has no visible box on the page; capture the viewport instead"
                ))
            })?;
        let viewport = area_of(self.evaluate_raw(VIEWPORT_AREA_JS).await?)?;
        let [x, y, width, height] = bounds;
        Ok(Area {
            x: x + viewport.scroll_x,
            y: y + viewport.scroll_y,
            width,
            height,
            ..viewport
        })
    }
}

fn area_of(value: serde_json::Value) -> ToolResult<Area> {
    serde_json::from_value(value)
        .map_err(|e| ToolError::internal(format!("unexpected page metrics: {e}")))
}

/// Boxes of the elements inside the captured area, in image pixels, with their legend.
fn marks_for(
    elements: &[super::Element],
    area: &Area,
    scale: f64,
) -> (Vec<Mark>, Vec<LegendEntry>) {
    let mut marks = Vec::new();
    let mut legend = Vec::new();
    for element in elements {
        let Some([x, y, w, h]) = element.bounds else {
            continue;
        };
        // Snapshot boxes are viewport-relative; the area is in page coordinates.
        let (page_x, page_y) = (x + area.scroll_x, y + area.scroll_y);
        let visible = page_x + w > area.x
            && page_y + h > area.y
            && page_x < area.x + area.width
            && page_y < area.y + area.height;
        if !visible {
            continue;
        }
        let mark = Mark {
            number: element.ref_id,
            role: element.role.clone(),
            x: ((page_x - area.x) * scale).round() as i32,
            y: ((page_y - area.y) * scale).round() as i32,
            width: (w * scale).round().max(1.0) as u32,
            height: (h * scale).round().max(1.0) as u32,
        };
        legend.push(LegendEntry {
            ref_id: element.ref_id,
            role: element.role.clone(),
            name: element.name.clone(),
            state: element.flags().join(" "),
            note: element.note.clone(),
            bounds: [mark.x, mark.y, mark.width as i32, mark.height as i32],
        });
        marks.push(mark);
    }
    (marks, legend)
}

/// What to ask Chromium for: the format (lossless when the capture is annotated here), the clip
/// of `area` at `scale` where the capture is not simply the viewport.
fn capture_params(shot: &Shot, area: Option<&Area>, scale: f64) -> CaptureScreenshotParams {
    let format = match (shot.annotate, shot.kind) {
        // Annotated images are decoded and re-encoded: capture losslessly.
        (true, _) | (_, ImageKind::Png) => CaptureScreenshotFormat::Png,
        (_, ImageKind::Jpeg) => CaptureScreenshotFormat::Jpeg,
        (_, ImageKind::Webp) => CaptureScreenshotFormat::Webp,
    };
    let mut params = CaptureScreenshotParams {
        format: Some(format),
        // Encoding dominates a capture's time; the agent pays for pixels, not bytes.
        optimize_for_speed: Some(true),
        ..Default::default()
    };
    if !shot.annotate && shot.kind != ImageKind::Png {
        params.quality = Some(i64::from(shot.quality.unwrap_or(DEFAULT_QUALITY)));
    }
    if let Some(area) = area
        && (shot.full_page || shot.ref_id.is_some() || scale < 1.0)
    {
        params.clip = Some(Viewport {
            x: area.x,
            y: area.y,
            width: area.width,
            height: area.height,
            scale,
        });
        params.capture_beyond_viewport = Some(shot.full_page || shot.ref_id.is_some());
    }
    params
}

fn encode(image: RgbImage, kind: ImageKind, quality: u8) -> ToolResult<Vec<u8>> {
    let mut out = Vec::new();
    let (width, height) = image.dimensions();
    let pixels = image.as_raw();
    let rgb = image::ExtendedColorType::Rgb8;
    let failed =
        |e: image::ImageError| ToolError::internal(format!("cannot encode the image: {e}"));
    match kind {
        // zlib level 3 without row filters, as Chromium's own fast PNGs: a page's flat colours
        // compress best unfiltered. The SPA's viewport: 110 KB in 4.3 ms, against 121 KB in
        // 11 ms with adaptive filters and 140 KB in 3.1 ms at level 1.
        ImageKind::Png => {
            PngEncoder::new_with_quality(&mut out, CompressionType::Level(3), FilterType::NoFilter)
                .write_image(pixels, width, height, rgb)
        }
        ImageKind::Jpeg => {
            JpegEncoder::new_with_quality(&mut out, quality).write_image(pixels, width, height, rgb)
        }
        ImageKind::Webp => {
            WebPEncoder::new_lossless(&mut out).write_image(pixels, width, height, rgb)
        }
    }
    .map_err(failed)?;
    Ok(out)
}

fn image_size(bytes: &[u8]) -> ToolResult<(u32, u32)> {
    image::ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .ok()
        .and_then(|r| r.into_dimensions().ok())
        .ok_or_else(|| ToolError::internal("the browser returned an unreadable image"))
}

pub(super) fn base64_decode(data: &str) -> ToolResult<Vec<u8>> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|e| ToolError::internal(format!("the browser returned invalid base64 data: {e}")))
}
