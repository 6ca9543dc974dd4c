//! The skills extension (SEP-2640) on the aggregated front: declared while some running child declares it, skills
//! of every such child listed with namespaced URIs, `skills/get` and `resources/directory/read` routed by URI
//! (`proxy/skills.rs`). The per-server endpoints pass the child's answers on (`single.rs`).

use rmcp::ErrorData as McpError;
use rmcp::model::{
    GetSkillRequestParams, GetSkillResult, ListSkillsResult, ReadResourceDirectoryRequestParams,
    ReadResourceDirectoryResult, SKILLS_EXTENSION_ID, ServerCapabilities,
};

use crate::app::App;
use crate::error::Error;

/// Declares the extension (with `directoryRead` when a child offers it) while some running child declares it.
pub(super) fn declare(app: &App, caps: &mut ServerCapabilities) {
    if let Some(cap) = app.proxy.skills_capability()
        && let Ok(serde_json::Value::Object(settings)) = serde_json::to_value(cap)
    {
        caps.extensions
            .get_or_insert_with(Default::default)
            .insert(SKILLS_EXTENSION_ID.to_owned(), settings);
    }
}

/// A proxy failure as the skills methods answer it: the child's own error as it sent it, an unknown URI as invalid
/// params (SEP-2640), a file that failed verification or anything else as an internal error naming it.
pub(super) fn error(e: Error) -> McpError {
    match e {
        Error::Child { error, .. } => *error,
        e @ (Error::NotFound { .. } | Error::Invalid { .. }) => {
            McpError::invalid_params(e.to_string(), None)
        }
        e => McpError::internal_error(e.to_string(), None),
    }
}

pub(super) async fn list(app: &App) -> ListSkillsResult {
    ListSkillsResult::with_all_items(Box::pin(app.proxy.list_skills()).await)
}

pub(super) async fn get(
    app: &App,
    request: GetSkillRequestParams,
) -> Result<GetSkillResult, McpError> {
    Box::pin(app.proxy.get_skill(&request.uri))
        .await
        .map_err(error)
}

pub(super) async fn directory(
    app: &App,
    request: ReadResourceDirectoryRequestParams,
) -> Result<ReadResourceDirectoryResult, McpError> {
    Box::pin(app.proxy.read_directory(request))
        .await
        .map_err(error)
}
