//! A session's downloads folder, `downloads/<session>/` in its tenant's data dir: where it is,
//! which names may be asked for in it, and what it holds. The browser writes there, and the
//! tools and the MCP front read from there.

use std::path::{Path, PathBuf};

use super::Tenant;
use crate::ids::SessionName;

impl Tenant {
    /// The downloads folder of `session`.
    pub fn downloads_dir(&self, data_dir: &Path, session: &SessionName) -> PathBuf {
        self.data_dir(data_dir)
            .join("downloads")
            .join(session.folder())
    }
}

/// A file name with no path in it: what a caller may name in a folder of theirs.
pub fn is_file_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['/', '\\', '\0'])
        && name.len() <= 255
}

/// A file still being written: Chromium and `action=download` write beside the final name.
pub fn is_partial(name: &str) -> bool {
    name.ends_with(".crdownload") || name.ends_with(".part")
}

/// The complete files in `dir` with their sizes, by name (none when it does not exist).
pub async fn complete_files(dir: &Path) -> Vec<(String, u64)> {
    let mut files: Vec<(String, u64)> = files_in(dir)
        .await
        .into_iter()
        .filter(|(name, _)| !is_partial(name) && !name.starts_with('.'))
        .collect();
    files.sort();
    files
}

/// Whether a file is being written into `dir`.
pub async fn writing(dir: &Path) -> bool {
    files_in(dir).await.iter().any(|(name, _)| is_partial(name))
}

async fn files_in(dir: &Path) -> Vec<(String, u64)> {
    let Ok(mut entries) = tokio::fs::read_dir(dir).await else {
        return Vec::new();
    };
    let mut files = Vec::new();
    while let Ok(Some(entry)) = entries.next_entry().await {
        if let Ok(meta) = entry.metadata().await
            && meta.is_file()
        {
            files.push((entry.file_name().to_string_lossy().into_owned(), meta.len()));
        }
    }
    files
}
