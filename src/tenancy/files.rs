//! The server files tools may read (`upload` paths, `import` paths): only regular files under the
//! configured roots (`files.root`, default `<data dir>/files/`, plus `files.roots`), after
//! symlinks are resolved, up to `files.max_bytes`, and always on the blocking pool — a FIFO or a
//! slow disk must never stall the async threads.
//!
//! Each root is the operator's; a keys-file tenant reads only `<root>/<tenant>/` of each. The
//! check is on the resolved path, so `..` and symlinks (the tenant's folder itself included)
//! reach nothing outside it.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::config::FilesConfig;
use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::tenancy::Tenant;

/// Where tools may read server files, and how much.
#[derive(Debug, Clone)]
pub struct FileRoots {
    /// Canonical roots; relative paths resolve against the first.
    roots: Vec<PathBuf>,
    max_bytes: u64,
}

impl FileRoots {
    /// Creates the default root if missing and canonicalizes every root.
    pub fn new(config: &FilesConfig, data_dir: &Path) -> anyhow::Result<Self> {
        let main = config
            .root
            .clone()
            .unwrap_or_else(|| data_dir.join("files"));
        std::fs::create_dir_all(&main)
            .map_err(|e| anyhow::anyhow!("files.root {}: {e}", main.display()))?;
        let roots = std::iter::once(&main)
            .chain(&config.roots)
            .map(|root| {
                root.canonicalize()
                    .map_err(|e| anyhow::anyhow!("files root {}: {e}", root.display()))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Self {
            roots,
            max_bytes: config.max_bytes,
        })
    }

    /// A file sent inline (`name`, content in base64) for argument `field`: the name must be a
    /// plain file name, the content within `files.max_bytes`.
    pub fn inline(&self, name: &str, base64: &str, field: &str) -> ToolResult<Vec<u8>> {
        use base64::Engine;
        let plain = !name.is_empty()
            && name.len() <= 255
            && name != "."
            && name != ".."
            && !name.contains(['/', '\\', '\0']);
        if !plain {
            return Err(ToolError::invalid(format!(
                "field `{field}`: {name:?} is not a plain file name"
            ))
            .with_hint("name the file like notes.txt: no folders"));
        }
        // Base64 is 4 bytes per 3: refuse an oversized file before decoding it.
        if base64.len() as u64 / 4 * 3 > self.max_bytes + 3 {
            return Err(self.too_large(field));
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(base64.trim())
            .map_err(|e| {
                ToolError::invalid(format!(
                    "field `{field}`: {name:?} is not valid base64: {e}"
                ))
            })?;
        if bytes.len() as u64 > self.max_bytes {
            return Err(self.too_large(field));
        }
        Ok(bytes)
    }

    /// Largest file a tool reads or takes inline.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// The root relative paths resolve against.
    pub fn main_root(&self) -> &Path {
        &self.roots[0]
    }

    /// The roots `tenant` reads: every root for the operator, `<root>/<tenant>/` of each for
    /// the others. Not canonicalized: a tenant's folder that is a symlink leads nowhere.
    fn of(&self, tenant: &Tenant) -> FileRoots {
        if tenant.is_operator() {
            return self.clone();
        }
        FileRoots {
            roots: self
                .roots
                .iter()
                .map(|root| root.join(tenant.name().stored()))
                .collect(),
            max_bytes: self.max_bytes,
        }
    }

    /// The canonical path of a regular file under one of `tenant`'s roots, for argument `field`.
    pub async fn resolve(&self, tenant: &Tenant, path: &str, field: &str) -> ToolResult<PathBuf> {
        let roots = self.of(tenant);
        let (path, field) = (path.to_string(), field.to_string());
        blocking(move || roots.checked(&path, &field).map(|(path, _)| path)).await
    }

    /// The bytes of a regular file under one of `tenant`'s roots, for argument `field`.
    pub async fn read(&self, tenant: &Tenant, path: &str, field: &str) -> ToolResult<Vec<u8>> {
        let roots = self.of(tenant);
        let (path, field) = (path.to_string(), field.to_string());
        blocking(move || {
            let (path, _) = roots.checked(&path, &field)?;
            let file = std::fs::File::open(&path).map_err(|e| unreadable(&field, &path, e))?;
            // The size was checked, but a file may grow: never read past the cap.
            let mut bytes = Vec::new();
            file.take(roots.max_bytes + 1)
                .read_to_end(&mut bytes)
                .map_err(|e| unreadable(&field, &path, e))?;
            if bytes.len() as u64 > roots.max_bytes {
                return Err(roots.too_large(&field));
            }
            Ok(bytes)
        })
        .await
    }

    /// Resolves and checks `path` (blocking): inside a root, a regular file, within the cap.
    fn checked(&self, path: &str, field: &str) -> ToolResult<(PathBuf, u64)> {
        let given = Path::new(path);
        let joined = if given.is_absolute() {
            given.to_path_buf()
        } else {
            self.main_root().join(given)
        };
        let canonical = joined.canonicalize().map_err(|_| {
            ToolError::invalid(format!("field `{field}`: no file {path:?}")).with_hint(self.hint())
        })?;
        if !self.roots.iter().any(|root| canonical.starts_with(root)) {
            return Err(ToolError::invalid(format!(
                "field `{field}`: {path:?} is outside the files webpilot may read"
            ))
            .with_hint(self.hint()));
        }
        // `metadata` does not open the file: a FIFO is refused here without blocking.
        let metadata = canonical
            .metadata()
            .map_err(|e| unreadable(field, &canonical, e))?;
        if !metadata.is_file() {
            return Err(ToolError::invalid(format!(
                "field `{field}`: {path:?} is not a regular file"
            ))
            .with_hint(self.hint()));
        }
        if metadata.len() > self.max_bytes {
            return Err(self.too_large(field));
        }
        Ok((canonical, metadata.len()))
    }

    fn hint(&self) -> String {
        format!(
            "put the file under {} and pass its path relative to it",
            self.main_root().display()
        )
    }

    fn too_large(&self, field: &str) -> ToolError {
        ToolError::new(
            ErrorCode::TooLarge,
            format!(
                "field `{field}`: the file is larger than files.max_bytes ({} bytes)",
                self.max_bytes
            ),
        )
        .with_hint("send a smaller file, or ask the operator to raise files.max_bytes")
    }
}

fn unreadable(field: &str, path: &Path, error: std::io::Error) -> ToolError {
    ToolError::invalid(format!(
        "field `{field}`: cannot read {}: {error}",
        path.display()
    ))
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> ToolResult<T> + Send + 'static,
) -> ToolResult<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ToolError::internal(format!("file access failed: {e}")))?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roots(dir: &Path, max_bytes: u64) -> FileRoots {
        let config = FilesConfig {
            root: Some(dir.join("files")),
            roots: Vec::new(),
            max_bytes,
        };
        FileRoots::new(&config, dir).unwrap()
    }

    fn code(result: ToolResult<(PathBuf, u64)>) -> ErrorCode {
        result.unwrap_err().code
    }

    #[test]
    fn only_regular_files_under_the_root_within_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let files = roots(dir.path(), 10);
        let root = files.main_root().to_path_buf();
        std::fs::write(root.join("note.txt"), b"hello").unwrap();
        std::fs::write(root.join("big.txt"), b"more than ten bytes").unwrap();
        std::fs::write(dir.path().join("outside.txt"), b"secret").unwrap();
        std::fs::create_dir(root.join("folder")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("outside.txt"), root.join("link")).unwrap();
        let fifo = root.join("fifo");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );

        let (path, size) = files.checked("note.txt", "paths").unwrap();
        assert_eq!((path, size), (root.join("note.txt"), 5));
        assert!(
            files
                .checked(root.join("note.txt").to_str().unwrap(), "paths")
                .is_ok()
        );
        for refused in [
            "../outside.txt",
            "/etc/passwd",
            "link",
            "folder",
            "fifo",
            "/dev/zero",
            "missing.txt",
        ] {
            let error = files.checked(refused, "paths").unwrap_err();
            assert_eq!(error.code, ErrorCode::InvalidArgument, "{refused}");
            assert!(error.message.contains("field `paths`"), "{refused}");
            assert!(error.hint.contains(root.to_str().unwrap()), "{refused}");
        }
        assert_eq!(code(files.checked("big.txt", "paths")), ErrorCode::TooLarge);
    }

    fn tenant(name: &str) -> std::sync::Arc<Tenant> {
        let config = crate::config::Config {
            keys: vec![crate::config::KeyEntry {
                tenant: name.into(),
                sha256: crate::tenancy::key_hash_hex(name),
                ..Default::default()
            }],
            ..Default::default()
        };
        let tenants = crate::tenancy::Tenants::from_config(&config).unwrap();
        tenants.named(&crate::ids::TenantName::keyed(name)).unwrap()
    }

    #[test]
    fn a_tenant_reads_only_its_own_folder_of_each_root() {
        let dir = tempfile::tempdir().unwrap();
        let files = roots(dir.path(), 100);
        let root = files.main_root().to_path_buf();
        for folder in ["alice", "bob"] {
            std::fs::create_dir(root.join(folder)).unwrap();
            std::fs::write(root.join(folder).join("note.txt"), folder).unwrap();
        }
        std::fs::write(root.join("operator.txt"), b"operator").unwrap();
        std::os::unix::fs::symlink(root.join("bob/note.txt"), root.join("alice/link")).unwrap();
        // A tenant's folder that is a symlink leads nowhere, even into its own files.
        std::os::unix::fs::symlink(root.join("bob"), root.join("carol")).unwrap();
        let alice = files.of(&tenant("alice"));
        let (path, _) = alice.checked("note.txt", "paths").unwrap();
        assert_eq!(path, root.join("alice/note.txt"));
        assert!(alice.checked(path.to_str().unwrap(), "paths").is_ok());
        for refused in [
            "../bob/note.txt",
            "../operator.txt",
            "link",
            root.join("bob/note.txt").to_str().unwrap(),
            root.join("operator.txt").to_str().unwrap(),
        ] {
            let error = alice.checked(refused, "paths").unwrap_err();
            assert_eq!(error.code, ErrorCode::InvalidArgument, "{refused}");
        }
        let carol = files.of(&tenant("carol"));
        assert!(carol.checked("note.txt", "paths").is_err());
        // The operator keeps the whole root, the tenants' folders included.
        assert!(files.checked("alice/note.txt", "paths").is_ok());
        assert!(files.checked("operator.txt", "paths").is_ok());
    }

    #[test]
    fn inline_files_have_plain_names_valid_base64_and_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let files = roots(dir.path(), 10);
        assert_eq!(
            files.inline("a.txt", "aGVsbG8=", "files").unwrap(),
            b"hello"
        );
        for bad_name in ["", ".", "..", "a/b.txt", "..\\x", "x\0"] {
            let error = files.inline(bad_name, "aGVsbG8=", "files").unwrap_err();
            assert_eq!(error.code, ErrorCode::InvalidArgument, "{bad_name:?}");
        }
        let error = files.inline("a.txt", "not base64!", "files").unwrap_err();
        assert!(error.message.contains("field `files`"), "{}", error.message);
        // Eleven bytes: over the cap, whether caught before or after decoding.
        for eleven in ["aGVsbG8gd29ybGQ=", &"QUFB".repeat(100)] {
            let error = files.inline("a.txt", eleven, "files").unwrap_err();
            assert_eq!(error.code, ErrorCode::TooLarge);
        }
    }
}
