//! browser_screenshot: formats, full page, elements, annotation matching the element refs, and
//! a plain capture that is Chromium's own pixels.

mod common;

use base64::Engine;
use common::{client, decode, element_lines, fails, harness, ok, open, ref_of};
use image::GenericImageView;
use serde_json::json;
use webpilot::browser::OFFSCREEN_HEADER;

#[tokio::test]
async fn annotated_boxes_match_the_element_list_and_the_page() {
    let s = "shot-annotate";
    open(s, "elements.html").await;
    let shot = ok(
        "browser_screenshot",
        json!({ "session": s, "annotate": true }),
    )
    .await;
    let image = decode(&shot);
    assert_eq!(image.dimensions(), (1280, 720));
    assert!(
        shot["bytes"].as_u64().unwrap() <= 150_000,
        "PNG is {} bytes",
        shot["bytes"]
    );

    let lines = element_lines(s).await;
    let visible: Vec<u32> = lines
        .iter()
        .take_while(|l| l.as_str() != OFFSCREEN_HEADER)
        .map(|l| ref_of(std::slice::from_ref(l), ""))
        .collect();
    let legend = shot["legend"].as_array().unwrap();
    let legend_refs: Vec<u32> = legend
        .iter()
        .map(|e| e["ref"].as_u64().unwrap() as u32)
        .collect();
    for r in &visible {
        assert!(
            legend_refs.contains(r),
            "visible element {r} missing from the legend"
        );
    }

    let rgba = image.to_rgba8();
    for entry in legend.iter().step_by(7) {
        let r = entry["ref"].as_u64().unwrap();
        let [x, y, w, h] = [0, 1, 2, 3].map(|i| entry["box"][i].as_f64().unwrap());
        let rect = ok(
            "browser_interact",
            json!({ "session": s, "action": "evaluate",
                    "script": format!("(() => {{ const r = __wp.resolve({r}).el.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; }})()") }),
        )
        .await;
        let [left, top, right, bottom] = [0, 1, 2, 3].map(|i| rect["value"][i].as_f64().unwrap());
        let (cx, cy) = (x + w / 2.0, y + h / 2.0);
        assert!(
            cx >= left && cx <= right && cy >= top && cy <= bottom,
            "box centre of {r} outside its element"
        );
        let colour = webpilot::browser::role_colour(entry["role"].as_str().unwrap());
        let edges = [
            (x, y + h / 2.0),
            (x + w - 1.0, y + h / 2.0),
            (x + w / 2.0, y),
            (x + w / 2.0, y + h - 1.0),
        ];
        let coloured = edges.iter().filter(|(ex, ey)| {
            *ex >= 0.0
                && *ey >= 0.0
                && (*ex as u32) < 1280
                && (*ey as u32) < 720
                && *rgba.get_pixel(*ex as u32, *ey as u32) == colour
        });
        assert!(
            coloured.count() >= 1,
            "no box edge of {r} has its role colour"
        );
    }
}

#[tokio::test]
async fn a_plain_screenshot_has_the_pixels_of_a_bare_capture_of_the_same_viewport() {
    let s = "shot-bare";
    let page = "light.html?bare-capture";
    open(s, page).await;
    let shot = ok("browser_screenshot", json!({ "session": s })).await;
    let ours = decode(&shot).to_rgb8();
    let bare = common::devtools::bare_capture(&harness().app, "bare-capture").await;
    let bare = image::load_from_memory(&bare).unwrap().to_rgb8();
    assert_eq!(ours.dimensions(), bare.dimensions());
    let differing = ours
        .pixels()
        .zip(bare.pixels())
        .filter(|(a, b)| a != b)
        .count();
    assert_eq!(differing, 0, "pixels differ from a bare capture");
    // Not a blank image equal to a blank one: the page's heading is drawn.
    let dark = ours
        .pixels()
        .filter(|p| p.0.iter().all(|c| *c < 64))
        .count();
    assert!(dark > 100, "{dark} dark pixels");
}

#[tokio::test]
async fn formats_full_page_and_elements() {
    let s = "shot-formats";
    open(s, "article.html").await;
    let jpeg = ok(
        "browser_screenshot",
        json!({ "session": s, "format": "jpeg", "quality": 50 }),
    )
    .await;
    assert_eq!(jpeg["format"], "image/jpeg");
    assert_eq!(
        image::guess_format(
            &base64::engine::general_purpose::STANDARD
                .decode(jpeg["image"].as_str().unwrap())
                .unwrap()
        )
        .unwrap(),
        image::ImageFormat::Jpeg
    );
    let full = ok(
        "browser_screenshot",
        json!({ "session": s, "full_page": true, "max_width": 640 }),
    )
    .await;
    let full_image = decode(&full);
    assert_eq!(full_image.width(), 640);
    assert!(
        full_image.height() > 720,
        "full page is taller than the viewport: {}",
        full_image.height()
    );
    let after = decode(&ok("browser_screenshot", json!({ "session": s })).await);
    assert_eq!(
        after.dimensions(),
        (1280, 720),
        "a full-page capture must not disturb the viewport"
    );
    let webp = ok(
        "browser_screenshot",
        json!({ "session": s, "format": "webp" }),
    )
    .await;
    assert_eq!(webp["format"], "image/webp");
    // Annotated captures are drawn on and encoded again, in every format.
    for format in ["jpeg", "webp"] {
        let annotated = ok(
            "browser_screenshot",
            json!({ "session": s, "format": format, "annotate": true }),
        )
        .await;
        assert_eq!(annotated["format"], format!("image/{format}"));
        assert!(
            annotated["legend"]
                .as_array()
                .is_some_and(|l| !l.is_empty())
        );
        assert_eq!(decode(&annotated).dimensions(), (1280, 720), "{format}");
    }

    open(s, "form.html").await;
    let select = ref_of(&element_lines(s).await, "combobox \"Country\"");
    let element = decode(&ok("browser_screenshot", json!({ "session": s, "ref": select })).await);
    assert!(
        element.width() < 400 && element.height() < 100,
        "{:?}",
        element.dimensions()
    );
    fails(
        "browser_screenshot",
        json!({ "session": s, "quality": 0, "format": "jpeg" }),
        "INVALID_ARGUMENT",
    )
    .await;
    fails(
        "browser_screenshot",
        json!({ "session": s, "save": "../escape" }),
        "INVALID_ARGUMENT",
    )
    .await;
    let saved = ok(
        "browser_screenshot",
        json!({ "session": s, "save": "form-page" }),
    )
    .await;
    assert!(std::path::Path::new(saved["saved"].as_str().unwrap()).is_file());
}

#[tokio::test]
async fn accept_image_png_returns_raw_bytes() {
    open("shot-raw", "spa.html").await;
    let response = client()
        .post(format!("{}/api/tools/browser_screenshot", harness().api))
        .header("accept", "image/png")
        .json(&json!({ "session": "shot-raw", "annotate": true }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "image/png");
    let bytes = response.bytes().await.unwrap();
    assert_eq!(
        image::load_from_memory(&bytes).unwrap().dimensions(),
        (1280, 720)
    );
}

#[test]
fn cli_writes_the_image_with_dash_o() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("shot.png");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_webpilot"))
        .args(["--data-dir"])
        .arg(dir.path())
        .args(["call", "browser_screenshot", "{}", "-o"])
        .arg(&out)
        .env("TMPDIR", dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let image = image::open(&out).expect("a PNG was written");
    assert_eq!(image.dimensions(), (1280, 720));
}
