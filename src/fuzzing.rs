//! The parsers of outside input as fuzz targets: each function takes any bytes and runs them
//! through what webpilot does with such input from a stranger (an import, an upload, a page
//! it fetched). `fuzz/` drives them under libFuzzer (`scripts/fuzz`); `tests/fuzz_corpora.rs`
//! replays the saved corpora and the crashes once found through the same functions, so the
//! stable suite keeps every input a fuzzer ever kept. Success is returning: an `Err` is a
//! fine answer to nonsense, a panic, a hang or a runaway allocation is a bug.

use url::Url;

use crate::policy::UrlPolicy;
use crate::profiles::{detect_format, parse_import};
use crate::web::documents::{self, DocumentKind};
use crate::web::extract::{ExtractKind, TextFormat};

/// A fuzz target: any bytes in, nothing out but a return.
pub type Target = fn(&[u8]);

/// Every target by its name in `fuzz/fuzz_targets/` and `fuzz/corpus/`.
pub const TARGETS: &[(&str, Target)] = &[
    ("cookies", cookies),
    ("trace", trace),
    ("document", document),
    ("robots", robots),
    ("sitemap", sitemap),
    ("url_policy", url_policy),
];

/// The most cookies an import takes in these runs (the service's default is larger; the
/// parser's paths are the same).
const MAX_COOKIES: usize = 200;

/// A cookies import (`browser_cookies` action=import): cookies.txt, a JSON array or a
/// Playwright storageState, told apart as the tool does.
pub fn cookies(data: &[u8]) {
    if let Ok(content) = std::str::from_utf8(data) {
        let _ = parse_import(content, detect_format(content), MAX_COOKIES);
    }
}

/// An uploaded trace (a replay's zip, or its trace.jsonl), and the Playwright test written
/// from its steps.
pub fn trace(data: &[u8]) {
    if let Ok(steps) = crate::trace::read_steps(data) {
        let _ = crate::replay::playwright_spec(&steps, "fuzz", None, &Default::default());
    }
}

/// A fetched document, of the kind its bytes say (a zip package's parts, an OLE file), else
/// as CSV; then its HTML, as `extract=links` asks for it.
pub fn document(data: &[u8]) {
    let url = Url::parse("https://fuzz.invalid/file").expect("a literal URL");
    let kind =
        documents::kind_of("application/octet-stream", &url, data).unwrap_or(DocumentKind::Csv);
    if let Ok(read) = documents::read(data, kind, ExtractKind::Main, TextFormat::Markdown, &url) {
        let _ = read.html();
    }
}

/// A site's robots.txt, and what a crawl asks of it.
pub fn robots(data: &[u8]) {
    use crate::crawl::robots::{crawl_delay, read_rules};
    for cut in [false, true] {
        if let Some(robot) = read_rules("webpilot", data.to_vec(), cut) {
            for url in ["https://site.test/", "https://site.test/private/a?b=c#d"] {
                let _ = robot.allowed(url);
            }
            let _ = crawl_delay(&robot);
        }
    }
}

/// A sitemap file, plain or gzip.
pub fn sitemap(data: &[u8]) {
    let _ = crate::crawl::sitemaps::read_file(data.to_vec(), 1000);
}

/// URL policy patterns and domain rules as an operator (or a tenant's key) writes them, one per
/// line: `+` a domain allowed, `-` one denied, anything else a `fetch.allow` pattern; the last
/// line is also a URL judged by the policy made.
pub fn url_policy(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (mut allow, mut allow_domains, mut deny_domains) = (Vec::new(), Vec::new(), Vec::new());
    for line in text.lines() {
        match line.as_bytes().first() {
            Some(b'+') => allow_domains.push(line[1..].to_string()),
            Some(b'-') => deny_domains.push(line[1..].to_string()),
            _ => allow.push(line.to_string()),
        }
    }
    let policy = UrlPolicy::new(&allow).and_then(|p| p.with_domains(&allow_domains, &deny_domains));
    if let (Ok(policy), Some(last)) = (policy, text.lines().last()) {
        if let Ok(url) = Url::parse(last) {
            let _ = policy.check_url(&url);
        }
        let _ = policy.check_host(last);
        let _ = policy.narrowed("fuzz", &allow_domains, &deny_domains);
    }
}
