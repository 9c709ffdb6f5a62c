//! Capability links to a session's live view: an HMAC-SHA256 signature over (tenant, session,
//! expiry), so that a person can be sent a link that opens that one session and nothing else,
//! for a while, without the API token.
//!
//! A token is `<payload>.<signature>`, both unpadded base64url; the payload is
//! `<tenant>\n<session>\n<expiry as Unix seconds>`. The secret is configured (`live_secret`,
//! so that links survive a restart), else kept in PostgreSQL when instances share one (drawn by
//! the first to start, so a link minted by one instance opens through any), else drawn at start
//! (links die with the process).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use data_encoding::BASE64URL_NOPAD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::db::postgres::Database;
use crate::ids::{SessionId, SessionName, TenantName};

/// The name of the live-link secret among the shared secrets.
const LIVE_SECRET: &str = "live_links";

fn random_secret() -> Vec<u8> {
    crate::ids::random_bytes::<32>().to_vec()
}

/// Signs and checks live-view links.
pub struct LiveLinks {
    secret: Vec<u8>,
    lifetime: Duration,
}

/// A signed link's parts, once checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub session: SessionId,
    /// Unix seconds.
    pub expires_at: u64,
}

/// Why a link was refused; the text is shown to the person who followed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Not a token of this service (tampered, truncated, signed with another secret).
    Forged,
    Expired,
    /// A genuine link, but to another session.
    OtherSession,
}

impl Refusal {
    pub fn explain(self) -> &'static str {
        match self {
            Refusal::Forged => "This live-view link is not valid.",
            Refusal::Expired => "This live-view link has expired.",
            Refusal::OtherSession => "This live-view link is for another session.",
        }
    }
}

impl LiveLinks {
    pub fn new(secret: Vec<u8>, lifetime: Duration) -> Self {
        Self { secret, lifetime }
    }

    /// The secret to sign with: the configured one, else the one instances sharing `database`
    /// share, else a random one for this process.
    pub async fn secret(
        configured: Option<&str>,
        database: Option<&Database>,
    ) -> anyhow::Result<Vec<u8>> {
        if let Some(secret) = configured {
            return Ok(secret.as_bytes().to_vec());
        }
        match database {
            Some(database) => database.shared_secret(LIVE_SECRET).await,
            None => Ok(random_secret()),
        }
    }

    /// How long a new link stays valid.
    pub fn lifetime(&self) -> Duration {
        self.lifetime
    }

    /// A token for session `session`, valid for the configured lifetime.
    pub fn mint(&self, session: &SessionId) -> (String, Grant) {
        let expires_at = unix_now() + self.lifetime.as_secs();
        let grant = Grant {
            session: session.clone(),
            expires_at,
        };
        (self.sign(&grant), grant)
    }

    /// The grant of `token` if it is genuine, unexpired and for `session`.
    pub fn check(&self, token: &str, session: &str) -> Result<Grant, Refusal> {
        let (payload, signature) = token.split_once('.').ok_or(Refusal::Forged)?;
        let signature = BASE64URL_NOPAD
            .decode(signature.as_bytes())
            .map_err(|_| Refusal::Forged)?;
        self.mac(payload.as_bytes())
            .verify_slice(&signature)
            .map_err(|_| Refusal::Forged)?;
        let payload = BASE64URL_NOPAD
            .decode(payload.as_bytes())
            .map_err(|_| Refusal::Forged)?;
        let payload = String::from_utf8(payload).map_err(|_| Refusal::Forged)?;
        let mut parts = payload.split('\n');
        let (Some(tenant), Some(named), Some(expiry), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(Refusal::Forged);
        };
        let expires_at: u64 = expiry.parse().map_err(|_| Refusal::Forged)?;
        if named != session {
            return Err(Refusal::OtherSession);
        }
        if expires_at <= unix_now() {
            return Err(Refusal::Expired);
        }
        let name = SessionName::parse(named).map_err(|_| Refusal::Forged)?;
        Ok(Grant {
            session: SessionId::new(TenantName::from_stored(tenant), name),
            expires_at,
        })
    }

    fn sign(&self, grant: &Grant) -> String {
        let session = &grant.session;
        let payload = format!(
            "{}\n{}\n{}",
            session.tenant.stored(),
            session.name,
            grant.expires_at
        );
        let payload = BASE64URL_NOPAD.encode(payload.as_bytes());
        let signature = self.mac(payload.as_bytes()).finalize().into_bytes();
        format!("{payload}.{}", BASE64URL_NOPAD.encode(&signature))
    }

    fn mac(&self, data: &[u8]) -> Hmac<Sha256> {
        let mut mac =
            <Hmac<Sha256> as KeyInit>::new_from_slice(&self.secret).expect("HMAC takes any key");
        mac.update(data);
        mac
    }
}

/// Where people reach the service: `public_url` when configured, else the host a call came in
/// on, else the address the server bound.
#[derive(Default)]
pub struct PublicUrl {
    configured: Option<String>,
    bound: std::sync::OnceLock<String>,
}

impl PublicUrl {
    pub fn new(configured: Option<String>) -> Self {
        Self {
            configured: configured.map(|url| url.trim_end_matches('/').to_string()),
            bound: std::sync::OnceLock::new(),
        }
    }

    /// Records the address the server listens on (`http://127.0.0.1:8931`).
    pub fn bound_to(&self, address: std::net::SocketAddr) {
        let _ = self.bound.set(format!("http://{address}"));
    }

    /// The base URL for a caller that reached the service at `origin` (`http://host:port`).
    pub fn base(&self, origin: Option<&str>) -> Option<String> {
        self.configured
            .clone()
            .or_else(|| origin.map(str::to_string))
            .or_else(|| self.bound.get().cloned())
    }

    /// `base` + `/live/<session>?cap=<token>`.
    pub fn live_url(&self, origin: Option<&str>, session: &str, token: &str) -> Option<String> {
        let mut url = url::Url::parse(&self.base(origin)?).ok()?;
        url.path_segments_mut()
            .ok()?
            .pop_if_empty()
            .extend(["live", session]);
        url.query_pairs_mut().append_pair("cap", token);
        Some(url.into())
    }
}

/// Seconds since the epoch (fractions kept to the millisecond) as RFC 3339 UTC
/// (`2026-12-01T20:15:00.123Z`), as HAR files and traces write times.
pub fn rfc3339_millis(seconds: f64) -> String {
    let seconds = seconds.max(0.0);
    let whole = seconds.floor();
    let millis = (((seconds - whole) * 1000.0).floor() as u64).min(999);
    let base = rfc3339(whole as u64);
    format!("{}.{millis:03}Z", base.trim_end_matches('Z'))
}

/// Unix seconds as an RFC 3339 UTC timestamp (`2026-12-01T20:15:00Z`).
pub fn rfc3339(unix: u64) -> String {
    let (days, seconds) = (unix / 86_400, unix % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        seconds / 3_600,
        seconds % 3_600 / 60,
        seconds % 60
    )
}

pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn links() -> LiveLinks {
        LiveLinks::new(b"a test secret".to_vec(), Duration::from_secs(60))
    }

    #[test]
    fn timestamps_and_urls() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_796_156_100), "2026-12-01T20:15:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339_millis(1_796_156_100.25), "2026-12-01T20:15:00.250Z");
        let public = PublicUrl::new(Some("https://pilot.example.com/base/".into()));
        assert_eq!(
            public
                .live_url(Some("http://ignored:1"), "a@b", "x.y")
                .unwrap(),
            "https://pilot.example.com/base/live/a@b?cap=x.y"
        );
        let local = PublicUrl::new(None);
        assert_eq!(local.live_url(None, "s", "t"), None);
        local.bound_to("127.0.0.1:8931".parse().unwrap());
        assert_eq!(
            local.live_url(None, "s", "t").unwrap(),
            "http://127.0.0.1:8931/live/s?cap=t"
        );
        assert_eq!(
            local.live_url(Some("http://[::1]:9"), "s", "t").unwrap(),
            "http://[::1]:9/live/s?cap=t"
        );
    }

    fn work() -> SessionId {
        SessionId::new(
            TenantName::keyed("acme"),
            SessionName::parse("work").unwrap(),
        )
    }

    #[test]
    fn a_minted_link_opens_its_session_only() {
        let (token, grant) = links().mint(&work());
        assert_eq!(links().check(&token, "work"), Ok(grant));
        assert_eq!(links().check(&token, "other"), Err(Refusal::OtherSession));
    }

    #[test]
    fn tampered_foreign_and_expired_links_are_refused() {
        let (token, _) = links().mint(&work());
        let mut tampered = token.clone().into_bytes();
        let last = tampered.len() - 1;
        tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(tampered).unwrap();
        assert_eq!(links().check(&tampered, "work"), Err(Refusal::Forged));
        let other = LiveLinks::new(b"another secret".to_vec(), Duration::from_secs(60));
        assert_eq!(other.check(&token, "work"), Err(Refusal::Forged));
        for junk in ["", ".", "abc", "a.b.c"] {
            assert_eq!(links().check(junk, "work"), Err(Refusal::Forged), "{junk}");
        }
        let expired = links().sign(&Grant {
            session: work(),
            expires_at: unix_now() - 1,
        });
        assert_eq!(links().check(&expired, "work"), Err(Refusal::Expired));
        // A payload rewritten to a later expiry no longer matches its signature.
        let (payload, signature) = expired.split_once('.').unwrap();
        let decoded = BASE64URL_NOPAD.decode(payload.as_bytes()).unwrap();
        let later = String::from_utf8(decoded).unwrap().replace(
            &(unix_now() - 1).to_string(),
            &(unix_now() + 999).to_string(),
        );
        let forged = format!("{}.{signature}", BASE64URL_NOPAD.encode(later.as_bytes()));
        assert_eq!(links().check(&forged, "work"), Err(Refusal::Forged));
    }
}
