//! `browser_tabs`: list, open, switch and close the tabs of a session, its live view, and its
//! network capture as a HAR file. Popups and `target=_blank` pages show up as tabs of the
//! session that opened them.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::navigate::checked_url;
use super::{Call, LiveLink, Scope, SessionField, Tool};
use crate::browser::{Arrival, Destination, Identity, SavedHar, TabInfo};
use crate::error::{ToolError, ToolResult};

const GUIDE: &str = "browser_tabs lists, opens (action=new, optional url), switches to and \
closes tabs by id (t1, t2, …). Pages opened by links or popups appear as new tabs. live returns \
a link (live_url, expires_at) to watch and take over the session in a browser, no token needed. \
session_options on a session's first call (action=new) set how it presents itself: user agent, \
locale, time zone, position, window size, extra headers, colour scheme. har saves the requests of \
the tab (or of every tab, without `tab`) as a HAR 1.2 file in the session's downloads, secrets \
redacted; over REST, `Accept: application/har+json` returns the file itself.";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TabsArgs {
    /// Default list.
    pub action: Option<Action>,
    /// Tab id (close: active).
    pub tab: Option<String>,
    /// new: URL.
    pub url: Option<String>,
    /// new, first call: user_agent, locale, timezone, geolocation, viewport, extra_headers, color_scheme, proxy
    #[schemars(extend("x-compact" = true))]
    pub session_options: Option<Identity>,
    pub session: Option<SessionField>,
}

shared_fields!(TabsArgs { session });

#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    #[default]
    List,
    New,
    Switch,
    Close,
    Live,
    Har,
}

/// The session's tabs after the action.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TabsOutput {
    /// new with a url: how the page arrived.
    #[serde(flatten)]
    arrival: Option<Arrival>,
    /// live: the session's live view.
    #[serde(flatten)]
    link: Option<LiveLink>,
    /// The active tab's id.
    active: Option<String>,
    tabs: Vec<TabInfo>,
    /// How the session presents itself, when it was created with an identity.
    #[serde(skip_serializing_if = "Option::is_none")]
    identity: Option<Identity>,
    /// har: the file written.
    #[serde(skip_serializing_if = "Option::is_none")]
    har: Option<SavedHar>,
}

pub struct Tabs;

#[async_trait]
impl Tool for Tabs {
    type Args = TabsArgs;
    type Output = TabsOutput;
    const NAME: &'static str = "browser_tabs";
    const GUIDE: &'static str = GUIDE;
    const EXAMPLE: &'static str = r#"{"action": "list"}"#;
    const SCOPE: Scope = Scope::Browser;
    const TITLE: &'static str = "Tabs and live view";
    const EFFECTS: crate::tools::Effects = crate::tools::Effects {
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: true,
    };
    const DESCRIPTION: &'static str =
        "Tabs: list, new, switch, close; live: a link for a person; har: requests.";

    fn acts(args: &TabsArgs) -> bool {
        matches!(
            args.action,
            Some(Action::New | Action::Switch | Action::Close)
        )
    }

    async fn run(&self, call: &mut Call<'_>, args: TabsArgs) -> ToolResult<TabsOutput> {
        let action = args.action.unwrap_or_default();
        create_with_options(call, &args, action).await?;
        call.session().await?;
        let deadline = call.time_left();
        let data_dir = call.ctx.config.data_dir.clone();
        let session = call.session().await?;
        if matches!(action, Action::Switch | Action::Close) {
            // The tab named may be a popup opened since the last call.
            session.sync_tabs().await?;
        }
        let mut arrival = None;
        let mut link = None;
        let mut har = None;
        match action {
            Action::List => {}
            Action::Har => {
                let saved = session.save_har(&data_dir, args.tab.as_deref()).await?;
                call.wrote(saved.path.clone());
                har = Some(saved);
            }
            Action::Live => {
                // Something to show the person.
                session.active_tab().await?;
                link = Some(call.live_link()?);
            }
            Action::New => {
                let url = args.url.as_deref().map(checked_url).transpose()?;
                let previous = session.active_id().map(str::to_string);
                let tab = session.open_tab().await?;
                if let Some(url) = url {
                    let id = tab.id.clone();
                    match tab.navigate(Destination::Url(url), None, deadline).await {
                        Ok(arrived) => arrival = Some(arrived),
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
        if let Some(saved) = &har {
            call.attach_file("application/har+json", saved.content.clone());
        }
        let session = call.session().await?;
        let identity = Some(session.identity().clone()).filter(|i| !i.is_default());
        Ok(TabsOutput {
            arrival,
            link,
            active: session.active_id().map(str::to_string),
            tabs: session.list_tabs().await?,
            identity,
            har,
        })
    }
}

/// A session's first call may say how it presents itself (`session_options`, action=new).
async fn create_with_options(
    call: &mut Call<'_>,
    args: &TabsArgs,
    action: Action,
) -> ToolResult<()> {
    let Some(identity) = args.session_options.clone() else {
        return Ok(());
    };
    if !matches!(action, Action::New) {
        return Err(ToolError::invalid(
            "field `session_options` goes with action=new",
        ));
    }
    let (browser, tenant) = (call.ctx.browser.clone(), call.tenant().clone());
    let name = call.session_name().clone();
    browser.create_with_identity(&tenant, &name, identity).await
}
