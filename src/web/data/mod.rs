//! Pages into data (`extract=json`): a declarative selector schema run over the HTML with no
//! model (`selectors.rs`), the data a page publishes (JSON-LD, microdata, Open Graph) fitted to a
//! caller's JSON Schema (`structured.rs`), and every answer — a model's too — checked against
//! that schema with a maintained validator (`jsonschema`; remote `$ref`s are never fetched).

pub mod model;
pub mod selectors;
pub mod structured;
pub mod xpath;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use url::Url;

use crate::error::{ToolError, ToolResult};
pub use selectors::SelectorSchema;

/// Largest `schema` accepted, serialized.
const MAX_SCHEMA_BYTES: usize = 32 * 1024;
/// Most validation errors reported.
const MAX_ERRORS: usize = 10;

/// Where extracted data came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DataSource {
    Selectors,
    JsonLd,
    Microdata,
    OpenGraph,
    Model,
    /// A spreadsheet's rows.
    Sheet,
    /// Nothing on the page fitted.
    None,
}

/// What `extract=json` (`mode=json`) read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DataRead {
    /// The data: one object, a list of them (selectors with `base`), or a spreadsheet's sheets
    /// with their rows; null when nothing was found.
    pub data: Value,
    #[serde(rename = "data_source")]
    pub source: DataSource,
    /// Whether `data` satisfies the schema (with a schema).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid: Option<bool>,
    /// What the schema finds wrong with `data`, or why there is none.
    #[serde(default, rename = "data_errors", skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    /// Tokens the model spent (with a model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_tokens: Option<u64>,
}

/// The one `schema` argument the tools take, told apart: a selector schema has `fields` (no
/// JSON Schema keyword), anything else is a JSON Schema. Returns (selectors, schema).
pub fn split_schema(value: Option<Value>) -> (Option<Value>, Option<Value>) {
    match value {
        Some(value) if value.get("fields").is_some() && value.get("properties").is_none() => {
            (Some(value), None)
        }
        other => (None, other),
    }
}

/// What an `extract=json` call asks for, checked before anything is fetched.
pub struct DataRequest {
    pub selectors: Option<SelectorSchema>,
    pub schema: Option<Value>,
    validator: Option<jsonschema::Validator>,
}

impl DataRequest {
    /// Checks `selectors` and `schema` (an object, at most `MAX_SCHEMA_BYTES`, a valid JSON
    /// Schema).
    pub fn new(selectors: Option<&Value>, schema: Option<&Value>) -> ToolResult<Self> {
        let validator = schema.map(compile_schema).transpose()?;
        Ok(Self {
            selectors: selectors.map(SelectorSchema::parse).transpose()?,
            schema: schema.cloned(),
            validator,
        })
    }

    /// The data in `html` without a model: by selectors, else what the page publishes (fitted
    /// to the schema when there is one, all of it when not).
    pub fn from_html(&self, html: &str, base: &Url) -> DataRead {
        if let Some(selectors) = &self.selectors {
            return self.checked(selectors.extract(html, base), DataSource::Selectors, None);
        }
        let found = structured::published(html);
        match &self.schema {
            Some(schema) => match structured::fit(&found, schema) {
                Some((data, source)) => self.checked(data, source, None),
                None => self.nothing(
                    "the page publishes no JSON-LD, microdata or Open Graph data that fits the \
                     schema: pass selectors, or configure a model ([llm])",
                ),
            },
            None => DataRead {
                source: found.first().map_or(DataSource::None, |p| p.source),
                data: Value::Array(found.into_iter().map(|p| p.item).collect()),
                valid: None,
                errors: Vec::new(),
                llm_tokens: None,
            },
        }
    }

    /// Whether the model reads the data: a schema, and no selectors to read it by.
    pub fn wants_model(&self) -> bool {
        self.schema.is_some() && self.selectors.is_none()
    }

    /// A document's data: by selectors over its HTML, else its sheets' rows.
    pub fn from_document(&self, html: &str, base: &Url, rows: Option<Value>) -> DataRead {
        match (&self.selectors, rows) {
            (Some(selectors), _) => {
                self.checked(selectors.extract(html, base), DataSource::Selectors, None)
            }
            (None, Some(rows)) => self.checked(rows, DataSource::Sheet, None),
            (None, None) => self.nothing(
                "a document holds no published data: pass selectors (its HTML has headings, \
                 paragraphs and tables), or configure a model ([llm]) for a schema",
            ),
        }
    }

    /// No data, and why.
    pub fn nothing(&self, why: &str) -> DataRead {
        DataRead {
            data: Value::Null,
            source: DataSource::None,
            valid: self.validator.as_ref().map(|_| false),
            errors: vec![why.to_string()],
            llm_tokens: None,
        }
    }

    /// `data` with the schema's verdict on it.
    pub fn checked(&self, data: Value, source: DataSource, llm_tokens: Option<u64>) -> DataRead {
        let errors = self.errors(&data);
        DataRead {
            valid: self.validator.as_ref().map(|_| errors.is_empty()),
            data,
            source,
            errors,
            llm_tokens,
        }
    }

    /// What the schema finds wrong with `data` (none without a schema).
    pub fn errors(&self, data: &Value) -> Vec<String> {
        let Some(validator) = &self.validator else {
            return Vec::new();
        };
        validator
            .iter_errors(data)
            .take(MAX_ERRORS)
            .map(|error| {
                let at = error.instance_path().to_string();
                if at.is_empty() {
                    error.to_string()
                } else {
                    format!("{at}: {error}")
                }
            })
            .collect()
    }
}

fn compile_schema(schema: &Value) -> ToolResult<jsonschema::Validator> {
    if !schema.is_object() {
        return Err(ToolError::invalid(
            "field `schema` must be a JSON Schema object",
        ));
    }
    let size = serde_json::to_vec(schema)
        .map(|b| b.len())
        .unwrap_or(usize::MAX);
    if size > MAX_SCHEMA_BYTES {
        return Err(ToolError::invalid(format!(
            "field `schema` is {size} bytes; at most {MAX_SCHEMA_BYTES}"
        )));
    }
    jsonschema::validator_for(schema).map_err(|e| {
        ToolError::invalid(format!("field `schema` is not a valid JSON Schema: {e}"))
            .with_hint("write a JSON Schema object, e.g. {\"type\": \"object\", \"properties\": {\"price\": {\"type\": \"number\"}}}")
    })
}
