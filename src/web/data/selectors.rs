//! Data by a declarative selector schema, no model: `{"base": ".job", "fields": {"title":
//! "h2", "url": {"selector": "a", "attr": "href"}, "tags": {"selector": ".tag", "all": true},
//! "offices": {"selector": ".office", "fields": {…}}}}`. `base` picks the repeated items, each
//! one object; without it the page is one object. A field is a CSS selector (the first match's
//! text), or an object: `selector` (none = the item itself), `attr` (an attribute; `href`, `src`
//! and other URL attributes come back absolute), `all` (every match, a list), `fields` (every
//! match an object of its own fields: a nested list).
//!
//! Any selector may be XPath 1.0 instead, told by how it starts (`/`, `./`, `../`, `(`, or a
//! function such as `normalize-space(`): `//div[@class='job']`, `.//a/@href`,
//! `string(.//span[@class='pay'])`. Both kinds walk the same parsed page and mix freely.
//!
//! Selectors are compiled once, checked before the page is read (a bad one names its field),
//! and the schema is bounded in size; the walk is dom_query's, at DOM speed.

use std::collections::BTreeMap;

use dom_query::{Matcher, NodeRef, Selection};
use serde::Deserialize;
use serde_json::{Map, Value};
use url::Url;

use super::xpath::{self, Found, Order, XNode};
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
    base: Option<Locator>,
    fields: Vec<(String, Field)>,
    /// Some selector is XPath: the page's document order is worked out for it.
    uses_xpath: bool,
}

struct Field {
    locator: Option<Locator>,
    attr: Option<String>,
    take: Take,
}

/// One compiled selector.
enum Locator {
    Css(Matcher),
    XPath(xpath_eval::Expr),
}

/// What a selector found: nodes and attributes, or an XPath's value as text.
enum Hit<'a> {
    Node(XNode<'a>),
    Text(String),
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
        let base = text
            .base
            .as_deref()
            .map(|selector| compile(selector, "selectors.base"))
            .transpose()?;
        let mut schema = Self {
            base,
            fields: compile_fields(text.fields, "selectors.fields", 1, &mut count)?,
            uses_xpath: false,
        };
        schema.uses_xpath =
            matches!(schema.base, Some(Locator::XPath(_))) || any_xpath(&schema.fields);
        Ok(schema)
    }

    /// The data `html` holds by this schema: a list of objects with `base`, else one object.
    pub fn extract(&self, html: &str, base_url: &Url) -> Value {
        let document = crate::web::bounded::document(html).document;
        let order = if self.uses_xpath {
            Order::of(document.root())
        } else {
            Order::of_nothing()
        };
        let root = match &self.base {
            // An absolute XPath starts from the document; CSS from its element.
            Some(Locator::XPath(_)) => document.root(),
            _ => document
                .select("html")
                .nodes()
                .first()
                .copied()
                .unwrap_or(document.root()),
        };
        let root = XNode::Node(root, &order);
        match &self.base {
            Some(base) => Value::Array(
                select(root, base)
                    .into_iter()
                    .take(MAX_ITEMS)
                    .filter_map(|hit| match hit {
                        Hit::Node(item) => Some(object(item, &self.fields, base_url)),
                        Hit::Text(_) => None,
                    })
                    .collect(),
            ),
            None => object(root, &self.fields, base_url),
        }
    }
}

fn any_xpath(fields: &[(String, Field)]) -> bool {
    fields.iter().any(|(_, field)| {
        matches!(field.locator, Some(Locator::XPath(_)))
            || matches!(&field.take, Take::Objects(inner) if any_xpath(inner))
    })
}

fn compile(selector: &str, path: &str) -> ToolResult<Locator> {
    if looks_like_xpath(selector) {
        return xpath_eval::parse(selector.trim())
            .map(Locator::XPath)
            .map_err(|e| {
                ToolError::invalid(format!("`{path}` is not an XPath ({selector:?}): {e}"))
                    .with_hint("write XPath 1.0 (`.//h2`, `./a/@href`), or a CSS selector")
            });
    }
    Matcher::new(selector).map(Locator::Css).map_err(|e| {
        ToolError::invalid(format!(
            "`{path}` is not a CSS selector ({selector:?}): {e:?}"
        ))
        .with_hint(
            "use CSS selectors as document.querySelectorAll takes them, or XPath from `/` or `./`",
        )
    })
}

/// XPath starts where CSS cannot: at a slash, a dot-slash, a parenthesis or a function call.
fn looks_like_xpath(selector: &str) -> bool {
    let s = selector.trim_start();
    let function = s.split_once('(').is_some_and(|(name, _)| {
        !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '-')
    });
    s.starts_with('/')
        || s.starts_with("./")
        || s.starts_with("../")
        || s.starts_with('(')
        || function
}

/// What `locator` finds from `item` (the item itself when there is no selector).
fn select<'a>(item: XNode<'a>, locator: &Locator) -> Vec<Hit<'a>> {
    match (locator, item) {
        (Locator::XPath(expr), item) => match xpath::select(expr, item) {
            Found::Nodes(nodes) => nodes.into_iter().map(Hit::Node).collect(),
            Found::Text(text) => vec![Hit::Text(text)],
        },
        (Locator::Css(matcher), XNode::Node(node, order)) => Selection::from(node)
            .select_matcher(matcher)
            .nodes()
            .iter()
            .map(|found| Hit::Node(XNode::Node(*found, order)))
            .collect(),
        (Locator::Css(_), XNode::Attribute(..)) => Vec::new(),
    }
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
                FieldText::Selector(selector) => Field {
                    locator: Some(compile(&selector, &here)?),
                    attr: None,
                    take: Take::First,
                },
                FieldText::Detailed {
                    selector,
                    attr,
                    all,
                    fields,
                } => Field {
                    locator: selector
                        .as_deref()
                        .map(|selector| compile(selector, &here))
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

fn object(item: XNode<'_>, fields: &[(String, Field)], base: &Url) -> Value {
    let mut object = Map::new();
    for (name, field) in fields {
        object.insert(name.clone(), value(item, field, base));
    }
    Value::Object(object)
}

fn value(item: XNode<'_>, field: &Field, base: &Url) -> Value {
    let hits = match &field.locator {
        Some(locator) => select(item, locator),
        None => vec![Hit::Node(item)],
    };
    let mut each = hits.into_iter().take(MAX_ITEMS);
    let attr = field.attr.as_deref();
    match &field.take {
        Take::First => each
            .next()
            .and_then(|one| read(one, attr, base))
            .map(Value::String)
            .unwrap_or(Value::Null),
        Take::All => Value::Array(
            each.filter_map(|one| read(one, attr, base))
                .map(Value::String)
                .collect(),
        ),
        Take::Objects(inner) => Value::Array(
            each.filter_map(|one| match one {
                Hit::Node(node) => Some(object(node, inner, base)),
                Hit::Text(_) => None,
            })
            .collect(),
        ),
    }
}

/// One hit's text (whitespace collapsed) or attribute (absolute for URL attributes); an
/// attribute an XPath picked is read as `attr` would read it.
fn read(hit: Hit<'_>, attr: Option<&str>, base: &Url) -> Option<String> {
    let node = match hit {
        Hit::Text(text) => return Some(crate::web::extract::normalize_whitespace(&text)),
        Hit::Node(node) => node,
    };
    if let Some((name, value)) = node.attribute() {
        return Some(attribute_value(&name, value, base));
    }
    let element: NodeRef<'_> = node.node()?;
    match attr {
        None => Some(crate::web::extract::normalize_whitespace(&element.text())),
        Some(name) => Some(attribute_value(name, element.attr(name)?.to_string(), base)),
    }
}

fn attribute_value(name: &str, value: String, base: &Url) -> String {
    if URL_ATTRIBUTES.contains(&name.to_ascii_lowercase().as_str()) {
        base.join(value.trim()).map(String::from).unwrap_or(value)
    } else {
        value
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

    /// The job cards of `PAGE` by CSS: every kind of field.
    fn css_jobs() -> SelectorSchema {
        SelectorSchema::parse(&json!({
            "base": ".job",
            "fields": {
                "title": "h2",
                "url": {"selector": "a", "attr": "href"},
                "tags": {"selector": ".tag", "all": true},
                "offices": {"selector": ".office", "fields": {"city": "b", "country": "i"}},
                "salary": ".pay"
            }
        }))
        .unwrap()
    }

    #[test]
    fn items_fields_attributes_lists_and_nested_objects() {
        let schema = css_jobs();
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
        let xpath = SelectorSchema::parse(&json!({"base": "//div[", "fields": {"a": "b"}}))
            .err()
            .unwrap();
        assert!(
            xpath.message.contains("selectors.base") && xpath.message.contains("XPath"),
            "{}",
            xpath.message
        );
    }

    #[test]
    fn xpath_reads_what_css_reads_and_mixes_with_it() {
        let css = css_jobs();
        let xpath = SelectorSchema::parse(&json!({
            "base": "//div[contains(concat(' ', @class, ' '), ' job ')]",
            "fields": {
                "title": "normalize-space(./h2)",
                "url": ".//a/@href",
                "tags": {"selector": ".//span[@class='tag']", "all": true},
                "offices": {"selector": ".//li[@class='office']", "fields": {"city": "./b", "country": "i"}},
                "salary": "./p[@class='pay']"
            }
        }))
        .unwrap();
        let base = Url::parse("https://jobs.example/list").unwrap();
        assert_eq!(xpath.extract(PAGE, &base), css.extract(PAGE, &base));
        let counted =
            SelectorSchema::parse(&json!({"fields": {"jobs": "count(//div[@class='job'])"}}))
                .unwrap();
        assert_eq!(counted.extract(PAGE, &base), json!({"jobs": "2"}));
    }
}
