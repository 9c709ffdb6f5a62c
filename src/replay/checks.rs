//! The assertions a replay adds at its end (`--expect-text`, `--expect-url`,
//! `--expect-no-console-errors`, `--expect-no-failed-requests`), read from the replay's own tab.

use std::time::Instant;

use serde_json::Value;

use super::{Expectations, Outcome, Status};
use crate::browser::Level;
use crate::tools::{Caller, ReadArgs, ReadMode, Registry};

/// Each expectation as one more step of the report.
pub(super) async fn run(
    registry: &Registry,
    caller: &Caller,
    expect: &Expectations,
) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    for text in &expect.text {
        outcomes.push(shows(registry, caller, text).await);
    }
    if let Some(wanted) = &expect.url {
        outcomes.push(url_is(registry, caller, wanted).await);
    }
    if expect.no_console_errors {
        outcomes.push(no_console_errors(registry, caller).await);
    }
    if expect.no_failed_requests {
        outcomes.push(no_failed_requests(registry, caller).await);
    }
    outcomes
}

async fn shows(registry: &Registry, caller: &Caller, text: &str) -> Outcome {
    let started = Instant::now();
    let verdict = showing(registry, caller, text).await.map(|shown| {
        shown
            .then_some(())
            .ok_or_else(|| "the page does not show it".to_string())
    });
    judge(format!("expect text {text:?}"), started, verdict)
}

/// Whether the page (frames included) shows `text`.
async fn showing(registry: &Registry, caller: &Caller, text: &str) -> Result<bool, String> {
    let find = ReadArgs {
        mode: Some(ReadMode::Find),
        query: Some(text.to_string()),
        ..Default::default()
    };
    let found = read(registry, caller, find).await?;
    Ok(found["matches"].as_u64().is_some_and(|n| n > 0))
}

async fn url_is(registry: &Registry, caller: &Caller, wanted: &str) -> Outcome {
    let started = Instant::now();
    let args = ReadArgs {
        mode: Some(ReadMode::Network),
        max_tokens: Some(1),
        ..Default::default()
    };
    let read = read(registry, caller, args).await;
    judge(
        format!("expect url {wanted:?}"),
        started,
        read.map(|r| {
            let url = r["url"].as_str().unwrap_or_default();
            let holds = if wanted.contains('*') {
                crate::browser::glob_matches(wanted, url)
            } else {
                url.contains(wanted)
            };
            if holds {
                Ok(())
            } else {
                Err(format!("the URL is {url}"))
            }
        }),
    )
}

async fn no_console_errors(registry: &Registry, caller: &Caller) -> Outcome {
    let started = Instant::now();
    let args = ReadArgs {
        mode: Some(ReadMode::Console),
        level: Some(Level::Error),
        ..Default::default()
    };
    let read = read(registry, caller, args).await;
    judge(
        "expect no console errors".into(),
        started,
        read.map(|r| none_in(&r)),
    )
}

async fn no_failed_requests(registry: &Registry, caller: &Caller) -> Outcome {
    let started = Instant::now();
    let mut lines = Vec::new();
    let mut failure = None;
    for status in ["failed", "4xx", "5xx"] {
        let args = ReadArgs {
            mode: Some(ReadMode::Network),
            status: Some(status.to_string()),
            ..Default::default()
        };
        match read(registry, caller, args).await {
            Ok(r) => lines.extend(content_lines(&r)),
            Err(error) => failure = Some(error),
        }
    }
    // The browser asks for a favicon on its own; a site without one is not failing.
    lines.retain(|line| !line.contains("/favicon.ico other"));
    let verdict = match failure {
        Some(error) => Err(error),
        None if lines.is_empty() => Ok(Ok(())),
        None => Ok(Err(lines.join("\n"))),
    };
    judge("expect no failed requests".into(), started, verdict)
}

/// A recorded `find` that found `query`: the replay's page must show it too.
pub(super) async fn found_again(
    registry: &Registry,
    caller: &Caller,
    query: &str,
    outcome: &mut Outcome,
) {
    outcome.what = format!("check text {query:?}");
    (outcome.status, outcome.detail) = match showing(registry, caller, query).await {
        Ok(true) => (Status::Passed, None),
        Ok(false) => (
            Status::Failed,
            Some("the page showed it when recorded and does not now".into()),
        ),
        Err(error) => (Status::Failed, Some(error)),
    };
}

async fn read(registry: &Registry, caller: &Caller, mut args: ReadArgs) -> Result<Value, String> {
    args.max_tokens.get_or_insert(100_000);
    registry
        .call_with("browser_read", &args, caller)
        .await
        .map(|output| output.json)
        .map_err(|error| format!("{}: {}", error.code.name(), error.message))
}

fn content_lines(read: &Value) -> Vec<String> {
    read["content"]
        .as_str()
        .unwrap_or_default()
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(str::to_string)
        .collect()
}

/// No console error, page error or browser error; failed loads the browser logs are requests,
/// which `no_failed_requests` judges.
fn none_in(read: &Value) -> Result<(), String> {
    let mut lines = content_lines(read);
    lines.retain(|line| !line.contains("] error (network): "));
    if lines.is_empty() {
        Ok(())
    } else {
        Err(lines.join("\n"))
    }
}

/// A check's outcome; `started` is when it began reading.
fn judge(what: String, started: Instant, verdict: Result<Result<(), String>, String>) -> Outcome {
    let (status, detail) = match verdict {
        Ok(Ok(())) => (Status::Passed, None),
        Ok(Err(why)) | Err(why) => (Status::Failed, Some(why)),
    };
    Outcome {
        seq: 0,
        tool: "check".into(),
        what,
        status,
        detail,
        elapsed_ms: started.elapsed().as_millis() as u64,
        then: None,
        now: None,
        pictures: Vec::new(),
    }
}
