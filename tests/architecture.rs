//! Keeps the layering of ARCHITECTURE.md honest: only `src/browser/` speaks CDP, and the lower
//! layers never reach up into tools or fronts.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

fn src() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn only_the_browser_layer_names_chromiumoxide() {
    for file in rust_files(&src()) {
        let relative = file.strip_prefix(src()).unwrap();
        if relative.starts_with("browser") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            !text.contains("chromiumoxide::"),
            "{} uses chromiumoxide",
            relative.display()
        );
    }
}

#[test]
fn lower_layers_do_not_depend_on_upper_ones() {
    for layer in ["browser", "web", "crawl"] {
        for file in rust_files(&src().join(layer)) {
            let text = std::fs::read_to_string(&file).unwrap();
            for upper in [
                "crate::tools",
                "crate::server",
                "crate::app",
                "crate::agent",
                "crate::browser",
            ] {
                if upper == "crate::browser" && layer == "browser" {
                    continue;
                }
                assert!(
                    !text.contains(upper),
                    "{} depends on {upper}",
                    file.display()
                );
            }
        }
    }
}
