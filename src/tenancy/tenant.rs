//! Tenants: who a caller is, and what is theirs.
//!
//! Every call runs for one tenant. The *operator* tenant is the one-user case: everyone on an
//! unauthenticated loopback service, or whoever holds `--token`; its files stay where they
//! always were (`<data dir>/profiles/`, `<data dir>/downloads/`). Each entry of the keys file
//! (`[[keys]]`, `--keys-file`) is a tenant of its own, with its files under
//! `<data dir>/tenants/<name>/`, its sessions and crawl tasks out of the others' sight, its own
//! call rates and limits, and domain rules that narrow the operator's.
//!
//! Keys are never stored: the file holds their SHA-256, and a presented key is hashed and
//! compared with every entry in constant time. With `--database-url`, `webpilot keys add` puts
//! the entry in PostgreSQL instead ([`SharedKeys`]) and announces it: every instance reads those
//! at start and takes new ones as they are added.

use crate::ids::TenantName;
use crate::sync::RwLocked;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock, RwLockReadGuard};

use std::time::Duration;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::{Config, KeyEntry};
use crate::db::postgres::{Database, Migration};
use crate::policy::UrlPolicy;
use crate::tenancy::actions::ActionRules;
use crate::tenancy::rate::RateLimiter;

const KEY_MIGRATIONS: [Migration; 1] = [(
    1,
    "CREATE TABLE tenant_keys (
         tenant TEXT PRIMARY KEY,
         entry TEXT NOT NULL,
         added_at TIMESTAMPTZ NOT NULL DEFAULT now()
     );",
)];

/// How often the keys in PostgreSQL are read again, whatever was announced.
const KEYS_RESCAN: Duration = Duration::from_secs(60);

/// The channel on which an added key is announced (its tenant's name).
pub const KEYS_CHANNEL: &str = "webpilot_keys";

/// Tenants' key entries kept in PostgreSQL (as the keys file's TOML), shared by every instance.
pub struct SharedKeys {
    database: Database,
}

impl SharedKeys {
    pub async fn open(database: Database) -> anyhow::Result<Self> {
        database.migrate("tenant_keys", &KEY_MIGRATIONS).await?;
        Ok(Self { database })
    }

    /// Every entry, by tenant name.
    pub async fn entries(&self) -> anyhow::Result<Vec<KeyEntry>> {
        let rows = self
            .database
            .client()
            .await?
            .query("SELECT tenant, entry FROM tenant_keys ORDER BY tenant", &[])
            .await?;
        rows.iter()
            .map(|row| {
                let tenant: &str = row.get(0);
                toml::from_str(row.get(1))
                    .map_err(|e| anyhow::anyhow!("tenant_keys: tenant {tenant:?}: {e}"))
            })
            .collect()
    }

    /// Gives `tenants` the keys added from now on (announced on [`KEYS_CHANNEL`], and looked
    /// for every minute in case an announcement was missed), until `stop`.
    pub fn follow(self, tenants: Arc<Tenants>, stop: CancellationToken, tasks: &TaskTracker) {
        let mut announced = self.database.listen(KEYS_CHANNEL, stop.clone());
        tasks.spawn(async move {
            let mut every = tokio::time::interval(KEYS_RESCAN);
            loop {
                tokio::select! {
                    Some(_) = announced.recv() => {}
                    _ = every.tick() => {}
                    () = stop.cancelled() => return,
                }
                match self.entries().await {
                    Ok(entries) => {
                        let added = tenants.add(&entries);
                        if added > 0 {
                            tracing::info!(added, "tenants' keys added");
                        }
                    }
                    Err(error) => tracing::warn!(%error, "cannot read the tenants' keys"),
                }
            }
        });
    }

    /// Adds `entry`; false (nothing changed) when its tenant already has a key.
    pub async fn add(&self, entry: &KeyEntry) -> anyhow::Result<bool> {
        let added = self
            .database
            .client()
            .await?
            .query_opt(
                "WITH added AS (
                     INSERT INTO tenant_keys (tenant, entry) VALUES ($1, $2)
                     ON CONFLICT DO NOTHING RETURNING tenant
                 )
                 SELECT pg_notify($3, tenant) FROM added",
                &[&entry.tenant, &toml::to_string(entry)?, &KEYS_CHANNEL],
            )
            .await?;
        Ok(added.is_some())
    }
}

/// A keys entry's own model, which must name a server or a key: an entry that names neither
/// would silently read with the operator's model.
fn own_llm(entry: &KeyEntry) -> anyhow::Result<Option<crate::config::LlmConfig>> {
    match &entry.llm {
        Some(llm)
            if llm.api_key.is_none()
                && llm.base_url == crate::config::LlmConfig::default().base_url =>
        {
            anyhow::bail!(
                "keys: tenant {:?}: llm needs an api_key or a base_url of its own",
                entry.tenant
            )
        }
        llm => Ok(llm.clone()),
    }
}

/// Longest tenant name; names become folder names.
const MAX_TENANT_NAME: usize = 32;

/// One tenant: its name, the URL policy its calls run under, its call rates and limits.
#[derive(Debug)]
pub struct Tenant {
    name: TenantName,
    policy: Arc<UrlPolicy>,
    rates: RateLimiter,
    max_sessions: Option<usize>,
    crawl_max_urls: Option<usize>,
    crawl_parallel: Option<usize>,
    /// Its crawls obey robots.txt whatever the operator's `[crawl] robots` says.
    obeys_robots: bool,
    actions: ActionRules,
    /// Its own model for reading pages into data, over `[llm]`.
    llm: Option<crate::config::LlmConfig>,
}

impl Tenant {
    /// The operator: the global policy and `[rate]`, no limits of its own.
    pub fn operator(config: &Config) -> anyhow::Result<Self> {
        Ok(Self {
            name: TenantName::Operator,
            policy: Arc::new(
                UrlPolicy::from_config(&config.fetch).map_err(|e| anyhow::anyhow!("fetch: {e}"))?,
            ),
            rates: RateLimiter::new(&config.rate).map_err(anyhow::Error::msg)?,
            max_sessions: None,
            crawl_max_urls: None,
            crawl_parallel: None,
            obeys_robots: false,
            actions: ActionRules::operator(&config.actions)?,
            llm: None,
        })
    }

    /// A keys-file tenant: the operator's rules narrowed by the entry's, the operator's rates
    /// overridden by the entry's.
    fn keyed(
        entry: &KeyEntry,
        rate: &HashMap<String, String>,
        operator: &Tenant,
    ) -> anyhow::Result<Self> {
        let name = entry.tenant.as_str();
        let policy = operator
            .policy
            .narrowed(name, &entry.allow_domains, &entry.deny_domains)
            .map_err(|e| anyhow::anyhow!("keys: tenant {name:?}: {e}"))?;
        let mut rates: HashMap<String, String> = rate.clone();
        rates.extend(entry.rate.clone());
        let rates =
            RateLimiter::new(&rates).map_err(|e| anyhow::anyhow!("keys: tenant {name:?}: {e}"))?;
        Ok(Self {
            name: TenantName::keyed(name),
            policy: Arc::new(policy),
            rates,
            max_sessions: entry.max_sessions,
            crawl_max_urls: entry.crawl_max_urls,
            crawl_parallel: entry.crawl_parallel,
            obeys_robots: entry.crawl_robots == Some(crate::config::RobotsRule::Obey),
            actions: operator.actions.narrowed(&entry.actions, name)?,
            llm: own_llm(entry)?,
        })
    }

    /// Its name: the operator, or its name in the keys file.
    pub fn name(&self) -> &TenantName {
        &self.name
    }

    pub fn is_operator(&self) -> bool {
        self.name.is_operator()
    }

    /// What the tenant's calls may reach.
    pub fn policy(&self) -> &Arc<UrlPolicy> {
        &self.policy
    }

    /// Its call rates per tool.
    pub fn rates(&self) -> &RateLimiter {
        &self.rates
    }

    /// Most live sessions it may hold, besides the service's own maximum.
    /// Its own model settings for reading pages into data, when its entry has them.
    pub fn llm(&self) -> Option<&crate::config::LlmConfig> {
        self.llm.as_ref()
    }

    pub fn max_sessions(&self) -> Option<usize> {
        self.max_sessions
    }

    /// Most URLs one of its crawl tasks may hold, besides the service's own maximum.
    pub fn crawl_max_urls(&self) -> Option<usize> {
        self.crawl_max_urls
    }

    /// What its agents may not do, or only once a person allows it.
    pub fn actions(&self) -> &ActionRules {
        &self.actions
    }

    /// Largest `parallel` its crawl tasks may ask for, besides the service's own maximum.
    pub fn crawl_parallel(&self) -> Option<usize> {
        self.crawl_parallel
    }

    /// Whether its crawls obey robots.txt even where the operator's do not.
    pub fn obeys_robots(&self) -> bool {
        self.obeys_robots
    }

    /// Where its files live (profiles, downloads): the data dir itself for the operator,
    /// `tenants/<name>/` in it for the others.
    pub fn data_dir(&self, root: &Path) -> PathBuf {
        if self.is_operator() {
            root.to_path_buf()
        } else {
            root.join("tenants").join(self.name.stored())
        }
    }

    /// For logs and messages.
    pub fn label(&self) -> &str {
        self.name.label()
    }
}

/// Every tenant, and which key opens which.
pub struct Tenants {
    operator: Arc<Tenant>,
    /// `--token`'s SHA-256: it opens the operator's tenant.
    token: Option<[u8; 32]>,
    /// Grows when keys are added while the service runs (never shrinks: a key is never removed).
    keyed: RwLock<Vec<([u8; 32], Arc<Tenant>)>>,
    /// `[rate]`, which tenants' own rates override.
    rate: HashMap<String, String>,
}

impl Tenants {
    /// From `token` and `[[keys]]` (the keys file already read into the config).
    pub fn from_config(config: &Config) -> anyhow::Result<Self> {
        let tenants = Self {
            operator: Arc::new(Tenant::operator(config)?),
            token: config.token.as_deref().map(hash_key),
            keyed: RwLock::default(),
            rate: config.rate.clone(),
        };
        for entry in &config.keys {
            if !tenants.admit(entry)? {
                anyhow::bail!("keys: tenant {:?} or its key is listed twice", entry.tenant);
            }
        }
        Ok(tenants)
    }

    /// Takes the tenants of `entries` not known yet (keys added while the service runs);
    /// returns how many. An entry that cannot be read is logged and left out.
    pub fn add(&self, entries: &[KeyEntry]) -> usize {
        entries
            .iter()
            .filter(|entry| match self.admit(entry) {
                Ok(added) => added,
                Err(error) => {
                    tracing::error!(tenant = %entry.tenant, %error, "a key that cannot be used");
                    false
                }
            })
            .count()
    }

    /// Adds `entry`'s tenant; false when its name or its key is already known.
    fn admit(&self, entry: &KeyEntry) -> anyhow::Result<bool> {
        check_tenant_name(&entry.tenant).map_err(anyhow::Error::msg)?;
        let hash = parse_hash(&entry.sha256)
            .map_err(|e| anyhow::anyhow!("keys: tenant {:?}: {e}", entry.tenant))?;
        let known = |keyed: &[([u8; 32], Arc<Tenant>)]| {
            keyed
                .iter()
                .any(|(h, t)| *h == hash || t.name.stored() == entry.tenant)
        };
        // Every rescan offers every key again: known ones are not built again.
        if known(&self.keyed()) {
            return Ok(false);
        }
        let tenant = Tenant::keyed(entry, &self.rate, &self.operator)?;
        let mut keyed = self.keyed.write_locked();
        if known(&keyed) {
            return Ok(false);
        }
        keyed.push((hash, Arc::new(tenant)));
        Ok(true)
    }

    fn keyed(&self) -> RwLockReadGuard<'_, Vec<([u8; 32], Arc<Tenant>)>> {
        self.keyed.read_locked()
    }

    /// Whether calls must present a key.
    pub fn auth_required(&self) -> bool {
        self.token.is_some() || !self.keyed().is_empty()
    }

    /// The tenant `key` opens. Every entry is compared, in constant time, whatever matches.
    pub fn authenticate(&self, key: &str) -> Option<Arc<Tenant>> {
        let presented = hash_key(key);
        let mut found = None;
        if let Some(token) = &self.token
            && bool::from(token.ct_eq(&presented))
        {
            found = Some(self.operator.clone());
        }
        for (hash, tenant) in self.keyed().iter() {
            if bool::from(hash.ct_eq(&presented)) {
                found = Some(tenant.clone());
            }
        }
        found
    }

    /// The tenant of unauthenticated calls (and of the CLI and MCP over stdio).
    pub fn operator(&self) -> Arc<Tenant> {
        self.operator.clone()
    }

    /// The operator and every keyed tenant.
    pub fn all(&self) -> Vec<Arc<Tenant>> {
        let keyed = self.keyed();
        std::iter::once(self.operator.clone())
            .chain(keyed.iter().map(|(_, tenant)| tenant.clone()))
            .collect()
    }

    /// The tenant of this name (empty: the operator), if it is still in the keys.
    pub fn named(&self, name: &TenantName) -> Option<Arc<Tenant>> {
        if name.is_operator() {
            return Some(self.operator.clone());
        }
        self.keyed()
            .iter()
            .find(|(_, t)| &t.name == name)
            .map(|(_, t)| t.clone())
    }
}

/// The lower-case hex SHA-256 of a key, as the keys file holds it.
pub fn key_hash_hex(key: &str) -> String {
    data_encoding::HEXLOWER.encode(&hash_key(key))
}

fn hash_key(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

fn parse_hash(text: &str) -> Result<[u8; 32], String> {
    data_encoding::HEXLOWER_PERMISSIVE
        .decode(text.trim().as_bytes())
        .ok()
        .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
        .ok_or_else(|| "sha256 must be 64 hex digits (the SHA-256 of the key, not the key)".into())
}

/// A new key: `wpk_` and 160 random bits in base32.
pub fn new_key() -> String {
    let bits = crate::ids::random_bytes::<20>();
    format!(
        "wpk_{}",
        data_encoding::BASE32_NOPAD
            .encode(&bits)
            .to_ascii_lowercase()
    )
}

/// 1–32 lower-case letters, digits, `-` or `_`, starting with a letter or digit.
pub fn check_tenant_name(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && name.len() <= MAX_TENANT_NAME
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_".contains(c))
        && !name.starts_with(['-', '_']);
    if valid {
        Ok(())
    } else {
        Err(format!(
            "keys: {name:?} is not a tenant name (1-{MAX_TENANT_NAME} lower-case letters, digits, - or _)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(tenant: &str, key: &str) -> KeyEntry {
        KeyEntry {
            tenant: tenant.into(),
            sha256: key_hash_hex(key),
            ..KeyEntry::default()
        }
    }

    #[test]
    fn a_tenants_own_model_must_name_a_server_or_a_key() {
        let vague = KeyEntry {
            llm: Some(crate::config::LlmConfig::default()),
            ..entry("alice", "key-of-alice")
        };
        let config = Config {
            keys: vec![vague],
            ..Config::default()
        };
        let error = Tenants::from_config(&config).err().unwrap().to_string();
        assert!(error.contains("api_key or a base_url"), "{error}");
    }

    #[test]
    fn a_key_opens_its_own_tenant_only() {
        let config = Config {
            token: Some("operator-token-0123456789".into()),
            keys: vec![entry("alice", "key-of-alice"), entry("bob", "key-of-bob")],
            ..Config::default()
        };
        let tenants = Tenants::from_config(&config).unwrap();
        assert!(tenants.auth_required());
        assert_eq!(
            tenants.authenticate("key-of-alice").unwrap().label(),
            "alice"
        );
        assert_eq!(tenants.authenticate("key-of-bob").unwrap().label(), "bob");
        let operator = tenants.authenticate("operator-token-0123456789").unwrap();
        assert!(operator.is_operator());
        for wrong in [
            "",
            "key-of-alic",
            "key-of-alice ",
            &key_hash_hex("key-of-alice"),
        ] {
            assert!(tenants.authenticate(wrong).is_none(), "{wrong:?}");
        }
        let root = Path::new("/data");
        assert_eq!(
            tenants
                .named(&TenantName::keyed("alice"))
                .unwrap()
                .data_dir(root),
            Path::new("/data/tenants/alice")
        );
        assert_eq!(operator.data_dir(root), root);
        assert!(tenants.named(&TenantName::keyed("carol")).is_none());
    }

    #[test]
    fn bad_entries_are_refused_at_start() {
        let with = |keys: Vec<KeyEntry>| {
            Tenants::from_config(&Config {
                keys,
                ..Config::default()
            })
        };
        let mut not_a_hash = entry("alice", "k");
        not_a_hash.sha256 = "k".into();
        assert!(with(vec![not_a_hash]).is_err());
        assert!(with(vec![entry("Alice", "k")]).is_err());
        assert!(with(vec![entry("../x", "k")]).is_err());
        assert!(with(vec![entry("alice", "k"), entry("alice", "j")]).is_err());
        assert!(with(vec![entry("alice", "k"), entry("bob", "k")]).is_err());
        let mut bad_rate = entry("alice", "k");
        bad_rate.rate.insert("web_search".into(), "often".into());
        assert!(with(vec![bad_rate]).is_err());
        assert!(!with(Vec::new()).unwrap().auth_required());
    }

    #[test]
    fn new_keys_differ_and_hash_to_hex() {
        let (a, b) = (new_key(), new_key());
        assert_ne!(a, b);
        assert!(a.starts_with("wpk_") && a.len() > 30);
        assert_eq!(key_hash_hex(&a).len(), 64);
    }
}
