//! Keeps the floor plan of ARCHITECTURE.md true, read from the code itself: every file of
//! `src/` is parsed (syn), and each `use` and each `crate::`/`super::`/`self::` path becomes an
//! arrow from its module to the module it names. Then:
//! - every arrow between top-level modules points down `LAYERS` (none back up), and every
//!   top-level module is on it;
//! - the modules one level down (`browser::session`, `tools::call`, …) form at most two
//!   import circles;
//! - only `src/browser/` names chromiumoxide, and `config/` uses nothing of the crate but
//!   `error`;
//! - no file is over 700 lines and no function over 80 (unless a `// Long:` comment right
//!   above it says why);
//! - lib.rs's crate doc names every module.
//!
//! Test code (`#[cfg(test)]` modules) is left out: tests may reach anything.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::spanned::Spanned;
use syn::visit::Visit;

/// Top-level modules from the bottom up. A module may use modules of lower rows only; two
/// modules of one row use neither each other.
const LAYERS: &[&[&str]] = &[
    &["error", "sync"],
    &["ids", "config"],
    &["policy", "metrics", "timing"],
    &["db"],
    &["tenancy"],
    &["profiles", "egress"],
    &["web", "browser"],
    &["pages"],
    &["crawl", "trace"],
    &["tools"],
    &["agent", "replay"],
    &["app", "fuzzing"],
    &["server"],
    &["cli"],
];

const MAX_FILE_LINES: usize = 700;
const MAX_FN_LINES: usize = 80;
const MAX_CIRCLES: usize = 2;
/// What a function longer than `MAX_FN_LINES` carries on the line above it, with the reason.
const LONG_MARK: &str = "// Long:";

fn src() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")
}

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
    files.sort();
    files
}

/// A module's path from the crate root: `src/browser/session/mod.rs` is `browser::session`.
type ModPath = Vec<String>;

fn module_of(file: &Path) -> ModPath {
    let relative = file.strip_prefix(src()).unwrap().with_extension("");
    let mut parts: ModPath = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// One parsed file: its module, its text and syntax tree.
struct Source {
    file: PathBuf,
    module: ModPath,
    text: String,
    tree: syn::File,
}

fn sources() -> Vec<Source> {
    rust_files(&src())
        .into_iter()
        .map(|file| {
            let text = std::fs::read_to_string(&file).unwrap();
            let tree = syn::parse_file(&text)
                .unwrap_or_else(|e| panic!("{} does not parse: {e}", file.display()));
            Source {
                module: module_of(&file),
                file,
                text,
                tree,
            }
        })
        .collect()
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr
                .parse_args::<syn::Meta>()
                .is_ok_and(|meta| meta.path().is_ident("test"))
    })
}

/// Collects the paths a module names, resolved from the crate root, leaving test modules out.
struct Paths<'a> {
    modules: &'a BTreeSet<ModPath>,
    /// The module being read (the file's, then inline modules within it).
    here: ModPath,
    found: Vec<ModPath>,
}

impl Paths<'_> {
    /// `segments` as a path from the crate root, if it names something of this crate.
    fn resolve(&self, segments: &[String]) -> Option<ModPath> {
        let first = segments.first()?;
        let (mut base, rest) = match first.as_str() {
            "crate" => (Vec::new(), &segments[1..]),
            "self" => (self.here.clone(), &segments[1..]),
            "super" => {
                let supers = segments.iter().take_while(|s| *s == "super").count();
                let keep = self.here.len().checked_sub(supers)?;
                (self.here[..keep].to_vec(), &segments[supers..])
            }
            // A child module named without `self::` (2018 paths).
            name => {
                let mut child = self.here.clone();
                child.push(name.to_string());
                if !self.modules.contains(&child) {
                    return None;
                }
                (self.here.clone(), segments)
            }
        };
        base.extend(rest.iter().cloned());
        Some(base)
    }

    fn record(&mut self, segments: Vec<String>) {
        if let Some(path) = self.resolve(&segments) {
            self.found.push(path);
        }
    }

    fn flatten(&mut self, prefix: Vec<String>, tree: &syn::UseTree) {
        let joined = |name: String| {
            let mut path = prefix.clone();
            path.push(name);
            path
        };
        match tree {
            syn::UseTree::Path(p) => self.flatten(joined(p.ident.to_string()), &p.tree),
            syn::UseTree::Name(n) => self.record(joined(n.ident.to_string())),
            syn::UseTree::Rename(r) => self.record(joined(r.ident.to_string())),
            syn::UseTree::Glob(_) => self.record(prefix),
            syn::UseTree::Group(g) => {
                for item in &g.items {
                    self.flatten(prefix.clone(), item);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Paths<'_> {
    fn visit_item_mod(&mut self, module: &'ast syn::ItemMod) {
        if is_test_only(&module.attrs) {
            return;
        }
        self.here.push(module.ident.to_string());
        syn::visit::visit_item_mod(self, module);
        self.here.pop();
    }

    fn visit_item_fn(&mut self, function: &'ast syn::ItemFn) {
        if !is_test_only(&function.attrs) {
            syn::visit::visit_item_fn(self, function);
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.flatten(Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if matches!(
            segments.first().map(String::as_str),
            Some("crate" | "super" | "self")
        ) {
            self.record(segments);
        }
        syn::visit::visit_path(self, path);
    }
}

/// Arrows between modules: from each file's module to the longest known module each of its
/// paths starts with (itself excluded).
fn arrows(sources: &[Source]) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let modules: BTreeSet<ModPath> = sources.iter().map(|s| s.module.clone()).collect();
    let mut arrows: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    for source in sources {
        let mut paths = Paths {
            modules: &modules,
            here: source.module.clone(),
            found: Vec::new(),
        };
        paths.visit_file(&source.tree);
        for path in paths.found {
            let target = (0..=path.len())
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|prefix| modules.contains(prefix))
                .unwrap_or_default();
            if target != source.module {
                arrows
                    .entry(source.module.clone())
                    .or_default()
                    .insert(target);
            }
        }
    }
    arrows
}

fn layer_of(top: &str) -> Option<usize> {
    LAYERS.iter().position(|row| row.contains(&top))
}

#[test]
fn every_top_level_module_has_a_layer_and_every_arrow_points_down() {
    let sources = sources();
    let mut wrong = Vec::new();
    for source in &sources {
        if let Some(top) = source.module.first() {
            assert!(
                layer_of(top).is_some(),
                "{top} is on no layer of LAYERS: add it where ARCHITECTURE.md puts it"
            );
        }
    }
    for (from, targets) in arrows(&sources) {
        let Some(from_top) = from.first() else {
            continue; // lib.rs declares every module
        };
        for to in targets {
            let Some(to_top) = to.first() else { continue };
            if from_top == to_top {
                continue;
            }
            let (a, b) = (layer_of(from_top).unwrap(), layer_of(to_top).unwrap());
            if a <= b {
                wrong.push(format!("{} → {}", from.join("::"), to.join("::")));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "arrows that do not point down:\n{}",
        wrong.join("\n")
    );
}

/// The strongly connected groups of more than one node (Tarjan).
fn circles(graph: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<ModPath>> {
    struct Walk<'g> {
        graph: &'g BTreeMap<ModPath, BTreeSet<ModPath>>,
        index: BTreeMap<ModPath, usize>,
        low: BTreeMap<ModPath, usize>,
        stack: Vec<ModPath>,
        found: Vec<Vec<ModPath>>,
    }
    impl Walk<'_> {
        fn visit(&mut self, node: &ModPath) {
            let number = self.index.len();
            self.index.insert(node.clone(), number);
            self.low.insert(node.clone(), number);
            self.stack.push(node.clone());
            for next in self.graph.get(node).into_iter().flatten() {
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next]);
                    self.low.insert(node.clone(), low);
                } else if self.stack.contains(next) {
                    let low = self.low[node].min(self.index[next]);
                    self.low.insert(node.clone(), low);
                }
            }
            if self.low[node] == self.index[node] {
                let at = self.stack.iter().position(|n| n == node).unwrap();
                let group = self.stack.split_off(at);
                if group.len() > 1 {
                    self.found.push(group);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !walk.index.contains_key(node) {
            walk.visit(node);
        }
    }
    walk.found
}

#[test]
fn at_most_two_import_circles() {
    // Units one level below the top (`browser::session` with its files). A folder's `mod.rs`
    // re-exporting its files and the files using their folder's items are one module's
    // inside, not a circle; nor is the crate root, which only declares and re-exports.
    let unit = |path: &ModPath| path.iter().take(2).cloned().collect::<ModPath>();
    let nested = |a: &ModPath, b: &ModPath| a.starts_with(b) || b.starts_with(a);
    let mut graph: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    for (from, targets) in arrows(&sources()) {
        for to in targets {
            let (from, to) = (unit(&from), unit(&to));
            if !from.is_empty() && !to.is_empty() && !nested(&from, &to) {
                graph.entry(from).or_default().insert(to);
            }
        }
    }
    let found = circles(&graph);
    let shown: Vec<String> = found
        .iter()
        .map(|group| {
            let names: Vec<String> = group.iter().map(|m| m.join("::")).collect();
            names.join(" ⇄ ")
        })
        .collect();
    assert!(
        found.len() <= MAX_CIRCLES,
        "{} import circles (at most {MAX_CIRCLES}):\n{}",
        found.len(),
        shown.join("\n")
    );
}

#[test]
fn only_the_browser_layer_names_chromiumoxide() {
    for source in sources() {
        if source.module.first().map(String::as_str) == Some("browser") {
            continue;
        }
        let mut names = Names::default();
        names.visit_file(&source.tree);
        assert!(
            !names.roots.contains("chromiumoxide"),
            "{} uses chromiumoxide",
            source.file.display()
        );
    }
}

/// The first segments of every path and `use` of a file.
#[derive(Default)]
struct Names {
    roots: BTreeSet<String>,
}

impl<'ast> Visit<'ast> for Names {
    fn visit_use_tree(&mut self, tree: &'ast syn::UseTree) {
        if let syn::UseTree::Path(p) = tree {
            self.roots.insert(p.ident.to_string());
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if let Some(first) = path.segments.first() {
            self.roots.insert(first.ident.to_string());
        }
        syn::visit::visit_path(self, path);
    }
}

#[test]
fn configuration_depends_on_nothing_of_the_crate_but_errors() {
    for (from, targets) in arrows(&sources()) {
        if from.first().map(String::as_str) != Some("config") {
            continue;
        }
        for to in targets {
            let top = to.first().map(String::as_str).unwrap_or_default();
            assert!(
                matches!(top, "config" | "error"),
                "{} depends on {}",
                from.join("::"),
                to.join("::")
            );
        }
    }
}

#[test]
fn files_and_functions_stay_short() {
    let mut long = Vec::new();
    for source in sources() {
        let lines = source.text.lines().count();
        if lines > MAX_FILE_LINES {
            long.push(format!("{}: {lines} lines", source.file.display()));
        }
        let mut functions = Functions::default();
        functions.visit_file(&source.tree);
        let text: Vec<&str> = source.text.lines().collect();
        for (name, start, end) in functions.found {
            let length = end + 1 - start;
            let marked = start >= 2 && text[start - 2].trim_start().starts_with(LONG_MARK);
            if length > MAX_FN_LINES && !marked {
                long.push(format!(
                    "{}:{start}: fn {name} is {length} lines",
                    source.file.display()
                ));
            }
        }
    }
    assert!(long.is_empty(), "too long:\n{}", long.join("\n"));
}

/// Every function's name and first and last line (its signature to its closing brace).
#[derive(Default)]
struct Functions {
    found: Vec<(String, usize, usize)>,
}

impl Functions {
    fn add(&mut self, sig: &syn::Signature, block: &syn::Block) {
        let start = sig.fn_token.span().start().line;
        let end = block.brace_token.span.close().end().line;
        self.found.push((sig.ident.to_string(), start, end));
    }
}

impl<'ast> Visit<'ast> for Functions {
    fn visit_item_mod(&mut self, module: &'ast syn::ItemMod) {
        if !is_test_only(&module.attrs) {
            syn::visit::visit_item_mod(self, module);
        }
    }

    fn visit_item_fn(&mut self, function: &'ast syn::ItemFn) {
        self.add(&function.sig, &function.block);
        syn::visit::visit_item_fn(self, function);
    }

    fn visit_impl_item_fn(&mut self, function: &'ast syn::ImplItemFn) {
        self.add(&function.sig, &function.block);
        syn::visit::visit_impl_item_fn(self, function);
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

/// The checks above must see what they check: a file that breaks each rule is caught.
#[test]
fn the_checks_catch_what_they_look_for() {
    let tree =
        syn::parse_file("use crate::server::App; fn f() { crate::tools::call(); super::up::x(); }")
            .unwrap();
    let modules: BTreeSet<ModPath> = [
        vec!["browser".to_string()],
        vec!["browser".into(), "tab".into()],
    ]
    .into_iter()
    .collect();
    let mut paths = Paths {
        modules: &modules,
        here: vec!["browser".into(), "tab".into()],
        found: Vec::new(),
    };
    paths.visit_file(&tree);
    let found: Vec<String> = paths.found.iter().map(|p| p.join("::")).collect();
    assert!(found.contains(&"server::App".to_string()), "{found:?}");
    assert!(found.contains(&"tools::call".to_string()), "{found:?}");
    assert!(found.contains(&"browser::up::x".to_string()), "{found:?}");
    let graph: BTreeMap<ModPath, BTreeSet<ModPath>> = [
        (vec!["a".to_string()], [vec!["b".to_string()]].into()),
        (vec!["b".to_string()], [vec!["a".to_string()]].into()),
    ]
    .into();
    assert_eq!(circles(&graph).len(), 1);
    let long_fn = format!("fn f() {{\n{}}}\n", "    x();\n".repeat(90));
    let mut functions = Functions::default();
    functions.visit_file(&syn::parse_file(&long_fn).unwrap());
    assert_eq!(functions.found, vec![("f".to_string(), 1, 92)]);
}

/// Every file of the repository below `roots`, relative to `repo`.
fn files_below(repo: &Path, roots: &[&str]) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    for root in roots {
        walk(&repo.join(root), &mut files);
    }
    files
        .into_iter()
        .filter_map(|f| f.strip_prefix(repo).ok().map(Path::to_path_buf))
        .collect()
}

/// How the map must name a file: by its name, or a `mod.rs`/`lib.rs`/`main.rs` by its
/// folder (`session/`, or the crate's folder for a crate's root).
fn named_as(file: &Path) -> String {
    let name = file.file_name().unwrap().to_string_lossy().to_string();
    if !["mod.rs", "lib.rs", "main.rs"].contains(&name.as_str()) {
        return name;
    }
    let mut folders = file.parent().into_iter().flat_map(Path::iter).rev();
    match (folders.next(), folders.next()) {
        // The crate's own root (`src/lib.rs`) by its name; another crate's by its folder.
        (Some(src), Some(krate)) if src == "src" && krate != "." => {
            krate.to_string_lossy().to_string()
        }
        (Some(src), None) if src == "src" => name,
        (Some(folder), _) => format!("{}/", folder.to_string_lossy()),
        (None, _) => name,
    }
}

/// What the map leaves out: the files of `sources` it does not name, and the file names it
/// gives (`x.rs`, `a/b.js`, `page.html`) that no file of `existing` ends with.
fn map_gaps(doc: &str, sources: &[PathBuf], existing: &[PathBuf]) -> (Vec<String>, Vec<String>) {
    // A name counts where it starts a word: `src/` does not name `c/`.
    let mentions = |key: &str| {
        doc.match_indices(key).any(|(at, _)| {
            !doc[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '-')
        })
    };
    let unnamed = sources
        .iter()
        .filter(|file| !mentions(&named_as(file)))
        .map(|file| file.display().to_string())
        .collect();
    let named = regex::Regex::new(r"[\w./-]*[\w-]\.(?:rs|js|html)\b").unwrap();
    let mut absent: Vec<String> = named
        .find_iter(doc)
        .map(|m| m.as_str().trim_start_matches("./").to_string())
        .filter(|name| {
            !existing
                .iter()
                .any(|file| file.to_string_lossy().ends_with(name.as_str()))
        })
        .collect();
    absent.sort();
    absent.dedup();
    (unnamed, absent)
}

/// ARCHITECTURE.md names every file under `src/` and `crates/`, and every file it names exists.
#[test]
fn the_map_names_every_file_and_only_files_that_exist() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(repo.join("ARCHITECTURE.md")).unwrap();
    let sources: Vec<PathBuf> = files_below(&repo, &["src", "crates"])
        .into_iter()
        .filter(|file| !file.iter().any(|part| part == "target"))
        .collect();
    let existing = files_below(
        &repo,
        &["src", "crates", "tests", "bench", "scripts", "fixtures"],
    );
    let (unnamed, absent) = map_gaps(&doc, &sources, &existing);
    assert!(
        unnamed.is_empty(),
        "ARCHITECTURE.md does not name these files (a line each, under their folder): {unnamed:#?}"
    );
    assert!(
        absent.is_empty(),
        "ARCHITECTURE.md names files that do not exist: {absent:#?}"
    );
}

#[test]
fn the_map_check_finds_a_file_left_out_and_a_name_gone_stale() {
    let doc = "src/\n  a.rs  one\n  b/  (mod.rs the b, gone.rs was here)\n";
    let sources: Vec<PathBuf> = ["src/a.rs", "src/b/mod.rs", "src/new.rs", "src/c/mod.rs"]
        .iter()
        .map(PathBuf::from)
        .collect();
    let (unnamed, absent) = map_gaps(doc, &sources, &sources);
    assert_eq!(unnamed, ["src/new.rs", "src/c/mod.rs"]);
    assert_eq!(absent, ["gone.rs"]);
}
