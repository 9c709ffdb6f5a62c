//! `browser_read` mode=network and mode=console: what the tab's page did, filtered and paged
//! like every long read.

use crate::browser::{ConsoleQuery, NetworkQuery, StatusFilter, Tab};
use crate::error::{ToolError, ToolResult};
use crate::pages::paging::{Slice, slice_lines, slice_text};

use super::{ReadArgs, ReadMode, ReadOutput};

/// The network-only and console-only fields, for the error when another mode gets them.
fn misplaced(args: &ReadArgs, mode: ReadMode) -> Option<&'static str> {
    let network = [
        ("url", args.url.is_some()),
        ("status", args.status.is_some()),
        ("type", args.kind.is_some()),
        ("request", args.request.is_some()),
        ("data", args.data.is_some()),
    ];
    let console = [("level", args.level.is_some())];
    let since = [("since", args.since.is_some())];
    let wrong: Vec<(&str, bool)> = match mode {
        ReadMode::Network => console.to_vec(),
        ReadMode::Console => network.to_vec(),
        // since=last: what changed since the last list.
        ReadMode::Elements => [&network[..], &console[..]].concat(),
        _ => [&network[..], &console[..], &since[..]].concat(),
    };
    wrong
        .into_iter()
        .find(|(_, given)| *given)
        .map(|(name, _)| name)
}

/// Refuses fields that do not belong to `mode`.
pub(super) fn check_fields(args: &ReadArgs, mode: ReadMode) -> ToolResult<()> {
    match misplaced(args, mode) {
        Some(field) => {
            let home = if field == "level" {
                "mode=console"
            } else if field == "since" {
                "mode=elements (last), mode=network and mode=console"
            } else {
                "mode=network"
            };
            Err(
                ToolError::invalid(format!("field `{field}` applies to {home}"))
                    .with_hint(format!("use {home}, or leave `{field}` out")),
            )
        }
        None => Ok(()),
    }
}

/// `since`: `last_action`, or an id of this read's kind (`r12`, `c4`), or a bare number: the
/// first sequence number kept.
fn since(args: &ReadArgs, prefix: char, mark: u64) -> ToolResult<u64> {
    let Some(since) = args.since.as_deref().map(str::trim) else {
        return Ok(0);
    };
    if since == "last_action" {
        return Ok(mark);
    }
    since
        .strip_prefix(prefix)
        .unwrap_or(since)
        .parse::<u64>()
        .map(|n| n + 1)
        .map_err(|_| {
            ToolError::invalid(format!(
                "field `since`: {since:?} is neither \"last_action\" nor an id like {prefix}12"
            ))
            .with_hint("pass since=\"last_action\", or an id from an earlier read")
        })
}

/// The seq of a request id (`r12`).
fn request_id(id: &str) -> ToolResult<u64> {
    id.trim()
        .strip_prefix('r')
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| {
            ToolError::invalid(format!(
                "field `request`: {id:?} is not a request id like r12"
            ))
            .with_hint("take the id from the [rN] of a mode=network line")
        })
}

pub(super) async fn read_network(
    tab: &Tab,
    args: &ReadArgs,
    budget: usize,
    cursor: Option<&str>,
) -> ToolResult<ReadOutput> {
    tab.caught_up().await;
    let log = tab.log();
    if let Some(id) = &args.request {
        let seq = request_id(id)?;
        let Some((detail, body)) = log.request_detail(seq) else {
            return Err(ToolError::invalid(format!(
                "no request {id} on this tab (never made, or older than the tab keeps)"
            ))
            .with_hint("list the tab's requests with mode=network and take an id from there"));
        };
        return Ok(ReadOutput::with_request(
            slice_text(&body, budget, cursor)?,
            detail,
        ));
    }
    let status = match args.status.as_deref() {
        Some(text) => Some(StatusFilter::parse(text).ok_or_else(|| {
            ToolError::invalid(format!(
                "field `status`: {text:?} is not 4xx, 5xx, failed or a status code"
            ))
            .with_hint("pass status=\"5xx\", \"4xx\", \"failed\" or a code like 404")
        })?),
        None => None,
    };
    let query = NetworkQuery {
        url: args.url.clone(),
        status,
        kind: args.kind.clone(),
        since: since(args, 'r', log.marked().exchange)?,
    };
    if args.data.unwrap_or(false) {
        let blocks = log.fetched_json(&query);
        let count = blocks.len();
        let slice = slice_text(&blocks.join("\n\n"), budget, cursor)?;
        return Ok(ReadOutput::listed(slice, ReadMode::Network, count, None));
    }
    let list = log.network(&query);
    let slice = slice_lines(&list.lines, budget, cursor)?;
    Ok(ReadOutput::listed(
        slice,
        ReadMode::Network,
        list.lines.len(),
        Some(list.recorded),
    ))
}

pub(super) async fn read_console(
    tab: &Tab,
    args: &ReadArgs,
    budget: usize,
    cursor: Option<&str>,
) -> ToolResult<ReadOutput> {
    tab.caught_up().await;
    let log = tab.log();
    let query = ConsoleQuery {
        level: args.level,
        since: since(args, 'c', log.marked().message)?,
    };
    let list = log.console(&query);
    let slice: Slice = slice_lines(&list.lines, budget, cursor)?;
    Ok(ReadOutput::listed(
        slice,
        ReadMode::Console,
        list.lines.len(),
        Some(list.recorded),
    ))
}
