//! Tavily's search API: `POST /search` with a bearer key.

use serde::Deserialize;
use serde_json::json;

use super::{Failure, SearchHit, SearchRequest, TimeRange, body, plain_text, send};

#[derive(Deserialize)]
struct Response {
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
    content: String,
}

pub async fn search(
    http: &reqwest::Client,
    base: &str,
    key: &str,
    request: &SearchRequest,
) -> Result<Vec<SearchHit>, Failure> {
    let endpoint = format!("{}/search", base.trim_end_matches('/'));
    let mut payload = json!({
        "query": request.query,
        "max_results": request.max_results,
        "search_depth": request.search_depth.as_deref().unwrap_or("basic"),
    });
    if let Some(range) = request.time_range {
        payload["time_range"] = json!(match range {
            TimeRange::Day => "day",
            TimeRange::Week => "week",
            TimeRange::Month => "month",
            TimeRange::Year => "year",
        });
    }
    if !request.include_domains.is_empty() {
        payload["include_domains"] = json!(request.include_domains);
    }
    let response = send(http.post(endpoint).bearer_auth(key).json(&payload)).await?;
    let status = response.status().as_u16();
    if matches!(status, 432 | 433) {
        return Err(Failure::RateLimited(format!(
            "HTTP {status}: plan or usage limit"
        )));
    }
    let text = body(response).await?;
    let response: Response = serde_json::from_str(&text)
        .map_err(|e| Failure::BadResponse(format!("not Tavily JSON: {e}")))?;
    Ok(response
        .results
        .into_iter()
        .map(|hit| SearchHit {
            title: plain_text(&hit.title),
            url: hit.url,
            snippet: plain_text(&hit.content),
            source: "tavily".into(),
        })
        .collect())
}
