//! How a session presents itself to sites: user agent, language, time zone, position, window
//! size, extra request headers and colour scheme — given when the session is created, applied to
//! every tab of its browser context (CDP emulation per tab, the geolocation permission per
//! context), so two sessions side by side can look like two different people.

use std::collections::BTreeMap;

use chromiumoxide::cdp::browser_protocol::browser::{
    BrowserContextId, GetVersionParams, PermissionDescriptor, PermissionSetting,
    SetPermissionParams,
};
use chromiumoxide::cdp::browser_protocol::emulation::{
    MediaFeature, SetDeviceMetricsOverrideParams, SetEmulatedMediaParams,
    SetGeolocationOverrideParams, SetLocaleOverrideParams, SetTimezoneOverrideParams,
    SetUserAgentOverrideParams,
};
use chromiumoxide::cdp::browser_protocol::network::{Headers, SetExtraHttpHeadersParams};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::pool::BrowserHandle;
use super::tab::Tab;
use crate::egress::Upstream;
use crate::error::{ToolError, ToolResult};

/// A session's identity; every part is optional and defaults to the browser's own.
#[derive(
    Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema, utoipa::ToSchema,
)]
#[serde(deny_unknown_fields)]
pub struct Identity {
    /// The `User-Agent` header and `navigator.userAgent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
    /// A BCP 47 language tag (`de-DE`): `navigator.language`, `Accept-Language`, `Intl`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locale: Option<String>,
    /// An IANA time zone (`Europe/Berlin`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// Where `navigator.geolocation` says the browser is (the permission is granted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub geolocation: Option<Geolocation>,
    /// The window's size in CSS pixels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub viewport: Option<ViewportSize>,
    /// Headers sent with every request of the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_headers: Option<BTreeMap<String, String>>,
    /// `prefers-color-scheme`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub color_scheme: Option<ColorScheme>,
    /// The session's own upstream proxy (`http://user:pass@host:port`, `socks5://…`), instead
    /// of the service's; listed without its credentials.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "without_credentials"
    )]
    pub proxy: Option<String>,
}

fn without_credentials<S: serde::Serializer>(
    proxy: &Option<String>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let shown = proxy
        .as_deref()
        .map(|p| Upstream::parse(p, &[]).map_or_else(|_| "(invalid)".to_string(), |u| u.address()));
    shown.serialize(serializer)
}

#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize, JsonSchema, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Geolocation {
    pub latitude: f64,
    pub longitude: f64,
    /// Metres (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accuracy: Option<f64>,
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema, utoipa::ToSchema,
)]
#[serde(deny_unknown_fields)]
pub struct ViewportSize {
    pub width: u32,
    pub height: u32,
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema, utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ColorScheme {
    Light,
    Dark,
}

impl Identity {
    pub fn is_default(&self) -> bool {
        *self == Identity::default()
    }

    /// Checks what can be checked before a browser sees it.
    pub fn check(&self) -> ToolResult<()> {
        let text = |value: &Option<String>, field: &str, max: usize| match value {
            Some(v) if v.trim().is_empty() || v.len() > max || v.chars().any(char::is_control) => {
                Err(ToolError::invalid(format!(
                    "field `{field}` must be 1-{max} characters without control characters"
                )))
            }
            _ => Ok(()),
        };
        text(&self.user_agent, "user_agent", 512)?;
        text(&self.locale, "locale", 35)?;
        text(&self.timezone, "timezone", 64)?;
        if let Some(place) = &self.geolocation
            && (!(-90.0..=90.0).contains(&place.latitude)
                || !(-180.0..=180.0).contains(&place.longitude)
                || place.accuracy.is_some_and(|a| !(0.0..=1e7).contains(&a)))
        {
            return Err(ToolError::invalid(
                "field `geolocation` needs latitude -90..90, longitude -180..180, accuracy ≥ 0",
            ));
        }
        if let Some(size) = self.viewport
            && !((100..=8192).contains(&size.width) && (100..=8192).contains(&size.height))
        {
            return Err(ToolError::invalid(
                "field `viewport` needs width and height between 100 and 8192",
            ));
        }
        self.upstream()?;
        for (name, value) in self.extra_headers.iter().flatten() {
            let valid = reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_ok()
                && reqwest::header::HeaderValue::from_str(value).is_ok();
            if !valid {
                return Err(ToolError::invalid(format!(
                    "field `extra_headers`: {name:?} is not a valid header"
                )));
            }
        }
        Ok(())
    }

    /// The session's own proxy, if it has one.
    pub fn upstream(&self) -> ToolResult<Option<Upstream>> {
        self.proxy
            .as_deref()
            .map(|proxy| Upstream::parse(proxy, &[]))
            .transpose()
            .map_err(|e| ToolError::invalid(format!("field `proxy`: {e}")))
    }

    /// What the whole context needs: the geolocation permission, when a position is set.
    pub(super) async fn apply_to_context(
        &self,
        browser: &BrowserHandle,
        context: &BrowserContextId,
    ) -> ToolResult<()> {
        if self.geolocation.is_none() {
            return Ok(());
        }
        let grant = SetPermissionParams {
            permission: PermissionDescriptor {
                name: "geolocation".into(),
                sysex: None,
                user_visible_only: None,
                allow_without_sanitization: None,
                allow_without_gesture: None,
                pan_tilt_zoom: None,
            },
            setting: PermissionSetting::Granted,
            origin: None,
            embedded_origin: None,
            browser_context_id: Some(context.clone()),
        };
        browser
            .cdp(
                "granting the geolocation permission",
                browser.browser.execute(grant),
            )
            .await?;
        Ok(())
    }
}

impl Tab {
    /// Presents the tab as `identity` says; a part the browser refuses (an unknown time zone)
    /// is an invalid argument.
    pub(super) async fn present_as(&self, identity: &Identity) -> ToolResult<()> {
        if identity.is_default() {
            return Ok(());
        }
        let refused = |field: &'static str| {
            move |error: ToolError| {
                ToolError::invalid(format!("field `{field}`: {}", error.message))
                    .with_hint("create the session again with a valid value")
            }
        };
        if identity.user_agent.is_some() || identity.locale.is_some() {
            self.set_user_agent(identity).await?;
        }
        if let Some(locale) = &identity.locale {
            let params = SetLocaleOverrideParams {
                locale: Some(locale.clone()),
            };
            self.cdp("setting the locale", self.page.execute(params))
                .await
                .map_err(refused("locale"))?;
        }
        if let Some(zone) = &identity.timezone {
            let params = SetTimezoneOverrideParams::new(zone.clone());
            self.cdp("setting the time zone", self.page.execute(params))
                .await
                .map_err(refused("timezone"))?;
        }
        if let Some(place) = identity.geolocation {
            let params = SetGeolocationOverrideParams {
                latitude: Some(place.latitude),
                longitude: Some(place.longitude),
                accuracy: Some(place.accuracy.unwrap_or(10.0)),
                ..Default::default()
            };
            self.cdp("setting the position", self.page.execute(params))
                .await?;
        }
        if let Some(size) = identity.viewport {
            let params = SetDeviceMetricsOverrideParams::new(
                i64::from(size.width),
                i64::from(size.height),
                1.0,
                false,
            );
            self.cdp("setting the window size", self.page.execute(params))
                .await?;
        }
        if let Some(headers) = &identity.extra_headers {
            let headers = serde_json::to_value(headers).unwrap_or_default();
            let params = SetExtraHttpHeadersParams::new(Headers::new(headers));
            self.cdp("setting extra headers", self.page.execute(params))
                .await?;
        }
        if let Some(scheme) = identity.color_scheme {
            let value = match scheme {
                ColorScheme::Light => "light",
                ColorScheme::Dark => "dark",
            };
            let params = SetEmulatedMediaParams {
                media: None,
                features: Some(vec![MediaFeature::new("prefers-color-scheme", value)]),
            };
            self.cdp("setting the colour scheme", self.page.execute(params))
                .await?;
        }
        Ok(())
    }

    /// The identity's user agent (else the browser's own) with its locale's `Accept-Language`.
    async fn set_user_agent(&self, identity: &Identity) -> ToolResult<()> {
        let user_agent = match &identity.user_agent {
            Some(agent) => agent.clone(),
            None => {
                self.cdp(
                    "reading the user agent",
                    self.page.execute(GetVersionParams {}),
                )
                .await?
                .result
                .user_agent
            }
        };
        let mut params = SetUserAgentOverrideParams::new(user_agent);
        params.accept_language = identity.locale.clone();
        self.cdp("setting the user agent", self.page.execute(params))
            .await?;
        Ok(())
    }
}
