//! The names an action's arguments give, checked and resolved: a server name (before anything is looked up) and the
//! (server, tool) of `call_as` or `server` + `tool`.

use crate::app::App;
use crate::mcp::actions::ArgError;

/// A server name argument, checked before anything is looked up (so a hostile name is blamed on `name`).
pub(super) fn server_name(name: String) -> Result<String, ArgError> {
    name.parse::<crate::model::ServerName>()
        .map_err(|e| ArgError::new("name", e.to_string()))?;
    Ok(name)
}

/// The (server, tool) an action names: `call_as` (`server__tool`, `mcp__server__tool`) or `server` + `tool`.
pub(super) fn target(
    app: &App,
    call_as: Option<String>,
    server: Option<String>,
    tool: Option<String>,
) -> Result<(String, String), ArgError> {
    if let Some(call_as) = call_as {
        return app.proxy.resolve(&call_as).ok_or_else(|| {
            ArgError::new(
                "call_as",
                format!(
                    "`call_as` {:?} names no known server; use `server__tool` with a registered server name",
                    crate::model::truncate_for_message(&call_as)
                ),
            )
        });
    }
    match (server, tool) {
        (Some(s), Some(t)) if !s.is_empty() && !t.is_empty() => Ok((s, t)),
        (Some(s), _) if !s.is_empty() => Err(ArgError::new(
            "tool",
            "give `tool` with `server` (or `call_as` as server__tool)",
        )),
        _ => Err(ArgError::new(
            "call_as",
            "needs `call_as` (server__tool) or both `server` and `tool`",
        )),
    }
}
