//! Where a tenant's profiles are kept: files (0600, written atomically) or PostgreSQL rows, each
//! sealed with ChaCha20-Poly1305 when a profile key is set.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Profile;
use crate::db::postgres::{Database, Migration};
use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::tenancy::Tenant;

/// Environment variable holding the key that encrypts profiles at rest (32 bytes, as 64 hex
/// digits or base64). Without it profiles are plain JSON, protected by file mode 0600.
pub const PROFILE_KEY_ENV: &str = "WEBPILOT_PROFILE_KEY";

/// Where every tenant's profiles are kept, opened once for the process: the data dir (or
/// PostgreSQL) and the profile key, parsed at start so that a bad key stops the service with a
/// clear message instead of failing every call.
#[derive(Clone)]
pub struct Profiles {
    data_dir: PathBuf,
    database: Option<Database>,
    key: Option<chacha20poly1305::Key>,
}

impl Profiles {
    /// `key`: the configured profile key (`profile_key`, `WEBPILOT_PROFILE_KEY`), if any.
    pub fn open(
        data_dir: &Path,
        database: Option<Database>,
        key: Option<&str>,
    ) -> anyhow::Result<Self> {
        let key = match key.filter(|k| !k.is_empty()) {
            Some(text) => {
                Some(parse_key(text).map_err(|e| anyhow::anyhow!("profile_key: {}", e.message))?)
            }
            None => None,
        };
        Ok(Self {
            data_dir: data_dir.to_path_buf(),
            database,
            key,
        })
    }

    /// `tenant`'s profiles: rows of its name in PostgreSQL, else files in its data dir.
    pub fn of(&self, tenant: &Tenant) -> ProfileStore {
        match &self.database {
            Some(database) => {
                ProfileStore::in_database(database.clone(), tenant.name().stored(), self.key)
            }
            None => ProfileStore::new(&tenant.data_dir(&self.data_dir), self.key),
        }
    }
}

/// One tenant's saved profiles.
pub struct ProfileStore {
    place: Place,
    /// ChaCha20-Poly1305 key; `None` stores plain JSON.
    key: Option<chacha20poly1305::Key>,
}

/// Where a tenant's profiles are kept.
enum Place {
    /// One file per profile in this directory.
    Files(PathBuf),
    /// Rows of PostgreSQL's `profiles`, shared by every instance.
    Database { database: Database, tenant: String },
}

const MIGRATIONS: [Migration; 1] = [(
    1,
    "CREATE TABLE profiles (
         tenant TEXT NOT NULL,
         name TEXT NOT NULL,
         body BYTEA NOT NULL,
         saved_at BIGINT NOT NULL,
         PRIMARY KEY (tenant, name)
     );",
)];

/// Brings `database`'s profile table up to this version (at start).
pub async fn migrate(database: &Database) -> anyhow::Result<()> {
    database.migrate("profiles", &MIGRATIONS).await
}

fn database_error(error: anyhow::Error) -> ToolError {
    ToolError::internal(format!("the profile store failed: {error:#}"))
        .with_hint("try again; if it keeps failing, PostgreSQL is unreachable")
}

/// An encrypted profile file: a random nonce and the sealed JSON.
#[derive(Serialize, Deserialize)]
struct Sealed {
    encrypted: String,
    nonce: String,
    data: String,
}

const SEAL_ALGORITHM: &str = "chacha20poly1305";

/// Parses a profile key: 64 hex digits or base64 of 32 bytes.
pub fn parse_key(text: &str) -> ToolResult<chacha20poly1305::Key> {
    use base64::Engine;
    let text = text.trim();
    let bytes = if text.len() == 64 && text.chars().all(|c| c.is_ascii_hexdigit()) {
        (0..32)
            .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).unwrap_or(0))
            .collect::<Vec<u8>>()
    } else {
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .unwrap_or_default()
    };
    if bytes.len() != 32 {
        return Err(ToolError::new(
            ErrorCode::NotConfigured,
            format!("{PROFILE_KEY_ENV} must be 32 bytes, as 64 hex digits or base64"),
        )
        .with_hint("generate one with: openssl rand -hex 32"));
    }
    Ok(*chacha20poly1305::Key::from_slice(&bytes))
}

impl ProfileStore {
    /// Profiles as files under `data_dir` (the tenant's).
    pub fn new(data_dir: &Path, key: Option<chacha20poly1305::Key>) -> Self {
        Self {
            place: Place::Files(data_dir.join("profiles")),
            key,
        }
    }

    /// `tenant`'s profiles in `database` (migrated at start).
    pub fn in_database(
        database: Database,
        tenant: &str,
        key: Option<chacha20poly1305::Key>,
    ) -> Self {
        let tenant = tenant.to_string();
        Self {
            place: Place::Database { database, tenant },
            key,
        }
    }

    fn seal(&self, plain: Vec<u8>) -> ToolResult<Vec<u8>> {
        use base64::Engine;
        use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng};
        let Some(key) = &self.key else {
            return Ok(plain);
        };
        let cipher = chacha20poly1305::ChaCha20Poly1305::new(key);
        let nonce = chacha20poly1305::ChaCha20Poly1305::generate_nonce(&mut OsRng);
        let data = cipher
            .encrypt(&nonce, plain.as_slice())
            .map_err(|_| ToolError::internal("cannot encrypt the profile"))?;
        let b64 = base64::engine::general_purpose::STANDARD;
        serde_json::to_vec(&Sealed {
            encrypted: SEAL_ALGORITHM.into(),
            nonce: b64.encode(nonce),
            data: b64.encode(data),
        })
        .map_err(|e| ToolError::internal(e.to_string()))
    }

    fn open(&self, name: &str, stored: Vec<u8>) -> ToolResult<Vec<u8>> {
        use base64::Engine;
        use chacha20poly1305::aead::{Aead, KeyInit};
        let Ok(sealed) = serde_json::from_slice::<Sealed>(&stored) else {
            return Ok(stored);
        };
        let key = self.key.as_ref().ok_or_else(|| {
            ToolError::new(
                ErrorCode::NotConfigured,
                format!("profile {name:?} is encrypted"),
            )
            .with_hint(format!(
                "set {PROFILE_KEY_ENV} to the key it was saved with"
            ))
        })?;
        let b64 = base64::engine::general_purpose::STANDARD;
        let (nonce, data) = match (b64.decode(&sealed.nonce), b64.decode(&sealed.data)) {
            (Ok(nonce), Ok(data)) if nonce.len() == 12 => (nonce, data),
            _ => return Err(ToolError::internal(format!("profile {name:?} is damaged"))),
        };
        chacha20poly1305::ChaCha20Poly1305::new(key)
            .decrypt(chacha20poly1305::Nonce::from_slice(&nonce), data.as_slice())
            .map_err(|_| {
                ToolError::new(
                    ErrorCode::NotConfigured,
                    format!("profile {name:?} does not open with this key"),
                )
                .with_hint(format!(
                    "set {PROFILE_KEY_ENV} to the key it was saved with"
                ))
            })
    }

    /// Profile names are plain file names: letters, digits, `-`, `_`, `.`, not starting with a dot.
    pub fn check_name(name: &str) -> ToolResult<()> {
        let valid = !name.is_empty()
            && name.len() <= 64
            && !name.starts_with('.')
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        if valid {
            Ok(())
        } else {
            Err(ToolError::invalid(format!(
                "field `name`: {name:?} is not a valid profile name (letters, digits, - _ . up to 64)"
            )))
        }
    }

    /// Removes the temp files of saves that a process which is gone left behind (killed
    /// mid-export): they hold plaintext cookies. Returns how many were removed.
    pub fn remove_abandoned_temps(&self) -> usize {
        let Place::Files(dir) = &self.place else {
            return 0;
        };
        let Ok(entries) = std::fs::read_dir(dir) else {
            return 0;
        };
        let abandoned = entries.flatten().map(|e| e.path()).filter(|path| {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            // `.NAME.PID.tmp`, as `save` writes them.
            let pid = name
                .strip_prefix('.')
                .and_then(|n| n.strip_suffix(".tmp"))
                .and_then(|n| n.rsplit('.').next())
                .and_then(|pid| pid.parse::<u32>().ok());
            pid.is_some_and(|pid| {
                pid == std::process::id() || !Path::new(&format!("/proc/{pid}")).exists()
            })
        });
        abandoned
            .filter(|path| std::fs::remove_file(path).is_ok())
            .count()
    }

    /// Saves the profile, replacing one of the same name whole or not at all; returns where it
    /// went (a file, or `postgresql:profiles/<name>`).
    pub async fn save(&self, profile: &Profile) -> ToolResult<String> {
        Self::check_name(&profile.name)?;
        let body =
            serde_json::to_vec_pretty(profile).map_err(|e| ToolError::internal(e.to_string()))?;
        let body = self.seal(body)?;
        match &self.place {
            Place::Files(dir) => write_private(dir, &profile.name, &body),
            Place::Database { database, tenant } => {
                database
                    .client()
                    .await
                    .map_err(database_error)?
                    .execute(
                        "INSERT INTO profiles (tenant, name, body, saved_at) VALUES ($1, $2, $3, $4) \
                         ON CONFLICT (tenant, name) DO UPDATE SET body = EXCLUDED.body, \
                         saved_at = EXCLUDED.saved_at",
                        &[tenant, &profile.name, &body, &(profile.saved_at as i64)],
                    )
                    .await
                    .map_err(database_error)?;
                Ok(format!("postgresql:profiles/{}", profile.name))
            }
        }
    }

    pub async fn load(&self, name: &str) -> ToolResult<Profile> {
        Self::check_name(name)?;
        let stored = match &self.place {
            Place::Files(dir) => std::fs::read(dir.join(format!("{name}.json"))).ok(),
            Place::Database { database, tenant } => database
                .client()
                .await
                .map_err(database_error)?
                .query_opt(
                    "SELECT body FROM profiles WHERE tenant = $1 AND name = $2",
                    &[tenant, &name],
                )
                .await
                .map_err(database_error)?
                .map(|row| row.get(0)),
        };
        let Some(stored) = stored else {
            let names = self.names().await.unwrap_or_default();
            return Err(ToolError::new(
                ErrorCode::NoSuchProfile,
                format!("no saved profile {name:?}"),
            )
            .with_hint(format!("saved profiles: {}", names.join(", "))));
        };
        let text = self.open(name, stored)?;
        serde_json::from_slice(&text)
            .map_err(|e| ToolError::internal(format!("profile {name:?} cannot be read: {e}")))
    }

    /// The names of the saved profiles, sorted.
    pub async fn names(&self) -> ToolResult<Vec<String>> {
        match &self.place {
            Place::Files(dir) => {
                let mut names: Vec<String> = std::fs::read_dir(dir)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .filter_map(|e| {
                        let name = e.file_name().to_string_lossy().into_owned();
                        name.strip_suffix(".json")
                            .filter(|n| !n.starts_with('.'))
                            .map(str::to_string)
                    })
                    .collect();
                names.sort();
                Ok(names)
            }
            Place::Database { database, tenant } => Ok(database
                .client()
                .await
                .map_err(database_error)?
                .query(
                    "SELECT name FROM profiles WHERE tenant = $1 ORDER BY name",
                    &[tenant],
                )
                .await
                .map_err(database_error)?
                .iter()
                .map(|row| row.get(0))
                .collect()),
        }
    }
}

/// Writes profile `name` into `dir` atomically (temp file, fsync, rename) with mode 0600, so a
/// crash mid-write leaves the previous version intact; returns the file's path.
fn write_private(dir: &Path, name: &str, body: &[u8]) -> ToolResult<String> {
    let failed = |e: std::io::Error| ToolError::internal(format!("cannot save the profile: {e}"));
    std::fs::create_dir_all(dir).map_err(failed)?;
    let target = dir.join(format!("{name}.json"));
    let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temp)
        .map_err(failed)?;
    file.write_all(body).map_err(failed)?;
    file.sync_all().map_err(failed)?;
    drop(file);
    std::fs::rename(&temp, &target).map_err(failed)?;
    if let Ok(dir) = std::fs::File::open(dir) {
        let _ = dir.sync_all();
    }
    Ok(target.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temps_of_gone_processes_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let store = ProfileStore::new(dir.path(), None);
        let profiles = dir.path().join("profiles");
        std::fs::create_dir_all(&profiles).unwrap();
        // PID 1 is always alive; PIDs never reach 4,000,000,000.
        let gone = profiles.join(".site.4000000000.tmp");
        let alive = profiles.join(".site.1.tmp");
        let other = profiles.join("site.json");
        for file in [&gone, &alive, &other] {
            std::fs::write(file, b"{}").unwrap();
        }
        assert_eq!(store.remove_abandoned_temps(), 1);
        assert!(!gone.exists() && alive.exists() && other.exists());
    }

    #[tokio::test]
    async fn names_cannot_escape_the_store() {
        for bad in ["../x", "a/b", ".hidden", "", "x\0"] {
            assert!(ProfileStore::check_name(bad).is_err(), "{bad:?}");
        }
        let dir = tempfile::tempdir().unwrap();
        let error = ProfileStore::new(dir.path(), None)
            .load("missing")
            .await
            .unwrap_err();
        assert_eq!(error.code, ErrorCode::NoSuchProfile);
    }
}
