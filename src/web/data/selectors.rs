//! Data by a declarative selector schema, no model: `{"base": ".job", "fields": {"title":
//! "h2", "url": {"selector": "a", "attr": "href"}, "tags": {"selector": ".tag", "all": true},
//! "offices": {"selector": ".office", "fields": {…}}}}`. `base` picks the repeated items, each
//! one object; without it the page is one object. A field is a CSS selector (the first match's
//! text), or an object: `selector` (none = the item itself), `attr` (an attribute; `href`, `src`
//! and other URL attributes come back absolute), `all` (every match, a list), `fields` (every
//! match an object of its own fields: a nested list).
//!
//! Selectors are compiled once, checked before the page is read (a bad one names its field),
//! and the schema is bounded in size; the walk is dom_query's, at DOM speed.

use std::collections::BTreeMap;

use dom_query::{Document, Matcher, Selection};
use serde::Deserialize;
use serde_json::{Map, Value};
use url::Url;

use crate::error::{ToolError, ToolResult};

/// Most fields in one selector schema, counting nested ones.
const MAX_FIELDS: usize = 200;
/// Deepest nesting of `fields` in `fields`.
const MAX_DEPTH: usize = 5;
/// Most items one `base` or list field returns.
const MAX_ITEMS: usize = 10_000;

/// Attributes whose values are URLs, returned absolute.
const URL_ATTRIBUTES: &[&str] = &["href", "src", "action", "poster", "data-src", "cite"];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SchemaText {
    base: Option<String>,
    fields: BTreeMap<String, FieldText>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum FieldText {
    Selector(String),
    Detailed {
        #[serde(default)]
        selector: Option<String>,
        #[serde(default)]
        attr: Option<String>,
        #[serde(default)]
        all: bool,
        #[serde(default)]
        fields: Option<BTreeMap<String, FieldText>>,
    },
}

/// A selector schema, compiled.
pub struct SelectorSchema {
    base: Option<Matcher>,
    fields: Vec<(String, Field)>,
}

struct Field {
    matcher: Option<Matcher>,
    attr: Option<String>,
    take: Take,
}

enum Take {
    First,
    All,
    Objects(Vec<(String, Field)>),
}

impl SelectorSchema {
    /// Compiles `value` (the `selectors` argument), naming the field of any error.
    pub fn parse(value: &Value) -> ToolResult<Self> {
        let text: SchemaText = serde_json::from_value(value.clone()).map_err(|e| {
            ToolError::invalid(format!(
                "field `selectors` is not a selector schema ({e}): expected {{\"base\"?: CSS, \"fields\": {{name: CSS | {{selector, attr, all, fields}}}}}}"
            ))
        })?;
        let mut count = 0;
        Ok(Self {
            base: text
                .base
                .as_deref()
                .map(|css| compile(css, "selectors.base"))
                .transpose()?,
            fields: compile_fields(text.fields, "selectors.fields", 1, &mut count)?,
        })
    }

    /// The data `html` holds by this schema: a list of objects with `base`, else one object.
    pub fn extract(&self, html: &str, base_url: &Url) -> Value {
        let document = Document::from(html);
        let root = document.select("html");
        match &self.base {
            Some(base) => Value::Array(
                root.select_matcher(base)
                    .iter()
                    .take(MAX_ITEMS)
                    .map(|item| object(&item, &self.fields, base_url))
                    .collect(),
            ),
            None => object(&root, &self.fields, base_url),
        }
    }
}

fn compile(css: &str, path: &str) -> ToolResult<Matcher> {
    if looks_like_xpath(css) {
        return Err(ToolError::invalid(format!(
            "`{path}` looks like XPath ({css:?}); selectors are CSS"
        ))
        .with_hint("write it as a CSS selector, e.g. `div.job > h2` or `a[href]`"));
    }
    Matcher::new(css).map_err(|e| {
        ToolError::invalid(format!("`{path}` is not a CSS selector ({css:?}): {e:?}"))
            .with_hint("use CSS selectors as document.querySelectorAll takes them")
    })
}

fn looks_like_xpath(selector: &str) -> bool {
    let s = selector.trim_start();
    s.starts_with('/') || s.starts_with("./") || s.starts_with("(/")
}

fn compile_fields(
    fields: BTreeMap<String, FieldText>,
    path: &str,
    depth: usize,
    count: &mut usize,
) -> ToolResult<Vec<(String, Field)>> {
    if depth > MAX_DEPTH {
        return Err(ToolError::invalid(format!(
            "`{path}` nests fields deeper than {MAX_DEPTH} levels"
        )));
    }
    fields
        .into_iter()
        .map(|(name, text)| {
            *count += 1;
            if *count > MAX_FIELDS {
                return Err(ToolError::invalid(format!(
                    "field `selectors` has more than {MAX_FIELDS} fields"
                )));
            }
            let here = format!("{path}.{name}");
            let field = match text {
                FieldText::Selector(css) => Field {
                    matcher: Some(compile(&css, &here)?),
                    attr: None,
                    take: Take::First,
                },
                FieldText::Detailed {
                    selector,
                    attr,
                    all,
                    fields,
                } => Field {
                    matcher: selector
                        .as_deref()
                        .map(|css| compile(css, &here))
                        .transpose()?,
                    attr,
                    take: match fields {
                        Some(inner) => {
                            Take::Objects(compile_fields(inner, &here, depth + 1, count)?)
                        }
                        None if all => Take::All,
                        None => Take::First,
                    },
                },
            };
            Ok((name, field))
        })
        .collect()
}

fn object(item: &Selection, fields: &[(String, Field)], base: &Url) -> Value {
    let mut object = Map::new();
    for (name, field) in fields {
        object.insert(name.clone(), value(item, field, base));
    }
    Value::Object(object)
}

fn value(item: &Selection, field: &Field, base: &Url) -> Value {
    let matches = match &field.matcher {
        Some(matcher) => item.select_matcher(matcher),
        None => item.clone(),
    };
    let mut each = matches.iter().take(MAX_ITEMS);
    match &field.take {
        Take::First => each
            .next()
            .and_then(|one| read(&one, field.attr.as_deref(), base))
            .map(Value::String)
            .unwrap_or(Value::Null),
        Take::All => Value::Array(
            each.filter_map(|one| read(&one, field.attr.as_deref(), base))
                .map(Value::String)
                .collect(),
        ),
        Take::Objects(inner) => Value::Array(each.map(|one| object(&one, inner, base)).collect()),
    }
}

/// One element's text (whitespace collapsed) or attribute (absolute for URL attributes).
fn read(element: &Selection, attr: Option<&str>, base: &Url) -> Option<String> {
    match attr {
        None => Some(crate::web::extract::normalize_whitespace(&element.text())),
        Some(name) => {
            let value = element.attr(name)?.to_string();
            if URL_ATTRIBUTES.contains(&name.to_ascii_lowercase().as_str()) {
                Some(base.join(value.trim()).map(String::from).unwrap_or(value))
            } else {
                Some(value)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const PAGE: &str = r#"<html><body>
        <div class="job"><h2> Rust   engineer </h2><a href="/jobs/1">Apply</a>
          <span class="tag">remote</span><span class="tag">senior</span>
          <ul><li class="office"><b>Berlin</b> <i>DE</i></li><li class="office"><b>Paris</b></li></ul></div>
        <div class="job"><h2>Designer</h2><a href="https://other.example/d">Apply</a></div>
        <p class="pay">n/a</p>
      </body></html>"#;

    #[test]
    fn items_fields_attributes_lists_and_nested_objects() {
        let schema = SelectorSchema::parse(&json!({
            "base": ".job",
            "fields": {
                "title": "h2",
                "url": {"selector": "a", "attr": "href"},
                "tags": {"selector": ".tag", "all": true},
                "offices": {"selector": ".office", "fields": {"city": "b", "country": "i"}},
                "salary": ".pay"
            }
        }))
        .unwrap();
        let base = Url::parse("https://jobs.example/list").unwrap();
        assert_eq!(
            schema.extract(PAGE, &base),
            json!([
                {"title": "Rust engineer", "url": "https://jobs.example/jobs/1",
                 "tags": ["remote", "senior"], "salary": null,
                 "offices": [{"city": "Berlin", "country": "DE"}, {"city": "Paris", "country": null}]},
                {"title": "Designer", "url": "https://other.example/d", "tags": [], "salary": null,
                 "offices": []}
            ])
        );
    }

    #[test]
    fn without_base_the_page_is_one_object() {
        let schema =
            SelectorSchema::parse(&json!({"fields": {"pay": ".pay", "first": "h2"}})).unwrap();
        let base = Url::parse("https://jobs.example/").unwrap();
        assert_eq!(
            schema.extract(PAGE, &base),
            json!({"pay": "n/a", "first": "Rust engineer"})
        );
    }

    #[test]
    fn bad_selectors_name_their_field() {
        let error =
            SelectorSchema::parse(&json!({"fields": {"a": {"selector": "div[", "all": true}}}))
                .err()
                .unwrap();
        assert!(
            error.message.contains("selectors.fields.a"),
            "{}",
            error.message
        );
        let xpath = SelectorSchema::parse(&json!({"base": "//div", "fields": {"a": "b"}}))
            .err()
            .unwrap();
        assert!(xpath.message.contains("XPath"), "{}", xpath.message);
    }
}
