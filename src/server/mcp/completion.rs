//! MCP completion (`completion/complete`): values for a prompt's arguments and a resource
//! template's variables, from what the caller's tenant has — its saved profiles for `profile`,
//! the sessions this connection used for `session` — filtered by what was typed so far.

use rmcp::ErrorData;
use rmcp::model::{CompleteRequestParams, CompletionInfo, Reference};

use crate::app::App;
use crate::ids::SessionName;
use crate::tenancy::Tenant;

/// The values offered for the argument being typed; none for arguments of free text (a URL, a
/// question).
pub async fn complete(
    app: &App,
    tenant: &Tenant,
    used: &[SessionName],
    request: &CompleteRequestParams,
) -> Result<CompletionInfo, ErrorData> {
    let argument = request.argument.name.as_str();
    let candidates = match (&request.r#ref, argument) {
        (Reference::Prompt(_), "profile") => {
            app.registry
                .ctx()
                .profiles
                .of(tenant)
                .names()
                .await
                .map_err(|e| ErrorData::internal_error(e.message, None))?
        }
        (Reference::Resource(_), "session") => used.iter().map(ToString::to_string).collect(),
        _ => Vec::new(),
    };
    let typed = request.argument.value.as_str();
    let values: Vec<String> = candidates
        .into_iter()
        .filter(|value| value.starts_with(typed))
        .collect();
    let total = values.len();
    let shown: Vec<String> = values
        .into_iter()
        .take(CompletionInfo::MAX_VALUES)
        .collect();
    let has_more = shown.len() < total;
    CompletionInfo::with_pagination(shown, u32::try_from(total).ok(), has_more)
        .map_err(|e| ErrorData::internal_error(e, None))
}
