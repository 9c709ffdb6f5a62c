//! `browser_cookies`: save a logged-in session as a named profile, load it later, verify a login
//! (`ensure_login`), list/clear cookies, and import profiles from other tools.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::navigate::checked_url;
use super::{Call, Scope, SessionField, Tool};
use crate::browser::{Destination, SessionGuard};
use crate::error::{ToolError, ToolResult};
use crate::profiles::{self, CookieFormat, Profile, ProfileStore, SavedCookie};
use crate::tenancy::Tenant;
use crate::tenancy::files::FileRoots;

const GUIDE: &str = "browser_cookies keeps logins: export saves the session's cookies and \
localStorage as profile `name`; ensure_login checks `check` (url + text/selector/not_text/\
url_contains) and loads the profile only if needed; load, list, clear and import (Playwright \
storageState, cookies.txt, JSON cookie arrays) are also there.";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CookiesArgs {
    pub action: Action,
    /// Profile.
    pub name: Option<String>,
    /// Account label.
    pub account: Option<String>,
    /// list: for this URL.
    pub url: Option<String>,
    /// list/clear: this domain only.
    pub domain: Option<String>,
    /// ensure_login: url, text, selector, not_text, url_contains.
    #[schemars(extend("x-compact" = true))]
    pub check: Option<LoginCheck>,
    /// import: auto-detected.
    pub format: Option<Format>,
    /// import: the file content.
    pub content: Option<String>,
    /// import: a file in files.root.
    pub path: Option<String>,
    /// load: open its start URL.
    pub auto_navigate: Option<bool>,
    /// list: unmask.
    pub show_values: Option<bool>,
    pub session: Option<SessionField>,
}

shared_fields!(CookiesArgs { session });

/// The logged-in test: open `url`, then every given condition must hold.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoginCheck {
    /// Page to open.
    pub url: String,
    /// Text shown when logged in.
    pub text: Option<String>,
    /// CSS selector present when logged in.
    pub selector: Option<String>,
    /// Text shown when logged out.
    pub not_text: Option<String>,
    /// In the final URL when logged in.
    pub url_contains: Option<String>,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Export,
    Load,
    EnsureLogin,
    List,
    Clear,
    Import,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    StorageState,
    Netscape,
    Json,
}

/// What each action reports, tagged with the action.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum CookiesOutput {
    Export(Saved),
    Import(Saved),
    Load(Loaded),
    /// Whether the session is logged in, and what was done to get there.
    EnsureLogin {
        logged_in: bool,
        reason: String,
        /// The steps taken.
        did: Vec<String>,
        /// Cookies of the loaded profile that had expired.
        #[serde(skip_serializing_if = "Option::is_none")]
        expired: Option<Vec<String>>,
    },
    /// The session's cookies (values masked unless show_values).
    List {
        count: usize,
        cookies: Vec<ListedCookie>,
    },
    /// How many cookies were removed.
    Clear {
        removed: usize,
    },
}

/// export and import: the profile written.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Saved {
    /// Where the profile went: its file, or `postgresql:profiles/<name>` with a database.
    saved: String,
    cookies: usize,
    /// export: how many cookies are httpOnly.
    #[serde(skip_serializing_if = "Option::is_none")]
    http_only: Option<usize>,
    /// Origins whose localStorage was kept.
    origins: Vec<String>,
    /// export with format=storage_state: the profile as Playwright storageState JSON.
    #[serde(skip_serializing_if = "Option::is_none")]
    storage_state: Option<Value>,
}

/// load: what went into the session.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Loaded {
    profile: String,
    /// Live cookies loaded.
    loaded: usize,
    /// Expired cookies left out, as `name (domain)`.
    expired: Vec<String>,
    /// Origins whose localStorage was restored.
    origins: usize,
    /// auto_navigate: the start URL opened.
    #[serde(skip_serializing_if = "Option::is_none")]
    navigated_to: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<i64>,
}

/// A cookie as `list` shows it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ListedCookie {
    name: String,
    value: String,
    domain: String,
    path: String,
    expires: Option<f64>,
    http_only: bool,
    secure: bool,
    same_site: Option<String>,
}

pub struct Cookies;

#[async_trait]
impl Tool for Cookies {
    type Args = CookiesArgs;
    type Output = CookiesOutput;
    const NAME: &'static str = "browser_cookies";
    const GUIDE: &'static str = GUIDE;
    const EXAMPLE: &'static str = r#"{"action": "ensure_login", "name": "work", "check": {"url": "https://example.com/account", "not_text": "Sign in"}}"#;
    const SCOPE: Scope = Scope::Browser;
    const TITLE: &'static str = "Logins and cookies";
    const EFFECTS: crate::tools::Effects = crate::tools::Effects {
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: true,
    };
    const DESCRIPTION: &'static str =
        "Saved logins: export, load, ensure_login, list, clear, import.";

    fn acts(args: &CookiesArgs) -> bool {
        args.action != Action::List
    }

    async fn run(&self, call: &mut Call<'_>, args: CookiesArgs) -> ToolResult<CookiesOutput> {
        let store = call.ctx.profiles.of(call.tenant());
        if let Some(name) = &args.name {
            ProfileStore::check_name(name)?;
        }
        let ends = call.ends();
        Ok(match args.action {
            // Import only writes a file: no session is opened for it.
            Action::Import => {
                let max = call.ctx.config.max_profile_cookies;
                import(&store, (&call.ctx.files, call.tenant()), &args, max).await?
            }
            Action::Export => export(&store, call.session().await?, &args).await?,
            Action::Load => {
                let profile = store.load(required(&args.name, "name", "load")?).await?;
                let session = call.session().await?;
                let loaded = load(session, &profile).await?;
                match (&profile.start_url, args.auto_navigate.unwrap_or(false)) {
                    (Some(url), true) => {
                        let tab = session.active_tab().await?;
                        let destination = Destination::Url(url.clone());
                        let left = ends.saturating_duration_since(Instant::now());
                        let arrival = tab.navigate(destination, None, left).await?;
                        CookiesOutput::Load(Loaded {
                            navigated_to: Some(url.clone()),
                            status: arrival.status,
                            ..loaded
                        })
                    }
                    _ => CookiesOutput::Load(loaded),
                }
            }
            Action::EnsureLogin => {
                let session = call.session().await?;
                let left = ends.saturating_duration_since(Instant::now());
                ensure_login(&store, session, &args, left).await?
            }
            Action::List => list(call.session().await?, &args).await?,
            Action::Clear => CookiesOutput::Clear {
                removed: call
                    .session()
                    .await?
                    .clear_cookies(args.domain.as_deref())
                    .await?,
            },
        })
    }
}

fn required<'a>(value: &'a Option<String>, field: &str, action: &str) -> ToolResult<&'a str> {
    value.as_deref().filter(|v| !v.is_empty()).ok_or_else(|| {
        ToolError::invalid(format!("field `{field}` is required for action={action}"))
    })
}

async fn export(
    store: &ProfileStore,
    session: &mut SessionGuard,
    args: &CookiesArgs,
) -> ToolResult<CookiesOutput> {
    let name = required(&args.name, "name", "export")?;
    let cookies = session.cookies().await?;
    let origins = session.local_storage().await;
    let start_url = match session.active_id() {
        Some(_) => {
            let url = session.active_tab().await?.url().await;
            url.starts_with("http").then_some(url)
        }
        None => None,
    };
    let profile = Profile {
        name: name.to_string(),
        account: args.account.clone(),
        saved_at: profiles::now_secs() as u64,
        start_url,
        cookies,
        origins,
    };
    Ok(CookiesOutput::Export(Saved {
        saved: store.save(&profile).await?,
        cookies: profile.cookies.len(),
        http_only: Some(profile.cookies.iter().filter(|c| c.http_only).count()),
        origins: origins_of(&profile),
        storage_state: (args.format == Some(Format::StorageState))
            .then(|| profiles::to_storage_state(&profile)),
    }))
}

fn origins_of(profile: &Profile) -> Vec<String> {
    profile.origins.iter().map(|o| o.origin.clone()).collect()
}

/// Puts a profile into the session: live cookies and localStorage; expired cookies are
/// reported, not loaded.
async fn load(session: &mut SessionGuard, profile: &Profile) -> ToolResult<Loaded> {
    let now = profiles::now_secs();
    let (expired, live): (Vec<&SavedCookie>, Vec<&SavedCookie>) =
        profile.cookies.iter().partition(|c| c.is_expired(now));
    let live: Vec<SavedCookie> = live.into_iter().cloned().collect();
    session.set_cookies(&live).await?;
    session.restore_local_storage(&profile.origins).await?;
    Ok(Loaded {
        profile: profile.name.clone(),
        loaded: live.len(),
        expired: expired
            .iter()
            .map(|c| format!("{} ({})", c.name, c.domain))
            .collect(),
        origins: profile.origins.len(),
        navigated_to: None,
        status: None,
    })
}

async fn ensure_login(
    store: &ProfileStore,
    session: &mut SessionGuard,
    args: &CookiesArgs,
    timeout: Duration,
) -> ToolResult<CookiesOutput> {
    let check = args
        .check
        .as_ref()
        .ok_or_else(|| ToolError::invalid("field `check` is required for action=ensure_login"))?;
    let url = checked_url(&check.url)?;
    if check.text.is_none()
        && check.selector.is_none()
        && check.not_text.is_none()
        && check.url_contains.is_none()
    {
        return Err(ToolError::invalid(
            "field `check` needs at least one of text, selector, not_text, url_contains",
        ));
    }
    let mut did = vec![format!("opened {url}")];
    let (logged_in, reason) = run_check(session, &url, check, timeout).await?;
    if logged_in {
        did.push("already logged in; nothing loaded".into());
        return Ok(CookiesOutput::EnsureLogin {
            logged_in,
            reason,
            did,
            expired: None,
        });
    }
    let Some(name) = args.name.as_deref() else {
        return Ok(CookiesOutput::EnsureLogin {
            logged_in,
            reason: format!("{reason}; no profile `name` to load"),
            did,
            expired: None,
        });
    };
    let profile = store.load(name).await?;
    let loaded = load(session, &profile).await?;
    did.push(format!("loaded profile {name} ({} cookies)", loaded.loaded));
    let (logged_in, reason_after) = run_check(session, &url, check, timeout).await?;
    did.push(format!("opened {url} again"));
    let reason = if logged_in {
        reason_after
    } else if !loaded.expired.is_empty() {
        let expired = serde_json::to_string(&loaded.expired).unwrap_or_default();
        format!("{reason_after}; the profile's cookies have expired: {expired}")
    } else {
        format!(
            "{reason_after}; the profile did not log the session in (outdated or for another account?)"
        )
    };
    Ok(CookiesOutput::EnsureLogin {
        logged_in,
        reason,
        did,
        expired: Some(loaded.expired),
    })
}

/// Opens the check URL and evaluates the conditions. Returns (logged in, why).
async fn run_check(
    session: &mut SessionGuard,
    url: &str,
    check: &LoginCheck,
    timeout: Duration,
) -> ToolResult<(bool, String)> {
    let tab = session.active_tab().await?;
    // Plain readiness, not wait_for: a logged-out page would make wait_for run to the timeout.
    tab.navigate(Destination::Url(url.to_string()), None, timeout)
        .await?;
    let mut failed = tab
        .unmet_conditions(
            check.text.as_deref(),
            check.selector.as_deref(),
            check.not_text.as_deref(),
        )
        .await?;
    let final_url = tab.url().await;
    if let Some(part) = &check.url_contains
        && !final_url.contains(part.as_str())
    {
        failed.push(format!("URL {final_url} does not contain {part:?}"));
    }
    Ok(if failed.is_empty() {
        (true, "all check conditions hold".to_string())
    } else {
        (false, failed.join("; "))
    })
}

async fn list(session: &SessionGuard, args: &CookiesArgs) -> ToolResult<CookiesOutput> {
    let host = match &args.url {
        Some(url) => Some(
            url::Url::parse(url)
                .ok()
                .and_then(|u| u.host_str().map(str::to_string))
                .ok_or_else(|| ToolError::invalid(format!("field `url`: {url:?} is not a URL")))?,
        ),
        None => None,
    };
    let show = args.show_values.unwrap_or(false);
    let cookies: Vec<ListedCookie> = session
        .cookies()
        .await?
        .into_iter()
        .filter(|c| {
            args.domain
                .as_deref()
                .is_none_or(|d| crate::browser::domain_matches(&c.domain, d))
        })
        .filter(|c| {
            host.as_deref()
                .is_none_or(|h| crate::browser::domain_matches(h, &c.domain))
        })
        .map(|c| ListedCookie {
            value: if show {
                c.value
            } else {
                format!("<{} chars hidden>", c.value.chars().count())
            },
            name: c.name,
            domain: c.domain,
            path: c.path,
            expires: c.expires,
            http_only: c.http_only,
            secure: c.secure,
            same_site: c.same_site,
        })
        .collect();
    Ok(CookiesOutput::List {
        count: cookies.len(),
        cookies,
    })
}

/// Imports a file of at most `max` cookies (origins, localStorage entries) as a profile.
async fn import(
    store: &ProfileStore,
    (files, tenant): (&FileRoots, &Tenant),
    args: &CookiesArgs,
    max: usize,
) -> ToolResult<CookiesOutput> {
    let name = required(&args.name, "name", "import")?;
    let content = match (&args.content, &args.path) {
        (Some(content), None) => content.clone(),
        (None, Some(path)) => String::from_utf8(files.read(tenant, path, "path").await?)
            .map_err(|_| ToolError::invalid("field `path`: the file is not UTF-8 text"))?,
        _ => {
            return Err(ToolError::invalid(
                "import needs exactly one of `content` or `path`",
            ));
        }
    };
    let format = match args.format {
        Some(Format::StorageState) => CookieFormat::StorageState,
        Some(Format::Netscape) => CookieFormat::Netscape,
        Some(Format::Json) => CookieFormat::JsonArray,
        None => profiles::detect_format(&content),
    };
    // Parse fully before writing: a malformed or oversized file leaves an existing profile
    // untouched.
    let (cookies, origins) = profiles::parse_import(&content, format, max)?;
    let profile = Profile {
        name: name.to_string(),
        account: args.account.clone(),
        saved_at: profiles::now_secs() as u64,
        start_url: None,
        cookies,
        origins,
    };
    Ok(CookiesOutput::Import(Saved {
        saved: store.save(&profile).await?,
        cookies: profile.cookies.len(),
        http_only: None,
        origins: origins_of(&profile),
        storage_state: None,
    }))
}
