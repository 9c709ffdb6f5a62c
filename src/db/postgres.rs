//! PostgreSQL, when `--database-url` names one: a connection pool whose statements are prepared
//! once per connection (one round trip per query after that), schema migrations run at start by
//! whichever instance gets there first, and `LISTEN` for notices other instances send.
//! Connections use TLS as libpq's `sslmode` says: `prefer` (the default) when the server offers
//! it, `require` always, both without checking the server's certificate unless `sslrootcert` (a
//! PEM file) is given; `verify-ca` and `verify-full` always check it, host name included, against
//! the public roots and `sslrootcert`; `disable` never. Every
//! query through [`Database::client`] is counted, so benches can report round trips per item.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_postgres::AsyncMessage;
use tokio_postgres_rustls::MakeRustlsConnect;
use tokio_util::sync::CancellationToken;

/// Connections per instance: crawl claims and finishes are short, so a few carry many items.
const POOL_SIZE: usize = 16;
/// Key of the advisory lock instances take to migrate one at a time.
const MIGRATION_LOCK: i64 = 0x7765_6270_696c_6f74;
/// Wait before reconnecting a lost `LISTEN` connection.
/// How long a start waits for `LISTEN` to be in place.
const LISTEN_WAIT: Duration = Duration::from_secs(10);
const RELISTEN_AFTER: Duration = Duration::from_secs(1);

const SECRET_MIGRATIONS: [Migration; 1] = [(
    1,
    "CREATE TABLE webpilot_secrets (name TEXT PRIMARY KEY, value BYTEA NOT NULL);",
)];

/// A schema step of one component: its version (applied in order, once per database) and its SQL.
pub type Migration = (i32, &'static str);

/// A pool on one PostgreSQL database.
#[derive(Clone)]
pub struct Database {
    pool: Pool,
    // Shared: a `Database` is cloned into every store and call context.
    config: Arc<tokio_postgres::Config>,
    tls: MakeRustlsConnect,
    round_trips: Arc<AtomicU64>,
}

impl Database {
    /// Connects (checking the URL and that the server answers).
    pub async fn connect(url: &str) -> anyhow::Result<Self> {
        let (url, root_cert, verify) = split_tls_options(url);
        let config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| anyhow::anyhow!("--database-url is not a PostgreSQL URL: {e}"))?;
        let tls = tls(root_cert.as_deref(), verify)?;
        let manager = Manager::from_config(
            config.clone(),
            tls.clone(),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .build()
            .map_err(|e| anyhow::anyhow!("PostgreSQL pool: {e}"))?;
        let database = Self {
            pool,
            config: Arc::new(config),
            tls,
            round_trips: Arc::default(),
        };
        database
            .client()
            .await
            .map_err(|e| anyhow::anyhow!("cannot reach PostgreSQL: {e}"))?;
        Ok(database)
    }

    /// A pooled connection.
    pub async fn client(&self) -> anyhow::Result<Client> {
        let object = self
            .pool
            .get()
            .await
            // With its causes: a failed TLS handshake says why only in its source.
            .map_err(|e| anyhow::anyhow!("PostgreSQL: {:#}", anyhow::Error::new(e)))?;
        Ok(Client {
            object,
            round_trips: self.round_trips.clone(),
        })
    }

    /// Queries sent so far through this pool.
    pub fn round_trips(&self) -> u64 {
        self.round_trips.load(Ordering::Relaxed)
    }

    /// Applies the steps of `migrations` this database has not seen, in one transaction each,
    /// under an advisory lock so instances starting together migrate once.
    pub async fn migrate(&self, component: &str, migrations: &[Migration]) -> anyhow::Result<()> {
        let mut client = self.client().await?;
        let connection = &mut client.object;
        connection
            .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
            .await?;
        let applied = async {
            let fresh = connection
                .query_one("SELECT to_regclass('webpilot_migrations') IS NULL", &[])
                .await?
                .get::<_, bool>(0);
            if fresh {
                connection
                    .batch_execute(
                        "CREATE TABLE webpilot_migrations (
                             component TEXT NOT NULL,
                             version INTEGER NOT NULL,
                             applied_at TIMESTAMPTZ NOT NULL DEFAULT now(),
                             PRIMARY KEY (component, version))",
                    )
                    .await?;
            }
            for (version, sql) in migrations {
                let seen = connection
                    .query_opt(
                        "SELECT 1 FROM webpilot_migrations WHERE component = $1 AND version = $2",
                        &[&component, version],
                    )
                    .await?
                    .is_some();
                if seen {
                    continue;
                }
                let transaction = connection.transaction().await?;
                transaction.batch_execute(sql).await?;
                transaction
                    .execute(
                        "INSERT INTO webpilot_migrations (component, version) VALUES ($1, $2)",
                        &[&component, version],
                    )
                    .await?;
                transaction.commit().await?;
                tracing::info!(component, version, "database migrated");
            }
            anyhow::Ok(())
        }
        .await;
        connection
            .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
            .await?;
        applied
    }

    /// The secret named `name` that every instance on this database shares: drawn (32 random
    /// bytes) by the first instance to ask, read by the others.
    pub async fn shared_secret(&self, name: &str) -> anyhow::Result<Vec<u8>> {
        self.migrate("secrets", &SECRET_MIGRATIONS).await?;
        let drawn = crate::ids::random_bytes::<32>().to_vec();
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO webpilot_secrets (name, value) VALUES ($1, $2) \
                 ON CONFLICT (name) DO NOTHING",
                &[&name, &drawn],
            )
            .await?;
        // A statement of its own: it sees a draw committed while the insert above waited.
        let row = client
            .query_opt(
                "SELECT value FROM webpilot_secrets WHERE name = $1",
                &[&name],
            )
            .await?;
        Ok(row.map_or(drawn, |row| row.get(0)))
    }

    /// Payloads of `NOTIFY channel` from every instance (this one included), on a connection of
    /// its own that reconnects when lost, until `stop`.
    pub fn listen(&self, channel: &'static str, stop: CancellationToken) -> mpsc::Receiver<String> {
        self.relayed(channel, stop, None)
    }

    /// `listen`, returning once `LISTEN` is in place (or after `LISTEN_WAIT`, when the server is
    /// slow to answer): a caller that next looks for work announced on `channel` misses none.
    pub async fn listening(
        &self,
        channel: &'static str,
        stop: CancellationToken,
    ) -> mpsc::Receiver<String> {
        let (ready, listening) = tokio::sync::oneshot::channel();
        let receiver = self.relayed(channel, stop, Some(ready));
        if tokio::time::timeout(LISTEN_WAIT, listening).await.is_err() {
            tracing::warn!(channel, "PostgreSQL LISTEN not in place yet; going on");
        }
        receiver
    }

    fn relayed(
        &self,
        channel: &'static str,
        stop: CancellationToken,
        mut ready: Option<tokio::sync::oneshot::Sender<()>>,
    ) -> mpsc::Receiver<String> {
        let (sender, receiver) = mpsc::channel(1024);
        let (config, tls) = (self.config.clone(), self.tls.clone());
        tokio::spawn(async move {
            while !stop.is_cancelled() {
                tokio::select! {
                    outcome = relay(&config, tls.clone(), channel, &sender, &mut ready) => {
                        if let Err(error) = outcome {
                            tracing::warn!(%error, channel, "PostgreSQL LISTEN connection lost; reconnecting");
                        }
                        if sender.is_closed() {
                            return;
                        }
                    }
                    () = stop.cancelled() => return,
                }
                tokio::select! {
                    () = tokio::time::sleep(RELISTEN_AFTER) => {}
                    () = stop.cancelled() => return,
                }
            }
        });
        receiver
    }
}

/// What of the URL is TLS settings tokio-postgres does not read: the URL without them (libpq's
/// `verify-ca` and `verify-full` become `require`), the `sslrootcert` file, and whether the
/// server's certificate must be checked.
fn split_tls_options(url: &str) -> (String, Option<std::path::PathBuf>, bool) {
    let Ok(mut parsed) = url::Url::parse(url) else {
        // A `key=value` connection string: passed on as it is.
        return (url.to_string(), None, false);
    };
    let (mut root_cert, mut verify) = (None, false);
    let kept: Vec<(String, String)> = parsed
        .query_pairs()
        .filter_map(|(key, value)| match (key.as_ref(), value.as_ref()) {
            ("sslrootcert", path) => {
                root_cert = Some(std::path::PathBuf::from(path));
                None
            }
            ("sslmode", "verify-ca" | "verify-full") => {
                verify = true;
                Some((key.into(), "require".into()))
            }
            _ => Some((key.into_owned(), value.into_owned())),
        })
        .collect();
    if kept.is_empty() {
        parsed.set_query(None);
    } else {
        parsed.query_pairs_mut().clear().extend_pairs(kept);
    }
    let verify = verify || root_cert.is_some();
    (parsed.to_string(), root_cert, verify)
}

/// TLS that checks the server's certificate against the public roots and those of `root_cert`
/// when `verify`, and encrypts without checking it otherwise (libpq's `prefer` and `require`).
fn tls(root_cert: Option<&std::path::Path>, verify: bool) -> anyhow::Result<MakeRustlsConnect> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    if !verify {
        let config = builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Unverified(provider)))
            .with_no_client_auth();
        return Ok(MakeRustlsConnect::new(config));
    }
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = root_cert {
        let certificates = CertificateDer::pem_file_iter(path)
            .and_then(|certificates| certificates.collect::<Result<Vec<_>, _>>())
            .map_err(|e| anyhow::anyhow!("sslrootcert {}: {e}", path.display()))?;
        if certificates.is_empty() {
            anyhow::bail!("sslrootcert {}: no PEM certificate in it", path.display());
        }
        for certificate in certificates {
            roots
                .add(certificate)
                .map_err(|e| anyhow::anyhow!("sslrootcert {}: {e}", path.display()))?;
        }
    }
    let config = builder.with_root_certificates(roots).with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

/// libpq's `prefer` and `require`: the connection is encrypted, the server not authenticated
/// (its handshake signatures are still checked).
#[derive(Debug)]
struct Unverified(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls_pki_types::CertificateDer<'_>,
        _intermediates: &[rustls_pki_types::CertificateDer<'_>],
        _server_name: &rustls_pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Forwards one connection's notifications on `channel` until it fails or nobody listens.
async fn relay(
    config: &tokio_postgres::Config,
    tls: MakeRustlsConnect,
    channel: &str,
    sender: &mpsc::Sender<String>,
    ready: &mut Option<tokio::sync::oneshot::Sender<()>>,
) -> anyhow::Result<()> {
    let (client, mut connection) = config.connect(tls).await?;
    let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
    let command = format!("LISTEN {channel}");
    {
        // The connection must be polled for LISTEN itself to complete.
        let mut listening = std::pin::pin!(client.batch_execute(&command));
        loop {
            tokio::select! {
                done = &mut listening => {
                    done?;
                    if let Some(ready) = ready.take() {
                        let _ = ready.send(());
                    }
                    break;
                }
                message = messages.next() => match message {
                    Some(Ok(_)) => {}
                    Some(Err(error)) => return Err(error.into()),
                    None => anyhow::bail!("connection closed"),
                },
            }
        }
    }
    while let Some(message) = messages.next().await {
        if let AsyncMessage::Notification(notice) = message?
            && sender.send(notice.payload().to_string()).await.is_err()
        {
            return Ok(());
        }
    }
    drop(client);
    anyhow::bail!("connection closed")
}

/// A pooled connection whose queries are prepared once per connection and counted.
pub struct Client {
    object: deadpool_postgres::Object,
    round_trips: Arc<AtomicU64>,
}

type Params<'a> = &'a [&'a (dyn tokio_postgres::types::ToSql + Sync)];

impl Client {
    pub async fn query(
        &self,
        sql: &str,
        params: Params<'_>,
    ) -> anyhow::Result<Vec<tokio_postgres::Row>> {
        let statement = self.object.prepare_cached(sql).await?;
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        Ok(self.object.query(&statement, params).await?)
    }

    pub async fn query_opt(
        &self,
        sql: &str,
        params: Params<'_>,
    ) -> anyhow::Result<Option<tokio_postgres::Row>> {
        Ok(self.query(sql, params).await?.into_iter().next())
    }

    pub async fn execute(&self, sql: &str, params: Params<'_>) -> anyhow::Result<u64> {
        let statement = self.object.prepare_cached(sql).await?;
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        Ok(self.object.execute(&statement, params).await?)
    }

    /// A transaction on this connection (its statements are not counted one by one).
    pub async fn transaction(&mut self) -> anyhow::Result<deadpool_postgres::Transaction<'_>> {
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        Ok(self.object.transaction().await?)
    }
}
