//! Saved logins: the profile model (cookies + localStorage per origin), where profiles are kept
//! (one 0600 JSON file per profile in the tenant's data dir, written atomically; or rows of
//! PostgreSQL when `--database-url` is set, so every instance loads every profile), sealed with
//! the profile key in either place when one is set, and import/export formats (Playwright
//! storageState, Netscape cookies.txt, browser-extension JSON cookie arrays).
//!
//! Cookie values are secrets: they are never logged, and `Debug` of a cookie hides them.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::{ErrorCode, ToolError, ToolResult};
use crate::postgres::{Database, Migration};

/// One cookie as saved in a profile. `expires` is seconds since the epoch; none = session cookie.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
pub struct SavedCookie {
    pub name: String,
    pub value: String,
    pub domain: String,
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<f64>,
    #[serde(default)]
    pub http_only: bool,
    #[serde(default)]
    pub secure: bool,
    /// Strict | Lax | None.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_site: Option<String>,
}

impl std::fmt::Debug for SavedCookie {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SavedCookie")
            .field("name", &self.name)
            .field("value", &"<hidden>")
            .field("domain", &self.domain)
            .finish()
    }
}

impl SavedCookie {
    pub fn is_expired(&self, now: f64) -> bool {
        self.expires.is_some_and(|t| t > 0.0 && t <= now)
    }
}

/// localStorage of one origin.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OriginStorage {
    pub origin: String,
    pub local_storage: Vec<(String, String)>,
}

/// A saved login.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Profile {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    /// Seconds since the epoch.
    pub saved_at: u64,
    /// Where `auto_navigate` goes after loading.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_url: Option<String>,
    pub cookies: Vec<SavedCookie>,
    #[serde(default)]
    pub origins: Vec<OriginStorage>,
}

pub fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Environment variable holding the key that encrypts profiles at rest (32 bytes, as 64 hex
/// digits or base64). Without it profiles are plain JSON, protected by file mode 0600.
pub const PROFILE_KEY_ENV: &str = "WEBPILOT_PROFILE_KEY";

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

/// Formats a profile can be imported from (and exported to, for storageState).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CookieFormat {
    StorageState,
    Netscape,
    JsonArray,
}

/// Guesses the format of an import from its first non-blank character and shape.
pub fn detect_format(content: &str) -> CookieFormat {
    let trimmed = content.trim_start();
    if trimmed.starts_with('[') {
        CookieFormat::JsonArray
    } else if trimmed.starts_with('{') {
        CookieFormat::StorageState
    } else {
        CookieFormat::Netscape
    }
}

/// Parses an import into cookies and origins, naming the line or field at fault.
pub fn parse_import(
    content: &str,
    format: CookieFormat,
) -> ToolResult<(Vec<SavedCookie>, Vec<OriginStorage>)> {
    match format {
        CookieFormat::Netscape => parse_netscape(content).map(|c| (c, Vec::new())),
        CookieFormat::JsonArray => {
            let value: Value = serde_json::from_str(content)
                .map_err(|e| bad_import(format!("not valid JSON: {e}")))?;
            let items = value
                .as_array()
                .ok_or_else(|| bad_import("expected a JSON array of cookies".into()))?;
            let cookies = items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    json_cookie(item).map_err(|field| {
                        bad_import(format!("cookie {i}: field `{field}` is missing or invalid"))
                    })
                })
                .collect::<ToolResult<Vec<_>>>()?;
            Ok((cookies, Vec::new()))
        }
        CookieFormat::StorageState => parse_storage_state(content),
    }
}

fn bad_import(message: String) -> ToolError {
    ToolError::invalid(format!("import: {message}")).with_hint(
        "supported: Playwright storageState JSON, Netscape cookies.txt, a JSON array of cookies",
    )
}

/// Netscape cookies.txt: tab-separated `domain flag path secure expires name value`;
/// `#HttpOnly_` prefixes mark httpOnly cookies, other `#` lines are comments.
fn parse_netscape(content: &str) -> ToolResult<Vec<SavedCookie>> {
    let mut cookies = Vec::new();
    for (index, raw) in content.lines().enumerate() {
        let line_no = index + 1;
        let (line, http_only) = match raw.strip_prefix("#HttpOnly_") {
            Some(rest) => (rest, true),
            None => (raw, false),
        };
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        if fields.len() != 7 {
            return Err(bad_import(format!(
                "cookies.txt line {line_no}: expected 7 tab-separated fields, found {}",
                fields.len()
            )));
        }
        let expires: f64 = fields[4].trim().parse().map_err(|_| {
            bad_import(format!(
                "cookies.txt line {line_no}: expiry {:?} is not a number",
                fields[4]
            ))
        })?;
        cookies.push(SavedCookie {
            domain: fields[0].to_string(),
            path: fields[2].to_string(),
            secure: fields[3].eq_ignore_ascii_case("TRUE"),
            expires: (expires > 0.0).then_some(expires),
            name: fields[5].to_string(),
            value: fields[6].to_string(),
            http_only,
            same_site: None,
        });
    }
    Ok(cookies)
}

/// One cookie of a JSON array as browser extensions (and Playwright) write them.
fn json_cookie(item: &Value) -> Result<SavedCookie, &'static str> {
    let text = |key: &'static str| {
        item.get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or(key)
    };
    let host_only = item
        .get("hostOnly")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut domain = text("domain")?;
    if host_only {
        domain = domain.trim_start_matches('.').to_string();
    }
    let expires = item
        .get("expirationDate")
        .or_else(|| item.get("expires"))
        .and_then(Value::as_f64)
        .filter(|t| *t > 0.0);
    let same_site = item.get("sameSite").and_then(Value::as_str).and_then(|s| {
        match s.to_ascii_lowercase().as_str() {
            "strict" => Some("Strict".to_string()),
            "lax" => Some("Lax".to_string()),
            "none" | "no_restriction" => Some("None".to_string()),
            _ => None,
        }
    });
    Ok(SavedCookie {
        name: text("name")?,
        value: text("value")?,
        domain,
        path: text("path").unwrap_or_else(|_| "/".into()),
        expires,
        http_only: item
            .get("httpOnly")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        secure: item.get("secure").and_then(Value::as_bool).unwrap_or(false),
        same_site,
    })
}

fn parse_storage_state(content: &str) -> ToolResult<(Vec<SavedCookie>, Vec<OriginStorage>)> {
    let value: Value =
        serde_json::from_str(content).map_err(|e| bad_import(format!("not valid JSON: {e}")))?;
    let cookies = value
        .get("cookies")
        .and_then(Value::as_array)
        .ok_or_else(|| bad_import("storageState: field `cookies` must be an array".into()))?
        .iter()
        .enumerate()
        .map(|(i, c)| {
            json_cookie(c).map_err(|field| {
                bad_import(format!(
                    "storageState: cookies[{i}].{field} is missing or invalid"
                ))
            })
        })
        .collect::<ToolResult<Vec<_>>>()?;
    let mut origins = Vec::new();
    for (i, origin) in value
        .get("origins")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let name = origin
            .get("origin")
            .and_then(Value::as_str)
            .ok_or_else(|| bad_import(format!("storageState: origins[{i}].origin is missing")))?;
        let items = origin
            .get("localStorage")
            .and_then(Value::as_array)
            .ok_or_else(|| {
                bad_import(format!(
                    "storageState: origins[{i}].localStorage must be an array"
                ))
            })?;
        let mut local_storage = Vec::new();
        for (j, item) in items.iter().enumerate() {
            let get = |k: &str| item.get(k).and_then(Value::as_str).map(str::to_string);
            match (get("name"), get("value")) {
                (Some(n), Some(v)) => local_storage.push((n, v)),
                _ => {
                    return Err(bad_import(format!(
                        "storageState: origins[{i}].localStorage[{j}] needs name and value"
                    )));
                }
            }
        }
        origins.push(OriginStorage {
            origin: name.to_string(),
            local_storage,
        });
    }
    Ok((cookies, origins))
}

/// The profile as Playwright `storageState` JSON.
pub fn to_storage_state(profile: &Profile) -> Value {
    json!({
        "cookies": profile.cookies.iter().map(|c| json!({
            "name": c.name, "value": c.value, "domain": c.domain, "path": c.path,
            "expires": c.expires.unwrap_or(-1.0), "httpOnly": c.http_only, "secure": c.secure,
            "sameSite": c.same_site.clone().unwrap_or_else(|| "Lax".into()),
        })).collect::<Vec<_>>(),
        "origins": profile.origins.iter().map(|o| json!({
            "origin": o.origin,
            "localStorage": o.local_storage.iter().map(|(n, v)| json!({ "name": n, "value": v })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(name: &str) -> Profile {
        Profile {
            name: name.into(),
            account: None,
            saved_at: 1,
            start_url: None,
            cookies: vec![SavedCookie {
                name: "session".into(),
                value: "secret".into(),
                domain: "127.0.0.1".into(),
                path: "/".into(),
                expires: None,
                http_only: true,
                secure: false,
                same_site: Some("Lax".into()),
            }],
            origins: vec![],
        }
    }

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

    #[test]
    fn netscape_lines_parse_and_errors_name_the_line() {
        let text = "# Netscape HTTP Cookie File\n#HttpOnly_.example.com\tTRUE\t/\tTRUE\t2000000000\tsid\tabc\nexample.com\tFALSE\t/\tFALSE\t0\tpref\tdark\n";
        let cookies = parse_netscape(text).unwrap();
        assert_eq!(cookies.len(), 2);
        assert!(cookies[0].http_only && cookies[0].secure);
        assert_eq!(cookies[1].expires, None);
        let error = parse_netscape("ok\tline\n").unwrap_err();
        assert!(error.message.contains("line 1"), "{}", error.message);
    }

    #[test]
    fn storage_state_round_trips() {
        let mut p = profile("p");
        p.origins.push(OriginStorage {
            origin: "http://127.0.0.1:1".into(),
            local_storage: vec![("token".into(), "t".into())],
        });
        let text = to_storage_state(&p).to_string();
        assert_eq!(detect_format(&text), CookieFormat::StorageState);
        let (cookies, origins) = parse_import(&text, CookieFormat::StorageState).unwrap();
        assert_eq!(cookies, p.cookies);
        assert_eq!(origins, p.origins);
        let error = parse_import(
            r#"{"cookies": [{"name": "a"}]}"#,
            CookieFormat::StorageState,
        )
        .unwrap_err();
        assert!(error.message.contains("cookies[0]"), "{}", error.message);
    }
}
