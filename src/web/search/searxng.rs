//! SearXNG's JSON API (`/search?format=json`). Instances must enable JSON output; a 403 means
//! they have not.

use serde::Deserialize;
use serde_json::Value;

use super::{Failure, SearchHit, SearchRequest, TimeRange, body, plain_text, send};

#[derive(Deserialize)]
struct Response {
    #[serde(default)]
    results: Vec<Hit>,
    #[serde(default)]
    unresponsive_engines: Vec<Value>,
    error: Option<String>,
}

#[derive(Deserialize)]
struct Hit {
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    engine: Option<String>,
}

pub async fn search(
    http: &reqwest::Client,
    instance: &str,
    request: &SearchRequest,
) -> Result<Vec<SearchHit>, Failure> {
    let endpoint = format!("{}/search", instance.trim_end_matches('/'));
    let mut query = vec![
        ("q", request.query_with_sites()),
        ("format", "json".into()),
        ("pageno", "1".into()),
    ];
    if let Some(language) = &request.language {
        query.push(("language", language.clone()));
    }
    if let Some(range) = request.time_range {
        // SearXNG knows day, month and year; a week is closest to a month without losing results.
        let range = match range {
            TimeRange::Day => "day",
            TimeRange::Week | TimeRange::Month => "month",
            TimeRange::Year => "year",
        };
        query.push(("time_range", range.into()));
    }
    let response = send(http.get(&endpoint).query(&query)).await?;
    if response.status().as_u16() == 403 {
        return Err(Failure::Http(
            403,
            "JSON output is disabled on this SearXNG instance (enable `json` in search.formats of its settings.yml)".into(),
        ));
    }
    let text = body(response).await?;
    parse(&text)
}

fn parse(text: &str) -> Result<Vec<SearchHit>, Failure> {
    let response: Response = serde_json::from_str(text)
        .map_err(|e| Failure::BadResponse(format!("not SearXNG JSON: {e}")))?;
    if let Some(error) = response.error {
        return Err(Failure::BadResponse(error));
    }
    if response.results.is_empty() && !response.unresponsive_engines.is_empty() {
        let engines: Vec<String> = response
            .unresponsive_engines
            .iter()
            .filter_map(|pair| {
                let pair = pair.as_array()?;
                Some(format!(
                    "{} ({})",
                    pair.first()?.as_str()?,
                    pair.get(1)?.as_str()?
                ))
            })
            .collect();
        return Err(Failure::Unreachable(format!(
            "no engine answered: {}",
            engines.join(", ")
        )));
    }
    Ok(response
        .results
        .into_iter()
        .map(|hit| SearchHit {
            title: plain_text(hit.title.as_deref().unwrap_or_default()),
            url: hit.url.unwrap_or_default(),
            snippet: plain_text(hit.content.as_deref().unwrap_or_default()),
            source: match hit.engine {
                Some(engine) => format!("searxng ({engine})"),
                None => "searxng".into(),
            },
        })
        .collect())
}
