//! `browser_read` `file`: a file the session downloaded (a click that saved it, or
//! `browser_interact action=download`) read like a page — a PDF, an office document, a book, a
//! table, HTML or text — as Markdown or text slices, or into data with `mode=json` (a
//! spreadsheet's rows by header, or a schema). The file is the site's, so untrusted.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{ReadArgs, ReadMode, ReadOutput, untrusted};
use crate::error::{ToolError, ToolResult};
use crate::pages::PageOptions;
use crate::pages::paging::{self, Slice};
use crate::tenancy::downloads;
use crate::tools::Call;
use crate::web::extract::{ExtractKind, TextFormat};

/// Most file names a "no such download" error lists.
const NAMES_LISTED: usize = 20;
/// Longest a read waits for a download still being written.
const DOWNLOAD_WAIT: Duration = Duration::from_secs(30);
/// How often it looks.
const DOWNLOAD_POLL: Duration = Duration::from_millis(50);

pub(super) async fn read(
    call: &mut Call<'_>,
    args: &ReadArgs,
    name: &str,
) -> ToolResult<ReadOutput> {
    let mode = args.mode.unwrap_or(ReadMode::Markdown);
    super::observe::check_fields(args, mode)?;
    let mut output = read_as(call, args, name, mode).await?;
    if call.bounded(args.boundaries) && !output.slice.content.is_empty() {
        output.slice.content = paging::bounded(&output.slice.content, name);
    }
    Ok(output)
}

async fn read_as(
    call: &mut Call<'_>,
    args: &ReadArgs,
    name: &str,
    mode: ReadMode,
) -> ToolResult<ReadOutput> {
    let page_only = [
        ("selector", args.selector.is_some()),
        ("ref", args.ref_id.is_some()),
        ("query", args.query.is_some()),
    ];
    if let Some((field, _)) = page_only.iter().find(|(_, given)| *given) {
        return Err(
            ToolError::invalid(format!("field `{field}` reads the page, not a file"))
                .with_hint(format!("leave `{field}` out with `file`")),
        );
    }
    let (extract, format) = match mode {
        ReadMode::Markdown => (ExtractKind::Main, TextFormat::Markdown),
        ReadMode::Text => (ExtractKind::Main, TextFormat::Text),
        ReadMode::Json => (ExtractKind::Json, TextFormat::Markdown),
        other => {
            return Err(ToolError::invalid(format!(
                "a file reads as markdown, text or json, not mode={}",
                serde_json::to_value(other)
                    .unwrap_or_default()
                    .as_str()
                    .unwrap_or("?")
            ))
            .with_hint("pass mode=markdown (the default for a file), text or json"));
        }
    };
    let full = args.full.unwrap_or(false);
    let options = PageOptions {
        extract: if full && extract == ExtractKind::Main {
            ExtractKind::Full
        } else {
            extract
        },
        format,
        max_tokens: args.max_tokens,
        ..PageOptions::default()
    }
    .with_data(args.schema.clone(), true)?;
    let path = saved_file(call, name).await?;
    let tenant = call.tenant().clone();
    let page = call
        .ctx
        .pages
        .read_file(&tenant, &path, &options, args.cursor.as_deref())
        .await?;
    let warnings = untrusted::visible_instructions(&page.content);
    let slice = Slice {
        content: page.content.clone(),
        truncated: page.truncated,
        next_cursor: page.next_cursor.clone(),
    };
    Ok(ReadOutput {
        data: page.data_read(),
        warnings,
        pdf: page.pdf,
        document: page.document,
        ..ReadOutput::new(slice, mode)
    })
}

/// The path of the session's download `name`: a plain file name in its downloads folder.
async fn saved_file(call: &mut Call<'_>, name: &str) -> ToolResult<PathBuf> {
    if !downloads::is_file_name(name) {
        return Err(ToolError::invalid(format!(
            "field `file` is a download's file name, not a path: {name:?}"
        ))
        .with_hint("pass the name a download reported (its `file`, or its path's last part)"));
    }
    let data_dir = call.ctx.config.data_dir.clone();
    let dir = call.session().await?.downloads_dir(&data_dir);
    let path = dir.join(name);
    // A click's download may still be on its way: wait for it while the folder holds one.
    let until = std::time::Instant::now() + call.time_left().min(DOWNLOAD_WAIT);
    loop {
        if tokio::fs::metadata(&path).await.is_ok_and(|m| m.is_file()) {
            return Ok(path);
        }
        let on_its_way = call.tab().await?.downloading(name) || downloads::writing(&dir).await;
        if std::time::Instant::now() >= until || !on_its_way {
            break;
        }
        tokio::time::sleep(DOWNLOAD_POLL).await;
    }
    let names = download_names(&dir).await;
    let listed = if names.is_empty() {
        "the session has downloaded nothing yet".to_string()
    } else {
        format!("its downloads: {}", names.join(", "))
    };
    Err(
        ToolError::invalid(format!("this session has no download named {name:?}")).with_hint(
            format!(
                "{listed}; a click that saves a file, or browser_interact action=download, adds one"
            ),
        ),
    )
}

/// The names of the complete files in a downloads folder, at most `NAMES_LISTED`.
async fn download_names(dir: &Path) -> Vec<String> {
    let files = downloads::complete_files(dir).await;
    files
        .into_iter()
        .take(NAMES_LISTED)
        .map(|(name, _)| name)
        .collect()
}
