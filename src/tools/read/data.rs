//! `browser_read` `mode=json`: the rendered page (or the part asked for) into data, as
//! `open_web_page` reads a fetched one — by a selector schema over the live DOM's HTML, by the
//! configured model over its readable text and numbered elements for a JSON Schema (links and
//! buttons answered by ref), or from what the page publishes.

use serde_json::Value;
use url::Url;

use crate::browser::{Form, Scope as Part, Tab};
use crate::error::{ToolError, ToolResult};
use crate::tenancy::Tenant;
use crate::tools::Ctx;
use crate::web::data::{self, DataRead, DataRequest};
use crate::web::work;

pub(super) async fn read(
    ctx: &Ctx,
    tenant: &Tenant,
    tab: &mut Tab,
    part: &Part,
    schema: Option<Value>,
) -> ToolResult<DataRead> {
    let (selectors, schema) = data::split_schema(schema);
    let request = DataRequest::new(selectors.as_ref(), schema.as_ref())?;
    let url = Url::parse(&tab.url().await)
        .or_else(|_| Url::parse("about:blank"))
        .map_err(|e| ToolError::internal(format!("the tab's URL: {e}")))?;
    if let Some(model) = ctx.web.model_for(tenant).filter(|_| request.wants_model()) {
        let (text, _) = super::readable_markdown(ctx, tab, part, false).await?;
        let selector = match part {
            Part::Selector(css) => Some(css.as_str()),
            _ => None,
        };
        let elements = tab.elements(selector).await?.lines().join("\n");
        let read = data::model::extract(&model, &request, &url, &text, Some(&elements));
        return Ok(read.await);
    }
    // What a person sees of it: concealed links and text are no data.
    let html = tab.content(part, Form::Shown).await?;
    let limit = super::read_limit(ctx);
    work::off_thread("reading the page's data", limit, move || {
        request.from_html(&html, &url)
    })
    .await
}
