//! PDF reading speed: pages per second of `open_web_page`'s PDF reader (Markdown, by the
//! `webpilot-pdf` process, kept between files as the service keeps it) next to poppler's
//! `pdftotext` (plain text, a process per file) on the same PDFs, in one run.
//!
//! `cargo bench --bench pdf -- [--rounds N] [--out FILE.json]`, after `cargo build --release`
//! (which builds the reader beside webpilot).
//! The PDFs are the document fixtures (`fixtures/pdf/*.html`) printed by Chromium at the start.
//! Under `cargo test --all-targets` (one round) it is a smoke test and skips a missing
//! `pdftotext`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use webpilot::web::extract::{ExtractKind, TextFormat};
use webpilot::web::pdf;

const FIXTURES: [&str; 5] = ["article", "columns", "table", "hyphens", "long"];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let option = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
    };
    let rounds: usize = option("--rounds").and_then(|n| n.parse().ok()).unwrap_or(1);
    let out = option("--out").map(PathBuf::from);
    let dir = tempfile::tempdir().expect("temp dir");
    let files = print_fixtures(dir.path());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let documents: Vec<(PathBuf, Vec<u8>, usize)> = files
        .into_iter()
        .map(|path| {
            let bytes = std::fs::read(&path).expect("printed PDF");
            let pages = runtime
                .block_on(pdf::page_count(bytes.clone()))
                .expect("a readable PDF (and webpilot-pdf built)");
            (path, bytes, pages)
        })
        .collect();
    let pages: usize = documents.iter().map(|(_, _, pages)| pages).sum();
    let has_pdftotext = Command::new("pdftotext").arg("-v").output().is_ok();

    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for _ in 0..rounds {
        let started = Instant::now();
        for (_, bytes, _) in &documents {
            let reading = pdf::read(
                bytes.clone(),
                ExtractKind::Main,
                TextFormat::Markdown,
                false,
            );
            let (extracted, _) = runtime.block_on(reading).expect("read");
            assert!(!extracted.content.is_empty());
        }
        ours.push(started.elapsed());
        if has_pdftotext {
            let started = Instant::now();
            for (path, _, _) in &documents {
                let output = Command::new("pdftotext")
                    .arg(path)
                    .arg("-")
                    .output()
                    .expect("pdftotext");
                assert!(output.status.success() && !output.stdout.is_empty());
            }
            theirs.push(started.elapsed());
        }
    }
    let rate = |times: &[Duration]| -> Vec<f64> {
        times
            .iter()
            .map(|t| pages as f64 / t.as_secs_f64())
            .collect()
    };
    let (ours, theirs) = (summary(&rate(&ours)), summary(&rate(&theirs)));
    println!(
        "PDF to text, {pages} pages in {} files, {rounds} rounds (pages/s: median, min-max)",
        documents.len()
    );
    println!("| reader | pages/s | spread |");
    println!("|---|---|---|");
    println!(
        "| webpilot (pdf_oxide, Markdown, its reader process kept between files) | {:.0} | {:.0}-{:.0} |",
        ours.0, ours.1, ours.2
    );
    if has_pdftotext {
        println!(
            "| pdftotext (poppler, plain text, a process per file) | {:.0} | {:.0}-{:.0} |",
            theirs.0, theirs.1, theirs.2
        );
        println!("ratio webpilot/pdftotext: {:.2}x", ours.0 / theirs.0);
    }
    if let Some(out) = out {
        let json = serde_json::json!({
            "pages": pages, "rounds": rounds,
            "webpilot_pages_per_s": { "median": ours.0, "min": ours.1, "max": ours.2 },
            "pdftotext_pages_per_s": has_pdftotext.then(|| serde_json::json!({ "median": theirs.0, "min": theirs.1, "max": theirs.2 })),
        });
        std::fs::write(out, serde_json::to_string_pretty(&json).unwrap()).expect("write --out");
    }
}

/// Median, min and max.
fn summary(values: &[f64]) -> (f64, f64, f64) {
    if values.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    (
        sorted[sorted.len() / 2],
        sorted[0],
        sorted[sorted.len() - 1],
    )
}

/// Prints each fixture with headless Chromium into `dir`.
fn print_fixtures(dir: &Path) -> Vec<PathBuf> {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/pdf");
    let profile = dir.join("profile");
    FIXTURES
        .iter()
        .map(|name| {
            let target = dir.join(format!("{name}.pdf"));
            let status = Command::new("/usr/bin/chromium")
                .args([
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--no-first-run",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--no-pdf-header-footer",
                    "--generate-pdf-document-outline",
                ])
                .arg(format!("--user-data-dir={}", profile.display()))
                .arg(format!("--print-to-pdf={}", target.display()))
                .arg(format!(
                    "file://{}",
                    fixtures.join(format!("{name}.html")).display()
                ))
                .stderr(std::process::Stdio::null())
                .status()
                .expect("chromium");
            assert!(status.success() && target.exists(), "printing {name}");
            target
        })
        .collect()
}
