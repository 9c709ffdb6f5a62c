//! Site crawls (`crawl_batch` with `follow`) against a generated site served by the test on two
//! host names: links followed within a scope and depth, one read per page (fragments, `utm_`
//! parameters, loops and a redirect chain), robots.txt and its crawl delay, a sitemap index with
//! a gzip sitemap, a page only a browser renders, a site's own Markdown, `max_pages`, globs, and
//! a map that lists without reading. What the server saw is asserted, not only the report.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use common::web_fixtures::config;
use common::{Harness, call_at, start_with};
use serde_json::{Value, json};

const SECTIONS: usize = 10;
const PAGES_PER_SECTION: usize = 29;
/// The site's robots.txt crawl delay, in seconds.
const DELAY: f64 = 0.005;

fn service() -> &'static Harness {
    static SERVICE: OnceLock<Harness> = OnceLock::new();
    SERVICE.get_or_init(|| {
        start_with(|fixtures| {
            let mut config = config(fixtures);
            config.crawl.per_host = 4;
            config.crawl.max_urls = 1_000;
            config.fetch.read_timeout_ms = 5_000;
            config
        })
    })
}

/// (host header, path and query, accept header, when), in arrival order.
type Log = Arc<Mutex<Vec<(String, String, String, Instant)>>>;
/// The site's PDF, once a test printed it.
type Pdf = Arc<Mutex<Option<Vec<u8>>>>;

/// The generated site: one server, reached as `127.0.0.1` (the site) and `localhost` (another
/// host, out of a `same_host` scope).
struct Site {
    origin: String,
    other: String,
    log: Log,
    pdf: Pdf,
}

/// How the site asks to be crawled: its robots.txt's `Crawl-delay`, in seconds.
#[derive(Clone, Copy)]
struct Pace(f64);

impl Site {
    async fn start() -> Self {
        Self::paced(Pace(DELAY)).await
    }

    async fn paced(pace: Pace) -> Self {
        use axum::extract::{Request, State};
        let log: Log = Default::default();
        let pdf: Pdf = Default::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let origin = format!("http://127.0.0.1:{port}");
        let other = format!("http://localhost:{port}");
        let (site_origin, site_other, site_pdf) = (origin.clone(), other.clone(), pdf.clone());
        let app = axum::Router::new()
            .fallback(move |State(log): State<Log>, request: Request| {
                let (origin, other) = (site_origin.clone(), site_other.clone());
                let pdf = site_pdf.lock().unwrap().clone();
                async move {
                    let header = |name: &str| {
                        request
                            .headers()
                            .get(name)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_string()
                    };
                    let path = request
                        .uri()
                        .path_and_query()
                        .map(|p| p.to_string())
                        .unwrap_or_default();
                    let accept = header("accept");
                    log.lock().unwrap().push((
                        header("host"),
                        path.clone(),
                        accept.clone(),
                        Instant::now(),
                    ));
                    serve(&origin, &other, &path, (&accept, pace), pdf)
                }
            })
            .with_state(log.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self {
            origin,
            other,
            log,
            pdf,
        }
    }

    /// Prints the site's `/pdf-source` page to PDF with webpilot's browser (Chromium writes its
    /// links as link annotations) and serves it as `/guide.pdf`.
    async fn print_pdf(&self) {
        use base64::Engine;
        let api = &service().api;
        let session = "crawl-site-pdf";
        let open = json!({"target": self.url("/pdf-source"), "session": session});
        assert_eq!(call_at(api, "browser_navigate", open).await.0, 200);
        let print = json!({"format": "pdf", "session": session});
        let (status, printed) = call_at(api, "browser_screenshot", print).await;
        assert_eq!(status, 200, "{printed:#}");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(printed["image"].as_str().unwrap())
            .unwrap();
        *self.pdf.lock().unwrap() = Some(bytes);
    }

    /// Paths the site's own host was asked for, with how often.
    fn requested(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for (host, path, _, _) in self.log.lock().unwrap().iter() {
            if host.starts_with("127.0.0.1") {
                *counts.entry(path.clone()).or_default() += 1;
            }
        }
        counts
    }

    fn hosts(&self) -> BTreeSet<String> {
        let log = self.log.lock().unwrap();
        log.iter().map(|(host, ..)| host.clone()).collect()
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.origin)
    }
}

fn page(title: &str, links: &[String], extra_head: &str) -> String {
    let anchors: String = links
        .iter()
        .map(|l| format!("<li><a href=\"{l}\">{}</a></li>", link_text(l)))
        .collect();
    format!(
        "<!doctype html><html><head><title>{title}</title>{extra_head}</head><body><main>\
         <h1>{title}</h1><p>{title} explains one part of the generated site, at enough length \
         to be read as an article by the extraction that crawls use.</p><ul>{anchors}</ul>\
         </main></body></html>"
    )
}

/// The text of the link to `href`: what a map lists as its title.
fn link_text(href: &str) -> String {
    match href.trim_start_matches('/').split('/').collect::<Vec<_>>()[..] {
        ["section", s, ""] => format!("Section {s}"),
        _ => format!("Link to {href}"),
    }
}

fn serve(
    origin: &str,
    other: &str,
    path: &str,
    (accept, Pace(delay)): (&str, Pace),
    pdf: Option<Vec<u8>>,
) -> axum::response::Response {
    use axum::http::header::{CONTENT_TYPE, LOCATION};
    use axum::response::IntoResponse;
    let html = |body: String| axum::response::Html(body).into_response();
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match (path, &segments[..]) {
        ("/robots.txt", _) => format!(
            "User-agent: *\nDisallow: /private/\nCrawl-delay: {delay}\n\
             Sitemap: {origin}/sitemap_index.xml\n"
        )
        .into_response(),
        ("/sitemap_index.xml", _) => (
            [(CONTENT_TYPE, "application/xml")],
            format!(
                "<?xml version=\"1.0\"?><sitemapindex xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\
                 <sitemap><loc>{origin}/sitemap-a.xml</loc></sitemap>\
                 <sitemap><loc>{origin}/sitemap-b.xml.gz</loc></sitemap></sitemapindex>"
            ),
        )
            .into_response(),
        ("/sitemap-a.xml", _) => (
            [(CONTENT_TYPE, "application/xml")],
            urlset(origin, &[0, 1, 2, 3, 4], true),
        )
            .into_response(),
        ("/sitemap-b.xml.gz", _) => {
            let mut packer =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            packer
                .write_all(urlset(origin, &[5, 6, 7, 8, 9], false).as_bytes())
                .unwrap();
            ([(CONTENT_TYPE, "application/gzip")], packer.finish().unwrap()).into_response()
        }
        ("/llms.txt", _) => (
            [(CONTENT_TYPE, "text/plain")],
            "# The site\n\n> For agents.\n\n- [The guide](/guide): how it works\n",
        )
            .into_response(),
        ("/", _) => {
            let mut links: Vec<String> = (0..SECTIONS).map(|s| format!("/section/{s}/")).collect();
            links.extend(
                [
                    "/old",
                    "/spa",
                    "/md/0",
                    "/guide.pdf",
                    "/private/secret",
                    "/#top",
                    "/?utm_source=news",
                ]
                .map(String::from),
            );
            links.push(format!("{other}/"));
            html(page("Home", &links, ""))
        }
        (_, ["section", s, ""]) => {
            let mut links: Vec<String> = (0..PAGES_PER_SECTION)
                .map(|n| format!("/page/{s}/{n}"))
                .collect();
            links.extend([
                "/".to_string(),
                format!("/page/{s}/0#part-2"),
                format!("/page/{s}/1?utm_campaign=c&utm_source=y"),
                format!("/private/{s}"),
                format!("{other}/section/{s}/"),
            ]);
            html(page(&format!("Section {s}"), &links, ""))
        }
        (_, ["page", s, n]) => {
            let n: usize = n.parse().unwrap_or(0);
            let next = if n + 1 < PAGES_PER_SECTION {
                format!("<link rel=\"next\" href=\"/page/{s}/{}\">", n + 1)
            } else {
                String::new()
            };
            let links = [format!("/section/{s}/"), "/".to_string()];
            html(page(&format!("Page {s}.{n}"), &links, &next))
        }
        ("/old", _) => (axum::http::StatusCode::MOVED_PERMANENTLY, [(LOCATION, "/moved")])
            .into_response(),
        ("/moved", _) => {
            (axum::http::StatusCode::FOUND, [(LOCATION, "/landing")]).into_response()
        }
        ("/pdf-source", _) => html(page("The guide", &[format!("{origin}/from-pdf")], "")),
        ("/guide.pdf", _) => match pdf {
            Some(bytes) => ([(CONTENT_TYPE, "application/pdf")], bytes).into_response(),
            None => axum::http::StatusCode::NOT_FOUND.into_response(),
        },
        // A JavaScript shell: its link exists only once a browser ran the script.
        ("/spa", _) => html(
            "<!doctype html><html><head><title>App</title></head><body><div id=\"root\"></div>\
             <script>document.getElementById('root').innerHTML = '<main><h1>App</h1><p>' + \
             'Rendered by the browser, with a link only it shows, long enough to read.</p>' + \
             '<a href=\"/spa-only\">Only in the app</a></main>';</script></body></html>"
                .to_string(),
        ),
        (_, ["md", k]) if accept.contains("text/markdown") => {
            let k: usize = k.parse().unwrap_or(0);
            (
                [(CONTENT_TYPE, "text/markdown; charset=utf-8")],
                format!("# Markdown {k}\n\nThe site's own Markdown.\n\n[Next](/md/{})\n", k + 1),
            )
                .into_response()
        }
        _ => html(page(&format!("Page {path}"), &[], "")),
    }
}

fn urlset(origin: &str, orphans: &[usize], with_home: bool) -> String {
    let mut locs: Vec<String> = orphans
        .iter()
        .map(|n| format!("<url><loc>{origin}/orphan/{n}</loc></url>"))
        .collect();
    if with_home {
        locs.push(format!("<url><loc>{origin}/</loc></url>"));
    }
    format!(
        "<?xml version=\"1.0\"?><urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">{}</urlset>",
        locs.concat()
    )
}

/// Starts a crawl and follows crawl_status until the task finished, through every cursor of
/// its last report: (the last page's summary, every result, error, skipped and listed URL).
async fn crawl(args: Value) -> (Value, Outcomes) {
    let api = &service().api;
    let (status, created) = call_at(api, "crawl_batch", args).await;
    assert_eq!(status, 200, "{created:#}");
    let id = created["task_id"].as_str().unwrap().to_string();
    common::task_reaches(api, &id, &["completed", "failed"], Duration::from_secs(90)).await;
    let mut outcomes = Outcomes::default();
    let mut cursor: Option<String> = None;
    loop {
        let (status, report) = call_at(
            api,
            "crawl_status",
            json!({"task_id": id, "cursor": cursor, "max_tokens": 100_000}),
        )
        .await;
        assert_eq!(status, 200, "{report:#}");
        for (field, list) in [
            ("results", &mut outcomes.results),
            ("errors", &mut outcomes.errors),
            ("skipped", &mut outcomes.skipped),
            ("listed", &mut outcomes.listed),
        ] {
            list.extend(report[field].as_array().cloned().unwrap_or_default());
        }
        cursor = report["next_cursor"].as_str().map(str::to_string);
        if cursor.is_none() {
            return (report, outcomes);
        }
    }
}

#[derive(Default, Debug)]
struct Outcomes {
    results: Vec<Value>,
    errors: Vec<Value>,
    skipped: Vec<Value>,
    listed: Vec<Value>,
}

fn paths(items: &[Value], origin: &str) -> BTreeSet<String> {
    items
        .iter()
        .map(|item| {
            let url = item["url"].as_str().unwrap();
            url.strip_prefix(origin).unwrap_or(url).to_string()
        })
        .collect()
}

fn set(paths: impl IntoIterator<Item = String>) -> BTreeSet<String> {
    paths.into_iter().collect()
}

/// Three hops from the home page, with the sitemaps: every page in scope is read exactly once
/// and reported with how it was found; what robots.txt disallows, what lies on another host
/// and a redirect's end are reported as skipped, each with its reason, and never read twice.
#[tokio::test]
async fn a_site_is_crawled_from_its_home_page_and_sitemaps_once_per_page() {
    let site = Site::start().await;
    site.print_pdf().await;
    let (report, outcomes) = crawl(json!({
        "urls": [site.url("/")],
        "mode": "auto",
        "parallel": 4,
        "follow": {"depth": 3, "from_sitemap": true}
    }))
    .await;
    assert_eq!(report["status"], "completed", "{report:#}");
    assert!(outcomes.errors.is_empty(), "{:#?}", outcomes.errors);

    let mut expected = set((0..SECTIONS).map(|s| format!("/section/{s}/")));
    for s in 0..SECTIONS {
        expected.extend((0..PAGES_PER_SECTION).map(|n| format!("/page/{s}/{n}")));
    }
    expected.extend((0..10).map(|n| format!("/orphan/{n}")));
    expected.extend(
        [
            "/",
            "/old",
            "/spa",
            "/spa-only",
            "/md/0",
            "/md/1",
            "/md/2",
            "/guide.pdf",
            "/from-pdf",
        ]
        .map(String::from),
    );
    let read = paths(&outcomes.results, &site.origin);
    assert_eq!(read.len(), outcomes.results.len(), "a page read twice");
    assert_eq!(read, expected, "pages read");
    // Robots.txt is asked when a URL's turn comes: those it disallows count as done.
    assert_eq!(report["total"], expected.len() + 11, "{report:#}");
    assert_eq!(
        report["progress"],
        expected.len() + 11,
        "reads and robots skips"
    );

    let reason = |reason: &str| -> BTreeSet<String> {
        let items: Vec<Value> = outcomes
            .skipped
            .iter()
            .filter(|s| s["reason"] == reason)
            .cloned()
            .collect();
        paths(&items, &site.origin)
    };
    let mut robots = set((0..SECTIONS).map(|s| format!("/private/{s}")));
    robots.insert("/private/secret".into());
    assert_eq!(reason("robots"), robots);
    let mut elsewhere = set((0..SECTIONS).map(|s| format!("{}/section/{s}/", site.other)));
    elsewhere.insert(format!("{}/", site.other));
    assert_eq!(reason("scope"), elsewhere);
    assert_eq!(reason("duplicate"), set(["/landing".to_string()]));
    assert_eq!(outcomes.skipped.len(), 23, "{:#?}", outcomes.skipped);
    assert_eq!(report["skipped_count"], 23);

    let by_path = |path: &str| {
        outcomes
            .results
            .iter()
            .find(|r| r["url"] == site.url(path))
            .unwrap_or_else(|| panic!("{path} read"))
            .clone()
    };
    assert_eq!(by_path("/").get("depth"), None, "a seed has no depth");
    let section = by_path("/section/3/");
    assert_eq!(
        (section["depth"].as_u64(), &section["from"]),
        (Some(1), &json!(site.url("/")))
    );
    assert_eq!(by_path("/page/3/7")["depth"], 2);
    assert_eq!(by_path("/md/2")["depth"], 3);
    assert_eq!(
        by_path("/orphan/7").get("depth"),
        None,
        "sitemap entries are seeds"
    );
    assert_eq!(by_path("/orphan/7")["from"], site.url("/sitemap-b.xml.gz"));
    assert_eq!(by_path("/old")["result"]["final_url"], site.url("/landing"));
    assert_eq!(by_path("/spa")["result"]["via"], "browser");
    assert_eq!(by_path("/spa-only")["from"], site.url("/spa"));
    assert_eq!(by_path("/md/1")["result"]["via"], "markdown");
    assert_eq!(by_path("/md/1")["from"], site.url("/md/0"));
    assert_eq!(
        by_path("/from-pdf")["from"],
        site.url("/guide.pdf"),
        "a PDF's link"
    );
    assert!(by_path("/guide.pdf")["result"]["pdf"]["pages"].as_u64() >= Some(1));

    // The server's view: each page fetched once, nothing disallowed, nothing of the other
    // host, nothing past the depth, robots.txt and each sitemap once.
    let requested = site.requested();
    for path in &expected {
        let wanted = if path == "/spa" { 2 } else { 1 };
        assert_eq!(requested.get(path), Some(&wanted), "{path}: {requested:#?}");
    }
    assert!(
        !requested.keys().any(|p| p.starts_with("/private/")),
        "{requested:#?}"
    );
    assert!(
        !requested.keys().any(|p| p.contains("utm_")),
        "{requested:#?}"
    );
    assert_eq!(requested.get("/md/3"), None, "past the depth");
    for file in [
        "/robots.txt",
        "/sitemap_index.xml",
        "/sitemap-a.xml",
        "/sitemap-b.xml.gz",
    ] {
        assert_eq!(requested.get(file), Some(&1), "{file}: {requested:#?}");
    }
    assert_eq!(
        site.hosts(),
        set([site.origin[7..].to_string()]),
        "another host was asked"
    );

    // The crawl delay paced the site's pages: n fetches take at least (n - 1) delays.
    let log = site.log.lock().unwrap();
    let pages: Vec<Instant> = log
        .iter()
        .filter(|(_, path, ..)| expected.contains(path))
        .map(|(.., at)| *at)
        .collect();
    let span = *pages.last().unwrap() - pages[0];
    let floor = Duration::from_secs_f64(DELAY * (pages.len() - 1) as f64 * 0.9);
    assert!(
        span >= floor,
        "{} pages in {span:?}, paced at least {floor:?}",
        pages.len()
    );
}

/// `max_pages`, include and exclude globs bound a crawl: what is left out is reported with
/// its reason and never requested.
#[tokio::test]
async fn max_pages_and_globs_bound_a_crawl() {
    let site = Site::start().await;
    let (report, outcomes) = crawl(json!({
        "urls": [site.url("/")],
        "mode": "http",
        "parallel": 1,
        "follow": {"depth": 2, "max_pages": 12, "include": ["/", "/section/**", "/page/**"],
                   "exclude": ["/section/4/"]}
    }))
    .await;
    assert_eq!(report["status"], "completed", "{report:#}");
    assert_eq!(outcomes.results.len(), 12, "{:#?}", outcomes.results);
    assert_eq!(report["total"], 12);
    let read = paths(&outcomes.results, &site.origin);
    assert!(!read.contains("/section/4/"), "{read:?}");
    let scope: BTreeSet<String> = paths(
        &outcomes
            .skipped
            .iter()
            .filter(|s| s["reason"] == "scope")
            .cloned()
            .collect::<Vec<_>>(),
        &site.origin,
    );
    for left_out in ["/section/4/", "/old", "/spa", "/md/0"] {
        assert!(
            scope.contains(left_out),
            "{left_out} out of scope: {scope:?}"
        );
    }
    let over: Vec<&Value> = outcomes
        .skipped
        .iter()
        .filter(|s| s["reason"] == "max_pages")
        .collect();
    assert!(!over.is_empty(), "{:#?}", outcomes.skipped);
    let requested = site.requested();
    for skipped in outcomes.skipped.iter() {
        let path = skipped["url"]
            .as_str()
            .unwrap()
            .trim_start_matches(&site.origin);
        assert_eq!(
            requested.get(path),
            None,
            "{path} was skipped but requested"
        );
    }
    assert_eq!(
        requested.keys().filter(|p| !p.ends_with(".txt")).count(),
        12,
        "{requested:#?}"
    );
}

/// A map lists a site's URLs with their link text, its sitemaps' and its llms.txt's, and
/// fetches only the pages whose links it needs; what robots.txt disallows is skipped, not listed.
#[tokio::test]
async fn a_map_lists_urls_without_reading_them() {
    let site = Site::start().await;
    let (report, outcomes) = crawl(json!({
        "urls": [site.url("/")],
        "mode": "http",
        "follow": {"depth": 1, "map": true, "from_sitemap": true}
    }))
    .await;
    assert_eq!(report["status"], "completed", "{report:#}");
    assert!(outcomes.results.is_empty(), "a map reads no content");
    let listed: BTreeMap<String, Value> = outcomes
        .listed
        .iter()
        .map(|item| {
            let url = item["url"].as_str().unwrap();
            (
                url.trim_start_matches(&site.origin).to_string(),
                item.clone(),
            )
        })
        .collect();
    assert_eq!(listed["/"]["title"], "Home");
    assert_eq!(listed["/section/2/"]["title"], "Section 2");
    assert_eq!(listed["/section/2/"]["depth"], 1);
    assert_eq!(listed["/guide"]["title"], "The guide");
    assert_eq!(listed["/guide"]["from"], site.url("/llms.txt"));
    assert_eq!(listed["/orphan/8"]["from"], site.url("/sitemap-b.xml.gz"));
    for path in ["/old", "/spa", "/md/0"] {
        assert!(listed.contains_key(path), "{path}: {listed:#?}");
    }
    assert_eq!(report["listed_count"], listed.len());
    // What robots.txt keeps a crawl from reading is not listed as readable: it is skipped, as
    // a crawl reports it, with the rule.
    assert!(!listed.contains_key("/private/secret"), "{listed:#?}");
    let secret = outcomes
        .skipped
        .iter()
        .find(|s| s["url"] == site.url("/private/secret"))
        .unwrap_or_else(|| panic!("/private/secret skipped: {:#?}", outcomes.skipped));
    assert_eq!(secret["reason"], "robots", "{secret:#}");
    let rule = secret["rule"].as_str().unwrap_or_default();
    assert!(
        rule.contains("robots.txt disallows /private/secret"),
        "{secret:#}"
    );
    let requested = site.requested();
    let pages: Vec<&String> = requested
        .keys()
        .filter(|p| !p.ends_with(".txt") && !p.contains("sitemap"))
        .collect();
    assert_eq!(
        pages,
        ["/"],
        "a map of depth 1 fetches the seed only: {requested:#?}"
    );
}

/// A site crawl killed mid-way resumes on the next start with its frontier: every page of the
/// scope is read and reported once, none in error; only what was in flight at the kill was
/// requested again.
#[tokio::test]
async fn a_killed_site_crawl_resumes_where_it_was() {
    // Slow enough (a fifth of a second between fetches) to be caught mid-way.
    let site = Site::paced(Pace(0.2)).await;
    let (data, tmp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let env = [("WEBPILOT_FETCH_ALLOW", "127.0.0.1")];
    let (mut first, api) = common::spawn_service_with(data.path(), tmp.path(), &env);
    let args = json!({"urls": [site.url("/section/0/")], "mode": "http",
                      "follow": {"depth": 1, "include": ["/section/0/", "/page/0/*"]}});
    let (status, created) = call_at(&api, "crawl_batch", args).await;
    assert_eq!(status, 200, "{created:#}");
    let id = created["task_id"].as_str().unwrap().to_string();
    common::eventually("a few pages read", Duration::from_secs(30), || {
        let (api, id) = (api.clone(), id.clone());
        async move {
            let status = call_at(&api, "crawl_status", json!({"task_id": id}))
                .await
                .1;
            status["progress"].as_u64() >= Some(5)
        }
    })
    .await;
    first.kill().unwrap();
    first.wait().unwrap();
    let before_restart = site.requested();

    let (mut second, api) = common::spawn_service_with(data.path(), tmp.path(), &env);
    common::task_reaches(&api, &id, &["completed"], Duration::from_secs(60)).await;
    let (status, report) = call_at(
        &api,
        "crawl_status",
        json!({"task_id": id, "max_tokens": 100_000}),
    )
    .await;
    second.kill().unwrap();
    second.wait().unwrap();
    assert_eq!(status, 200, "{report:#}");
    assert_eq!(report["errors"], json!([]), "{report:#}");
    let results = report["results"].as_array().unwrap();
    let mut expected = set((0..PAGES_PER_SECTION).map(|n| format!("/page/0/{n}")));
    expected.insert("/section/0/".into());
    assert_eq!(paths(results, &site.origin), expected);
    assert_eq!(results.len(), expected.len(), "a page reported twice");
    assert!(
        before_restart
            .keys()
            .filter(|p| expected.contains(*p))
            .count()
            < expected.len(),
        "the kill came after the end: {before_restart:#?}"
    );
    let requested = site.requested();
    let again: Vec<&String> = requested
        .iter()
        .filter(|(path, n)| expected.contains(*path) && **n > 1)
        .map(|(path, _)| path)
        .collect();
    // Per host, 4 fetches at most were in flight when the first service died.
    assert!(again.len() <= 4, "read again: {again:?}");
}

/// Bad follow options answer a clear error before anything starts.
#[tokio::test]
async fn bad_follow_options_are_refused() {
    let api = &service().api;
    for (follow, says) in [
        (json!({"scope": "any"}), "include"),
        (json!({"include": ["/a/[b"]}), "follow.include[0]"),
        (json!({"max_pages": 0}), "max_pages"),
        (json!({"depth": 99}), "depth"),
    ] {
        let (status, body) = call_at(
            api,
            "crawl_batch",
            json!({"urls": ["http://127.0.0.1:9/"], "follow": follow}),
        )
        .await;
        assert_eq!(status, 400, "{body:#}");
        assert_eq!(body["error"]["code"], "INVALID_ARGUMENT", "{body:#}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{message}");
    }
}

/// `webpilot crawl` follows links as crawl_batch does: a depth, globs and a page budget on the
/// command line; one JSON line per page read and per URL skipped; the site served exactly the
/// pages read.
#[tokio::test]
async fn the_crawl_command_follows_links_within_its_bounds() {
    let site = Site::start().await;
    let flags =
        "--mode http --parallel 1 --depth 1 --include / --include /section/** --max-pages 5";
    let mut args: Vec<String> = flags.split(' ').map(String::from).collect();
    args.push(site.url("/"));
    let (code, lines) = common::crawl_command(&args).await;
    assert_eq!(code, Some(0), "{lines:#?}");
    let read: Vec<&Value> = lines.iter().filter(|l| l.get("result").is_some()).collect();
    assert_eq!(read.len(), 5, "{lines:#?}");
    let read_paths: BTreeSet<String> = read
        .iter()
        .map(|l| {
            l["url"]
                .as_str()
                .unwrap()
                .trim_start_matches(&site.origin)
                .to_string()
        })
        .collect();
    assert!(
        read_paths
            .iter()
            .all(|p| p == "/" || p.starts_with("/section/")),
        "{read_paths:?}"
    );
    let reasons: BTreeSet<&str> = lines.iter().filter_map(|l| l["reason"].as_str()).collect();
    assert!(
        reasons.contains("scope") && reasons.contains("max_pages"),
        "{reasons:?}"
    );
    let served: BTreeSet<String> = site
        .requested()
        .into_keys()
        .filter(|p| !p.ends_with(".txt"))
        .collect();
    assert_eq!(served, read_paths);
}
