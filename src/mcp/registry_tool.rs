//! The built-in `registry` tool: its definition (schema from the typed actions in `actions.rs`) and one match arm per
//! action calling the domain layer. Argument problems and failed actions are `isError: true` results (SEP-1303).
//!
//! Action and argument names are agent-discover's (TypeScript original), so agents switch without changes. The
//! definition is in `tooldef`, the match in `dispatch`, the handlers by family in `servers` and `installs`, argument
//! names resolved in `names`, results and failures rendered in `reply`.

mod dispatch;
mod installs;
mod names;
mod profiles;
mod reply;
mod servers;
mod tooldef;

pub use dispatch::call;
pub use tooldef::{NAME, actions, definition, definition_with};
