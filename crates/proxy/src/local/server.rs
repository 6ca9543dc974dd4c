//! What the built-in server is, data only: the [`LocalServer`] trait the application implements and the server
//! `Inner` holds. A leaf: `local.rs` lists and calls it on the children's paths.

use std::sync::Arc;

use futures::future::BoxFuture;
use rmcp::model::{CallToolResponse, Tool};
use serde_json::{Map, Value};

use ad_core::error::Result;

use crate::caller::Caller;

/// What the application serves as the built-in server.
pub trait LocalServer: Send + Sync {
    /// The tools' current definitions (before pins and filters).
    fn tools(&self) -> Result<Vec<Tool>>;
    /// Calls one of them; `Err` for what a proxied call's failure would be.
    fn call(
        &self,
        tool: String,
        args: Option<Map<String, Value>>,
        caller: Caller,
    ) -> BoxFuture<'static, Result<CallToolResponse>>;
}

/// The built-in server, in `Inner`.
#[derive(Clone)]
pub(crate) struct Local {
    pub(crate) name: String,
    pub(crate) server: Arc<dyn LocalServer>,
}
