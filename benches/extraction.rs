//! Extraction speed (and outputs for scoring): main content + Markdown over a corpus directory,
//! single-threaded, pages read into memory first so only extraction is timed.
//!
//! `cargo bench --bench extraction -- CORPUS_DIR [--out DIR] [--rounds N]`
//! `cargo bench --bench extraction -- --depth [--rounds N]`: time against nesting depth instead
//! (5,000 to 100,000 nested `div`s and 20,000 nested tables, every kind of extraction), the
//! median of N rounds each, and the ratio of 20,000 levels to 10,000.
//! Without a corpus (as under `cargo test --all-targets`) it runs once over the sample pages in
//! `fixtures/corpus/zyte`, a smoke test. Each page folder holds `source.html` and either
//! `ground-truth.json` (its `url` is the base) or Readability's files (base
//! `http://fakehost/test/page.html`, as Mozilla's harness uses).

use std::path::{Path, PathBuf};
use std::time::Instant;

use url::Url;
use webpilot::web::extract::{ExtractKind, TextFormat, extract};

struct Page {
    name: String,
    html: String,
    base: Url,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let option = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
    };
    let corpus = match args.first().filter(|a| !a.starts_with("--")) {
        Some(corpus) => PathBuf::from(corpus),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/corpus/zyte"),
    };
    let out = option("--out").map(PathBuf::from);
    let rounds: usize = option("--rounds").and_then(|n| n.parse().ok()).unwrap_or(1);
    if args.iter().any(|a| a == "--depth") {
        return by_depth(rounds.max(1));
    }
    let pages = load(&corpus);
    assert!(!pages.is_empty(), "no pages in {}", corpus.display());
    if let Some(out) = &out {
        std::fs::create_dir_all(out).expect("output directory");
        for page in &pages {
            let result = extract(
                &page.html,
                &page.base,
                ExtractKind::Main,
                TextFormat::Markdown,
            );
            let title = result.title.replace('\n', " ");
            let text = format!("---\ntitle: {title:?}\n---\n\n{}\n", result.content);
            std::fs::write(out.join(format!("{}.md", page.name)), text).expect("write output");
        }
    }
    let started = Instant::now();
    let mut chars = 0usize;
    for _ in 0..rounds {
        for page in &pages {
            let result = extract(
                &page.html,
                &page.base,
                ExtractKind::Main,
                TextFormat::Markdown,
            );
            chars += result.content.len();
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let per_second = (pages.len() * rounds) as f64 / seconds;
    println!(
        "{{\"pages\": {}, \"rounds\": {rounds}, \"seconds\": {seconds:.3}, \"pages_per_second\": {per_second:.1}, \"chars\": {chars}}}",
        pages.len()
    );
}

/// Milliseconds to read pages of nested elements, every extraction kind of each.
fn by_depth(rounds: usize) {
    let base = Url::parse("http://fakehost/deep.html").unwrap();
    let kinds = [
        ExtractKind::Main,
        ExtractKind::Full,
        ExtractKind::Links,
        ExtractKind::Structured,
    ];
    let nested = |open: &str, close: &str, levels: usize| {
        format!(
            "<html><body><h1>Deep</h1><p>A paragraph before the nesting.</p>{}x{}</body></html>",
            open.repeat(levels),
            close.repeat(levels)
        )
    };
    let mut pages: Vec<(String, String)> = [5_000, 10_000, 20_000, 100_000]
        .into_iter()
        .map(|levels| (format!("divs_{levels}"), nested("<div>", "</div>", levels)))
        .collect();
    pages.push((
        "tables_20000".into(),
        nested("<table><tr><td>", "</td></tr></table>", 20_000),
    ));
    let mut medians = std::collections::BTreeMap::new();
    for (name, html) in &pages {
        let mut times: Vec<f64> = (0..rounds)
            .map(|_| {
                let started = Instant::now();
                for kind in kinds {
                    std::hint::black_box(extract(html, &base, kind, TextFormat::Markdown));
                }
                started.elapsed().as_secs_f64() * 1000.0
            })
            .collect();
        times.sort_by(f64::total_cmp);
        let median = times[times.len() / 2];
        println!(
            "{{\"page\": \"{name}\", \"bytes\": {}, \"median_ms\": {median:.1}, \"min_ms\": {:.1}, \"max_ms\": {:.1}}}",
            html.len(),
            times[0],
            times[times.len() - 1]
        );
        medians.insert(name.clone(), median);
    }
    println!(
        "{{\"ratio_20000_to_10000\": {:.2}}}",
        medians["divs_20000"] / medians["divs_10000"]
    );
}

fn load(corpus: &Path) -> Vec<Page> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(corpus)
        .expect("corpus directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("source.html").exists())
        .collect();
    dirs.sort();
    dirs.into_iter()
        .map(|dir| {
            let html = String::from_utf8_lossy(&std::fs::read(dir.join("source.html")).unwrap())
                .into_owned();
            let base = std::fs::read_to_string(dir.join("ground-truth.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .and_then(|v| v["url"].as_str().and_then(|u| Url::parse(u).ok()))
                .unwrap_or_else(|| Url::parse("http://fakehost/test/page.html").unwrap());
            Page {
                name: dir.file_name().unwrap().to_string_lossy().into_owned(),
                html,
                base,
            }
        })
        .collect()
}
