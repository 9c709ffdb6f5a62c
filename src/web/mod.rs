//! The browserless side: fetching pages over guarded HTTP, extracting their content, searching
//! the web, turning HTML into Markdown and picking the sections of a document that answer a
//! query, reading PDF documents. No CDP here: when a page needs a browser, `shell` says so and the tool layer renders it.

pub mod bounded;
pub mod charset;
pub mod client;
pub mod data;
pub mod documents;
pub mod extract;
pub mod llm;
pub mod markdown;
pub mod pdf;
pub mod search;
pub mod sections;
pub mod shell;
pub mod work;

use std::collections::HashMap;
use std::sync::Arc;

use crate::config::Config;
use crate::ids::TenantName;
use crate::policy::UrlPolicy;
use crate::sync::Locked;
use crate::tenancy::Tenant;

/// `text` safe inside an HTML or XML element or a double-quoted attribute.
pub fn escape_html(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The shared state of browserless tools: the HTTP clients, the search backends and the model
/// that reads pages into data when an operator set one up.
pub struct WebService {
    pub client: client::WebClient,
    pub searcher: search::Searcher,
    model: Option<Arc<llm::LlmClient>>,
    /// Tenants' own models (their keys entries' `llm`), made on first use.
    tenant_models: std::sync::Mutex<HashMap<TenantName, Arc<llm::LlmClient>>>,
}

impl WebService {
    /// `policy` is the service's: what fetches may connect to whoever asks (a caller's own
    /// policy can only narrow it, and is applied per fetch).
    pub fn new(config: &Config, policy: Arc<UrlPolicy>) -> anyhow::Result<Self> {
        Ok(Self {
            client: client::WebClient::new(
                &config.fetch,
                &config.search,
                policy,
                crate::egress::Upstream::configured(config).map_err(anyhow::Error::msg)?,
            )?,
            searcher: search::Searcher::new(config.search.clone()),
            model: Some(llm::LlmClient::new(config.llm.clone())?)
                .filter(llm::LlmClient::configured)
                .map(Arc::new),
            tenant_models: Default::default(),
        })
    }

    /// The model that reads `tenant`'s pages into data: its own, else the operator's `[llm]`,
    /// else none.
    pub fn model_for(&self, tenant: &Tenant) -> Option<Arc<llm::LlmClient>> {
        let Some(own) = tenant.llm() else {
            return self.model.clone();
        };
        let mut models = self.tenant_models.locked();
        if let Some(model) = models.get(tenant.name()) {
            return Some(model.clone());
        }
        match llm::LlmClient::new(own.clone()) {
            Ok(model) => {
                let model = Arc::new(model);
                models.insert(tenant.name().clone(), model.clone());
                Some(model)
            }
            Err(e) => {
                tracing::warn!(tenant = %tenant.name(), "cannot set up the tenant's model: {e}");
                None
            }
        }
    }
}
