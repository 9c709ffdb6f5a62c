//! Secrets hidden on the way out of a capture: credential headers, credentials in URLs,
//! password-like fields of form and JSON bodies, and whatever was typed into a password field
//! of the tab. `[network] redact = false` shows headers and fields as sent; typed passwords
//! stay hidden regardless.

use serde_json::Value;

pub(crate) const HIDDEN: &str = "[redacted]";

/// Headers whose values are credentials.
const SECRET_HEADERS: [&str; 6] = [
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "x-api-key",
    "x-auth-token",
];

/// What to hide: the operator's choice, and the tab's typed secrets.
pub(crate) struct Redactor<'a> {
    pub on: bool,
    pub secrets: &'a [String],
}

impl Redactor<'_> {
    pub(crate) fn header(&self, name: &str, value: &str) -> String {
        if self.on && SECRET_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            HIDDEN.to_string()
        } else {
            self.text(value)
        }
    }

    pub(crate) fn headers(&self, headers: &[(String, String)]) -> Vec<(String, String)> {
        headers
            .iter()
            .map(|(name, value)| (name.clone(), self.header(name, value)))
            .collect()
    }

    /// A URL without the password of its user info.
    pub(crate) fn url(&self, url: &str) -> String {
        let shown = match url::Url::parse(url) {
            Ok(mut parsed) if self.on && parsed.password().is_some() => {
                let _ = parsed.set_password(Some("redacted"));
                parsed.to_string()
            }
            _ => url.to_string(),
        };
        self.text(&shown)
    }

    /// Any text, without the tab's typed secrets.
    pub(crate) fn text(&self, text: &str) -> String {
        let mut shown = text.to_string();
        for secret in self.secrets {
            if shown.contains(secret.as_str()) {
                shown = shown.replace(secret.as_str(), HIDDEN);
            }
        }
        shown
    }

    /// A request body, its password-like fields hidden (form-encoded, JSON and multipart).
    pub(crate) fn body(&self, text: &str, content_type: &str) -> String {
        let shown = self.text(text);
        if !self.on {
            return shown;
        }
        let content_type = content_type.to_ascii_lowercase();
        if content_type.contains("x-www-form-urlencoded") {
            form(&shown)
        } else if content_type.contains("json") {
            match serde_json::from_str::<Value>(&shown) {
                Ok(mut value) => {
                    json(&mut value);
                    value.to_string()
                }
                Err(_) => shown,
            }
        } else if content_type.contains("multipart/form-data") {
            multipart(&shown)
        } else {
            shown
        }
    }
}

/// Whether a field's name says it holds a secret.
pub(crate) fn secret_field(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    [
        "pass",
        "pwd",
        "secret",
        "token",
        "credential",
        "apikey",
        "api_key",
    ]
    .iter()
    .any(|part| name.contains(part))
        || ["pin", "otp", "cvv", "cvc"].contains(&name.as_str())
}

fn form(body: &str) -> String {
    body.split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, _)) => {
                let decoded = percent_encoding::percent_decode_str(name).decode_utf8_lossy();
                if secret_field(&decoded.replace('+', " ")) {
                    format!("{name}={HIDDEN}")
                } else {
                    pair.to_string()
                }
            }
            None => pair.to_string(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

fn json(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                if secret_field(key) && !value.is_object() && !value.is_array() {
                    *value = Value::from(HIDDEN);
                } else {
                    json(value);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(json),
        _ => {}
    }
}

/// Multipart parts named like secrets lose their content.
fn multipart(body: &str) -> String {
    let mut out = String::with_capacity(body.len());
    let mut hiding = false;
    let mut in_headers = false;
    for line in body.split_inclusive('\n') {
        let bare = line.trim_end();
        if bare.starts_with("--") {
            hiding = false;
            in_headers = true;
            out.push_str(line);
            continue;
        }
        if in_headers {
            if bare.is_empty() {
                in_headers = false;
            } else if let Some(name) = disposition_name(bare) {
                hiding = secret_field(name);
            }
            out.push_str(line);
            continue;
        }
        if hiding {
            out.push_str(HIDDEN);
            out.push_str("\r\n");
            hiding = false;
            continue;
        }
        out.push_str(line);
    }
    out
}

fn disposition_name(line: &str) -> Option<&str> {
    if !line
        .to_ascii_lowercase()
        .starts_with("content-disposition:")
    {
        return None;
    }
    let start = line.find("name=\"")? + 6;
    let end = line[start..].find('"')? + start;
    Some(&line[start..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_hidden_where_they_travel() {
        let secrets = vec!["hunter2-typed".to_string()];
        let on = Redactor {
            on: true,
            secrets: &secrets,
        };
        assert_eq!(on.header("Authorization", "Bearer abc"), HIDDEN);
        assert_eq!(on.header("Accept", "text/html"), "text/html");
        assert_eq!(
            on.url("http://user:pw@example.test/a?b=1"),
            "http://user:redacted@example.test/a?b=1"
        );
        assert_eq!(
            on.body(
                "user=ann&password=hunter2&next=%2F",
                "application/x-www-form-urlencoded"
            ),
            "user=ann&password=[redacted]&next=%2F"
        );
        assert_eq!(
            on.body(
                r#"{"login":{"user":"ann","passwd":"x"}}"#,
                "application/json"
            ),
            r#"{"login":{"user":"ann","passwd":"[redacted]"}}"#
        );
        let multipart = "--b\r\nContent-Disposition: form-data; name=\"password\"\r\n\r\nhunter2\r\n--b\r\nContent-Disposition: form-data; name=\"user\"\r\n\r\nann\r\n--b--\r\n";
        let shown = on.body(multipart, "multipart/form-data; boundary=b");
        assert!(
            !shown.contains("hunter2") && shown.contains("ann"),
            "{shown}"
        );
        // Typed secrets go whatever the operator chose.
        let off = Redactor {
            on: false,
            secrets: &secrets,
        };
        assert_eq!(off.header("Authorization", "Bearer abc"), "Bearer abc");
        assert_eq!(off.text("q=hunter2-typed"), "q=[redacted]");
        assert!(!secret_field("shipping") && secret_field("PIN") && secret_field("new_password"));
    }
}
