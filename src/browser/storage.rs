//! A session's cookies (all of its browser context, httpOnly included) and the localStorage of
//! its open origins: read, set, clear, and restore before a page of the origin loads.

use crate::sync::Locked;
use chromiumoxide::cdp::browser_protocol::network::{CookieParam, CookieSameSite, TimeSinceEpoch};
use chromiumoxide::cdp::browser_protocol::page::AddScriptToEvaluateOnNewDocumentParams;
use chromiumoxide::cdp::browser_protocol::storage::{
    ClearCookiesParams, GetCookiesParams, SetCookiesParams,
};
use serde::Deserialize;

use super::session::SessionGuard;
use super::tab::Tab;
use crate::error::{ToolError, ToolResult};
use crate::profiles::{OriginStorage, SavedCookie};

impl SessionGuard {
    /// Every cookie of the session, httpOnly and secure ones included.
    pub async fn cookies(&self) -> ToolResult<Vec<SavedCookie>> {
        let params = GetCookiesParams {
            browser_context_id: self.context_id(),
        };
        let response = self
            .browser()
            .cdp("reading cookies", self.browser().browser.execute(params))
            .await?;
        Ok(response
            .result
            .cookies
            .iter()
            .map(|c| SavedCookie {
                name: c.name.clone(),
                value: c.value.clone(),
                domain: c.domain.clone(),
                path: c.path.clone(),
                expires: (!c.session && c.expires > 0.0).then_some(c.expires),
                http_only: c.http_only,
                secure: c.secure,
                same_site: c.same_site.as_ref().map(|s| s.as_ref().to_string()),
            })
            .collect())
    }

    /// Adds cookies to the session.
    pub async fn set_cookies(&self, cookies: &[SavedCookie]) -> ToolResult<()> {
        if cookies.is_empty() {
            return Ok(());
        }
        let params = SetCookiesParams {
            cookies: cookies
                .iter()
                .map(cookie_param)
                .collect::<ToolResult<_>>()?,
            browser_context_id: self.context_id(),
        };
        self.browser()
            .cdp("setting cookies", self.browser().browser.execute(params))
            .await?;
        Ok(())
    }

    /// Removes the session's cookies, or only those of `domain` (and its subdomains).
    pub async fn clear_cookies(&self, domain: Option<&str>) -> ToolResult<usize> {
        let before = self.cookies().await?;
        let params = ClearCookiesParams {
            browser_context_id: self.context_id(),
        };
        self.browser()
            .cdp("clearing cookies", self.browser().browser.execute(params))
            .await?;
        let Some(domain) = domain else {
            return Ok(before.len());
        };
        let (removed, kept): (Vec<_>, Vec<_>) = before
            .into_iter()
            .partition(|c| domain_matches(&c.domain, domain));
        self.set_cookies(&kept).await?;
        Ok(removed.len())
    }

    /// localStorage of every origin open in the session's tabs.
    pub async fn local_storage(&mut self) -> Vec<OriginStorage> {
        let mut origins: Vec<OriginStorage> = Vec::new();
        for tab in self.tabs() {
            let read = "(() => { try { return { origin: location.origin, items: Object.entries(localStorage) }; } catch (e) { return null; } })()";
            let Ok(value) = tab.evaluate_raw(read).await else {
                continue;
            };
            #[derive(Deserialize)]
            struct Read {
                origin: String,
                items: Vec<(String, String)>,
            }
            let Ok(Some(read)) = serde_json::from_value::<Option<Read>>(value) else {
                continue;
            };
            if read.origin == "null"
                || read.items.is_empty()
                || origins.iter().any(|o| o.origin == read.origin)
            {
                continue;
            }
            origins.push(OriginStorage {
                origin: read.origin,
                local_storage: read.items,
            });
        }
        origins
    }

    /// Makes `origins`' localStorage appear before any script of those origins runs, in every
    /// tab of the session (present and future). Items the page already has are left alone.
    pub async fn restore_local_storage(&mut self, origins: &[OriginStorage]) -> ToolResult<()> {
        for origin in origins {
            let script = restore_script(origin);
            for tab in self.tabs() {
                tab.install_script(&script).await?;
                let _ = tab.evaluate_raw(&script).await;
            }
            self.remember_script(script);
        }
        Ok(())
    }
}

impl Tab {
    /// Runs `script` in every new document of this tab before the page's own scripts, frames
    /// attached from now on included.
    pub(crate) async fn install_script(&self, script: &str) -> ToolResult<()> {
        let params = AddScriptToEvaluateOnNewDocumentParams::new(script);
        self.cdp("installing a script", self.page.execute(params))
            .await?;
        self.scripts.locked().push(script.to_string());
        Ok(())
    }
}

fn restore_script(origin: &OriginStorage) -> String {
    let origin_json = serde_json::to_string(&origin.origin).unwrap_or_default();
    let items = serde_json::to_string(&origin.local_storage).unwrap_or_else(|_| "[]".into());
    format!(
        "(() => {{ if (location.origin !== {origin_json}) return; try {{ \
         for (const [k, v] of {items}) if (localStorage.getItem(k) === null) localStorage.setItem(k, v); \
         }} catch (e) {{}} }})();"
    )
}

/// Whether a cookie's domain is `domain` or one of its subdomains.
pub fn domain_matches(cookie_domain: &str, domain: &str) -> bool {
    let cookie = cookie_domain.trim_start_matches('.').to_ascii_lowercase();
    let wanted = domain.trim_start_matches('.').to_ascii_lowercase();
    cookie == wanted || cookie.ends_with(&format!(".{wanted}"))
}

fn cookie_param(cookie: &SavedCookie) -> ToolResult<CookieParam> {
    let mut param = CookieParam::new(cookie.name.clone(), cookie.value.clone());
    // A leading dot marks a domain cookie; without it the cookie belongs to that host only,
    // which CDP expresses with a URL instead of a domain.
    if cookie.domain.starts_with('.') {
        param.domain = Some(cookie.domain.clone());
    } else if cookie.domain.is_empty() {
        return Err(ToolError::invalid(format!(
            "cookie {:?} has no domain",
            cookie.name
        )));
    } else {
        let scheme = if cookie.secure { "https" } else { "http" };
        param.url = Some(format!("{scheme}://{}{}", cookie.domain, cookie.path));
    }
    param.path = Some(cookie.path.clone());
    param.secure = Some(cookie.secure);
    param.http_only = Some(cookie.http_only);
    param.expires = cookie.expires.map(TimeSinceEpoch::new);
    param.same_site = cookie.same_site.as_deref().and_then(|s| match s {
        "Strict" => Some(CookieSameSite::Strict),
        "Lax" => Some(CookieSameSite::Lax),
        "None" => Some(CookieSameSite::None),
        _ => None,
    });
    Ok(param)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_match_themselves_and_subdomains() {
        assert!(domain_matches(".example.com", "example.com"));
        assert!(domain_matches("www.example.com", "example.com"));
        assert!(!domain_matches("badexample.com", "example.com"));
    }
}
