//! A session's (or one tab's) network capture saved as a HAR 1.2 file in its downloads folder.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Serialize;

use super::SessionGuard;
use crate::browser::observe::har::{HarPage, document};
use crate::error::{ErrorCode, ToolError, ToolResult};

/// A HAR file written.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SavedHar {
    pub path: PathBuf,
    pub bytes: u64,
    /// Requests in it.
    pub entries: usize,
    /// Tabs in it (HAR pages).
    pub tabs: Vec<String>,
    /// The raw file, for a REST client that asked for it (`Accept: application/har+json`).
    #[serde(skip)]
    pub content: Vec<u8>,
}

impl SessionGuard {
    /// Writes the capture of tab `only` (else of every tab) to `downloads/<session>/` as
    /// `<session>-<tab|all>-<unix time>.har` (mode 0600: it holds what the pages sent).
    pub async fn save_har(&mut self, data_dir: &Path, only: Option<&str>) -> ToolResult<SavedHar> {
        if let Some(id) = only {
            self.tab(id)?;
        }
        let mut titles = Vec::new();
        for tab in self.tabs().filter(|t| only.is_none_or(|id| t.id == id)) {
            titles.push((tab.id.clone(), tab.title().await));
        }
        // The logs are locked only while the document is built (no await in between).
        let (har, entries) = {
            let logs: Vec<_> = self
                .tabs()
                .filter(|t| only.is_none_or(|id| t.id == id))
                .map(|t| t.log())
                .collect();
            let pages: Vec<HarPage<'_>> = titles
                .iter()
                .zip(logs.iter())
                .map(|((tab, title), log)| HarPage {
                    tab,
                    title,
                    capture: log,
                })
                .collect();
            document(&pages)
        };
        let content = serde_json::to_vec_pretty(&har)
            .map_err(|e| ToolError::internal(format!("writing the HAR failed: {e}")))?;
        let seconds = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let name = format!("{}-{}-{seconds}.har", self.name(), only.unwrap_or("all"));
        let dir = self.downloads_dir(data_dir);
        let path = dir.join(&name);
        let (written, bytes) = (path.clone(), content.clone());
        tokio::task::spawn_blocking(move || {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::create_dir_all(&dir)?;
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&written)?
                .write_all(&bytes)
        })
        .await
        .map_err(|e| ToolError::internal(format!("writing the HAR failed: {e}")))?
        .map_err(|e| {
            ToolError::new(ErrorCode::Internal, format!("cannot write {name}: {e}"))
                .with_hint("check that the data directory is writable")
        })?;
        Ok(SavedHar {
            path,
            bytes: content.len() as u64,
            entries,
            tabs: titles.into_iter().map(|(tab, _)| tab).collect(),
            content,
        })
    }
}
