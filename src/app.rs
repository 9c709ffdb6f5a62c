//! The assembled service: configuration, the browser and web sides and the tool registry, shared by the
//! HTTP server and the in-process CLI.

use std::sync::Arc;

use crate::agent::Agent;
use crate::browser::BrowserService;
use crate::config::Config;
use crate::crawl::Crawler;
use crate::files::FileRoots;
use crate::pages::Pages;
use crate::tools::{Ctx, Registry};
use crate::web::WebService;

/// Everything a front needs. Cheap to clone.
#[derive(Clone)]
pub struct App {
    pub config: Arc<Config>,
    pub browser: Arc<BrowserService>,
    pub registry: Arc<Registry>,
    pub agent: Arc<Agent>,
    pub crawler: Arc<Crawler>,
}

/// The SQLite file of crawl tasks, in the data dir.
const DATABASE_FILE: &str = "webpilot.db";

impl App {
    /// Builds the service. Must run inside a tokio runtime (it starts the idle-session reaper).
    pub fn new(config: Config) -> anyhow::Result<Self> {
        let config = Arc::new(config);
        let removed = crate::browser::profiles::ProfileStore::new(&config.data_dir, None)
            .remove_abandoned_temps();
        if removed > 0 {
            tracing::info!(
                removed,
                "removed temp files of profile saves that never finished"
            );
        }
        crate::browser::remove_abandoned_browser_dirs();
        crate::browser::remove_abandoned_uploads(&config.data_dir);
        let web = Arc::new(WebService::new(&config)?);
        // One URL policy for both sides, parsed once by the web client.
        let browser = BrowserService::new(config.clone(), web.client.policy().clone());
        browser.spawn_reaper();
        let pages = Arc::new(Pages::new(config.clone(), browser.clone(), web.clone()));
        let crawler = Crawler::open(
            &config.data_dir.join(DATABASE_FILE),
            config.crawl.clone(),
            pages.clone(),
        )?;
        let files = Arc::new(FileRoots::new(&config.files, &config.data_dir)?);
        let registry = Arc::new(Registry::new(Ctx {
            config: config.clone(),
            files,
            browser: browser.clone(),
            web,
            pages,
            crawler: crawler.clone(),
        })?);
        let agent = Arc::new(Agent::new(&config.llm, registry.clone())?);
        Ok(Self {
            config,
            browser,
            registry,
            agent,
            crawler,
        })
    }

    /// Closes every session and the browser; leaves no Chromium process or temp dir behind.
    pub async fn shutdown(&self) {
        // Crawl items in flight stay pending rather than fail with the browser.
        self.crawler.stop();
        self.browser.shutdown().await;
    }
}
