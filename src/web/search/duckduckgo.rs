//! DuckDuckGo's HTML results page (no key): a form POST, results read from the markup, redirect
//! links (`//duckduckgo.com/l/?uddg=…`) decoded, and the "Next" form followed for more results.

use url::Url;

use super::{Failure, SearchHit, SearchRequest, TimeRange, body, plain_text, send};

/// Pages fetched at most for one query (10 results on the first, ~15 on later ones).
const MAX_PAGES: usize = 2;

pub async fn search(
    http: &reqwest::Client,
    endpoint: &str,
    request: &SearchRequest,
) -> Result<Vec<SearchHit>, Failure> {
    let endpoint = Url::parse(endpoint)
        .map_err(|e| Failure::BadResponse(format!("search.duckduckgo_url: {e}")))?;
    let mut form = first_page_form(request);
    let mut hits = Vec::new();
    for _ in 0..MAX_PAGES {
        let response = send(
            http.post(endpoint.clone())
                .header("Referer", endpoint.as_str())
                .form(&form),
        )
        .await?;
        if response.status().as_u16() == 202 {
            return Err(Failure::RateLimited("HTTP 202 ratelimit page".into()));
        }
        let html = body(response).await?;
        let page = parse(&html)?;
        hits.extend(page.hits);
        match page.next_form {
            Some(next) if hits.len() < request.max_results => form = next,
            _ => break,
        }
    }
    Ok(hits)
}

fn first_page_form(request: &SearchRequest) -> Vec<(String, String)> {
    let mut form = vec![
        ("q".to_string(), request.query_with_sites()),
        ("b".to_string(), String::new()),
        ("kl".to_string(), region(request.language.as_deref())),
    ];
    if let Some(range) = request.time_range {
        let code = match range {
            TimeRange::Day => "d",
            TimeRange::Week => "w",
            TimeRange::Month => "m",
            TimeRange::Year => "y",
        };
        form.push(("df".into(), code.into()));
    }
    form
}

/// DuckDuckGo's `kl` region: `de` → `de-de`, `en-us` → `us-en`, nothing → worldwide.
fn region(language: Option<&str>) -> String {
    match language.map(|l| l.to_ascii_lowercase()) {
        None => "wt-wt".into(),
        Some(l) => match l.split_once(['-', '_']) {
            Some((lang, country)) => format!("{country}-{lang}"),
            None if l == "en" => "us-en".into(),
            None => format!("{l}-{l}"),
        },
    }
}

struct ResultsPage {
    hits: Vec<SearchHit>,
    next_form: Option<Vec<(String, String)>>,
}

fn parse(html: &str) -> Result<ResultsPage, Failure> {
    let doc = crate::web::bounded::document(html).document;
    if doc
        .select("form#challenge-form, .anomaly-modal__title")
        .exists()
    {
        return Err(Failure::Captcha);
    }
    if !doc.select("#links, .results, .no-results").exists() {
        return Err(Failure::BadResponse(
            "no results list in the page (layout changed or blocked)".into(),
        ));
    }
    let mut hits = Vec::new();
    for result in doc.select("div.result").iter() {
        if result.is(".result--ad") {
            continue;
        }
        let link = result.select("h2 a").first();
        let Some(href) = link.attr("href") else {
            continue; // the "No results." placeholder has no link
        };
        let Some(url) = target_url(&href) else {
            continue;
        };
        hits.push(SearchHit {
            title: plain_text(&link.text()),
            url,
            snippet: plain_text(&result.select(".result__snippet").text()),
            source: "duckduckgo".into(),
        });
    }
    let next_form = doc.select("div.nav-link form").last();
    let next_form = next_form.exists().then(|| {
        next_form
            .select("input[type=hidden]")
            .iter()
            .filter_map(|input| {
                Some((
                    input.attr("name")?.to_string(),
                    input.attr("value")?.to_string(),
                ))
            })
            .collect()
    });
    Ok(ResultsPage { hits, next_form })
}

/// The real target of a result link: the `uddg` parameter of a redirect link, or the link
/// itself when DuckDuckGo gave it directly. Ads (`y.js`) are dropped.
fn target_url(href: &str) -> Option<String> {
    let absolute = Url::parse("https://duckduckgo.com/")
        .ok()?
        .join(href)
        .ok()?;
    if absolute
        .host_str()
        .is_some_and(|h| h.ends_with("duckduckgo.com"))
    {
        if absolute.path() == "/y.js" {
            return None;
        }
        return absolute
            .query_pairs()
            .find(|(name, _)| name == "uddg")
            .map(|(_, target)| target.into_owned());
    }
    Some(absolute.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_links_are_decoded_and_ads_dropped() {
        assert_eq!(
            target_url("//duckduckgo.com/l/?uddg=https%3A%2F%2Fgithub.com%2Fa%3Fb%3D1&rut=x")
                .as_deref(),
            Some("https://github.com/a?b=1")
        );
        assert_eq!(target_url("https://duckduckgo.com/y.js?ad_domain=x"), None);
        assert_eq!(
            target_url("https://example.org/x").as_deref(),
            Some("https://example.org/x")
        );
    }

    #[test]
    fn regions_follow_ddg_codes() {
        assert_eq!(region(None), "wt-wt");
        assert_eq!(region(Some("en")), "us-en");
        assert_eq!(region(Some("de-DE")), "de-de");
        assert_eq!(region(Some("en-GB")), "gb-en");
    }
}
