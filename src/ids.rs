//! The names webpilot's nouns go by: whose (`TenantName`), which session (`SessionName`), and
//! the two together (`SessionId`, the key of every session everywhere: the browser's registry,
//! the cluster's records, live-view links), and which crawl task (`TaskId`). A session name is checked once, when it enters
//! (`SessionName::choose` decides a call's session for every front), and the operator is a named
//! value; the empty string it is stored as exists only at the database's edge.
//! Also the one source of unguessable names and secrets (`random_bytes`, `unguessable`).

use std::fmt;
use std::sync::Arc;

use crate::error::{ToolError, ToolResult};

/// Who a session, profile, conversation or crawl task belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TenantName {
    /// The operator: callers with the service's own token (or none, on loopback).
    Operator,
    /// A tenant of the keys file (or of keys added later), by its name there.
    Keyed(Arc<str>),
}

impl TenantName {
    /// A keys-file tenant's name; the empty name is the operator's (as stored).
    pub fn keyed(name: &str) -> Self {
        Self::from_stored(name)
    }

    /// From a database column or a signed link, where the operator is the empty string.
    pub fn from_stored(stored: &str) -> Self {
        if stored.is_empty() {
            Self::Operator
        } else {
            Self::Keyed(stored.into())
        }
    }

    /// For a database column or a signed link: the empty string for the operator.
    pub fn stored(&self) -> &str {
        match self {
            Self::Operator => "",
            Self::Keyed(name) => name,
        }
    }

    pub fn is_operator(&self) -> bool {
        matches!(self, Self::Operator)
    }

    /// For logs and messages.
    pub fn label(&self) -> &str {
        match self {
            Self::Operator => "operator",
            Self::Keyed(name) => name,
        }
    }
}

impl fmt::Display for TenantName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// Longest session name; names become folder names (downloads) and log fields.
pub const MAX_SESSION_NAME: usize = 64;
/// The session of a call that names none, on a front that has no session of its own.
const DEFAULT_SESSION: &str = "default";
/// Private sessions' prefix: only `POST /api/sessions` makes them, so a name with it that is
/// not live (never made, closed, reaped, another tenant's) is an error, never a new session.
const PRIVATE_PREFIX: &str = "s-";
/// An MCP connection's own session (unguessable, made by the front).
const MCP_PREFIX: &str = "mcp-";
/// Prefixes only the service gives out: internal sessions (`_`) and MCP connections' own.
const RESERVED_PREFIXES: [&str; 2] = ["_", MCP_PREFIX];

/// A session's name within its tenant: 1–64 of `A-Za-z0-9._:@-`, checked when it is made.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionName(Arc<str>);

impl SessionName {
    /// The name as a folder name (downloads, traces): what is not alphanumeric, `-` or `_`
    /// becomes `_`.
    pub fn folder(&self) -> String {
        self.as_str()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    }

    /// Checks a name: 1–64 letters, digits or `- _ . : @`.
    pub fn parse(name: &str) -> ToolResult<Self> {
        let valid = !name.is_empty()
            && name.len() <= MAX_SESSION_NAME
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.:@".contains(c));
        if valid {
            Ok(Self(name.into()))
        } else {
            Err(ToolError::invalid(format!(
                "field `session`: {name:?} is not a session name (1-{MAX_SESSION_NAME} letters, digits or - _ . : @)"
            ))
            .with_hint("name the session with letters, digits and dashes, or omit it for the default"))
        }
    }

    /// A name a caller chose: valid, and not one the service reserves for itself.
    pub fn parse_callers(name: &str) -> ToolResult<Self> {
        let parsed = Self::parse(name)?;
        match RESERVED_PREFIXES.iter().find(|p| name.starts_with(*p)) {
            Some(prefix) => Err(ToolError::invalid(format!(
                "field `session`: names starting with {prefix:?} belong to the service"
            ))
            .with_hint("use a name of your own, or a private session from POST /api/sessions")),
            None => Ok(parsed),
        }
    }

    /// A caller's optional name (absent or empty: none), checked as `parse_callers` does.
    pub fn parse_optional(name: Option<&str>) -> ToolResult<Option<Self>> {
        name.filter(|n| !n.is_empty())
            .map(Self::parse_callers)
            .transpose()
    }

    /// The session a call runs in, the same for every front: the one the call names (which
    /// must be a name: an empty one is refused, not ignored), else the front's own (a REST
    /// session header, a chat's session, an MCP connection's), else `default`.
    pub fn choose(named: Option<&str>, front: Option<&SessionName>) -> ToolResult<Self> {
        match named {
            Some(name) => Self::parse_callers(name),
            None => Ok(front.cloned().unwrap_or_else(Self::default_session)),
        }
    }

    /// The session of calls that name none.
    pub fn default_session() -> Self {
        Self(DEFAULT_SESSION.into())
    }

    /// A new private session's name: `s-` and 128 random bits.
    pub fn new_private() -> Self {
        Self(unguessable(PRIVATE_PREFIX).into())
    }

    /// A new MCP connection's own session name: `mcp-` and 128 random bits.
    pub fn new_mcp() -> Self {
        Self(unguessable(MCP_PREFIX).into())
    }

    /// An internal session's name (`_` and what it is for): callers cannot name these.
    pub fn internal(what: impl fmt::Display) -> Self {
        Self(format!("_{what}").into())
    }

    /// Whether only `POST /api/sessions` makes sessions of this name.
    pub fn is_private(&self) -> bool {
        self.0.starts_with(PRIVATE_PREFIX)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl serde::Serialize for SessionName {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl AsRef<str> for SessionName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// Tenant T's session S: a name means something only within its tenant.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId {
    pub tenant: TenantName,
    pub name: SessionName,
}

impl SessionId {
    pub fn new(tenant: TenantName, name: SessionName) -> Self {
        Self { tenant, name }
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.tenant, self.name)
    }
}

/// A crawl task's id, `crawl-<ms>-<instance>-<n>`: made by the crawler, and read back from a
/// caller once, on the way in (`parse`). What does not have an id's shape is answered as the
/// unknown task it is, so a caller's text reaches the store only as an id.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct TaskId(Arc<str>);

/// The longest task id: the prefix, a time, an instance's name and a counter.
const MAX_TASK_ID: usize = 160;

impl TaskId {
    /// The id of a task this instance creates; `made` has the id's shape.
    pub fn made(made: String) -> Self {
        Self(made.into())
    }

    /// A task id a caller sent: `NO_SUCH_TASK` when it has no id's shape.
    pub fn parse(id: &str) -> ToolResult<Self> {
        let id = id.trim();
        let shaped = id.len() > "crawl-".len()
            && id.starts_with("crawl-")
            && id.len() <= MAX_TASK_ID
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !shaped {
            return Err(ToolError::new(
                crate::error::ErrorCode::NoSuchTask,
                format!("no crawl task {id:?}"),
            )
            .with_hint("use a task_id crawl_batch returned (crawl-…)"));
        }
        Ok(Self(id.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `N` bytes of the operating system's randomness. Every secret, key and unguessable name is
/// drawn here. Without the OS's randomness there is no safe name or secret to give, and on
/// Linux it fails only before the kernel's pool is first seeded, so a failure ends the process
/// with this message rather than handing out something guessable.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    if let Err(error) = getrandom::fill(&mut bytes) {
        panic!("the operating system's random source failed: {error}");
    }
    bytes
}

/// `prefix` and 128 random bits in lower-case base32: a name nobody can guess.
pub fn unguessable(prefix: &str) -> String {
    let encoded = data_encoding::BASE32_NOPAD.encode(&random_bytes::<16>());
    format!("{prefix}{}", encoded.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_names_are_checked_once_on_the_way_in() {
        for good in [
            "default",
            "a",
            "user@example.com",
            "s-1.2:3_x",
            &"x".repeat(64),
        ] {
            assert!(SessionName::parse(good).is_ok(), "{good}");
        }
        for bad in ["", "has space", "slash/", "ü", &"x".repeat(65)] {
            assert!(SessionName::parse(bad).is_err(), "{bad}");
        }
        for reserved in ["_scratch", "mcp-abc"] {
            assert!(SessionName::parse(reserved).is_ok());
            assert!(SessionName::parse_callers(reserved).is_err(), "{reserved}");
        }
        assert!(SessionName::parse_callers("s-abc").is_ok());
    }

    #[test]
    fn the_call_names_it_else_the_front_else_default() {
        let front = SessionName::new_mcp();
        let chosen = |named| SessionName::choose(named, Some(&front)).unwrap();
        assert_eq!(chosen(Some("mine")).as_str(), "mine");
        assert_eq!(chosen(None), front);
        assert!(SessionName::choose(Some(""), Some(&front)).is_err());
        let alone = SessionName::choose(None, None).unwrap();
        assert_eq!(alone.as_str(), "default");
        assert!(SessionName::choose(Some("mcp-x"), None).is_err());
    }

    #[test]
    fn the_operator_is_stored_as_the_empty_name_only() {
        assert_eq!(TenantName::from_stored(""), TenantName::Operator);
        assert_eq!(TenantName::Operator.stored(), "");
        assert_eq!(TenantName::Operator.to_string(), "operator");
        let acme = TenantName::keyed("acme");
        assert_eq!(TenantName::from_stored(acme.stored()), acme);
        assert!(!acme.is_operator());
    }

    #[test]
    fn task_ids_are_read_back_only_in_their_shape() {
        let id = TaskId::parse(" crawl-18c2f0a1b2c-web-1.host_a-0 ").unwrap();
        assert_eq!(id.as_str(), "crawl-18c2f0a1b2c-web-1.host_a-0");
        for bad in [
            "",
            "crawl-",
            "task-1",
            "crawl-1' OR '1'='1",
            "crawl-1/../x",
            &format!("crawl-{}", "a".repeat(200)),
        ] {
            let error = TaskId::parse(bad).unwrap_err();
            assert_eq!(error.code, crate::error::ErrorCode::NoSuchTask, "{bad:?}");
        }
    }

    #[test]
    fn unguessable_names_differ_and_keep_their_prefix() {
        let (a, b) = (SessionName::new_private(), SessionName::new_private());
        assert_ne!(a, b);
        assert!(a.is_private() && a.as_str().len() == 2 + 26);
        assert!(SessionName::parse(a.as_str()).is_ok());
    }
}
