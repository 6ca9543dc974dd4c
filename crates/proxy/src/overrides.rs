//! A call of an overridden tool on its way to the child: the name the agent called turned back into the tool's own,
//! the fixed values and hidden parameters' defaults merged into the arguments (`ad_registry::overrides`). Overridden
//! tools never take the fast lane, which relays the client's arguments as they came.

use std::borrow::Cow;

use serde_json::{Map, Value};

use ad_core::error::Result;

use crate::state::{Child, Inner};

type Args = Option<Map<String, Value>>;

impl Inner {
    /// The child's own tool name and arguments for a call of `tool` as the agent sees it; a call that passes a
    /// parameter the override fixes or hides is refused, naming it.
    pub(crate) fn inbound<'a>(
        &self,
        child: &Child,
        tool: &'a str,
        args: Args,
    ) -> Result<(Cow<'a, str>, Args)> {
        let Some(applied) = self
            .registry
            .inbound(child.server_id)
            .and_then(|i| i.get(tool).cloned())
        else {
            return Ok((Cow::Borrowed(tool), args));
        };
        let args = applied.arguments(args)?;
        Ok((Cow::Owned(applied.tool), args))
    }

    /// Whether `tool` (as the agent sees it) of `child` has an override: such a call takes the normal path.
    pub(crate) fn overridden(&self, child: &Child, tool: &str) -> bool {
        self.registry
            .inbound(child.server_id)
            .is_some_and(|i| i.get(tool).is_some())
    }
}
