//! `browser_tabs`: list, open, switch and close the tabs of a session. Popups and
//! `target=_blank` pages show up as tabs of the session that opened them.

use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::navigate::checked_url;
use super::{Ctx, Tool, ToolOutput, session_name};
use crate::browser::Destination;
use crate::error::{ToolError, ToolResult};

const GUIDE: &str = "browser_tabs lists, opens (action=new, optional url), switches to and \
closes tabs by id (t1, t2, …). Pages opened by links or popups appear as new tabs.";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TabsArgs {
    /// list (default) | new | switch | close.
    pub action: Option<Action>,
    /// Tab id for switch/close (close defaults to the active tab).
    pub tab: Option<String>,
    /// URL to open in the new tab.
    pub url: Option<String>,
    /// Default "default".
    pub session: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    #[default]
    List,
    New,
    Switch,
    Close,
}

pub struct Tabs;

#[async_trait]
impl Tool for Tabs {
    type Args = TabsArgs;
    const NAME: &'static str = "browser_tabs";
    const GUIDE: &'static str = GUIDE;
    const DESCRIPTION: &'static str =
        "List, open (new, optional url), switch to, or close browser tabs by id.";

    async fn run(&self, ctx: &Ctx, args: TabsArgs) -> ToolResult<ToolOutput> {
        let mut session = ctx.browser.session(session_name(&args.session)).await?;
        let action = args.action.unwrap_or_default();
        if matches!(action, Action::Switch | Action::Close) {
            // The tab named may be a popup opened since the last call.
            session.sync_tabs().await?;
        }
        let mut extra = json!({});
        match action {
            Action::List => {}
            Action::New => {
                let url = args.url.as_deref().map(checked_url).transpose()?;
                let timeout = Duration::from_millis(ctx.config.navigation_timeout_ms);
                let previous = session.active_id().map(str::to_string);
                let tab = session.open_tab("about:blank").await?;
                if let Some(url) = url {
                    let id = tab.id.clone();
                    match tab.navigate(Destination::Url(url), None, timeout).await {
                        Ok(arrival) => {
                            extra = json!({ "status": arrival.status, "ready": arrival.ready });
                        }
                        Err(error) => {
                            // A refused or failed `new` leaves the tabs as they were.
                            session.close_tab(&id).await?;
                            if let Some(previous) = previous {
                                session.switch_to(&previous)?;
                            }
                            return Err(error);
                        }
                    }
                }
            }
            Action::Switch => {
                let id = args.tab.as_deref().ok_or_else(|| {
                    ToolError::invalid("field `tab` is required for action=switch")
                })?;
                session.switch_to(id)?;
            }
            Action::Close => {
                let id = match args.tab.clone() {
                    Some(id) => id,
                    None => session
                        .active_id()
                        .map(str::to_string)
                        .ok_or_else(|| ToolError::invalid("the session has no tab to close"))?,
                };
                session.close_tab(&id).await?;
            }
        }
        let tabs = session.list_tabs().await?;
        extra["session"] = json!(session.name());
        extra["active"] = json!(session.active_id());
        extra["tabs"] = json!(tabs);
        Ok(ToolOutput::json(extra))
    }
}
