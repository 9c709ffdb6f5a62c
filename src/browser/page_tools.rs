//! WebMCP: the tools a page publishes for agents (`document.modelContext.registerTool`, or a
//! `<form toolname>`), which Chromium exposes with the `WebMCP` feature webpilot launches it
//! with. Listed and called from the page's side (`getTools`, `executeTool`), so only what the
//! page itself offers is reachable. A page's tool is the page's code and its answer the page's
//! words: untrusted, like everything else it says.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::tab::Tab;
use crate::error::{ErrorCode, ToolError, ToolResult};

/// One tool a page publishes.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PageTool {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// The JSON Schema of its input, as the page gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<serde_json::Map<String, Value>>,
    /// The page says the tool only reads.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
}

/// The page's tools as plain data; `null` where the browser has no WebMCP. A page with WebMCP
/// and no tool yet is given until 500 ms after its load for its first.
const LIST: &str = r#"(async () => {
  const context = document.modelContext;
  if (!context || typeof context.getTools !== 'function') return null;
  let tools = await context.getTools();
  if (tools.length === 0) {
    // A page registers its tools as it loads, and registration completes after the call that
    // asks for it: a page still loading, or loaded a moment ago, gets that moment for its
    // first. One that loaded longer ago has none to come, and is not waited for.
    const [navigation] = performance.getEntriesByType('navigation');
    const loaded = navigation && navigation.loadEventEnd > 0 ? navigation.loadEventEnd : null;
    const moment = loaded === null ? 500 : 500 - (performance.now() - loaded);
    if (moment > 0) {
      await new Promise(done => {
        context.addEventListener('toolchange', done, { once: true });
        setTimeout(done, moment);
      });
      tools = await context.getTools();
    }
  }
  return tools.map(t => ({
    name: String(t.name), description: String(t.description || ''),
    input_schema: t.inputSchema && typeof t.inputSchema === 'object' ? t.inputSchema : null,
    read_only: !!(t.annotations && t.annotations.readOnlyHint),
  }));
})()"#;

impl Tab {
    /// The tools the page publishes (none when it publishes none, or the browser has no WebMCP).
    pub async fn page_tools(&self) -> ToolResult<Vec<PageTool>> {
        let listed = self.evaluate_raw(LIST).await?;
        if listed.is_null() {
            return Ok(Vec::new());
        }
        serde_json::from_value(listed)
            .map_err(|e| ToolError::internal(format!("the page's tool list: {e}")))
    }

    /// Calls the page's tool `name` with `input`; its answer (JSON when it is JSON, else text).
    pub async fn call_page_tool(&self, name: &str, input: &Value) -> ToolResult<Value> {
        let script = format!(
            r#"(async () => {{
  const context = document.modelContext;
  if (!context || typeof context.executeTool !== 'function') return {{ missing: [] }};
  const tools = await context.getTools();
  const tool = tools.find(t => t.name === {name});
  if (!tool) return {{ missing: tools.map(t => String(t.name)) }};
  try {{ return {{ output: await context.executeTool(tool, {input}) }}; }}
  catch (e) {{ return {{ failed: String(e && e.message || e) }}; }}
}})()"#,
            name = serde_json::to_string(name).unwrap_or_default(),
            input = serde_json::to_string(input).unwrap_or_else(|_| "{}".into()),
        );
        let answer = self.evaluate_raw(&script).await?;
        if let Some(output) = answer.get("output") {
            let text = output.as_str().unwrap_or_default();
            return Ok(serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.into())));
        }
        if let Some(failed) = answer.get("failed").and_then(Value::as_str) {
            return Err(ToolError::new(
                ErrorCode::Upstream,
                format!("the page's tool {name:?} failed: {failed}"),
            )
            .with_hint(
                "check the input against the tool's input_schema (browser_read mode=tools)",
            ));
        }
        let names: Vec<&str> = answer
            .get("missing")
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        Err(
            ToolError::invalid(format!("the page publishes no tool {name:?}")).with_hint(
                if names.is_empty() {
                    "this page publishes no tools; act on its elements instead".to_string()
                } else {
                    format!("its tools: {}", names.join(", "))
                },
            ),
        )
    }
}
