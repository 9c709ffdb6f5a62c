//! `browser_cookies`: save a logged-in session as a named profile, load it later, verify a login
//! (`ensure_login`), list/clear cookies, and import profiles from other tools.

use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::navigate::checked_url;
use super::{Ctx, Tool, ToolOutput, session_name};
use crate::browser::profiles::{self, CookieFormat, Profile, ProfileStore, SavedCookie};
use crate::browser::{Destination, SessionGuard};
use crate::error::{ToolError, ToolResult};

const GUIDE: &str = "browser_cookies keeps logins: export saves the session's cookies and \
localStorage as profile `name`; ensure_login checks `check` (url + text/selector/not_text/\
url_contains) and loads the profile only if needed; load, list, clear and import (Playwright \
storageState, cookies.txt, JSON cookie arrays) are also there.";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CookiesArgs {
    /// What to do.
    pub action: Action,
    /// Saved profile name.
    pub name: Option<String>,
    /// Account label kept with the profile.
    pub account: Option<String>,
    /// list: only cookies sent to this URL's host.
    pub url: Option<String>,
    /// list/clear: only cookies of this domain.
    pub domain: Option<String>,
    /// ensure_login: how to tell the session is logged in.
    pub check: Option<LoginCheck>,
    /// import: detected by default. export: storage_state also returns the JSON.
    pub format: Option<Format>,
    /// import: the file content.
    pub content: Option<String>,
    /// import: a file to read instead.
    pub path: Option<String>,
    /// load: open the profile's start URL afterwards.
    pub auto_navigate: Option<bool>,
    /// list: show cookie values (masked by default).
    pub show_values: Option<bool>,
    /// Default "default".
    pub session: Option<String>,
}

/// The logged-in test: open `url`, then every given condition must hold.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoginCheck {
    /// Page to open.
    pub url: String,
    /// Text that appears when logged in.
    pub text: Option<String>,
    /// CSS selector present when logged in.
    pub selector: Option<String>,
    /// Text that appears when logged out.
    pub not_text: Option<String>,
    /// Part of the final URL when logged in.
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

pub struct Cookies;

#[async_trait]
impl Tool for Cookies {
    type Args = CookiesArgs;
    const NAME: &'static str = "browser_cookies";
    const GUIDE: &'static str = GUIDE;
    const DESCRIPTION: &'static str = "Saved logins: export the session (cookies incl. httpOnly, localStorage) as a profile, load it, ensure_login (check, load if needed, recheck), list/clear cookies, import.";

    async fn run(&self, ctx: &Ctx, args: CookiesArgs) -> ToolResult<ToolOutput> {
        let key = match std::env::var(profiles::PROFILE_KEY_ENV) {
            Ok(text) if !text.is_empty() => Some(profiles::parse_key(&text)?),
            _ => None,
        };
        let store = ProfileStore::new(&ctx.config.data_dir, key);
        if let Some(name) = &args.name {
            ProfileStore::check_name(name)?;
        }
        if args.action == Action::Import {
            return import(&store, &args).map(ToolOutput::json);
        }
        let timeout = Duration::from_millis(ctx.config.navigation_timeout_ms);
        let mut session = ctx.browser.session(session_name(&args.session)).await?;
        let mut result = match args.action {
            Action::Export => export(&store, &mut session, &args).await?,
            Action::Load => {
                let profile = store.load(required(&args.name, "name", "load")?)?;
                let mut loaded = load(&mut session, &profile).await?;
                if args.auto_navigate.unwrap_or(false)
                    && let Some(url) = &profile.start_url
                {
                    let tab = session.active_tab().await?;
                    let arrival = tab
                        .navigate(Destination::Url(url.clone()), None, timeout)
                        .await?;
                    loaded["navigated_to"] = json!(url);
                    loaded["status"] = json!(arrival.status);
                }
                loaded
            }
            Action::EnsureLogin => ensure_login(&store, &mut session, &args, timeout).await?,
            Action::List => list(&session, &args).await?,
            Action::Clear => {
                let removed = session.clear_cookies(args.domain.as_deref()).await?;
                json!({ "removed": removed })
            }
            Action::Import => unreachable!("handled above"),
        };
        result["session"] = json!(session.name());
        Ok(ToolOutput::json(result))
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
) -> ToolResult<Value> {
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
    let path = store.save(&profile)?;
    let mut result = json!({
        "saved": path,
        "cookies": profile.cookies.len(),
        "http_only": profile.cookies.iter().filter(|c| c.http_only).count(),
        "origins": profile.origins.iter().map(|o| &o.origin).collect::<Vec<_>>(),
    });
    if args.format == Some(Format::StorageState) {
        result["storage_state"] = profiles::to_storage_state(&profile);
    }
    Ok(result)
}

/// Puts a profile into the session: live cookies and localStorage; expired cookies are
/// reported, not loaded.
async fn load(session: &mut SessionGuard, profile: &Profile) -> ToolResult<Value> {
    let now = profiles::now_secs();
    let (expired, live): (Vec<&SavedCookie>, Vec<&SavedCookie>) =
        profile.cookies.iter().partition(|c| c.is_expired(now));
    let live: Vec<SavedCookie> = live.into_iter().cloned().collect();
    session.set_cookies(&live).await?;
    session.restore_local_storage(&profile.origins).await?;
    Ok(json!({
        "profile": profile.name,
        "loaded": live.len(),
        "expired": expired.iter().map(|c| format!("{} ({})", c.name, c.domain)).collect::<Vec<_>>(),
        "origins": profile.origins.len(),
    }))
}

async fn ensure_login(
    store: &ProfileStore,
    session: &mut SessionGuard,
    args: &CookiesArgs,
    timeout: Duration,
) -> ToolResult<Value> {
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
        return Ok(json!({ "logged_in": true, "reason": reason, "did": did }));
    }
    let Some(name) = args.name.as_deref() else {
        return Ok(
            json!({ "logged_in": false, "reason": format!("{reason}; no profile `name` to load"), "did": did }),
        );
    };
    let profile = store.load(name)?;
    let loaded = load(session, &profile).await?;
    did.push(format!(
        "loaded profile {name} ({} cookies)",
        loaded["loaded"]
    ));
    let (logged_in, reason_after) = run_check(session, &url, check, timeout).await?;
    did.push(format!("opened {url} again"));
    let expired = loaded["expired"].clone();
    let reason = if logged_in {
        reason_after
    } else if expired.as_array().is_some_and(|e| !e.is_empty()) {
        format!("{reason_after}; the profile's cookies have expired: {expired}")
    } else {
        format!(
            "{reason_after}; the profile did not log the session in (outdated or for another account?)"
        )
    };
    Ok(json!({ "logged_in": logged_in, "reason": reason, "did": did, "expired": expired }))
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

async fn list(session: &SessionGuard, args: &CookiesArgs) -> ToolResult<Value> {
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
    let cookies: Vec<Value> = session
        .cookies()
        .await?
        .into_iter()
        .filter(|c| args.domain.as_deref().is_none_or(|d| crate::browser::domain_matches(&c.domain, d)))
        .filter(|c| host.as_deref().is_none_or(|h| crate::browser::domain_matches(h, &c.domain)))
        .map(|c| {
            let value = if show { c.value.clone() } else { format!("<{} chars hidden>", c.value.chars().count()) };
            json!({
                "name": c.name, "value": value, "domain": c.domain, "path": c.path,
                "expires": c.expires, "http_only": c.http_only, "secure": c.secure, "same_site": c.same_site,
            })
        })
        .collect();
    Ok(json!({ "count": cookies.len(), "cookies": cookies }))
}

fn import(store: &ProfileStore, args: &CookiesArgs) -> ToolResult<Value> {
    let name = required(&args.name, "name", "import")?;
    let content = match (&args.content, &args.path) {
        (Some(content), None) => content.clone(),
        (None, Some(path)) => std::fs::read_to_string(path)
            .map_err(|e| ToolError::invalid(format!("field `path`: cannot read {path}: {e}")))?,
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
    // Parse fully before writing: a malformed file leaves an existing profile untouched.
    let (cookies, origins) = profiles::parse_import(&content, format)?;
    let profile = Profile {
        name: name.to_string(),
        account: args.account.clone(),
        saved_at: profiles::now_secs() as u64,
        start_url: None,
        cookies,
        origins,
    };
    let path = store.save(&profile)?;
    Ok(json!({ "saved": path, "cookies": profile.cookies.len(), "origins": profile.origins.len() }))
}
