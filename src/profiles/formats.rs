//! Import and export formats of a profile: Playwright storageState, Netscape cookies.txt and
//! browser-extension JSON cookie arrays.

use serde_json::{Value, json};

use super::{OriginStorage, Profile, SavedCookie};
use crate::error::{ToolError, ToolResult};

/// Formats a profile can be imported from (and exported to, for storageState).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CookieFormat {
    StorageState,
    Netscape,
    JsonArray,
}

/// Guesses the format of an import from its first non-blank character and shape.
pub fn detect_format(content: &str) -> CookieFormat {
    let trimmed = content.trim_start();
    if trimmed.starts_with('[') {
        CookieFormat::JsonArray
    } else if trimmed.starts_with('{') {
        CookieFormat::StorageState
    } else {
        CookieFormat::Netscape
    }
}

/// Parses an import into cookies and origins, naming the line or field at fault.
pub fn parse_import(
    content: &str,
    format: CookieFormat,
) -> ToolResult<(Vec<SavedCookie>, Vec<OriginStorage>)> {
    match format {
        CookieFormat::Netscape => parse_netscape(content).map(|c| (c, Vec::new())),
        CookieFormat::JsonArray => {
            let value: Value = serde_json::from_str(content)
                .map_err(|e| bad_import(format!("not valid JSON: {e}")))?;
            let items = value
                .as_array()
                .ok_or_else(|| bad_import("expected a JSON array of cookies".into()))?;
            let cookies = items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    json_cookie(item).map_err(|field| {
                        bad_import(format!("cookie {i}: field `{field}` is missing or invalid"))
                    })
                })
                .collect::<ToolResult<Vec<_>>>()?;
            Ok((cookies, Vec::new()))
        }
        CookieFormat::StorageState => parse_storage_state(content),
    }
}

fn bad_import(message: String) -> ToolError {
    ToolError::invalid(format!("import: {message}")).with_hint(
        "supported: Playwright storageState JSON, Netscape cookies.txt, a JSON array of cookies",
    )
}

/// Netscape cookies.txt: tab-separated `domain flag path secure expires name value`;
/// `#HttpOnly_` prefixes mark httpOnly cookies, other `#` lines are comments.
fn parse_netscape(content: &str) -> ToolResult<Vec<SavedCookie>> {
    let mut cookies = Vec::new();
    for (index, raw) in content.lines().enumerate() {
        let line_no = index + 1;
        let (line, http_only) = match raw.strip_prefix("#HttpOnly_") {
            Some(rest) => (rest, true),
            None => (raw, false),
        };
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        if fields.len() != 7 {
            return Err(bad_import(format!(
                "cookies.txt line {line_no}: expected 7 tab-separated fields, found {}",
                fields.len()
            )));
        }
        let expires: f64 = fields[4].trim().parse().map_err(|_| {
            bad_import(format!(
                "cookies.txt line {line_no}: expiry {:?} is not a number",
                fields[4]
            ))
        })?;
        cookies.push(SavedCookie {
            domain: fields[0].to_string(),
            path: fields[2].to_string(),
            secure: fields[3].eq_ignore_ascii_case("TRUE"),
            expires: (expires > 0.0).then_some(expires),
            name: fields[5].to_string(),
            value: fields[6].to_string(),
            http_only,
            same_site: None,
        });
    }
    Ok(cookies)
}

/// One cookie of a JSON array as browser extensions (and Playwright) write them.
fn json_cookie(item: &Value) -> Result<SavedCookie, &'static str> {
    let text = |key: &'static str| {
        item.get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or(key)
    };
    let host_only = item
        .get("hostOnly")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut domain = text("domain")?;
    if host_only {
        domain = domain.trim_start_matches('.').to_string();
    }
    let expires = item
        .get("expirationDate")
        .or_else(|| item.get("expires"))
        .and_then(Value::as_f64)
        .filter(|t| *t > 0.0);
    let same_site = item.get("sameSite").and_then(Value::as_str).and_then(|s| {
        match s.to_ascii_lowercase().as_str() {
            "strict" => Some("Strict".to_string()),
            "lax" => Some("Lax".to_string()),
            "none" | "no_restriction" => Some("None".to_string()),
            _ => None,
        }
    });
    Ok(SavedCookie {
        name: text("name")?,
        value: text("value")?,
        domain,
        path: text("path").unwrap_or_else(|_| "/".into()),
        expires,
        http_only: item
            .get("httpOnly")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        secure: item.get("secure").and_then(Value::as_bool).unwrap_or(false),
        same_site,
    })
}

fn parse_storage_state(content: &str) -> ToolResult<(Vec<SavedCookie>, Vec<OriginStorage>)> {
    let value: Value =
        serde_json::from_str(content).map_err(|e| bad_import(format!("not valid JSON: {e}")))?;
    let cookies = value
        .get("cookies")
        .and_then(Value::as_array)
        .ok_or_else(|| bad_import("storageState: field `cookies` must be an array".into()))?
        .iter()
        .enumerate()
        .map(|(i, c)| {
            json_cookie(c).map_err(|field| {
                bad_import(format!(
                    "storageState: cookies[{i}].{field} is missing or invalid"
                ))
            })
        })
        .collect::<ToolResult<Vec<_>>>()?;
    let mut origins = Vec::new();
    for (i, origin) in value
        .get("origins")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let name = origin
            .get("origin")
            .and_then(Value::as_str)
            .ok_or_else(|| bad_import(format!("storageState: origins[{i}].origin is missing")))?;
        let items = origin
            .get("localStorage")
            .and_then(Value::as_array)
            .ok_or_else(|| {
                bad_import(format!(
                    "storageState: origins[{i}].localStorage must be an array"
                ))
            })?;
        let mut local_storage = Vec::new();
        for (j, item) in items.iter().enumerate() {
            let get = |k: &str| item.get(k).and_then(Value::as_str).map(str::to_string);
            match (get("name"), get("value")) {
                (Some(n), Some(v)) => local_storage.push((n, v)),
                _ => {
                    return Err(bad_import(format!(
                        "storageState: origins[{i}].localStorage[{j}] needs name and value"
                    )));
                }
            }
        }
        origins.push(OriginStorage {
            origin: name.to_string(),
            local_storage,
        });
    }
    Ok((cookies, origins))
}

/// The profile as Playwright `storageState` JSON.
pub fn to_storage_state(profile: &Profile) -> Value {
    json!({
        "cookies": profile.cookies.iter().map(|c| json!({
            "name": c.name, "value": c.value, "domain": c.domain, "path": c.path,
            "expires": c.expires.unwrap_or(-1.0), "httpOnly": c.http_only, "secure": c.secure,
            "sameSite": c.same_site.clone().unwrap_or_else(|| "Lax".into()),
        })).collect::<Vec<_>>(),
        "origins": profile.origins.iter().map(|o| json!({
            "origin": o.origin,
            "localStorage": o.local_storage.iter().map(|(n, v)| json!({ "name": n, "value": v })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profiles::tests::profile;

    #[test]
    fn netscape_lines_parse_and_errors_name_the_line() {
        let text = "# Netscape HTTP Cookie File\n#HttpOnly_.example.com\tTRUE\t/\tTRUE\t2000000000\tsid\tabc\nexample.com\tFALSE\t/\tFALSE\t0\tpref\tdark\n";
        let cookies = parse_netscape(text).unwrap();
        assert_eq!(cookies.len(), 2);
        assert!(cookies[0].http_only && cookies[0].secure);
        assert_eq!(cookies[1].expires, None);
        let error = parse_netscape("ok\tline\n").unwrap_err();
        assert!(error.message.contains("line 1"), "{}", error.message);
    }

    #[test]
    fn storage_state_round_trips() {
        let mut p = profile("p");
        p.origins.push(OriginStorage {
            origin: "http://127.0.0.1:1".into(),
            local_storage: vec![("token".into(), "t".into())],
        });
        let text = to_storage_state(&p).to_string();
        assert_eq!(detect_format(&text), CookieFormat::StorageState);
        let (cookies, origins) = parse_import(&text, CookieFormat::StorageState).unwrap();
        assert_eq!(cookies, p.cookies);
        assert_eq!(origins, p.origins);
        let error = parse_import(
            r#"{"cookies": [{"name": "a"}]}"#,
            CookieFormat::StorageState,
        )
        .unwrap_err();
        assert!(error.message.contains("cookies[0]"), "{}", error.message);
    }
}
