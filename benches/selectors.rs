//! `extract=json` by a CSS selector schema, and the same in XPath, over a listing page of 1,000 job cards (the page
//! parsed and every card's five fields read, lists and URLs included), the median of `--rounds`
//! runs; the target is 50 ms.
//!
//! `cargo bench --bench selectors -- [--rounds N]` (under `cargo test --all-targets` it runs
//! three rounds, a smoke test).

use std::time::Instant;

use serde_json::json;
use url::Url;
use webpilot::web::data::SelectorSchema;

fn listings(count: usize) -> String {
    let cards: String = (1..=count)
        .map(|i| {
            format!(
                r#"<article class="job" data-id="{i}"><h2 class="title"> Engineer {i} </h2>
                <p class="company">Company {c}</p><a class="apply" href="/jobs/{i}">Apply</a>
                <span class="pay">{pay} EUR</span><ul class="tags"><li>remote</li>
                <li>level {level}</li></ul><p class="summary">Build and run services for team
                {c}; on call one week in six.</p></article>"#,
                c = i % 97,
                pay = 40_000 + i,
                level = i % 3
            )
        })
        .collect();
    format!(
        "<!doctype html><html><head><title>Jobs</title></head><body><header><nav>\
         <a href=\"/\">Home</a></nav></header><main>{cards}</main><footer>© Jobs</footer>\
         </body></html>"
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args
        .iter()
        .position(|a| a == "--rounds")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(3);
    let html = listings(1_000);
    let base = Url::parse("https://jobs.example/list").unwrap();
    let css = json!({"base": "article.job", "fields": {
        "title": ".title", "company": ".company", "url": {"selector": "a.apply", "attr": "href"},
        "pay": ".pay", "tags": {"selector": ".tags li", "all": true}}});
    let xpath = json!({"base": "//article[@class='job']", "fields": {
        "title": "./h2", "company": "./p[@class='company']", "url": "./a[@class='apply']/@href",
        "pay": "./span[@class='pay']", "tags": {"selector": "./ul/li", "all": true}}});
    for (kind, schema) in [("CSS", css), ("XPath", xpath)] {
        let schema = SelectorSchema::parse(&schema).expect("a valid schema");
        let mut times: Vec<f64> = (0..rounds)
            .map(|_| {
                let started = Instant::now();
                let data = schema.extract(&html, &base);
                let elapsed = started.elapsed().as_secs_f64() * 1000.0;
                assert_eq!(data.as_array().map(Vec::len), Some(1_000));
                assert_eq!(data[999]["url"], "https://jobs.example/jobs/1000");
                elapsed
            })
            .collect();
        times.sort_by(f64::total_cmp);
        println!(
            "selectors ({kind}): 1,000 listings ({} KB) in {:.1} ms median, {:.1}–{:.1} ms over {rounds} rounds (target 50 ms)",
            html.len() / 1024,
            times[times.len() / 2],
            times[0],
            times[times.len() - 1]
        );
    }
}
