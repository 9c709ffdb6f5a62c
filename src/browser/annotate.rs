//! Numbered boxes drawn on a captured image, in Rust: the page itself is never modified.
//!
//! Labels avoid each other where they can: each tries a few spots around its box and takes the
//! first that overlaps no label already placed. Colours tell roles apart.

use ab_glyph::{FontRef, PxScale};
use image::{Pixel, Rgb, RgbImage, Rgba};
use imageproc::drawing::{draw_filled_rect_mut, draw_hollow_rect_mut, draw_text_mut, text_size};
use imageproc::rect::Rect;

/// DejaVu Sans Bold, shipped with the binary (licence beside it in assets/fonts/).
const FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans-Bold.ttf");
/// Label text height in image pixels.
const LABEL_PX: f32 = 12.0;
const LABEL_PAD: i32 = 2;

/// One box to draw, in image pixels.
#[derive(Debug, Clone)]
pub struct Mark {
    pub number: u32,
    pub role: String,
    pub x: i32,
    pub y: i32,
    pub width: u32,
    pub height: u32,
}

/// The colour of a role's boxes and labels.
pub fn role_colour(role: &str) -> Rgba<u8> {
    match role {
        "link" => Rgba([31, 119, 180, 255]),
        "button" => Rgba([44, 160, 44, 255]),
        "textbox" | "searchbox" | "spinbutton" | "slider" => Rgba([255, 127, 14, 255]),
        "combobox" | "listbox" | "option" => Rgba([148, 103, 189, 255]),
        "checkbox" | "radio" | "switch" => Rgba([23, 190, 207, 255]),
        _ => Rgba([214, 39, 40, 255]),
    }
}

/// Draws every mark: a 2-pixel outline in the role's colour and a numbered label. Screenshots
/// are opaque: the image has no alpha channel, which makes it a third lighter to decode and encode.
pub fn draw(image: &mut RgbImage, marks: &[Mark]) {
    let font = FontRef::try_from_slice(FONT).expect("the embedded font is valid");
    let scale = PxScale::from(LABEL_PX);
    let (width, height) = (image.width() as i32, image.height() as i32);
    for mark in marks {
        let colour = role_colour(&mark.role).to_rgb();
        for inset in 0..2 {
            let w = mark.width.saturating_sub(2 * inset as u32).max(1);
            let h = mark.height.saturating_sub(2 * inset as u32).max(1);
            draw_hollow_rect_mut(
                image,
                Rect::at(mark.x + inset, mark.y + inset).of_size(w, h),
                colour,
            );
        }
    }
    let mut placed: Vec<Rect> = Vec::with_capacity(marks.len());
    for mark in marks {
        let text = mark.number.to_string();
        let (text_w, text_h) = text_size(scale, &font, &text);
        let label_w = text_w as i32 + 2 * LABEL_PAD;
        let label_h = text_h as i32 + 2 * LABEL_PAD;
        // Outside the box first (above, left, right, below), inside its corner last.
        let spots = [
            (mark.x, mark.y - label_h),
            (mark.x - label_w, mark.y),
            (mark.x + mark.width as i32, mark.y),
            (mark.x + mark.width as i32 - label_w, mark.y - label_h),
            (mark.x, mark.y + mark.height as i32),
            (mark.x, mark.y),
        ];
        let inside = |&(x, y): &(i32, i32)| {
            x >= 0 && y >= 0 && x + label_w <= width && y + label_h <= height
        };
        let rect_at = |(x, y): (i32, i32)| Rect::at(x, y).of_size(label_w as u32, label_h as u32);
        let free = spots
            .iter()
            .filter(|s| inside(s))
            .find(|s| placed.iter().all(|p| p.intersect(rect_at(**s)).is_none()));
        let spot = free
            .or_else(|| spots.iter().find(|s| inside(s)))
            .copied()
            .unwrap_or((
                mark.x.clamp(0, (width - label_w).max(0)),
                mark.y.clamp(0, (height - label_h).max(0)),
            ));
        let label = rect_at(spot);
        draw_filled_rect_mut(image, label, role_colour(&mark.role).to_rgb());
        draw_text_mut(
            image,
            Rgb([255, 255, 255]),
            spot.0 + LABEL_PAD,
            spot.1 + LABEL_PAD - 1,
            scale,
            &font,
            &text,
        );
        placed.push(label);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outlines_use_the_role_colour_and_labels_do_not_overlap() {
        let mut image = RgbImage::from_pixel(200, 100, Rgb([255, 255, 255]));
        let marks = vec![
            Mark {
                number: 1,
                role: "button".into(),
                x: 20,
                y: 30,
                width: 60,
                height: 20,
            },
            Mark {
                number: 2,
                role: "link".into(),
                x: 22,
                y: 32,
                width: 60,
                height: 20,
            },
        ];
        draw(&mut image, &marks);
        assert_eq!(
            *image.get_pixel(50, 49),
            role_colour("button").to_rgb(),
            "bottom edge of box 1"
        );
        assert_eq!(
            *image.get_pixel(81, 40),
            role_colour("link").to_rgb(),
            "right edge of box 2"
        );
    }
}
