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

/// The layers above every lower layer (ARCHITECTURE.md, "Direction of dependencies":
/// server → agent → tools → crawl → pages → browser | web, browser → egress).
const UPPER: [&str; 4] = [
    "crate::tools",
    "crate::server",
    "crate::app",
    "crate::agent",
];

/// Each lower layer, and what else it may not import.
const FORBIDDEN: [(&str, &[&str]); 5] = [
    ("browser", &["crate::crawl", "crate::pages", "crate::web"]),
    ("web", &["crate::crawl", "crate::pages", "crate::browser"]),
    ("pages", &["crate::crawl"]),
    ("crawl", &["crate::browser"]),
    (
        "egress",
        &[
            "crate::crawl",
            "crate::pages",
            "crate::web",
            "crate::browser",
        ],
    ),
];

#[test]
fn lower_layers_do_not_depend_on_upper_ones() {
    for (layer, forbidden) in FORBIDDEN {
        for file in rust_files(&src().join(layer)) {
            let text = std::fs::read_to_string(&file).unwrap();
            for upper in UPPER.iter().chain(forbidden.iter()) {
                assert!(
                    !text.contains(upper),
                    "{} depends on {upper}",
                    file.display()
                );
            }
        }
    }
}

#[test]
fn the_crate_doc_names_every_module() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    for line in lib.lines() {
        if let Some(module) = line
            .strip_prefix("pub mod ")
            .and_then(|m| m.strip_suffix(';'))
        {
            assert!(
                lib.contains(&format!("[`{module}`]")),
                "lib.rs's crate doc does not describe `{module}`"
            );
        }
    }
}

/// `src/config/` is the model every module reads: it imports nothing of the crate but
/// `crate::error` (and its own files) — no layer, and nothing that reads a `Config` (`tenant`).
#[test]
fn configuration_depends_on_nothing_of_the_crate() {
    for file in rust_files(&src().join("config")) {
        let text = std::fs::read_to_string(&file).unwrap();
        let code = text
            .lines()
            .filter(|line| !line.trim_start().starts_with("//"));
        for line in code {
            for (at, _) in line.match_indices("crate::") {
                let path = &line[at..];
                assert!(
                    path.starts_with("crate::config") || path.starts_with("crate::error"),
                    "{} depends on {path}",
                    file.display()
                );
            }
        }
    }
}

/// The modules every layer may use import no layer themselves.
#[test]
fn shared_modules_import_no_layer() {
    let layers = [
        "crate::browser",
        "crate::web",
        "crate::pages",
        "crate::crawl",
        "crate::egress",
    ];
    let config = rust_files(&src().join("config"));
    let files = [
        "error.rs",
        "policy.rs",
        "files.rs",
        "rate.rs",
        "tenant.rs",
        "postgres.rs",
        "cluster.rs",
    ]
    .map(|file| src().join(file));
    for path in config.iter().chain(files.iter()) {
        let file = path.strip_prefix(src()).unwrap().display();
        let text = std::fs::read_to_string(path).unwrap();
        // Doc comments may name a layer; code lines may not use one.
        let code = text
            .lines()
            .filter(|line| !line.trim_start().starts_with("//"));
        for line in code {
            for layer in UPPER.iter().chain(layers.iter()) {
                assert!(!line.contains(layer), "{file} depends on {layer}: {line}");
            }
        }
    }
}
