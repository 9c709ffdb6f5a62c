//! The data a page publishes about itself — JSON-LD, microdata, Open Graph — and that data
//! fitted to a caller's JSON Schema without a model: each schema property is looked for by name
//! (case, `_` and `-` ignored) in a published item and one level inside it (`offers.price`), and
//! coerced to the type the schema asks for (`"€1,299.00"` → 1299 for a number, `{"name": …}` →
//! its name for a string). The item filling most properties wins; for an array schema, every
//! item of that item's type.

use dom_query::NodeRef;
use serde_json::{Map, Value};

use super::DataSource;

/// Deepest nesting walked when published items are gathered (`@graph`, `itemListElement`).
const MAX_DEPTH: usize = 6;
/// Most items gathered from one page.
const MAX_ITEMS: usize = 2_000;

/// One item a page publishes, and how.
pub struct Published {
    pub source: DataSource,
    pub item: Value,
}

/// Every item `html` publishes: JSON-LD objects (graphs and nested objects flattened, outer
/// first), microdata items, and the Open Graph properties as one object.
pub fn published(html: &str) -> Vec<Published> {
    let document = crate::web::bounded::document(html).document;
    let mut found = Vec::new();
    for script in document
        .select(r#"script[type="application/ld+json"]"#)
        .iter()
    {
        let text = script.text();
        let text = text
            .trim()
            .trim_start_matches("<!--")
            .trim_end_matches("-->");
        if let Ok(value) = serde_json::from_str::<Value>(text) {
            gather(&value, 0, &mut found);
        }
    }
    for node in document.select("[itemscope]:not([itemprop])").nodes() {
        let item = microdata_item(node);
        found.push(Published {
            source: DataSource::Microdata,
            item,
        });
    }
    let mut graph = Map::new();
    for meta in document.select(r#"meta[property^="og:"]"#).iter() {
        if let (Some(property), Some(content)) = (meta.attr("property"), meta.attr("content")) {
            let key = property.trim_start_matches("og:").replace(':', "_");
            graph
                .entry(key)
                .or_insert(Value::String(content.to_string()));
        }
    }
    if !graph.is_empty() {
        found.push(Published {
            source: DataSource::OpenGraph,
            item: Value::Object(graph),
        });
    }
    found.truncate(MAX_ITEMS);
    found
}

fn gather(value: &Value, depth: usize, found: &mut Vec<Published>) {
    if depth > MAX_DEPTH || found.len() >= MAX_ITEMS {
        return;
    }
    match value {
        Value::Array(items) => items.iter().for_each(|item| gather(item, depth + 1, found)),
        Value::Object(object) => {
            if let Some(graph) = object.get("@graph") {
                gather(graph, depth + 1, found);
            }
            if object.keys().any(|k| k != "@graph" && k != "@context") {
                found.push(Published {
                    source: DataSource::JsonLd,
                    item: value.clone(),
                });
            }
            for (key, inner) in object {
                if key != "@graph" && (inner.is_object() || inner.is_array()) {
                    gather(inner, depth + 1, found);
                }
            }
        }
        _ => {}
    }
}

/// A microdata item: its `itemprop`s down to the next item, `@type` from `itemtype`.
fn microdata_item(node: &NodeRef) -> Value {
    let mut object = Map::new();
    if let Some(kind) = node.attr("itemtype") {
        let name = kind.rsplit('/').next().unwrap_or_default().to_string();
        object.insert("@type".into(), Value::String(name));
    }
    properties(node, &mut object, 0);
    Value::Object(object)
}

fn properties(node: &NodeRef, object: &mut Map<String, Value>, depth: usize) {
    if depth > 40 {
        return;
    }
    for child in node.children().into_iter().filter(|c| c.is_element()) {
        match child.attr("itemprop") {
            Some(names) => {
                let value = if child.has_attr("itemscope") {
                    microdata_item(&child)
                } else {
                    Value::String(microdata_value(&child))
                };
                for name in names.split_whitespace() {
                    object.entry(name.to_string()).or_insert(value.clone());
                }
            }
            None if child.has_attr("itemscope") => {}
            None => properties(&child, object, depth + 1),
        }
    }
}

fn microdata_value(node: &NodeRef) -> String {
    ["content", "href", "src", "datetime", "value"]
        .iter()
        .find_map(|attr| node.attr(attr))
        .map(|v| v.to_string())
        .unwrap_or_else(|| crate::web::extract::normalize_whitespace(&node.text()))
}

/// The published items fitted to `schema`: the best item for an object schema, every item of
/// the best one's type for an array schema; `None` when no item fills any property.
pub fn fit(found: &[Published], schema: &Value) -> Option<(Value, DataSource)> {
    let list = schema.get("type").and_then(Value::as_str) == Some("array");
    let wanted = if list {
        schema.get("items").unwrap_or(&Value::Null)
    } else {
        schema
    };
    let scored: Vec<(usize, Value, &Published)> = found
        .iter()
        .map(|published| {
            let (value, score) = fit_object(&published.item, wanted);
            (score, value, published)
        })
        .filter(|(score, _, _)| *score > 0)
        .collect();
    let best = scored.iter().max_by_key(|(score, _, _)| *score)?;
    let source = best.2.source;
    if !list {
        return Some((best.1.clone(), source));
    }
    let kind = best.2.item.get("@type");
    let items = scored
        .iter()
        .filter(|(score, _, p)| p.item.get("@type") == kind && *score * 2 >= best.0)
        .map(|(_, value, _)| value.clone())
        .collect();
    Some((Value::Array(items), source))
}

/// `item` shaped by an object schema's properties (those it has: a missing one is left out, for
/// the schema's `required` to judge), and how many it filled.
fn fit_object(item: &Value, schema: &Value) -> (Value, usize) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return (item.clone(), usize::from(item.is_object()));
    };
    let mut object = Map::new();
    for (name, property) in properties {
        let value = lookup(item, name)
            .map(|found| coerce(found, property))
            .unwrap_or(Value::Null);
        if !value.is_null() {
            object.insert(name.clone(), value);
        }
    }
    let filled = object.len();
    (Value::Object(object), filled)
}

/// A property by name in `item`, else in the objects it holds (the first of a list); a key
/// that only ends with the name (`priceCurrency` for `currency`) counts after every exact one.
fn lookup<'a>(item: &'a Value, name: &str) -> Option<&'a Value> {
    let wanted = simple(name);
    let exact = |key: &str| simple(key) == wanted;
    let suffix = |key: &str| wanted.len() >= 4 && simple(key).ends_with(&wanted);
    find(item, &exact).or_else(|| find(item, &suffix))
}

/// A value whose key `matches`, in `item` or one level inside it.
fn find<'a>(item: &'a Value, matches: &dyn Fn(&str) -> bool) -> Option<&'a Value> {
    let object = item.as_object()?;
    if let Some((_, value)) = object.iter().find(|(key, _)| matches(key)) {
        return Some(value);
    }
    object.values().find_map(|inner| {
        let inner = match inner {
            Value::Array(list) => list.first()?,
            other => other,
        };
        inner
            .as_object()?
            .iter()
            .find(|(key, _)| matches(key))
            .map(|(_, value)| value)
    })
}

fn simple(name: &str) -> String {
    name.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// `value` as the type `schema` asks for, or null when it cannot be.
fn coerce(value: &Value, schema: &Value) -> Value {
    let kind = schema.get("type").and_then(Value::as_str).unwrap_or("");
    match (kind, value) {
        ("array", Value::Array(list)) => {
            let items = schema.get("items").unwrap_or(&Value::Null);
            Value::Array(list.iter().map(|v| coerce(v, items)).collect())
        }
        ("array", single) => Value::Array(vec![coerce(
            single,
            schema.get("items").unwrap_or(&Value::Null),
        )]),
        (_, Value::Array(list)) if !kind.is_empty() => list
            .first()
            .map(|v| coerce(v, schema))
            .unwrap_or(Value::Null),
        ("object", item) => fit_object(item, schema).0,
        ("string", Value::String(_)) => value.clone(),
        ("string", Value::Number(n)) => Value::String(n.to_string()),
        ("string", Value::Object(object)) => ["name", "@value", "url", "@id"]
            .iter()
            .find_map(|key| object.get(*key))
            .map(|inner| coerce(inner, schema))
            .unwrap_or(Value::Null),
        ("number" | "integer", Value::Number(_)) => value.clone(),
        ("number" | "integer", Value::String(text)) => number(text, kind == "integer"),
        ("number" | "integer", Value::Object(object)) => ["value", "price", "@value"]
            .iter()
            .find_map(|key| object.get(*key))
            .map(|inner| coerce(inner, schema))
            .unwrap_or(Value::Null),
        ("boolean", Value::Bool(_)) => value.clone(),
        ("boolean", Value::String(text)) => match text.to_ascii_lowercase().as_str() {
            "true" | "yes" | "1" => Value::Bool(true),
            "false" | "no" | "0" => Value::Bool(false),
            _ => Value::Null,
        },
        ("", other) => other.clone(),
        _ => Value::Null,
    }
}

/// A number written for people: currency signs, spaces and thousands separators dropped.
fn number(text: &str, integer: bool) -> Value {
    let kept: String = text
        .chars()
        .filter(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | ','))
        .collect();
    // "1,299.00" and "1.299,00": the last separator is the decimal one when two kinds appear.
    let normal = match (kept.rfind('.'), kept.rfind(',')) {
        (Some(dot), Some(comma)) if comma > dot => kept.replace('.', "").replace(',', "."),
        (_, Some(_)) if kept.contains('.') => kept.replace(',', ""),
        (None, Some(comma)) if kept.len() - comma == 3 => kept.replace(',', "."),
        _ => kept.replace(',', ""),
    };
    match normal.parse::<f64>() {
        Ok(n) if integer && n.fract() == 0.0 => Value::from(n as i64),
        Ok(n) if !integer => serde_json::Number::from_f64(n)
            .map(Value::Number)
            .unwrap_or(Value::Null),
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const PRODUCT: &str = r#"<html><head>
        <meta property="og:title" content="Kettle (Open Graph)">
        <script type="application/ld+json">{"@context": "https://schema.org", "@graph": [
          {"@type": "BreadcrumbList", "name": "Home > Kitchen"},
          {"@type": "Product", "name": "Steel kettle", "sku": "K-1",
           "brand": {"@type": "Brand", "name": "Acme"},
           "offers": {"@type": "Offer", "price": "1,299.00", "priceCurrency": "EUR",
                      "availability": "https://schema.org/InStock"}}]}</script>
        </head><body><div itemscope itemtype="https://schema.org/Person">
        <span itemprop="name">Ada</span><a itemprop="url" href="/ada">x</a></div></body></html>"#;

    #[test]
    fn a_product_fitted_from_json_ld() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string"}, "brand": {"type": "string"},
            "price": {"type": "number"}, "price_currency": {"type": "string"},
            "in_stock": {"type": "boolean"}}});
        let (data, source) = fit(&published(PRODUCT), &schema).unwrap();
        assert_eq!(source, DataSource::JsonLd);
        assert_eq!(
            data,
            json!({"name": "Steel kettle", "brand": "Acme", "price": 1299.0,
                   "price_currency": "EUR"})
        );
    }

    #[test]
    fn microdata_and_open_graph_are_items_too() {
        let found = published(PRODUCT);
        let person = found
            .iter()
            .find(|p| p.source == DataSource::Microdata)
            .unwrap();
        assert_eq!(
            person.item,
            json!({"@type": "Person", "name": "Ada", "url": "/ada"})
        );
        assert!(found.iter().any(|p| p.source == DataSource::OpenGraph
            && p.item == json!({"title": "Kettle (Open Graph)"})));
    }

    #[test]
    fn numbers_as_people_write_them() {
        assert_eq!(number("€1.299,50", false), json!(1299.5));
        assert_eq!(number("$1,299", true), json!(1299));
        assert_eq!(number("12,50", false), json!(12.5));
        assert_eq!(number("n/a", false), Value::Null);
    }
}
