//! Where traces live: one folder per session in its tenant's data dir, its steps appended as
//! JSON Lines; exported as a zip; removed once older than `[trace] max_age_hours`.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use futures::future::BoxFuture;

use super::{Step, TRACE_FILE};
use crate::config::TraceConfig;
use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::ids::SessionName;
use crate::sync::Locked;
use crate::tenancy::Tenant;
use crate::web::documents::Package;

/// Every session's trace.
pub struct Traces {
    data_dir: PathBuf,
    config: TraceConfig,
    /// The last step number and the bytes written, by trace file.
    written: Mutex<HashMap<PathBuf, (u64, u64)>>,
    /// The writer: steps are appended in order off the calls' path.
    writer: std::sync::mpsc::Sender<Job>,
    /// Pictures asked for and not yet handed to the writer.
    pictures: Arc<Pending>,
}

/// A picture of the page being taken for a step: it arrives after the step is written.
pub type Picture = BoxFuture<'static, ToolResult<Vec<u8>>>;

/// How long a picture may take before its step goes without one.
const PICTURE_WAIT: Duration = Duration::from_secs(5);

/// Where the pictures live in a trace's folder and its export.
const SHOTS: &str = "shots";

#[derive(Default)]
struct Pending {
    count: AtomicUsize,
    done: tokio::sync::Notify,
}

/// What the writer thread does, in the order asked.
enum Job {
    Append {
        folder: PathBuf,
        file: PathBuf,
        line: String,
    },
    /// A step's picture, written whole (0600).
    Picture { file: PathBuf, bytes: Vec<u8> },
    /// Answers once every step asked before is written.
    Flush(std::sync::mpsc::Sender<()>),
}

/// Appends steps until every `Traces` is gone.
fn write_steps(jobs: std::sync::mpsc::Receiver<Job>) {
    for job in jobs {
        match job {
            Job::Append { folder, file, line } => {
                if let Err(error) = append(&folder, &file, &line) {
                    tracing::warn!(%error, "a trace step could not be written");
                }
            }
            Job::Picture { file, bytes } => {
                if let Err(error) = write_private(&file, &bytes) {
                    tracing::warn!(%error, "a trace picture could not be written");
                }
            }
            Job::Flush(done) => {
                let _ = done.send(());
            }
        }
    }
}

impl Traces {
    pub fn new(data_dir: PathBuf, config: TraceConfig) -> Self {
        let (writer, jobs) = std::sync::mpsc::channel();
        let started = std::thread::Builder::new()
            .name("trace-writer".into())
            .spawn(move || write_steps(jobs));
        if let Err(error) = started {
            tracing::warn!(%error, "no thread for the trace writer: traces are not written");
        }
        Self {
            data_dir,
            config,
            written: Mutex::new(HashMap::new()),
            writer,
            pictures: Arc::default(),
        }
    }

    /// Waits until every step recorded so far, and every picture asked for (or its time
    /// limit), is on disk.
    async fn flushed(&self) {
        let pictures = &self.pictures;
        let _ = tokio::time::timeout(PICTURE_WAIT, async {
            loop {
                let done = pictures.done.notified();
                if pictures.count.load(Ordering::Acquire) == 0 {
                    break;
                }
                done.await;
            }
        })
        .await;
        let (done, written) = std::sync::mpsc::channel();
        if self.writer.send(Job::Flush(done)).is_ok() {
            let _ = tokio::task::spawn_blocking(move || written.recv()).await;
        }
    }

    pub fn enabled(&self) -> bool {
        self.config.enabled
    }

    /// The folder of a session's trace.
    pub fn folder(&self, tenant: &Tenant, session: &SessionName) -> PathBuf {
        tenant
            .data_dir(&self.data_dir)
            .join("traces")
            .join(session.folder())
    }

    /// The JPEG quality of step pictures; `None` when traces keep none.
    pub fn picture_quality(&self) -> Option<u8> {
        let quality = self.config.screenshot_quality;
        (self.config.enabled && quality > 0).then_some(quality)
    }

    /// Appends a step (numbered here) to the session's trace, written in order off the call's
    /// path, with the picture being taken after it (written when it arrives, within 5 s); a
    /// trace past `max_bytes` keeps its steps so far. Failures are logged: a trace never fails
    /// a call.
    pub fn record(
        &self,
        tenant: &Tenant,
        session: &SessionName,
        mut step: Step,
        picture: Option<Picture>,
    ) {
        if !self.config.enabled {
            return;
        }
        let folder = self.folder(tenant, session);
        let file = folder.join(TRACE_FILE);
        let line = {
            let mut written = self.written.locked();
            let (seq, bytes) = written
                .entry(file.clone())
                .or_insert_with(|| existing(&file));
            if *bytes >= self.config.max_bytes {
                return;
            }
            *seq += 1;
            step.seq = *seq;
            if picture.is_some() {
                step.screenshot = Some(format!("{SHOTS}/{:04}.jpg", step.seq));
            }
            let Ok(mut line) = serde_json::to_string(&step) else {
                return;
            };
            line.push('\n');
            *bytes += line.len() as u64;
            line
        };
        let _ = self.writer.send(Job::Append {
            folder: folder.clone(),
            file,
            line,
        });
        if let (Some(picture), Some(name)) = (picture, step.screenshot) {
            self.take_picture(folder.join(name), picture);
        }
    }

    /// Hands the picture to the writer once it is taken, unless it fails or is late.
    fn take_picture(&self, file: PathBuf, picture: Picture) {
        let (writer, pictures) = (self.writer.clone(), self.pictures.clone());
        pictures.count.fetch_add(1, Ordering::AcqRel);
        tokio::spawn(async move {
            match tokio::time::timeout(PICTURE_WAIT, picture).await {
                Ok(Ok(bytes)) => {
                    let _ = writer.send(Job::Picture { file, bytes });
                }
                Ok(Err(error)) => tracing::debug!(%error, "no picture for a trace step"),
                Err(_) => tracing::debug!("a trace step's picture came too late"),
            }
            pictures.count.fetch_sub(1, Ordering::AcqRel);
            pictures.done.notify_waiters();
        });
    }

    /// The session's trace as a zip: `trace.jsonl` and its pictures (`shots/*.jpg`).
    pub async fn export(&self, tenant: &Tenant, session: &SessionName) -> ToolResult<Vec<u8>> {
        self.flushed().await;
        let folder = self.folder(tenant, session);
        let name = session.clone();
        tokio::task::spawn_blocking(move || {
            let steps = std::fs::read(folder.join(TRACE_FILE)).map_err(|_| no_trace(&name))?;
            let mut entries = vec![(TRACE_FILE.to_string(), steps)];
            entries.extend(pictures_in(&folder.join(SHOTS)));
            zip_of(&entries)
        })
        .await
        .map_err(|e| ToolError::internal(format!("exporting the trace failed: {e}")))?
    }

    /// The session's steps so far, in order.
    pub async fn steps(&self, tenant: &Tenant, session: &SessionName) -> ToolResult<Vec<Step>> {
        self.flushed().await;
        let file = self.folder(tenant, session).join(TRACE_FILE);
        let bytes = tokio::fs::read(&file)
            .await
            .map_err(|_| no_trace(session))?;
        read_steps(&bytes).map_err(|e| ToolError::internal(format!("the trace is damaged: {e}")))
    }

    /// A picture of the session's trace by its name in a step (`shots/0004.jpg`).
    pub async fn picture(
        &self,
        tenant: &Tenant,
        session: &SessionName,
        name: &str,
    ) -> ToolResult<Vec<u8>> {
        let file = name
            .strip_prefix(&format!("{SHOTS}/"))
            .filter(|file| {
                file.strip_suffix(".jpg")
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            })
            .ok_or_else(|| {
                ToolError::invalid(format!("{name:?} is not a picture of a trace"))
                    .with_hint("use a step's `screenshot`, like shots/0004.jpg")
            })?;
        self.flushed().await;
        let path = self.folder(tenant, session).join(SHOTS).join(file);
        tokio::fs::read(&path).await.map_err(|_| {
            ToolError::new(
                ErrorCode::NoSuchSession,
                format!("session {session}'s trace has no picture {name}"),
            )
            .with_hint("a step's picture may be missing when the page could not be captured")
        })
    }

    /// Removes traces whose last step is older than `max_age_hours`; returns how many.
    pub fn sweep(&self) -> usize {
        let max_age = Duration::from_secs(self.config.max_age_hours.saturating_mul(3600));
        let mut removed = 0;
        for folder in trace_folders(&self.data_dir) {
            let file = folder.join(TRACE_FILE);
            let age = std::fs::metadata(&file)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|at| SystemTime::now().duration_since(at).ok());
            if age.is_some_and(|age| age > max_age) && std::fs::remove_dir_all(&folder).is_ok() {
                self.written.locked().remove(&file);
                removed += 1;
            }
        }
        removed
    }
}

/// The steps of an exported trace (a zip holding `trace.jsonl`, or the JSON Lines themselves).
/// A zip comes from whoever calls; its parts are read within the document reader's caps, so a
/// small upload cannot inflate to gigabytes.
pub fn read_steps(bytes: &[u8]) -> Result<Vec<Step>, String> {
    let text = if bytes.starts_with(b"PK") {
        let mut archive = Package::open(bytes).map_err(|e| format!("not a trace zip: {e}"))?;
        if !archive.has(TRACE_FILE) {
            return Err(format!("the zip holds no {TRACE_FILE}"));
        }
        archive.text(TRACE_FILE)?
    } else {
        String::from_utf8(bytes.to_vec()).map_err(|_| "the trace is not text".to_string())?
    };
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .enumerate()
        .map(|(n, line)| {
            serde_json::from_str(line).map_err(|e| format!("step on line {}: {e}", n + 1))
        })
        .collect()
}

/// A picture of an exported trace (`shots/0004.jpg`), if it holds one.
pub fn read_image(bytes: &[u8], name: &str) -> Option<Vec<u8>> {
    Package::open(bytes).ok()?.bytes(name).ok()
}

/// The pictures in a trace's `shots/` folder, in step order, named as in the export.
fn pictures_in(shots: &Path) -> Vec<(String, Vec<u8>)> {
    let mut names: Vec<String> = std::fs::read_dir(shots)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| name.ends_with(".jpg"))
        .collect();
    names.sort();
    names
        .into_iter()
        .filter_map(|name| {
            let bytes = std::fs::read(shots.join(&name)).ok()?;
            Some((format!("{SHOTS}/{name}"), bytes))
        })
        .collect()
}

fn no_trace(session: &SessionName) -> ToolError {
    ToolError::new(
        ErrorCode::NoSuchSession,
        format!("session {session} has no trace"),
    )
    .with_hint("a trace is recorded for every session that used a browser tool while [trace] enabled is on; traces older than [trace] max_age_hours are removed")
}

/// The last step number and size of a trace written before this process started.
fn existing(file: &Path) -> (u64, u64) {
    match std::fs::read_to_string(file) {
        Ok(text) => (text.lines().count() as u64, text.len() as u64),
        Err(_) => (0, 0),
    }
}

fn write_private(file: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(folder) = file.parent() {
        std::fs::create_dir_all(folder)?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(file)?
        .write_all(bytes)
}

fn append(folder: &Path, file: &Path, line: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::create_dir_all(folder)?;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(file)?
        .write_all(line.as_bytes())
}

fn zip_of(entries: &[(String, Vec<u8>)]) -> ToolResult<Vec<u8>> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let deflated = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    // JPEGs are compressed already.
    let stored = deflated.compression_method(zip::CompressionMethod::Stored);
    for (name, bytes) in entries {
        let options = if name.ends_with(".jpg") {
            stored
        } else {
            deflated
        };
        zip.start_file(name.as_str(), options)
            .and_then(|()| zip.write_all(bytes).map_err(Into::into))
            .map_err(|e| ToolError::internal(format!("writing the trace zip failed: {e}")))?;
    }
    let cursor = zip
        .finish()
        .map_err(|e| ToolError::internal(format!("writing the trace zip failed: {e}")))?;
    Ok(cursor.into_inner())
}

/// Every session's trace folder: `traces/*` in the data dir and in each tenant's.
fn trace_folders(data_dir: &Path) -> Vec<PathBuf> {
    let mut roots = vec![data_dir.join("traces")];
    if let Ok(tenants) = std::fs::read_dir(data_dir.join("tenants")) {
        roots.extend(tenants.flatten().map(|t| t.path().join("traces")));
    }
    roots
        .iter()
        .filter_map(|root| std::fs::read_dir(root).ok())
        .flat_map(|entries| entries.flatten().map(|e| e.path()))
        .filter(|path| path.is_dir())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TraceConfig;

    #[test]
    fn an_uploaded_trace_zip_that_inflates_too_far_is_refused() {
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let deflated = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        zip.start_file(TRACE_FILE, deflated).unwrap();
        zip.write_all(&vec![b'\n'; 8 * 1024 * 1024]).unwrap();
        let bytes = zip.finish().unwrap().into_inner();
        let error = read_steps(&bytes).unwrap_err();
        assert!(error.contains("zip bomb"), "{error}");
        assert!(read_image(&bytes, TRACE_FILE).is_none());
    }

    fn step(tool: &str) -> Step {
        Step {
            seq: 0,
            at: "2026-12-03T00:00:00.000Z".into(),
            tool: tool.into(),
            args: serde_json::json!({}),
            target: None,
            tab: None,
            url: None,
            ok: true,
            summary: "ok".into(),
            elapsed_ms: 1,
            page_events: None,
            events: None,
            screenshot: None,
            person: Vec::new(),
            secrets: Vec::new(),
        }
    }

    #[tokio::test]
    async fn steps_are_numbered_exported_and_removed_when_old() {
        let dir = tempfile::tempdir().unwrap();
        let config = TraceConfig {
            max_age_hours: 1,
            ..TraceConfig::default()
        };
        let traces = Traces::new(dir.path().to_path_buf(), config.clone());
        let tenant = crate::tenancy::Tenant::operator(&crate::config::Config::default()).unwrap();
        let session = SessionName::parse("shop").unwrap();
        for tool in ["browser_navigate", "browser_interact"] {
            traces.record(&tenant, &session, step(tool), None);
        }
        // A process started later goes on numbering.
        traces.flushed().await;
        let again = Traces::new(dir.path().to_path_buf(), config);
        let picture: Picture = Box::pin(async { Ok(b"\xff\xd8jpeg".to_vec()) });
        again.record(&tenant, &session, step("browser_read"), Some(picture));
        let zip = again.export(&tenant, &session).await.unwrap();
        let steps = read_steps(&zip).unwrap();
        assert_eq!(steps[2].screenshot.as_deref(), Some("shots/0003.jpg"));
        assert_eq!(read_image(&zip, "shots/0003.jpg").unwrap(), b"\xff\xd8jpeg");
        let numbered: Vec<(u64, &str)> = steps.iter().map(|s| (s.seq, s.tool.as_str())).collect();
        assert_eq!(
            numbered,
            [
                (1, "browser_navigate"),
                (2, "browser_interact"),
                (3, "browser_read")
            ]
        );
        assert_eq!(again.sweep(), 0, "a fresh trace stays");
        let file = again.folder(&tenant, &session).join(TRACE_FILE);
        let old = SystemTime::now() - Duration::from_secs(2 * 3600);
        std::fs::File::options()
            .append(true)
            .open(&file)
            .unwrap()
            .set_modified(old)
            .unwrap();
        assert_eq!(again.sweep(), 1);
        assert!(!file.exists());
        let gone = again.export(&tenant, &session).await.unwrap_err();
        assert_eq!(gone.code, ErrorCode::NoSuchSession);
    }
}
