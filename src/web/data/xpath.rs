//! XPath 1.0 in selector schemas, evaluated by `xpath-eval` over the very tree the CSS
//! selectors walk (dom_query's parse of the page): this module shows that tree as XPath's data
//! model. HTML elements and attributes are read without a namespace, as a browser's
//! `document.evaluate` reads an HTML document (`//div[@class='job']`, not `//h:div`).

use std::cmp::Ordering;
use std::collections::HashMap;

use dom_query::{NodeData, NodeId, NodeRef};
use xpath_eval::{EvaluationContext, ExpandedName, Expr, NodeKind, Value};

/// Every node's place in document order (a preorder walk), which XPath sorts results by.
pub struct Order(HashMap<NodeId, u32>);

impl Order {
    /// The order of `root`'s tree.
    pub fn of(root: NodeRef<'_>) -> Self {
        let mut order = HashMap::new();
        order.insert(root.id, 0);
        for (at, node) in root.descendants_it().enumerate() {
            order.insert(node.id, u32::try_from(at + 1).unwrap_or(u32::MAX));
        }
        Self(order)
    }

    /// No order: for a schema without XPath, which never asks.
    pub fn of_nothing() -> Self {
        Self(HashMap::new())
    }

    fn of_node(&self, node: &NodeRef<'_>) -> u32 {
        self.0.get(&node.id).copied().unwrap_or(u32::MAX)
    }
}

/// A node as XPath sees it: a node of the tree, or one attribute of an element.
#[derive(Clone, Copy)]
pub enum XNode<'a> {
    Node(NodeRef<'a>, &'a Order),
    Attribute(NodeRef<'a>, usize, &'a Order),
}

impl PartialEq for XNode<'_> {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Node(a, _), Self::Node(b, _)) => a.id == b.id,
            (Self::Attribute(a, i, _), Self::Attribute(b, j, _)) => a.id == b.id && i == j,
            _ => false,
        }
    }
}

impl Eq for XNode<'_> {}

/// What an XPath gave: nodes, or a value (`string(…)`, `count(…)`) read as text.
pub enum Found<'a> {
    Nodes(Vec<XNode<'a>>),
    Text(String),
}

/// `expr` evaluated with `node` as its context.
pub fn select<'a>(expr: &Expr, node: XNode<'a>) -> Found<'a> {
    match xpath_eval::evaluate(expr, &EvaluationContext::new(node)) {
        Ok(Value::NodeSet(nodes)) => Found::Nodes(nodes),
        Ok(value) => Found::Text(value.to_xpath_string()),
        Err(_) => Found::Nodes(Vec::new()),
    }
}

impl<'a> XNode<'a> {
    /// The element or text node this is, if it is not an attribute.
    pub fn node(self) -> Option<NodeRef<'a>> {
        match self {
            Self::Node(node, _) => Some(node),
            Self::Attribute(..) => None,
        }
    }

    /// An attribute's name and value.
    pub fn attribute(self) -> Option<(String, String)> {
        let Self::Attribute(element, index, _) = self else {
            return None;
        };
        element
            .query(|node| {
                node.as_element()
                    .and_then(|e| e.attrs.get(index))
                    .map(|a| (a.name.local.to_string(), a.value.to_string()))
            })
            .flatten()
    }

    fn order(self) -> (u32, usize) {
        match self {
            Self::Node(node, order) => (order.of_node(&node), 0),
            Self::Attribute(node, index, order) => (order.of_node(&node), index + 1),
        }
    }
}

/// Whether XPath sees this node of the tree (doctypes and the like it does not).
fn visible(node: &NodeRef<'_>) -> bool {
    node.is_element() || node.is_text() || node.is_comment()
}

impl<'a> xpath_eval::Node<'a> for XNode<'a> {
    fn kind(self) -> NodeKind {
        match self {
            Self::Attribute(..) => NodeKind::Attribute,
            Self::Node(node, _) if node.is_document() || node.is_fragment() => NodeKind::Root,
            Self::Node(node, _) if node.is_element() => NodeKind::Element,
            Self::Node(node, _) if node.is_comment() => NodeKind::Comment,
            Self::Node(..) => NodeKind::Text,
        }
    }

    fn parent(self) -> Option<Self> {
        match self {
            Self::Node(node, order) => node.parent().map(|p| Self::Node(p, order)),
            Self::Attribute(owner, _, order) => Some(Self::Node(owner, order)),
        }
    }

    /// No children once the read is given up: an expression over a large tree then ends at
    /// once instead of burning its core for a caller who is gone.
    fn children(self) -> impl Iterator<Item = Self> + 'a {
        let (node, order) = match self {
            Self::Node(..) if crate::web::work::stopped() => (None, None),
            Self::Node(node, order) => (Some(node), Some(order)),
            Self::Attribute(..) => (None, None),
        };
        node.into_iter()
            .flat_map(|node| node.children_it(false))
            .filter(visible)
            .filter_map(move |child| order.map(|order| Self::Node(child, order)))
    }

    fn attributes(self) -> impl Iterator<Item = Self> + 'a {
        let (node, count, order) = match self {
            Self::Node(node, order) => {
                let count = node
                    .query(|n| n.as_element().map_or(0, |e| e.attrs.len()))
                    .unwrap_or(0);
                (Some(node), count, Some(order))
            }
            Self::Attribute(..) => (None, 0, None),
        };
        (0..count).filter_map(move |index| {
            node.zip(order)
                .map(|(node, order)| Self::Attribute(node, index, order))
        })
    }

    fn namespaces(self) -> impl Iterator<Item = Self> + 'a {
        std::iter::empty()
    }

    fn expanded_name(self) -> Option<ExpandedName> {
        let local_name = match self {
            Self::Node(node, _) => node.node_name()?.to_string(),
            Self::Attribute(..) => self.attribute()?.0,
        };
        Some(ExpandedName {
            namespace_uri: None,
            local_name,
        })
    }

    fn string_value(self) -> String {
        match self {
            Self::Attribute(..) => self.attribute().map(|(_, value)| value).unwrap_or_default(),
            Self::Node(node, _) if node.is_comment() => node
                .query(|n| match &n.data {
                    NodeData::Comment { contents } => contents.to_string(),
                    _ => String::new(),
                })
                .unwrap_or_default(),
            Self::Node(node, _) => node.text().to_string(),
        }
    }

    fn document_order(self, other: Self) -> Ordering {
        self.order().cmp(&other.order())
    }
}

#[cfg(test)]
mod tests {
    use dom_query::Document;

    use super::*;

    #[test]
    fn paths_predicates_attributes_and_functions_read_html() {
        let document = Document::from(
            r#"<html><body><div class="job" id="a"><h2>Rust</h2><a href="/1">x</a></div>
               <div class="ad"><h2>Ad</h2></div><div class="job"><h2>Go</h2></div></body></html>"#,
        );
        let order = Order::of(document.root());
        let root = XNode::Node(document.root(), &order);
        let texts = |path: &str| match select(&xpath_eval::parse(path).unwrap(), root) {
            Found::Nodes(nodes) => nodes
                .into_iter()
                .map(xpath_eval::Node::string_value)
                .collect::<Vec<_>>(),
            Found::Text(text) => vec![text],
        };
        assert_eq!(texts("//div[@class='job']/h2"), ["Rust", "Go"]);
        assert_eq!(texts("//div[contains(@class, 'job')][1]//a/@href"), ["/1"]);
        assert_eq!(texts("count(//div)"), ["3"]);
        assert_eq!(texts("//h2[. = 'Go']/../@class"), ["job"]);
        assert_eq!(texts("(//h2)[last()]"), ["Go"]);
    }
}
