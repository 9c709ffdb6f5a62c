//! The assembled service: configuration, the browser and web sides and the tool registry, shared by the
//! HTTP server and the in-process CLI.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::agent::Agent;
use crate::agent::conversations::Conversations;
use crate::browser::BrowserService;
use crate::config::{Config, ConfigArgs};
use crate::crawl::Crawler;
use crate::db::Storage;
use crate::db::cluster::Cluster;
use crate::db::postgres::Database;
use crate::pages::Pages;
use crate::profiles::Profiles;
use crate::tenancy::files::FileRoots;
use crate::tenancy::links::{LiveLinks, PublicUrl};
use crate::tenancy::{SharedKeys, Tenants};
use crate::tools::{Ctx, Registry};
use crate::trace::Traces;
use crate::web::WebService;

/// Everything a front needs. Cheap to clone.
#[derive(Clone)]
pub struct App {
    /// This process's name among instances sharing a database: random per start.
    pub instance: String,
    /// Membership of the instances sharing PostgreSQL, for a served instance with a database.
    pub cluster: Option<Arc<Cluster>>,
    pub config: Arc<Config>,
    pub browser: Arc<BrowserService>,
    pub registry: Arc<Registry>,
    pub agent: Arc<Agent>,
    pub crawler: Arc<Crawler>,
    /// Stored conversations with the agent.
    pub conversations: Arc<Conversations>,
    /// Who may call, and what is whose.
    pub tenants: Arc<Tenants>,
    /// Signs and checks live-view links.
    pub live_links: Arc<LiveLinks>,
    /// Where people reach the service (live-view links start with it).
    pub public_url: Arc<PublicUrl>,
    /// Every session's trace of its tool calls.
    pub traces: Arc<Traces>,
    /// Replays running in the background for the HTTP front, and those that ended lately.
    pub replays: Arc<crate::replay::Replays>,
    /// Cancelled once, when the service shuts down (a signal, or the end of a CLI command).
    pub stop: CancellationToken,
    /// The service's background work (crawl tasks, chats streaming, the session reaper), which
    /// shutdown lets end before Chromium goes.
    pub tasks: TaskTracker,
}

/// How long shutdown waits for background work to notice it and end.
const TASKS_GRACE: Duration = Duration::from_secs(5);

impl App {
    /// Builds the service (connecting to PostgreSQL when configured). Must run inside a tokio
    /// runtime (it starts the idle-session reaper).
    pub async fn new(config: Config) -> anyhow::Result<Self> {
        let (config, database, shared_keys) = with_shared_keys(config).await?;
        let config = Arc::new(config);
        let tenants = Arc::new(Tenants::from_config(&config)?);
        remove_leftovers(&config, &tenants);
        // The service's policy; sessions and fetches run under their tenant's, which narrows it.
        let policy = tenants.operator().policy().clone();
        let web = Arc::new(WebService::new(&config, policy.clone())?);
        let browser = BrowserService::new(config.clone(), policy.as_ref().clone());
        let (stop, tasks) = (CancellationToken::new(), TaskTracker::new());
        browser.spawn_housekeeping(stop.clone(), &tasks);
        if let Some(keys) = shared_keys {
            keys.follow(tenants.clone(), stop.clone(), &tasks);
        }
        let pages = Arc::new(Pages::new(config.clone(), browser.clone(), web.clone()));
        if let Some(database) = &database {
            crate::profiles::migrate(database).await?;
        }
        let instance = instance_id();
        let cluster = match (&database, &config.instance_url) {
            (Some(database), Some(url)) => {
                let (database, me) = (database.clone(), instance.clone());
                Some(Cluster::join(database, me, url.clone(), stop.clone(), &tasks).await?)
            }
            _ => None,
        };
        let storage = Storage::open(database.as_ref(), &config.data_dir)?;
        let crawler = Crawler::open(
            &storage,
            instance.clone(),
            config.crawl.clone(),
            pages.clone(),
            tenants.clone(),
            (
                web.clone(),
                webhook_secret(&config, database.as_ref()).await?,
            ),
            stop.clone(),
            tasks.clone(),
        )
        .await?;
        let conversations = Arc::new(Conversations::open(&storage, &config.data_dir).await?);
        let files = Arc::new(FileRoots::new(&config.files, &config.data_dir)?);
        let live_links = Arc::new(live_links(&config, database.as_ref()).await?);
        let public_url = Arc::new(PublicUrl::new(config.public_url.clone()));
        let traces = Arc::new(Traces::new(config.data_dir.clone(), config.trace.clone()));
        sweep_traces(traces.clone(), stop.clone(), &tasks);
        hand_back_memory(stop.clone(), &tasks);
        let registry = Arc::new(Registry::new(Ctx {
            config: config.clone(),
            files,
            browser: browser.clone(),
            web,
            pages,
            crawler: crawler.clone(),
            tenants: tenants.clone(),
            live_links: live_links.clone(),
            public_url: public_url.clone(),
            profiles: Profiles::open(&config.data_dir, database, config.profile_key.as_deref())?,
            traces: traces.clone(),
        }));
        let agent = Arc::new(Agent::new(&config.llm, registry.clone())?);
        Ok(Self {
            instance,
            cluster,
            config,
            browser,
            registry,
            agent,
            crawler,
            conversations,
            tenants,
            live_links,
            public_url,
            traces,
            replays: Arc::default(),
            stop,
            tasks,
        })
    }

    /// Stops background work, then closes every session and the browser; leaves no Chromium
    /// process or temp dir behind. Crawl items in flight stay pending rather than fail with the
    /// browser: their tasks stop before it closes.
    pub async fn shutdown(&self) {
        self.stop.cancel();
        self.tasks.close();
        if tokio::time::timeout(TASKS_GRACE, self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                left = self.tasks.len(),
                "background tasks still running; closing the browser under them"
            );
        }
        self.browser.shutdown().await;
    }
}

/// The configuration of a command that builds the service: `Config::load` (file, environment,
/// flags, validated), and the tenants built from it once, so that a bad URL policy, rate or key
/// is refused before anything starts, with the error `App::new` would give.
pub fn load_config(args: &ConfigArgs) -> anyhow::Result<Config> {
    let config = Config::load(args)?;
    // The operator's policy and rates, and every key's.
    Tenants::from_config(&config)?;
    Ok(config)
}

/// Connects to PostgreSQL when configured and adds the keys added there to the configured ones.
async fn with_shared_keys(
    mut config: Config,
) -> anyhow::Result<(Config, Option<Database>, Option<SharedKeys>)> {
    let database = match &config.database_url {
        Some(url) => Some(Database::connect(url).await?),
        None => None,
    };
    let shared_keys = match &database {
        Some(database) => {
            let keys = SharedKeys::open(database.clone()).await?;
            config.keys.extend(keys.entries().await?);
            Some(keys)
        }
        None => None,
    };
    config.check_exposure()?;
    Ok((config, database, shared_keys))
}

/// What earlier runs left behind: temp files of profile saves that never finished (they hold
/// plaintext cookies), Chromium profiles and staged uploads of processes that are gone.
fn remove_leftovers(config: &Config, tenants: &Tenants) {
    let removed: usize = tenants
        .all()
        .iter()
        .map(|tenant| {
            let dir = tenant.data_dir(&config.data_dir);
            crate::profiles::ProfileStore::new(&dir, None).remove_abandoned_temps()
        })
        .sum();
    if removed > 0 {
        tracing::info!(
            removed,
            "removed temp files of profile saves that never finished"
        );
    }
    crate::browser::remove_abandoned_browser_dirs();
    crate::browser::remove_abandoned_uploads(&config.data_dir);
}

/// Live-view links, signed with the configured secret, else the one instances sharing
/// `database` share, else one of this process.
/// What webhook events are signed with: configured, else shared by the instances of one
/// PostgreSQL, else drawn at start.
async fn webhook_secret(config: &Config, database: Option<&Database>) -> anyhow::Result<Vec<u8>> {
    if let Some(secret) = &config.crawl.webhook_secret {
        return Ok(secret.as_bytes().to_vec());
    }
    match database {
        Some(database) => database.shared_secret("crawl_webhooks").await,
        None => Ok(crate::ids::random_bytes::<32>().to_vec()),
    }
}

async fn live_links(config: &Config, database: Option<&Database>) -> anyhow::Result<LiveLinks> {
    let secret = LiveLinks::secret(config.live_secret.as_deref(), database).await?;
    Ok(LiveLinks::new(
        secret,
        Duration::from_secs(config.live_link_secs),
    ))
}

/// A fresh instance name: 8 random hex digits.
fn instance_id() -> String {
    let bytes = crate::ids::random_bytes::<4>();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Hands memory the heap freed back to the system, every few seconds, until the service stops.
fn hand_back_memory(stop: CancellationToken, tasks: &TaskTracker) {
    tasks.spawn(crate::web::work::hand_back_freed_memory(stop));
}

/// Removes traces past `[trace] max_age_hours`: at start, then every hour.
fn sweep_traces(traces: Arc<Traces>, stop: CancellationToken, tasks: &TaskTracker) {
    tasks.spawn(async move {
        loop {
            let sweeper = traces.clone();
            if let Ok(removed) = tokio::task::spawn_blocking(move || sweeper.sweep()).await
                && removed > 0
            {
                tracing::info!(removed, "old traces removed");
            }
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(std::time::Duration::from_secs(3600)) => {}
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `Config::validate` leaves to the tenants is still refused before anything starts.
    #[test]
    fn the_tenants_settings_are_checked_when_the_configuration_loads() {
        let dir = tempfile::tempdir().unwrap();
        let (file, keys) = (
            dir.path().join("webpilot.toml"),
            dir.path().join("keys.toml"),
        );
        let args = ConfigArgs {
            config: Some(file.clone()),
            keys_file: Some(keys.clone()),
            data_dir: Some(dir.path().to_path_buf()),
            ..ConfigArgs::default()
        };
        let error = |file_text: &str, keys_text: &str| {
            std::fs::write(&file, file_text).unwrap();
            std::fs::write(&keys, keys_text).unwrap();
            // The model loads; the tenants built from it are refused.
            Config::load(&args).unwrap();
            load_config(&args).unwrap_err().to_string()
        };
        let hash = "0".repeat(64);
        let twice = format!(
            "[[keys]]\ntenant = \"alice\"\nsha256 = \"{hash}\"\n\n\
             [[keys]]\ntenant = \"alice\"\nsha256 = \"{}\"\n",
            "1".repeat(64)
        );
        assert_eq!(
            error("", &twice),
            "keys: tenant \"alice\" or its key is listed twice"
        );
        let named = format!("[[keys]]\ntenant = \"Alice\"\nsha256 = \"{hash}\"\n");
        assert!(error("", &named).contains("\"Alice\" is not a tenant name"));
        let rate = error("[rate]\nweb_search = \"often\"\n", "");
        assert!(rate.contains("often"), "{rate}");
        std::fs::write(&file, "").unwrap();
        std::fs::write(
            &keys,
            format!("[[keys]]\ntenant = \"alice\"\nsha256 = \"{hash}\"\n"),
        )
        .unwrap();
        assert_eq!(load_config(&args).unwrap().keys.len(), 1);
    }
}
