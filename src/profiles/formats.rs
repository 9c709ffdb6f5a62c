//! Import and export formats of a profile: Playwright storageState, Netscape cookies.txt and
//! browser-extension JSON cookie arrays. An import is counted before it is parsed: one with
//! more cookies, origins or localStorage entries than a profile takes is refused without
//! building them.

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};

use super::{OriginStorage, Profile, SavedCookie};
use crate::error::{ErrorCode, ToolError, ToolResult};

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

/// Parses an import of at most `max` cookies (and as many origins and localStorage entries)
/// into cookies and origins, naming the line or field at fault.
pub fn parse_import(
    content: &str,
    format: CookieFormat,
    max: usize,
) -> ToolResult<(Vec<SavedCookie>, Vec<OriginStorage>)> {
    within_limit(content, format, max)?;
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

/// The shape of a storageState, its entries counted and not kept.
#[derive(Deserialize)]
struct StateShape {
    #[serde(default)]
    cookies: Vec<IgnoredAny>,
    #[serde(default)]
    origins: Vec<OriginShape>,
}

#[derive(Deserialize)]
struct OriginShape {
    #[serde(default, rename = "localStorage")]
    local_storage: Vec<IgnoredAny>,
}

/// Refuses an import that holds more than `max` cookies, origins or localStorage entries (all
/// origins together), counting them without building them. A file that does not have the
/// format's shape passes: the parser names what is wrong with it.
fn within_limit(content: &str, format: CookieFormat, max: usize) -> ToolResult<()> {
    let counts = match format {
        CookieFormat::Netscape => {
            let lines = content.lines().filter(|line| {
                let line = line.strip_prefix("#HttpOnly_").unwrap_or(line);
                !line.trim().is_empty() && !line.starts_with('#')
            });
            vec![("cookies", lines.count())]
        }
        CookieFormat::JsonArray => match serde_json::from_str::<Vec<IgnoredAny>>(content) {
            Ok(cookies) => vec![("cookies", cookies.len())],
            Err(_) => return Ok(()),
        },
        CookieFormat::StorageState => match serde_json::from_str::<StateShape>(content) {
            Ok(state) => vec![
                ("cookies", state.cookies.len()),
                ("origins", state.origins.len()),
                (
                    "localStorage entries",
                    state.origins.iter().map(|o| o.local_storage.len()).sum(),
                ),
            ],
            Err(_) => return Ok(()),
        },
    };
    match counts.into_iter().find(|(_, count)| *count > max) {
        Some((what, count)) => Err(ToolError::new(
            ErrorCode::Limit,
            format!("import: the file holds {count} {what}, more than the {max} a profile takes"),
        )
        .with_hint(format!(
            "import only the sites the task needs: split the file into profiles of at most \
             {max} {what} each (nothing was saved; the operator may raise max_profile_cookies)"
        ))),
        None => Ok(()),
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
        let (cookies, origins) = parse_import(&text, CookieFormat::StorageState, 10).unwrap();
        assert_eq!(cookies, p.cookies);
        assert_eq!(origins, p.origins);
        let error = parse_import(
            r#"{"cookies": [{"name": "a"}]}"#,
            CookieFormat::StorageState,
            10,
        )
        .unwrap_err();
        assert!(error.message.contains("cookies[0]"), "{}", error.message);
    }

    #[test]
    fn imports_past_the_cap_are_refused_by_count_before_parsing() {
        let line = "example.com\tFALSE\t/\tFALSE\t0\tname\tvalue\n";
        let text = format!("# Netscape HTTP Cookie File\n\n{}", line.repeat(11));
        let error = parse_import(&text, CookieFormat::Netscape, 10).unwrap_err();
        assert_eq!(error.code, ErrorCode::Limit);
        assert!(
            error.message.contains("holds 11 cookies"),
            "{}",
            error.message
        );
        assert!(error.hint.contains("at most 10"), "{}", error.hint);
        let (cookies, _) = parse_import(&line.repeat(10), CookieFormat::Netscape, 10).unwrap();
        assert_eq!(cookies.len(), 10);

        let array = serde_json::to_string(&vec![json!({"name": "a"}); 11]).unwrap();
        let error = parse_import(&array, CookieFormat::JsonArray, 10).unwrap_err();
        assert!(
            error.message.contains("holds 11 cookies"),
            "{}",
            error.message
        );

        let entries: Vec<Value> = (0..6)
            .map(|i| json!({"name": i.to_string(), "value": "v"}))
            .collect();
        let origin = json!({"origin": "https://a.test", "localStorage": entries});
        let state = json!({"cookies": [], "origins": [origin, origin]}).to_string();
        let error = parse_import(&state, CookieFormat::StorageState, 10).unwrap_err();
        assert!(
            error.message.contains("holds 12 localStorage entries"),
            "{}",
            error.message
        );
        // A file of the wrong shape is the parser's to name.
        let error = parse_import("{\"cookies\": 3}", CookieFormat::StorageState, 10).unwrap_err();
        assert_eq!(error.code, ErrorCode::InvalidArgument);
    }
}
