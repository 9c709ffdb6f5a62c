//! Saved logins: the profile model (cookies + localStorage per origin), where profiles are kept
//! (`store`: one 0600 JSON file per profile in the tenant's data dir, written atomically; or rows
//! of PostgreSQL when `--database-url` is set, so every instance loads every profile), sealed
//! with the profile key in either place when one is set, and import/export formats (`formats`:
//! Playwright storageState, Netscape cookies.txt, browser-extension JSON cookie arrays). No CDP:
//! the browser applies a profile (`browser::storage`), this module keeps it.
//!
//! Cookie values are secrets: they are never logged, and `Debug` of a cookie hides them.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

mod formats;
mod store;

pub use formats::{CookieFormat, detect_format, parse_import, to_storage_state};
pub use store::{PROFILE_KEY_ENV, ProfileStore, Profiles, migrate, parse_key};

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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn profile(name: &str) -> Profile {
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
}
