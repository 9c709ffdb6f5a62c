//! Brave Search API: `GET /res/v1/web/search` with the `X-Subscription-Token` header.
//! Descriptions are HTML (`<strong>` around query terms, entities) and are flattened.

use serde::Deserialize;

use super::{Failure, SearchHit, SearchRequest, TimeRange, body, plain_text, send};

/// Brave's maximum `count`.
const MAX_COUNT: usize = 20;

#[derive(Deserialize)]
struct Response {
    web: Option<Web>,
}

#[derive(Deserialize)]
struct Web {
    #[serde(default)]
    results: Vec<Hit>,
}

#[derive(Deserialize)]
struct Hit {
    #[serde(default)]
    url: String,
    #[serde(default)]
    title: String,
    #[serde(default)]
    description: String,
}

pub async fn search(
    http: &reqwest::Client,
    base: &str,
    key: &str,
    request: &SearchRequest,
) -> Result<Vec<SearchHit>, Failure> {
    let endpoint = format!("{}/res/v1/web/search", base.trim_end_matches('/'));
    let mut query = vec![
        ("q", request.query_with_sites()),
        ("count", request.max_results.min(MAX_COUNT).to_string()),
    ];
    if let Some(language) = &request.language {
        query.push(("search_lang", language.clone()));
    }
    if let Some(range) = request.time_range {
        let freshness = match range {
            TimeRange::Day => "pd",
            TimeRange::Week => "pw",
            TimeRange::Month => "pm",
            TimeRange::Year => "py",
        };
        query.push(("freshness", freshness.into()));
    }
    let response = send(
        http.get(endpoint)
            .header("X-Subscription-Token", key)
            .header("Accept", "application/json")
            .query(&query),
    )
    .await?;
    let text = body(response).await?;
    let response: Response = serde_json::from_str(&text)
        .map_err(|e| Failure::BadResponse(format!("not Brave JSON: {e}")))?;
    Ok(response
        .web
        .map(|web| web.results)
        .unwrap_or_default()
        .into_iter()
        .map(|hit| SearchHit {
            title: plain_text(&hit.title),
            url: hit.url,
            snippet: plain_text(&hit.description),
            source: "brave".into(),
        })
        .collect())
}
