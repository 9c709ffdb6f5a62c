//! MCP resources: what webpilot keeps for the caller's tenant, by URI.
//!
//! - `webpilot://downloads/{session}/{file}`: a session's downloads (HAR exports among them);
//! - `webpilot://screenshots/{file}`: screenshots and PDFs saved with `save`;
//! - `webpilot://traces/{session}`: a session's trace, as the zip `webpilot replay` takes;
//! - `webpilot://crawls/{task_id}`: a crawl task's status and results, as JSON.
//!
//! `resources/list` shows the downloads of the sessions this connection used, the tenant's
//! screenshots and its latest crawl tasks; `resources/read` takes any URI of the tenant's. A
//! URI of another tenant's reads as one that does not exist. Tool results that saved a file
//! carry a `resource_link` to it (`link_for`).

use std::path::Path;

use base64::Engine;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use rmcp::ErrorData;
use rmcp::model::{ReadResourceResult, Resource, ResourceContents, ResourceTemplate};

use crate::app::App;
use crate::ids::{SessionName, TaskId};
use crate::tenancy::{Tenant, downloads};

const SCHEME: &str = "webpilot://";
/// What a URI's path segment keeps as it is: RFC 3986's unreserved characters.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');
/// Most crawl tasks listed.
const TASKS_LISTED: usize = 20;

/// One thing a URI names.
#[derive(Debug, PartialEq)]
pub enum Kept {
    Download { session: SessionName, file: String },
    Screenshot { file: String },
    Trace { session: SessionName },
    Crawl { task: TaskId },
}

impl Kept {
    pub fn uri(&self) -> String {
        let part = |text: &str| utf8_percent_encode(text, SEGMENT).to_string();
        match self {
            Self::Download { session, file } => {
                format!(
                    "{SCHEME}downloads/{}/{}",
                    part(session.as_str()),
                    part(file)
                )
            }
            Self::Screenshot { file } => format!("{SCHEME}screenshots/{}", part(file)),
            Self::Trace { session } => format!("{SCHEME}traces/{}", part(session.as_str())),
            Self::Crawl { task } => format!("{SCHEME}crawls/{}", part(task.as_str())),
        }
    }

    /// What `uri` names, if it is one of ours (names checked as tools check them).
    pub fn parse(uri: &str) -> Option<Self> {
        let rest = uri.strip_prefix(SCHEME)?;
        let parts: Vec<String> = rest
            .split('/')
            .map(|p| {
                percent_decode_str(p)
                    .decode_utf8()
                    .ok()
                    .map(|p| p.into_owned())
            })
            .collect::<Option<_>>()?;
        let file = |name: &String| plain_file(name).then(|| name.clone());
        let session = |name: &String| SessionName::parse(name).ok();
        match parts.as_slice() {
            [kind, s, f] if kind == "downloads" => Some(Self::Download {
                session: session(s)?,
                file: file(f)?,
            }),
            [kind, f] if kind == "screenshots" => Some(Self::Screenshot { file: file(f)? }),
            [kind, s] if kind == "traces" => Some(Self::Trace {
                session: session(s)?,
            }),
            [kind, t] if kind == "crawls" => Some(Self::Crawl {
                task: TaskId::parse(t).ok()?,
            }),
            _ => None,
        }
    }
}

/// A name a URI may give a saved file: a plain name of a complete file.
fn plain_file(name: &str) -> bool {
    downloads::is_file_name(name) && !downloads::is_partial(name)
}

/// The URI templates clients fill in.
pub fn templates() -> Vec<ResourceTemplate> {
    let template = |uri: &str, name: &str, description: &str| {
        ResourceTemplate::new(format!("{SCHEME}{uri}"), name).with_description(description)
    };
    vec![
        template(
            "downloads/{session}/{file}",
            "download",
            "A file a browser session downloaded (a click, action=download, a HAR export)",
        ),
        template(
            "screenshots/{file}",
            "screenshot",
            "A screenshot or PDF saved with browser_screenshot save",
        ),
        template(
            "traces/{session}",
            "trace",
            "A session's recorded tool calls, as a zip for webpilot replay",
        )
        .with_mime_type("application/zip"),
        template(
            "crawls/{task_id}",
            "crawl",
            "A crawl task's status and results (subscribe for progress)",
        )
        .with_mime_type("application/json"),
    ]
}

/// The tenant's files and tasks worth listing: the downloads of `sessions`, its screenshots,
/// its latest crawl tasks.
pub async fn list(app: &App, tenant: &Tenant, sessions: &[SessionName]) -> Vec<Resource> {
    let root = tenant.data_dir(&app.config.data_dir);
    let mut listed = Vec::new();
    for session in sessions {
        let dir = tenant.downloads_dir(&app.config.data_dir, session);
        for (file, size) in downloads::complete_files(&dir).await {
            let kept = Kept::Download {
                session: session.clone(),
                file: file.clone(),
            };
            listed.push(resource(&kept, &file, size));
        }
    }
    for (file, size) in downloads::complete_files(&root.join("screenshots")).await {
        let kept = Kept::Screenshot { file: file.clone() };
        listed.push(resource(&kept, &file, size));
    }
    if let Ok(tasks) = app.crawler.list(tenant, None, TASKS_LISTED).await {
        for task in tasks.tasks {
            let name = format!("crawl {} ({})", task.task_id, task.status.as_str());
            let kept = Kept::Crawl { task: task.task_id };
            listed.push(Resource::new(kept.uri(), name).with_mime_type("application/json"));
        }
    }
    listed
}

fn resource(kept: &Kept, name: &str, size: u64) -> Resource {
    Resource::new(kept.uri(), name)
        .with_mime_type(mime_of(name))
        .with_size(size)
}

/// What `uri` holds for `tenant`.
pub async fn read(app: &App, tenant: &Tenant, uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let kept = Kept::parse(uri).ok_or_else(|| not_found(uri))?;
    let root = tenant.data_dir(&app.config.data_dir);
    let contents = match &kept {
        Kept::Download { session, file } => {
            let path = tenant
                .downloads_dir(&app.config.data_dir, session)
                .join(file);
            file_contents(&path, uri, app.config.files.max_bytes).await?
        }
        Kept::Screenshot { file } => {
            let path = root.join("screenshots").join(file);
            file_contents(&path, uri, app.config.files.max_bytes).await?
        }
        Kept::Trace { session } => {
            let zip = app
                .traces
                .export(tenant, session)
                .await
                .map_err(|_| not_found(uri))?;
            blob(&zip, uri, "application/zip")
        }
        Kept::Crawl { task } => {
            let report = app
                .crawler
                .status(tenant, task)
                .await
                .map_err(|_| not_found(uri))?;
            let json = serde_json::to_string(&report).unwrap_or_default();
            ResourceContents::text(json, uri).with_mime_type("application/json")
        }
    };
    Ok(ReadResourceResult::new(vec![contents]))
}

/// The `resource_link` of a file a tool saved (at `path`), when it is one of `tenant`'s
/// downloads or screenshots.
pub fn link_for(app: &App, tenant: &Tenant, path: &Path) -> Option<Resource> {
    let root = tenant.data_dir(&app.config.data_dir);
    let file = path.file_name()?.to_str()?.to_string();
    let folder = path.parent()?;
    let kept = if folder == root.join("screenshots") {
        Kept::Screenshot { file: file.clone() }
    } else if folder.parent()? == root.join("downloads") {
        let session = SessionName::parse(folder.file_name()?.to_str()?).ok()?;
        Kept::Download {
            session,
            file: file.clone(),
        }
    } else {
        return None;
    };
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    Some(resource(&kept, &file, size))
}

/// Sends `notifications/resources/updated` for `uri` on every progress of the crawl task it
/// names until the task ends, the client goes or `stop` is cancelled. Only crawl tasks change
/// while they are watched; another URI is refused.
pub async fn watch(
    app: &App,
    tenant: &Tenant,
    uri: &str,
    peer: rmcp::service::Peer<rmcp::service::RoleServer>,
    stop: tokio_util::sync::CancellationToken,
) -> Result<(), ErrorData> {
    let Some(Kept::Crawl { task }) = Kept::parse(uri) else {
        return Err(ErrorData::invalid_params(
            format!(
                "{uri} does not change: only crawl tasks (webpilot://crawls/{{task_id}}) send updates"
            ),
            None,
        ));
    };
    let (summary, mut events) = app
        .crawler
        .subscribe(tenant, &task)
        .await
        .map_err(|_| not_found(uri))?;
    if summary.status.is_finished() {
        return Ok(());
    }
    let uri = uri.to_string();
    tokio::spawn(async move {
        loop {
            let event = tokio::select! {
                () = stop.cancelled() => break,
                event = events.recv() => event,
            };
            let done = match event {
                Ok(event) => event.name() == "done",
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => false,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => true,
            };
            let updated = rmcp::model::ResourceUpdatedNotificationParam::new(uri.clone());
            if peer.notify_resource_updated(updated).await.is_err() || done {
                break;
            }
        }
    });
    Ok(())
}

async fn file_contents(
    path: &Path,
    uri: &str,
    max_bytes: u64,
) -> Result<ResourceContents, ErrorData> {
    let size = tokio::fs::metadata(path)
        .await
        .map_err(|_| not_found(uri))?
        .len();
    if size > max_bytes {
        return Err(ErrorData::invalid_params(
            format!(
                "{uri} holds {size} bytes, more than the {max_bytes} a read takes ([files] max_bytes)"
            ),
            None,
        ));
    }
    let bytes = tokio::fs::read(path).await.map_err(|_| not_found(uri))?;
    let mime = mime_of(&path.to_string_lossy());
    Ok(match String::from_utf8(bytes) {
        Ok(text) if is_text(mime) => ResourceContents::text(text, uri).with_mime_type(mime),
        Ok(text) => blob(text.as_bytes(), uri, mime),
        Err(bytes) => blob(bytes.as_bytes(), uri, mime),
    })
}

fn blob(bytes: &[u8], uri: &str, mime: &str) -> ResourceContents {
    let data = base64::engine::general_purpose::STANDARD.encode(bytes);
    ResourceContents::blob(data, uri).with_mime_type(mime)
}

fn is_text(mime: &str) -> bool {
    mime.starts_with("text/") || mime.ends_with("json") || mime.ends_with("+json")
}

/// A file's media type by its extension.
fn mime_of(name: &str) -> &'static str {
    let extension = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match extension.as_deref().unwrap_or_default() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "webp" => "image/webp",
        "pdf" => "application/pdf",
        "har" => "application/har+json",
        "json" => "application/json",
        "zip" => "application/zip",
        "csv" => "text/csv",
        "txt" => "text/plain",
        "html" | "htm" => "text/html",
        "xlsx" => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "pptx" => "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        _ => "application/octet-stream",
    }
}

fn not_found(uri: &str) -> ErrorData {
    ErrorData::resource_not_found(
        format!("no resource {uri}"),
        Some(serde_json::json!({"uri": uri})),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_round_trip_and_refuse_paths() {
        let kept = Kept::Download {
            session: SessionName::parse("work").unwrap(),
            file: "Q3 report (1).xlsx".into(),
        };
        assert_eq!(Kept::parse(&kept.uri()), Some(kept));
        for bad in [
            "webpilot://downloads/work/..%2F..%2Fetc%2Fpasswd",
            "webpilot://downloads/work/..",
            "webpilot://screenshots/a%2Fb.png",
            "webpilot://downloads/bad%20name/x",
            "file:///etc/passwd",
        ] {
            assert_eq!(Kept::parse(bad), None, "{bad}");
        }
    }
}
