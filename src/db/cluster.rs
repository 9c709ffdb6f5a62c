//! Instances sharing one PostgreSQL: each announces itself (id, URL, heartbeat) and records the
//! browser sessions it holds, so that a call for a session reaching another instance (behind a
//! round-robin load balancer) is sent on to the instance holding it, and a session whose
//! instance died is reported as gone rather than waited for.

use crate::ids::{SessionId, TenantName};
use crate::sync::Locked;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::db::postgres::{Database, Migration};

/// How often an instance says it is alive.
const HEARTBEAT_EVERY: Duration = Duration::from_secs(2);
/// An instance silent for longer is taken for dead (three missed heartbeats).
const ALIVE_WITHIN_MS: f64 = 6_000.0;
/// How long a forwarded call may take to reach its instance.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

const MIGRATIONS: [Migration; 1] = [(
    1,
    "CREATE TABLE webpilot_instances (
         id TEXT PRIMARY KEY,
         url TEXT NOT NULL,
         heartbeat TIMESTAMPTZ NOT NULL DEFAULT now()
     );
     CREATE TABLE browser_sessions (
         tenant TEXT NOT NULL,
         name TEXT NOT NULL,
         instance TEXT NOT NULL,
         created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
         PRIMARY KEY (tenant, name)
     );
     CREATE INDEX browser_sessions_by_instance ON browser_sessions (instance);",
)];

/// Where a session lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// In this instance (now, or from this call on).
    Here,
    /// In another live instance, reached at `url`.
    Elsewhere { instance: String, url: String },
    /// In an instance that stopped answering; its pages are gone. The record is dropped, so the
    /// next call of that name starts a new session.
    Gone { instance: String },
}

/// The name of the secret whose hex marks forwarded calls.
const FORWARDING_SECRET: &str = "forwarding";

/// This instance's membership.
pub struct Cluster {
    database: Database,
    /// This instance's id and the URL the others reach it at.
    instance: String,
    url: String,
    /// Sessions recorded as this instance's: their calls need no query.
    held: Mutex<HashSet<SessionId>>,
    /// Sends calls on to other instances.
    client: reqwest::Client,
    /// What marks a call as sent on by an instance (hex of a secret they share): a caller
    /// cannot make a call skip routing by claiming to be one.
    forwarding_mark: String,
}

impl Cluster {
    /// Migrates, announces this instance, and keeps announcing it until `stop`; then withdraws
    /// it and its sessions (which close with its browser).
    pub async fn join(
        database: Database,
        instance: String,
        url: String,
        stop: CancellationToken,
        tasks: &TaskTracker,
    ) -> anyhow::Result<Arc<Self>> {
        database.migrate("cluster", &MIGRATIONS).await?;
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        let forwarding_mark =
            data_encoding::HEXLOWER.encode(&database.shared_secret(FORWARDING_SECRET).await?);
        let cluster = Arc::new(Self {
            database,
            instance,
            url,
            held: Mutex::default(),
            client,
            forwarding_mark,
        });
        cluster.beat().await?;
        let beating = cluster.clone();
        tasks.spawn(async move {
            let mut every = tokio::time::interval(HEARTBEAT_EVERY);
            loop {
                tokio::select! {
                    _ = every.tick() => {
                        if let Err(error) = beating.beat().await {
                            tracing::warn!(%error, "cannot send this instance's heartbeat");
                        }
                    }
                    () = stop.cancelled() => break,
                }
            }
            if let Err(error) = beating.leave().await {
                tracing::warn!(%error, "cannot withdraw this instance");
            }
        });
        tracing::info!(instance = %cluster.instance, url = %cluster.url, "joined the cluster");
        Ok(cluster)
    }

    pub fn instance(&self) -> &str {
        &self.instance
    }

    /// The value of the header that marks a call sent on by an instance.
    pub fn forwarding_mark(&self) -> &str {
        &self.forwarding_mark
    }

    /// Whether `presented` is the mark of a call an instance sent on (compared in constant time).
    pub fn is_forwarding_mark(&self, presented: &[u8]) -> bool {
        use subtle::ConstantTimeEq;
        bool::from(presented.ct_eq(self.forwarding_mark.as_bytes()))
    }

    /// The client that sends calls on to other instances.
    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }

    async fn beat(&self) -> anyhow::Result<()> {
        self.database
            .client()
            .await?
            .execute(
                "INSERT INTO webpilot_instances (id, url) VALUES ($1, $2)
                 ON CONFLICT (id) DO UPDATE SET url = $2, heartbeat = now()",
                &[&self.instance, &self.url],
            )
            .await?;
        Ok(())
    }

    async fn leave(&self) -> anyhow::Result<()> {
        let client = self.database.client().await?;
        client
            .execute(
                "DELETE FROM browser_sessions WHERE instance = $1",
                &[&self.instance],
            )
            .await?;
        client
            .execute(
                "DELETE FROM webpilot_instances WHERE id = $1",
                &[&self.instance],
            )
            .await?;
        Ok(())
    }

    /// Where session `id` lives; a session no instance holds becomes this one's.
    pub async fn holder(&self, id: &SessionId) -> anyhow::Result<Holder> {
        if self.is_held(id) {
            return Ok(Holder::Here);
        }
        let client = self.database.client().await?;
        let claimed = client
            .query_opt(
                "INSERT INTO browser_sessions (tenant, name, instance) VALUES ($1, $2, $3)
                 ON CONFLICT (tenant, name) DO NOTHING RETURNING instance",
                &[&id.tenant.stored(), &id.name.as_str(), &self.instance],
            )
            .await?;
        if claimed.is_some() {
            self.hold_locally(id);
            return Ok(Holder::Here);
        }
        match self.recorded(&client, id).await? {
            Some(holder) => Ok(holder),
            // Dropped in between: take it.
            None => Box::pin(self.holder(id)).await,
        }
    }

    /// Where session `id` lives, if an instance holds it; unlike [`Cluster::holder`], takes
    /// nothing (a private session is its creator's to record).
    pub async fn holder_if_held(&self, id: &SessionId) -> anyhow::Result<Option<Holder>> {
        if self.is_held(id) {
            return Ok(Some(Holder::Here));
        }
        let client = self.database.client().await?;
        self.recorded(&client, id).await
    }

    /// The holder a session's record names; a dead instance's record is dropped (`Gone`).
    async fn recorded(
        &self,
        client: &crate::db::postgres::Client,
        id: &SessionId,
    ) -> anyhow::Result<Option<Holder>> {
        let Some((instance, url, alive)) = Self::record(client, id).await? else {
            return Ok(None);
        };
        if instance == self.instance {
            self.hold_locally(id);
            return Ok(Some(Holder::Here));
        }
        match url {
            Some(url) if alive => Ok(Some(Holder::Elsewhere { instance, url })),
            _ => {
                self.forget_on(id, &instance).await?;
                Ok(Some(Holder::Gone { instance }))
            }
        }
    }

    /// The URL of the live instance other than this one holding session `id`, if any; unlike
    /// [`Cluster::holder`], takes nothing.
    pub async fn elsewhere(&self, id: &SessionId) -> anyhow::Result<Option<String>> {
        let client = self.database.client().await?;
        Ok(match Self::record(&client, id).await? {
            Some((instance, Some(url), true)) if instance != self.instance => Some(url),
            _ => None,
        })
    }

    /// `tenant`'s sessions held by other live instances: (name, instance), by name.
    pub async fn held_elsewhere(
        &self,
        tenant: &TenantName,
    ) -> anyhow::Result<Vec<(String, String)>> {
        let rows = self
            .database
            .client()
            .await?
            .query(
                "SELECT s.name, s.instance FROM browser_sessions s
                 JOIN webpilot_instances i ON i.id = s.instance
                 WHERE s.tenant = $1 AND s.instance <> $2
                   AND i.heartbeat > now() - $3 * interval '1 millisecond'
                 ORDER BY s.name",
                &[&tenant.stored(), &self.instance, &ALIVE_WITHIN_MS],
            )
            .await?;
        Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
    }

    /// A session's record: its instance, that instance's URL and whether it is alive.
    async fn record(
        client: &crate::db::postgres::Client,
        id: &SessionId,
    ) -> anyhow::Result<Option<(String, Option<String>, bool)>> {
        let row = client
            .query_opt(
                "SELECT s.instance, i.url,
                        COALESCE(i.heartbeat > now() - $3 * interval '1 millisecond', false)
                 FROM browser_sessions s LEFT JOIN webpilot_instances i ON i.id = s.instance
                 WHERE s.tenant = $1 AND s.name = $2",
                &[&id.tenant.stored(), &id.name.as_str(), &ALIVE_WITHIN_MS],
            )
            .await?;
        Ok(row.map(|row| (row.get(0), row.get(1), row.get(2))))
    }

    /// Records a session created here.
    pub async fn hold(&self, id: &SessionId) -> anyhow::Result<()> {
        self.database
            .client()
            .await?
            .execute(
                "INSERT INTO browser_sessions (tenant, name, instance) VALUES ($1, $2, $3)
                 ON CONFLICT (tenant, name) DO UPDATE SET instance = $3, created_at = now()",
                &[&id.tenant.stored(), &id.name.as_str(), &self.instance],
            )
            .await?;
        self.hold_locally(id);
        Ok(())
    }

    /// Drops the record of a session `instance` held (closed, or lost with its instance).
    pub async fn forget_on(&self, id: &SessionId, instance: &str) -> anyhow::Result<()> {
        self.database
            .client()
            .await?
            .execute(
                "DELETE FROM browser_sessions WHERE tenant = $1 AND name = $2 AND instance = $3",
                &[&id.tenant.stored(), &id.name.as_str(), &instance],
            )
            .await?;
        if instance == self.instance {
            self.held.locked().remove(id);
        }
        Ok(())
    }

    fn is_held(&self, id: &SessionId) -> bool {
        self.held.locked().contains(id)
    }

    fn hold_locally(&self, id: &SessionId) {
        self.held.locked().insert(id.clone());
    }
}
